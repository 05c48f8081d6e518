//! `RocksEngine`: the storage boundary over RocksDB. Nothing RocksDB-specific leaves this file.
//!
//! Layout: one column family per table, named by the table id (hyphenated UUID), holding the
//! keys described in `keys` with `mutation`-encoded values; the `default` column family holds
//! node-local metadata under the caller's keys, written with `put` (no merge operator there).
//!
//! Writes are RocksDB merges: the table column families' merge operator reconciles fragments with
//! `mutation`'s rules (`write::merge_values`, used for full and partial merges, which is valid
//! because the merge is associative and commutative). So `apply_batch` never reads, and a
//! fragment with an older timestamp loses whenever it arrives. One `WriteBatch` per
//! `apply_batch` makes it atomic.
//!
//! The RocksDB WAL is the commit log (`commit_log_dir` becomes `wal_dir`). Periodic: WAL written
//! without sync (a process crash loses nothing, the OS has it; `sync_commit_log` fsyncs);
//! Batch: `sync = true`, RocksDB group-commits concurrent syncing writers into one fsync;
//! None: the WAL is skipped for that write.
//!
//! Purging (gc_grace). A tombstone may only go once nothing it shadows can resurface, and in an
//! LSM that needs two guarantees RocksDB's merge operator cannot see, so purging happens only
//! in `compact` (a major compaction), never in automatic compactions or reads:
//! - Newer-but-older-timestamped data outside the compaction (a late write, a hint) must keep
//!   its tombstone. `compact` flushes first, so every key's history is in the compaction, and
//!   tracks the smallest timestamp written to the table while it runs
//!   (`TablePurge::min_write_timestamp`); the purger spares tombstones at or above it, as
//!   Cassandra spares those overlapping memtables and other SSTables.
//! - A partition deletion or range tombstone shadows rows under other keys, which a per-key
//!   compaction filter cannot see. `compact` first pushes each purgeable one down: a row
//!   deletion with the same timestamps merged into every stored row it shadows
//!   (`push_down_header_tombstones`). Then each row key carries its own copy and the header's
//!   can go.
//!
//! The compaction filter (`PurgeFilter`, manual compactions during a `compact` run only) sees
//! the values the first pass of the major compaction produced (bottommost level compaction is
//! forced, so each value is compacted again) and purges with `mutation::Purger`.

use std::collections::{BTreeSet, HashMap};
use std::ffi::CStr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use mutation::{
    decode_partition_header, decode_row, encode_row, ClusteringSlice, PartitionHeader,
    PartitionKey, PartitionPage, PartitionUpdate, Purger, Row, ScanPage, ScanStart, TableId,
};
use rocksdb::compaction_filter::{CompactionFilter, Decision};
use rocksdb::compaction_filter_factory::{CompactionFilterContext, CompactionFilterFactory};
use rocksdb::{
    statistics::Ticker, BlockBasedIndexType, BlockBasedOptions, BottommostLevelCompaction, Cache,
    ColumnFamilyDescriptor, CompactOptions, DBCompressionType, DBRecoveryMode, DBWithThreadMode,
    Env, ErrorKind, MergeOperands, MultiThreaded, Options, ReadOptions, ReadTier, SliceTransform,
    WriteBatch, WriteOptions, DEFAULT_COLUMN_FAMILY_NAME,
};

use crate::cache::{CachedPartition, Lookup, PartitionCache};
use crate::events::Events;
use crate::keys::{
    parse_key, partition_prefix, prefix_successor, KIND_HEADER, KIND_ROW, KIND_STATIC,
};
use crate::read::{self, Source, Visit, Visitor};
use crate::write::{fragments, merge_values, purge_value, Purged};
use crate::{Durability, StorageEngine, StorageError, StorageFault, TableStats};

type Db = DBWithThreadMode<MultiThreaded>;

/// Compaction reads SSTables sequentially; with direct I/O there is no OS readahead, so RocksDB
/// needs its own. 2 MiB is RocksDB's recommended value for direct I/O.
const COMPACTION_READAHEAD_BYTES: usize = 2 << 20;
/// The size of index and filter partitions: one data block's worth.
const METADATA_BLOCK_BYTES: usize = 4096;
/// Bloom filter bits per key: ~1% false positives.
const BLOOM_BITS_PER_KEY: f64 = 10.0;
/// The prefix extractor's length: the token (see `keys`).
const TOKEN_PREFIX_BYTES: usize = 8;
/// The active memtable's size, and how many full ones a flush merges into one L0 file: the
/// flush size stays RocksDB's default 64 MiB, but each write inserts into a skiplist an eighth as
/// large. The insert's cost is its cache misses, about one per skiplist level below the few
/// levels that stay cached, and a smaller skiplist has fewer levels and a denser top: at 13,382
/// writes/s the node's CPU per write fell from 10.9-14.1 to 9.2-10.5 us and the p99 from
/// 0.73-1.15 to 0.64-0.72 ms (bench/README, "Smaller memtables").
const MEMTABLE_BYTES: usize = 8 << 20;
const MEMTABLES_PER_FLUSH: i32 = 8;
/// A table's memtable while the engine opens: a flush's worth (`MEMTABLES_PER_FLUSH`
/// memtables). Commit log replay fills the memtables without flushing them
/// (`avoid_flush_during_recovery`) unless one fills up, and a table rarely has more than a
/// flush's worth unflushed; so a restart needs no free space for a copy of the commit log in
/// data files, which a node that stopped on a full disk does not have. Once open, each table's
/// memtable is `MEMTABLE_BYTES` again. RocksDB also takes it (the largest memtable of any
/// column family) as the free space it waits for before it resumes writes after a full disk:
/// room for the flush its recovery starts with.
const RECOVERY_MEMTABLE_BYTES: usize = MEMTABLE_BYTES * MEMTABLES_PER_FLUSH as usize;
/// A table's memtable while the engine opens: at least `RECOVERY_MEMTABLE_BYTES`, and twice the
/// commit log's bound, so that replay holds all the commit log has (it may exceed the bound by a
/// flush that was pending) without flushing: a node stopped by a full disk, whose commit log
/// had outgrown a flush's worth while the flush was slow (the e2e full-disk test, under load),
/// still starts with little free space. Only what the commit log holds is allocated.
fn recovery_memtable_bytes(config: &RocksConfig) -> usize {
    let bound =
        usize::try_from(config.commit_log_total_bytes.saturating_mul(2)).unwrap_or(usize::MAX);
    RECOVERY_MEMTABLE_BYTES.max(bound.min(MAX_RECOVERY_MEMTABLE_BYTES))
}

/// The largest memtable `recovery_memtable_bytes` asks RocksDB for.
const MAX_RECOVERY_MEMTABLE_BYTES: usize = 16 << 30;

/// The space RocksDB reserves ahead for its manifest (the list of data files, rewritten at every
/// open, and growing by a few hundred bytes per flush or compaction). RocksDB's default, 4 MiB,
/// was most of the free space a restart after a full disk needs.
const MANIFEST_PREALLOCATION_BYTES: usize = 64 << 10;
/// The blocks a memtable allocates in: RocksDB's default for `MEMTABLE_BYTES` (an eighth).
const MEMTABLE_ARENA_BLOCK_BYTES: usize = MEMTABLE_BYTES / 8;
/// Memtables a table may hold before writes stall: two flushes' worth and the active one.
const MAX_MEMTABLES: i32 = 2 * MEMTABLES_PER_FLUSH + 1;
/// Each memtable's bloom filter, as a fraction of its size: a read checks every unflushed
/// memtable (up to `MAX_MEMTABLES`), and the filter answers for those without the key (whole
/// key for point lookups, token prefix for slices) with one cache line instead of a skiplist
/// search.
const MEMTABLE_BLOOM_RATIO: f64 = 0.1;
/// Background flush and compaction threads. The node shares few cores with the CQL front end.
const MAX_BACKGROUND_JOBS: i32 = 2;
/// RocksDB info log files kept, so its logs have a bound on disk.
const INFO_LOG_FILES_KEPT: usize = 5;
/// Row deletions pushed down per write batch during `compact`.
const PUSH_DOWN_BATCH: usize = 1024;
/// `TablePurge::gc_grace_seconds` before `set_gc_grace`: purge nothing.
const GC_GRACE_UNSET: i32 = -1;

/// `RocksConfig::commit_log_total_bytes` unless configured: a few memtables' worth, so that
/// what a crash replays is bounded by that, not by how long a rarely written table goes
/// unflushed (Cassandra's default is 8 GiB).
pub const DEFAULT_COMMIT_LOG_TOTAL_BYTES: u64 = 512 << 20;

/// How to open a `RocksEngine`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RocksConfig {
    /// SSTables, manifest and (unless `commit_log_dir` is set) the commit log.
    pub data_dir: PathBuf,
    /// Where the commit log (RocksDB's WAL) lives, ideally a separate device.
    pub commit_log_dir: Option<PathBuf>,
    /// The block cache shared by every table: the bound on cached data, index and filter
    /// blocks.
    pub block_cache_bytes: usize,
    /// The partition cache's budget (`cache::PartitionCache`); 0 turns it off.
    pub partition_cache_bytes: usize,
    /// The commit log's bound (Cassandra's `commitlog_total_space`): past it, the tables whose
    /// memtables hold the oldest commit log file are flushed, so that file can go.
    pub commit_log_total_bytes: u64,
    /// Start even if the commit log is damaged where it holds writes, replaying every intact
    /// record and losing the damaged ones (Cassandra's `cassandra.commitlog.ignorereplayerrors`).
    /// Without it, opening fails with `StorageError::CommitLogDamaged` (see `commit_log_check`).
    pub ignore_commit_log_replay_errors: bool,
    /// RocksDB's table files kept open (`max_open_files`): the node's share of its file
    /// descriptors for data files. More stay closed and are opened when read.
    pub max_open_data_files: usize,
    /// The node's commit log mode (`Periodic` or `Batch`). `apply_batch` follows its `durability`
    /// argument, which the caller derives from this; kept here so the engine's mode is
    /// visible in one place (`RocksEngine::commit_log_sync`).
    pub commit_log_sync: Durability,
}

/// The production engine. See the module documentation for layout and durability.
pub struct RocksEngine {
    /// The open database; `None` after a reopen failed, until one succeeds (`recover`).
    db: RwLock<Option<Db>>,
    /// The block cache every table column family shares.
    cache: Cache,
    /// Purge state per table, shared with its column family's compaction filter factory.
    /// Written by DDL; `apply_batch` reads it only while a `compact` run is tracking writes.
    purge: RwLock<HashMap<TableId, Arc<TablePurge>>>,
    /// `compact` runs in progress, so `apply_batch` skips the purge map when there are none.
    purge_runs: AtomicU64,
    /// Table column families that exist, for `flush(None)`/`compact(None)`. Only DDL and
    /// maintenance take this lock, never reads or writes.
    tables: Mutex<BTreeSet<TableId>>,
    config: RocksConfig,
    direct_io: bool,
    /// The DB options the engine was opened with: they own RocksDB's statistics (`metrics`).
    db_options: Options,
    /// `read_partition` calls, to relate disk bytes read to point reads.
    partition_reads: AtomicU64,
    /// Whole small partitions, in front of RocksDB (`None` if configured off).
    partition_cache: Option<PartitionCache>,
    /// What RocksDB's background work reported (`events`).
    events: Arc<Events>,
    /// Faults found in the engine's files, and what was done about them.
    faults: Mutex<Faults>,
    /// Reopens after fatal background errors (`recover`).
    reopening: Mutex<Reopening>,
    /// `maintain_commit_log`'s memory: the latest sequence number it saw, and the one it last
    /// checked the commit log's size at (u64::MAX: none yet).
    maintained_sequence: AtomicU64,
    checked_sequence: AtomicU64,
}

/// The least time between two reopens after fatal errors: each replays the commit log.
const REOPEN_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

/// The file `recover` creates and removes to see whether the cause of a fatal error is gone;
/// RocksDB ignores files it did not name.
const PROBE_FILE_NAME: &str = "helenus-reopen-probe";

/// `recover`'s memory.
#[derive(Default)]
struct Reopening {
    /// When the last reopen started.
    last: Option<std::time::Instant>,
    /// Why the last reopen failed, while the database is closed.
    failure: Option<String>,
}

/// Faults not yet taken by `take_faults` beyond this many are dropped (each is also logged): a
/// client reading a corrupt row in a loop must not grow the list.
const MAX_PENDING_FAULTS: usize = 64;

/// Faults found in the engine's files (`StorageEngine::take_faults`) and what was done.
#[derive(Default)]
struct Faults {
    /// Not yet taken, oldest first; a fault equal to one already pending is not added again.
    pending: Vec<StorageFault>,
    /// The number (`Events::failed_compactions_after`) of the last failed compaction handled.
    handled_failed_compactions: u64,
    /// Tables whose automatic compactions are stopped, with the failure that stopped them.
    /// RocksDB cannot leave one file out of a table's compactions, as Cassandra leaves out an
    /// SSTable it marked suspect, so the table's compactions stop instead: every one of them
    /// would meet the file again. Reads and writes go on (reads of the damaged rows fail); a
    /// TRUNCATE or DROP of the table ends it.
    suspended: HashMap<TableId, String>,
    /// Reads that met corrupt data since the engine opened.
    corrupt_reads: u64,
}

