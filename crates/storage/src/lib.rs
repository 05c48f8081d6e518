//! The node's local storage engine boundary: `StorageEngine`, and two engines behind it.
//!
//! Owns: how partitions, static rows, clustering rows and tombstones of every table are laid out
//! in an ordered key-value store (see `keys`), the write path (blind merges, one atomic batch
//! per `apply_batch`, commit log durability modes), the read path (partition slices and
//! token-ordered scans with opaque resume tokens), node-local metadata, and engine maintenance
//! (flush, compaction, commit log sync).
//!
//! Architecture invariant: no RocksDB type appears in any public signature, so no crate above
//! this one depends on RocksDB transitively through our API (as TiKV's `engine_traits`). Every
//! engine passes the same conformance suite (`tests/conformance.rs`): `MemoryEngine` for fast
//! unit tests elsewhere, `RocksEngine` in production. Storage does not know CQL types or the schema,
//! and reads never look at the clock: they return merged fragments, and the caller applies
//! deletions and TTL with its `now` (`mutation::Row::apply_deletions`, `Row::is_live`). Only
//! compaction reads the clock, to purge what `gc_grace_seconds` allows (`compact`).
//!
//! Architecture invariant: writes never read. Both engines reconcile with `mutation`'s rules
//! (RocksDB through its merge operator), so a write arriving late with an older timestamp loses
//! no matter when it is applied.

// The partition cache fronts RocksDB only: `MemoryEngine` is memory already.
#[cfg(feature = "rocksdb")]
mod cache;
#[cfg(feature = "rocksdb")]
mod commit_log_check;
#[cfg(feature = "rocksdb")]
mod events;
mod keys;
mod memory;
mod read;
#[cfg(feature = "rocksdb")]
mod rocks;
mod write;

use mutation::{
    ClusteringSlice, PartitionKey, PartitionPage, PartitionUpdate, ScanPage, ScanStart, TableId,
};

pub use memory::MemoryEngine;
#[cfg(feature = "rocksdb")]
pub use rocks::{RocksConfig, RocksEngine, DEFAULT_COMMIT_LOG_TOTAL_BYTES};

/// The server clock in seconds since the epoch, as `mutation` stores local deletion times.
/// Storage reads the clock for one thing only: deciding, in compaction, what gc_grace allows
/// to purge.
pub(crate) fn now_seconds() -> mutation::LocalTime {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    mutation::LocalTime::try_from(secs).unwrap_or(mutation::LocalTime::MAX)
}

/// How durable a write is when `apply_batch` returns (Cassandra's `commitlog_sync` and keyspace
/// `durable_writes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Durability {
    /// Acknowledge once written to the memtable and the commit log buffer (handed to the OS, so
    /// a process crash loses nothing; a machine crash loses what the periodic
    /// `sync_commit_log` has not yet synced).
    Periodic,
    /// Acknowledge after the commit log is fsynced (concurrent writers share one fsync).
    Batch,
    /// `durable_writes = false`: skip the commit log; a crash loses unflushed writes.
    None,
}

/// One table's storage footprint, for `helenus admin stats`. Counts come from the engine's own
/// bookkeeping, so they are cheap; entries count storage keys (partition headers, static and
/// clustering rows), and a key written again before compaction counts once per version.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableStats {
    /// Immutable data files (RocksDB SSTables).
    pub live_files: u64,
    pub live_file_bytes: u64,
    /// Entries in those files.
    pub file_entries: u64,
    /// Bytes in memtables not yet flushed.
    pub memtable_bytes: u64,
    /// Entries in memtables not yet flushed.
    pub memtable_entries: u64,
    /// Automatic compactions stopped because one met a corrupt data file (see
    /// `StorageEngine::take_faults`).
    pub compactions_suspended: bool,
}

/// A fault storage found in its own files: a corrupt data file met by a compaction or a read.
/// The node decides what it means for the node (Cassandra's `disk_failure_policy`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageFault {
    /// The table the damaged file belongs to (`None` for the node's own metadata).
    pub table: Option<TableId>,
    /// What was found and done, naming the file where the engine knows it.
    pub detail: String,
}

