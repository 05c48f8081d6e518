//! The coordinator's counters and latencies: per table, the coordinator read latency (a
//! decaying histogram, as Cassandra's `coordinatorReadLatency`, from which percentile
//! speculative retry takes its threshold) and the speculative retries; per verb, the requests
//! that timed out or found too few live replicas. Cheap on the hot path: atomics only, and one
//! lock-free map load per read.
//!
//! Time is tokio's (`tokio::time::Instant`), so a simulator's clock drives the decay too.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use mutation::TableId;
use tokio::time::Instant;

/// The upper bounds of the latency histogram's buckets, in microseconds: Cassandra's
/// `EstimatedHistogram` offsets (each the previous times 1.2, at least one more), from 1 µs to
/// past 10 minutes, longer than any request timeout. A latency past the last goes in it.
static BUCKET_OFFSETS_MICROS: LazyLock<Vec<u64>> = LazyLock::new(|| {
    let mut offsets = vec![1u64];
    while *offsets.last().expect("starts with one") < 600_000_000 {
        let last = *offsets.last().expect("starts with one");
        offsets.push((last + 1).max((last as f64 * 1.2).round() as u64));
    }
    offsets
});

/// The mean lifetime of a sample's weight (Cassandra's `DecayingEstimatedHistogramReservoir`:
/// 60 s): a latency measured a minute ago counts `1/e` as much as one measured now.
const MEAN_LIFETIME_MS: f64 = 60_000.0;

/// How long the forward decay's landmark stays before the weights are rescaled to a new one.
/// Cassandra rescales every 30 minutes; ten keep the largest weight (`e^10`, about 22,000) far
/// from overflowing a bucket even at millions of reads a second.
const RESCALE_INTERVAL_MS: u64 = 600_000;

/// A latency histogram whose samples decay (forward decay with a moving landmark, as
/// Cassandra's `DecayingEstimatedHistogramReservoir`), so that its percentiles follow the
/// last minutes rather than the node's whole life. Lock-free to update: one atomic add to a
/// bucket, plus, every `RESCALE_INTERVAL_MS`, a rescale that one updater does.
///
/// Invariant: bucket `i` holds the decayed weight of samples in
/// `(BUCKET_OFFSETS_MICROS[i-1], BUCKET_OFFSETS_MICROS[i]]`, each weighted
/// `e^((t - landmark) / MEAN_LIFETIME)`.
pub(crate) struct LatencyHistogram {
    buckets: Vec<AtomicU64>,
    /// The instant the landmark offsets count from.
    base: Instant,
    /// The landmark, in milliseconds after `base`.
    landmark_ms: AtomicU64,
    /// Held by the one updater rescaling.
    rescaling: Mutex<()>,
}

