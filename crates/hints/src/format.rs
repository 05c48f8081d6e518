//! The hint files: names, header and records, and the scan that checks a file on open.
//!
//! One series of files per target host, in `hints_directory`, named as Cassandra names its
//! own: `<target host id>-<sequence>-<version>.hints`, where the sequence is the file's
//! creation time in milliseconds since the epoch, made strictly greater than any earlier
//! file's of this store, so that names order files as they were written.
//!
//! All integers big-endian. A file is a header, then records:
//!
//! ```text
//! Header (HEADER_BYTES = 33):
//! u32   magic 0x48_4E_54_53 ("HNTS")
//! u8    format version = 1
//! 16    target host id (UUID bytes)
//! i64   file creation time, ms since the epoch
//! u32   CRC32C of the 29 bytes above
//!
//! Record (RECORD_OVERHEAD_BYTES = 8, then the body):
//! u32   body length n, BODY_HEAD_BYTES ≤ n ≤ MAX_RECORD_BODY_BYTES
//! u32   CRC32C of the 4 length bytes, then of the body
//! n     body:
//!         i64  hint creation time, ms since the epoch
//!         u8   flags: bit 0 = the keyspace's durable_writes; other bits must be 0
//!         ..   the mutation, `mutation::encode_mutation` (its own version byte first)
//! ```
//!
//! A record is appended whole or not at all as far as a reader cares: a torn tail (a record
//! cut short by a crash) or a damaged one fails its length or checksum, and the scan on open
//! truncates the file at the end of the last good record.

use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use locator::HostId;

/// The header's magic number ("HNTS").
const MAGIC: u32 = 0x484E_5453;
/// The file format this code writes and reads.
pub(crate) const FORMAT_VERSION: u8 = 1;
/// Bytes of a file's header.
pub(crate) const HEADER_BYTES: u64 = 33;
/// Bytes of a record before its body (length, checksum).
pub(crate) const RECORD_OVERHEAD_BYTES: usize = 8;
/// Bytes of a body before the mutation (creation time, flags).
const BODY_HEAD_BYTES: usize = 9;
/// The largest body a reader accepts: a length beyond it is damage, not a hint (Cassandra's
/// largest mutation is half a 32 MiB commit log segment; this leaves room above it).
pub(crate) const MAX_RECORD_BODY_BYTES: usize = 256 << 20;
/// The file name's suffix.
const SUFFIX: &str = ".hints";

/// The name of `target`'s file number `sequence`.
pub(crate) fn file_name(target: HostId, sequence: i64) -> String {
    format!(
        "{}-{sequence}-{FORMAT_VERSION}{SUFFIX}",
        target.0.hyphenated()
    )
}

/// The target and sequence a file name holds, if it is a hint file's name.
pub(crate) fn parse_file_name(name: &str) -> Option<(HostId, i64)> {
    let stem = name.strip_suffix(SUFFIX)?;
    if stem.len() < 37 || !stem.is_char_boundary(36) {
        return None;
    }
    let (host, rest) = stem.split_at(36);
    let host = uuid::Uuid::parse_str(host).ok()?;
    let (sequence, version) = rest.strip_prefix('-')?.split_once('-')?;
    if version != FORMAT_VERSION.to_string() {
        return None;
    }
    Some((HostId(host), sequence.parse().ok()?))
}

/// A file's header bytes.
pub(crate) fn encode_header(target: HostId, created_ms: i64) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_BYTES as usize);
    out.extend_from_slice(&MAGIC.to_be_bytes());
    out.push(FORMAT_VERSION);
    out.extend_from_slice(target.0.as_bytes());
    out.extend_from_slice(&created_ms.to_be_bytes());
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

/// The target a header names, or why it is not a good header.
fn decode_header(bytes: &[u8; HEADER_BYTES as usize]) -> Result<HostId, String> {
    let crc = u32::from_be_bytes(bytes[29..33].try_into().expect("4 bytes"));
    if crc32c::crc32c(&bytes[..29]) != crc {
        return Err("header checksum mismatch".to_string());
    }
    if u32::from_be_bytes(bytes[..4].try_into().expect("4 bytes")) != MAGIC {
        return Err("not a hint file (bad magic number)".to_string());
    }
    if bytes[4] != FORMAT_VERSION {
        return Err(format!("unknown hint file format version {}", bytes[4]));
    }
    let host = uuid::Uuid::from_bytes(bytes[5..21].try_into().expect("16 bytes"));
    Ok(HostId(host))
}

/// Appends one record (a hint created at `created_ms` of a mutation already encoded with
/// `mutation::encode_mutation`) to `out`.
pub(crate) fn encode_record(
    created_ms: i64,
    durable_writes: bool,
    mutation: &[u8],
    out: &mut Vec<u8>,
) {
    let length = (BODY_HEAD_BYTES + mutation.len()) as u32;
    let length_bytes = length.to_be_bytes();
    let mut body_head = [0u8; BODY_HEAD_BYTES];
    body_head[..8].copy_from_slice(&created_ms.to_be_bytes());
    body_head[8] = u8::from(durable_writes);
    let crc = crc32c::crc32c_append(
        crc32c::crc32c_append(crc32c::crc32c(&length_bytes), &body_head),
        mutation,
    );
    out.extend_from_slice(&length_bytes);
    out.extend_from_slice(&crc.to_be_bytes());
    out.extend_from_slice(&body_head);
    out.extend_from_slice(mutation);
}

