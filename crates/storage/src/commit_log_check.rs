//! Checks every commit log file (RocksDB's WAL) before RocksDB replays it, so that damage never
//! drops acknowledged writes silently, and repairs what it may.
//!
//! RocksDB's point-in-time recovery stops at the first damaged record and drops everything
//! after it, in that file and in every newer one, with only a line in its info log: 16 flipped
//! bytes in the middle of a log lost thousands of acknowledged writes. And its log reader
//! (11.8) spins forever on one kind of damage: a record header whose type byte is one of the
//! "recyclable" types, in a log that is not recycled (`log::Reader::ReadPhysicalRecord`
//! returns `kBadRecord` without consuming the header, facebook/rocksdb#13333). So every log is
//! read here first, with the same format rules, and every damaged stretch is judged by what
//! follows it:
//! - Nothing intact after it (the torn tail a crash leaves): the file is cut there, as
//!   recovery would stop there, with a warning. Cassandra accepts a torn tail the same way.
//! - Intact records after it whose sequence numbers go on where those before it stopped: the
//!   damaged bytes held no write (a write that failed half-way, on a full disk), so the file is
//!   rewritten without them, with a warning.
//! - Intact records after it with a gap in the sequence numbers: writes are in the damage, and
//!   recovery would also have dropped every intact record after it. The node refuses to start
//!   (`StorageError::CommitLogDamaged`, naming the file and offset), as Cassandra refuses on a
//!   replay error, unless the operator says to salvage (`RocksConfig`'s
//!   `ignore_commit_log_replay_errors`, Cassandra's `cassandra.commitlog.ignorereplayerrors`):
//!   then the file is rewritten keeping every intact record, and the damaged bytes are lost.
//!
//! A rewritten file's original is kept beside it as `NNNNNN.log.damaged` (a hard link), which
//! RocksDB ignores. A log that is in the recycled format is left to RocksDB.
//!
//! A gap is judged by the write batches' sequence numbers: each record's payload is a
//! RocksDB write batch, `sequence (8 bytes LE) | entry count (4 LE) | entries`, which takes the
//! sequence numbers `sequence .. sequence + count`. Writes without the commit log
//! (`Durability::None`) take sequence numbers too, so damage beside them reads as a gap: the
//! node then refuses to start where nothing acknowledged may be lost, which the override
//! settles.
//!
//! The format (RocksDB `db/log_format.h`, `db/log_writer.cc`): 32 KiB blocks of physical
//! records `masked crc32c (4 bytes LE) | length (2 LE) | type (1) | payload`. A record never
//! crosses a block; a block's last < 7 bytes are zero padding. The CRC covers the type byte and
//! the payload. A logical record is one FULL record, or FIRST, MIDDLE..., LAST fragments.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
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
/// A write batch's header: sequence number and entry count (`WriteBatchInternal::kHeader`).
/// RocksDB's recovery reports a shorter record as corrupt.
const BATCH_HEADER_SIZE: usize = 12;

/// What the check did, for the engine to log.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Repair {
    /// A torn tail cut off (`CUT` in the module documentation).
    Cut {
        file: PathBuf,
        /// The file's new length: where the first record recovery would not replay began.
        offset: u64,
        /// Bytes removed.
        dropped: u64,
        reason: &'static str,
    },
    /// Damaged bytes left out of a rewritten file.
    Skipped {
        file: PathBuf,
        offset: u64,
        bytes: u64,
        reason: &'static str,
        /// Sequence numbers missing after them (`first .. next`): writes lost. `None` if the
        /// numbers go on, so no write was in them.
        lost: Option<Gap>,
        /// The original file, kept.
        backup: PathBuf,
    },
}

/// Sequence numbers missing where damage was: from `first` (or from an unknown point, if no
/// intact record came before the damage) up to `next`, the first one present after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Gap {
    pub first: Option<u64>,
    pub next: u64,
}

/// Damage that loses writes, found while salvaging was not allowed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub file: PathBuf,
    pub offset: u64,
    pub reason: &'static str,
    pub gap: Gap,
    /// Intact records after the damage, in every file, which recovery would have dropped.
    pub intact_records_after: u64,
}

#[derive(Debug)]
pub(crate) enum CheckError {
    Io(PathBuf, io::Error),
    Damaged(Refusal),
}