impl Faults {
    fn push(&mut self, fault: StorageFault) {
        if self.pending.len() < MAX_PENDING_FAULTS && !self.pending.contains(&fault) {
            self.pending.push(fault);
        }
    }
}

/// The largest partition the partition cache keeps (its stored keys and values).
const MAX_CACHED_PARTITION_BYTES: usize = 64 * 1024;

/// RocksDB's merge operator for table column families. Returning `None` makes RocksDB report
/// corruption to the read (or compaction) that needed the merge, which is what a value that
/// does not decode is.
fn merge_operator(
    key: &[u8],
    existing: Option<&[u8]>,
    operands: &MergeOperands,
) -> Option<Vec<u8>> {
    let values = existing.into_iter().chain(operands.iter());
    match merge_values(key, values) {
        Ok(v) => Some(v),
        Err(e) => {
            tracing::error!(error = %e, key_bytes = key.len(), "cannot merge stored fragments");
            None
        }
    }
}

fn db_options(config: &RocksConfig, direct_io: bool, events: &Arc<Events>) -> Options {
    let mut opts = Options::default();
    crate::events::install(&mut opts, events.clone());
    opts.create_if_missing(true);
    opts.create_missing_column_families(true);
    if let Some(dir) = &config.commit_log_dir {
        opts.set_wal_dir(dir);
    }
    opts.set_use_direct_reads(direct_io);
    opts.set_use_direct_io_for_flush_and_compaction(direct_io);
    opts.set_compaction_readahead_size(COMPACTION_READAHEAD_BYTES);
    opts.set_max_background_jobs(MAX_BACKGROUND_JOBS);
    opts.set_max_open_files(i32::try_from(config.max_open_data_files).unwrap_or(i32::MAX));
    opts.set_keep_log_file_num(INFO_LOG_FILES_KEPT);
    // A crash can leave a torn last record, a disk garbage after it: replay every complete
    // record up to the first damaged one and start (Cassandra truncates its commit log the same
    // way). Named explicitly because it is the commit log's contract; tested by
    // tests/e2e/test_crash.py.
    opts.set_wal_recovery_mode(DBRecoveryMode::PointInTime);
    // Replay the commit log into memtables, and keep its files, instead of writing what they
    // hold to new data files before the node starts: a restart after the disk filled up needs
    // a little free space, not room for a second copy of the commit log (see
    // `RECOVERY_MEMTABLE_BYTES`).
    opts.set_manifest_preallocation_size(MANIFEST_PREALLOCATION_BYTES);
    // SAFETY: the pointer is `opts`'s own, valid while `opts` lives.
    unsafe {
        librocksdb_sys::rocksdb_options_set_avoid_flush_during_recovery(
            rocksdb::AsRawPtr::as_raw_ptr(&opts),
            1,
        );
    }
    // Bound the commit log. RocksDB's own bound is four times the sum of every column family's
    // memtable budget (gigabytes with the system tables alone), so a file stayed while any
    // rarely written table (a system table) had a memtable backed by it: replay after a crash
    // grew with them, and every commit log write went to a new file's new pages. With the
    // bound, in fixed-rate write runs (12,500/s) the commit log `write()` fell from 11.5-15.6%
    // to 4.0-5.7% of the shard thread's samples, ext4 zeroing new blocks (`__pi_memset`) from
    // 4.0-6.6% to under 0.1% (bench/README).
    opts.set_max_total_wal_size(config.commit_log_total_bytes);
    // Tickers for `metrics` (block cache, bloom filters, bytes read from files, stalls). The
    // default level skips the expensive per-operation timers.
    opts.enable_statistics();
    // Flushes and compactions run at nice 19 (CFS weight 15 against a shard thread's 1024), so
    // the scheduler runs requests ahead of them: on two cores a flush (a core for a second or
    // more) otherwise took turns with the shards and lifted the p99.9 at a fixed rate. With an
    // idle core they run at full speed. (RocksDB's default environment is the process's: one
    // setting for every database.)
    match Env::new() {
        Ok(mut env) => {
            env.lower_thread_pool_cpu_priority();
            env.lower_high_priority_thread_pool_cpu_priority();
            opts.set_env(&env);
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot lower the priority of flushes and compactions")
        }
    }
    opts
}

/// The smallest write timestamp in an update (what a compaction in progress must not purge
/// tombstones at or above, see `mutation::Purger::timestamps_below`).
fn min_timestamp(update: &PartitionUpdate) -> Option<i64> {
    let header = update.header.as_ref().and_then(|h| h.min_timestamp());
    let rows = update
        .static_row
        .iter()
        .chain(update.rows.iter().map(|(_, row)| row))
        .filter_map(|row| row.min_timestamp());
    header.into_iter().chain(rows).min()
}

/// What one table's compactions need to know to purge (see the module documentation).
struct TablePurge {
    /// The table's `gc_grace_seconds`, `GC_GRACE_UNSET` until `set_gc_grace`.
    gc_grace_seconds: AtomicI32,
    /// Set while a `compact` run tracks the table's writes.
    tracking: AtomicBool,
    /// The smallest write timestamp applied while `tracking` (i64::MAX: none).
    min_write_timestamp: AtomicI64,
    /// The purge horizon of the `compact` run in progress, read by filters it creates.
    run: Mutex<Option<PurgeRun>>,
    /// Serialises `compact` runs of the table.
    compacting: Mutex<()>,
}

#[derive(Debug, Clone, Copy)]
struct PurgeRun {
    now_seconds: mutation::LocalTime,
    gc_before: mutation::LocalTime,
}

impl TablePurge {
    fn new() -> TablePurge {
        TablePurge {
            gc_grace_seconds: AtomicI32::new(GC_GRACE_UNSET),
            tracking: AtomicBool::new(false),
            min_write_timestamp: AtomicI64::new(i64::MAX),
            run: Mutex::new(None),
            compacting: Mutex::new(()),
        }
    }

    fn run(&self) -> MutexGuard<'_, Option<PurgeRun>> {
        self.run
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Creates a `PurgeFilter` for each compaction of one table: purging only for manual
/// compactions while a `compact` run is in progress.
struct PurgeFilterFactory {
    table: TableId,
    state: Arc<TablePurge>,
}

impl CompactionFilterFactory for PurgeFilterFactory {
    type Filter = PurgeFilter;

    fn create(&mut self, context: CompactionFilterContext) -> PurgeFilter {
        let run = if context.is_manual_compaction {
            *self.state.run()
        } else {
            None
        };
        PurgeFilter {
            table: self.table,
            state: self.state.clone(),
            run,
            changed: Vec::new(),
        }
    }

