//! The hint store: what `write_missed` keeps, the per-target buffers and files, the flush that
//! writes buffers to files, and the bookkeeping the dispatcher advances as hints are
//! acknowledged.
//!
//! Locks: a target's `buffer` is held only to append or take a record's bytes (never across
//! I/O: `write_missed` runs on the request's thread and must not wait); its `files` is held
//! across file I/O, only on blocking threads (the flusher, and the dispatcher's file steps).
//! A flush takes `files` before it takes the buffer, so two flushes of one target write its
//! records in the order they were buffered.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;

use coordinator::{HintedHandoff, MissedWrite, Mutation, WallClock};
use locator::HostId;

use crate::format::{self, Next, Record, RecordReader, HEADER_BYTES};
use crate::{HintFile, HintTargets, HintsConfig, HintsDisk, HintsError, TableLookup};

/// Bytes of hints held in memory, all targets together, waiting for the flusher. Past it a
/// missed write is not kept (counted as dropped for the disk): the flusher is behind, and
/// `write_missed` must not wait for it. Cassandra's buffer pool holds two 32 MiB buffers.
pub const MAX_BUFFERED_BYTES: usize = 64 << 20;
/// Buffered bytes past which the flusher is woken before its period is up.
const FLUSH_SOON_BYTES: usize = 8 << 20;
/// Hints (or bytes of them) the dispatcher reads from a file and sends at once.
pub(crate) const PAGE_HINTS: usize = 128;
pub(crate) const PAGE_BYTES: u64 = 512 << 10;

/// One target's counters and pending hints, as `helenus admin hints` shows them. Counts are
/// since this node started, except `pending`, which includes hints stored before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetStats {
    /// The node the hints are for.
    pub host: HostId,
    /// Hints kept and not yet delivered or discarded (buffered and in files).
    pub pending: u64,
    /// Hints kept.
    pub stored: u64,
    /// Hints the target acknowledged.
    pub delivered: u64,
    /// Missed writes not kept because the target was down longer than `max_hint_window`, or
    /// its oldest pending hint is older than that: it is left to repair.
    pub dropped_window: u64,
    /// Missed writes not kept, or hints lost before they were written, because the hints
    /// directory could not be written (full, unwritable) or the flusher was behind.
    pub dropped_disk: u64,
    /// Missed writes not kept because the target's hint files already held more than
    /// `max_hints_size_per_host`.
    pub dropped_size: u64,
    /// Hints discarded at replay as older than the smallest `gc_grace_seconds` of their
    /// tables (Cassandra's hint TTL): replaying them could resurrect deleted data.
    pub dropped_expired: u64,
    /// Hints discarded at replay because every table they write was dropped.
    pub dropped_table: u64,
    /// Hints lost to damage in their file, or that did not decode.
    pub dropped_corrupt: u64,
    /// When the last replay that left nothing pending ended, ms since the epoch.
    pub last_replay_ms: Option<i64>,
}

impl TargetStats {
    /// Every hint this target lost (not kept, or discarded unreplayed).
    pub fn dropped(&self) -> u64 {
        self.dropped_window
            + self.dropped_disk
            + self.dropped_size
            + self.dropped_expired
            + self.dropped_table
            + self.dropped_corrupt
    }
}

#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) stored: AtomicU64,
    pub(crate) delivered: AtomicU64,
    pub(crate) dropped_window: AtomicU64,
    pub(crate) dropped_disk: AtomicU64,
    pub(crate) dropped_size: AtomicU64,
    pub(crate) dropped_expired: AtomicU64,
    pub(crate) dropped_table: AtomicU64,
    pub(crate) dropped_corrupt: AtomicU64,
}

/// Hints appended and not yet flushed.
#[derive(Default)]
struct Buffer {
    bytes: Vec<u8>,
    /// Per record: where it ends in `bytes`, and its creation time.
    records: Vec<(usize, i64)>,
}

/// A file of a target's series.
#[derive(Debug)]
pub(crate) struct FileEntry {
    pub(crate) path: PathBuf,
    /// Records in the file.
    hints: u64,
    /// Records acknowledged or discarded, from the start.
    done: u64,
    /// Where the first record not yet acknowledged or discarded starts.
    pub(crate) offset: u64,
    /// The creation time of the oldest pending hint (at most: of the last one done).
    oldest_ms: i64,
    /// The file's size on disk (header and good records).
    size_bytes: u64,
}