/// One hint as read back from a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) created_ms: i64,
    pub(crate) durable_writes: bool,
    /// The encoded mutation (`mutation::decode_mutation` reads it).
    pub(crate) mutation: Vec<u8>,
    /// Bytes the record takes in the file.
    pub(crate) size_bytes: u64,
}

/// What reading the next record found.
#[derive(Debug)]
pub(crate) enum Next {
    Record(Record),
    /// The file ends cleanly here.
    End,
    /// What follows is not a whole good record: a torn tail or damage (the reason).
    Damaged(String),
}

/// Reads records one after another from a file opened at a record boundary.
pub(crate) struct RecordReader {
    reader: BufReader<File>,
    /// Where the next record starts.
    offset: u64,
    len: u64,
}

impl RecordReader {
    /// Opens `path` and checks its header (the error names what is wrong with it; an
    /// `UnexpectedEof` one is a file cut short in its header). Reading starts at `offset`, or
    /// just after the header when `offset` is before it.
    pub(crate) fn open(path: &Path, target: HostId, offset: u64) -> io::Result<RecordReader> {
        let mut file = File::open(path)?;
        let len = file.metadata()?.len();
        let mut header = [0u8; HEADER_BYTES as usize];
        file.read_exact(&mut header)?;
        let host = decode_header(&header).map_err(io::Error::other)?;
        if host != target {
            return Err(io::Error::other(format!(
                "the header names host {} instead",
                host.0
            )));
        }
        let offset = offset.max(HEADER_BYTES);
        file.seek(SeekFrom::Start(offset))?;
        Ok(RecordReader {
            reader: BufReader::with_capacity(64 << 10, file),
            offset,
            len,
        })
    }

    /// Where the next record starts (the end of the last one read).
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// The next record, the end, or the damage that stops the file here.
    pub(crate) fn next_record(&mut self) -> io::Result<Next> {
        let left = self.len.saturating_sub(self.offset);
        if left == 0 {
            return Ok(Next::End);
        }
        if left < RECORD_OVERHEAD_BYTES as u64 {
            return Ok(Next::Damaged(format!(
                "{left} bytes left, too few for a record"
            )));
        }
        let mut head = [0u8; RECORD_OVERHEAD_BYTES];
        self.reader.read_exact(&mut head)?;
        let length = u32::from_be_bytes(head[..4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_be_bytes(head[4..].try_into().expect("4 bytes"));
        if !(BODY_HEAD_BYTES..=MAX_RECORD_BODY_BYTES).contains(&length) {
            return Ok(Next::Damaged(format!("impossible record length {length}")));
        }
        if length as u64 > left - RECORD_OVERHEAD_BYTES as u64 {
            return Ok(Next::Damaged(format!(
                "a record of {length} bytes with only {} left",
                left - RECORD_OVERHEAD_BYTES as u64
            )));
        }
        let mut body = vec![0u8; length];
        self.reader.read_exact(&mut body)?;
        if crc32c::crc32c_append(crc32c::crc32c(&head[..4]), &body) != crc {
            return Ok(Next::Damaged("record checksum mismatch".to_string()));
        }
        let flags = body[8];
        if flags & !1 != 0 {
            return Ok(Next::Damaged(format!("unknown record flags {flags:#04x}")));
        }
        let created_ms = i64::from_be_bytes(body[..8].try_into().expect("8 bytes"));
        body.drain(..BODY_HEAD_BYTES);
        let size_bytes = (RECORD_OVERHEAD_BYTES + length) as u64;
        self.offset += size_bytes;
        Ok(Next::Record(Record {
            created_ms,
            durable_writes: flags & 1 == 1,
            mutation: body,
            size_bytes,
        }))
    }
}

/// What the scan of a file on open found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Scanned {
    /// Good records.
    pub(crate) hints: u64,
    /// The first record's creation time, if there is one.
    pub(crate) first_created_ms: Option<i64>,
    /// Where the good records end: the file's length once a damaged tail is cut.
    pub(crate) good_bytes: u64,
    /// Why the file was cut at `good_bytes`, if it was damaged there.
    pub(crate) damage: Option<String>,
}

/// Reads every record of `path` (a file of `target`), finding where the good ones end.
pub(crate) fn scan(path: &Path, target: HostId) -> io::Result<Scanned> {
    let mut reader = RecordReader::open(path, target, 0)?;
    let mut scanned = Scanned {
        hints: 0,
        first_created_ms: None,
        good_bytes: HEADER_BYTES,
        damage: None,
    };
    loop {
        match reader.next_record()? {
            Next::Record(record) => {
                scanned.hints += 1;
                scanned.first_created_ms.get_or_insert(record.created_ms);
                scanned.good_bytes = reader.offset();
            }
            Next::End => return Ok(scanned),
            Next::Damaged(why) => {
                scanned.damage = Some(why);
                return Ok(scanned);
            }
        }
    }
}
