//! Unit tests of the coordinator over in-memory replicas.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use mutation::{
    ClusteringSlice, PartitionKey, PartitionUpdate, ReadCommand, ReadResponse, ScanStart, TableId,
};
use schema::Replication;

use super::*;

/// A replica that never answers (a stalled disk, a dead peer).
struct Stalled;

impl Replica for Stalled {
    fn apply_mutation(&self, _: Mutation, _: Deadline) -> ReplicaFuture<()> {
        Box::pin(std::future::pending())
    }
    fn read(&self, _: ReadCommand, _: Deadline) -> ReplicaFuture<ReadResponse> {
        Box::pin(std::future::pending())
    }
    fn digest(&self, _: ReadCommand, _: Deadline) -> ReplicaFuture<ReadDigest> {
        Box::pin(std::future::pending())
    }
    fn truncate(&self, _: TableId, _: Deadline) -> ReplicaFuture<()> {
        Box::pin(std::future::pending())
    }
}

/// A replica that refuses every request with `error`.
struct Failing(ReplicaError);

impl Replica for Failing {
    fn apply_mutation(&self, _: Mutation, _: Deadline) -> ReplicaFuture<()> {
        Box::pin(std::future::ready(Err(self.0.clone())))
    }
    fn read(&self, _: ReadCommand, _: Deadline) -> ReplicaFuture<ReadResponse> {
        Box::pin(std::future::ready(Err(self.0.clone())))
    }
    fn digest(&self, _: ReadCommand, _: Deadline) -> ReplicaFuture<ReadDigest> {
        Box::pin(std::future::ready(Err(self.0.clone())))
    }
    fn truncate(&self, _: TableId, _: Deadline) -> ReplicaFuture<()> {
        Box::pin(std::future::ready(Err(self.0.clone())))
    }
}

/// Hinted handoff that records what it is handed.
#[derive(Default)]
struct RecordedHints(Mutex<Vec<(Mutation, MissedWrite)>>);

impl HintedHandoff for RecordedHints {
    fn write_missed(&self, _: HostId, mutation: &Mutation, why: MissedWrite) -> bool {
        self.0.lock().expect("lock").push((mutation.clone(), why));
        false
    }
}

fn keyspace() -> KeyspaceMetadata {
    let options = BTreeMap::from([
        ("class".to_string(), "SimpleStrategy".to_string()),
        ("replication_factor".to_string(), "1".to_string()),
    ]);
    KeyspaceMetadata {
        name: "ks".to_string(),
        durable_writes: true,
        replication: Replication::from_options(&options, "dc1", "ks", None).expect("valid"),
        tables: BTreeMap::new(),
        types: BTreeMap::new(),
        virtual_keyspace: false,
    }
}

fn endpoint(node: u8, dc: &str) -> locator::Endpoint {
    let address = std::net::IpAddr::from([127, 0, 0, node]);
    locator::Endpoint {
        host_id: HostId(uuid::Uuid::from_u128(node.into())),
        broadcast_address: address,
        native_address: address,
        native_port: 9042,
        location: locator::Location {
            datacenter: dc.to_string(),
            rack: "rack1".to_string(),
        },
        state: locator::NodeState::Normal,
    }
}

/// The ring of this node alone, owning token 0.
fn one_node() -> Arc<TokenMetadata> {
    Arc::new(TokenMetadata::new(endpoint(1, "dc1"), vec![0]).expect("ring"))
}

fn coordinator(replica: impl Replica) -> Coordinator {
    Coordinator::new(one_node(), Arc::new(replica))
}

fn stalled() -> Coordinator {
    coordinator(Stalled)
}

fn update(token: i64) -> PartitionUpdate {
    PartitionUpdate {
        table: TableId::from_u128(1),
        key: PartitionKey {
            token,
            key: vec![1],
        },
        header: None,
        static_row: None,
        rows: Vec::new(),
    }
}

/// A replica that acknowledges every write and counts them.
#[derive(Default)]
struct Counting(std::sync::atomic::AtomicUsize);

impl Replica for Arc<Counting> {
    fn apply_mutation(&self, mutation: Mutation, _: Deadline) -> ReplicaFuture<()> {
        self.0
            .fetch_add(mutation.updates.len(), std::sync::atomic::Ordering::Relaxed);
        Box::pin(std::future::ready(Ok(())))
    }
    fn read(&self, _: ReadCommand, _: Deadline) -> ReplicaFuture<ReadResponse> {
        Box::pin(std::future::pending())
    }
    fn digest(&self, _: ReadCommand, _: Deadline) -> ReplicaFuture<ReadDigest> {
        Box::pin(std::future::pending())
    }
    fn truncate(&self, _: TableId, _: Deadline) -> ReplicaFuture<()> {
        Box::pin(std::future::pending())
    }
}

