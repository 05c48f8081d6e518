//! The store and the dispatcher against fakes of the cluster, the schema, the clock and the
//! disk; files in a temporary directory.

use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use coordinator::{
    Deadline, HintedHandoff, MissedWrite, Mutation, ReadDigest, Replica, ReplicaError,
    ReplicaFuture, WallClock,
};
use locator::HostId;
use mutation::{PartitionKey, PartitionUpdate, ReadCommand, ReadResponse, TableId};

use crate::dispatch::{dispatch, Outcome, Throttle};
use crate::format::{self, Next, RecordReader, HEADER_BYTES};
use crate::{HintFile, HintStore, HintTargets, HintsConfig, HintsDisk, LocalDisk, TableLookup};

const LOCAL: HostId = HostId(uuid::Uuid::from_u128(1));
const PEER: HostId = HostId(uuid::Uuid::from_u128(2));
const OTHER_PEER: HostId = HostId(uuid::Uuid::from_u128(3));
const TABLE: TableId = TableId::from_u128(10);
const OTHER_TABLE: TableId = TableId::from_u128(11);
/// 2026-01-01, ms.
const START_MS: i64 = 1_767_225_600_000;

struct Clock(AtomicI64);

impl WallClock for Clock {
    fn now_micros(&self) -> i64 {
        self.0.load(Ordering::SeqCst) * 1000
    }
}

impl Clock {
    fn advance(&self, by: Duration) {
        self.0.fetch_add(by.as_millis() as i64, Ordering::SeqCst);
    }
}

/// A replica that records the tokens it applied, and fails those it is told to.
#[derive(Default)]
struct Recorded {
    applied: Mutex<Vec<i64>>,
    fail: Mutex<HashSet<i64>>,
    durable: Mutex<Vec<bool>>,
}

impl Replica for Recorded {
    fn apply_mutation(&self, mutation: Mutation, _: Deadline) -> ReplicaFuture<()> {
        let tokens: Vec<i64> = mutation.updates.iter().map(|u| u.key.token).collect();
        let fail = tokens
            .iter()
            .any(|t| self.fail.lock().expect("lock").contains(t));
        if !fail {
            self.applied.lock().expect("lock").extend(&tokens);
            self.durable
                .lock()
                .expect("lock")
                .push(mutation.durable_writes);
        }
        Box::pin(async move {
            match fail {
                true => Err(ReplicaError::Unreachable("down".to_string())),
                false => Ok(()),
            }
        })
    }
    fn read(&self, _: ReadCommand, _: Deadline) -> ReplicaFuture<ReadResponse> {
        Box::pin(async { Err(ReplicaError::Internal("not in these tests".to_string())) })
    }
    fn digest(&self, _: ReadCommand, _: Deadline) -> ReplicaFuture<ReadDigest> {
        Box::pin(async { Err(ReplicaError::Internal("not in these tests".to_string())) })
    }
    fn truncate(&self, _: TableId, _: Deadline) -> ReplicaFuture<()> {
        Box::pin(async { Err(ReplicaError::Internal("not in these tests".to_string())) })
    }
}

struct Targets {
    alive: AtomicBool,
    downtime: Mutex<Option<Duration>>,
    replica: Arc<Recorded>,
    nodes: AtomicUsize,
}

impl HintTargets for Targets {
    fn is_alive(&self, _: HostId) -> bool {
        self.alive.load(Ordering::SeqCst)
    }
    fn downtime(&self, _: HostId) -> Option<Duration> {
        *self.downtime.lock().expect("lock")
    }
    fn replica(&self, _: HostId) -> Option<Arc<dyn Replica>> {
        Some(self.replica.clone())
    }
    fn node_count(&self) -> usize {
        self.nodes.load(Ordering::SeqCst)
    }
    fn datacenter(&self, host: HostId) -> Option<String> {
        Some(if host == PEER { "dc2" } else { "dc1" }.to_string())
    }
}

struct Tables(Mutex<HashMap<TableId, u32>>);

impl TableLookup for Tables {
    fn gc_grace_seconds(&self, table: TableId) -> Option<u32> {
        self.0.lock().expect("lock").get(&table).copied()
    }
}