impl LatencyHistogram {
    pub(crate) fn new() -> LatencyHistogram {
        LatencyHistogram {
            buckets: BUCKET_OFFSETS_MICROS
                .iter()
                .map(|_| AtomicU64::new(0))
                .collect(),
            base: Instant::now(),
            landmark_ms: AtomicU64::new(0),
            rescaling: Mutex::new(()),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Adds one sample of `latency`.
    pub(crate) fn record(&self, latency: Duration) {
        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        let offsets = &*BUCKET_OFFSETS_MICROS;
        let bucket = offsets
            .partition_point(|&upper| upper < micros)
            .min(offsets.len() - 1);
        let now_ms = self.now_ms();
        let mut landmark_ms = self.landmark_ms.load(Ordering::Acquire);
        if now_ms.saturating_sub(landmark_ms) >= RESCALE_INTERVAL_MS {
            self.rescale(now_ms);
            landmark_ms = self.landmark_ms.load(Ordering::Acquire);
        }
        let weight = ((now_ms.saturating_sub(landmark_ms)) as f64 / MEAN_LIFETIME_MS)
            .exp()
            .round()
            .max(1.0) as u64;
        self.buckets[bucket].fetch_add(weight, Ordering::Relaxed);
    }

    /// Moves the landmark to `now_ms`, dividing every bucket by the weight that took. An
    /// update racing with it may be weighted against the old landmark: a bounded error in one
    /// sample, as Cassandra tolerates too.
    fn rescale(&self, now_ms: u64) {
        let Ok(_rescaling) = self.rescaling.try_lock() else {
            return; // another updater is at it
        };
        let landmark_ms = self.landmark_ms.load(Ordering::Acquire);
        if now_ms.saturating_sub(landmark_ms) < RESCALE_INTERVAL_MS {
            return;
        }
        let factor = (now_ms.saturating_sub(landmark_ms) as f64 / MEAN_LIFETIME_MS).exp();
        for bucket in &self.buckets {
            let _ = bucket.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |weight| {
                Some((weight as f64 / factor) as u64)
            });
        }
        self.landmark_ms.store(now_ms, Ordering::Release);
    }

    /// The latency at `percentile` (0 to 100) of the decayed samples: the upper bound of the
    /// bucket it falls in, as Cassandra's snapshot answers. `None` while there is none.
    pub(crate) fn percentile(&self, percentile: f64) -> Option<Duration> {
        let weights: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let total: u64 = weights.iter().fold(0u64, |sum, w| sum.saturating_add(*w));
        if total == 0 {
            return None;
        }
        let rank = ((percentile / 100.0) * total as f64).ceil().max(1.0) as u64;
        let mut seen = 0u64;
        for (i, weight) in weights.iter().enumerate() {
            seen = seen.saturating_add(*weight);
            if seen >= rank {
                return Some(Duration::from_micros(BUCKET_OFFSETS_MICROS[i]));
            }
        }
        Some(Duration::from_micros(
            *BUCKET_OFFSETS_MICROS.last().expect("never empty"),
        ))
    }
}

/// What a table's reads keep: their latency and the speculative retries (Cassandra's
/// `TableMetrics.coordinatorReadLatency`, `speculativeRetries`, `speculativeFailedRetries`,
/// `speculativeInsufficientReplicas`), and the cached percentile latency the speculation
/// threshold comes from.
pub(crate) struct TableStats {
    pub(crate) read_latency: LatencyHistogram,
    pub(crate) speculative_retries: AtomicU64,
    pub(crate) speculative_failed_retries: AtomicU64,
    pub(crate) speculative_insufficient_replicas: AtomicU64,
    /// The read latency at `cached_percentile`, in microseconds (`u64::MAX` before it was
    /// first measured), recomputed at most once per `SPECULATION_UPDATE_INTERVAL`, as
    /// Cassandra's `SPECULATION_THRESHOLD_UPDATER`.
    cached_latency_micros: AtomicU64,
    /// The percentile `cached_latency_micros` is at (`f64` bits; an ALTER may change it).
    cached_percentile: AtomicU64,
    /// When the cache was last computed, in milliseconds after the histogram's base.
    cached_at_ms: AtomicU64,
}

/// How often a table's speculation threshold is recomputed from its latencies: Cassandra's
/// period, `read_request_timeout` (5 s by default).
const SPECULATION_UPDATE_INTERVAL_MS: u64 = 5_000;

impl TableStats {
    fn new() -> TableStats {
        TableStats {
            read_latency: LatencyHistogram::new(),
            speculative_retries: AtomicU64::new(0),
            speculative_failed_retries: AtomicU64::new(0),
            speculative_insufficient_replicas: AtomicU64::new(0),
            cached_latency_micros: AtomicU64::new(u64::MAX),
            cached_percentile: AtomicU64::new(f64::NAN.to_bits()),
            cached_at_ms: AtomicU64::new(0),
        }
    }

    /// The read latency at `percentile`, as last computed (at most
    /// `SPECULATION_UPDATE_INTERVAL_MS` ago, or now if the percentile changed); `None` while
    /// nothing was measured.
    pub(crate) fn percentile_latency(&self, percentile: f64) -> Option<Duration> {
        let now_ms = self.read_latency.now_ms();
        let cached_at_ms = self.cached_at_ms.load(Ordering::Acquire);
        let same = self.cached_percentile.load(Ordering::Acquire) == percentile.to_bits();
        let due = now_ms.saturating_sub(cached_at_ms) >= SPECULATION_UPDATE_INTERVAL_MS;
        let cached = self.cached_latency_micros.load(Ordering::Acquire);
        if !same || due || cached == u64::MAX {
            if let Some(latency) = self.read_latency.percentile(percentile) {
                let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX - 1);
                self.cached_latency_micros.store(micros, Ordering::Release);
                self.cached_percentile
                    .store(percentile.to_bits(), Ordering::Release);
                self.cached_at_ms.store(now_ms, Ordering::Release);
                return Some(latency);
            }
        }
        (cached != u64::MAX).then(|| Duration::from_micros(cached))
    }