fn keyspace_with(options: &[(&str, &str)]) -> KeyspaceMetadata {
    KeyspaceMetadata {
        replication: Replication::from_stored(
            options
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
        .expect("valid"),
        ..keyspace()
    }
}

#[tokio::test]
async fn replicas_come_from_the_keyspace_strategy_over_the_ring() {
    // This node (dc1) owns token 0; node 2 (dc2), which has no replica here and so counts
    // as down, owns token 100.
    let ring = one_node()
        .with_normal_tokens(endpoint(2, "dc2"), vec![100])
        .expect("ring");
    let counting = Arc::new(Counting::default());
    let coordinator = Coordinator::new(Arc::new(ring), Arc::new(counting.clone()));
    let deadline = || Deadline::at(Instant::now() + Duration::from_secs(5));
    let write = |ks: KeyspaceMetadata, token, consistency| {
        let coordinator = &coordinator;
        async move {
            coordinator
                .write(
                    &ks,
                    vec![update(token)],
                    consistency,
                    WriteType::Simple,
                    deadline(),
                )
                .await
        }
    };
    let simple = |rf| {
        keyspace_with(&[
            ("class", "org.apache.cassandra.locator.SimpleStrategy"),
            ("replication_factor", rf),
        ])
    };
    // RF 1: token 50 is node 2's alone, token 150 (wrapping to 0) this node's.
    let e = write(simple("1"), 50, ConsistencyLevel::One)
        .await
        .expect_err("its replica is down");
    assert!(
        matches!(
            e,
            CoordinatorError::Unavailable {
                required: 1,
                alive: 0,
                ..
            }
        ),
        "{e:?}"
    );
    write(simple("1"), 150, ConsistencyLevel::One)
        .await
        .expect("this node's");
    // RF 2: both nodes; ONE is met by this node, QUORUM is not.
    write(simple("2"), 50, ConsistencyLevel::One)
        .await
        .expect("one of two");
    let e = write(simple("2"), 50, ConsistencyLevel::Quorum)
        .await
        .expect_err("two of two");
    assert!(
        matches!(
            e,
            CoordinatorError::Unavailable {
                required: 2,
                alive: 1,
                ..
            }
        ),
        "{e:?}"
    );
    // LOCAL_QUORUM counts dc1 only: its one replica is up. EACH_QUORUM needs dc2's too.
    let nts = keyspace_with(&[
        (
            "class",
            "org.apache.cassandra.locator.NetworkTopologyStrategy",
        ),
        ("dc1", "1"),
        ("dc2", "1"),
    ]);
    write(nts.clone(), 50, ConsistencyLevel::LocalQuorum)
        .await
        .expect("dc1's replica is up");
    let e = write(nts.clone(), 50, ConsistencyLevel::EachQuorum)
        .await
        .expect_err("dc2's replica is down");
    assert!(
        matches!(
            e,
            CoordinatorError::Unavailable {
                required: 1,
                alive: 0,
                ..
            }
        ),
        "{e:?}"
    );
    let only_dc2 = keyspace_with(&[
        (
            "class",
            "org.apache.cassandra.locator.NetworkTopologyStrategy",
        ),
        ("dc2", "1"),
    ]);
    let e = write(only_dc2, 150, ConsistencyLevel::LocalOne)
        .await
        .expect_err("no replica in dc1");
    assert!(matches!(e, CoordinatorError::Unavailable { .. }), "{e:?}");
    assert_eq!(
        counting.0.load(std::sync::atomic::Ordering::Relaxed),
        3,
        "only the writes that passed were applied"
    );
}

fn read() -> ReadCommand {
    ReadCommand::Partition {
        table: TableId::from_u128(1),
        key: PartitionKey {
            token: 1,
            key: vec![1],
        },
        slice: ClusteringSlice::all(),
        max_rows: 1,
        resume: None,
    }
}

#[tokio::test]
async fn a_read_past_its_deadline_is_a_read_timeout() {
    let coordinator = stalled();
    let started = Instant::now();
    let deadline = Deadline::at(started + Duration::from_millis(50));
    let e = coordinator
        .read(&keyspace(), read(), ConsistencyLevel::One, deadline)
        .await
        .expect_err("the replica never answers");
    assert!(started.elapsed() >= Duration::from_millis(50));
    assert!(
        matches!(
            e,
            CoordinatorError::ReadTimeout {
                consistency: ConsistencyLevel::One,
                received: 0,
                block_for: 1,
                data_present: false,
            }
        ),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "Operation timed out - received only 0 responses."
    );
    // A deadline already passed: still a read timeout (the read is sent, as a point read
    // does not look at the clock first, and the stalled replica never answers it).
    let e = coordinator
        .read(
            &keyspace(),
            read(),
            ConsistencyLevel::Quorum,
            Deadline::at(started),
        )
        .await
        .expect_err("too late");
    assert!(matches!(e, CoordinatorError::ReadTimeout { .. }), "{e:?}");
}

#[tokio::test]
async fn a_write_past_its_deadline_is_a_write_timeout_of_its_type() {
    let coordinator = stalled();
    let deadline = Deadline::at(Instant::now() + Duration::from_millis(20));
    let e = coordinator
        .write(
            &keyspace(),
            vec![update(1)],
            ConsistencyLevel::All,
            WriteType::UnloggedBatch,
            deadline,
        )
        .await
        .expect_err("the replica never acknowledges");
    assert!(
        matches!(
            e,
            CoordinatorError::WriteTimeout {
                consistency: ConsistencyLevel::All,
                received: 0,
                block_for: 1,
                write_type: WriteType::UnloggedBatch,
            }
        ),
        "{e:?}"
    );
}

#[tokio::test]
async fn a_write_a_replica_did_not_acknowledge_in_time_is_handed_to_hinted_handoff() {
    let hints = Arc::new(RecordedHints::default());
    let coordinator = stalled().with_hinted_handoff(hints.clone());
    let mut keyspace = keyspace();
    keyspace.durable_writes = false;
    let deadline = Deadline::at(Instant::now() + Duration::from_millis(20));
    let e = coordinator
        .write(
            &keyspace,
            vec![update(1)],
            ConsistencyLevel::One,
            WriteType::Simple,
            deadline,
        )
        .await
        .expect_err("the replica never acknowledges");
    assert!(matches!(e, CoordinatorError::WriteTimeout { .. }), "{e:?}");
    let recorded = hints.0.lock().expect("lock");
    assert_eq!(recorded.len(), 1);
    let (mutation, why) = &recorded[0];
    assert_eq!(*mutation.updates, vec![update(1)]);
    assert!(
        !mutation.durable_writes,
        "the keyspace's durable_writes travels with the hint"
    );
    assert_eq!(*why, MissedWrite::TimedOut);
}

#[tokio::test]
async fn a_write_a_replica_failed_is_handed_to_hinted_handoff_and_answers_its_error() {
    let hints = Arc::new(RecordedHints::default());
    let failure = ReplicaError::Storage("disk full".to_string());
    let coordinator = coordinator(Failing(failure.clone())).with_hinted_handoff(hints.clone());
    let deadline = Deadline::at(Instant::now() + Duration::from_secs(60));
    let e = coordinator
        .write(
            &keyspace(),
            vec![update(1)],
            ConsistencyLevel::One,
            WriteType::Simple,
            deadline,
        )
        .await
        .expect_err("the replica fails");
    // The client's words are the replica's (a server error in the query layer).
    assert_eq!(e.to_string(), "storage error: disk full");
    let recorded = hints.0.lock().expect("lock");
    assert_eq!(recorded.len(), 1);
    assert!(
        recorded[0].0.durable_writes,
        "durable_writes of the keyspace"
    );
    assert_eq!(recorded[0].1, MissedWrite::Failed(failure));
}

#[tokio::test]
async fn a_read_the_replica_did_not_start_past_its_deadline_is_a_read_timeout() {
    let coordinator = coordinator(Failing(ReplicaError::DeadlinePassed));
    let deadline = Deadline::at(Instant::now() + Duration::from_secs(60));
    let e = coordinator
        .read(&keyspace(), read(), ConsistencyLevel::One, deadline)
        .await
        .expect_err("not started");
    assert!(matches!(e, CoordinatorError::ReadTimeout { .. }), "{e:?}");
}

#[test]
fn replica_errors_keep_the_words_clients_saw() {
    // The query layer answers these as server errors with these messages: unchanged from
    // when the coordinator carried storage's error itself.
    let cases = [
        (
            ReplicaError::UnknownTable(TableId::from_u128(1)),
            "storage error: unknown table 00000000-0000-0000-0000-000000000001",
        ),
        (
            ReplicaError::Storage("invalid storage request: too big".to_string()),
            "storage error: invalid storage request: too big",
        ),
        (
            ReplicaError::Internal("panicked".to_string()),
            "replica task failed: panicked",
        ),
    ];
    for (e, words) in cases {
        assert_eq!(CoordinatorError::from(e).to_string(), words);
    }
}

#[tokio::test]
async fn a_truncate_past_its_deadline_is_a_truncate_timeout() {
    let coordinator = stalled();
    let started = Instant::now();
    let deadline = Deadline::at(started + Duration::from_millis(20));
    let e = coordinator
        .truncate(&keyspace(), TableId::from_u128(1), deadline)
        .await
        .expect_err("the replica never acknowledges");
    assert!(started.elapsed() >= Duration::from_millis(20));
    assert!(
        matches!(e, CoordinatorError::TruncateTimeout { received: 0 }),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "Truncate timed out - received only 0 responses"
    );
}

#[tokio::test]
async fn a_truncate_a_replica_refused_is_its_error_and_one_it_did_not_start_a_timeout() {
    let deadline = Deadline::at(Instant::now() + Duration::from_secs(60));
    let unknown = ReplicaError::UnknownTable(TableId::from_u128(4));
    let e = coordinator(Failing(unknown.clone()))
        .truncate(&keyspace(), TableId::from_u128(4), deadline)
        .await
        .expect_err("unknown table");
    assert!(
        matches!(&e, CoordinatorError::Replica(r) if *r == unknown),
        "{e:?}"
    );
    let e = coordinator(Failing(ReplicaError::DeadlinePassed))
        .truncate(&keyspace(), TableId::from_u128(4), deadline)
        .await
        .expect_err("not started");
    assert!(
        matches!(e, CoordinatorError::TruncateTimeout { received: 0 }),
        "{e:?}"
    );
}

/// What a fake replica was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Request {
    Apply(Vec<i64>),
    Read,
    Digest,
    /// A scan from this token (`None`: a position after a partition) to this end token.
    Scan(Option<i64>, Option<i64>),
}