/// The file system, until told to fail every write as a full disk does.
#[derive(Default)]
struct Disk {
    full: Arc<AtomicBool>,
}

struct DiskFile {
    inner: Box<dyn HintFile>,
    full: Arc<AtomicBool>,
}

impl HintFile for DiskFile {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        if self.full.load(Ordering::SeqCst) {
            // A partial write first, as a disk filling up mid-write leaves.
            let _ = self.inner.append(&bytes[..bytes.len() / 2]);
            return Err(io::Error::from_raw_os_error(28)); // ENOSPC
        }
        self.inner.append(bytes)
    }
    fn sync(&mut self) -> io::Result<()> {
        self.inner.sync()
    }
    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.inner.truncate(len)
    }
}

impl HintsDisk for Disk {
    fn create(&self, path: &Path) -> io::Result<Box<dyn HintFile>> {
        if self.full.load(Ordering::SeqCst) {
            return Err(io::Error::from_raw_os_error(28));
        }
        Ok(Box::new(DiskFile {
            inner: LocalDisk.create(path)?,
            full: self.full.clone(),
        }))
    }
}

struct Fixture {
    dir: tempfile::TempDir,
    clock: Arc<Clock>,
    targets: Arc<Targets>,
    tables: Arc<Tables>,
    full: Arc<AtomicBool>,
    store: Arc<HintStore>,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture::with(|_| {})
    }

    fn with(configure: impl FnOnce(&mut HintsConfig)) -> Fixture {
        let dir = tempfile::tempdir().expect("temp dir");
        let clock = Arc::new(Clock(AtomicI64::new(START_MS)));
        let targets = Arc::new(Targets {
            alive: AtomicBool::new(true),
            downtime: Mutex::new(None),
            replica: Arc::default(),
            nodes: AtomicUsize::new(3),
        });
        let tables = Arc::new(Tables(Mutex::new(HashMap::from([
            (TABLE, 864_000),
            (OTHER_TABLE, 3600),
        ]))));
        let mut config = HintsConfig::new(LOCAL, dir.path().join("hints"));
        configure(&mut config);
        let disk = Disk::default();
        let full = disk.full.clone();
        let store = Arc::new(
            HintStore::open(
                config,
                targets.clone(),
                tables.clone(),
                clock.clone(),
                Arc::new(disk),
            )
            .expect("open"),
        );
        Fixture {
            dir,
            clock,
            targets,
            tables,
            full,
            store,
        }
    }

    /// The store opened again on the same directory (a restart).
    fn reopen(&mut self) {
        let config = self.store.config.clone();
        self.store = Arc::new(
            HintStore::open(
                config,
                self.targets.clone(),
                self.tables.clone(),
                self.clock.clone(),
                Arc::new(Disk {
                    full: self.full.clone(),
                }),
            )
            .expect("open"),
        );
    }

    fn hint(&self, token: i64) -> bool {
        self.store
            .write_missed(PEER, &mutation(&[(TABLE, token)]), MissedWrite::Down)
    }

    fn files(&self) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(self.dir.path().join("hints"))
            .expect("read dir")
            .map(|e| e.expect("entry").path())
            .collect();
        files.sort();
        files
    }

    fn stats(&self) -> crate::TargetStats {
        self.store
            .stats()
            .into_iter()
            .find(|s| s.host == PEER)
            .expect("the peer has stats")
    }

    async fn dispatch(&self) -> Outcome {
        let target = self
            .store
            .all_targets()
            .into_iter()
            .find(|t| t.host == PEER)
            .expect("target");
        dispatch(&self.store, &target).await
    }

    fn applied(&self) -> Vec<i64> {
        self.targets.replica.applied.lock().expect("lock").clone()
    }
}

fn mutation(updates: &[(TableId, i64)]) -> Mutation {
    Mutation {
        updates: Arc::new(
            updates
                .iter()
                .map(|&(table, token)| PartitionUpdate {
                    table,
                    key: PartitionKey {
                        token,
                        key: token.to_be_bytes().to_vec(),
                    },
                    header: None,
                    static_row: None,
                    rows: Vec::new(),
                })
                .collect(),
        ),
        durable_writes: true,
    }
}