/// Checks (and repairs, see the module documentation) every `NNNNNN.log` in `wal_dir`, oldest
/// first. `salvage` allows leaving out damage that holds writes. A file at a time is read into
/// memory whole (the check looks ahead of damage): RocksDB starts a new file with every
/// memtable switch, so a file usually holds a memtable's worth, and at most the commit log's
/// bound (`RocksConfig::commit_log_total_bytes`), which replay then holds in memtables anyway.
pub(crate) fn check_commit_log(wal_dir: &Path, salvage: bool) -> Result<Vec<Repair>, CheckError> {
    let files = logs(wal_dir).map_err(|e| CheckError::Io(wal_dir.to_path_buf(), e))?;
    let mut judge = Judge::default();
    for (index, file) in files.iter().enumerate() {
        let log = fs::read(file).map_err(|e| CheckError::Io(file.clone(), e))?;
        if is_recycled(&log) {
            continue;
        }
        for event in Reader::new(&log) {
            judge.see(index, event, &log);
        }
    }
    let damages = judge.finish();
    if !salvage {
        if let Some(refusal) = first_refusal(&files, &damages) {
            return Err(CheckError::Damaged(refusal));
        }
    }
    let mut repairs = Vec::new();
    for (index, file) in files.iter().enumerate() {
        let in_file: Vec<&Judged> = damages.iter().filter(|d| d.file == index).collect();
        if in_file.is_empty() {
            continue;
        }
        repair(file, &in_file, &mut repairs).map_err(|e| CheckError::Io(file.clone(), e))?;
    }
    Ok(repairs)
}

/// The `NNNNNN.log` files in `wal_dir`, by increasing number (RocksDB's order).
fn logs(wal_dir: &Path) -> io::Result<Vec<PathBuf>> {
    let entries = match fs::read_dir(wal_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut logs = Vec::new();
    for entry in entries {
        let path = entry?.path();
        let number = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".log"))
            .and_then(|n| n.parse::<u64>().ok());
        if let Some(number) = number {
            logs.push((number, path));
        }
    }
    logs.sort();
    Ok(logs.into_iter().map(|(_, path)| path).collect())
}

#[cfg(test)]
pub(crate) fn newest_log_for_tests(wal_dir: &Path) -> PathBuf {
    logs(wal_dir)
        .expect("list")
        .pop()
        .expect("a commit log file")
}

/// A recycled log (Helenus does not configure them) starts with a recyclable record type; its
/// format differs, so it is left to RocksDB.
fn is_recycled(log: &[u8]) -> bool {
    log.len() >= HEADER_SIZE && RECYCLABLE.contains(&log[6])
}

/// What a log's bytes hold, in order.
#[derive(Debug, PartialEq, Eq)]
enum Event {
    /// An intact logical record whose first fragment starts at `start`. `kind` is FULL for a
    /// write batch (whether whole or in fragments), else the record's own type (which is copied
    /// as it is). `payload` lists the byte ranges of its fragments' payloads.
    Record {
        start: usize,
        kind: u8,
        payload: Vec<(usize, usize)>,
    },
    /// Bytes `start .. end` that recovery would not replay, and why.
    Damage {
        start: usize,
        end: usize,
        reason: &'static str,
    },
}

/// Reads a log's records and damaged stretches. After damage it goes on at the next position
/// where an intact record starts (`resync`), so intact records after damage are found, which
/// RocksDB's reader (it skips the rest of the block, then stops) does not do.
struct Reader<'a> {
    log: &'a [u8],
    /// Where the next physical record is read.
    at: usize,
    /// The fragmented record being read: where it started, its payload's ranges.
    fragment: Option<(usize, Vec<(usize, usize)>)>,
    /// An event to return before reading on (a record read right after a damage it ended).
    queued: Option<Event>,
}