/// An in-memory replica: applies mutations to a map of partitions (merging rows), answers
/// reads with whole partitions (up to `max_rows` rows, no paging) and logs every request.
/// `stalled` ones never answer.
#[derive(Default)]
struct Fake {
    partitions: Mutex<BTreeMap<i64, mutation::PartitionData>>,
    log: Mutex<Vec<Request>>,
    stalled: std::sync::atomic::AtomicBool,
}

impl Fake {
    fn stalled(&self) -> bool {
        self.stalled.load(std::sync::atomic::Ordering::Relaxed)
    }
    fn requests(&self) -> Vec<Request> {
        self.log.lock().expect("lock").clone()
    }
    fn page(&self, command: &ReadCommand) -> ReadResponse {
        let ReadCommand::Partition { key, max_rows, .. } = command else {
            panic!("partition reads only")
        };
        let mut data = self
            .partitions
            .lock()
            .expect("lock")
            .get(&key.token)
            .cloned()
            .unwrap_or_else(|| mutation::PartitionData {
                key: key.clone(),
                header: Default::default(),
                static_row: None,
                rows: Vec::new(),
            });
        data.rows.truncate(*max_rows);
        ReadResponse::Partition(mutation::PartitionPage { data, resume: None })
    }
}

impl Replica for Arc<Fake> {
    fn apply_mutation(&self, mutation: Mutation, _: Deadline) -> ReplicaFuture<()> {
        let tokens = mutation.updates.iter().map(|u| u.key.token).collect();
        self.log.lock().expect("lock").push(Request::Apply(tokens));
        if self.stalled() {
            return Box::pin(std::future::pending());
        }
        let mut partitions = self.partitions.lock().expect("lock");
        for u in mutation.updates.iter() {
            let p = partitions
                .entry(u.key.token)
                .or_insert_with(|| mutation::PartitionData {
                    key: u.key.clone(),
                    header: Default::default(),
                    static_row: None,
                    rows: Vec::new(),
                });
            let mut rows: BTreeMap<Vec<u8>, mutation::Row> = p.rows.drain(..).collect();
            for (c, r) in &u.rows {
                let merged = match rows.remove(c) {
                    Some(mine) => mine.merge(r.clone()),
                    None => r.clone(),
                };
                rows.insert(c.clone(), merged);
            }
            p.rows = rows.into_iter().collect();
        }
        Box::pin(std::future::ready(Ok(())))
    }
    fn read(&self, command: ReadCommand, _: Deadline) -> ReplicaFuture<ReadResponse> {
        if let ReadCommand::Range {
            start, end_token, ..
        } = &command
        {
            let from = match start {
                mutation::ScanStart::Beginning => Some(i64::MIN),
                mutation::ScanStart::Token(t) => Some(*t),
                _ => None,
            };
            self.log
                .lock()
                .expect("lock")
                .push(Request::Scan(from, *end_token));
            return Box::pin(std::future::ready(Ok(ReadResponse::Range(
                mutation::ScanPage {
                    partitions: Vec::new(),
                    resume: None,
                    last_partition_continues: false,
                },
            ))));
        }
        self.log.lock().expect("lock").push(Request::Read);
        if self.stalled() {
            return Box::pin(std::future::pending());
        }
        Box::pin(std::future::ready(Ok(self.page(&command))))
    }
    fn digest(&self, command: ReadCommand, _: Deadline) -> ReplicaFuture<ReadDigest> {
        self.log.lock().expect("lock").push(Request::Digest);
        if self.stalled() {
            return Box::pin(std::future::pending());
        }
        Box::pin(std::future::ready(Ok(read_digest(&self.page(&command)))))
    }
    fn truncate(&self, _: TableId, _: Deadline) -> ReplicaFuture<()> {
        Box::pin(std::future::ready(Ok(())))
    }
}