#[test]
fn file_names_and_records_read_back() {
    let name = format::file_name(PEER, 1234);
    assert_eq!(
        name, "00000000-0000-0000-0000-000000000002-1234-1.hints",
        "Cassandra's <host id>-<timestamp>-<version>.hints"
    );
    assert_eq!(format::parse_file_name(&name), Some((PEER, 1234)));
    for bad in [
        "x.hints",
        "00000000-0000-0000-0000-000000000002-1234-2.hints",
        &name[1..],
    ] {
        assert_eq!(format::parse_file_name(bad), None, "{bad}");
    }
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join(&name);
    let mut bytes = format::encode_header(PEER, 1234);
    format::encode_record(5, true, b"first", &mut bytes);
    format::encode_record(6, false, b"second", &mut bytes);
    std::fs::write(&path, &bytes).expect("write");
    let mut reader = RecordReader::open(&path, PEER, 0).expect("open");
    let Next::Record(first) = reader.next_record().expect("read") else {
        panic!("a record")
    };
    assert_eq!(
        (first.created_ms, first.durable_writes, &first.mutation[..]),
        (5, true, &b"first"[..])
    );
    assert_eq!(reader.offset(), HEADER_BYTES + first.size_bytes);
    let Next::Record(second) = reader.next_record().expect("read") else {
        panic!("a record")
    };
    assert_eq!((second.created_ms, second.durable_writes), (6, false));
    assert!(matches!(reader.next_record().expect("read"), Next::End));
    // A file of another host is refused.
    assert!(RecordReader::open(&path, LOCAL, 0).is_err());
}

#[test]
fn a_torn_or_damaged_tail_is_cut_at_the_last_good_record_on_open() {
    let mut f = Fixture::new();
    for token in 1..=3 {
        assert!(f.hint(token));
    }
    f.store.flush(true);
    let [file] = f.files().try_into().expect("one file");
    let good = std::fs::metadata(&file).expect("metadata").len();
    // A fourth record torn by a crash.
    let mut torn = Vec::new();
    format::encode_record(START_MS, true, b"never finished", &mut torn);
    let mut bytes = std::fs::read(&file).expect("read");
    bytes.extend_from_slice(&torn[..torn.len() - 3]);
    std::fs::write(&file, &bytes).expect("write");
    f.reopen();
    assert_eq!(std::fs::metadata(&file).expect("metadata").len(), good);
    assert_eq!(f.stats().pending, 3);

    // A damaged byte inside the second record: the file keeps the first only.
    let mut bytes = std::fs::read(&file).expect("read");
    let first_end = HEADER_BYTES as usize + (bytes.len() - HEADER_BYTES as usize) / 3;
    bytes[first_end + 12] ^= 0xff;
    std::fs::write(&file, &bytes).expect("write");
    f.reopen();
    assert_eq!(
        std::fs::metadata(&file).expect("metadata").len(),
        first_end as u64
    );
    assert_eq!(f.stats().pending, 1);

    // A file cut short in its header holds nothing and is removed.
    std::fs::write(&file, &bytes[..10]).expect("write");
    f.reopen();
    assert!(f.files().is_empty());
    assert!(f.store.stats().iter().all(|s| s.pending == 0));
}

#[tokio::test]
async fn files_rotate_at_max_hints_file_size() {
    let mut record = Vec::new();
    format::encode_record(0, true, &encoded(&[(TABLE, 1)]), &mut record);
    let max = HEADER_BYTES + 3 * record.len() as u64;
    let mut f = Fixture::with(|c| {
        c.max_file_size_bytes = max;
        c.throttle_bytes_per_second = 0;
    });
    for token in 0..10 {
        assert!(f.hint(token));
    }
    f.store.flush(false);
    assert!(f.hint(10));
    f.store.flush(true);
    let files = f.files();
    assert_eq!(files.len(), 4, "3 + 3 + 3 + 2 hints: {files:?}");
    for file in &files {
        assert!(std::fs::metadata(file).expect("metadata").len() <= max);
    }
    // Every hint is there after a restart, and replays in order across the files.
    f.reopen();
    assert_eq!(f.stats().pending, 11);
    assert!(matches!(f.dispatch().await, Outcome::Done));
    assert_eq!(f.applied(), (0..11).collect::<Vec<_>>());
}

