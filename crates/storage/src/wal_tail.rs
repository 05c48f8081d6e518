//! Cuts a damaged tail off the newest commit log file (a RocksDB WAL) before RocksDB replays
//! it, at the record where point-in-time recovery would stop.
//!
//! RocksDB would stop there on its own, but its log reader (11.8) spins forever on one kind of
//! damage: a record header whose type byte is one of the "recyclable" types, in a log that is
//! not recycled. `log::Reader::ReadPhysicalRecord` then returns `kBadRecord` without consuming
//! the header, and `ReadRecord` asks again (facebook/rocksdb#13333). Six type values of 256 do
//! it, so about one torn write in forty followed by garbage left the node spinning at startup.
//! Reading the log here with the same format rules, and cutting it at the first record
//! recovery would not replay, leaves RocksDB exactly the records it would have replayed.
//!
//! The format (RocksDB `db/log_format.h`, `db/log_writer.cc`): 32 KiB blocks of physical
//! records `masked crc32c (4 bytes LE) | length (2 LE) | type (1) | payload`. A record never
//! crosses a block; a block's last < 7 bytes are zero padding. The CRC covers the type byte and
//! the payload. A logical record is one FULL record, or FIRST, MIDDLE..., LAST fragments.

use std::fs::OpenOptions;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

const BLOCK_SIZE: usize = 32 * 1024;
const HEADER_SIZE: usize = 7;

const ZERO: u8 = 0;
const FULL: u8 = 1;
const FIRST: u8 = 2;
const MIDDLE: u8 = 3;
const LAST: u8 = 4;
const SET_COMPRESSION: u8 = 9;
const USER_DEFINED_TIMESTAMP_SIZE: u8 = 10;
/// Record types of recycled logs; Helenus never recycles its logs.
const RECYCLABLE: [u8; 6] = [5, 6, 7, 8, 11, 131];
/// Types with this bit set that RocksDB does not know are skipped (`kRecordTypeSafeIgnoreMask`).
const SAFE_TO_IGNORE: u8 = 0x80;

/// A cut made by `cut_damaged_tail`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Cut {
    pub file: PathBuf,
    /// The file's new length: where the first record recovery would not replay began.
    pub offset: u64,
    /// Bytes removed.
    pub dropped: u64,
    pub reason: &'static str,
}

/// Cuts the newest `*.log` file in `wal_dir` at its first damaged record, if it has one.
pub(crate) fn cut_damaged_tail(wal_dir: &Path) -> io::Result<Option<Cut>> {
    let Some(file) = newest_log(wal_dir)? else {
        return Ok(None);
    };
    let mut f = OpenOptions::new().read(true).write(true).open(&file)?;
    let Some((offset, reason)) = first_damage(&mut io::BufReader::new(&mut f))? else {
        return Ok(None);
    };
    let len = f.metadata()?.len();
    f.set_len(offset)?;
    f.sync_all()?;
    Ok(Some(Cut {
        file,
        offset,
        dropped: len - offset,
        reason,
    }))
}

/// The `NNNNNN.log` file with the highest number (RocksDB names logs by increasing number).
fn newest_log(wal_dir: &Path) -> io::Result<Option<PathBuf>> {
    let entries = match std::fs::read_dir(wal_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut newest: Option<(u64, PathBuf)> = None;
    for entry in entries {
        let path = entry?.path();
        let number = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".log"))
            .and_then(|n| n.parse::<u64>().ok());
        if let Some(number) = number {
            if newest.as_ref().is_none_or(|(best, _)| number > *best) {
                newest = Some((number, path));
            }
        }
    }
    Ok(newest.map(|(_, path)| path))
}

#[cfg(test)]
pub(crate) fn newest_log_for_tests(wal_dir: &Path) -> PathBuf {
    newest_log(wal_dir)
        .expect("list")
        .expect("a commit log file")
}

/// Where the records of `log` that point-in-time recovery replays end, and why, if that is
/// before the end of `log`. A fragmented record cut short is cut whole. Reads a block at a
/// time: a log can be large.
fn first_damage(log: &mut impl Read) -> io::Result<Option<(u64, &'static str)>> {
    let mut block = vec![0u8; BLOCK_SIZE];
    let mut base = 0u64;
    // The start of the fragmented record being read, if any.
    let mut fragmented: Option<u64> = None;
    loop {
        let n = read_block(log, &mut block)?;
        if let Some(damage) = scan_block(&block[..n], base, &mut fragmented) {
            return Ok(Some(damage));
        }
        if n < BLOCK_SIZE {
            return Ok(fragmented.map(|start| (start, "record without its last fragment")));
        }
        base += BLOCK_SIZE as u64;
    }
}