/// Fake replicas by host id, all up.
struct Fakes(BTreeMap<HostId, Arc<Fake>>);

impl Endpoints for Fakes {
    fn replica(&self, endpoint: HostId) -> Option<Arc<dyn Replica>> {
        let fake = self.0.get(&endpoint)?.clone();
        Some(Arc::new(fake))
    }
    fn is_alive(&self, _: HostId) -> bool {
        true
    }
}

/// Nodes 1-3 (dc1) and 4 (dc2), owning tokens 100, 200, 300 and 400; node 1 coordinates.
fn four_fakes() -> (Vec<Arc<Fake>>, Coordinator) {
    let mut ring = TokenMetadata::new(endpoint(1, "dc1"), vec![100]).expect("ring");
    for (n, dc) in [(2, "dc1"), (3, "dc1"), (4, "dc2")] {
        ring = ring
            .with_normal_tokens(endpoint(n, dc), vec![i64::from(n) * 100])
            .expect("ring");
    }
    let fakes: Vec<Arc<Fake>> = (0..4).map(|_| Arc::new(Fake::default())).collect();
    let endpoints = Fakes(
        fakes
            .iter()
            .enumerate()
            .map(|(i, f)| (HostId(uuid::Uuid::from_u128(i as u128 + 1)), f.clone()))
            .collect(),
    );
    let coordinator = Coordinator::for_cluster(
        Arc::new(arc_swap::ArcSwap::from_pointee(ring)),
        Arc::new(endpoints),
    );
    (fakes, coordinator)
}