fn encoded(updates: &[(TableId, i64)]) -> Vec<u8> {
    let mut out = Vec::new();
    mutation::encode_mutation(&mutation(updates).updates, &mut out);
    out
}

#[test]
fn a_target_down_longer_than_the_window_gets_no_hints() {
    let f = Fixture::with(|c| c.max_hint_window = Duration::from_secs(60));
    *f.targets.downtime.lock().expect("lock") = Some(Duration::from_secs(59));
    assert!(f.hint(1));
    *f.targets.downtime.lock().expect("lock") = Some(Duration::from_secs(61));
    assert!(!f.hint(2));
    assert!(!f
        .store
        .write_missed(PEER, &mutation(&[(TABLE, 3)]), MissedWrite::TimedOut));
    let stats = f.stats();
    assert_eq!(
        (stats.stored, stats.dropped_window, stats.pending),
        (1, 2, 1)
    );

    // Cassandra's persistent window: up again (no downtime), but the oldest pending hint is
    // older than the window, as after this node restarted.
    *f.targets.downtime.lock().expect("lock") = None;
    f.clock.advance(Duration::from_secs(61));
    assert!(!f.hint(4));
    assert_eq!(f.stats().dropped_window, 3);
    f.store.flush(true);
    f.clock.advance(Duration::from_secs(1));
    assert!(!f.hint(5), "the window holds for flushed hints too");
}

#[test]
fn no_hint_when_disabled_for_this_node_or_for_a_replica_error() {
    let f = Fixture::with(|c| c.enabled = false);
    assert!(!f.hint(1));
    let f = Fixture::new();
    assert!(!f
        .store
        .write_missed(LOCAL, &mutation(&[(TABLE, 1)]), MissedWrite::Down));
    assert!(!f.store.write_missed(
        PEER,
        &mutation(&[(TABLE, 1)]),
        MissedWrite::Failed(ReplicaError::Storage("disk full".to_string()))
    ));
    assert!(f
        .store
        .write_missed(PEER, &mutation(&[(TABLE, 1)]), MissedWrite::TimedOut));
    assert!(
        f.store.write_missed(
            PEER,
            &mutation(&[(TABLE, 2)]),
            MissedWrite::Failed(ReplicaError::Unreachable("connection refused".to_string()))
        ),
        "no answer is a timeout however it is handed over"
    );
    assert_eq!(f.stats().stored, 2);
}

#[test]
fn a_full_disk_stops_hints_until_it_can_be_written_again() {
    let f = Fixture::new();
    assert!(f.hint(1));
    assert!(f.store.make_durable(), "written and fsynced");
    f.full.store(true, Ordering::SeqCst);
    assert!(
        f.hint(2),
        "kept in memory: the disk is not known to be full yet"
    );
    assert!(f.hint(3));
    assert!(
        !f.store.make_durable(),
        "the batch log must not delete a batch whose hints these were"
    );
    assert!(!f.store.make_durable(), "nor after another flush");
    let stats = f.stats();
    assert_eq!(stats.dropped_disk, 2, "the two that could not be written");
    assert!(!f.hint(4), "hints stop");
    assert_eq!(f.stats().dropped_disk, 3);
    // The partial record the failed write left was cut: the file holds hint 1 whole.
    f.store.flush(true);
    let [file] = f.files().try_into().expect("one file");
    let scanned = format::scan(&file, PEER).expect("scan");
    assert_eq!((scanned.hints, scanned.damage), (1, None));

    // The flusher's next period tries again.
    f.full.store(false, Ordering::SeqCst);
    f.store.retry_disk();
    assert!(f.hint(5));
    assert!(f.store.make_durable());
    f.store.flush(true);
    assert_eq!(f.stats().pending, 2);
}