/// Fills `block` unless the log ends first; the bytes read.
fn read_block(log: &mut impl Read, block: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < block.len() {
        match log.read(&mut block[n..]) {
            Ok(0) => break,
            Ok(read) => n += read,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Scans the block at offset `base` (shorter than a block only at the end of the log).
fn scan_block(
    block: &[u8],
    base: u64,
    fragmented: &mut Option<u64>,
) -> Option<(u64, &'static str)> {
    let mut at = 0;
    while at < block.len() {
        let left_in_block = BLOCK_SIZE - at;
        let damaged = |reason| Some((fragmented.unwrap_or(base + at as u64), reason));
        if left_in_block < HEADER_SIZE {
            if block.len() < BLOCK_SIZE {
                return damaged("truncated block trailer");
            }
            return None;
        }
        let Some(header) = block.get(at..at + HEADER_SIZE) else {
            return damaged("truncated header");
        };
        let stored_crc = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
        let length = usize::from(u16::from_le_bytes([header[4], header[5]]));
        let kind = header[6];
        if RECYCLABLE.contains(&kind) {
            if base == 0 && at == 0 {
                // A recycled log (Helenus does not configure them): its format differs; leave
                // it to RocksDB.
                return None;
            }
            return damaged("record type of a recycled log");
        }
        if kind == ZERO && length == 0 {
            // Preallocated space (RocksDB skips the rest of the block), unless it interrupts a
            // fragmented record.
            if fragmented.is_some() {
                return damaged("zeroes in the middle of a record");
            }
            return None;
        }
        if HEADER_SIZE + length > left_in_block {
            return damaged("record longer than its block");
        }
        let Some(payload) = block.get(at + HEADER_SIZE..at + HEADER_SIZE + length) else {
            return damaged("truncated record");
        };
        if unmask(stored_crc) != crc32c(crc32c(0, &[kind]), payload) {
            return damaged("checksum mismatch");
        }
        match kind {
            FULL | FIRST if fragmented.is_some() => {
                return damaged("record without its last fragment")
            }
            FULL => {}
            FIRST => *fragmented = Some(base + at as u64),
            MIDDLE | LAST if fragmented.is_none() => {
                return damaged("fragment without its first");
            }
            MIDDLE => {}
            LAST => *fragmented = None,
            SET_COMPRESSION | USER_DEFINED_TIMESTAMP_SIZE => {}
            k if k & SAFE_TO_IGNORE != 0 => *fragmented = None,
            _ => return damaged("unknown record type"),
        }
        at += HEADER_SIZE + length;
    }
    None
}

/// RocksDB stores CRCs masked (`crc32c::Mask`): rotated right 15 bits plus a constant.
fn unmask(masked: u32) -> u32 {
    masked.wrapping_sub(0xa282_ead8).rotate_left(15)
}

/// CRC-32C (Castagnoli), continuing from `crc` (0 to start).
fn crc32c(crc: u32, data: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut table = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut bit = 0;
            while bit < 8 {
                c = if c & 1 != 0 {
                    (c >> 1) ^ 0x82f6_3b78
                } else {
                    c >> 1
                };
                bit += 1;
            }
            table[i] = c;
            i += 1;
        }
        table
    };
    let mut c = !crc;
    for &b in data {
        c = TABLE[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn damage(log: &[u8]) -> Option<(usize, &'static str)> {
        first_damage(&mut &log[..])
            .expect("read")
            .map(|(at, reason)| (at as usize, reason))
    }

    fn mask(crc: u32) -> u32 {
        crc.rotate_right(15).wrapping_add(0xa282_ead8)
    }

    /// One physical record as RocksDB's log writer emits it.
    fn record(kind: u8, payload: &[u8]) -> Vec<u8> {
        let crc = mask(crc32c(crc32c(0, &[kind]), payload));
        let mut out = crc.to_le_bytes().to_vec();
        out.extend_from_slice(&(payload.len() as u16).to_le_bytes());
        out.push(kind);
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn crc32c_matches_the_standard_check_value() {
        assert_eq!(crc32c(0, b"123456789"), 0xe306_9283);
        assert_eq!(unmask(mask(0x1234_5678)), 0x1234_5678);
    }

    #[test]
    fn a_valid_log_has_no_damage() {
        let mut log = record(FULL, b"one");
        log.extend(record(FIRST, b"two-a"));
        log.extend(record(MIDDLE, b"two-b"));
        log.extend(record(LAST, b"two-c"));
        assert_eq!(damage(&log), None);
        assert_eq!(damage(&[]), None);
    }

    #[test]
    fn records_fill_blocks_and_skip_the_padding() {
        // A record that leaves 3 bytes in the first block: the writer pads them with zeroes.
        let first = record(FULL, &vec![7u8; BLOCK_SIZE - HEADER_SIZE - 3]);
        let mut log = first.clone();
        log.extend([0, 0, 0]);
        log.extend(record(FULL, b"next block"));
        assert_eq!(damage(&log), None);
        // The file ends inside the padding: a torn write.
        assert_eq!(
            damage(&log[..first.len() + 1]),
            Some((first.len(), "truncated block trailer"))
        );
    }

    #[test]
    fn the_cut_is_at_the_first_record_recovery_would_not_replay() {
        let good = record(FULL, b"kept");
        let cases: Vec<(Vec<u8>, &str)> = vec![
            // The header RocksDB 11.8 spins on: a recyclable type in a log that is not recycled.
            (
                vec![1, 2, 3, 4, 16, 0, 5, 9, 9, 9],
                "record type of a recycled log",
            ),
            (vec![1, 2, 3], "truncated header"),
            (record(FULL, b"torn")[..9].to_vec(), "truncated record"),
            (
                {
                    let mut r = record(FULL, b"flipped");
                    r[8] ^= 1;
                    r
                },
                "checksum mismatch",
            ),
            (record(MIDDLE, b"orphan"), "fragment without its first"),
            (record(12, b"unknown"), "unknown record type"),
            (
                vec![0, 0, 0, 0, 0xff, 0xff, 1],
                "record longer than its block",
            ),
        ];
        for (tail, reason) in cases {
            let mut log = good.clone();
            log.extend(&tail);
            assert_eq!(damage(&log), Some((good.len(), reason)), "{reason}");
        }
    }

    #[test]
    fn a_fragmented_record_cut_short_is_cut_whole() {
        let good = record(FULL, b"kept");
        let mut log = good.clone();
        log.extend(record(FIRST, b"part one"));
        log.extend(record(MIDDLE, b"part two"));
        assert_eq!(
            damage(&log),
            Some((good.len(), "record without its last fragment"))
        );
        log.extend([0xde, 0xad, 0xbe, 0xef, 1, 0, 6, 0]);
        assert_eq!(
            damage(&log),
            Some((good.len(), "record type of a recycled log"))
        );
    }

    #[test]
    fn a_recycled_log_is_left_to_rocksdb() {
        let mut log = vec![1, 2, 3, 4, 3, 0, 5, 0, 0, 0, 9, 1, 2, 3];
        log.extend([0xff; 20]);
        assert_eq!(damage(&log), None);
    }

    #[test]
    fn ignorable_and_preallocated_records_are_not_damage() {
        let mut log = record(FULL, b"a");
        log.extend(record(SAFE_TO_IGNORE | 0x10, b"ignorable"));
        log.extend(record(FULL, b"b"));
        assert_eq!(damage(&log), None);
        // A zero header skips to the next block, as RocksDB's reader does.
        let used = log.len();
        log.resize(BLOCK_SIZE, 0);
        log.extend(record(FULL, b"c"));
        assert_eq!(damage(&log), None);
        assert!(used < BLOCK_SIZE);
    }

    #[test]
    fn cutting_truncates_only_the_newest_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let good = record(FULL, b"kept");
        let mut damaged = good.clone();
        damaged.extend([1, 2, 3, 4, 16, 0, 7, 9]);
        std::fs::write(dir.path().join("000009.log"), &damaged).expect("write");
        std::fs::write(dir.path().join("000010.log"), &damaged).expect("write");
        std::fs::write(dir.path().join("LOG"), b"not a log file").expect("write");
        let cut = cut_damaged_tail(dir.path()).expect("cut").expect("a cut");
        assert_eq!(cut.file, dir.path().join("000010.log"));
        assert_eq!((cut.offset, cut.dropped), (good.len() as u64, 8));
        assert_eq!(
            std::fs::read(dir.path().join("000010.log")).expect("read"),
            good
        );
        assert_eq!(
            std::fs::read(dir.path().join("000009.log")).expect("read"),
            damaged
        );
        // Cut once: the log is valid now.
        assert_eq!(cut_damaged_tail(dir.path()).expect("cut"), None);
        assert_eq!(
            cut_damaged_tail(&dir.path().join("missing")).expect("cut"),
            None
        );
    }
}