fn later() -> Deadline {
    Deadline::at(Instant::now() + Duration::from_secs(30))
}

fn row_update(token: i64, clustering: u8, timestamp: i64) -> PartitionUpdate {
    PartitionUpdate {
        rows: vec![(
            vec![clustering],
            mutation::Row {
                liveness: Some(mutation::LivenessInfo {
                    timestamp,
                    expiry: None,
                }),
                deletion: None,
                columns: Vec::new(),
            },
        )],
        ..update(token)
    }
}

#[tokio::test]
async fn a_write_sends_each_replica_one_mutation_of_its_share() {
    let (fakes, coordinator) = four_fakes();
    // RF 2: token 150 is nodes 2 and 3's, token 250 nodes 3 and 4's.
    let ks = keyspace_with(&[
        ("class", "org.apache.cassandra.locator.SimpleStrategy"),
        ("replication_factor", "2"),
    ]);
    coordinator
        .write(
            &ks,
            vec![update(150), update(250)],
            ConsistencyLevel::All,
            WriteType::UnloggedBatch,
            later(),
        )
        .await
        .expect("write");
    assert_eq!(fakes[0].requests(), vec![]);
    assert_eq!(fakes[1].requests(), vec![Request::Apply(vec![150])]);
    assert_eq!(fakes[2].requests(), vec![Request::Apply(vec![150, 250])]);
    assert_eq!(fakes[3].requests(), vec![Request::Apply(vec![250])]);
}