/// The file being appended to.
struct OpenFile {
    entry: FileEntry,
    file: Box<dyn HintFile>,
    /// Bytes written (and good) so far.
    size_bytes: u64,
}

#[derive(Default)]
struct Files {
    /// Closed files, oldest first: what the dispatcher replays.
    closed: VecDeque<FileEntry>,
    open: Option<OpenFile>,
}

impl Files {
    fn pending(&self) -> u64 {
        self.closed
            .iter()
            .chain(self.open.as_ref().map(|o| &o.entry))
            .map(|f| f.hints - f.done)
            .sum()
    }

    /// Bytes of the target's files on disk (Cassandra's `HintsService.getTotalHintsSize`).
    fn size_bytes(&self) -> u64 {
        self.closed
            .iter()
            .chain(self.open.as_ref().map(|o| &o.entry))
            .map(|f| f.size_bytes)
            .sum()
    }

    fn oldest_ms(&self) -> i64 {
        self.closed
            .iter()
            .chain(self.open.as_ref().map(|o| &o.entry))
            .filter(|f| f.hints > f.done)
            .map(|f| f.oldest_ms)
            .min()
            .unwrap_or(i64::MAX)
    }
}

/// Where a target's dispatch stands.
#[derive(Debug, Default)]
pub(crate) struct DispatchState {
    pub(crate) running: bool,
    /// No new dispatch before this (a failed one's backoff).
    pub(crate) retry_at: Option<tokio::time::Instant>,
    pub(crate) backoff: Duration,
}

/// One target host's hints.
pub(crate) struct Target {
    pub(crate) host: HostId,
    buffer: Mutex<Buffer>,
    files: Mutex<Files>,
    /// Records in `buffer`, readable without its lock.
    buffered_hints: AtomicU64,
    /// `Files::pending` and `Files::oldest_ms` as of the last change, readable without the lock.
    pending_in_files: AtomicU64,
    oldest_in_files_ms: AtomicI64,
    /// `Files::size_bytes` as of the last change, readable without the lock.
    files_size_bytes: AtomicU64,
    /// The oldest buffered hint's creation time (`i64::MAX` when the buffer is empty).
    oldest_buffered_ms: AtomicI64,
    pub(crate) counters: Counters,
    pub(crate) dispatch: Mutex<DispatchState>,
    /// `TargetStats::last_replay_ms` (0: none yet).
    pub(crate) last_replay_ms: AtomicI64,
}

impl Target {
    fn new(host: HostId) -> Target {
        Target {
            host,
            buffer: Mutex::default(),
            files: Mutex::default(),
            buffered_hints: AtomicU64::new(0),
            pending_in_files: AtomicU64::new(0),
            oldest_in_files_ms: AtomicI64::new(i64::MAX),
            files_size_bytes: AtomicU64::new(0),
            oldest_buffered_ms: AtomicI64::new(i64::MAX),
            counters: Counters::default(),
            dispatch: Mutex::default(),
            last_replay_ms: AtomicI64::new(0),
        }
    }

    /// Hints kept and not yet delivered or discarded.
    pub(crate) fn pending(&self) -> u64 {
        self.buffered_hints.load(Ordering::Acquire) + self.pending_in_files.load(Ordering::Acquire)
    }

    fn oldest_pending_ms(&self) -> i64 {
        self.oldest_buffered_ms
            .load(Ordering::Acquire)
            .min(self.oldest_in_files_ms.load(Ordering::Acquire))
    }

