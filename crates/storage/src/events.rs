//! What RocksDB reports from its background work, and which of its background errors must not
//! stop writes: an event listener installed through RocksDB's C API (the `rocksdb` crate has
//! none). All of the crate's `unsafe` for it is here.
//!
//! RocksDB rates every background error by its reason and status (`db/error_handler.cc`) and
//! stops every write to every table on anything above a soft error, until a recovery clears it;
//! a fatal or unrecoverable error is never cleared. Two kinds of error are rated that way
//! although nothing is lost and later writes are safe, and the listener clears them (RocksDB
//! asks its listeners before it records the error, `OnBackgroundError`):
//! - A failed compaction (other than for a full disk, which RocksDB rates a soft error). Its
//!   inputs stay as they were and its output is discarded; RocksDB itself treats every
//!   compaction error as harmless when `paranoid_checks` is off. With it
//!   on, one corrupt block in one table's data file stopped all writes to all tables. The
//!   engine instead stops that table's compactions (`RocksEngine::suspend_compactions`), as
//!   Cassandra marks a corrupt SSTable suspect and leaves it out of compactions.
//! - "Writer has previous error.": the commit log writer repeating an earlier failure (a full
//!   disk) to a later caller (the periodic sync, a memtable switch). The earlier failure is
//!   already the background error, with its own recovery (RocksDB's `SstFileManager` polls for
//!   free space and resumes); as an I/O error of its own, RocksDB rated the repeat fatal, so
//!   writes stayed stopped after space was freed, until a restart.
//!
//! Everything else keeps RocksDB's rating. Every error is counted and kept for the operator
//! (`RocksEngine::metrics`, the node's log).

use std::collections::{HashMap, VecDeque};
use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use librocksdb_sys as ffi;

/// Failed compactions remembered for the operator; older ones are dropped (each is also logged).
const FAILED_COMPACTIONS_KEPT: usize = 64;

/// RocksDB's `BackgroundErrorReason` (include/rocksdb/listener.h), in its declaration order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorReason {
    Flush,
    Compaction,
    WriteCallback,
    MemTable,
    ManifestWrite,
    FlushNoWal,
    ManifestWriteNoWal,
    AsyncFileOpen,
    Other(u32),
}

impl ErrorReason {
    fn from_raw(raw: u32) -> ErrorReason {
        match raw {
            0 => ErrorReason::Flush,
            1 => ErrorReason::Compaction,
            2 => ErrorReason::WriteCallback,
            3 => ErrorReason::MemTable,
            4 => ErrorReason::ManifestWrite,
            5 => ErrorReason::FlushNoWal,
            6 => ErrorReason::ManifestWriteNoWal,
            7 => ErrorReason::AsyncFileOpen,
            other => ErrorReason::Other(other),
        }
    }

    fn describe(self) -> &'static str {
        match self {
            ErrorReason::Flush | ErrorReason::FlushNoWal => "flush",
            ErrorReason::Compaction => "compaction",
            ErrorReason::WriteCallback => "commit log write",
            ErrorReason::MemTable => "memtable switch",
            ErrorReason::ManifestWrite | ErrorReason::ManifestWriteNoWal => "manifest write",
            ErrorReason::AsyncFileOpen => "file open",
            ErrorReason::Other(_) => "background work",
        }
    }
}

/// Whether a background error must leave writes running (see the module documentation). A
/// compaction that ran out of space is left to RocksDB: it rates that a soft error, which
/// stops no write, and holds compactions back until space is free again.
pub(crate) fn keeps_writes_running(reason: ErrorReason, message: &str) -> bool {
    (reason == ErrorReason::Compaction && !message.contains(NO_SPACE))
        // The commit log writer's repeat of its earlier failure, met by a write, a memtable
        // switch or a flush; the manifest's and data files' writers word their repeats alike,
        // and those keep RocksDB's rating.
        || (matches!(
            reason,
            ErrorReason::WriteCallback | ErrorReason::MemTable | ErrorReason::Flush
        ) && message.contains("Writer has previous error"))
}

/// How RocksDB words a full disk (`IOStatus::NoSpace`, from ENOSPC).
const NO_SPACE: &str = "No space left on device";

