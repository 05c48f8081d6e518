//! Hinted handoff, as Cassandra's `org.apache.cassandra.hints`: a write a replica was down for
//! or did not acknowledge in time is kept on the coordinator as a hint, in files of its own,
//! and replayed through the replica once gossip sees it up again.
//!
//! Owns: the hint store ([`HintStore`], the coordinator's [`coordinator::HintedHandoff`]):
//! the decision whether a missed write is kept (hints enabled, not to this node, the target
//! not down longer than `max_hint_window`, the hints directory writable), an in-memory buffer
//! per target that `write_missed` appends to without waiting, the flusher that writes the
//! buffers to the target's files and fsyncs them every `hints_flush_period`, the files
//! themselves (`format.rs`: one series per target host, rotated at `max_hints_file_size`,
//! checked on open, a torn tail cut), the dispatcher ([`HintsService`], `dispatch.rs`) that
//! replays a target's files in order through its `coordinator::Replica`, throttled by
//! `hinted_handoff_throttle`, deleting each file once every hint in it is acknowledged, and
//! the per-target counters an operator reads ([`TargetStats`]).
//!
//! Time is behind [`coordinator::WallClock`] (hint creation times, the hint TTL) and
//! `tokio::time` (periods, backoff, the throttle); liveness, downtime and the replicas behind
//! [`HintTargets`]; the schema behind [`TableLookup`]; the write side of the disk behind
//! [`HintsDisk`]: so that a deterministic simulation, and the tests, drive all of them.
//!
//! Must not depend on: storage (a hint reaches a replica only through `coordinator::Replica`),
//! messaging or gossip (the node implements [`HintTargets`] over them), the schema crates
//! (the node implements [`TableLookup`]), CQL.

mod dispatch;
mod format;
mod store;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use coordinator::Replica;
use locator::HostId;
use mutation::TableId;

pub use dispatch::HintsService;
pub use store::{HintStore, TargetStats};

/// Cassandra's default `max_hint_window`: 3 hours.
pub const DEFAULT_MAX_HINT_WINDOW: Duration = Duration::from_secs(3 * 3600);
/// Cassandra's default `max_hints_file_size`: 128 MiB.
pub const DEFAULT_MAX_HINTS_FILE_SIZE_BYTES: u64 = 128 << 20;
/// Cassandra's default `hinted_handoff_throttle`: 1024 KiB per second.
pub const DEFAULT_THROTTLE_BYTES_PER_SECOND: u64 = 1024 << 10;
/// Cassandra's default `hints_flush_period`: 10 s.
pub const DEFAULT_FLUSH_PERIOD: Duration = Duration::from_secs(10);
/// How long one hint's delivery may wait for the replica's acknowledgement (Cassandra sends a
/// hint with the write request timeout's default).
pub const DEFAULT_DELIVERY_TIMEOUT: Duration = Duration::from_secs(2);

/// How the store keeps and replays hints (the node's `hinted_handoff_*`, `max_hint*`, `hints_*`
/// keys).
#[derive(Debug, Clone)]
pub struct HintsConfig {
    /// This node: a write this node's own replica missed is never hinted (as Cassandra's
    /// `shouldHint`, which skips `isSelf`).
    pub local: HostId,
    /// `hinted_handoff_enabled`: when false no new hint is kept; hints already stored are
    /// still delivered.
    pub enabled: bool,
    /// `hints_directory`: created at open if missing.
    pub directory: PathBuf,
    /// `max_hint_window`: a target down longer than this (or whose oldest pending hint is
    /// older, Cassandra's persistent window) gets no more hints; it is left to repair.
    pub max_hint_window: Duration,
    /// `max_hints_file_size`: a file is closed and a new one started once appending would take
    /// it past this (a single larger hint still gets a file of its own).
    pub max_file_size_bytes: u64,
    /// `hinted_handoff_throttle`: bytes per second of hints delivered, split across the other
    /// nodes of the cluster as Cassandra splits it (each target gets this divided by the node
    /// count less one); 0 for no throttle.
    pub throttle_bytes_per_second: u64,
    /// `hints_flush_period`: how often buffered hints are written and fsynced.
    pub flush_period: Duration,
    /// How long one delivery waits for the target's acknowledgement.
    pub delivery_timeout: Duration,
    /// `max_hints_size_per_host`: a target whose hint files hold more bytes than this gets no
    /// more hints until replay brings it back under (Cassandra's check, on the files only);
    /// 0 for no limit (the default).
    pub max_hints_size_per_host_bytes: u64,
    /// `hinted_handoff_disabled_datacenters`: no hint is kept for a node of these data
    /// centres.
    pub disabled_datacenters: BTreeSet<String>,
    /// Where the flusher's and the dispatcher's file steps run.
    pub file_io: FileIo,
}