    fn name(&self) -> &CStr {
        c"helenus-purge"
    }
}

struct PurgeFilter {
    table: TableId,
    state: Arc<TablePurge>,
    run: Option<PurgeRun>,
    /// The last changed value, which `Decision::Change` borrows.
    changed: Vec<u8>,
}

impl CompactionFilter for PurgeFilter {
    fn filter(&mut self, _level: u32, key: &[u8], value: &[u8]) -> Decision {
        let Some(run) = self.run else {
            return Decision::Keep;
        };
        let purger = Purger {
            now_seconds: run.now_seconds,
            gc_before: run.gc_before,
            // Read per value: a late write arriving during the compaction protects its keys
            // from then on.
            timestamps_below: self.state.min_write_timestamp.load(AtomicOrdering::SeqCst),
        };
        match purge_value(key, value, &purger) {
            Ok(Purged::Keep) => Decision::Keep,
            Ok(Purged::Remove) => Decision::Remove,
            Ok(Purged::Change(v)) => {
                self.changed = v;
                // SAFETY: RocksDB's C filter (`rocksdb_compactionfilter_t::Filter` in c.cc)
                // copies the new value into its own string before this filter is called again
                // or dropped, and `self.changed` is neither touched nor freed until then, so
                // the borrow is valid for as long as it is used; the 'static is only the
                // binding's signature.
                let changed: &'static [u8] =
                    unsafe { std::mem::transmute::<&[u8], &'static [u8]>(&self.changed) };
                Decision::Change(changed)
            }
            Err(e) => {
                // Keep what cannot be decoded: reads will report it as corruption.
                tracing::error!(table = %self.table, error = %e, "cannot purge a stored value");
                Decision::Keep
            }
        }
    }

    fn name(&self) -> &CStr {
        c"helenus-purge"
    }
}

/// Compression of each level (RocksDB's default seven): none for L0, LZ4 below it.
const COMPRESSION_PER_LEVEL: [DBCompressionType; 7] = [
    DBCompressionType::None,
    DBCompressionType::Lz4,
    DBCompressionType::Lz4,
    DBCompressionType::Lz4,
    DBCompressionType::Lz4,
    DBCompressionType::Lz4,
    DBCompressionType::Lz4,
];

/// A table's column family options. `memtable_bytes` is `MEMTABLE_BYTES`, except while the
/// engine opens (`recovery_memtable_bytes`): then the memtable has no bloom filter, which
/// RocksDB sizes from the memtable's size and allocates whole when the memtable is made (a
/// tenth of a recovery memtable in every table, however little replay puts in it); the filter
/// is back for every memtable made after the open (`open_db` sets the options again).
fn table_options(
    cache: &Cache,
    table: TableId,
    state: Arc<TablePurge>,
    memtable_bytes: usize,
) -> Options {
    let mut block = BlockBasedOptions::default();
    block.set_block_cache(cache);
    // Full (not block-based) bloom filter. Whole-key filtering serves the header and static
    // row point reads; the token prefix serves slice seeks within a partition.
    block.set_bloom_filter(BLOOM_BITS_PER_KEY, false);
    block.set_whole_key_filtering(true);
    // Index and filter blocks count against the block cache, so `block_cache_bytes` bounds
    // them too; L0's are pinned since every read consults them.
    block.set_cache_index_and_filter_blocks(true);
    block.set_cache_index_and_filter_blocks_with_high_priority(true);
    block.set_pin_l0_filter_and_index_blocks_in_cache(true);
    // Partitioned index and filters: a file's index and filter are cut into blocks of about
    // `METADATA_BLOCK_BYTES` under a small pinned top level, so a point read whose partition
    // fell out of the cache reads one such block, not a whole file's index or filter (hundreds
    // of KiB for a 64 MiB file, larger than a cache shard, so they thrashed: bench/readamp.py
    // measured 180-940 KB read per point read with a whole-file index and filter).
    block.set_index_type(BlockBasedIndexType::TwoLevelIndexSearch);
    block.set_partition_filters(true);
    block.set_metadata_block_size(METADATA_BLOCK_BYTES);
    block.set_pin_top_level_index_and_filter(true);

    let mut opts = Options::default();
    opts.set_block_based_table_factory(&block);
    opts.set_prefix_extractor(SliceTransform::create_fixed_prefix(TOKEN_PREFIX_BYTES));
    opts.set_merge_operator("helenus-mutation-merge-v1", merge_operator, merge_operator);
    opts.set_compaction_filter_factory(PurgeFilterFactory { table, state });
    // Flushes write L0 uncompressed: an L0 file is rewritten by the next compaction into the
    // base level, which compresses it, so compressing it at flush only spends CPU on the write
    // path's background (LZ4 was 6% of the node's CPU at write saturation, bench/README). With
    // `level_compaction_dynamic_level_bytes` (RocksDB's default) entry 1 applies to the level
    // L0 is compacted into, whatever its number: everything past L0 is compressed.
    opts.set_compression_per_level(&COMPRESSION_PER_LEVEL);
    opts.set_write_buffer_size(memtable_bytes);
    // RocksDB's default is an eighth of the memtable size the column family is opened with;
    // fixed, so the larger memtable of recovery does not leave every later memtable allocating
    // in blocks as large as itself.
    opts.set_arena_block_size(MEMTABLE_ARENA_BLOCK_BYTES);
    opts.set_min_write_buffer_number_to_merge(MEMTABLES_PER_FLUSH);
    opts.set_max_write_buffer_number(MAX_MEMTABLES);
    let recovering = memtable_bytes > MEMTABLE_BYTES;
    opts.set_memtable_prefix_bloom_ratio(if recovering {
        0.0
    } else {
        MEMTABLE_BLOOM_RATIO
    });
    opts.set_memtable_whole_key_filtering(true);
    opts
}

/// The metadata column family's memtable: it holds the schema and the node's identity, a few
/// KiB. RocksDB's default (64 MiB) would also set the free space it waits for before it
/// resumes writes after the disk was full (`SstFileManager`: the largest memtable of any
/// column family, see `RECOVERY_MEMTABLE_BYTES`).
const METADATA_MEMTABLE_BYTES: usize = 1 << 20;

/// Options of the `default` column family, which holds node metadata.
fn metadata_options() -> Options {
    let mut opts = Options::default();
    opts.set_write_buffer_size(METADATA_MEMTABLE_BYTES);
    opts
}

/// The most of RocksDB's info log read when relaying recovery warnings.
const INFO_LOG_SCAN_BYTES: u64 = 1 << 20;

/// Relays, as warnings in the node's own log, what commit log replay dropped: RocksDB reports a
/// torn or corrupt tail (point-in-time recovery stops there) only in its info log, as
/// `<wal file>: dropping N bytes; Corruption: ...`. The info log is started afresh by each
/// open, so everything in it is about this recovery.
fn relay_commit_log_recovery_warnings(data_dir: &std::path::Path) {
    use std::io::Read;
    let mut text = String::new();
    let read = std::fs::File::open(data_dir.join("LOG"))
        .and_then(|f| f.take(INFO_LOG_SCAN_BYTES).read_to_string(&mut text));
    if read.is_err() {
        return; // no info log (or not text): nothing to relay
    }
    for line in text.lines() {
        if let Some(at) = line.find(": dropping ") {
            let detail = line[..at]
                .rsplit(' ')
                .next()
                .map_or(String::new(), |file| format!("{file}{}", &line[at..]));
            tracing::warn!(
                detail,
                "commit log replay stopped at a damaged record; the tail after it was discarded"
            );
        }
    }
}

/// Checks every commit log file before RocksDB replays it and repairs what it may (see
/// `commit_log_check`), reporting a torn tail the way `relay_commit_log_recovery_warnings`
/// reports what RocksDB drops itself.
/// `salvage`: the operator's override, for the start it was given for only; a reopen of a
/// running node never salvages without being asked again.
fn check_commit_log(config: &RocksConfig, salvage: bool) -> Result<(), StorageError> {
    use crate::commit_log_check::{CheckError, Repair};
    let wal_dir = config.commit_log_dir.as_ref().unwrap_or(&config.data_dir);
    let started = std::time::Instant::now();
    let checked = crate::commit_log_check::check_commit_log(wal_dir, salvage);
    tracing::debug!(elapsed = ?started.elapsed(), "commit log checked");
    let repairs = checked.map_err(|e| match e {
        CheckError::Io(path, e) => StorageError::Engine {
            operation: "check the commit log",
            detail: format!("{}: {e}", path.display()),
        },
        CheckError::Damaged(refusal) => StorageError::CommitLogDamaged {
            file: refusal.file,
            offset: refusal.offset,
            detail: format!(
                "{}; {} intact records after it, which replay would drop, and {}",
                refusal.reason,
                refusal.intact_records_after,
                describe_gap(refusal.gap)
            ),
        },
    })?;
    for repair in repairs {
        match repair {
            Repair::Cut {
                file,
                offset,
                dropped,
                reason,
            } => tracing::warn!(
                detail = format!(
                    "{}: dropping {dropped} bytes at offset {offset}; {reason}",
                    file.display()
                ),
                "commit log replay stopped at a damaged record; the tail after it was discarded"
            ),
            Repair::Skipped {
                file,
                offset,
                bytes,
                reason,
                lost: None,
                backup,
            } => tracing::warn!(
                detail = format!(
                    "{}: {bytes} bytes at offset {offset} ({reason}); the original is kept as {}",
                    file.display(),
                    backup.display()
                ),
                "commit log: damaged bytes left out; the sequence numbers go on after them, so \
                 they held no write"
            ),
            Repair::Skipped {
                file,
                offset,
                bytes,
                reason,
                lost: Some(gap),
                backup,
            } => tracing::error!(
                detail = format!(
                    "{}: {bytes} bytes at offset {offset} ({reason}), {}; the original is kept \
                     as {}",
                    file.display(),
                    describe_gap(gap),
                    backup.display()
                ),
                "commit log: damaged bytes left out as the operator asked; the writes in them \
                 are lost, every intact record is replayed"
            ),
        }
    }
    Ok(())
}

/// The sequence numbers missing in damage, in words.
fn describe_gap(gap: crate::commit_log_check::Gap) -> String {
    match gap.first {
        Some(first) => format!(
            "the writes with sequence numbers {first} to {} are in the damage",
            gap.next.saturating_sub(1)
        ),
        None => format!(
            "writes with sequence numbers before {} may be in the damage",
            gap.next
        ),
    }
}

fn engine_error(
    operation: &'static str,
    table: Option<TableId>,
    e: rocksdb::Error,
) -> StorageError {
    match (e.kind(), table) {
        // Only `ReadTier::BlockCache` reads and `no_slowdown` writes end incomplete.
        (ErrorKind::Incomplete, _) => StorageError::WouldBlock,
        (ErrorKind::Corruption, Some(table)) => StorageError::Corruption {
            table,
            detail: e.into_string(),
        },
        _ => StorageError::Engine {
            operation,
            detail: e.into_string(),
        },
    }
}

/// The name of `table`'s column family: its id, hyphenated, in lower case.
fn cf_name(table: TableId) -> String {
    cf_name_in(table, &mut [0; uuid::fmt::Hyphenated::LENGTH]).to_string()
}

/// `cf_name` written into `buf`, for lookups on every read and write.
fn cf_name_in(table: TableId, buf: &mut [u8; uuid::fmt::Hyphenated::LENGTH]) -> &str {
    table.hyphenated().encode_lower(buf)
}

/// Opens RocksDB in `config.data_dir` with every table column family found there, each with
/// its purge state from `purge_state`, and replays the commit log. Returns it and its tables.
/// Deletes the data files (`*.sst`) in the data directory that the current manifest does not
/// name (a flush or compaction cut short), found by a read-only open that writes nothing.
/// Returns how many it deleted.
fn remove_orphan_data_files(config: &RocksConfig) -> Result<usize, StorageError> {
    if !config.data_dir.join("CURRENT").exists() {
        return Ok(0);
    }
    let opts = Options::default();
    let cfs =
        Db::list_cf(&opts, &config.data_dir).map_err(|e| engine_error("list tables", None, e))?;
    let live: BTreeSet<String> = {
        let db = Db::open_cf_for_read_only(&opts, &config.data_dir, &cfs, false)
            .map_err(|e| engine_error("open read-only", None, e))?;
        db.live_files()
            .map_err(|e| engine_error("list data files", None, e))?
            .into_iter()
            .map(|f| f.name.trim_start_matches('/').to_string())
            .collect()
    };
    let unreadable = |e: std::io::Error| StorageError::Engine {
        operation: "list data files",
        detail: format!("{}: {e}", config.data_dir.display()),
    };
    let mut removed = 0;
    for entry in std::fs::read_dir(&config.data_dir).map_err(unreadable)? {
        let entry = entry.map_err(unreadable)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".sst") && !live.contains(&name) {
            std::fs::remove_file(entry.path()).map_err(unreadable)?;
            removed += 1;
        }
    }
    Ok(removed)
}

fn open_db(
    config: &RocksConfig,
    opts: &Options,
    cache: &Cache,
    mut purge_state: impl FnMut(TableId) -> Arc<TablePurge>,
) -> Result<(Db, BTreeSet<TableId>), StorageError> {
    // A missing database has no column families to list; anything else is a real error.
    let existing = if config.data_dir.join("CURRENT").exists() {
        Db::list_cf(opts, &config.data_dir).map_err(|e| engine_error("list tables", None, e))?
    } else {
        Vec::new()
    };
    let mut tables = BTreeSet::new();
    let mut descriptors = vec![ColumnFamilyDescriptor::new(
        DEFAULT_COLUMN_FAMILY_NAME,
        metadata_options(),
    )];
    for name in existing {
        if name == DEFAULT_COLUMN_FAMILY_NAME {
            continue;
        }
        let id = TableId::parse_str(&name).map_err(|_| StorageError::Engine {
            operation: "open",
            detail: format!("column family {name:?} is not a table id"),
        })?;
        tables.insert(id);
        let options = table_options(cache, id, purge_state(id), recovery_memtable_bytes(config));
        descriptors.push(ColumnFamilyDescriptor::new(name, options));
    }
    let db = Db::open_cf_descriptors(opts, &config.data_dir, descriptors)
        .map_err(|e| engine_error("open", None, e))?;
    relay_commit_log_recovery_warnings(&config.data_dir);
    // Replay is over: every table's memtable is its usual size again. What replay filled stays
    // until it fills up or the commit log's bound flushes it.
    let memtable_bytes = MEMTABLE_BYTES.to_string();
    let bloom_ratio = MEMTABLE_BLOOM_RATIO.to_string();
    for table in &tables {
        let mut name = [0; uuid::fmt::Hyphenated::LENGTH];
        if let Some(cf) = db.cf_handle(cf_name_in(*table, &mut name)) {
            db.set_options_cf(
                &cf,
                &[
                    ("write_buffer_size", memtable_bytes.as_str()),
                    ("memtable_prefix_bloom_size_ratio", bloom_ratio.as_str()),
                ],
            )
            .map_err(|e| engine_error("open", Some(*table), e))?;
        }
    }
    Ok((db, tables))
}

/// A read guard on the open database. Calls hold one while they use RocksDB; a reopen
/// (`RocksEngine::recover`) waits for them.
struct DbRef<'a>(std::sync::RwLockReadGuard<'a, Option<Db>>);

impl std::ops::Deref for DbRef<'_> {
    type Target = Db;

    fn deref(&self) -> &Db {
        self.0
            .as_ref()
            .expect("a DbRef is only made for an open database")
    }
}

impl DbRef<'_> {
    fn cf(&self, table: TableId) -> Result<Arc<rocksdb::BoundColumnFamily<'_>>, StorageError> {
        let mut name = [0; uuid::fmt::Hyphenated::LENGTH];
        self.cf_handle(cf_name_in(table, &mut name))
            .ok_or(StorageError::UnknownTable(table))
    }

    /// An integer property of a table's column family (0 if RocksDB does not report it).
    fn cf_property(
        &self,
        cf: &Arc<rocksdb::BoundColumnFamily<'_>>,
        table: TableId,
        name: &str,
    ) -> Result<u64, StorageError> {
        Ok(self
            .property_int_value_cf(cf, name)
            .map_err(|e| engine_error("read a table property", Some(table), e))?
            .unwrap_or(0))
    }
}

impl RocksEngine {
    /// Opens (creating if needed) the database in `config.data_dir`, with every table column
    /// family found there. Direct I/O is used where the filesystem supports it; otherwise
    /// (tmpfs, some container overlays) the engine falls back to buffered I/O with a warning.
    pub fn open(config: RocksConfig) -> Result<RocksEngine, StorageError> {
        std::fs::create_dir_all(&config.data_dir).map_err(|e| StorageError::Engine {
            operation: "create data directory",
            detail: format!("{}: {e}", config.data_dir.display()),
        })?;
        check_commit_log(&config, config.ignore_commit_log_replay_errors)?;
        let cache = Cache::new_lru_cache(config.block_cache_bytes);
        let events = Arc::new(Events::default());
        match Self::open_with_fallback(&config, &cache, &events) {
            // A flush the full disk cut short leaves a partial data file that no manifest
            // names, which RocksDB deletes only once open; an open whose recovery must flush
            // then has no room. Remove such files first and try once more.
            Err(e) if Self::out_of_space(&e) => match remove_orphan_data_files(&config) {
                Ok(0) => Err(e),
                Ok(removed) => {
                    tracing::warn!(
                        data_dir = %config.data_dir.display(),
                        removed,
                        "the disk was full; removed data files no manifest names (left by a \
                         flush the full disk stopped) and opening again"
                    );
                    Self::open_with_fallback(&config, &cache, &events)
                }
                Err(cleanup) => {
                    tracing::warn!(error = %cleanup, "cannot look for unreferenced data files");
                    Err(e)
                }
            },
            other => other,
        }
    }

    fn out_of_space(e: &StorageError) -> bool {
        match e {
            StorageError::Engine { detail, .. } => detail.contains("No space left on device"),
            _ => false,
        }
    }

    fn open_with_fallback(
        config: &RocksConfig,
        cache: &Cache,
        events: &Arc<Events>,
    ) -> Result<RocksEngine, StorageError> {
        match Self::open_with(config, cache, events, true) {
            Ok(engine) => Ok(engine),
            Err(e) if Self::direct_io_unsupported(&e) => {
                tracing::warn!(
                    data_dir = %config.data_dir.display(),
                    error = %e,
                    "direct I/O not supported by the filesystem; using buffered I/O"
                );
                Self::open_with(config, cache, events, false)
            }
            Err(e) => Err(e),
        }
    }

    /// RocksDB checks direct I/O while opening (`DBImpl::Recover` opens the manifest with the
    /// configured flags) and reports "Direct I/O is not supported by the specified DB." as an
    /// invalid argument; nothing else it reports mentions direct I/O.
    fn direct_io_unsupported(e: &StorageError) -> bool {
        match e {
            StorageError::Engine { detail, .. } => {
                detail.to_ascii_lowercase().contains("direct i/o")
            }
            _ => false,
        }
    }