    fn snapshot(&self, table: TableId) -> TableStatsSnapshot {
        TableStatsSnapshot {
            table,
            speculative_retries: self.speculative_retries.load(Ordering::Relaxed),
            speculative_failed_retries: self.speculative_failed_retries.load(Ordering::Relaxed),
            speculative_insufficient_replicas: self
                .speculative_insufficient_replicas
                .load(Ordering::Relaxed),
            read_latency_p50: self.read_latency.percentile(50.0),
            read_latency_p99: self.read_latency.percentile(99.0),
        }
    }
}

/// The kinds of request the coordinator counts timeouts and unavailables of (Cassandra's
/// `ClientRequestMetrics` scopes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// A partition read (`Read`).
    Read,
    /// A token range scan (`RangeSlice`).
    RangeRead,
    /// A write (`Write`).
    Write,
    /// A TRUNCATE.
    Truncate,
}

const KINDS: usize = 4;

impl RequestKind {
    fn index(self) -> usize {
        match self {
            RequestKind::Read => 0,
            RequestKind::RangeRead => 1,
            RequestKind::Write => 2,
            RequestKind::Truncate => 3,
        }
    }
}

/// The requests a coordinator sends replicas (the verbs of `Replica`), for counting those
/// that got no answer in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicaVerb {
    /// `apply_mutation`: a write's share, or a read repair.
    Mutation,
    /// `read`: a data request.
    Read,
    /// `digest`: a digest request.
    Digest,
    /// `truncate`.
    Truncate,
}

impl ReplicaVerb {
    fn index(self) -> usize {
        match self {
            ReplicaVerb::Mutation => 0,
            ReplicaVerb::Read => 1,
            ReplicaVerb::Digest => 2,
            ReplicaVerb::Truncate => 3,
        }
    }
}

/// The coordinator's statistics, shared by every request it coordinates. One per
/// `Coordinator` (`Coordinator::stats`). The table map holds one entry per table read through
/// this coordinator since it started, never more than the schema's tables plus the dropped
/// ones (`forget_table` removes those).
#[derive(Default)]
pub struct CoordinatorStats {
    tables: ArcSwap<HashMap<TableId, Arc<TableStats>>>,
    /// Serialises inserts into `tables` (copy on write: rare, once per table).
    inserting: Mutex<()>,
    timeouts: [AtomicU64; KINDS],
    unavailables: [AtomicU64; KINDS],
    replica_timeouts: [AtomicU64; KINDS],
    /// Logged batches whose batch log write was acknowledged (`write_logged_batch`).
    pub(crate) batches_logged: AtomicU64,
    /// Batches this node's batch log replay replayed (their coordinator did not remove them).
    pub(crate) batches_replayed: AtomicU64,
}

impl CoordinatorStats {
    /// The statistics of `table`, created at its first read.
    pub(crate) fn table(&self, table: TableId) -> Arc<TableStats> {
        if let Some(stats) = self.tables.load().get(&table) {
            return stats.clone();
        }
        let _inserting = self.inserting.lock().expect("no panic while inserting");
        let current = self.tables.load_full();
        if let Some(stats) = current.get(&table) {
            return stats.clone();
        }
        let stats = Arc::new(TableStats::new());
        let mut tables = (*current).clone();
        tables.insert(table, stats.clone());
        self.tables.store(Arc::new(tables));
        stats
    }

    /// Drops the statistics of `table` (a dropped table).
    pub fn forget_table(&self, table: TableId) {
        let _inserting = self.inserting.lock().expect("no panic while inserting");
        let current = self.tables.load_full();
        if current.contains_key(&table) {
            let mut tables = (*current).clone();
            tables.remove(&table);
            self.tables.store(Arc::new(tables));
        }
    }