/// Where the hint service runs its blocking file steps (a flush, reading a page, advancing a
/// file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FileIo {
    /// On tokio's blocking pool, so that a slow disk never stalls a runtime worker: a node.
    #[default]
    BlockingPool,
    /// On the task's own thread. For a deterministic simulation only: a step finished on
    /// another thread would complete at a point of the simulated time that depends on the
    /// real machine, and a seed would not replay. The files are small and local there.
    Inline,
}

impl HintsConfig {
    /// Cassandra's defaults, hints in `directory`.
    pub fn new(local: HostId, directory: PathBuf) -> HintsConfig {
        HintsConfig {
            local,
            enabled: true,
            directory,
            max_hint_window: DEFAULT_MAX_HINT_WINDOW,
            max_file_size_bytes: DEFAULT_MAX_HINTS_FILE_SIZE_BYTES,
            throttle_bytes_per_second: DEFAULT_THROTTLE_BYTES_PER_SECOND,
            flush_period: DEFAULT_FLUSH_PERIOD,
            delivery_timeout: DEFAULT_DELIVERY_TIMEOUT,
            file_io: FileIo::BlockingPool,
            max_hints_size_per_host_bytes: 0,
            disabled_datacenters: BTreeSet::new(),
        }
    }
}

/// The cluster as hints see it: who is up, for how long a node has been down, and the replica
/// a hint is delivered through. The node implements it over gossip and messaging.
pub trait HintTargets: Send + Sync + 'static {
    /// Whether `host` is up now (gossip's failure detector).
    fn is_alive(&self, host: HostId) -> bool;
    /// The data centre of `host` as the ring knows it (`None`: not in the ring); for
    /// `hinted_handoff_disabled_datacenters`.
    fn datacenter(&self, host: HostId) -> Option<String>;
    /// How long `host` has been down, as this node saw it (Cassandra's
    /// `Gossiper.getEndpointDowntime`); `None` if it is up.
    fn downtime(&self, host: HostId) -> Option<Duration>;
    /// The replica hints to `host` are delivered through.
    fn replica(&self, host: HostId) -> Option<Arc<dyn Replica>>;
    /// How many nodes the ring holds, this one included (the throttle is split across the
    /// others).
    fn node_count(&self) -> usize;
}

/// The schema as hints need it.
pub trait TableLookup: Send + Sync + 'static {
    /// `gc_grace_seconds` of `table`, or `None` if the table does not exist (dropped): its
    /// hints are discarded.
    fn gc_grace_seconds(&self, table: TableId) -> Option<u32>;
}

/// A hint file open for appending.
pub trait HintFile: Send {
    /// Appends `bytes` whole.
    fn append(&mut self, bytes: &[u8]) -> io::Result<()>;
    /// Makes everything appended durable (fsync).
    fn sync(&mut self) -> io::Result<()>;
    /// Cuts the file back to `len` bytes (after a failed append).
    fn truncate(&mut self, len: u64) -> io::Result<()>;
}

/// Where hint files are written: the file system ([`LocalDisk`]), or in tests one that fails as
/// a full disk does. Reading, listing and removing files go to the file system directly.
pub trait HintsDisk: Send + Sync + 'static {
    /// Creates `path` (which must not exist) for appending.
    fn create(&self, path: &Path) -> io::Result<Box<dyn HintFile>>;
}

/// The file system.
pub struct LocalDisk;

struct LocalFile(std::fs::File);

impl HintFile for LocalFile {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        io::Write::write_all(&mut self.0, bytes)
    }

    fn sync(&mut self) -> io::Result<()> {
        self.0.sync_data()
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
}

impl HintsDisk for LocalDisk {
    fn create(&self, path: &Path) -> io::Result<Box<dyn HintFile>> {
        let file = std::fs::OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(path)?;
        // The new name must survive a crash too: fsync the directory.
        if let Some(dir) = path.parent() {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(Box::new(LocalFile(file)))
    }
}

/// Why the store could not open.
#[derive(Debug, thiserror::Error)]
pub enum HintsError {
    /// `hints_directory` is missing and cannot be created (a bad path, no permission).
    #[error("cannot create the hints directory {path}: {source}")]
    CreateDirectory { path: PathBuf, source: io::Error },
    /// `hints_directory` cannot be listed.
    #[error("cannot read the hints directory {path}: {source}")]
    ReadDirectory { path: PathBuf, source: io::Error },
}