#[tokio::test]
async fn every_partition_needs_its_own_acknowledgements() {
    let (fakes, coordinator) = four_fakes();
    let ks = keyspace_with(&[
        ("class", "org.apache.cassandra.locator.SimpleStrategy"),
        ("replication_factor", "1"),
    ]);
    // Token 150 is node 2's, 250 node 3's; node 3 stalls: two acknowledgements would do for a
    // level of one, but not for the partition of node 3.
    fakes[2]
        .stalled
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let e = coordinator
        .write(
            &ks,
            vec![update(150), update(250)],
            ConsistencyLevel::One,
            WriteType::UnloggedBatch,
            Deadline::at(Instant::now() + Duration::from_millis(50)),
        )
        .await
        .expect_err("node 3 stalls");
    assert!(
        matches!(
            e,
            CoordinatorError::WriteTimeout {
                received: 0,
                block_for: 1,
                write_type: WriteType::UnloggedBatch,
                ..
            }
        ),
        "{e:?}"
    );
}

#[tokio::test]
async fn matching_digests_answer_the_data_and_a_mismatch_reads_and_repairs() {
    let (fakes, coordinator) = four_fakes();
    let ks = keyspace_with(&[
        ("class", "org.apache.cassandra.locator.SimpleStrategy"),
        ("replication_factor", "3"),
    ]);
    // Token 50: nodes 1, 2, 3. Node 1 (this node) is the closest: it gets the data request.
    coordinator
        .write(
            &ks,
            vec![row_update(50, 1, 1)],
            ConsistencyLevel::All,
            WriteType::Simple,
            later(),
        )
        .await
        .expect("write");
    let read = || ReadCommand::Partition {
        table: TableId::from_u128(1),
        key: update(50).key,
        slice: ClusteringSlice::all(),
        max_rows: 10,
        resume: None,
    };
    for f in &fakes {
        f.log.lock().expect("lock").clear();
    }
    coordinator
        .read(&ks, read(), ConsistencyLevel::All, later())
        .await
        .expect("read");
    assert_eq!(fakes[0].requests(), vec![Request::Read]);
    assert_eq!(fakes[1].requests(), vec![Request::Digest]);
    assert_eq!(fakes[2].requests(), vec![Request::Digest]);
    // Node 3 gets a newer row 1 and a row 2 behind the others' backs.
    fakes[2]
        .apply_mutation(
            Mutation {
                updates: Arc::new(vec![row_update(50, 1, 5), row_update(50, 2, 5)]),
                durable_writes: true,
            },
            later(),
        )
        .await
        .expect("apply");
    for f in &fakes {
        f.log.lock().expect("lock").clear();
    }
    let ReadResponse::Partition(page) = coordinator
        .read(&ks, read(), ConsistencyLevel::Quorum, later())
        .await
        .expect("read")
    else {
        panic!("a partition page")
    };
    // QUORUM contacts nodes 1 and 2, which agree: node 3's rows are not seen.
    assert_eq!(page.data.rows.len(), 1);
    assert_eq!(fakes[2].requests(), vec![]);
    for f in &fakes {
        f.log.lock().expect("lock").clear();
    }
    let ReadResponse::Partition(page) = coordinator
        .read(&ks, read(), ConsistencyLevel::All, later())
        .await
        .expect("read")
    else {
        panic!("a partition page")
    };
    assert_eq!(page.data.rows.len(), 2);
    assert_eq!(page.data.rows[0].1.liveness.expect("marker").timestamp, 5);
    // Data from all three after the mismatch, then repairs to the two stale ones.
    assert_eq!(
        fakes[0].requests(),
        vec![Request::Read, Request::Read, Request::Apply(vec![50])]
    );
    assert_eq!(
        fakes[1].requests(),
        vec![Request::Digest, Request::Read, Request::Apply(vec![50])]
    );
    assert_eq!(fakes[2].requests(), vec![Request::Digest, Request::Read]);
    let data = |f: &Fake| f.partitions.lock().expect("lock")[&50].clone();
    assert_eq!(data(&fakes[0]), data(&fakes[2]));
    assert_eq!(data(&fakes[1]), data(&fakes[2]));
}