impl<'a> Reader<'a> {
    fn new(log: &'a [u8]) -> Reader<'a> {
        Reader {
            log,
            at: 0,
            fragment: None,
            queued: None,
        }
    }

    /// Damage from the fragmented record being read (or `from`) up to the next position where
    /// a record starts; reading goes on there.
    fn damage_and_resync(&mut self, from: usize, reason: &'static str) -> Event {
        let start = self.fragment.take().map_or(from, |(start, _)| start);
        let end = resync(self.log, from + 1);
        self.at = end;
        Event::Damage { start, end, reason }
    }

    /// Damage from the fragmented record being read (or `from`) up to `end`, where reading goes
    /// on: for a physical record that is intact but cannot be replayed.
    fn damage_to(&mut self, from: usize, end: usize, reason: &'static str) -> Event {
        let start = self.fragment.take().map_or(from, |(start, _)| start);
        self.at = end;
        Event::Damage { start, end, reason }
    }
}

impl Iterator for Reader<'_> {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        if let Some(event) = self.queued.take() {
            return Some(event);
        }
        let log = self.log;
        loop {
            let at = self.at;
            if at >= log.len() {
                let (start, _) = self.fragment.take()?;
                return Some(Event::Damage {
                    start,
                    end: log.len(),
                    reason: "record without its last fragment",
                });
            }
            let left_in_block = BLOCK_SIZE - at % BLOCK_SIZE;
            if left_in_block < HEADER_SIZE {
                // The writer's zero padding; a file that ends inside it was torn there.
                if log.len() - at < left_in_block {
                    return Some(self.damage_to(at, log.len(), "truncated block trailer"));
                }
                self.at += left_in_block;
                continue;
            }
            let Some(header) = log.get(at..at + HEADER_SIZE) else {
                return Some(self.damage_to(at, log.len(), "truncated header"));
            };
            let stored_crc = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
            let length = usize::from(u16::from_le_bytes([header[4], header[5]]));
            let kind = header[6];
            if kind == ZERO && length == 0 {
                // Preallocated space: RocksDB skips the rest of the block. Unless it interrupts
                // a record or data follows it in the block, which RocksDB would drop unnoticed.
                let block_end = (at + left_in_block).min(log.len());
                if self.fragment.is_some() {
                    return Some(self.damage_and_resync(at, "zeroes in the middle of a record"));
                }
                if log[at..block_end].iter().any(|&b| b != 0) {
                    return Some(self.damage_and_resync(at, "zeroes before more data"));
                }
                self.at = block_end;
                continue;
            }
            if RECYCLABLE.contains(&kind) {
                return Some(self.damage_and_resync(at, "record type of a recycled log"));
            }
            if HEADER_SIZE + length > left_in_block {
                return Some(self.damage_and_resync(at, "record longer than its block"));
            }
            let end = at + HEADER_SIZE + length;
            let Some(payload) = log.get(at + HEADER_SIZE..end) else {
                return Some(self.damage_and_resync(at, "truncated record"));
            };
            if unmask(stored_crc) != crc32c(crc32c(0, &[kind]), payload) {
                return Some(self.damage_and_resync(at, "checksum mismatch"));
            }
            let range = (at + HEADER_SIZE, end);
            match kind {
                FULL | FIRST => {
                    // A record starting while another is unfinished: the other is damaged.
                    let unfinished = self.fragment.take().map(|(start, _)| Event::Damage {
                        start,
                        end: at,
                        reason: "record without its last fragment",
                    });
                    self.at = end;
                    let event = if kind == FIRST {
                        self.fragment = Some((at, vec![range]));
                        None
                    } else {
                        Some(batch_record(at, vec![range]).unwrap_or(Event::Damage {
                            start: at,
                            end,
                            reason: "record shorter than a write batch",
                        }))
                    };
                    match (unfinished, event) {
                        (Some(damage), event) => {
                            self.queued = event;
                            return Some(damage);
                        }
                        (None, Some(event)) => return Some(event),
                        (None, None) => continue,
                    }
                }
                MIDDLE | LAST => {
                    let Some((start, mut payload)) = self.fragment.take() else {
                        return Some(self.damage_to(at, end, "fragment without its first"));
                    };
                    payload.push(range);
                    self.at = end;
                    if kind == MIDDLE {
                        self.fragment = Some((start, payload));
                        continue;
                    }
                    if let Some(event) = batch_record(start, payload) {
                        return Some(event);
                    }
                    return Some(Event::Damage {
                        start,
                        end,
                        reason: "record shorter than a write batch",
                    });
                }
                SET_COMPRESSION | USER_DEFINED_TIMESTAMP_SIZE => {
                    self.at = end;
                    return Some(Event::Record {
                        start: at,
                        kind,
                        payload: vec![range],
                    });
                }
                k if k & SAFE_TO_IGNORE != 0 => {
                    // Ignorable (RocksDB skips it; so does a rewrite, it describes the file
                    // as it was). It ends a fragmented record, as in RocksDB's reader.
                    self.fragment = None;
                    self.at = end;
                    continue;
                }
                _ => return Some(self.damage_to(at, end, "unknown record type")),
            }
        }
    }
}

/// A write batch record from its payload's ranges, or `None` if it is too short to be one.
fn batch_record(start: usize, payload: Vec<(usize, usize)>) -> Option<Event> {
    let length: usize = payload.iter().map(|(a, b)| b - a).sum();
    (length >= BATCH_HEADER_SIZE).then_some(Event::Record {
        start,
        kind: FULL,
        payload,
    })
}

/// The first position at or after `from` where an intact record that can start a logical
/// record begins, or the log's end. Candidates are checked cheaply (type, length within the
/// block and the log) before their checksum, so scanning garbage is fast.
fn resync(log: &[u8], from: usize) -> usize {
    let mut at = from;
    while at + HEADER_SIZE <= log.len() {
        let left_in_block = BLOCK_SIZE - at % BLOCK_SIZE;
        if left_in_block < HEADER_SIZE {
            at += left_in_block;
            continue;
        }
        let kind = log[at + 6];
        let length = usize::from(u16::from_le_bytes([log[at + 4], log[at + 5]]));
        let plausible = match kind {
            FULL => length >= BATCH_HEADER_SIZE,
            FIRST | SET_COMPRESSION | USER_DEFINED_TIMESTAMP_SIZE => true,
            _ => false,
        };
        let end = at + HEADER_SIZE + length;
        if plausible && HEADER_SIZE + length <= left_in_block && end <= log.len() {
            let stored = u32::from_le_bytes([log[at], log[at + 1], log[at + 2], log[at + 3]]);
            if unmask(stored) == crc32c(crc32c(0, &[kind]), &log[at + HEADER_SIZE..end]) {
                return at;
            }
        }
        at += 1;
    }
    log.len()
}