#[tokio::test]
async fn hints_replay_in_order_and_files_are_deleted_once_acknowledged() {
    let f = Fixture::with(|c| {
        c.max_file_size_bytes = 200;
        c.throttle_bytes_per_second = 0;
    });
    for token in 0..20 {
        assert!(f.hint(token));
        if token % 7 == 0 {
            f.store.flush(false);
        }
    }
    let unflushed = f.store.write_missed(
        PEER,
        &Mutation {
            durable_writes: false,
            ..mutation(&[(TABLE, 20)])
        },
        MissedWrite::TimedOut,
    );
    assert!(unflushed);
    assert!(matches!(f.dispatch().await, Outcome::Done));
    assert_eq!(f.applied(), (0..=20).collect::<Vec<_>>());
    let durable = f.targets.replica.durable.lock().expect("lock").clone();
    assert_eq!(
        durable.last(),
        Some(&false),
        "durable_writes travels with the hint"
    );
    assert!(f.files().is_empty(), "{:?}", f.files());
    let stats = f.stats();
    assert_eq!((stats.pending, stats.delivered), (0, 21));
}

#[tokio::test]
async fn a_failed_delivery_stops_and_the_next_dispatch_resumes_there() {
    let f = Fixture::with(|c| c.throttle_bytes_per_second = 0);
    for token in 0..300 {
        assert!(f.hint(token));
    }
    f.targets.replica.fail.lock().expect("lock").insert(200);
    assert!(matches!(
        f.dispatch().await,
        Outcome::Failed(ReplicaError::Unreachable(_))
    ));
    // Pages of 128: the first page is done; the second stopped at hint 200.
    let applied = f.applied();
    assert_eq!(&applied[..200], &(0..200).collect::<Vec<_>>()[..]);
    assert_eq!(f.stats().pending, 100);
    assert_eq!(f.files().len(), 1, "kept until every hint is acknowledged");

    f.targets.replica.fail.lock().expect("lock").clear();
    assert!(matches!(f.dispatch().await, Outcome::Done));
    let applied = f.applied();
    let mut seen: Vec<i64> = applied.clone();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen, (0..300).collect::<Vec<_>>());
    assert_eq!(
        applied.iter().filter(|t| **t < 200).count(),
        200,
        "hints acknowledged before the failure are not sent again"
    );
    assert!(f.files().is_empty());
    assert_eq!(f.stats().pending, 0);
}

#[tokio::test]
async fn a_down_target_stops_the_dispatch() {
    let f = Fixture::new();
    assert!(f.hint(1));
    f.targets.alive.store(false, Ordering::SeqCst);
    assert!(matches!(f.dispatch().await, Outcome::Stopped));
    assert!(f.applied().is_empty());
    assert_eq!(f.stats().pending, 1);
}

#[tokio::test]
async fn hints_of_a_dropped_table_are_discarded() {
    let f = Fixture::with(|c| c.throttle_bytes_per_second = 0);
    assert!(f.hint(1));
    assert!(f.store.write_missed(
        PEER,
        &mutation(&[(OTHER_TABLE, 2), (TABLE, 3)]),
        MissedWrite::Down
    ));
    assert!(f
        .store
        .write_missed(PEER, &mutation(&[(OTHER_TABLE, 4)]), MissedWrite::Down));
    f.tables.0.lock().expect("lock").remove(&OTHER_TABLE);
    assert!(matches!(f.dispatch().await, Outcome::Done));
    assert_eq!(f.applied(), [1, 3], "the dropped table's updates left out");
    let stats = f.stats();
    assert_eq!(
        (stats.delivered, stats.dropped_table, stats.pending),
        (2, 1, 0)
    );
    assert!(f.files().is_empty());
}

#[tokio::test]
async fn hints_older_than_gc_grace_are_discarded() {
    let f = Fixture::with(|c| c.throttle_bytes_per_second = 0);
    // OTHER_TABLE's gc_grace is an hour, TABLE's ten days: a hint of both lives an hour.
    assert!(f.store.write_missed(
        PEER,
        &mutation(&[(OTHER_TABLE, 1), (TABLE, 2)]),
        MissedWrite::Down
    ));
    assert!(f.hint(3));
    f.clock.advance(Duration::from_secs(3600));
    assert!(f.hint(4));
    assert!(matches!(f.dispatch().await, Outcome::Done));
    assert_eq!(f.applied(), [3, 4]);
    let stats = f.stats();
    assert_eq!((stats.delivered, stats.dropped_expired), (2, 1));
    assert_eq!(stats.dropped(), 1);
}