#[tokio::test]
async fn reads_go_to_the_closest_replicas_and_local_levels_stay_in_the_data_centre() {
    let (fakes, coordinator) = four_fakes();
    let ks = keyspace_with(&[
        (
            "class",
            "org.apache.cassandra.locator.NetworkTopologyStrategy",
        ),
        ("dc1", "2"),
        ("dc2", "1"),
    ]);
    // Token 350: node 4 (dc2) is the primary, then nodes 1 and 2 of dc1.
    let read = ReadCommand::Partition {
        table: TableId::from_u128(1),
        key: update(350).key,
        slice: ClusteringSlice::all(),
        max_rows: 10,
        resume: None,
    };
    coordinator
        .read(&ks, read.clone(), ConsistencyLevel::One, later())
        .await
        .expect("read");
    assert_eq!(fakes[0].requests(), vec![Request::Read], "this node first");
    assert_eq!(fakes[3].requests(), vec![]);
    coordinator
        .read(&ks, read.clone(), ConsistencyLevel::LocalQuorum, later())
        .await
        .expect("read");
    assert_eq!(fakes[1].requests(), vec![Request::Digest]);
    assert_eq!(fakes[3].requests(), vec![], "LOCAL_QUORUM stays in dc1");
    coordinator
        .read(&ks, read, ConsistencyLevel::All, later())
        .await
        .expect("read");
    assert_eq!(fakes[3].requests(), vec![Request::Digest]);
}

#[tokio::test]
async fn a_replica_that_fails_after_the_answer_is_hinted_in_the_background() {
    let (fakes, coordinator) = four_fakes();
    let hints = Arc::new(RecordedHints::default());
    let coordinator = coordinator.with_hinted_handoff(hints.clone());
    let ks = keyspace_with(&[
        ("class", "org.apache.cassandra.locator.SimpleStrategy"),
        ("replication_factor", "3"),
    ]);
    fakes[2]
        .stalled
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let deadline = Deadline::at(Instant::now() + Duration::from_millis(50));
    coordinator
        .write(
            &ks,
            vec![update(50)],
            ConsistencyLevel::Quorum,
            WriteType::Simple,
            deadline,
        )
        .await
        .expect("two of three");
    assert!(hints.0.lock().expect("lock").is_empty(), "not yet");
    coordinator.wait_for_late_acks().await;
    assert!(deadline.passed(), "awaited until the deadline");
    let recorded = hints.0.lock().expect("lock");
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].1, MissedWrite::TimedOut);
}

#[tokio::test]
async fn a_scan_is_split_where_the_replicas_change_and_joined_where_they_do_not() {
    let (fakes, coordinator) = four_fakes();
    let scan = |start| ReadCommand::Range {
        table: TableId::from_u128(1),
        start,
        end_token: None,
        max_rows: 100,
    };
    let scans = |fakes: &[Arc<Fake>]| -> Vec<Vec<Request>> {
        fakes
            .iter()
            .map(|f| std::mem::take(&mut *f.log.lock().expect("lock")))
            .collect()
    };
    // RF 1: each range its owner's: (400, MAX] and [MIN, 100] node 1's, then nodes 2, 3, 4.
    let rf1 = keyspace_with(&[
        ("class", "org.apache.cassandra.locator.SimpleStrategy"),
        ("replication_factor", "1"),
    ]);
    let ReadResponse::Range(page) = coordinator
        .read(
            &rf1,
            scan(ScanStart::Beginning),
            ConsistencyLevel::One,
            later(),
        )
        .await
        .expect("scan")
    else {
        panic!("a scan page")
    };
    assert_eq!(page.resume, None);
    assert_eq!(
        scans(&fakes),
        vec![
            vec![
                Request::Scan(Some(i64::MIN), Some(100)),
                Request::Scan(Some(401), Some(i64::MAX)),
            ],
            vec![Request::Scan(Some(101), Some(200))],
            vec![Request::Scan(Some(201), Some(300))],
            vec![Request::Scan(Some(301), Some(400))],
        ]
    );
    // RF 4: every range has the same replicas: one scan of the whole ring, from this node.
    let rf4 = keyspace_with(&[
        ("class", "org.apache.cassandra.locator.SimpleStrategy"),
        ("replication_factor", "4"),
    ]);
    coordinator
        .read(
            &rf4,
            scan(ScanStart::Token(150)),
            ConsistencyLevel::One,
            later(),
        )
        .await
        .expect("scan");
    assert_eq!(
        scans(&fakes)[0],
        vec![Request::Scan(Some(150), Some(i64::MAX))]
    );
    // A scan between two tokens: the parts of the ranges it covers, the last cut at its end.
    let ReadResponse::Range(page) = coordinator
        .read(
            &rf1,
            ReadCommand::Range {
                table: TableId::from_u128(1),
                start: ScanStart::Token(250),
                end_token: Some(350),
                max_rows: 100,
            },
            ConsistencyLevel::One,
            later(),
        )
        .await
        .expect("scan")
    else {
        panic!("a scan page")
    };
    assert_eq!(page.resume, None);
    assert_eq!(
        scans(&fakes),
        vec![
            vec![],
            vec![],
            vec![Request::Scan(Some(250), Some(300))],
            vec![Request::Scan(Some(301), Some(350))],
        ]
    );
}