    fn open_with(
        config: &RocksConfig,
        cache: &Cache,
        events: &Arc<Events>,
        direct_io: bool,
    ) -> Result<RocksEngine, StorageError> {
        let opts = db_options(config, direct_io, events);
        let mut purge = HashMap::new();
        let (db, tables) = open_db(config, &opts, cache, |id| {
            purge
                .entry(id)
                .or_insert_with(|| Arc::new(TablePurge::new()))
                .clone()
        })?;
        tracing::info!(
            data_dir = %config.data_dir.display(),
            tables = tables.len(),
            direct_io,
            "storage opened"
        );
        Ok(RocksEngine {
            db: RwLock::new(Some(db)),
            cache: cache.clone(),
            purge: RwLock::new(purge),
            purge_runs: AtomicU64::new(0),
            tables: Mutex::new(tables),
            config: config.clone(),
            direct_io,
            db_options: opts,
            partition_reads: AtomicU64::new(0),
            partition_cache: (config.partition_cache_bytes > 0).then(|| {
                PartitionCache::new(config.partition_cache_bytes, MAX_CACHED_PARTITION_BYTES)
            }),
            events: events.clone(),
            faults: Mutex::default(),
            reopening: Mutex::default(),
            maintained_sequence: AtomicU64::new(u64::MAX),
            checked_sequence: AtomicU64::new(u64::MAX),
        })
    }

    /// The bytes of the commit log's files (RocksDB's `*.log` in the WAL directory).
    fn commit_log_bytes(&self) -> Result<u64, StorageError> {
        let dir = self
            .config
            .commit_log_dir
            .as_ref()
            .unwrap_or(&self.config.data_dir);
        let unreadable = |e: std::io::Error| StorageError::Engine {
            operation: "measure the commit log",
            detail: format!("{}: {e}", dir.display()),
        };
        let mut bytes = 0;
        for entry in std::fs::read_dir(dir).map_err(unreadable)? {
            let entry = entry.map_err(unreadable)?;
            if entry.file_name().as_encoded_bytes().ends_with(b".log") {
                // A file RocksDB deleted meanwhile holds nothing.
                bytes += entry.metadata().map(|m| m.len()).unwrap_or(0);
            }
        }
        Ok(bytes)
    }

    /// The configuration the engine was opened with.
    pub fn config(&self) -> &RocksConfig {
        &self.config
    }

    /// The node's commit log mode, from the configuration.
    pub fn commit_log_sync(&self) -> Durability {
        self.config.commit_log_sync
    }

    /// Whether reads, flushes and compactions bypass the OS page cache (false after the
    /// buffered fallback).
    pub fn uses_direct_io(&self) -> bool {
        self.direct_io
    }

    fn tables(&self) -> MutexGuard<'_, BTreeSet<TableId>> {
        // The set is only inserted into / removed from; a panic elsewhere cannot corrupt it.
        self.tables
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The open database, waiting while a reopen runs; an error if the last reopen failed.
    fn db(&self) -> Result<DbRef<'_>, StorageError> {
        let guard = self
            .db
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        self.open_or_unavailable(guard)
    }

    /// `db`, but `WouldBlock` instead of waiting for a reopen (for the `try_` calls, which run
    /// on a runtime's thread).
    fn try_db(&self) -> Result<DbRef<'_>, StorageError> {
        let guard = match self.db.try_read() {
            Ok(guard) => guard,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return Err(StorageError::WouldBlock),
        };
        self.open_or_unavailable(guard)
    }

    fn open_or_unavailable<'a>(
        &self,
        guard: std::sync::RwLockReadGuard<'a, Option<Db>>,
    ) -> Result<DbRef<'a>, StorageError> {
        if guard.is_some() {
            return Ok(DbRef(guard));
        }
        let reason = self
            .reopening
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .failure
            .clone()
            .unwrap_or_default();
        Err(StorageError::Engine {
            operation: "reopen storage",
            detail: format!(
                "storage is closed after a fatal error, and reopening it failed: {reason}"
            ),
        })
    }

    /// The table's purge state, created on first use.
    fn purge_state(&self, table: TableId) -> Arc<TablePurge> {
        if let Some(state) = self
            .purge
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(&table)
        {
            return state.clone();
        }
        self.purge
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .entry(table)
            .or_insert_with(|| Arc::new(TablePurge::new()))
            .clone()
    }

    /// The options a table's column family is created with (merge operator, purge filter,
    /// bloom filters, the shared cache).
    fn options_for(&self, table: TableId) -> Options {
        table_options(&self.cache, table, self.purge_state(table), MEMTABLE_BYTES)
    }

    /// Records the smallest timestamp of `updates` for tables a `compact` run is tracking.
    /// Called after the write, so a write the run's flush missed is always seen here.
    fn track_write_timestamps(&self, updates: &[PartitionUpdate]) {
        if self.purge_runs.load(AtomicOrdering::SeqCst) == 0 {
            return;
        }
        let purge = self
            .purge
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        for update in updates {
            let Some(state) = purge.get(&update.table) else {
                continue;
            };
            if state.tracking.load(AtomicOrdering::SeqCst) {
                if let Some(ts) = min_timestamp(update) {
                    state
                        .min_write_timestamp
                        .fetch_min(ts, AtomicOrdering::SeqCst);
                }
            }
        }
    }

    /// A major compaction of one table that purges what gc_grace allows (see the module
    /// documentation for why each step is needed).
    fn compact_table(&self, table: TableId) -> Result<(), StorageError> {
        let state = self.purge_state(table);
        let _serial = state
            .compacting
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let db = self.db()?;
        let cf = db.cf(table)?;
        let mut options = CompactOptions::default();
        // Force: the bottommost level is compacted again after everything reaches it, so the
        // purge filter sees the fully merged values.
        options.set_bottommost_level_compaction(BottommostLevelCompaction::Force);
        let name = cf_name(table);
        let failed_before = self.events.failed_compactions(&name);
        let gc_grace = state.gc_grace_seconds.load(AtomicOrdering::SeqCst);
        if gc_grace == GC_GRACE_UNSET {
            db.compact_range_cf_opt(&cf, None::<&[u8]>, None::<&[u8]>, &options);
            return self.compaction_result(&db, table, &name, failed_before);
        }
        // Track before the flush: a write that misses the flushed memtable is recorded.
        state
            .min_write_timestamp
            .store(i64::MAX, AtomicOrdering::SeqCst);
        state.tracking.store(true, AtomicOrdering::SeqCst);
        self.purge_runs.fetch_add(1, AtomicOrdering::SeqCst);
        let result = (|| {
            db.flush_cf(&cf)
                .map_err(|e| engine_error("flush", Some(table), e))?;
            let now_seconds = crate::now_seconds();
            let gc_before = now_seconds.saturating_sub(gc_grace.unsigned_abs());
            let pushed = self.push_down_header_tombstones(&db, table, now_seconds, gc_before)?;
            if pushed > 0 {
                db.flush_cf(&cf)
                    .map_err(|e| engine_error("flush", Some(table), e))?;
            }
            *state.run() = Some(PurgeRun {
                now_seconds,
                gc_before,
            });
            db.compact_range_cf_opt(&cf, None::<&[u8]>, None::<&[u8]>, &options);
            self.compaction_result(&db, table, &name, failed_before)?;
            tracing::info!(%table, gc_before, pushed_row_deletions = pushed, "major compaction done");
            Ok(())
        })();
        *state.run() = None;
        state.tracking.store(false, AtomicOrdering::SeqCst);
        self.purge_runs.fetch_sub(1, AtomicOrdering::SeqCst);
        result
    }

    /// Copies every partition deletion and range tombstone purgeable at `gc_before` into the
    /// stored rows it shadows, as a row deletion with the same timestamps (a blind merge, so
    /// concurrent writes are safe), so that the header's can be purged without resurrecting
    /// them. Rows it shadows nothing in are skipped. Returns the number of rows written.
    fn push_down_header_tombstones(
        &self,
        db: &DbRef<'_>,
        table: TableId,
        now_seconds: mutation::LocalTime,
        gc_before: mutation::LocalTime,
    ) -> Result<u64, StorageError> {
        let cf = db.cf(table)?;
        let corrupt = |key: &[u8], what: &dyn std::fmt::Display| StorageError::Corruption {
            table,
            detail: format!("key of {} bytes: {what}", key.len()),
        };
        let purger = Purger {
            now_seconds,
            gc_before,
            timestamps_below: i64::MAX,
        };
        let snapshot = db.snapshot();
        let mut opts = ReadOptions::default();
        opts.set_snapshot(&snapshot);
        opts.set_total_order_seek(true);
        opts.fill_cache(false);
        let mut it = db.raw_iterator_cf_opt(&cf, opts);
        let mut batch = WriteBatch::default();
        let mut pushed = 0;
        let write = |batch: WriteBatch| {
            db.write(batch)
                .map_err(|e| engine_error("write", Some(table), e))
        };
        it.seek_to_first();
        // The purgeable tombstones of the partition being walked, and its key prefix.
        let mut partition: Vec<u8> = Vec::new();
        let mut purgeable = PartitionHeader::default();
        while it.valid() {
            let (Some(key), Some(value)) = (it.key(), it.value()) else {
                break;
            };
            let parsed = parse_key(key).ok_or_else(|| corrupt(key, &"malformed key"))?;
            let prefix = &key[..parsed.prefix_len];
            if prefix != partition.as_slice() {
                partition = prefix.to_vec();
                purgeable = PartitionHeader::default();
                if parsed.kind == KIND_HEADER {
                    let header = decode_partition_header(value).map_err(|e| corrupt(key, &e))?;
                    let mut kept = header.clone();
                    kept.purge_tombstones(&purger);
                    purgeable.deletion = header.deletion.filter(|_| kept.deletion.is_none());
                    purgeable.range_tombstones = header
                        .range_tombstones
                        .into_iter()
                        .filter(|rt| !kept.range_tombstones.contains(rt))
                        .collect();
                }
                if purgeable.is_empty() {
                    // Nothing to push in this partition: skip its rows.
                    match prefix_successor(&partition) {
                        Some(next) => it.seek(&next),
                        None => break,
                    }
                    continue;
                }
            } else if parsed.kind != KIND_HEADER {
                let covering = if parsed.kind == KIND_STATIC {
                    purgeable.deletion
                } else {
                    purgeable.covering_deletion(parsed.clustering)
                };
                if let Some(deletion) = covering {
                    let row = decode_row(value).map_err(|e| corrupt(key, &e))?;
                    let mut rest = row.clone();
                    rest.apply_deletions(Some(deletion));
                    if rest != row {
                        let mut encoded = Vec::new();
                        encode_row(
                            &Row {
                                deletion: Some(deletion),
                                ..Row::default()
                            },
                            &mut encoded,
                        );
                        batch.merge_cf(&cf, key, encoded);
                        pushed += 1;
                        if batch.len() >= PUSH_DOWN_BATCH {
                            write(std::mem::take(&mut batch))?;
                        }
                    }
                }
            }
            it.next();
        }
        it.status()
            .map_err(|e| engine_error("read", Some(table), e))?;
        if !batch.is_empty() {
            write(batch)?;
        }
        Ok(pushed)
    }

    fn faults(&self) -> MutexGuard<'_, Faults> {
        // Plain bookkeeping: a panic elsewhere cannot leave it inconsistent.
        self.faults
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Records a read that met corrupt data as a fault.
    fn note_read_fault(&self, error: &StorageError) {
        if let StorageError::Corruption { table, detail } = error {
            let mut faults = self.faults();
            faults.corrupt_reads += 1;
            faults.push(StorageFault {
                table: Some(*table),
                detail: format!("a read of table {table} met corrupt data: {detail}"),
            });
        }
    }

    /// Turns the compactions that failed since the last call into faults; one that met corrupt
    /// data suspends its table's compactions (see `Faults::suspended`). Others (a full disk)
    /// are only logged: RocksDB tries again later.
    fn handle_failed_compactions(&self, db: &DbRef<'_>) {
        let handled = self.faults().handled_failed_compactions;
        for (number, failure) in self.events.failed_compactions_after(handled) {
            let table = TableId::parse_str(&failure.column_family).ok();
            let corrupt = failure.status.starts_with("Corruption");
            let mut detail = format!(
                "a compaction of {} failed: {} (input files {})",
                table.map_or_else(|| "node metadata".to_string(), |t| format!("table {t}")),
                failure.status,
                failure.input_files.join(", ")
            );
            if corrupt {
                if let Some(table) = table {
                    if self.suspend_compactions(db, table, &failure.status) {
                        detail.push_str("; the table's automatic compactions are suspended");
                    }
                }
            }
            let mut faults = self.faults();
            faults.handled_failed_compactions = faults.handled_failed_compactions.max(number);
            if corrupt {
                faults.push(StorageFault { table, detail });
            }
        }
    }

    /// Stops the table's automatic compactions; true if they were running.
    fn suspend_compactions(&self, db: &DbRef<'_>, table: TableId, why: &str) -> bool {
        if self.faults().suspended.contains_key(&table) {
            return false;
        }
        let Ok(cf) = db.cf(table) else {
            return false; // dropped meanwhile
        };
        match db.set_options_cf(&cf, &[("disable_auto_compactions", "true")]) {
            Ok(()) => {
                tracing::error!(
                    %table,
                    error = why,
                    "a compaction met corrupt data; the table's automatic compactions are suspended"
                );
                self.faults().suspended.insert(table, why.to_string());
                true
            }
            Err(e) => {
                tracing::error!(%table, error = %e, "cannot suspend the table's compactions");
                false
            }
        }
    }

    /// `Ok` unless a compaction of `table` failed since `failed_before` was counted
    /// (`Events::failed_compactions`): RocksDB's manual compaction does not return its status.
    fn compaction_result(
        &self,
        db: &DbRef<'_>,
        table: TableId,
        name: &str,
        failed_before: u64,
    ) -> Result<(), StorageError> {
        if self.events.failed_compactions(name) == failed_before {
            return Ok(());
        }
        self.handle_failed_compactions(db);
        let status = self
            .events
            .last_failed_compaction(name)
            .map_or_else(|| "unknown error".to_string(), |f| f.status);
        if status.starts_with("Corruption") {
            Err(StorageError::Corruption {
                table,
                detail: format!("compaction failed: {status}"),
            })
        } else {
            Err(StorageError::Engine {
                operation: "compact",
                detail: status,
            })
        }
    }

    /// `flush` with the database in hand.
    fn flush_with(&self, db: &DbRef<'_>, table: Option<TableId>) -> Result<(), StorageError> {
        for t in self.selected_tables(db, table)? {
            // A table dropped meanwhile has nothing left to flush.
            if let Ok(cf) = db.cf(t) {
                db.flush_cf(&cf)
                    .map_err(|e| engine_error("flush", Some(t), e))?;
            }
        }
        if table.is_none() {
            db.flush()
                .map_err(|e| engine_error("flush metadata", None, e))?;
        }
        Ok(())
    }

    /// Reopens the database if a background error stopped it for good (`Events`: one RocksDB
    /// rates fatal, such as running out of file descriptors while switching commit log files),
    /// or if the last reopen failed; at most once per `REOPEN_INTERVAL`. RocksDB itself never
    /// recovers from such an error: until this, every write failed until the node restarted.
    /// The reopen waits for the calls in progress (they fail at once on a stopped database),
    /// closes the database, checks the commit log and replays it, as a restart does.
    fn recover(&self) -> Result<(), StorageError> {
        let closed = self
            .db
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .is_none();
        if !closed && !self.events.stopped_for_good() {
            return Ok(());
        }
        {
            let mut reopening = self
                .reopening
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if reopening
                .last
                .is_some_and(|at| at.elapsed() < REOPEN_INTERVAL)
            {
                return Ok(());
            }
            reopening.last = Some(std::time::Instant::now());
        }
        // While the cause lasts (no descriptor, no directory) a reopen would fail after closing
        // the database, which still serves reads: wait until files can be created again.
        if !closed {
            self.probe_directories()?;
        }
        tracing::warn!("an error stopped storage for good; reopening it");
        let mut slot = self
            .db
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        drop(slot.take()); // closes it
                           // Cleared after the close (an error the old database reports while it closes is
                           // not this reopen's) and before the open: an error of the reopened database sets
                           // it again.
        self.events.clear_stopped_for_good();
        // Writes the database applied without the commit log are gone with it, as after a
        // crash: nothing cached may outlive them.
        for table in self.tables().iter() {
            self.forget_cached(*table);
        }
        let reopened = check_commit_log(&self.config, false).and_then(|()| {
            open_db(&self.config, &self.db_options, &self.cache, |id| {
                self.purge_state(id)
            })
        });
        let failure = match reopened {
            Ok((db, tables)) => {
                // Tables whose compactions a corrupt file stopped stay so.
                let suspended: Vec<TableId> = self.faults().suspended.keys().copied().collect();
                for table in suspended {
                    let mut name = [0; uuid::fmt::Hyphenated::LENGTH];
                    if let Some(cf) = db.cf_handle(cf_name_in(table, &mut name)) {
                        if let Err(e) =
                            db.set_options_cf(&cf, &[("disable_auto_compactions", "true")])
                        {
                            tracing::error!(%table, error = %e, "cannot suspend the table's compactions");
                        }
                    }
                }
                // The tables first: a table created as soon as the lock is let go must not be
                // overwritten by this older list.
                *self.tables() = tables;
                *slot = Some(db);
                drop(slot);
                tracing::info!("storage reopened; writes resume");
                None
            }
            Err(e) => {
                drop(slot);
                tracing::error!(error = %e, "reopening storage failed; trying again later");
                Some(e)
            }
        };
        let mut reopening = self
            .reopening
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        reopening.failure = failure.as_ref().map(ToString::to_string);
        failure.map_or(Ok(()), Err)
    }

    /// Creates, writes and removes a file in the data and commit log directories, as opening
    /// the database will: an error if that is not possible yet.
    fn probe_directories(&self) -> Result<(), StorageError> {
        let dirs = [
            Some(&self.config.data_dir),
            self.config.commit_log_dir.as_ref(),
        ];
        for dir in dirs.into_iter().flatten() {
            let probe = dir.join(PROBE_FILE_NAME);
            let written = std::fs::write(&probe, b"probe");
            let _ = std::fs::remove_file(&probe);
            written.map_err(|e| StorageError::Engine {
                operation: "reopen storage",
                detail: format!("{} cannot be written yet: {e}", dir.display()),
            })?;
        }
        Ok(())
    }

    fn selected_tables(
        &self,
        db: &DbRef<'_>,
        table: Option<TableId>,
    ) -> Result<Vec<TableId>, StorageError> {
        match table {
            Some(t) => {
                db.cf(t)?;
                Ok(vec![t])
            }
            None => Ok(self.tables().iter().copied().collect()),
        }
    }
}