#[tokio::test(start_paused = true)]
async fn the_throttle_paces_bytes_and_is_split_across_the_other_nodes() {
    let mut throttle = Throttle::new(Some(1000.0));
    let start = tokio::time::Instant::now();
    for _ in 0..4 {
        throttle.take(500).await;
    }
    // The first take is free; each one after waits for what the one before it paid for.
    assert_eq!(start.elapsed(), Duration::from_millis(1500));
    let mut unthrottled = Throttle::new(None);
    let start = tokio::time::Instant::now();
    unthrottled.take(1 << 30).await;
    unthrottled.take(1 << 30).await;
    assert_eq!(start.elapsed(), Duration::ZERO);

    let f = Fixture::with(|c| c.throttle_bytes_per_second = 1024 * 1024);
    assert_eq!(
        f.store.throttle_for_target(),
        Some(512.0 * 1024.0),
        "3 nodes"
    );
    f.targets.nodes.store(1, Ordering::SeqCst);
    assert_eq!(f.store.throttle_for_target(), Some(1024.0 * 1024.0));
    let f = Fixture::with(|c| c.throttle_bytes_per_second = 0);
    assert_eq!(f.store.throttle_for_target(), None);
}

#[tokio::test]
async fn a_dispatch_is_throttled() {
    // 100 hints of about 60 bytes at 3000 bytes/s split across 2 other nodes: about 4 s.
    let f = Fixture::with(|c| c.throttle_bytes_per_second = 3000);
    for token in 0..100 {
        assert!(f.hint(token));
    }
    let bytes: u64 = {
        let mut record = Vec::new();
        format::encode_record(0, true, &encoded(&[(TABLE, 1)]), &mut record);
        record.len() as u64 * 100
    };
    tokio::time::pause();
    let start = tokio::time::Instant::now();
    assert!(matches!(f.dispatch().await, Outcome::Done));
    let expected = Duration::from_secs_f64((bytes - bytes / 100) as f64 / 1500.0);
    let elapsed = start.elapsed();
    assert!(
        elapsed >= expected && elapsed < expected + Duration::from_millis(100),
        "{elapsed:?} for {bytes} bytes, expected {expected:?}"
    );
}

#[tokio::test]
async fn the_service_replays_when_the_target_comes_up_and_shutdown_flushes() {
    let f = Fixture::with(|c| {
        c.throttle_bytes_per_second = 0;
        c.flush_period = Duration::from_millis(50);
    });
    f.targets.alive.store(false, Ordering::SeqCst);
    let service = crate::HintsService::start(f.store.clone());
    for token in 0..5 {
        assert!(f.hint(token));
    }
    // The flusher writes them within its period.
    wait_for(|| !f.files().is_empty()).await;
    assert!(f.applied().is_empty(), "not while the target is down");
    f.targets.alive.store(true, Ordering::SeqCst);
    service.target_up(PEER);
    wait_for(|| f.applied().len() == 5).await;
    wait_for(|| f.files().is_empty()).await;
    // The replay ends (Done) once it finds nothing more to send.
    wait_for(|| f.stats().last_replay_ms.is_some()).await;

    f.targets.alive.store(false, Ordering::SeqCst);
    assert!(f.hint(5));
    service.shutdown().await;
    assert_eq!(f.files().len(), 1, "the final flush wrote the last hint");
}

#[tokio::test]
async fn the_service_retries_a_failed_dispatch_after_its_backoff() {
    let f = Fixture::with(|c| c.throttle_bytes_per_second = 0);
    f.targets.replica.fail.lock().expect("lock").insert(1);
    assert!(f.hint(1));
    let service = crate::HintsService::start(f.store.clone());
    service.target_up(PEER);
    wait_for(|| {
        let target = f.store.all_targets().pop().expect("target");
        let retry_at = crate::store::lock(&target.dispatch).retry_at;
        retry_at.is_some()
    })
    .await;
    f.targets.replica.fail.lock().expect("lock").clear();
    // Before the dispatcher's 10 s period: at the end of the first backoff (1 s).
    let start = tokio::time::Instant::now();
    wait_for(|| f.applied() == [1]).await;
    assert!(
        start.elapsed() < Duration::from_secs(8),
        "{:?}",
        start.elapsed()
    );
    service.shutdown().await;
}