/// Whether RocksDB resumes writes by itself after this background error (one it records):
/// it rates a full disk a hard error and resumes once space is free, except while switching
/// commit log files (a memtable switch), and rates every other error fatal or unrecoverable
/// (`db/error_handler.cc`, with `paranoid_checks`), which it never resumes from. (It would
/// also resume after an error its file system marks retryable; the POSIX file system marks
/// only a full disk.)
pub(crate) fn resumes_by_itself(reason: ErrorReason, message: &str) -> bool {
    reason != ErrorReason::MemTable && message.contains(NO_SPACE)
}

/// A compaction that failed, as RocksDB reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FailedCompaction {
    /// The column family: a table's id, hyphenated.
    pub column_family: String,
    /// RocksDB's status, e.g. "Corruption: block checksum mismatch: ... in /data/000012.sst ...".
    pub status: String,
    /// The compaction's input files (paths).
    pub input_files: Vec<String>,
}

/// What the listener saw. Shared by the engine and RocksDB's background threads.
#[derive(Default)]
pub(crate) struct Events {
    state: Mutex<State>,
    /// A background error RocksDB does not resume from was recorded (`resumes_by_itself`):
    /// the engine must reopen the database (`RocksEngine::recover`).
    stopped_for_good: AtomicBool,
}

#[derive(Default)]
struct State {
    /// Background errors reported, and how many of them the listener cleared.
    background_errors: u64,
    cleared_background_errors: u64,
    /// Failed compactions per column family, since the engine opened.
    failed_compactions: HashMap<String, u64>,
    /// The latest failed compactions with their numbers (1, 2, ...), oldest first, at most
    /// `FAILED_COMPACTIONS_KEPT`.
    recent_failed_compactions: VecDeque<(u64, FailedCompaction)>,
    /// The number of the last failed compaction.
    last_failed_compaction: u64,
}

impl Events {
    fn state(&self) -> MutexGuard<'_, State> {
        // Counters only: a panic elsewhere cannot leave them inconsistent.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Background errors reported since the engine opened, and how many were cleared.
    pub(crate) fn background_errors(&self) -> (u64, u64) {
        let state = self.state();
        (state.background_errors, state.cleared_background_errors)
    }

    /// Whether a background error stopped writes for good since `clear_stopped_for_good`.
    pub(crate) fn stopped_for_good(&self) -> bool {
        self.stopped_for_good.load(Ordering::Acquire)
    }

    pub(crate) fn clear_stopped_for_good(&self) {
        self.stopped_for_good.store(false, Ordering::Release);
    }

    /// Failed compactions of the column family since the engine opened.
    pub(crate) fn failed_compactions(&self, column_family: &str) -> u64 {
        self.state()
            .failed_compactions
            .get(column_family)
            .copied()
            .unwrap_or(0)
    }

    /// Failed compactions of every column family since the engine opened.
    pub(crate) fn all_failed_compactions(&self) -> u64 {
        self.state().last_failed_compaction
    }

    /// The latest failure of the column family's compactions, if any is remembered.
    pub(crate) fn last_failed_compaction(&self, column_family: &str) -> Option<FailedCompaction> {
        self.state()
            .recent_failed_compactions
            .iter()
            .rev()
            .find(|(_, f)| f.column_family == column_family)
            .map(|(_, f)| f.clone())
    }

    /// The remembered failed compactions numbered after `after`, oldest first, with their
    /// numbers (pass the last one back next time).
    pub(crate) fn failed_compactions_after(&self, after: u64) -> Vec<(u64, FailedCompaction)> {
        self.state()
            .recent_failed_compactions
            .iter()
            .filter(|(number, _)| *number > after)
            .cloned()
            .collect()
    }