/// Every stored entry of the partition with this prefix, if their keys and values total at
/// most `max_bytes`.
fn load_partition(
    view: &TableView<'_>,
    table: TableId,
    prefix: &[u8],
    max_bytes: usize,
) -> Result<Option<CachedPartition>, StorageError> {
    let mut lower = prefix.to_vec();
    lower.push(KIND_HEADER);
    let mut upper = prefix.to_vec();
    upper.push(KIND_ROW + 1);
    let mut entries = Vec::new();
    let mut bytes = 0usize;
    let mut fits = true;
    view.visit(&lower, Some(&upper), false, true, &mut |k, v| {
        bytes += k.len() + v.len();
        if bytes > max_bytes {
            fits = false;
            return Ok(Visit::Stop);
        }
        entries.push((k.to_vec(), v.to_vec()));
        Ok(Visit::Continue)
    })?;
    Ok(fits.then(|| CachedPartition::new(table, prefix, entries)))
}

/// A snapshot view of one table column family for the shared read path.
struct TableView<'a> {
    db: &'a Db,
    table: TableId,
    cf: std::sync::Arc<rocksdb::BoundColumnFamily<'a>>,
    snapshot: rocksdb::SnapshotWithThreadMode<'a, Db>,
    /// Memtables and block cache only: a read that needs the disk fails with `WouldBlock`.
    cache_only: bool,
}

impl<'a> TableView<'a> {
    /// A consistent view of the table as of now.
    fn new(db: &'a DbRef<'_>, table: TableId, cache_only: bool) -> Result<Self, StorageError> {
        Ok(TableView {
            db,
            table,
            cf: db.cf(table)?,
            snapshot: db.snapshot(),
            cache_only,
        })
    }

    fn read_options(&self) -> ReadOptions {
        let mut opts = ReadOptions::default();
        opts.set_snapshot(&self.snapshot);
        if self.cache_only {
            opts.set_read_tier(ReadTier::BlockCache);
        }
        opts
    }
}

impl Source for TableView<'_> {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        self.db
            .get_pinned_cf_opt(&self.cf, key, &self.read_options())
            .map(|v| v.map(|v| v.to_vec()))
            .map_err(|e| engine_error("read", Some(self.table), e))
    }

    fn visit(
        &self,
        lower: &[u8],
        upper: Option<&[u8]>,
        reverse: bool,
        within_partition: bool,
        f: &mut Visitor<'_>,
    ) -> Result<(), StorageError> {
        let mut opts = self.read_options();
        opts.set_iterate_lower_bound(lower.to_vec());
        if let Some(upper) = upper {
            opts.set_iterate_upper_bound(upper.to_vec());
        }
        if within_partition && !reverse {
            // Stay inside this token's keys and let the prefix bloom filter skip SSTables
            // without the token. (Reverse iteration relies on the bounds alone.)
            opts.set_prefix_same_as_start(true);
        } else {
            // Crossing tokens: the prefix extractor must not confine the iterator.
            opts.set_total_order_seek(true);
        }
        let mut it = self.db.raw_iterator_cf_opt(&self.cf, opts);
        if reverse {
            it.seek_to_last();
        } else {
            it.seek(lower);
        }
        while it.valid() {
            let (Some(k), Some(v)) = (it.key(), it.value()) else {
                break;
            };
            // The bounds already hold; checking again costs little and guards the page logic
            // against any iterator mode subtlety.
            if k < lower || upper.is_some_and(|u| k >= u) {
                break;
            }
            if let Visit::Stop = f(k, v)? {
                return Ok(());
            }
            if reverse {
                it.prev();
            } else {
                it.next();
            }
        }
        it.status()
            .map_err(|e| engine_error("read", Some(self.table), e))
    }
}

impl RocksEngine {
    /// Writes every update of `group` as one RocksDB write batch: atomic, one commit log
    /// record.
    fn write(
        &self,
        group: &[&[PartitionUpdate]],
        durability: Durability,
        no_slowdown: bool,
    ) -> Result<(), StorageError> {
        let updates = || group.iter().flat_map(|updates| updates.iter());
        let db = if no_slowdown {
            self.try_db()?
        } else {
            self.db()?
        };
        let mut batch = WriteBatch::default();
        let mut all_fragments = Vec::with_capacity(group.iter().map(|u| u.len()).sum());
        for update in updates() {
            let cf = db.cf(update.table)?;
            let fragments = fragments(update)?;
            for (key, value) in &fragments {
                batch.merge_cf(&cf, key, value);
            }
            all_fragments.push(fragments);
        }
        let mut opts = WriteOptions::default();
        match durability {
            Durability::Periodic => opts.set_sync(false),
            Durability::Batch => opts.set_sync(true),
            Durability::None => opts.disable_wal(true),
        }
        opts.set_no_slowdown(no_slowdown);
        let written = db.write_opt(batch, &opts);
        // After the write is visible and before it is acknowledged (see `cache`). A failed
        // write forgets the partition: nothing stale survives a write RocksDB half-did.
        if let Some(cache) = &self.partition_cache {
            for (update, fragments) in updates().zip(&all_fragments) {
                if let Ok(prefix) = partition_prefix(&update.key) {
                    let fragments = written.is_ok().then_some(fragments.as_slice());
                    cache.apply_write(update.table, &prefix, fragments);
                }
            }
        }
        written.map_err(|e| engine_error("write", None, e))?;
        for updates in group {
            self.track_write_timestamps(updates);
        }
        Ok(())
    }

    /// The database for a read: without waiting for a reopen if `cache_only` (a `try_`
    /// call on a runtime's thread).
    fn db_for(&self, cache_only: bool) -> Result<DbRef<'_>, StorageError> {
        if cache_only {
            self.try_db()
        } else {
            self.db()
        }
    }

    fn forget_cached(&self, table: TableId) {
        if let Some(cache) = &self.partition_cache {
            cache.invalidate_table(table);
        }
    }

    fn read_partition_from(
        &self,
        table: TableId,
        key: &PartitionKey,
        slice: &ClusteringSlice,
        max_rows: usize,
        resume: Option<&[u8]>,
        cache_only: bool,
    ) -> Result<PartitionPage, StorageError> {
        let prefix = partition_prefix(key)?;
        let cache_lookup = self
            .partition_cache
            .as_ref()
            .map(|cache| (cache, cache.lookup(table, &prefix)));
        let read = |source: &dyn read::Source| {
            read::read_partition(source, table, key, &prefix, slice, max_rows, resume)
        };
        // A view (and its snapshot) is made only after the lookup: a miss's ticket must predate
        // what the reader reads. A hit needs neither.
        let page = match cache_lookup {
            Some((_, Lookup::Hit(cached))) => read(&cached)?,
            Some((cache, Lookup::Miss(ticket))) => {
                let db = self.db_for(cache_only)?;
                let view = TableView::new(&db, table, cache_only)?;
                match load_partition(&view, table, &prefix, cache.max_partition_bytes())? {
                    Some(loaded) => {
                        cache.insert(table, &prefix, ticket, Some(loaded.clone()));
                        read(&loaded)?
                    }
                    None => {
                        cache.insert(table, &prefix, ticket, None);
                        read(&view)?
                    }
                }
            }
            _ => {
                let db = self.db_for(cache_only)?;
                let view = TableView::new(&db, table, cache_only)?;
                read(&view)?
            }
        };
        // Counted once, when the read succeeds (a cache-only attempt that falls back to the
        // blocking read is one read).
        self.partition_reads.fetch_add(1, AtomicOrdering::Relaxed);
        Ok(page)
    }
}