/// The first `n` bytes of a record's payload (fewer if it is shorter).
fn payload_prefix(log: &[u8], payload: &[(usize, usize)], n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n);
    for &(a, b) in payload {
        let take = (b - a).min(n - out.len());
        out.extend_from_slice(&log[a..a + take]);
        if out.len() == n {
            break;
        }
    }
    out
}

/// A damaged stretch and what follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// No intact record after it.
    Tail,
    /// The sequence numbers go on after it: it held no write.
    Harmless,
    /// Sequence numbers are missing after it.
    Loss(Gap),
}

#[derive(Debug)]
struct Judged {
    /// The file's index in the list checked.
    file: usize,
    start: usize,
    end: usize,
    /// The file's length.
    file_len: usize,
    reason: &'static str,
    verdict: Verdict,
    /// Intact write batches after it, in every file (for a refusal's message).
    intact_after: u64,
}

/// Follows the sequence numbers across the logs and judges each damaged stretch by the first
/// intact write batch after it.
#[derive(Default)]
struct Judge {
    /// The sequence number the next write batch should start at.
    expected: Option<u64>,
    /// Damage waiting for the next intact write batch.
    open: Vec<Judged>,
    judged: Vec<Judged>,
}

impl Judge {
    fn see(&mut self, file: usize, event: Event, log: &[u8]) {
        match event {
            Event::Damage { start, end, reason } => self.open.push(Judged {
                file,
                start,
                end,
                file_len: log.len(),
                reason,
                verdict: Verdict::Tail,
                intact_after: 0,
            }),
            Event::Record { kind, payload, .. } if kind == FULL => {
                let header = payload_prefix(log, &payload, BATCH_HEADER_SIZE);
                let sequence = u64::from_le_bytes(header[..8].try_into().expect("8 bytes"));
                let count = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes"));
                for damage in &mut self.judged {
                    if matches!(damage.verdict, Verdict::Loss(_)) {
                        damage.intact_after += 1;
                    }
                }
                for mut damage in self.open.drain(..) {
                    damage.verdict = match self.expected {
                        Some(expected) if sequence <= expected => Verdict::Harmless,
                        first => Verdict::Loss(Gap {
                            first,
                            next: sequence,
                        }),
                    };
                    if matches!(damage.verdict, Verdict::Loss(_)) {
                        damage.intact_after = 1;
                    }
                    self.judged.push(damage);
                }
                let next = sequence.saturating_add(u64::from(count));
                self.expected = Some(self.expected.map_or(next, |e| e.max(next)));
            }
            Event::Record { .. } => {}
        }
    }

    fn finish(mut self) -> Vec<Judged> {
        self.judged.append(&mut self.open); // their verdict stays Tail
        self.judged.sort_by_key(|d| (d.file, d.start));
        self.judged
    }
}

fn first_refusal(files: &[PathBuf], damages: &[Judged]) -> Option<Refusal> {
    damages.iter().find_map(|d| match d.verdict {
        Verdict::Loss(gap) => Some(Refusal {
            file: files[d.file].clone(),
            offset: d.start as u64,
            reason: d.reason,
            gap,
            intact_records_after: d.intact_after,
        }),
        _ => None,
    })
}

/// Repairs one file: cut if its only damage is at its end and loses nothing, else rewritten
/// without its damaged stretches (the original kept).
fn repair(file: &Path, damages: &[&Judged], repairs: &mut Vec<Repair>) -> io::Result<()> {
    if let [only] = damages {
        if only.end == only.file_len && !matches!(only.verdict, Verdict::Loss(_)) {
            let f = OpenOptions::new().write(true).open(file)?;
            f.set_len(only.start as u64)?;
            f.sync_all()?;
            repairs.push(Repair::Cut {
                file: file.to_path_buf(),
                offset: only.start as u64,
                dropped: (only.end - only.start) as u64,
                reason: only.reason,
            });
            return Ok(());
        }
    }
    let backup = rewrite(file)?;
    for damage in damages {
        repairs.push(Repair::Skipped {
            file: file.to_path_buf(),
            offset: damage.start as u64,
            bytes: (damage.end - damage.start) as u64,
            reason: damage.reason,
            lost: match damage.verdict {
                Verdict::Loss(gap) => Some(gap),
                Verdict::Tail | Verdict::Harmless => None,
            },
            backup: backup.clone(),
        });
    }
    Ok(())
}

