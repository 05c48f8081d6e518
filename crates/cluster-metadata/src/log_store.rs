//! The durable Raft log and vote (openraft's `RaftLogStorage`), in the node's metadata
//! directory, without RocksDB.
//!
//! Files (`files.rs` describes their bytes):
//! - `vote`, `committed`, `purged`: value files holding the vote, the last committed log id,
//!   and the last log id purged (compacted into a snapshot).
//! - `log`: a record file, one record per entry (`openraft::Entry` as JSON), consecutive
//!   indexes. Appends are fsynced before openraft is told they are durable; a conflicting
//!   suffix is truncated in place; a purge writes `purged` first, then rewrites `log` without
//!   the purged entries (a crash between leaves entries at or below `purged` that loading
//!   skips).
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

use crate::files;
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
    /// Opens the log in `dir` (created if missing), dropping a torn last record.
    pub fn open(dir: &Path) -> io::Result<LogStore> {
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
        check_consecutive(&path, &entries, purged_index)?;
        let file = files::open_records(&path, length)?;
        Ok(LogStore {
            inner: Arc::new(Mutex::new(LogInner {
                dir: dir.to_path_buf(),
                file,
                entries,
                length,
                vote,
                committed,
                last_purged,
            })),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LogInner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn check_consecutive(
    path: &Path,
    entries: &BTreeMap<u64, (u64, Entry)>,
    purged_index: Option<u64>,
) -> io::Result<()> {
    let mut expected = purged_index.map(|p| p + 1);
    for index in entries.keys() {
        if expected.is_some_and(|e| e != *index) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{} is corrupt: entry {index} where {} was expected",
                    path.display(),
                    expected.unwrap_or_default()
                ),
            ));
        }
        expected = Some(index + 1);
    }
    Ok(())
}

impl LogInner {
    fn append(&mut self, entries: Vec<Entry>) -> io::Result<()> {
        let mut bytes = Vec::new();
        let mut placed = Vec::with_capacity(entries.len());
        for entry in entries {
            let offset = self.length + bytes.len() as u64;
            files::encode_record(&entry, &mut bytes)?;
            placed.push((offset, entry));
        }
        self.file.write_all(&bytes)?;
        self.file.sync_data()?;
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
        self.file.set_len(offset)?;
        self.file.sync_all()?;
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
        let tmp = self.dir.join(format!("{LOG_FILE}.tmp"));
        {
            let mut file = File::create(&tmp)?;
            file.write_all(&bytes)?;
            file.sync_all()?;
        }
        let path = self.dir.join(LOG_FILE);
        fs::rename(&tmp, &path)?;
        files::sync_dir(&self.dir)?;
        self.length = bytes.len() as u64;
        self.file = files::open_records(&path, self.length)?;
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
            log_id: LogId::new(CommittedLeaderId::new(term, NodeId::from_u128(1)), index),
            payload: EntryPayload::Blank,
        }
    }

    fn indexes(store: &LogStore) -> Vec<u64> {
        store.lock().entries.keys().copied().collect()
    }

    #[test]
    fn appends_truncations_and_purges_survive_reopening() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store = LogStore::open(dir.path()).expect("opened");
        store
            .lock()
            .append((1..=6).map(|i| entry(1, i)).collect())
            .expect("appended");
        store.lock().truncate(5).expect("truncated");
        store
            .lock()
            .append(vec![entry(2, 5)])
            .expect("appended after the truncation");
        store.lock().purge(entry(1, 2).log_id).expect("purged");
        drop(store);

        let store = LogStore::open(dir.path()).expect("reopened");
        assert_eq!(indexes(&store), vec![3, 4, 5]);
        let inner = store.lock();
        assert_eq!(inner.last_purged, Some(entry(1, 2).log_id));
        assert_eq!(inner.last_log_id(), Some(entry(2, 5).log_id));
    }

    #[test]
    fn a_purge_cut_short_by_a_crash_skips_the_purged_entries() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store = LogStore::open(dir.path()).expect("opened");
        store
            .lock()
            .append((1..=4).map(|i| entry(1, i)).collect())
            .expect("appended");
        drop(store);
        // As if the node stopped after writing `purged` and before rewriting `log`.
        files::write_value(dir.path(), PURGED_FILE, &entry(1, 2).log_id).expect("written");
        let store = LogStore::open(dir.path()).expect("reopened");
        assert_eq!(indexes(&store), vec![3, 4]);
    }
}