impl StorageEngine for RocksEngine {
    fn create_table(&self, table: TableId) -> Result<(), StorageError> {
        // The database before the table set, always in that order (see `recover`).
        let db = self.db()?;
        let mut tables = self.tables();
        if db.cf_handle(&cf_name(table)).is_none() {
            db.create_cf(cf_name(table), &self.options_for(table))
                .map_err(|e| engine_error("create table", Some(table), e))?;
        }
        tables.insert(table);
        Ok(())
    }

    fn drop_table(&self, table: TableId) -> Result<(), StorageError> {
        let db = self.db()?;
        let mut tables = self.tables();
        if db.cf_handle(&cf_name(table)).is_some() {
            db.drop_cf(&cf_name(table))
                .map_err(|e| engine_error("drop table", Some(table), e))?;
        }
        tables.remove(&table);
        self.faults().suspended.remove(&table);
        self.purge
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(&table);
        self.forget_cached(table);
        Ok(())
    }

    fn truncate_table(&self, table: TableId) -> Result<(), StorageError> {
        // Dropping and recreating the column family releases the space at once, unlike range
        // deletes that leave tombstones for compaction. Writes racing with a truncate may be
        // lost or fail, as with Cassandra's TRUNCATE.
        let db = self.db()?;
        let _tables = self.tables();
        let name = cf_name(table);
        if db.cf_handle(&name).is_none() {
            return Err(StorageError::UnknownTable(table));
        }
        db.drop_cf(&name)
            .map_err(|e| engine_error("truncate table", Some(table), e))?;
        let created = db
            .create_cf(&name, &self.options_for(table))
            .map_err(|e| engine_error("truncate table", Some(table), e));
        self.forget_cached(table);
        // The new column family has none of the old files, and compactions again.
        self.faults().suspended.remove(&table);
        created
    }

    fn apply_batch(
        &self,
        updates: &[PartitionUpdate],
        durability: Durability,
    ) -> Result<(), StorageError> {
        self.write(&[updates], durability, false)
    }

    fn apply_group(
        &self,
        group: &[&[PartitionUpdate]],
        durability: Durability,
    ) -> Result<(), StorageError> {
        self.write(group, durability, false)
    }

    fn try_apply_group(
        &self,
        group: &[&[PartitionUpdate]],
        durability: Durability,
    ) -> Result<(), StorageError> {
        if durability == Durability::Batch {
            return Err(StorageError::WouldBlock);
        }
        self.write(group, durability, true)
    }

    fn try_apply_batch(
        &self,
        updates: &[PartitionUpdate],
        durability: Durability,
    ) -> Result<(), StorageError> {
        if durability == Durability::Batch {
            return Err(StorageError::WouldBlock);
        }
        // Periodic mode appends to the log file without syncing; the one wait left is a
        // write stall, which `no_slowdown` turns into `WouldBlock`.
        self.write(&[updates], durability, true)
    }

    fn read_partition(
        &self,
        table: TableId,
        key: &PartitionKey,
        slice: &ClusteringSlice,
        max_rows: usize,
        resume: Option<&[u8]>,
    ) -> Result<PartitionPage, StorageError> {
        self.read_partition_from(table, key, slice, max_rows, resume, false)
            .inspect_err(|e| self.note_read_fault(e))
    }

    fn try_read_partition(
        &self,
        table: TableId,
        key: &PartitionKey,
        slice: &ClusteringSlice,
        max_rows: usize,
        resume: Option<&[u8]>,
    ) -> Result<PartitionPage, StorageError> {
        self.read_partition_from(table, key, slice, max_rows, resume, true)
            .inspect_err(|e| self.note_read_fault(e))
    }

    fn scan(
        &self,
        table: TableId,
        start: ScanStart,
        end_token: Option<i64>,
        max_rows: usize,
    ) -> Result<ScanPage, StorageError> {
        let db = self.db()?;
        let view = TableView::new(&db, table, false)?;
        read::scan(&view, table, start, end_token, max_rows)
            .inspect_err(|e| self.note_read_fault(e))
    }

    fn put_meta(&self, key: &[u8], value: &[u8]) -> Result<(), StorageError> {
        // Synced: `Durability::Batch`'s options.
        self.put_meta_with(key, value, Durability::Batch)
    }

    fn delete_meta(&self, key: &[u8]) -> Result<(), StorageError> {
        self.delete_meta_with(key, Durability::Batch)
    }

    fn put_meta_with(
        &self,
        key: &[u8],
        value: &[u8],
        durability: Durability,
    ) -> Result<(), StorageError> {
        self.db()?
            .put_opt(key, value, &meta_write_options(durability))
            .map_err(|e| engine_error("write metadata", None, e))
    }

    fn try_write_meta(
        &self,
        key: &[u8],
        value: Option<&[u8]>,
        durability: Durability,
    ) -> Result<(), StorageError> {
        if durability == Durability::Batch {
            return Err(StorageError::WouldBlock);
        }
        let mut opts = meta_write_options(durability);
        opts.set_no_slowdown(true);
        let db = self.try_db()?;
        match value {
            Some(value) => db.put_opt(key, value, &opts),
            None => db.delete_opt(key, &opts),
        }
        .map_err(|e| engine_error("write metadata", None, e))
    }

    fn delete_meta_with(&self, key: &[u8], durability: Durability) -> Result<(), StorageError> {
        self.db()?
            .delete_opt(key, &meta_write_options(durability))
            .map_err(|e| engine_error("delete metadata", None, e))
    }

    fn get_meta(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        self.db()?
            .get(key)
            .map_err(|e| engine_error("read metadata", None, e))
    }