    /// Records a background error; true if it must be cleared.
    fn background_error(&self, reason: ErrorReason, message: &str) -> bool {
        let clear = keeps_writes_running(reason, message);
        if !clear && !resumes_by_itself(reason, message) {
            self.stopped_for_good.store(true, Ordering::Release);
        }
        {
            let mut state = self.state();
            state.background_errors += 1;
            if clear {
                state.cleared_background_errors += 1;
            }
        }
        if clear {
            // A failed compaction is logged with its table and files (`compaction_failed`); a
            // repeated commit log error repeats one logged already.
            tracing::debug!(
                what = reason.describe(),
                error = message,
                "background error; writes continue"
            );
        } else if reason == ErrorReason::Compaction {
            tracing::error!(
                what = reason.describe(),
                error = message,
                "background error; compactions wait until there is room again"
            );
        } else if resumes_by_itself(reason, message) {
            tracing::error!(
                what = reason.describe(),
                error = message,
                "background error; writes stop until there is room again"
            );
        } else {
            tracing::error!(
                what = reason.describe(),
                error = message,
                "background error; writes stop until storage is reopened"
            );
        }
        clear
    }

    fn compaction_failed(&self, failure: FailedCompaction) {
        tracing::error!(
            table = failure.column_family,
            error = failure.status,
            files = ?failure.input_files,
            "compaction failed"
        );
        let mut state = self.state();
        *state
            .failed_compactions
            .entry(failure.column_family.clone())
            .or_default() += 1;
        if state.recent_failed_compactions.len() == FAILED_COMPACTIONS_KEPT {
            state.recent_failed_compactions.pop_front();
        }
        state.last_failed_compaction += 1;
        let number = state.last_failed_compaction;
        state.recent_failed_compactions.push_back((number, failure));
    }
}

/// Installs a listener reporting to `events` in `options` (the database's options: RocksDB
/// keeps its listeners there).
pub(crate) fn install(options: &mut rocksdb::Options, events: Arc<Events>) {
    use rocksdb::AsRawPtr;
    let state = Arc::into_raw(events) as *mut c_void;
    // SAFETY: `state` is an `Arc<Events>` turned into a pointer; RocksDB passes it back to the
    // callbacks below, which only borrow it, and to `destroy` once, when the listener is
    // destroyed (it is owned by a shared pointer in every copy of the options), which turns it
    // back into the `Arc` and drops it. Every callback is given: RocksDB's C wrapper calls them
    // without checking for null. `options.as_raw_ptr()` is valid while `options` lives, and
    // RocksDB takes its own reference to the listener.
    unsafe {
        let listener = ffi::rocksdb_eventlistener_create(
            state,
            Some(destroy),
            Some(ignore_flush),
            Some(ignore_flush),
            Some(ignore_compaction),
            Some(compaction_completed),
            Some(ignore_subcompaction),
            Some(ignore_subcompaction),
            Some(ignore_ingestion),
            Some(background_error),
            Some(ignore_stall),
            Some(ignore_memtable_sealed),
        );
        ffi::rocksdb_options_add_eventlistener(options.as_raw_ptr(), listener);
    }
}

/// # Safety
/// `state` comes from `install`'s `Arc::into_raw`, and this is its last use.
unsafe extern "C" fn destroy(state: *mut c_void) {
    drop(unsafe { Arc::from_raw(state as *const Events) });
}

/// # Safety
/// `state` comes from `install`, and RocksDB keeps it alive while the listener exists.
unsafe fn events<'a>(state: *mut c_void) -> &'a Events {
    unsafe { &*(state as *const Events) }
}

/// A string RocksDB's C API allocated (or null), copied and freed.
///
/// # Safety
/// `ptr` is null or a NUL-terminated string allocated by RocksDB's C API for the caller.
unsafe fn take_c_string(ptr: *mut c_char) -> Option<String> {
    if ptr.is_null() {
        return None;
    }
    let text = unsafe { CStr::from_ptr(ptr) }
        .to_string_lossy()
        .into_owned();
    unsafe { ffi::rocksdb_free(ptr as *mut c_void) };
    Some(text)
}

/// A (pointer, length) string borrowed from RocksDB, copied.
///
/// # Safety
/// `ptr` is null or points to `len` readable bytes.
unsafe fn copy_c_bytes(ptr: *const c_char, len: usize) -> String {
    if ptr.is_null() {
        return String::new();
    }
    let bytes = unsafe { std::slice::from_raw_parts(ptr as *const u8, len) };
    String::from_utf8_lossy(bytes).into_owned()
}

