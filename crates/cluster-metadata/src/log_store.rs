//! The durable Raft log and vote (openraft's `RaftLogStorage`), in the node's metadata
//! directory, without RocksDB.
//!
//! Files (`files.rs` describes their bytes):
//! - `vote`, `committed`, `purged`: value files holding the vote, the last committed log id,
//!   and the last log id purged (compacted into a snapshot).
//! - `log`: a record file, one record per entry (`openraft::Entry` as JSON), consecutive
//!   indexes. Appends go at the log's known good length (never at the file's cursor, which a
//!   reopen leaves at the start) and are fsynced before openraft is told they are durable; a
//!   conflicting suffix is truncated in place; a purge waits until the state machine's
//!   `state` file covers it, writes `purged`, then rewrites `log` without the purged entries
//!   (a crash between leaves entries at or below `purged` that loading skips).
//!
//! Opening checks the log against the state machine's applied log id ([`LogStore::open`]),
//! so that what openraft reads at a restart is consistent whatever write a crash cut short.
//!
//! Every entry since the last purge is also kept in memory: the metadata log is compacted
//! every few hundred entries (`MetadataConfig::snapshot_every_entries`), so that is small.
//! File I/O runs on the Raft core's task: metadata writes are rare and small.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{self, File};
use std::io::{self, Write};
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{LogId, RaftLogReader, StorageError, StorageIOError, Vote};
use tokio::sync::watch;

use crate::files;
use crate::state_machine::{Persisted, StateMachine};
use crate::{Entry, NodeId, TypeConfig};

const LOG_FILE: &str = "log";
const VOTE_FILE: &str = "vote";
const COMMITTED_FILE: &str = "committed";
const PURGED_FILE: &str = "purged";

/// The Raft log and vote of one node, kept in a directory. Cloning shares it (openraft's log
/// reader is a clone).
#[derive(Clone)]
pub struct LogStore {
    inner: Arc<Mutex<LogInner>>,
    /// What the state machine's files hold: a purge waits until they cover it.
    state_machine: watch::Receiver<Persisted>,
}

struct LogInner {
    dir: PathBuf,
    file: File,
    /// Index → (byte offset in `log`, entry), every entry after `last_purged`.
    entries: BTreeMap<u64, (u64, Entry)>,
    /// The byte length of `log`: where the next record goes.
    length: u64,
    vote: Option<Vote<NodeId>>,
    committed: Option<LogId<NodeId>>,
    last_purged: Option<LogId<NodeId>>,
}

impl LogStore {
    /// Opens the log in `dir` (created if missing), dropping a torn last record, and makes it
    /// agree with `state_machine`, opened from the same directory first.
    ///
    /// On return, what openraft assumes after a restart holds: the log holds every entry
    /// from just after `purged` (or from index 0) to its last, consecutively; the state
    /// machine can be caught up from it (`purged` is not past `applied`); the committed log
    /// id is not past the last entry that could be applied (the log's last, or `applied`).
    ///
    /// A log whose first entries are missing although `purged` does not cover them (what a
    /// log written by a build that appended at the file's start after a restart looks like)
    /// is recovered when the state machine has applied past the gap: the log is purged up to
    /// `applied`, as after a snapshot (a lagging node then catches up from a snapshot).
    /// Anything else missing is corruption, an error naming what is missing.
    ///
    /// A purge waits until the state machine's files cover it, so a crash never leaves the
    /// log purged past what the state machine saved.
    pub fn open(dir: &Path, state_machine: &StateMachine) -> io::Result<LogStore> {
        LogStore::open_with(dir, state_machine.applied(), state_machine.persisted())
    }