    fn scan_meta(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>, StorageError> {
        self.scan_meta_page(prefix, None, usize::MAX)
    }

    fn scan_meta_page(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>, StorageError> {
        let mut opts = ReadOptions::default();
        opts.set_iterate_lower_bound(prefix.to_vec());
        if let Some(upper) = crate::keys::prefix_successor(prefix) {
            opts.set_iterate_upper_bound(upper);
        }
        let db = self.db()?;
        let mut it = db.raw_iterator_opt(opts);
        it.seek(after.filter(|after| *after >= prefix).unwrap_or(prefix));
        let mut out = Vec::new();
        while it.valid() && out.len() < limit {
            let (Some(k), Some(v)) = (it.key(), it.value()) else {
                break;
            };
            if !k.starts_with(prefix) {
                break;
            }
            if after.is_none_or(|after| k > after) {
                out.push((k.to_vec(), v.to_vec()));
            }
            it.next();
        }
        it.status()
            .map_err(|e| engine_error("read metadata", None, e))?;
        Ok(out)
    }

    fn flush(&self, table: Option<TableId>) -> Result<(), StorageError> {
        self.flush_with(&self.db()?, table)
    }

    fn compact(&self, table: Option<TableId>) -> Result<(), StorageError> {
        // Every table is compacted even if one fails (a corrupt data file); the first failure
        // is the answer.
        let mut first_failure = None;
        let tables = self.selected_tables(&self.db()?, table)?;
        for t in tables {
            // The purge leaves what reads return unchanged, but not the stored bytes.
            let compacted = self.compact_table(t);
            self.forget_cached(t);
            match compacted {
                Ok(()) => {}
                // A table dropped meanwhile has nothing left to compact.
                Err(StorageError::UnknownTable(_)) if table.is_none() => {}
                Err(e) => {
                    first_failure.get_or_insert(e);
                }
            }
        }
        if table.is_none() {
            self.db()?.compact_range(None::<&[u8]>, None::<&[u8]>);
        }
        first_failure.map_or(Ok(()), Err)
    }

    fn take_faults(&self) -> Vec<StorageFault> {
        if let Ok(db) = self.db() {
            self.handle_failed_compactions(&db);
        }
        std::mem::take(&mut self.faults().pending)
    }

    fn recover(&self) -> Result<(), StorageError> {
        RocksEngine::recover(self)
    }

    fn set_gc_grace(&self, table: TableId, gc_grace_seconds: i32) -> Result<(), StorageError> {
        self.db()?.cf(table)?;
        self.purge_state(table)
            .gc_grace_seconds
            .store(gc_grace_seconds.max(0), AtomicOrdering::SeqCst);
        Ok(())
    }

    fn table_stats(&self, table: TableId) -> Result<TableStats, StorageError> {
        let db = self.db()?;
        let cf = db.cf(table)?;
        let name = cf_name(table);
        let files = db
            .live_files()
            .map_err(|e| engine_error("list live files", Some(table), e))?;
        let mut stats = TableStats::default();
        for f in files.iter().filter(|f| f.column_family_name == name) {
            stats.live_files += 1;
            stats.live_file_bytes += f.size as u64;
            stats.file_entries += f.num_entries;
        }
        let property = |p: &str| db.cf_property(&cf, table, p);
        stats.memtable_bytes = property("rocksdb.cur-size-all-mem-tables")?;
        stats.memtable_entries = property("rocksdb.num-entries-active-mem-table")?
            + property("rocksdb.num-entries-imm-mem-tables")?;
        stats.compactions_suspended = self.faults().suspended.contains_key(&table);
        Ok(stats)
    }

    fn metrics(&self) -> Result<Vec<(&'static str, u64)>, StorageError> {
        let ticker = |t: Ticker| self.db_options.get_ticker_count(t);
        let mut pending_compaction_bytes = 0;
        let mut memtable_bytes = 0;
        let db = self.db()?;
        for t in self.selected_tables(&db, None)? {
            if let Ok(cf) = db.cf(t) {
                let property = |p: &str| db.cf_property(&cf, t, p);
                pending_compaction_bytes += property("rocksdb.estimate-pending-compaction-bytes")?;
                memtable_bytes += property("rocksdb.cur-size-all-mem-tables")?;
            }
        }
        let running_compactions = db
            .property_int_value("rocksdb.num-running-compactions")
            .map_err(|e| engine_error("read a property", None, e))?
            .unwrap_or(0);
        let (background_errors, background_errors_cleared) = self.events.background_errors();
        let (corrupt_reads, suspended_tables) = {
            let faults = self.faults();
            (faults.corrupt_reads, faults.suspended.len() as u64)
        };
        let (cache_hits, cache_misses, cache_bytes, cache_partitions) = self
            .partition_cache
            .as_ref()
            .map_or((0, 0, 0, 0), PartitionCache::stats);
        Ok(vec![
            (
                "partition_reads",
                self.partition_reads.load(AtomicOrdering::Relaxed),
            ),
            ("partition_cache_hits", cache_hits),
            ("partition_cache_misses", cache_misses),
            ("partition_cache_bytes", cache_bytes),
            ("partition_cache_partitions", cache_partitions),
            (
                "file_read_bytes",
                ticker(Ticker::LastLevelReadBytes) + ticker(Ticker::NonLastLevelReadBytes),
            ),
            ("block_cache_hits", ticker(Ticker::BlockCacheHit)),
            ("block_cache_misses", ticker(Ticker::BlockCacheMiss)),
            ("block_cache_data_hits", ticker(Ticker::BlockCacheDataHit)),
            (
                "block_cache_data_misses",
                ticker(Ticker::BlockCacheDataMiss),
            ),
            (
                "bloom_prefix_checked",
                ticker(Ticker::BloomFilterPrefixChecked),
            ),
            (
                "bloom_prefix_useful",
                ticker(Ticker::BloomFilterPrefixUseful),
            ),
            (
                "bloom_prefix_true_positive",
                ticker(Ticker::BloomFilterPrefixTruePositive),
            ),
            ("bloom_full_useful", ticker(Ticker::BloomFilterUseful)),
            (
                "bloom_full_positive",
                ticker(Ticker::BloomFilterFullPositive),
            ),
            (
                "bloom_full_true_positive",
                ticker(Ticker::BloomFilterFullTruePositive),
            ),
            // Iterator seeks (every partition read) that a prefix filter ruled out or let
            // through; the bloom_* tickers above count point lookups only.
            (
                "bloom_seek_filtered",
                ticker(Ticker::LastLevelSeekFiltered) + ticker(Ticker::NonLastLevelSeekFiltered),
            ),
            (
                "bloom_seek_matched",
                ticker(Ticker::LastLevelSeekFilterMatch)
                    + ticker(Ticker::NonLastLevelSeekFilterMatch),
            ),
            ("memtable_bytes", memtable_bytes),
            ("pending_compaction_bytes", pending_compaction_bytes),
            ("running_compactions", running_compactions),
            ("compaction_read_bytes", ticker(Ticker::CompactReadBytes)),
            ("compaction_write_bytes", ticker(Ticker::CompactWriteBytes)),
            ("flush_write_bytes", ticker(Ticker::FlushWriteBytes)),
            ("write_stall_micros", ticker(Ticker::StallMicros)),
            ("background_errors", background_errors),
            ("background_errors_cleared", background_errors_cleared),
            ("failed_compactions", self.events.all_failed_compactions()),
            ("corrupt_data_reads", corrupt_reads),
            ("tables_with_suspended_compactions", suspended_tables),
        ])
    }

    fn sync_commit_log(&self) -> Result<(), StorageError> {
        self.db()?
            .flush_wal(true)
            .map_err(|e| engine_error("sync commit log", None, e))
    }

    /// RocksDB enforces `max_total_wal_size` only when a write arrives, and skips it while the
    /// oldest log's memtables are being flushed; a burst that ends during that flush leaves the
    /// commit log above its bound until the next write, and replay after a crash longer. Once
    /// writes have stopped (the sequence number is the same as at the previous call) this
    /// checks the log once, and if it is over the bound with no flush running, flushes every
    /// memtable, which frees every log but the current one.
    fn maintain_commit_log(&self) -> Result<(), StorageError> {
        let Ok(db) = self.db() else {
            return Ok(()); // closed after a failed reopen: `recover` reports that
        };
        let sequence = db.latest_sequence_number();
        let previous = self
            .maintained_sequence
            .swap(sequence, AtomicOrdering::Relaxed);
        if sequence != previous || self.checked_sequence.load(AtomicOrdering::Relaxed) == sequence {
            return Ok(());
        }
        let running_flushes = db
            .property_int_value("rocksdb.num-running-flushes")
            .map_err(|e| engine_error("read a property", None, e))?
            .unwrap_or(0);
        if running_flushes > 0 {
            // What RocksDB is flushing may free the log; check again next time.
            return Ok(());
        }
        // Checked once per quiet period, failed or not: a flush that fails (a full disk) is
        // retried after the next write, not reported every second.
        self.checked_sequence
            .store(sequence, AtomicOrdering::Relaxed);
        let bytes = self.commit_log_bytes()?;
        if bytes > self.config.commit_log_total_bytes {
            tracing::debug!(
                bytes,
                bound = self.config.commit_log_total_bytes,
                "commit log over its bound with writes stopped; flushing memtables"
            );
            self.flush_with(&db, None)?;
        }
        Ok(())
    }
}

/// The write options of a metadata write as durable as `durability` (the commit log's modes).
fn meta_write_options(durability: Durability) -> WriteOptions {
    let mut opts = WriteOptions::default();
    match durability {
        Durability::Periodic => opts.set_sync(false),
        Durability::Batch => opts.set_sync(true),
        Durability::None => opts.disable_wal(true),
    }
    opts
}

#[cfg(test)]
mod tests {
    use super::*;
    use mutation::{Cell, ColumnData, Row};

    fn config(dir: &std::path::Path) -> RocksConfig {
        RocksConfig {
            data_dir: dir.to_path_buf(),
            commit_log_dir: None,
            block_cache_bytes: 1 << 20,
            partition_cache_bytes: 1 << 20,
            commit_log_total_bytes: DEFAULT_COMMIT_LOG_TOTAL_BYTES,
            commit_log_sync: Durability::Batch,
            ignore_commit_log_replay_errors: false,
            max_open_data_files: 1000,
        }
    }

    fn engine(dir: &std::path::Path) -> RocksEngine {
        RocksEngine::open(config(dir)).expect("open")
    }

    /// Partition `k` (token `k`) with row `k` holding `value` in column 1.
    fn one_cell_update(table: TableId, k: u8, value: Vec<u8>) -> PartitionUpdate {
        PartitionUpdate {
            table,
            key: PartitionKey {
                token: i64::from(k),
                key: vec![k],
            },
            header: None,
            static_row: None,
            rows: vec![(
                vec![k],
                Row {
                    columns: vec![ColumnData::Simple {
                        id: 1,
                        cell: Cell::live(1, value),
                    }],
                    ..Row::default()
                },
            )],
        }
    }

    /// The rows stored for partition `k` of `one_cell_update`.
    fn rows_of(engine: &RocksEngine, table: TableId, k: u8) -> Vec<(Vec<u8>, Row)> {
        let key = one_cell_update(table, k, Vec::new()).key;
        engine
            .read_partition(table, &key, &ClusteringSlice::all(), usize::MAX, None)
            .expect("read")
            .data
            .rows
    }

    /// A data file no manifest names (a flush a full disk cut short) is removed; the live
    /// ones, and the data in them, stay.
    #[test]
    fn data_files_no_manifest_names_are_removed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let table = TableId::from_u128(1);
        {
            let engine = engine(dir.path());
            engine.create_table(table).expect("create");
            engine
                .apply_batch(
                    &[one_cell_update(table, 7, b"kept".to_vec())],
                    Durability::Batch,
                )
                .expect("write");
            engine.flush(None).expect("flush");
        }
        let orphan = dir.path().join("999999.sst");
        std::fs::write(&orphan, vec![0u8; 4096]).expect("orphan");
        let removed = remove_orphan_data_files(&config(dir.path())).expect("cleanup");
        assert_eq!(removed, 1);
        assert!(!orphan.exists());
        assert_eq!(
            remove_orphan_data_files(&config(dir.path())).expect("cleanup"),
            0
        );
        let engine = engine(dir.path());
        assert_eq!(rows_of(&engine, table, 7).len(), 1);
    }

    #[test]
    fn flushes_write_level_0_uncompressed_and_compactions_compress() {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = engine(dir.path());
        let table = TableId::from_u128(1);
        engine.create_table(table).expect("create");
        for k in 0..200u8 {
            // Compresses about 50 to 1.
            let update = one_cell_update(table, k, vec![b'x'; 2048]);
            engine
                .apply_batch(&[update], Durability::None)
                .expect("write");
        }
        // Raw keys and values over file bytes, per level (0 when the level has no file).
        let ratio = |level: usize| -> f64 {
            let name = format!("rocksdb.compression-ratio-at-level{level}");
            let db = engine.db().expect("db");
            let value = db
                .property_value_cf(&db.cf(table).expect("cf"), name.as_str())
                .expect("property");
            value
                .expect("known property")
                .parse::<f64>()
                .expect("a number")
                .max(0.0)
        };
        StorageEngine::flush(&engine, Some(table)).expect("flush");
        let flushed = ratio(0);
        assert!(
            flushed > 0.0 && flushed < 1.5,
            "the flushed file is uncompressed: ratio {flushed}"
        );
        StorageEngine::compact(&engine, Some(table)).expect("compact");
        assert_eq!(ratio(0), 0.0, "the compaction took the L0 file");
        let compacted = (1..COMPRESSION_PER_LEVEL.len())
            .map(ratio)
            .fold(0.0, f64::max);
        assert!(
            compacted > 4.0,
            "the compacted file is LZ4-compressed: ratio {compacted}"
        );
    }

    /// The nice values of this process's threads whose name starts with `prefix`.
    fn thread_nices(prefix: &str) -> Vec<i64> {
        let mut nices = Vec::new();
        for task in std::fs::read_dir("/proc/self/task").expect("tasks") {
            let path = task.expect("task").path();
            let Ok(comm) = std::fs::read_to_string(path.join("comm")) else {
                continue; // exited since the listing
            };
            let Ok(stat) = std::fs::read_to_string(path.join("stat")) else {
                continue;
            };
            if comm.starts_with(prefix) {
                // After the command's closing parenthesis: state is field 3, nice field 19.
                let fields: Vec<&str> = stat
                    .rsplit_once(')')
                    .expect("stat")
                    .1
                    .split_whitespace()
                    .collect();
                nices.push(fields[16].parse().expect("nice"));
            }
        }
        nices
    }

    #[test]
    fn flushes_and_compactions_run_at_the_lowest_cpu_priority() {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = engine(dir.path());
        let table = TableId::from_u128(1);
        engine.create_table(table).expect("create");
        for k in 0..10u8 {
            let update = one_cell_update(table, k, vec![k]);
            engine
                .apply_batch(&[update], Durability::None)
                .expect("write");
        }
        StorageEngine::compact(&engine, Some(table)).expect("flush and compact");
        // A pool's thread lowers its priority when it takes its first job.
        for pool in ["rocksdb:high", "rocksdb:low"] {
            let nices = thread_nices(pool);
            assert!(
                nices.contains(&19),
                "a {pool} thread ran a job at nice 19: {nices:?}"
            );
            assert!(
                nices.iter().all(|&n| n == 0 || n == 19),
                "{pool}: {nices:?}"
            );
        }
    }

    fn engine_with_commit_log_bound(dir: &std::path::Path, bound: u64) -> RocksEngine {
        RocksEngine::open(RocksConfig {
            commit_log_total_bytes: bound,
            ..config(dir)
        })
        .expect("open")
    }

    /// The bytes of the engine's commit log files.
    fn log_bytes(engine: &RocksEngine) -> u64 {
        engine.commit_log_bytes().expect("measure the commit log")
    }

    #[test]
    fn small_memtables_fill_before_a_flush_merges_them_into_one_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = engine(dir.path());
        let table = TableId::from_u128(1);
        engine.create_table(table).expect("create");
        // 12 MiB: more than one memtable, less than the eight a flush waits for.
        for i in 0..192u32 {
            let update = one_cell_update(table, (i % 64) as u8, vec![i as u8; 64 << 10]);
            engine
                .apply_batch(&[update], Durability::Periodic)
                .expect("write");
        }
        let db = engine.db().expect("db");
        let immutable = db
            .property_int_value_cf(
                &db.cf(table).expect("cf"),
                "rocksdb.num-immutable-mem-table",
            )
            .expect("property")
            .expect("known property");
        assert!(immutable >= 1, "{immutable} full memtables");
        assert_eq!(engine.table_stats(table).expect("stats").live_files, 0);
        // Each key was written in more than one memtable; a read merges them (the newest cell
        // wins: the same timestamp, so the larger value).
        let read = |engine: &RocksEngine| {
            let rows = rows_of(engine, table, 0);
            assert_eq!(rows.len(), 1);
            format!("{:?}", rows[0])
        };
        let before = read(&engine);
        engine.flush(Some(table)).expect("flush");
        assert_eq!(engine.table_stats(table).expect("stats").live_files, 1);
        assert_eq!(read(&engine), before);
    }

    #[test]
    fn the_commit_log_is_kept_within_its_bound() {
        const BOUND: u64 = 1 << 20;
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = engine_with_commit_log_bound(dir.path(), BOUND);
        let (quiet, busy) = (TableId::from_u128(1), TableId::from_u128(2));
        engine.create_table(quiet).expect("create");
        engine.create_table(busy).expect("create");
        // The quiet table's one write is in the first commit log file, and its memtable never
        // fills; the busy table writes 8 MiB, far from the 64 MiB of memtables its flushes wait
        // for. Without the bound no memtable is flushed, so every commit log file stays.
        let write = |update| {
            engine
                .apply_batch(&[update], Durability::Periodic)
                .expect("write")
        };
        write(one_cell_update(quiet, 0, vec![0; 16]));
        for i in 0..2048u32 {
            write(one_cell_update(busy, i as u8, vec![1; 4096]));
        }
        // Writes have stopped: RocksDB checks the bound no more, and the node's timer calls
        // `maintain_commit_log`, which flushes what the last burst left above it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while log_bytes(&engine) > BOUND {
            assert!(
                std::time::Instant::now() < deadline,
                "the commit log is {} bytes, bound {BOUND}",
                log_bytes(&engine)
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
            engine.maintain_commit_log().expect("maintain");
        }
        // Nothing was lost by the flushes that kept it there.
        assert_eq!(rows_of(&engine, quiet, 0).len(), 1);
        assert_eq!(rows_of(&engine, busy, 255).len(), 1);
    }

    #[test]
    fn a_commit_log_left_over_its_bound_when_writes_stop_is_flushed() {
        const BOUND: u64 = 1 << 20;
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = engine_with_commit_log_bound(dir.path(), BOUND);
        let table = TableId::from_u128(1);
        engine.create_table(table).expect("create");
        // RocksDB checks the bound before a write: one 2 MiB write passes it and leaves the log
        // over the bound, and with no write after it RocksDB never looks again.
        let updates: Vec<_> = (0..32u8)
            .map(|k| one_cell_update(table, k, vec![k; 64 << 10]))
            .collect();
        engine
            .apply_batch(&updates, Durability::Periodic)
            .expect("write");
        assert!(log_bytes(&engine) > BOUND);
        // The first call only notes where writes are; the second sees they stopped.
        engine.maintain_commit_log().expect("maintain");
        assert!(log_bytes(&engine) > BOUND);
        engine.maintain_commit_log().expect("maintain");
        assert!(
            log_bytes(&engine) <= BOUND,
            "the commit log is {} bytes, bound {BOUND}",
            log_bytes(&engine)
        );
        assert_eq!(rows_of(&engine, table, 31).len(), 1);
    }

    #[test]
    fn recognises_rocksdb_direct_io_refusal() {
        let refusal = StorageError::Engine {
            operation: "open",
            detail: "Invalid argument: Direct I/O is not supported by the specified DB.".into(),
        };
        assert!(RocksEngine::direct_io_unsupported(&refusal));
        let other = StorageError::Engine {
            operation: "open",
            detail: "IO error: No space left".into(),
        };
        assert!(!RocksEngine::direct_io_unsupported(&other));
    }