/// Storage failures. Every variant carries enough context to log without the request.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The table has no storage (never created, or dropped).
    #[error("unknown table {0}")]
    UnknownTable(TableId),
    /// Stored bytes do not decode. Never a panic: the read that met it fails.
    #[error("corrupt data in table {table}: {detail}")]
    Corruption { table: TableId, detail: String },
    /// The request itself is malformed (oversized partition key, foreign resume token).
    #[error("invalid storage request: {0}")]
    InvalidRequest(String),
    /// Only from the `try_` calls: the call would have had to wait (for the disk, a commit log
    /// sync or a write stall), so it did nothing. The caller retries with the blocking call.
    #[error("the storage call would block")]
    WouldBlock,
    /// The commit log is damaged where it holds writes that replay would skip; the engine does
    /// not open unless told to salvage (`RocksConfig::ignore_commit_log_replay_errors`).
    #[error("the commit log is damaged: {} at offset {offset}: {detail}", file.display())]
    CommitLogDamaged {
        file: std::path::PathBuf,
        offset: u64,
        detail: String,
    },
    /// The engine failed (I/O error, disk full, shutdown in progress).
    #[error("storage engine error during {operation}: {detail}")]
    Engine {
        operation: &'static str,
        detail: String,
    },
}

/// The node's local storage. Implementations are internally synchronised; every call may block
/// on disk, so async callers run them on a blocking pool, except the `try_` calls, which return
/// `WouldBlock` instead of waiting.
pub trait StorageEngine: Send + Sync + 'static {
    /// Creates the table's storage; succeeds if it already exists.
    fn create_table(&self, table: TableId) -> Result<(), StorageError>;
    /// Deletes the table's storage and data; succeeds if it does not exist.
    fn drop_table(&self, table: TableId) -> Result<(), StorageError>;
    /// Deletes all the table's data, keeping the table.
    fn truncate_table(&self, table: TableId) -> Result<(), StorageError>;
    /// Writes a batch of updates atomically (all or none, across partitions and tables): the
    /// last step of a write, after the query layer sent mutations, the coordinator wrote them
    /// at a consistency level and a replica applied one. Blind: never reads before writing;
    /// fragments reconcile with what is stored by `mutation`'s merge rules.
    fn apply_batch(
        &self,
        updates: &[PartitionUpdate],
        durability: Durability,
    ) -> Result<(), StorageError>;
    /// Reads one partition's header, static row and up to `max_rows` (at least 1) clustering
    /// rows of `slice`. `resume` comes from the previous page of the same read.
    fn read_partition(
        &self,
        table: TableId,
        key: &PartitionKey,
        slice: &ClusteringSlice,
        max_rows: usize,
        resume: Option<&[u8]>,
    ) -> Result<PartitionPage, StorageError>;
    /// `apply_batch`, done only if it needs no wait: no commit log sync (`Durability::Batch`
    /// always needs one) and no write stall. Otherwise `Err(WouldBlock)`, having written nothing.
    /// Async callers try this on a runtime worker, sparing the hop to a blocking thread.
    fn try_apply_batch(
        &self,
        updates: &[PartitionUpdate],
        durability: Durability,
    ) -> Result<(), StorageError> {
        let _ = (updates, durability);
        Err(StorageError::WouldBlock)
    }
    /// `apply_batch` of several independent batches as one storage write (one commit log
    /// record, one pass over the memtables). All or none, like `apply_batch`: after an error
    /// none of them is applied, so each can be retried alone to learn whose error it was.
    fn apply_group(
        &self,
        group: &[&[PartitionUpdate]],
        durability: Durability,
    ) -> Result<(), StorageError> {
        self.apply_batch(&concat(group), durability)
    }
    /// `apply_group`, done only if it needs no wait (see `try_apply_batch`).
    fn try_apply_group(
        &self,
        group: &[&[PartitionUpdate]],
        durability: Durability,
    ) -> Result<(), StorageError> {
        self.try_apply_batch(&concat(group), durability)
    }
    /// `read_partition`, done only if everything it needs is in memory (memtables and block
    /// cache). Otherwise `Err(WouldBlock)`.
    fn try_read_partition(
        &self,
        table: TableId,
        key: &PartitionKey,
        slice: &ClusteringSlice,
        max_rows: usize,
        resume: Option<&[u8]>,
    ) -> Result<PartitionPage, StorageError> {
        let _ = (table, key, slice, max_rows, resume);
        Err(StorageError::WouldBlock)
    }
    /// Partitions in token order (ties by key) from `start` up to `end_token` (inclusive), rows
    /// in clustering order, stopping after `max_rows` (at least 1) rows; a partition without
    /// clustering rows in the page counts as one. A partition cut by the limit continues in the
    /// next page, its header and static row returned again.
    fn scan(
        &self,
        table: TableId,
        start: ScanStart,
        end_token: Option<i64>,
        max_rows: usize,
    ) -> Result<ScanPage, StorageError>;
    /// Node-local metadata (schema, tokens, host id); always synced before returning.
    fn put_meta(&self, key: &[u8], value: &[u8]) -> Result<(), StorageError>;
    fn delete_meta(&self, key: &[u8]) -> Result<(), StorageError>;
    /// `put_meta` as durable as `durability` (the batch log's entries, which need no more
    /// than the commit log mode promises a write). By default synced, as `put_meta`.
    fn put_meta_with(
        &self,
        key: &[u8],
        value: &[u8],
        durability: Durability,
    ) -> Result<(), StorageError> {
        let _ = durability;
        self.put_meta(key, value)
    }
    /// `delete_meta` as durable as `durability`. By default synced, as `delete_meta`.
    fn delete_meta_with(&self, key: &[u8], durability: Durability) -> Result<(), StorageError> {
        let _ = durability;
        self.delete_meta(key)
    }
    /// `put_meta_with` (`value` `Some`) or `delete_meta_with` (`None`) only if it needs no
    /// wait (no sync, no write stall), else `WouldBlock`, as `try_apply_batch`: for a runtime's
    /// thread. By default always `WouldBlock`.
    fn try_write_meta(
        &self,
        key: &[u8],
        value: Option<&[u8]>,
        durability: Durability,
    ) -> Result<(), StorageError> {
        let _ = (key, value, durability);
        Err(StorageError::WouldBlock)
    }
    fn get_meta(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError>;
    /// All metadata entries whose key starts with `prefix`, in key order.
    #[allow(clippy::type_complexity)] // spelled out so callers see the pairs without an alias
    fn scan_meta(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>, StorageError>;
    /// At most `limit` of `scan_meta(prefix)`'s entries, those after the key `after` (from the
    /// first if `None`): a scan in pages, whose memory is bounded. The default reads them all
    /// (`scan_meta`) and keeps the page; both engines read only the page.
    #[allow(clippy::type_complexity)] // as scan_meta
    fn scan_meta_page(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>, StorageError> {
        let mut entries = self.scan_meta(prefix)?;
        entries.retain(|(k, _)| after.is_none_or(|after| k.as_slice() > after));
        entries.truncate(limit);
        Ok(entries)
    }
    /// Flushes memtables to disk (one table, or all tables and metadata).
    fn flush(&self, table: Option<TableId>) -> Result<(), StorageError>;
    /// Runs a full (major) compaction (one table, or all). This is where tombstones and expired
    /// data older than the table's `gc_grace_seconds` are purged, with what they shadow, as
    /// Cassandra's compaction does; a table whose grace was never set purges nothing.
    fn compact(&self, table: Option<TableId>) -> Result<(), StorageError>;
    /// Sets the table's `gc_grace_seconds` (on creation, at startup and on ALTER): how long a
    /// tombstone is kept before compaction may purge it. Until it is set, nothing is purged.
    fn set_gc_grace(&self, table: TableId, gc_grace_seconds: i32) -> Result<(), StorageError>;
    /// Fsyncs the commit log (periodic mode's timer calls this).
    fn sync_commit_log(&self) -> Result<(), StorageError>;
    /// Housekeeping the node's timer calls about once a second: keeps the commit log within
    /// its configured bound after writes stop (an engine that needs no help does nothing).
    fn maintain_commit_log(&self) -> Result<(), StorageError>;
    /// The table's footprint; `UnknownTable` if it has no storage.
    fn table_stats(&self, table: TableId) -> Result<TableStats, StorageError>;
    /// Reopens the engine if an error stopped its writes for good (one RocksDB never recovers
    /// from, such as running out of file descriptors while switching commit log files; only a
    /// restart did), retrying a reopen that failed. The node's timer calls this about once a
    /// second; an engine that needs no help does nothing.
    fn recover(&self) -> Result<(), StorageError> {
        Ok(())
    }
    /// The faults found since the last call, each reported once (a fault met again later is
    /// reported again). An engine that cannot find any returns none.
    fn take_faults(&self) -> Vec<StorageFault> {
        Vec::new()
    }
    /// Engine-wide counters since start, by name: point reads (`partition_reads`) and the disk
    /// bytes they cost (`file_read_bytes`), block cache hits and misses, bloom filter checks and
    /// false positives, memtable and compaction backlog, write stalls. Engines report what they
    /// have; names are stable for tools.
    fn metrics(&self) -> Result<Vec<(&'static str, u64)>, StorageError>;
}

/// A group of writes as one list, for engines without a cheaper way to write them together.
fn concat(group: &[&[PartitionUpdate]]) -> Vec<PartitionUpdate> {
    group
        .iter()
        .flat_map(|updates| updates.iter().cloned())
        .collect()
}