    pub(crate) fn count_timeout(&self, kind: RequestKind) {
        self.timeouts[kind.index()].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_unavailable(&self, kind: RequestKind) {
        self.unavailables[kind.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts `count` requests of `verb` to replicas that gave no answer by their deadline
    /// (silent, or answered that they could not be reached or did not start in time).
    pub(crate) fn count_replica_timeouts(&self, verb: ReplicaVerb, count: usize) {
        self.replica_timeouts[verb.index()].fetch_add(count as u64, Ordering::Relaxed);
    }

    /// Requests of `verb` to replicas that gave no answer in time so far (one client request
    /// may count several, one per silent replica; a write answered at its level counts the
    /// replicas still silent at its deadline).
    pub fn replica_timeouts(&self, verb: ReplicaVerb) -> u64 {
        self.replica_timeouts[verb.index()].load(Ordering::Relaxed)
    }

    /// Requests of `kind` answered with a timeout so far.
    pub fn timeouts(&self, kind: RequestKind) -> u64 {
        self.timeouts[kind.index()].load(Ordering::Relaxed)
    }

    /// Requests of `kind` answered `Unavailable` so far.
    pub fn unavailables(&self, kind: RequestKind) -> u64 {
        self.unavailables[kind.index()].load(Ordering::Relaxed)
    }

    /// Every counter now, as plain data (what `nodetool`-like output or a simulation's
    /// report shows).
    pub fn snapshot(&self) -> CoordinatorStatsSnapshot {
        let by_kind = |counters: &[AtomicU64; KINDS]| PerRequestKind {
            read: counters[RequestKind::Read.index()].load(Ordering::Relaxed),
            range_read: counters[RequestKind::RangeRead.index()].load(Ordering::Relaxed),
            write: counters[RequestKind::Write.index()].load(Ordering::Relaxed),
            truncate: counters[RequestKind::Truncate.index()].load(Ordering::Relaxed),
        };
        let verb = |v: ReplicaVerb| self.replica_timeouts(v);
        CoordinatorStatsSnapshot {
            timeouts: by_kind(&self.timeouts),
            unavailables: by_kind(&self.unavailables),
            replica_timeouts: PerReplicaVerb {
                mutation: verb(ReplicaVerb::Mutation),
                read: verb(ReplicaVerb::Read),
                digest: verb(ReplicaVerb::Digest),
                truncate: verb(ReplicaVerb::Truncate),
            },
            tables: self.tables(),
            batches_logged: self.batches_logged.load(Ordering::Relaxed),
            batches_replayed: self.batches_replayed.load(Ordering::Relaxed),
        }
    }

    /// The per-table statistics now, in no particular order.
    pub fn tables(&self) -> Vec<TableStatsSnapshot> {
        self.tables
            .load()
            .iter()
            .map(|(table, stats)| stats.snapshot(*table))
            .collect()
    }

    /// The statistics of `table` now, if it was read through this coordinator.
    pub fn table_snapshot(&self, table: TableId) -> Option<TableStatsSnapshot> {
        self.tables.load().get(&table).map(|s| s.snapshot(table))
    }

    /// Counts the outcome of a request of `kind`: a timeout or an unavailable.
    pub(crate) fn count_outcome<T>(
        &self,
        kind: RequestKind,
        outcome: &Result<T, crate::CoordinatorError>,
    ) {
        use crate::CoordinatorError::*;
        match outcome {
            Err(ReadTimeout { .. } | WriteTimeout { .. } | TruncateTimeout { .. }) => {
                self.count_timeout(kind)
            }
            Err(Unavailable { .. }) => self.count_unavailable(kind),
            _ => {}
        }
    }
}

/// Every counter of a `CoordinatorStats` at a moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CoordinatorStatsSnapshot {
    /// Client requests answered with a timeout (Cassandra's `ClientRequestMetrics.timeouts`).
    pub timeouts: PerRequestKind,
    /// Client requests answered `Unavailable` (`ClientRequestMetrics.unavailables`).
    pub unavailables: PerRequestKind,
    /// Requests to replicas that gave no answer in time, by verb.
    pub replica_timeouts: PerReplicaVerb,
    /// Per table, in no particular order.
    pub tables: Vec<TableStatsSnapshot>,
    /// Logged batches whose batch log write was acknowledged.
    pub batches_logged: u64,
    /// Batches the batch log replay of this node replayed.
    pub batches_replayed: u64,
}

/// A count per `RequestKind`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PerRequestKind {
    /// Partition reads (`RequestKind::Read`).
    pub read: u64,
    /// Token range scans (`RequestKind::RangeRead`).
    pub range_read: u64,
    /// Writes (`RequestKind::Write`).
    pub write: u64,
    /// TRUNCATEs (`RequestKind::Truncate`).
    pub truncate: u64,
}

/// A count per `ReplicaVerb`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PerReplicaVerb {
    /// `apply_mutation` requests (write shares and read repairs).
    pub mutation: u64,
    /// Data requests.
    pub read: u64,
    /// Digest requests.
    pub digest: u64,
    /// Truncate requests.
    pub truncate: u64,
}