/// `EventListener::OnBackgroundError`: RocksDB records `status` as its background error after
/// this returns, unless it was reset to OK.
///
/// # Safety
/// Called by RocksDB with the listener's state and a valid status pointer.
unsafe extern "C" fn background_error(
    state: *mut c_void,
    reason: u32,
    status: *mut ffi::rocksdb_status_ptr_t,
) {
    let mut error: *mut c_char = std::ptr::null_mut();
    // SAFETY: `status` is valid for this call; the message is allocated for us to free.
    let message = unsafe {
        ffi::rocksdb_status_ptr_get_error(status, &mut error);
        take_c_string(error)
    };
    let Some(message) = message else {
        return; // an OK status: nothing to do
    };
    let events = unsafe { events(state) };
    let reason = ErrorReason::from_raw(reason);
    let clear = catch_panic(|| events.background_error(reason, &message))
        // Whatever failed, the error itself is still rated: the decision needs no logging.
        .unwrap_or_else(|| keeps_writes_running(reason, &message));
    if clear {
        // SAFETY: as above; RocksDB reads the status after this returns.
        unsafe { ffi::rocksdb_reset_status(status) };
    }
}

/// Runs `f`, turning a panic into `None`: a panic must not unwind into RocksDB's C++ frames,
/// which aborts the process (the recording and logging above should not panic, but a log
/// that cannot be written is a fault these callbacks are called in).
fn catch_panic<T>(f: impl FnOnce() -> T) -> Option<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).ok()
}

/// `EventListener::OnCompactionCompleted`, also called for a compaction that failed.
///
/// # Safety
/// Called by RocksDB with the listener's state and a valid job info pointer.
unsafe extern "C" fn compaction_completed(
    state: *mut c_void,
    _db: *mut ffi::rocksdb_t,
    info: *const ffi::rocksdb_compactionjobinfo_t,
) {
    let mut error: *mut c_char = std::ptr::null_mut();
    // SAFETY: `info` is valid for this call; strings it returns are borrowed from it, except
    // the status message, which is allocated for us.
    let (status, column_family, input_files) = unsafe {
        ffi::rocksdb_compactionjobinfo_status(info, &mut error);
        let Some(status) = take_c_string(error) else {
            return; // it succeeded
        };
        let mut len = 0;
        let name = ffi::rocksdb_compactionjobinfo_cf_name(info, &mut len);
        let column_family = copy_c_bytes(name, len);
        let count = ffi::rocksdb_compactionjobinfo_input_files_count(info);
        let input_files = (0..count)
            .map(|i| {
                let mut len = 0;
                let file = ffi::rocksdb_compactionjobinfo_input_file_at(info, i, &mut len);
                copy_c_bytes(file, len)
            })
            .collect();
        (status, column_family, input_files)
    };
    // Shutdown and dropped tables cancel compactions; those are not failures.
    if status.contains("Shutdown in progress") || status.contains("Column family dropped") {
        return;
    }
    let events = unsafe { events(state) };
    catch_panic(|| {
        events.compaction_failed(FailedCompaction {
            column_family,
            status,
            input_files,
        })
    });
}

unsafe extern "C" fn ignore_flush(
    _: *mut c_void,
    _: *mut ffi::rocksdb_t,
    _: *const ffi::rocksdb_flushjobinfo_t,
) {
}

unsafe extern "C" fn ignore_compaction(
    _: *mut c_void,
    _: *mut ffi::rocksdb_t,
    _: *const ffi::rocksdb_compactionjobinfo_t,
) {
}

unsafe extern "C" fn ignore_subcompaction(
    _: *mut c_void,
    _: *const ffi::rocksdb_subcompactionjobinfo_t,
) {
}

unsafe extern "C" fn ignore_ingestion(
    _: *mut c_void,
    _: *mut ffi::rocksdb_t,
    _: *const ffi::rocksdb_externalfileingestioninfo_t,
) {
}

unsafe extern "C" fn ignore_stall(_: *mut c_void, _: *const ffi::rocksdb_writestallinfo_t) {}