    fn publish(&self, files: &Files) {
        self.pending_in_files
            .store(files.pending(), Ordering::Release);
        self.oldest_in_files_ms
            .store(files.oldest_ms(), Ordering::Release);
        self.files_size_bytes
            .store(files.size_bytes(), Ordering::Release);
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A page of a file's records for the dispatcher.
pub(crate) struct Page {
    pub(crate) path: PathBuf,
    /// Each record with the offset just past it.
    pub(crate) records: Vec<(u64, Record)>,
    /// Whether the page reaches the file's end (or damage that ends it).
    pub(crate) last: bool,
}

/// Every hint this node keeps for other nodes, and the way to them. Created by
/// [`HintStore::open`]; the coordinator gets it as its `HintedHandoff`, and [`crate::HintsService`]
/// runs its flusher and dispatcher.
pub struct HintStore {
    pub(crate) config: HintsConfig,
    pub(crate) targets: Arc<dyn HintTargets>,
    pub(crate) tables: Arc<dyn TableLookup>,
    pub(crate) clock: Arc<dyn WallClock>,
    disk: Arc<dyn HintsDisk>,
    by_target: RwLock<HashMap<HostId, Arc<Target>>>,
    buffered_bytes: AtomicUsize,
    /// Set when writing the hints directory failed; no hint is kept until the flusher's next
    /// period clears it to try again.
    disk_failed: AtomicBool,
    /// Whether the failure was logged (once, until a flush succeeds again).
    disk_failure_logged: AtomicBool,
    last_sequence: Mutex<i64>,
    pub(crate) flush_soon: tokio::sync::Notify,
    pub(crate) dispatch_soon: tokio::sync::Notify,
}

impl HintStore {
    /// Opens the store in `config.directory` (created if missing): every hint file there is
    /// checked, its damaged tail (a crash's torn record, or damage) cut at the last good
    /// record and logged; a file with no good record is removed, one whose header is not good
    /// renamed `*.corrupt`. Blocking (file I/O).
    pub fn open(
        config: HintsConfig,
        targets: Arc<dyn HintTargets>,
        tables: Arc<dyn TableLookup>,
        clock: Arc<dyn WallClock>,
        disk: Arc<dyn HintsDisk>,
    ) -> Result<HintStore, HintsError> {
        let dir = config.directory.clone();
        std::fs::create_dir_all(&dir).map_err(|source| HintsError::CreateDirectory {
            path: dir.clone(),
            source,
        })?;
        let read_error = |source| HintsError::ReadDirectory {
            path: dir.clone(),
            source,
        };
        let mut found: Vec<(HostId, i64, PathBuf)> = Vec::new();
        for entry in std::fs::read_dir(&dir).map_err(read_error)? {
            let entry = entry.map_err(read_error)?;
            let name = entry.file_name();
            if let Some((host, sequence)) = name.to_str().and_then(format::parse_file_name) {
                found.push((host, sequence, entry.path()));
            }
        }
        found.sort();
        let mut by_target: HashMap<HostId, Arc<Target>> = HashMap::new();
        let mut last_sequence = 0;
        for (host, sequence, path) in found {
            last_sequence = last_sequence.max(sequence);
            let Some(entry) = check_file(&path, host) else {
                continue;
            };
            let target = by_target
                .entry(host)
                .or_insert_with(|| Arc::new(Target::new(host)));
            let mut files = lock(&target.files);
            files.closed.push_back(entry);
            target.publish(&files);
        }
        let pending: u64 = by_target.values().map(|t| t.pending()).sum();
        if pending > 0 {
            tracing::info!(
                hints = pending,
                targets = by_target.len(),
                directory = %dir.display(),
                "hints found to replay"
            );
        }
        Ok(HintStore {
            config,
            targets,
            tables,
            clock,
            disk,
            by_target: RwLock::new(by_target),
            buffered_bytes: AtomicUsize::new(0),
            disk_failed: AtomicBool::new(false),
            disk_failure_logged: AtomicBool::new(false),
            last_sequence: Mutex::new(last_sequence),
            flush_soon: tokio::sync::Notify::new(),
            dispatch_soon: tokio::sync::Notify::new(),
        })
    }

    pub(crate) fn now_ms(&self) -> i64 {
        self.clock.now_micros().div_euclid(1000)
    }

    fn target(&self, host: HostId) -> Arc<Target> {
        if let Some(t) = self
            .by_target
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&host)
        {
            return t.clone();
        }
        self.by_target
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(host)
            .or_insert_with(|| Arc::new(Target::new(host)))
            .clone()
    }

    /// Every target with hints or counts, by host id.
    pub(crate) fn all_targets(&self) -> Vec<Arc<Target>> {
        let mut all: Vec<Arc<Target>> = self
            .by_target
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        all.sort_by_key(|t| t.host);
        all
    }

    /// Each target's pending hints and counters, by host id.
    pub fn stats(&self) -> Vec<TargetStats> {
        self.all_targets()
            .iter()
            .map(|t| {
                let c = &t.counters;
                let last = t.last_replay_ms.load(Ordering::Acquire);
                TargetStats {
                    host: t.host,
                    pending: t.pending(),
                    stored: c.stored.load(Ordering::Relaxed),
                    delivered: c.delivered.load(Ordering::Relaxed),
                    dropped_window: c.dropped_window.load(Ordering::Relaxed),
                    dropped_disk: c.dropped_disk.load(Ordering::Relaxed),
                    dropped_size: c.dropped_size.load(Ordering::Relaxed),
                    dropped_expired: c.dropped_expired.load(Ordering::Relaxed),
                    dropped_table: c.dropped_table.load(Ordering::Relaxed),
                    dropped_corrupt: c.dropped_corrupt.load(Ordering::Relaxed),
                    last_replay_ms: (last != 0).then_some(last),
                }
            })
            .collect()
    }

    /// Whether a hint to `host` is kept now; counts the refusal if not.
    fn should_hint(&self, target: &Target, now_ms: i64) -> bool {
        let window = self.config.max_hint_window;
        let down_too_long = self
            .targets
            .downtime(target.host)
            .is_some_and(|d| d > window);
        // Cassandra's persistent window (`hint_window_persistent_enabled`, on by default): a
        // target whose oldest pending hint is older than the window gets no more, which
        // holds across this node's restarts, when its downtime starts again from zero.
        let window_ms = i64::try_from(window.as_millis()).unwrap_or(i64::MAX);
        let oldest = target.oldest_pending_ms();
        let pending_too_old = oldest != i64::MAX && now_ms.saturating_sub(window_ms) > oldest;
        if down_too_long || pending_too_old {
            target
                .counters
                .dropped_window
                .fetch_add(1, Ordering::Relaxed);
            tracing::trace!(target = %target.host, "not hinting: past max_hint_window");
            return false;
        }
        if self.disk_failed.load(Ordering::Acquire) {
            target.counters.dropped_disk.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        // Cassandra's `max_hints_size_per_host` (0: no limit): the bytes on disk, not those
        // still buffered, and only once past it (`StorageProxy.shouldHint`).
        let max_size = self.config.max_hints_size_per_host_bytes;
        if max_size > 0 && target.files_size_bytes.load(Ordering::Acquire) > max_size {
            target.counters.dropped_size.fetch_add(1, Ordering::Relaxed);
            tracing::trace!(target = %target.host, "not hinting: past max_hints_size_per_host");
            return false;
        }
        true
    }

    /// Writes every target's buffered hints to its files and fsyncs them; with `close`, also
    /// closes each open file, so that the dispatcher can replay it. Blocking (file I/O).
    /// Answers whether every hint buffered when it started is now durable (`false`: the
    /// hints directory failed, and those hints are lost).
    pub fn flush(&self, close: bool) -> bool {
        let mut durable = true;
        for target in self.all_targets() {
            durable &= self.flush_target(&target, close);
        }
        durable
    }

    /// Lets writes to the hints directory be tried again after a failure (the flusher calls
    /// it every period).
    pub(crate) fn retry_disk(&self) {
        self.disk_failed.store(false, Ordering::Release);
    }

    /// `flush` for one target: whether the hints it took from the buffer are durable now
    /// (another thread's flush that took them first holds `files` until its fsync ends).
    pub(crate) fn flush_target(&self, target: &Target, close: bool) -> bool {
        let mut files = lock(&target.files);
        let mut durable = true;
        // The buffer's counts stay until the files' are published below, so that the target
        // never looks empty in between (the dispatcher would skip it for a whole period).
        let buffer = std::mem::take(&mut *lock(&target.buffer));
        self.buffered_bytes
            .fetch_sub(buffer.bytes.len(), Ordering::AcqRel);
        if !buffer.records.is_empty() {
            match self.write_buffer(target, &mut files, &buffer) {
                Ok(()) => {
                    if self.disk_failure_logged.swap(false, Ordering::AcqRel) {
                        tracing::info!("the hints directory is writable again; hints resume");
                    }
                }
                Err((unwritten, e)) => {
                    durable = false;
                    target
                        .counters
                        .dropped_disk
                        .fetch_add(unwritten, Ordering::Relaxed);
                    self.disk_failed.store(true, Ordering::Release);
                    if !self.disk_failure_logged.swap(true, Ordering::AcqRel) {
                        tracing::error!(
                            directory = %self.config.directory.display(),
                            error = %e,
                            lost = unwritten,
                            "cannot write hints: no hints are kept until the hints directory \
                             can be written again (writes go on; replicas that miss them need \
                             repair)"
                        );
                    }
                }
            }
        }
        if close {
            if let Some(open) = files.open.take() {
                files.closed.push_back(open.entry);
            }
        }
        target.publish(&files);
        let buffer_now = lock(&target.buffer);
        target
            .buffered_hints
            .fetch_sub(buffer.records.len() as u64, Ordering::AcqRel);
        let oldest = buffer_now.records.first().map_or(i64::MAX, |r| r.1);
        target.oldest_buffered_ms.store(oldest, Ordering::Release);
        durable
    }

    /// Appends `buffer`'s records to `target`'s files (rotating at `max_hints_file_size`) and
    /// fsyncs. On failure, the records not written (the count) are lost, and the open file
    /// is cut back to its last good record and closed.
    fn write_buffer(
        &self,
        target: &Target,
        files: &mut Files,
        buffer: &Buffer,
    ) -> Result<(), (u64, io::Error)> {
        let mut start = 0;
        let mut written = 0u64;
        let mut chunk_start = 0;
        let mut chunk_records: Vec<i64> = Vec::new();
        let total = buffer.records.len() as u64;
        for &(end, created_ms) in &buffer.records {
            let full = files.open.as_ref().is_some_and(|o| {
                o.size_bytes + (start - chunk_start) as u64 > HEADER_BYTES
                    && o.size_bytes + (end - chunk_start) as u64 > self.config.max_file_size_bytes
            });
            if full || files.open.is_none() {
                if !chunk_records.is_empty() {
                    self.append(files, &buffer.bytes[chunk_start..start], &chunk_records)
                        .map_err(|e| (total - written, e))?;
                    written += chunk_records.len() as u64;
                    chunk_records.clear();
                }
                chunk_start = start;
                if full {
                    let open = files.open.take().expect("full means open");
                    files.closed.push_back(open.entry);
                }
                self.create_file(target.host, files)
                    .map_err(|e| (total - written, e))?;
            }
            chunk_records.push(created_ms);
            start = end;
        }
        if !chunk_records.is_empty() {
            self.append(files, &buffer.bytes[chunk_start..start], &chunk_records)
                .map_err(|e| (total - written, e))?;
        }
        if let Some(open) = files.open.as_mut() {
            if let Err(e) = open.file.sync() {
                // What was appended may not be on disk: it stays in the file, which is closed
                // (a later append cannot fix what a failed fsync left, as the commit log's
                // "fsyncgate" taught), and its hints are still replayed from the page cache.
                let open = files.open.take().expect("open");
                files.closed.push_back(open.entry);
                return Err((0, e));
            }
        }
        Ok(())
    }

    /// Starts a new file for `host` as the open one.
    fn create_file(&self, host: HostId, files: &mut Files) -> io::Result<()> {
        let sequence = {
            let mut last = lock(&self.last_sequence);
            *last = self.now_ms().max(*last + 1);
            *last
        };
        let path = self
            .config
            .directory
            .join(format::file_name(host, sequence));
        let mut file = self.disk.create(&path)?;
        if let Err(e) = file.append(&format::encode_header(host, sequence)) {
            drop(file);
            let _ = std::fs::remove_file(&path);
            return Err(e);
        }
        files.open = Some(OpenFile {
            entry: FileEntry {
                path,
                hints: 0,
                done: 0,
                offset: HEADER_BYTES,
                oldest_ms: i64::MAX,
                size_bytes: HEADER_BYTES,
            },
            file,
            size_bytes: HEADER_BYTES,
        });
        Ok(())
    }

    /// Appends whole records to the open file; on failure cuts it back and closes it.
    fn append(&self, files: &mut Files, bytes: &[u8], created: &[i64]) -> io::Result<()> {
        let open = files.open.as_mut().expect("a file is open to append to");
        match open.file.append(bytes) {
            Ok(()) => {
                open.size_bytes += bytes.len() as u64;
                open.entry.size_bytes = open.size_bytes;
                open.entry.hints += created.len() as u64;
                if let Some(first) = created.iter().min() {
                    open.entry.oldest_ms = open.entry.oldest_ms.min(*first);
                }
                Ok(())
            }
            Err(e) => {
                let mut open = files.open.take().expect("open");
                if let Err(cut) = open.file.truncate(open.size_bytes) {
                    // The next open's scan cuts the partial record.
                    tracing::warn!(file = %open.entry.path.display(), error = %cut, "cannot cut a partial hint record");
                }
                if open.entry.hints > 0 {
                    files.closed.push_back(open.entry);
                } else {
                    let _ = std::fs::remove_file(&open.entry.path);
                }
                Err(e)
            }
        }
    }

    /// The next page of `target`'s oldest closed file, from where its delivery stands, or
    /// `None` when no closed file is left. A file that cannot be read, or ends in damage, ends
    /// its page there (`last`), its unread hints counted as lost. Blocking (file I/O).
    pub(crate) fn read_page(&self, target: &Target) -> Option<Page> {
        let (path, offset) = {
            let files = lock(&target.files);
            let front = files.closed.front()?;
            (front.path.clone(), front.offset)
        };
        let mut records = Vec::new();
        let mut bytes = 0;
        let mut reader = match RecordReader::open(&path, target.host, offset) {
            Ok(reader) => reader,
            Err(e) => {
                tracing::error!(file = %path.display(), error = %e, "cannot read a hint file; its hints are lost");
                return Some(Page {
                    path,
                    records,
                    last: true,
                });
            }
        };
        loop {
            if records.len() >= PAGE_HINTS || bytes >= PAGE_BYTES {
                return Some(Page {
                    path,
                    records,
                    last: false,
                });
            }
            match reader.next_record() {
                Ok(Next::Record(record)) => {
                    bytes += record.size_bytes;
                    records.push((reader.offset(), record));
                }
                Ok(Next::End) => {
                    return Some(Page {
                        path,
                        records,
                        last: true,
                    })
                }
                Ok(Next::Damaged(why)) => {
                    tracing::error!(file = %path.display(), offset = reader.offset(), "damaged hint file: {why}; the hints after this point are lost");
                    return Some(Page {
                        path,
                        records,
                        last: true,
                    });
                }
                Err(e) => {
                    tracing::error!(file = %path.display(), error = %e, "cannot read a hint file; the hints after this point are lost");
                    return Some(Page {
                        path,
                        records,
                        last: true,
                    });
                }
            }
        }
    }

    /// Records that `target`'s hints in `path` are done (acknowledged or discarded) up to
    /// `offset` (if given), `done` more of them, the last created at `last_created_ms`; with `finished`,
    /// the whole file is done and is deleted. Blocking (file I/O).
    pub(crate) fn advance(
        &self,
        target: &Target,
        path: &Path,
        offset: Option<u64>,
        done: u64,
        last_created_ms: Option<i64>,
        finished: bool,
    ) {
        let mut files = lock(&target.files);
        let Some(front) = files.closed.front_mut().filter(|f| f.path == path) else {
            return;
        };
        if let Some(offset) = offset {
            front.offset = offset;
        }
        front.done = (front.done + done).min(front.hints);
        if let Some(created) = last_created_ms {
            front.oldest_ms = front.oldest_ms.max(created);
        }
        if finished {
            let lost = front.hints - front.done;
            if lost > 0 {
                target
                    .counters
                    .dropped_corrupt
                    .fetch_add(lost, Ordering::Relaxed);
            }
            let entry = files.closed.pop_front().expect("front");
            if let Err(e) = std::fs::remove_file(&entry.path) {
                if e.kind() != io::ErrorKind::NotFound {
                    tracing::warn!(file = %entry.path.display(), error = %e, "cannot delete a replayed hint file");
                }
            }
        }
        target.publish(&files);
    }
}

/// Checks a hint file found at open: cuts a damaged tail, removes a file with no good record,
/// renames one whose header is not good. The file's entry if it holds hints.
fn check_file(path: &Path, host: HostId) -> Option<FileEntry> {
    let scanned = match format::scan(path, host) {
        Ok(scanned) => scanned,
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
            // Cut short in its header: a crash right after it was created; nothing in it.
            tracing::warn!(file = %path.display(), "removing a hint file cut short in its header");
            let _ = std::fs::remove_file(path);
            return None;
        }
        Err(e) => {
            let mut aside = path.as_os_str().to_owned();
            aside.push(".corrupt");
            tracing::error!(file = %path.display(), error = %e, "unreadable hint file; its hints are lost (renamed *.corrupt)");
            let _ = std::fs::rename(path, &aside);
            return None;
        }
    };
    if let Some(why) = &scanned.damage {
        tracing::warn!(
            file = %path.display(),
            hints_kept = scanned.hints,
            cut_at = scanned.good_bytes,
            "hint file damaged at its end ({why}); cut after its last good hint"
        );
        let cut = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(|f| {
                f.set_len(scanned.good_bytes)?;
                f.sync_all()
            });
        if let Err(e) = cut {
            tracing::error!(file = %path.display(), error = %e, "cannot cut a damaged hint file");
        }
    }
    if scanned.hints == 0 {
        let _ = std::fs::remove_file(path);
        return None;
    }
    Some(FileEntry {
        path: path.to_path_buf(),
        hints: scanned.hints,
        done: 0,
        offset: HEADER_BYTES,
        oldest_ms: scanned.first_created_ms.unwrap_or(i64::MAX),
        size_bytes: scanned.good_bytes,
    })
}

impl HintedHandoff for HintStore {
    /// Keeps a hint of a write `target` was down for or did not acknowledge in time, in
    /// memory until the flusher writes it: never waits on I/O. Not kept (`false`): hints
    /// disabled, this node as the target, a replica that answered with an error other than no
    /// answer at all (Cassandra hints only writes that time out or whose replica is down), the target past
    /// `max_hint_window`, the hints directory failing, or the buffer full.
    fn write_missed(&self, target: HostId, mutation: &Mutation, why: MissedWrite) -> bool {
        if !self.config.enabled || target == self.config.local {
            return false;
        }
        // `hinted_handoff_disabled_datacenters`: the operator's choice, not counted as a drop
        // (as Cassandra's `shouldHint`).
        if !self.config.disabled_datacenters.is_empty()
            && self
                .targets
                .datacenter(target)
                .is_some_and(|dc| self.config.disabled_datacenters.contains(&dc))
        {
            tracing::trace!(%target, "not hinting: its data centre is in hinted_handoff_disabled_datacenters");
            return false;
        }
        match &why {
            // No answer (unreachable, or not started by its deadline) is a timeout, whatever
            // the caller called it: the coordinator's late-acknowledgement task hands every
            // error over as `Failed`.
            MissedWrite::Failed(e) if e.is_no_answer() => {}
            MissedWrite::Failed(e) => {
                tracing::trace!(%target, error = %e, "not hinting a write the replica failed");
                return false;
            }
            MissedWrite::Down | MissedWrite::TimedOut => {}
        }
        let entry = self.target(target);
        let now_ms = self.now_ms();
        if !self.should_hint(&entry, now_ms) {
            return false;
        }
        let mut encoded = Vec::new();
        mutation::encode_mutation(&mutation.updates, &mut encoded);
        let mut record = Vec::with_capacity(encoded.len() + 17);
        format::encode_record(now_ms, mutation.durable_writes, &encoded, &mut record);
        let before = self
            .buffered_bytes
            .fetch_add(record.len(), Ordering::AcqRel);
        if before + record.len() > MAX_BUFFERED_BYTES {
            self.buffered_bytes
                .fetch_sub(record.len(), Ordering::AcqRel);
            entry.counters.dropped_disk.fetch_add(1, Ordering::Relaxed);
            self.flush_soon.notify_one();
            return false;
        }
        {
            let mut buffer = lock(&entry.buffer);
            buffer.bytes.extend_from_slice(&record);
            let end = buffer.bytes.len();
            buffer.records.push((end, now_ms));
            entry.buffered_hints.fetch_add(1, Ordering::AcqRel);
            entry.oldest_buffered_ms.fetch_min(now_ms, Ordering::AcqRel);
        }
        entry.counters.stored.fetch_add(1, Ordering::Relaxed);
        if before + record.len() > FLUSH_SOON_BYTES {
            self.flush_soon.notify_one();
        }
        true
    }

    /// Writes and fsyncs every buffered hint (`flush`), for the batch log's replay before it
    /// deletes a batch it hinted. `false` also when another flush failed since the flusher
    /// last retried the directory: it may have taken this caller's hints (set under the
    /// files' lock, so seen here).
    fn make_durable(&self) -> bool {
        self.flush(false) && !self.disk_failed.load(Ordering::Acquire)
    }
}