/// Rewrites `file` with only its intact records, laid out as RocksDB's log writer lays them
/// out; the original stays as `<file>.damaged` (or `.damaged.N`), which is returned.
fn rewrite(file: &Path) -> io::Result<PathBuf> {
    let log = fs::read(file)?;
    let temporary = with_suffix(file, ".rewrite");
    {
        let mut writer = LogWriter::new(BufWriter::new(File::create(&temporary)?));
        for event in Reader::new(&log) {
            if let Event::Record { kind, payload, .. } = event {
                let bytes: Vec<u8> = payload
                    .iter()
                    .flat_map(|&(a, b)| &log[a..b])
                    .copied()
                    .collect();
                writer.add(kind, &bytes)?;
            }
        }
        let out = writer.finish()?;
        out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    }
    let backup = free_backup_name(file);
    fs::hard_link(file, &backup).or_else(|_| fs::copy(file, &backup).map(|_| ()))?;
    fs::rename(&temporary, file)?;
    if let Some(dir) = file.parent() {
        File::open(dir)?.sync_all()?;
    }
    Ok(backup)
}

fn with_suffix(file: &Path, suffix: &str) -> PathBuf {
    let mut name = file.as_os_str().to_os_string();
    name.push(suffix);
    PathBuf::from(name)
}

/// `<file>.damaged`, or `.damaged.1`, `.damaged.2`... if taken by an earlier repair.
fn free_backup_name(file: &Path) -> PathBuf {
    let first = with_suffix(file, ".damaged");
    if !first.exists() {
        return first;
    }
    (1..)
        .map(|n| with_suffix(&first, &format!(".{n}")))
        .find(|candidate| !candidate.exists())
        .expect("an unused name")
}

/// RocksDB's log writer (`log::Writer::AddRecord`): records split into fragments that never
/// cross a 32 KiB block, blocks padded with zeroes where less than a header is left.
struct LogWriter<W: Write> {
    out: W,
    block_offset: usize,
}

impl<W: Write> LogWriter<W> {
    fn new(out: W) -> LogWriter<W> {
        LogWriter {
            out,
            block_offset: 0,
        }
    }

    /// Writes one logical record: a write batch (`FULL`), fragmented as needed, or a record of
    /// another type, whole.
    fn add(&mut self, kind: u8, payload: &[u8]) -> io::Result<()> {
        if kind != FULL {
            if self.block_offset + HEADER_SIZE + payload.len() > BLOCK_SIZE {
                self.pad()?;
            }
            return self.emit(kind, payload);
        }
        let mut left = payload;
        let mut begin = true;
        loop {
            if BLOCK_SIZE - self.block_offset < HEADER_SIZE {
                self.pad()?;
            }
            let available = BLOCK_SIZE - self.block_offset - HEADER_SIZE;
            let (fragment, rest) = left.split_at(left.len().min(available));
            let end = rest.is_empty();
            let fragment_kind = match (begin, end) {
                (true, true) => FULL,
                (true, false) => FIRST,
                (false, true) => LAST,
                (false, false) => MIDDLE,
            };
            self.emit(fragment_kind, fragment)?;
            left = rest;
            begin = false;
            if end {
                return Ok(());
            }
        }
    }

    /// Zeroes to the end of the block: fewer than a header's worth is the writer's trailer;
    /// more reads as preallocated space, which readers skip to the next block.
    fn pad(&mut self) -> io::Result<()> {
        self.out
            .write_all(&vec![0; BLOCK_SIZE - self.block_offset])?;
        self.block_offset = 0;
        Ok(())
    }

    fn emit(&mut self, kind: u8, payload: &[u8]) -> io::Result<()> {
        let crc = mask(crc32c(crc32c(0, &[kind]), payload));
        let length = u16::try_from(payload.len()).expect("a fragment fits in a block");
        self.out.write_all(&crc.to_le_bytes())?;
        self.out.write_all(&length.to_le_bytes())?;
        self.out.write_all(&[kind])?;
        self.out.write_all(payload)?;
        self.block_offset += HEADER_SIZE + payload.len();
        Ok(())
    }

    fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// RocksDB stores CRCs masked (`crc32c::Mask`): rotated right 15 bits plus a constant.
fn unmask(masked: u32) -> u32 {
    masked.wrapping_sub(0xa282_ead8).rotate_left(15)
}

fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// CRC-32C (Castagnoli), continuing from `crc` (0 to start): with the SSE4.2 instruction where
/// the CPU has it (every x86-64-v2 CPU, which the node requires), eight bytes at a time; a start
/// checks every byte of the commit log.
fn crc32c(crc: u32, data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("sse4.2") {
        // SAFETY: the CPU has SSE4.2, checked just above.
        return unsafe { crc32c_sse42(crc, data) };
    }
    crc32c_table(crc, data)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
fn crc32c_sse42(crc: u32, data: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};
    let mut c = u64::from(!crc);
    let mut words = data.chunks_exact(8);
    for word in &mut words {
        c = _mm_crc32_u64(c, u64::from_le_bytes(word.try_into().expect("8 bytes")));
    }
    let mut c = c as u32;
    for &b in words.remainder() {
        c = _mm_crc32_u8(c, b);
    }
    !c
}

/// `crc32c` a byte at a time, from a table.
fn crc32c_table(crc: u32, data: &[u8]) -> u32 {
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

    /// One physical record as RocksDB's log writer emits it.
    fn record(kind: u8, payload: &[u8]) -> Vec<u8> {
        let crc = mask(crc32c(crc32c(0, &[kind]), payload));
        let mut out = crc.to_le_bytes().to_vec();
        out.extend_from_slice(&(payload.len() as u16).to_le_bytes());
        out.push(kind);
        out.extend_from_slice(payload);
        out
    }

    /// A write batch's payload: `sequence`, one entry, and `body` as its bytes.
    fn batch(sequence: u64, body: &[u8]) -> Vec<u8> {
        let mut out = sequence.to_le_bytes().to_vec();
        out.extend_from_slice(&1u32.to_le_bytes());
        out.extend_from_slice(body);
        out
    }

    /// A log of one-entry batches with these sequence numbers, as the log writer lays it out.
    fn log_of(sequences: &[u64]) -> Vec<u8> {
        let mut writer = LogWriter::new(Vec::new());
        for &sequence in sequences {
            writer
                .add(
                    FULL,
                    &batch(sequence, format!("write {sequence}").as_bytes()),
                )
                .expect("write");
        }
        writer.finish().expect("finish")
    }

    /// The sequence numbers of the intact batches in `log`, and its damaged stretches.
    fn read(log: &[u8]) -> (Vec<u64>, Vec<(usize, usize, &'static str)>) {
        let mut sequences = Vec::new();
        let mut damages = Vec::new();
        for event in Reader::new(log) {
            match event {
                Event::Record { kind, payload, .. } if kind == FULL => {
                    let header = payload_prefix(log, &payload, 8);
                    sequences.push(u64::from_le_bytes(header.try_into().expect("8 bytes")));
                }
                Event::Record { .. } => {}
                Event::Damage { start, end, reason } => damages.push((start, end, reason)),
            }
        }
        (sequences, damages)
    }

    /// The offset of the record holding `sequence` in a `log_of` log.
    fn offset_of(log: &[u8], sequence: u64) -> usize {
        Reader::new(log)
            .find_map(|event| match event {
                Event::Record { start, payload, .. }
                    if payload_prefix(log, &payload, 8) == sequence.to_le_bytes() =>
                {
                    Some(start)
                }
                _ => None,
            })
            .expect("the record")
    }

    fn write_logs(dir: &Path, logs: &[(u64, &[u8])]) {
        for (number, bytes) in logs {
            fs::write(dir.join(format!("{number:06}.log")), bytes).expect("write");
        }
    }

    #[test]
    fn crc32c_matches_the_standard_check_value() {
        assert_eq!(crc32c(0, b"123456789"), 0xe306_9283);
        assert_eq!(crc32c_table(0, b"123456789"), 0xe306_9283);
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        for len in [0, 1, 7, 8, 9, 63, 1000] {
            assert_eq!(
                crc32c(5, &data[..len]),
                crc32c_table(5, &data[..len]),
                "{len}"
            );
        }
        assert_eq!(unmask(mask(0x1234_5678)), 0x1234_5678);
    }

    #[test]
    fn the_writer_lays_records_out_as_rocksdb_and_the_reader_reads_them_back() {
        // A record that leaves 3 bytes in the first block: the writer pads them with zeroes.
        let mut writer = LogWriter::new(Vec::new());
        let first = batch(
            1,
            &vec![7u8; BLOCK_SIZE - HEADER_SIZE - 3 - BATCH_HEADER_SIZE],
        );
        writer.add(FULL, &first).expect("write");
        // A record of three fragments (FIRST, MIDDLE, LAST).
        let large = batch(2, &vec![9u8; 2 * BLOCK_SIZE]);
        writer.add(FULL, &large).expect("write");
        writer.add(FULL, &batch(3, b"small")).expect("write");
        let log = writer.finish().expect("finish");
        assert_eq!(&log[BLOCK_SIZE - 3..BLOCK_SIZE], &[0, 0, 0]);
        assert_eq!(log[BLOCK_SIZE + 6], FIRST);
        assert_eq!(log[2 * BLOCK_SIZE + 6], MIDDLE);
        assert_eq!(log[3 * BLOCK_SIZE + 6], LAST);
        assert_eq!(read(&log), (vec![1, 2, 3], vec![]));
        let records: Vec<Vec<u8>> = Reader::new(&log)
            .map(|event| match event {
                Event::Record { payload, .. } => payload
                    .iter()
                    .flat_map(|&(a, b)| &log[a..b])
                    .copied()
                    .collect(),
                Event::Damage { .. } => panic!("damage in a clean log"),
            })
            .collect();
        assert_eq!(records[1], large);
    }

    #[test]
    fn damage_is_found_and_intact_records_after_it_are_read() {
        let log = log_of(&[1, 2, 3, 4]);
        let at = offset_of(&log, 2);
        type Damage = Box<dyn Fn(&mut Vec<u8>)>;
        let cases: Vec<(Damage, &str)> = vec![
            (Box::new(move |l| l[at + 10] ^= 1), "checksum mismatch"),
            (
                Box::new(move |l| l[at + 6] = 5),
                "record type of a recycled log",
            ),
            (
                Box::new(move |l| l[at + 5] = 0xff),
                "record longer than its block",
            ),
            (
                Box::new(move |l| l[at..at + 7].copy_from_slice(&[0; 7])),
                "zeroes before more data",
            ),
        ];
        for (damage, reason) in cases {
            let mut damaged = log.clone();
            damage(&mut damaged);
            let (sequences, damages) = read(&damaged);
            assert_eq!(sequences, [1, 3, 4], "{reason}");
            assert_eq!(damages.len(), 1, "{reason}: {damages:?}");
            assert_eq!((damages[0].0, damages[0].2), (at, reason));
            assert_eq!(damages[0].1, offset_of(&log, 3), "{reason}");
        }
        // An intact record of a type RocksDB does not know.
        let mut log = log_of(&[1]);
        let unknown = record(12, &batch(2, b"from the future"));
        log.extend(&unknown);
        log.extend(log_of(&[3]));
        let at = log_of(&[1]).len();
        assert_eq!(
            read(&log),
            (
                vec![1, 3],
                vec![(at, at + unknown.len(), "unknown record type")]
            )
        );
    }

    #[test]
    fn a_torn_tail_is_cut_silently_as_before() {
        let dir = tempfile::tempdir().expect("tempdir");
        let good = log_of(&[1, 2, 3]);
        let tails: Vec<(Vec<u8>, &str)> = vec![
            // The header RocksDB 11.8 spins on: a recyclable type in a log that is not recycled.
            (
                vec![1, 2, 3, 4, 16, 0, 5, 9, 9, 9],
                "record type of a recycled log",
            ),
            (vec![1, 2, 3], "truncated header"),
            (
                record(FULL, &batch(4, b"torn"))[..15].to_vec(),
                "truncated record",
            ),
            (record(MIDDLE, b"orphan"), "fragment without its first"),
            (
                record(FIRST, &batch(4, b"part")),
                "record without its last fragment",
            ),
            (record(FULL, b"short"), "record shorter than a write batch"),
        ];
        for (tail, reason) in tails {
            let mut log = good.clone();
            log.extend(&tail);
            write_logs(dir.path(), &[(7, &log)]);
            let repairs = check_commit_log(dir.path(), false).expect("check");
            assert_eq!(
                repairs,
                [Repair::Cut {
                    file: dir.path().join("000007.log"),
                    offset: good.len() as u64,
                    dropped: tail.len() as u64,
                    reason,
                }],
                "{reason}"
            );
            assert_eq!(fs::read(dir.path().join("000007.log")).expect("read"), good);
            assert_eq!(check_commit_log(dir.path(), false).expect("check"), []);
        }
        assert!(
            !dir.path().join("000007.log.damaged").exists(),
            "a cut keeps no copy"
        );
    }

    #[test]
    fn damage_that_held_no_write_is_left_out_and_the_original_kept() {
        // A write that failed half-way on a full disk leaves its bytes, and the next write
        // reuses its sequence number.
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = log_of(&[1, 2]);
        let torn = record(FULL, &batch(3, b"failed write"));
        log.extend(&torn[..torn.len() - 4]);
        let retried = log_of(&[3, 4]);
        log.extend(&retried);
        write_logs(dir.path(), &[(8, &log), (9, &log_of(&[5, 6]))]);
        let repairs = check_commit_log(dir.path(), false).expect("check");
        let file = dir.path().join("000008.log");
        let backup = dir.path().join("000008.log.damaged");
        assert_eq!(repairs.len(), 1, "{repairs:?}");
        assert!(matches!(
            &repairs[0],
            Repair::Skipped { file: f, lost: None, backup: b, .. } if *f == file && *b == backup
        ));
        let repaired = fs::read(&file).expect("read");
        assert_eq!(read(&repaired), (vec![1, 2, 3, 4], vec![]));
        assert_eq!(fs::read(&backup).expect("backup"), log);
        assert_eq!(check_commit_log(dir.path(), false).expect("check"), []);
    }

    #[test]
    fn damage_holding_writes_refuses_unless_salvaging_every_intact_record() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = log_of(&(1..=200).collect::<Vec<_>>());
        let second = log_of(&(201..=300).collect::<Vec<_>>());
        let mut damaged = first.clone();
        let at = offset_of(&first, 100);
        for b in &mut damaged[at + 9..at + 25] {
            *b ^= 0x5a;
        }
        write_logs(dir.path(), &[(10, &damaged), (11, &second)]);
        let file = dir.path().join("000010.log");
        match check_commit_log(dir.path(), false) {
            Err(CheckError::Damaged(refusal)) => assert_eq!(
                refusal,
                Refusal {
                    file: file.clone(),
                    offset: at as u64,
                    reason: "checksum mismatch",
                    gap: Gap {
                        first: Some(100),
                        next: 101
                    },
                    intact_records_after: 200,
                }
            ),
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert_eq!(fs::read(&file).expect("read"), damaged, "nothing changed");

        let repairs = check_commit_log(dir.path(), true).expect("salvage");
        assert!(matches!(
            &repairs[..],
            [Repair::Skipped { offset, lost: Some(Gap { first: Some(100), next: 101 }), .. }]
                if *offset == at as u64
        ));
        let mut expected: Vec<u64> = (1..=200).collect();
        expected.retain(|&s| s != 100);
        assert_eq!(read(&fs::read(&file).expect("read")), (expected, vec![]));
        assert_eq!(
            fs::read(dir.path().join("000011.log")).expect("read"),
            second
        );
        assert_eq!(check_commit_log(dir.path(), false).expect("check"), []);
    }

    #[test]
    fn damage_at_the_end_of_an_older_log_is_judged_by_the_next_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut older = log_of(&[1, 2]);
        older.extend(&record(FULL, &batch(3, b"torn"))[..10]);
        // The next log goes on at 3: the torn record held no acknowledged write.
        write_logs(dir.path(), &[(3, &older), (4, &log_of(&[3, 4]))]);
        let repairs = check_commit_log(dir.path(), false).expect("check");
        assert!(matches!(&repairs[..], [Repair::Cut { .. }]), "{repairs:?}");
        // It goes on at 4: write 3 is lost.
        write_logs(dir.path(), &[(3, &older), (4, &log_of(&[4, 5]))]);
        assert!(matches!(
            check_commit_log(dir.path(), false),
            Err(CheckError::Damaged(Refusal {
                gap: Gap {
                    first: Some(3),
                    next: 4
                },
                ..
            }))
        ));
    }

    #[test]
    fn a_damaged_fragment_loses_its_whole_record_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut writer = LogWriter::new(Vec::new());
        writer.add(FULL, &batch(1, b"one")).expect("write");
        writer
            .add(FULL, &batch(2, &vec![5u8; BLOCK_SIZE + 100]))
            .expect("write");
        writer.add(FULL, &batch(3, b"three")).expect("write");
        let mut log = writer.finish().expect("finish");
        log[BLOCK_SIZE + 20] ^= 1; // in the second fragment
        write_logs(dir.path(), &[(5, &log)]);
        let repairs = check_commit_log(dir.path(), true).expect("salvage");
        assert!(
            matches!(
                &repairs[..],
                [Repair::Skipped {
                    reason: "checksum mismatch",
                    lost: Some(Gap {
                        first: Some(2),
                        next: 3
                    }),
                    ..
                }]
            ),
            "{repairs:?}"
        );
        let repaired = fs::read(dir.path().join("000005.log")).expect("read");
        assert_eq!(read(&repaired), (vec![1, 3], vec![]));
    }

    #[test]
    fn a_recycled_log_is_left_to_rocksdb() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = vec![1, 2, 3, 4, 3, 0, 5, 0, 0, 0, 9, 1, 2, 3];
        log.extend([0xff; 20]);
        write_logs(dir.path(), &[(6, &log)]);
        assert_eq!(check_commit_log(dir.path(), false).expect("check"), []);
        assert_eq!(fs::read(dir.path().join("000006.log")).expect("read"), log);
        assert_eq!(
            check_commit_log(&dir.path().join("missing"), false).expect("check"),
            []
        );
    }

    #[test]
    fn ignorable_and_preallocated_records_are_not_damage() {
        let mut log = log_of(&[1]);
        log.extend(record(SAFE_TO_IGNORE | 0x10, b"ignorable"));
        log.extend(log_of(&[2]));
        assert_eq!(read(&log), (vec![1, 2], vec![]));
        // A zero header skips to the next block, as RocksDB's reader does.
        log.resize(BLOCK_SIZE, 0);
        log.extend(log_of(&[3]));
        assert_eq!(read(&log), (vec![1, 2, 3], vec![]));
    }
}