/// Nodes 1 and 2 answer; node 3 cannot be reached (a peer killed before the failure detector
/// convicted it: messaging's `Unreachable`) or does not start the request in time.
struct TwoOfThree {
    fakes: [Arc<Fake>; 2],
    third: Arc<Failing>,
}

impl Endpoints for TwoOfThree {
    fn replica(&self, endpoint: HostId) -> Option<Arc<dyn Replica>> {
        match endpoint.0.as_u128() {
            1 => Some(Arc::new(self.fakes[0].clone())),
            2 => Some(Arc::new(self.fakes[1].clone())),
            3 => Some(self.third.clone()),
            _ => None,
        }
    }
    fn is_alive(&self, _: HostId) -> bool {
        true
    }
}

impl Replica for Arc<Failing> {
    fn apply_mutation(&self, m: Mutation, d: Deadline) -> ReplicaFuture<()> {
        self.as_ref().apply_mutation(m, d)
    }
    fn read(&self, c: ReadCommand, d: Deadline) -> ReplicaFuture<ReadResponse> {
        self.as_ref().read(c, d)
    }
    fn digest(&self, c: ReadCommand, d: Deadline) -> ReplicaFuture<ReadDigest> {
        self.as_ref().digest(c, d)
    }
    fn truncate(&self, t: TableId, d: Deadline) -> ReplicaFuture<()> {
        self.as_ref().truncate(t, d)
    }
}

/// A replica that gives no answer (unreachable, or its deadline passed before it started)
/// counts as a silent one: the level's timeout with what did answer, never a server error,
/// and a level the others meet succeeds.
#[tokio::test]
async fn a_replica_that_gives_no_answer_is_a_timeout_not_an_error() {
    for silence in [
        ReplicaError::Unreachable("messaging: no connection".to_string()),
        ReplicaError::DeadlinePassed,
    ] {
        let mut ring = TokenMetadata::new(endpoint(1, "dc1"), vec![100]).expect("ring");
        for n in [2, 3] {
            ring = ring
                .with_normal_tokens(endpoint(n, "dc1"), vec![i64::from(n) * 100])
                .expect("ring");
        }
        let coordinator = Coordinator::for_cluster(
            Arc::new(arc_swap::ArcSwap::from_pointee(ring)),
            Arc::new(TwoOfThree {
                fakes: [Arc::new(Fake::default()), Arc::new(Fake::default())],
                third: Arc::new(Failing(silence.clone())),
            }),
        );
        let ks = keyspace_with(&[
            ("class", "org.apache.cassandra.locator.SimpleStrategy"),
            ("replication_factor", "3"),
        ]);
        let write = |consistency| {
            coordinator.write(
                &ks,
                vec![update(150)],
                consistency,
                WriteType::Simple,
                later(),
            )
        };
        write(ConsistencyLevel::Quorum).await.expect("two of three");
        let e = write(ConsistencyLevel::All).await.expect_err("one silent");
        assert!(
            matches!(
                e,
                CoordinatorError::WriteTimeout {
                    received: 2,
                    block_for: 3,
                    ..
                }
            ),
            "{silence:?}: {e:?}"
        );
        let e = coordinator
            .read(&ks, read(), ConsistencyLevel::All, later())
            .await
            .expect_err("one silent");
        assert!(
            matches!(e, CoordinatorError::ReadTimeout { block_for: 3, .. }),
            "{silence:?}: {e:?}"
        );
    }
}