/// One table's read statistics at a moment (for `nodetool tablestats`-like output).
#[derive(Debug, Clone, PartialEq)]
pub struct TableStatsSnapshot {
    /// The table's id.
    pub table: TableId,
    /// Reads sent to one more replica than the level needs (Cassandra's
    /// `SpeculativeRetries`), ALWAYS's included.
    pub speculative_retries: u64,
    /// Reads that speculated and still timed out (`SpeculativeFailedRetries`).
    pub speculative_failed_retries: u64,
    /// Reads that would have speculated but had no other live replica
    /// (`SpeculativeInsufficientReplicas`).
    pub speculative_insufficient_replicas: u64,
    /// The decayed coordinator read latency's median and 99th percentile (`None` before the
    /// first read).
    pub read_latency_p50: Option<Duration>,
    /// See `read_latency_p50`.
    pub read_latency_p99: Option<Duration>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_offsets_are_cassandras() {
        let offsets = &*BUCKET_OFFSETS_MICROS;
        assert_eq!(&offsets[..8], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(offsets.windows(2).all(|w| w[0] < w[1]));
        assert!(*offsets.last().expect("some") >= 600_000_000);
    }

    #[tokio::test(start_paused = true)]
    async fn percentiles_come_from_the_samples() {
        let histogram = LatencyHistogram::new();
        assert_eq!(histogram.percentile(99.0), None);
        for _ in 0..99 {
            histogram.record(Duration::from_millis(1));
        }
        histogram.record(Duration::from_millis(100));
        let p50 = histogram.percentile(50.0).expect("measured");
        assert!(p50 >= Duration::from_millis(1) && p50 < Duration::from_micros(1_300));
        let p99 = histogram.percentile(99.0).expect("measured");
        assert!(p99 < Duration::from_micros(1_300), "{p99:?}");
        let p100 = histogram.percentile(99.9).expect("measured");
        assert!(p100 >= Duration::from_millis(100) && p100 < Duration::from_millis(125));
    }

    #[tokio::test(start_paused = true)]
    async fn old_samples_decay_and_rescaling_keeps_the_proportions() {
        let histogram = LatencyHistogram::new();
        for _ in 0..100 {
            histogram.record(Duration::from_millis(50));
        }
        // Five minutes on, a few fast reads outweigh the many slow ones (e^5 ≈ 148 each).
        tokio::time::advance(Duration::from_secs(300)).await;
        for _ in 0..10 {
            histogram.record(Duration::from_millis(1));
        }
        let p90 = histogram.percentile(90.0).expect("measured");
        assert!(p90 < Duration::from_millis(2), "{p90:?}");
        // Past the rescale interval: the landmark moves, the answer stays.
        tokio::time::advance(Duration::from_secs(600)).await;
        histogram.record(Duration::from_millis(1));
        assert!(histogram.landmark_ms.load(Ordering::Relaxed) > 0);
        let p90 = histogram.percentile(90.0).expect("measured");
        assert!(p90 < Duration::from_millis(2), "{p90:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn the_cached_percentile_is_recomputed_at_intervals() {
        let stats = TableStats::new();
        assert_eq!(stats.percentile_latency(99.0), None);
        stats.read_latency.record(Duration::from_millis(10));
        let first = stats.percentile_latency(99.0).expect("measured");
        for _ in 0..1_000 {
            stats.read_latency.record(Duration::from_millis(200));
        }
        // Within the interval the cached value stands.
        assert_eq!(stats.percentile_latency(99.0), Some(first));
        tokio::time::advance(Duration::from_millis(SPECULATION_UPDATE_INTERVAL_MS)).await;
        assert!(stats.percentile_latency(99.0).expect("measured") >= Duration::from_millis(200));
    }

    #[test]
    fn counters_by_kind_and_table() {
        let stats = CoordinatorStats::default();
        let table = TableId::from_u128(7);
        stats.count_timeout(RequestKind::Write);
        stats.count_unavailable(RequestKind::Read);
        assert_eq!(stats.timeouts(RequestKind::Write), 1);
        assert_eq!(stats.timeouts(RequestKind::Read), 0);
        assert_eq!(stats.unavailables(RequestKind::Read), 1);
        stats
            .table(table)
            .speculative_retries
            .fetch_add(2, Ordering::Relaxed);
        let snapshot = stats.table_snapshot(table).expect("read");
        assert_eq!(snapshot.speculative_retries, 2);
        assert_eq!(stats.tables().len(), 1);
        stats.count_replica_timeouts(ReplicaVerb::Digest, 2);
        let all = stats.snapshot();
        assert_eq!(all.timeouts.write, 1);
        assert_eq!(all.unavailables.read, 1);
        assert_eq!(all.replica_timeouts.digest, 2);
        assert_eq!(all.tables, vec![snapshot]);
        stats.forget_table(table);
        assert!(stats.tables().is_empty());
    }
}