unsafe extern "C" fn ignore_memtable_sealed(_: *mut c_void, _: *const ffi::rocksdb_memtableinfo_t) {
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compaction_errors_and_repeated_writer_errors_keep_writes_running() {
        let corrupt = "Corruption: block checksum mismatch: stored = 1, computed = 2  in /d/000012.sst offset 0 size 10";
        assert!(keeps_writes_running(ErrorReason::Compaction, corrupt));
        assert!(keeps_writes_running(
            ErrorReason::Compaction,
            "IO error: While open a file for appending: 000012.sst: Too many open files"
        ));
        // RocksDB rates it soft: it stops no write, and RocksDB holds compactions back.
        assert!(!keeps_writes_running(
            ErrorReason::Compaction,
            "IO error: No space left on device"
        ));
        let repeat = "IO error: Writer has previous error.";
        for reason in [
            ErrorReason::WriteCallback,
            ErrorReason::MemTable,
            ErrorReason::Flush,
        ] {
            assert!(keeps_writes_running(reason, repeat), "{reason:?}");
        }
        // The first failure of the commit log, a failed flush, a corrupt memtable: RocksDB's
        // rating stands.
        for (reason, message) in [
            (
                ErrorReason::WriteCallback,
                "IO error: No space left on device: While appending to file: 000004.log",
            ),
            (ErrorReason::Flush, "IO error: No space left on device"),
            (ErrorReason::MemTable, "Corruption: bad entry"),
            (ErrorReason::ManifestWrite, "IO error: Input/output error"),
        ] {
            assert!(
                !keeps_writes_running(reason, message),
                "{reason:?} {message}"
            );
        }
        assert_eq!(ErrorReason::from_raw(1), ErrorReason::Compaction);
    }

    #[test]
    fn only_a_full_disk_outside_a_memtable_switch_resumes_by_itself() {
        let full = "IO error: No space left on device: While appending to file: 000004.log";
        let no_descriptors =
            "IO error: While open a file for appending: 000010.log: Too many open files";
        assert!(resumes_by_itself(ErrorReason::WriteCallback, full));
        assert!(resumes_by_itself(ErrorReason::Flush, full));
        assert!(!resumes_by_itself(ErrorReason::MemTable, full));
        assert!(!resumes_by_itself(ErrorReason::MemTable, no_descriptors));
        assert!(!resumes_by_itself(ErrorReason::FlushNoWal, no_descriptors));
        let events = Events::default();
        assert!(!events.background_error(ErrorReason::WriteCallback, full));
        assert!(!events.stopped_for_good(), "a full disk is resumed from");
        assert!(events.background_error(ErrorReason::Compaction, no_descriptors));
        assert!(!events.stopped_for_good(), "a cleared error stops nothing");
        assert!(!events.background_error(ErrorReason::MemTable, no_descriptors));
        assert!(events.stopped_for_good());
        events.clear_stopped_for_good();
        assert!(!events.stopped_for_good());
        assert_eq!(ErrorReason::from_raw(99), ErrorReason::Other(99));
    }

    #[test]
    fn failed_compactions_are_counted_per_table_and_the_latest_kept() {
        let events = Events::default();
        for i in 0..FAILED_COMPACTIONS_KEPT + 3 {
            events.compaction_failed(FailedCompaction {
                column_family: if i % 2 == 0 { "a" } else { "b" }.to_string(),
                status: format!("Corruption: {i}"),
                input_files: vec![format!("/d/{i:06}.sst")],
            });
        }
        assert_eq!(events.failed_compactions("a"), 34);
        assert_eq!(events.failed_compactions("b"), 33);
        assert_eq!(events.failed_compactions("c"), 0);
        assert_eq!(events.all_failed_compactions(), 67);
        let last = events.last_failed_compaction("a").expect("a failed");
        assert_eq!(last.status, "Corruption: 66");
        let kept = events.failed_compactions_after(0);
        assert_eq!(kept.len(), FAILED_COMPACTIONS_KEPT);
        assert_eq!((kept[0].0, kept[0].1.status.as_str()), (4, "Corruption: 3"));
        let newer = events.failed_compactions_after(65);
        assert_eq!(newer.len(), 2);
        assert_eq!(newer[1].0, 67);
        assert!(events.failed_compactions_after(67).is_empty());
    }
}