#[tokio::test]
async fn the_dispatcher_does_not_spin_on_a_down_target_whose_backoff_ended() {
    let f = Fixture::new();
    f.targets.replica.fail.lock().expect("lock").insert(1);
    assert!(f.hint(1));
    let service = crate::HintsService::start(f.store.clone());
    let target = f.store.all_targets().pop().expect("target");
    wait_for(|| crate::store::lock(&target.dispatch).retry_at.is_some()).await;
    f.targets.alive.store(false, Ordering::SeqCst);
    // The backoff ends while the target is down: nothing is due until the next period.
    wait_for(|| !crate::store::lock(&target.dispatch).running).await;
    let retry_at = crate::store::lock(&target.dispatch)
        .retry_at
        .expect("a backoff");
    tokio::time::sleep_until(retry_at + Duration::from_millis(200)).await;
    assert_eq!(f.store.next_retry(), None);
    service.shutdown().await;
}

async fn wait_for(condition: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(tokio::time::Instant::now() < deadline, "timed out");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_new_service_forgets_a_dispatch_an_earlier_one_left_running_and_replays_inline() {
    // A simulated node's restart keeps its store but drops its runtime, and with it a
    // dispatch in flight: the next service must not wait for it.
    let f = Fixture::with(|c| {
        c.throttle_bytes_per_second = 0;
        c.file_io = crate::FileIo::Inline;
    });
    assert!(f.hint(1));
    assert!(f.hint(2));
    let target = f.store.all_targets().pop().expect("target");
    {
        let mut state = crate::store::lock(&target.dispatch);
        state.running = true;
        state.retry_at = Some(tokio::time::Instant::now() + Duration::from_secs(3600));
    }
    let service = crate::HintsService::start(f.store.clone());
    service.target_up(PEER);
    wait_for(|| f.applied() == [1, 2]).await;
    wait_for(|| f.stats().pending == 0 && f.files().is_empty()).await;
    service.shutdown().await;
}

#[tokio::test]
async fn a_target_past_max_hints_size_per_host_gets_no_hints_until_replay_shrinks_its_files() {
    let f = Fixture::with(|c| {
        c.throttle_bytes_per_second = 0;
        // The header and two and a half records.
        let mut record = Vec::new();
        format::encode_record(START_MS, true, &encoded(&[(TABLE, 1)]), &mut record);
        c.max_hints_size_per_host_bytes = HEADER_BYTES + 5 * record.len() as u64 / 2;
    });
    // Buffered hints are not on disk yet: not counted.
    for token in 0..3 {
        assert!(f.hint(token));
    }
    f.store.flush(false);
    // Three records on disk: past the limit (Cassandra's check is "more than").
    assert!(!f.hint(3));
    let stats = f.stats();
    assert_eq!((stats.stored, stats.dropped_size, stats.pending), (3, 1, 3));
    assert_eq!(stats.dropped(), 1, "a drop the operator must repair");
    // Replay empties the files: hints are kept again.
    assert!(matches!(f.dispatch().await, Outcome::Done));
    assert_eq!(f.applied(), [0, 1, 2]);
    assert!(f.hint(4));
    // 0, the default, is no limit.
    let unlimited = Fixture::with(|c| c.max_hints_size_per_host_bytes = 0);
    for token in 0..50 {
        assert!(unlimited.hint(token));
        unlimited.store.flush(false);
    }
    assert_eq!(unlimited.stats().dropped(), 0);
}

#[test]
fn no_hint_for_a_node_of_a_disabled_datacenter() {
    // PEER is in dc2 (`Targets::datacenter`), OTHER_PEER in dc1.
    let f = Fixture::with(|c| c.disabled_datacenters = ["dc2".to_string()].into());
    assert!(!f.hint(1));
    assert!(f
        .store
        .write_missed(OTHER_PEER, &mutation(&[(TABLE, 1)]), MissedWrite::Down));
    let stats = f.store.stats();
    assert_eq!(stats.len(), 1, "no target entry for PEER: {stats:?}");
    assert_eq!((stats[0].host, stats[0].stored), (OTHER_PEER, 1));
    // Not a drop: the operator turned hints off for that data centre.
    assert_eq!(stats[0].dropped(), 0);
    let open = Fixture::with(|c| c.disabled_datacenters = ["dc3".to_string()].into());
    assert!(open.hint(1));
}