    fn open_with(
        dir: &Path,
        applied: Option<LogId<NodeId>>,
        state_machine: watch::Receiver<Persisted>,
    ) -> io::Result<LogStore> {
        fs::create_dir_all(dir)?;
        let vote = files::read_value(dir, VOTE_FILE)?;
        let committed = files::read_value(dir, COMMITTED_FILE)?;
        let last_purged: Option<LogId<NodeId>> = files::read_value(dir, PURGED_FILE)?;
        let path = dir.join(LOG_FILE);
        let (records, length) = files::read_records::<Entry>(&path)?;
        let purged_index = last_purged.map(|l| l.index);
        let mut entries = BTreeMap::new();
        for (offset, entry) in records {
            if purged_index.is_some_and(|p| entry.log_id.index <= p) {
                continue;
            }
            entries.insert(entry.log_id.index, (offset, entry));
        }
        check_consecutive(&path, &entries)?;
        let file = files::durable(dir, || files::open_records(&path, length))?;
        let mut inner = LogInner {
            dir: dir.to_path_buf(),
            file,
            entries,
            length,
            vote,
            committed,
            last_purged,
        };
        inner.reconcile(applied)?;
        Ok(LogStore {
            inner: Arc::new(Mutex::new(inner)),
            state_machine,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LogInner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn corrupt(path: &Path, what: String) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{} is corrupt: {what}", path.display()),
    )
}

/// Checks that the entries' indexes follow each other (where they start is
/// [`LogInner::reconcile`]'s business).
fn check_consecutive(path: &Path, entries: &BTreeMap<u64, (u64, Entry)>) -> io::Result<()> {
    let mut expected = None;
    for index in entries.keys() {
        if let Some(expected) = expected.filter(|e| e != index) {
            return Err(corrupt(
                path,
                format!("entry {index} where {expected} was expected"),
            ));
        }
        expected = Some(index + 1);
    }
    Ok(())
}

impl LogInner {
    /// Makes the log agree with the state machine's `applied` at open (see
    /// [`LogStore::open`]).
    fn reconcile(&mut self, applied: Option<LogId<NodeId>>) -> io::Result<()> {
        let path = self.dir.join(LOG_FILE);
        let first_expected = self.last_purged.map_or(0, |p| p.index + 1);
        let applied_next = applied.map_or(0, |a| a.index + 1);
        if first_expected > applied_next {
            return Err(corrupt(
                &path,
                format!(
                    "the log is purged up to index {} but the state machine has applied only up \
                     to {applied:?}, and the entries between are gone",
                    first_expected - 1
                ),
            ));
        }
        if let Some(applied) = applied {
            if let Some((_, entry)) = self.entries.get(&applied.index) {
                if entry.log_id != applied {
                    return Err(corrupt(
                        &path,
                        format!(
                            "the state machine applied {applied} but the log holds {} at its index",
                            entry.log_id
                        ),
                    ));
                }
            }
        }
        if let Some(first) = self.entries.keys().next().copied() {
            if first != first_expected {
                if first > applied_next {
                    return Err(corrupt(
                        &path,
                        format!(
                            "entries {first_expected} to {} are missing, and the state machine \
                             has applied only up to {applied:?}",
                            first - 1
                        ),
                    ));
                }
                let applied = applied.expect("first > first_expected >= 0, first <= applied_next");
                tracing::warn!(
                    "{}: entries {first_expected} to {} are missing; the state machine has \
                     applied them, so the log is purged up to {applied}",
                    path.display(),
                    first - 1
                );
                self.purge(applied)?;
            }
        }
        let last = self.last_log_id();
        if self
            .committed
            .is_some_and(|c| Some(c.index) > last.map(|l| l.index))
        {
            let kept = std::cmp::max(last, applied);
            if self.committed.map(|c| c.index) > kept.map(|k| k.index) {
                tracing::warn!(
                    "{}: committed {:?} is past the last entry, {last:?}, and the state machine's \
                     {applied:?}; the entries between come again from the leader",
                    path.display(),
                    self.committed
                );
                self.committed = kept;
            }
        }
        Ok(())
    }

    fn append(&mut self, entries: Vec<Entry>) -> io::Result<()> {
        let mut bytes = Vec::new();
        let mut placed = Vec::with_capacity(entries.len());
        for entry in entries {
            let offset = self.length + bytes.len() as u64;
            files::encode_record(&entry, &mut bytes)?;
            placed.push((offset, entry));
        }
        let at = self.length;
        let file = &mut self.file;
        files::durable(&self.dir, || files::append_records(file, at, &bytes))?;
        self.length += bytes.len() as u64;
        for (offset, entry) in placed {
            self.entries.insert(entry.log_id.index, (offset, entry));
        }
        Ok(())
    }

    /// Drops entries from `index` on.
    fn truncate(&mut self, index: u64) -> io::Result<()> {
        let Some((_, (offset, _))) = self.entries.range(index..).next() else {
            return Ok(());
        };
        let offset = *offset;
        let file = &self.file;
        files::durable(&self.dir, || {
            file.set_len(offset)?;
            file.sync_all()
        })?;
        self.length = offset;
        self.entries.split_off(&index);
        Ok(())
    }

    /// Drops entries up to `log_id` (included): `purged` first, then `log` rewritten.
    fn purge(&mut self, log_id: LogId<NodeId>) -> io::Result<()> {
        files::write_value(&self.dir, PURGED_FILE, &log_id)?;
        self.last_purged = Some(log_id);
        let kept = self.entries.split_off(&(log_id.index + 1));
        let mut bytes = Vec::new();
        let mut entries = BTreeMap::new();
        for (index, (_, entry)) in kept {
            let offset = bytes.len() as u64;
            files::encode_record(&entry, &mut bytes)?;
            entries.insert(index, (offset, entry));
        }
        let dir = &self.dir;
        let file = files::durable(dir, || {
            let tmp = dir.join(format!("{LOG_FILE}.tmp"));
            {
                let mut file = File::create(&tmp)?;
                file.write_all(&bytes)?;
                file.sync_all()?;
            }
            let path = dir.join(LOG_FILE);
            fs::rename(&tmp, &path)?;
            files::sync_dir(dir)?;
            files::open_records(&path, bytes.len() as u64)
        })?;
        self.file = file;
        self.length = bytes.len() as u64;
        self.entries = entries;
        Ok(())
    }

    fn last_log_id(&self) -> Option<LogId<NodeId>> {
        self.entries
            .values()
            .next_back()
            .map(|(_, e)| e.log_id)
            .or(self.last_purged)
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError<NodeId>> {
        Ok(self
            .lock()
            .entries
            .range(range)
            .map(|(_, (_, e))| e.clone())
            .collect())
    }
}

impl LogStore {
    /// The id of the last entry in the log (or of the last purged one, if the log is empty
    /// after a purge): what a pre-vote compares. It lags openraft's own view only while an
    /// append is being written.
    pub(crate) fn last_log_id(&self) -> Option<LogId<NodeId>> {
        self.lock().last_log_id()
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<NodeId>> {
        let inner = self.lock();
        Ok(LogState {
            last_purged_log_id: inner.last_purged,
            last_log_id: inner.last_log_id(),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        let mut inner = self.lock();
        files::write_value(&inner.dir, VOTE_FILE, vote)
            .map_err(|e| StorageIOError::write_vote(&e))?;
        inner.vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        Ok(self.lock().vote)
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogId<NodeId>>,
    ) -> Result<(), StorageError<NodeId>> {
        let mut inner = self.lock();
        let written = match committed {
            Some(log_id) => files::write_value(&inner.dir, COMMITTED_FILE, &log_id),
            None => files::remove_value(&inner.dir, COMMITTED_FILE),
        };
        written.map_err(|e| StorageIOError::write(&e))?;
        inner.committed = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<NodeId>>, StorageError<NodeId>> {
        Ok(self.lock().committed)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let appended = self.lock().append(entries.into_iter().collect());
        match appended {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                let error = StorageIOError::write_logs(&e);
                callback.log_io_completed(Err(e));
                Err(error.into())
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        self.lock()
            .truncate(log_id.index)
            .map_err(|e| StorageIOError::write_logs(&e).into())
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        let covered = self
            .state_machine
            .wait_for(|p| match p {
                Persisted::Upto(index) => *index >= Some(log_id.index),
                Persisted::Failed => true,
            })
            .await
            .map(|p| *p);
        if !matches!(covered, Ok(Persisted::Upto(_))) {
            let reason = format!(
                "not purging the log up to {log_id}: the state machine stopped before saving it"
            );
            return Err(StorageIOError::write_logs(&io::Error::other(reason)).into());
        }
        self.lock()
            .purge(log_id)
            .map_err(|e| StorageIOError::write_logs(&e).into())
    }
}

#[cfg(test)]
mod tests {
    use openraft::{CommittedLeaderId, EntryPayload};

    use super::*;

    fn entry(term: u64, index: u64) -> Entry {
        Entry {
            log_id: log_id(term, index),
            payload: EntryPayload::Blank,
        }
    }

    fn log_id(term: u64, index: u64) -> LogId<NodeId> {
        LogId::new(CommittedLeaderId::new(term, NodeId::from_u128(1)), index)
    }

    /// Opens the log as if the state machine had applied up to `applied`.
    fn open(dir: &Path, applied: Option<LogId<NodeId>>) -> io::Result<LogStore> {
        let (_, persisted) = watch::channel(Persisted::Upto(applied.map(|l| l.index)));
        LogStore::open_with(dir, applied, persisted)
    }

    fn indexes(store: &LogStore) -> Vec<u64> {
        store.lock().entries.keys().copied().collect()
    }

    fn append(store: &LogStore, term: u64, indexes: std::ops::RangeInclusive<u64>) {
        store
            .lock()
            .append(indexes.map(|i| entry(term, i)).collect())
            .expect("appended");
    }

    #[test]
    fn appends_truncations_and_purges_survive_reopening() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store = open(dir.path(), None).expect("opened");
        append(&store, 1, 1..=6);
        store.lock().truncate(5).expect("truncated");
        append(&store, 2, 5..=5);
        store.lock().purge(log_id(1, 2)).expect("purged");
        drop(store);

        let store = open(dir.path(), Some(log_id(1, 2))).expect("reopened");
        assert_eq!(indexes(&store), vec![3, 4, 5]);
        let inner = store.lock();
        assert_eq!(inner.last_purged, Some(log_id(1, 2)));
        assert_eq!(inner.last_log_id(), Some(log_id(2, 5)));
    }

    /// The bug this store had: the log file was opened with its cursor at byte 0, so the
    /// first append after a reopen, a purge or a truncation landed at the wrong place.
    #[test]
    fn appends_after_a_reopen_a_truncation_and_a_purge_go_at_the_end() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store = open(dir.path(), None).expect("opened");
        append(&store, 1, 0..=3);
        drop(store);
        let store = open(dir.path(), None).expect("reopened");
        append(&store, 1, 4..=4);
        store.lock().truncate(3).expect("truncated");
        append(&store, 2, 3..=5);
        store.lock().purge(log_id(1, 1)).expect("purged");
        append(&store, 2, 6..=6);
        drop(store);
        let store = open(dir.path(), Some(log_id(1, 1))).expect("reopened");
        assert_eq!(indexes(&store), vec![2, 3, 4, 5, 6]);
        let terms: Vec<u64> = store
            .lock()
            .entries
            .values()
            .map(|(_, e)| e.log_id.leader_id.term)
            .collect();
        assert_eq!(terms, vec![1, 2, 2, 2, 2]);
        append(&store, 2, 7..=7);
        drop(store);
        let store = open(dir.path(), Some(log_id(1, 1))).expect("reopened");
        assert_eq!(indexes(&store), (2..=7).collect::<Vec<_>>());
    }

    #[test]
    fn a_purge_cut_short_by_a_crash_skips_the_purged_entries() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store = open(dir.path(), None).expect("opened");
        append(&store, 1, 1..=4);
        drop(store);
        // As if the node stopped after writing `purged` and before rewriting `log`.
        files::write_value(dir.path(), PURGED_FILE, &log_id(1, 2)).expect("written");
        let store = open(dir.path(), Some(log_id(1, 4))).expect("reopened");
        assert_eq!(indexes(&store), vec![3, 4]);
    }

    #[test]
    fn a_log_missing_its_first_entries_is_purged_to_what_the_state_machine_applied() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store = open(dir.path(), None).expect("opened");
        append(&store, 1, 3..=6); // entries 0 to 2 missing, nothing purged
        files::write_value(dir.path(), COMMITTED_FILE, &log_id(1, 5)).expect("written");
        drop(store);

        let error = open(dir.path(), Some(log_id(1, 1))).err().expect("a gap");
        assert!(
            error.to_string().contains("entries 0 to 2 are missing"),
            "{error}"
        );
        let store = open(dir.path(), Some(log_id(1, 4))).expect("recovered");
        assert_eq!(indexes(&store), vec![5, 6]);
        assert_eq!(store.lock().last_purged, Some(log_id(1, 4)));
        drop(store);
        let store = open(dir.path(), Some(log_id(1, 4))).expect("reopened");
        assert_eq!(indexes(&store), vec![5, 6]);
        assert_eq!(store.lock().committed, Some(log_id(1, 5)));
    }

    #[test]
    fn a_state_machine_behind_the_purged_log_or_disagreeing_with_it_is_an_error() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store = open(dir.path(), None).expect("opened");
        append(&store, 1, 0..=4);
        store.lock().purge(log_id(1, 2)).expect("purged");
        drop(store);
        let error = open(dir.path(), Some(log_id(1, 1))).err().expect("behind");
        assert!(
            error.to_string().contains("purged up to index 2"),
            "{error}"
        );
        let error = open(dir.path(), Some(log_id(2, 3)))
            .err()
            .expect("disagrees");
        assert!(error.to_string().contains("the log holds"), "{error}");
        // Ahead of the log is what an installed snapshot leaves: openraft purges to it.
        open(dir.path(), Some(log_id(2, 9))).expect("ahead");
    }

    #[test]
    fn a_committed_log_id_past_everything_held_is_cut_back() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store = open(dir.path(), None).expect("opened");
        append(&store, 1, 0..=2);
        files::write_value(dir.path(), COMMITTED_FILE, &log_id(1, 7)).expect("written");
        drop(store);
        let store = open(dir.path(), Some(log_id(1, 1))).expect("reopened");
        assert_eq!(store.lock().committed, Some(log_id(1, 2)));
        drop(store);
        let store = open(dir.path(), Some(log_id(1, 5))).expect("reopened");
        assert_eq!(store.lock().committed, Some(log_id(1, 5)));
    }
}