    #[test]
    fn a_commit_log_tail_rocksdb_would_spin_on_is_cut_and_the_rest_replayed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let table = TableId::from_u128(1);
        let update = |k: u8| one_cell_update(table, k, vec![k]);
        {
            let engine = engine(dir.path());
            engine.create_table(table).expect("create");
            for k in 0..50 {
                engine
                    .apply_batch(&[update(k)], Durability::Batch)
                    .expect("write");
            }
        }
        let log = crate::commit_log_check::newest_log_for_tests(dir.path());
        assert!(
            std::fs::metadata(&log).expect("log").len() > 0,
            "the writes are in the log"
        );
        // A header with a recycled log's record type after the last record: RocksDB 11.8's
        // reader spins on it forever (facebook/rocksdb#13333).
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&log)
            .expect("open log");
        std::io::Write::write_all(&mut f, &[0x12, 0x34, 0x56, 0x78, 0x20, 0, 5, 1, 2, 3])
            .expect("append");
        drop(f);

        let (done, opened) = std::sync::mpsc::channel();
        let path = dir.path().to_path_buf();
        std::thread::spawn(move || {
            let _ = done.send(engine(&path));
        });
        let engine = opened
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("the engine opens instead of spinning in commit log replay");
        for k in 0..50 {
            let page = engine
                .read_partition(table, &update(k).key, &ClusteringSlice::all(), 10, None)
                .expect("read");
            assert_eq!(page.data.rows.len(), 1, "row {k} replayed");
        }
    }

    #[test]
    fn corrupt_values_are_errors_not_panics() {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = engine(dir.path());
        let table = TableId::from_u128(1);
        engine.create_table(table).expect("create");
        let key = PartitionKey {
            token: 1,
            key: b"p".to_vec(),
        };
        let row_key = |ck: u8| {
            let mut k = crate::keys::partition_prefix(&key).expect("key");
            k.push(crate::keys::KIND_ROW);
            k.push(ck);
            k
        };
        let db = engine.db().expect("db");
        let cf = db.cf(table).expect("cf");
        // A plain garbage value: decoding fails in the read path.
        db.put_cf(&cf, row_key(1), b"\x01\xff garbage")
            .expect("put");
        // Garbage under a merge operand: the merge operator fails inside RocksDB.
        db.put_cf(&cf, row_key(2), b"\x07").expect("put");
        let row = Row {
            columns: vec![ColumnData::Simple {
                id: 1,
                cell: Cell::live(1, b"v".to_vec()),
            }],
            ..Row::default()
        };
        let update = PartitionUpdate {
            table,
            key: key.clone(),
            header: None,
            static_row: None,
            rows: vec![(vec![2], row)],
        };
        engine
            .apply_batch(&[update], Durability::Periodic)
            .expect("blind write succeeds");
        // A key outside the layout.
        db.put_cf(&cf, [0u8; 3], b"").expect("put");
        drop(cf);
        drop(db);

        let slice = ClusteringSlice::all();
        for ck in [1u8, 2] {
            let start = mutation::ClusteringBound {
                prefix: vec![ck],
                inclusive: true,
            };
            let slice = ClusteringSlice {
                start: Some(start.clone()),
                end: Some(start),
                reversed: false,
            };
            match engine.read_partition(table, &key, &slice, 10, None) {
                Err(StorageError::Corruption { table: t, detail }) => {
                    assert_eq!(t, table);
                    assert!(!detail.is_empty());
                }
                other => panic!("row {ck}: expected corruption, got {other:?}"),
            }
        }
        assert!(matches!(
            engine.read_partition(table, &key, &slice, 10, None),
            Err(StorageError::Corruption { .. })
        ));
        assert!(matches!(
            engine.scan(table, ScanStart::Beginning, None, 10),
            Err(StorageError::Corruption { .. })
        ));
    }

    #[test]
    fn a_compaction_meeting_corrupt_data_fails_and_stops_only_that_tables_compactions() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (damaged, healthy) = (TableId::from_u128(1), TableId::from_u128(2));
        let row = |table: TableId, c: u16, value: Vec<u8>| PartitionUpdate {
            table,
            key: PartitionKey {
                token: 7,
                key: b"p".to_vec(),
            },
            header: None,
            static_row: None,
            rows: vec![(
                c.to_be_bytes().to_vec(),
                Row {
                    columns: vec![ColumnData::Simple {
                        id: 1,
                        cell: Cell::live(1, value),
                    }],
                    ..Row::default()
                },
            )],
        };
        {
            let engine = engine(dir.path());
            engine.create_table(damaged).expect("create");
            engine.create_table(healthy).expect("create");
            for c in 0..2000 {
                engine
                    .apply_batch(&[row(damaged, c, vec![b'x'; 200])], Durability::None)
                    .expect("write");
            }
            engine.flush(Some(damaged)).expect("flush");
        }
        let file = std::fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "sst"))
            .max_by_key(|p| std::fs::metadata(p).expect("stat").len())
            .expect("a data file");
        let mut bytes = std::fs::read(&file).expect("read");
        let middle = bytes.len() / 2;
        for b in &mut bytes[middle..middle + 100] {
            *b ^= 0xff;
        }
        std::fs::write(&file, bytes).expect("write");

        let engine = engine(dir.path());
        engine.set_gc_grace(damaged, 0).expect("gc grace");
        let name = file
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        match engine.compact(Some(damaged)) {
            Err(StorageError::Corruption { table, detail }) => {
                assert_eq!(table, damaged);
                assert!(detail.contains(&name), "{detail}");
            }
            other => panic!("expected the compaction to fail, got {other:?}"),
        }
        // Nothing stopped: both tables take writes, and the healthy one compacts.
        for table in [damaged, healthy] {
            engine
                .apply_batch(&[row(table, 9999, b"after".to_vec())], Durability::Batch)
                .expect("a write after the failed compaction");
        }
        engine
            .compact(Some(healthy))
            .expect("compact the healthy table");
        let faults = engine.take_faults();
        assert_eq!(faults.len(), 1, "{faults:?}");
        assert_eq!(faults[0].table, Some(damaged));
        assert!(faults[0].detail.contains(&name), "{}", faults[0].detail);
        assert!(
            engine.take_faults().is_empty(),
            "each fault is reported once"
        );
        assert!(
            engine
                .table_stats(damaged)
                .expect("stats")
                .compactions_suspended
        );
        assert!(
            !engine
                .table_stats(healthy)
                .expect("stats")
                .compactions_suspended
        );
        let metrics: HashMap<_, _> = engine.metrics().expect("metrics").into_iter().collect();
        assert_eq!(metrics["tables_with_suspended_compactions"], 1);
        assert!(metrics["failed_compactions"] >= 1);
        assert!(metrics["background_errors_cleared"] >= 1);
        // A TRUNCATE leaves none of the damaged files: compactions run again.
        engine.truncate_table(damaged).expect("truncate");
        assert!(
            !engine
                .table_stats(damaged)
                .expect("stats")
                .compactions_suspended
        );
    }

    #[test]
    fn a_damaged_commit_log_refuses_to_open_unless_told_to_salvage_every_intact_record() {
        let dir = tempfile::tempdir().expect("tempdir");
        let table = TableId::from_u128(1);
        let update = |k: u8| one_cell_update(table, k, vec![k; 40]);
        {
            let engine = engine(dir.path());
            engine.create_table(table).expect("create");
            for k in 0..=255 {
                engine
                    .apply_batch(&[update(k)], Durability::Batch)
                    .expect("write");
            }
        }
        let log = crate::commit_log_check::newest_log_for_tests(dir.path());
        let mut bytes = std::fs::read(&log).expect("read log");
        let middle = bytes.len() / 2;
        for b in &mut bytes[middle..middle + 16] {
            *b ^= 0x5a;
        }
        std::fs::write(&log, &bytes).expect("damage the log");

        match RocksEngine::open(config(dir.path())) {
            Err(StorageError::CommitLogDamaged { file, offset, .. }) => {
                assert_eq!(file, log);
                assert!(offset <= middle as u64 && middle as u64 - offset < 200);
            }
            Err(e) => panic!("expected a damaged commit log, got {e}"),
            Ok(_) => panic!("expected a damaged commit log, the engine opened"),
        }
        assert_eq!(std::fs::read(&log).expect("read log"), bytes, "untouched");

        let salvaged = RocksEngine::open(RocksConfig {
            ignore_commit_log_replay_errors: true,
            ..config(dir.path())
        })
        .expect("salvage");
        let present: Vec<u8> = (0..=255)
            .filter(|&k| !rows_of(&salvaged, table, k).is_empty())
            .collect();
        // Each write is one record: the damage takes one or two of them, no more.
        assert!(present.len() >= 254, "{} writes salvaged", present.len());
        assert!(
            present.contains(&255),
            "the writes after the damage are replayed"
        );
        let backup = log.with_extension("log.damaged");
        assert_eq!(std::fs::read(&backup).expect("the original is kept"), bytes);
        drop(salvaged);
        // The log is whole again: no override needed.
        let reopened = engine(dir.path());
        assert_eq!(rows_of(&reopened, table, 255).len(), 1);
    }

    #[test]
    fn an_error_rocksdb_never_recovers_from_is_recovered_by_reopening() {
        let dir = tempfile::tempdir().expect("tempdir");
        let wal = dir.path().join("commitlog");
        let away = dir.path().join("commitlog-away");
        let engine = RocksEngine::open(RocksConfig {
            commit_log_dir: Some(wal.clone()),
            ..config(dir.path())
        })
        .expect("open");
        let table = TableId::from_u128(1);
        engine.create_table(table).expect("create");
        engine.set_gc_grace(table, 10).expect("gc grace");
        let update = |k: u8| one_cell_update(table, k, vec![k]);
        engine
            .apply_batch(&[update(1)], Durability::Batch)
            .expect("write");
        // The commit log directory goes away, so the next memtable switch cannot create its
        // new file: RocksDB rates that fatal (as running out of file descriptors there).
        std::fs::rename(&wal, &away).expect("move the commit log away");
        assert!(engine.flush(Some(table)).is_err());
        assert!(engine.apply_batch(&[update(2)], Durability::Batch).is_err());
        assert!(engine.events.stopped_for_good());
        // The cause is gone; the engine reopens and writes resume, nothing acknowledged lost.
        std::fs::rename(&away, &wal).expect("move the commit log back");
        engine.recover().expect("reopen");
        assert!(!engine.events.stopped_for_good());
        engine
            .apply_batch(&[update(3)], Durability::Batch)
            .expect("a write after the reopen");
        assert_eq!(rows_of(&engine, table, 1).len(), 1);
        assert_eq!(rows_of(&engine, table, 3).len(), 1);
        // The reopened database kept the table's settings and serves everything.
        engine.compact(Some(table)).expect("compact");
        engine.recover().expect("nothing to do");
        assert_eq!(rows_of(&engine, table, 1).len(), 1);
    }

    #[test]
    fn storage_reopens_only_once_its_files_can_be_written_and_replayed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let wal = dir.path().join("commitlog");
        let away = dir.path().join("commitlog-away");
        let engine = RocksEngine::open(RocksConfig {
            commit_log_dir: Some(wal.clone()),
            ..config(dir.path())
        })
        .expect("open");
        let table = TableId::from_u128(1);
        engine.create_table(table).expect("create");
        for k in 0..50 {
            engine
                .apply_batch(&[one_cell_update(table, k, vec![k; 40])], Durability::Batch)
                .expect("write");
        }
        std::fs::rename(&wal, &away).expect("move the commit log away");
        assert!(engine.flush(Some(table)).is_err());
        assert!(engine.events.stopped_for_good());
        // While the directory is missing the engine does not reopen: the stopped database
        // still serves reads.
        let err = engine.recover().expect_err("the cause lasts");
        assert!(err.to_string().contains("cannot be written yet"), "{err}");
        assert_eq!(rows_of(&engine, table, 1).len(), 1);

        // Back, but damaged where it holds writes: the reopen closes the database and refuses
        // to replay the log, so storage is closed until a reopen succeeds.
        std::fs::rename(&away, &wal).expect("move the commit log back");
        let log = crate::commit_log_check::newest_log_for_tests(&wal);
        let intact = std::fs::read(&log).expect("read");
        let mut damaged = intact.clone();
        let middle = damaged.len() / 2;
        damaged[middle..middle + 16]
            .iter_mut()
            .for_each(|b| *b ^= 0x5a);
        std::fs::write(&log, &damaged).expect("damage");
        engine.reopening.lock().expect("lock").last = None;
        assert!(matches!(
            engine.recover(),
            Err(StorageError::CommitLogDamaged { .. })
        ));
        match engine.read_partition(
            table,
            &one_cell_update(table, 1, vec![]).key,
            &ClusteringSlice::all(),
            10,
            None,
        ) {
            Err(StorageError::Engine { detail, .. }) => {
                assert!(detail.contains("reopening it failed"), "{detail}")
            }
            other => panic!("expected storage to be closed, got {other:?}"),
        }

        std::fs::write(&log, &intact).expect("repair");
        // No sooner than REOPEN_INTERVAL after the last try.
        engine.recover().expect("waits");
        assert!(engine
            .apply_batch(&[one_cell_update(table, 60, vec![60])], Durability::Batch)
            .is_err());
        engine.reopening.lock().expect("lock").last = None;
        engine.recover().expect("reopen");
        assert_eq!(rows_of(&engine, table, 49).len(), 1);
    }
}
