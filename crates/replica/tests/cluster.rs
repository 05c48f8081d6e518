//! The coordinator over a ring of several nodes, each a `LocalReplica` over its own
//! `MemoryEngine`: what every consistency level needs and answers (success, `Unavailable`,
//! timeouts with Cassandra's fields), read repair, and range scans paged across token ranges.
//! Node 1 coordinates; "down" nodes are ones the failure detector holds down, "stalled" ones
//! are up but never answer (a stuck disk or a partition the detector has not noticed yet).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use arc_swap::ArcSwap;
use coordinator::{
    ConsistencyLevel, Coordinator, CoordinatorError, Deadline, Endpoints, HintedHandoff,
    MissedWrite, Mutation, ReadDigest, Replica, ReplicaFuture, WriteType,
};
use locator::{Endpoint, HostId, Location, NodeState, TokenMetadata};
use mutation::{
    Cell, ClusteringSlice, ColumnData, LivenessInfo, PartitionData, PartitionKey, PartitionUpdate,
    ReadCommand, ReadResponse, Row, ScanStart, TableId,
};
use replica::LocalReplica;
use schema::{KeyspaceMetadata, Replication};
use storage::{Durability, MemoryEngine, StorageEngine};

use ConsistencyLevel::*;

const TABLE: TableId = TableId::from_u128(7);

/// A node's replica, which a test can stall: then it never answers.
struct Node {
    replica: LocalReplica,
    stalled: AtomicBool,
}

impl Node {
    fn stalled<T: Send + 'static>(&self) -> Option<ReplicaFuture<T>> {
        self.stalled
            .load(Ordering::Relaxed)
            .then(|| -> ReplicaFuture<T> { Box::pin(std::future::pending()) })
    }
}

/// `Arc<Node>` as the coordinator's replica of the node.
struct NodeReplica(Arc<Node>);

impl Replica for NodeReplica {
    fn apply_mutation(&self, mutation: Mutation, deadline: Deadline) -> ReplicaFuture<()> {
        self.0
            .stalled()
            .unwrap_or_else(|| self.0.replica.apply_mutation(mutation, deadline))
    }
    fn read(&self, command: ReadCommand, deadline: Deadline) -> ReplicaFuture<ReadResponse> {
        self.0
            .stalled()
            .unwrap_or_else(|| self.0.replica.read(command, deadline))
    }
    fn digest(&self, command: ReadCommand, deadline: Deadline) -> ReplicaFuture<ReadDigest> {
        self.0
            .stalled()
            .unwrap_or_else(|| self.0.replica.digest(command, deadline))
    }
    fn truncate(&self, table: TableId, deadline: Deadline) -> ReplicaFuture<()> {
        self.0
            .stalled()
            .unwrap_or_else(|| self.0.replica.truncate(table, deadline))
    }
}

/// The cluster: its nodes by host id, and which the failure detector holds down.
struct Cluster {
    nodes: BTreeMap<HostId, Arc<Node>>,
    down: Mutex<HashSet<HostId>>,
}

impl Endpoints for Cluster {
    fn replica(&self, endpoint: HostId) -> Option<Arc<dyn Replica>> {
        let node = self.nodes.get(&endpoint)?;
        Some(Arc::new(NodeReplica(node.clone())))
    }
    fn is_alive(&self, endpoint: HostId) -> bool {
        !self.down.lock().expect("lock").contains(&endpoint)
    }
}

impl Cluster {
    fn node(&self, n: u8) -> &Arc<Node> {
        &self.nodes[&host(n)]
    }
    fn set_down(&self, nodes: &[u8]) {
        *self.down.lock().expect("lock") = nodes.iter().map(|n| host(*n)).collect();
    }
    fn stall(&self, nodes: &[u8]) {
        for (id, node) in &self.nodes {
            let stalled = nodes.iter().any(|n| host(*n) == *id);
            node.stalled.store(stalled, Ordering::Relaxed);
        }
    }
    /// What node `n` stores of partition `k` (read directly from its replica).
    async fn stored(&self, n: u8, k: &PartitionKey) -> PartitionData {
        let response = self
            .node(n)
            .replica
            .read(partition_read(k, 1_000), later())
            .await
            .expect("read");
        let ReadResponse::Partition(page) = response else {
            panic!("a partition page")
        };
        page.data
    }
}

/// Hints kept (as a hint store with room would).
#[derive(Default)]
struct KeptHints(Mutex<Vec<(HostId, MissedWrite)>>);

impl HintedHandoff for KeptHints {
    fn write_missed(&self, target: HostId, _: &Mutation, why: MissedWrite) -> bool {
        self.0.lock().expect("lock").push((target, why));
        true
    }
}

fn host(n: u8) -> HostId {
    HostId(uuid::Uuid::from_u128(n.into()))
}

fn endpoint(n: u8, dc: &str) -> Endpoint {
    let address = std::net::IpAddr::from([127, 0, 0, n]);
    Endpoint {
        host_id: host(n),
        broadcast_address: address,
        native_address: address,
        native_port: 9042,
        location: Location {
            datacenter: dc.to_string(),
            rack: "rack1".to_string(),
        },
        state: NodeState::Normal,
    }
}

/// Node `n` of `dcs.len()` nodes owns tokens `n * 1000 + k * 10_000` for k in 0..4, so the
/// ring has 4 ranges per node, interleaved. Node 1 is this node, the coordinator.
fn cluster(dcs: &[&str]) -> (Arc<Cluster>, Coordinator) {
    let tokens = |n: u8| (0..4).map(|k| i64::from(n) * 1000 + k * 10_000).collect();
    let mut ring = TokenMetadata::new(endpoint(1, dcs[0]), tokens(1)).expect("ring");
    for (i, dc) in dcs.iter().enumerate().skip(1) {
        let n = i as u8 + 1;
        ring = ring
            .with_normal_tokens(endpoint(n, dc), tokens(n))
            .expect("ring");
    }
    let nodes = (1..=dcs.len() as u8)
        .map(|n| {
            let engine = Arc::new(MemoryEngine::new());
            engine.create_table(TABLE).expect("create");
            let node = Node {
                replica: LocalReplica::new(engine, Durability::Periodic),
                stalled: AtomicBool::new(false),
            };
            (host(n), Arc::new(node))
        })
        .collect();
    let cluster = Arc::new(Cluster {
        nodes,
        down: Mutex::new(HashSet::new()),
    });
    let coordinator =
        Coordinator::for_cluster(Arc::new(ArcSwap::from_pointee(ring)), cluster.clone());
    (cluster, coordinator)
}

fn keyspace(options: &[(&str, &str)]) -> KeyspaceMetadata {
    KeyspaceMetadata {
        name: "ks".to_string(),
        durable_writes: true,
        replication: Replication::from_stored(
            options
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
        .expect("valid"),
        tables: BTreeMap::new(),
        types: BTreeMap::new(),
        virtual_keyspace: false,
    }
}

fn simple(rf: &str) -> KeyspaceMetadata {
    keyspace(&[
        ("class", "org.apache.cassandra.locator.SimpleStrategy"),
        ("replication_factor", rf),
    ])
}

fn key(token: i64) -> PartitionKey {
    PartitionKey {
        token,
        key: token.to_be_bytes().to_vec(),
    }
}

fn row(timestamp: i64, value: &[u8]) -> Row {
    Row {
        liveness: Some(LivenessInfo {
            timestamp,
            expiry: None,
        }),
        deletion: None,
        columns: vec![ColumnData::Simple {
            id: 1,
            cell: Cell::live(timestamp, value.to_vec()),
        }],
    }
}

/// Rows `clusterings` of partition `k`, written at `timestamp`.
fn update(k: &PartitionKey, clusterings: &[u8], timestamp: i64) -> PartitionUpdate {
    PartitionUpdate {
        table: TABLE,
        key: k.clone(),
        header: None,
        static_row: None,
        rows: clusterings
            .iter()
            .map(|c| (vec![*c], row(timestamp, &[*c])))
            .collect(),
    }
}

fn partition_read(k: &PartitionKey, max_rows: usize) -> ReadCommand {
    ReadCommand::Partition {
        table: TABLE,
        key: k.clone(),
        slice: ClusteringSlice::all(),
        max_rows,
        resume: None,
    }
}

fn later() -> Deadline {
    Deadline::at(Instant::now() + Duration::from_secs(30))
}

fn soon() -> Deadline {
    Deadline::at(Instant::now() + Duration::from_millis(100))
}

async fn write(
    coordinator: &Coordinator,
    ks: &KeyspaceMetadata,
    updates: Vec<PartitionUpdate>,
    consistency: ConsistencyLevel,
    deadline: Deadline,
) -> Result<(), CoordinatorError> {
    coordinator
        .write(ks, updates, consistency, WriteType::Simple, deadline)
        .await
}

/// Every row of partition `k` read at `consistency`, page by page (`max_rows` a page).
async fn read_all(
    coordinator: &Coordinator,
    ks: &KeyspaceMetadata,
    k: &PartitionKey,
    consistency: ConsistencyLevel,
    max_rows: usize,
) -> Result<Vec<Vec<u8>>, CoordinatorError> {
    let mut rows = Vec::new();
    let mut resume = None;
    loop {
        let command = ReadCommand::Partition {
            table: TABLE,
            key: k.clone(),
            slice: ClusteringSlice::all(),
            max_rows,
            resume,
        };
        let ReadResponse::Partition(page) =
            coordinator.read(ks, command, consistency, later()).await?
        else {
            panic!("a partition page")
        };
        assert!(page.data.rows.len() <= max_rows);
        rows.extend(page.data.rows.into_iter().map(|(c, _)| c));
        match page.resume {
            Some(r) => resume = Some(r),
            None => return Ok(rows),
        }
    }
}

fn unavailable(e: &CoordinatorError) -> (i32, i32) {
    match e {
        CoordinatorError::Unavailable {
            required, alive, ..
        } => (*required, *alive),
        other => panic!("not unavailable: {other:?}"),
    }
}

/// The replicas of token 1500 (RF 3, SimpleStrategy): the owners of 2000, 3000 and 4000.
const TOKEN: i64 = 1500;

#[tokio::test]
async fn each_level_succeeds_with_enough_live_replicas_and_is_unavailable_without() {
    let (cluster, coordinator) = cluster(&["dc1"; 5]);
    let ks = simple("3");
    let k = key(TOKEN);
    let levels = [
        (Any, 1),
        (One, 1),
        (LocalOne, 1),
        (Two, 2),
        (Three, 3),
        (Quorum, 2),
        (LocalQuorum, 2),
        (EachQuorum, 2),
        (All, 3),
    ];
    for (ts, (level, required)) in (1..).zip(levels) {
        cluster.set_down(&[]);
        write(
            &coordinator,
            &ks,
            vec![update(&k, &[ts as u8], ts)],
            level,
            later(),
        )
        .await
        .unwrap_or_else(|e| panic!("{level}: {e:?}"));
        // Every replica got it (the write goes to all), none of the others.
        for n in 1..=5u8 {
            let has = cluster
                .stored(n, &k)
                .await
                .rows
                .iter()
                .any(|(c, _)| *c == [ts as u8]);
            assert_eq!(has, [2, 3, 4].contains(&n), "{level} on node {n}");
        }
        if level != Any {
            let rows = read_all(&coordinator, &ks, &k, level, 100)
                .await
                .expect("read");
            assert_eq!(rows.len(), ts as usize, "{level} reads every row");
        }
        // One replica fewer than the level needs.
        let down: Vec<u8> = [2, 3, 4].into_iter().take(3 - required + 1).collect();
        cluster.set_down(&down);
        if level == Any {
            // ANY needs no live replica; without a hint kept, nothing acknowledges it.
            cluster.set_down(&[2, 3, 4]);
            let e = write(
                &coordinator,
                &ks,
                vec![update(&k, &[99], ts)],
                level,
                later(),
            )
            .await
            .expect_err("no replica and no hint");
            assert!(
                matches!(
                    e,
                    CoordinatorError::WriteTimeout {
                        received: 0,
                        block_for: 1,
                        ..
                    }
                ),
                "{e:?}"
            );
            continue;
        }
        let alive = required as i32 - 1;
        let e = write(
            &coordinator,
            &ks,
            vec![update(&k, &[99], ts)],
            level,
            later(),
        )
        .await
        .expect_err("too few replicas");
        assert_eq!(unavailable(&e), (required as i32, alive), "{level} write");
        let e = read_all(&coordinator, &ks, &k, level, 100)
            .await
            .expect_err("too few replicas");
        assert_eq!(unavailable(&e), (required as i32, alive), "{level} read");
    }
}

#[tokio::test]
async fn any_is_met_by_a_kept_hint_and_down_replicas_get_hints() {
    let (cluster, coordinator) = cluster(&["dc1"; 5]);
    let hints = Arc::new(KeptHints::default());
    let coordinator = coordinator.with_hinted_handoff(hints.clone());
    let ks = simple("3");
    cluster.set_down(&[2, 3, 4]);
    write(
        &coordinator,
        &ks,
        vec![update(&key(TOKEN), &[1], 1)],
        Any,
        later(),
    )
    .await
    .expect("a hint is enough for ANY");
    let targets: BTreeSet<HostId> = hints.0.lock().expect("lock").iter().map(|h| h.0).collect();
    assert_eq!(targets, [2, 3, 4].into_iter().map(host).collect());
    assert!(hints
        .0
        .lock()
        .expect("lock")
        .iter()
        .all(|h| h.1 == MissedWrite::Down));
    // At ONE a hint does not count.
    let e = write(
        &coordinator,
        &ks,
        vec![update(&key(TOKEN), &[1], 1)],
        One,
        later(),
    )
    .await
    .expect_err("no replica");
    assert_eq!(unavailable(&e), (1, 0));
}

#[tokio::test]
async fn stalled_replicas_make_timeouts_with_cassandras_fields() {
    let (cluster, coordinator) = cluster(&["dc1"; 5]);
    let hints = Arc::new(KeptHints::default());
    let coordinator = coordinator.with_hinted_handoff(hints.clone());
    let ks = simple("3");
    let k = key(TOKEN);
    write(&coordinator, &ks, vec![update(&k, &[1], 1)], All, later())
        .await
        .expect("write");
    // Two of three replicas never answer: QUORUM gets one acknowledgement of two.
    cluster.stall(&[3, 4]);
    let e = write(&coordinator, &ks, vec![update(&k, &[2], 2)], Quorum, soon())
        .await
        .expect_err("stalled");
    assert!(
        matches!(
            e,
            CoordinatorError::WriteTimeout {
                consistency: Quorum,
                received: 1,
                block_for: 2,
                write_type: WriteType::Simple,
            }
        ),
        "{e:?}"
    );
    let timed_out: BTreeSet<HostId> = hints
        .0
        .lock()
        .expect("lock")
        .iter()
        .filter(|h| h.1 == MissedWrite::TimedOut)
        .map(|h| h.0)
        .collect();
    assert_eq!(timed_out, [3, 4].into_iter().map(host).collect());
    // Reads: node 2 (the closest replica: same data centre, first in the ring's order) gets
    // the data request. A stalled digest replica: data present, two of three received.
    cluster.stall(&[4]);
    let e = coordinator
        .read(&ks, partition_read(&k, 100), All, soon())
        .await
        .expect_err("stalled");
    assert!(
        matches!(
            e,
            CoordinatorError::ReadTimeout {
                consistency: All,
                received: 2,
                block_for: 3,
                data_present: true,
            }
        ),
        "{e:?}"
    );
    // The stalled one is the data replica: no data.
    cluster.stall(&[2]);
    let e = coordinator
        .read(&ks, partition_read(&k, 100), Quorum, soon())
        .await
        .expect_err("stalled");
    assert!(
        matches!(
            e,
            CoordinatorError::ReadTimeout {
                consistency: Quorum,
                received: 1,
                block_for: 2,
                data_present: false,
            }
        ),
        "{e:?}"
    );
    // With the level met, a stalled replica does not hold the write up; it is hinted once
    // the deadline passes (in the background).
    hints.0.lock().expect("lock").clear();
    cluster.stall(&[4]);
    write(&coordinator, &ks, vec![update(&k, &[3], 3)], Quorum, soon())
        .await
        .expect("two of three");
    coordinator.wait_for_late_acks().await;
    let hinted: Vec<(HostId, MissedWrite)> = hints.0.lock().expect("lock").clone();
    assert_eq!(hinted, vec![(host(4), MissedWrite::TimedOut)]);
}

#[tokio::test]
async fn a_read_at_all_repairs_the_replica_that_missed_a_write() {
    let (cluster, coordinator) = cluster(&["dc1"; 5]);
    let ks = simple("3");
    let k = key(TOKEN);
    write(
        &coordinator,
        &ks,
        vec![update(&k, &[1, 2], 1)],
        All,
        later(),
    )
    .await
    .expect("write");
    // Node 3 is down for a write (no hints kept): it misses row 3 and the newer row 1.
    cluster.set_down(&[3]);
    write(
        &coordinator,
        &ks,
        vec![update(&k, &[1, 3], 2)],
        Quorum,
        later(),
    )
    .await
    .expect("two of three");
    assert_eq!(cluster.stored(3, &k).await.rows.len(), 2);
    cluster.set_down(&[]);
    // Pages of one row: each page reconciles, and repairs, what it covers.
    let rows = read_all(&coordinator, &ks, &k, All, 1).await.expect("read");
    assert_eq!(rows, vec![vec![1], vec![2], vec![3]]);
    let reference = cluster.stored(2, &k).await;
    for n in [2, 3, 4] {
        assert_eq!(cluster.stored(n, &k).await, reference, "node {n} repaired");
    }
    let (_, newest) = &reference.rows[0];
    assert_eq!(newest.liveness.expect("marker").timestamp, 2);
}

/// A scan of the whole ring at `consistency`, `max_rows` a page: each page's rows, as
/// (token, clustering).
async fn scan_all(
    coordinator: &Coordinator,
    ks: &KeyspaceMetadata,
    consistency: ConsistencyLevel,
    max_rows: usize,
) -> Vec<(i64, Vec<u8>)> {
    let mut rows = Vec::new();
    let mut start = ScanStart::Beginning;
    for _ in 0..10_000 {
        let command = ReadCommand::Range {
            table: TABLE,
            start: start.clone(),
            end_token: None,
            max_rows,
        };
        let response = coordinator
            .read(ks, command, consistency, later())
            .await
            .expect("scan");
        let ReadResponse::Range(page) = response else {
            panic!("a scan page")
        };
        let units: usize = page.partitions.iter().map(|p| p.rows.len().max(1)).sum();
        assert!(units <= max_rows, "{units} rows in a page of {max_rows}");
        for p in &page.partitions {
            rows.extend(p.rows.iter().map(|(c, _)| (p.key.token, c.clone())));
        }
        match page.resume {
            Some(r) => start = ScanStart::Resume(r),
            None => return rows,
        }
    }
    panic!("the scan did not end");
}

#[tokio::test]
async fn a_scan_pages_across_ranges_and_nodes_returning_every_row_once_in_token_order() {
    let (cluster, coordinator) = cluster(&["dc1"; 5]);
    let ks = simple("3");
    // Partitions all over the ring (before the first token, on tokens, between, after the
    // last), with 1 to 4 rows each.
    let tokens: Vec<i64> = (-5..60)
        .map(|i| i * 700 + 3)
        .chain([i64::MIN + 1, i64::MAX])
        .collect();
    let mut expected = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        let clusterings: Vec<u8> = (0..(i % 4 + 1) as u8).collect();
        write(
            &coordinator,
            &ks,
            vec![update(&key(*token), &clusterings, 1)],
            All,
            later(),
        )
        .await
        .expect("write");
        expected.extend(clusterings.iter().map(|c| (*token, vec![*c])));
    }
    expected.sort();
    for (level, page) in [(One, 1), (One, 7), (Quorum, 3), (All, 5), (All, 1000)] {
        assert_eq!(
            scan_all(&coordinator, &ks, level, page).await,
            expected,
            "{level} {page}"
        );
    }
    // A replica that missed writes: scans at ALL reconcile and repair it, still every row
    // once.
    cluster.set_down(&[3]);
    let mut late = Vec::new();
    for token in tokens.iter().step_by(3) {
        write(
            &coordinator,
            &ks,
            vec![update(&key(*token), &[9], 2)],
            Quorum,
            later(),
        )
        .await
        .expect("write");
        late.push((*token, vec![9]));
    }
    cluster.set_down(&[]);
    expected.extend(late);
    expected.sort();
    assert_eq!(scan_all(&coordinator, &ks, All, 4).await, expected);
    // Every row of node 3 was repaired.
    cluster.set_down(&[1, 2, 4, 5]);
    let e = scan_all_result(&coordinator, &ks, One).await;
    assert!(
        e.is_err(),
        "ranges node 3 does not replicate are unavailable"
    );
    for token in tokens.iter().step_by(3) {
        let rows = cluster.stored(3, &key(*token)).await.rows;
        let replicas_3 = ks
            .replication
            .strategy()
            .natural_replicas(&coordinator.token_metadata(), *token)
            .contains(&host(3));
        assert_eq!(
            rows.iter().any(|(c, _)| *c == [9]),
            replicas_3,
            "token {token}"
        );
    }
}

async fn scan_all_result(
    coordinator: &Coordinator,
    ks: &KeyspaceMetadata,
    consistency: ConsistencyLevel,
) -> Result<ReadResponse, CoordinatorError> {
    let command = ReadCommand::Range {
        table: TABLE,
        start: ScanStart::Beginning,
        end_token: None,
        max_rows: 100_000,
    };
    coordinator.read(ks, command, consistency, later()).await
}

#[tokio::test]
async fn local_and_each_quorum_count_data_centres() {
    // Nodes 1-3 in dc1 (this node's), 4-5 in dc2; two replicas in each.
    let (cluster, coordinator) = cluster(&["dc1", "dc1", "dc1", "dc2", "dc2"]);
    let ks = keyspace(&[
        (
            "class",
            "org.apache.cassandra.locator.NetworkTopologyStrategy",
        ),
        ("dc1", "2"),
        ("dc2", "2"),
    ]);
    let k = key(TOKEN);
    let replicas = ks
        .replication
        .strategy()
        .natural_replicas(&coordinator.token_metadata(), TOKEN);
    let in_dc2: Vec<u8> = vec![4, 5];
    let in_dc1: Vec<u8> = (1..=3u8).filter(|n| replicas.contains(&host(*n))).collect();
    assert_eq!(in_dc1.len(), 2);
    for level in [LocalQuorum, EachQuorum, Quorum, All] {
        write(&coordinator, &ks, vec![update(&k, &[1], 1)], level, later())
            .await
            .unwrap_or_else(|e| panic!("{level}: {e:?}"));
        read_all(&coordinator, &ks, &k, level, 10)
            .await
            .unwrap_or_else(|e| panic!("{level}: {e:?}"));
    }
    // dc2 down: LOCAL_QUORUM and LOCAL_ONE go on, EACH_QUORUM needs dc2's quorum.
    cluster.set_down(&in_dc2);
    write(
        &coordinator,
        &ks,
        vec![update(&k, &[2], 2)],
        LocalQuorum,
        later(),
    )
    .await
    .expect("dc1 is up");
    read_all(&coordinator, &ks, &k, LocalOne, 10)
        .await
        .expect("dc1 is up");
    let e = write(
        &coordinator,
        &ks,
        vec![update(&k, &[2], 2)],
        EachQuorum,
        later(),
    )
    .await
    .expect_err("dc2 down");
    assert_eq!(unavailable(&e), (2, 0));
    let e = write(
        &coordinator,
        &ks,
        vec![update(&k, &[2], 2)],
        Quorum,
        later(),
    )
    .await
    .expect_err("two of four");
    assert_eq!(unavailable(&e), (3, 2));
    // One of dc1's replicas down: LOCAL_QUORUM is not met, whatever dc2 has.
    cluster.set_down(&in_dc1[1..]);
    let e = write(
        &coordinator,
        &ks,
        vec![update(&k, &[2], 2)],
        LocalQuorum,
        later(),
    )
    .await
    .expect_err("one of two in dc1");
    assert_eq!(unavailable(&e), (2, 1));
    let e = read_all(&coordinator, &ks, &k, LocalQuorum, 10)
        .await
        .expect_err("one of two in dc1");
    assert_eq!(unavailable(&e), (2, 1));
    // Stalled dc2 replicas hold up EACH_QUORUM but not LOCAL_QUORUM.
    cluster.set_down(&[]);
    cluster.stall(&in_dc2);
    write(
        &coordinator,
        &ks,
        vec![update(&k, &[3], 3)],
        LocalQuorum,
        soon(),
    )
    .await
    .expect("dc1 answers");
    let e = write(
        &coordinator,
        &ks,
        vec![update(&k, &[3], 3)],
        EachQuorum,
        soon(),
    )
    .await
    .expect_err("dc2 stalled");
    assert!(
        matches!(
            e,
            CoordinatorError::WriteTimeout {
                received: 2,
                block_for: 4,
                ..
            }
        ),
        "{e:?}"
    );
}

#[tokio::test]
async fn truncate_reaches_every_node_and_needs_them_all() {
    let (cluster, coordinator) = cluster(&["dc1"; 5]);
    let ks = simple("2");
    for token in [TOKEN, 5_500, 23_000] {
        write(
            &coordinator,
            &ks,
            vec![update(&key(token), &[1], 1)],
            All,
            later(),
        )
        .await
        .expect("write");
    }
    cluster.set_down(&[5]);
    let e = coordinator
        .truncate(&ks, TABLE, later())
        .await
        .expect_err("a node is down");
    assert_eq!(unavailable(&e), (5, 4));
    cluster.set_down(&[]);
    coordinator
        .truncate(&ks, TABLE, later())
        .await
        .expect("truncate");
    for n in 1..=5 {
        for token in [TOKEN, 5_500, 23_000] {
            assert!(cluster.stored(n, &key(token)).await.rows.is_empty());
        }
    }
}

#[tokio::test]
async fn a_scan_page_never_shows_a_partition_with_rows_as_rowless() {
    // A static row comes before a partition's rows: a replica's page can stop after it and
    // before the first row. That partition must come whole in the next page, not as a
    // partition without rows (which the query layer would show as its static row alone).
    let (_cluster, coordinator) = cluster(&["dc1"; 5]);
    for rf in ["1", "3"] {
        let ks = simple(rf);
        let mut expected = Vec::new();
        for token in (0..12).map(|i| i * 3_000 + 1) {
            let mut u = update(&key(token), &[1, 2], 1);
            u.static_row = Some(row(1, b"s"));
            write(&coordinator, &ks, vec![u], All, later())
                .await
                .expect("write");
            expected.extend([(token, vec![1]), (token, vec![2])]);
        }
        for (level, max_rows) in [(One, 1), (One, 2), (One, 3), (All, 2), (All, 3)] {
            let mut rows = Vec::new();
            let mut start = ScanStart::Beginning;
            loop {
                let command = ReadCommand::Range {
                    table: TABLE,
                    start: start.clone(),
                    end_token: None,
                    max_rows,
                };
                let ReadResponse::Range(page) = coordinator
                    .read(&ks, command, level, later())
                    .await
                    .expect("scan")
                else {
                    panic!("a scan page")
                };
                for p in &page.partitions {
                    assert!(
                        !p.rows.is_empty(),
                        "{level} {max_rows}: {:?} without rows",
                        p.key
                    );
                    rows.extend(p.rows.iter().map(|(c, _)| (p.key.token, c.clone())));
                }
                match page.resume {
                    Some(r) => start = ScanStart::Resume(r),
                    None => break,
                }
            }
            assert_eq!(rows, expected, "RF {rf}, {level}, {max_rows} rows a page");
        }
        coordinator
            .truncate(&ks, TABLE, later())
            .await
            .expect("truncate");
    }
}

/// A small deterministic generator (xorshift64*), so a failure replays.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

/// Writes straight to some replicas of a three-node cluster (RF 3), each a different subset:
/// live rows and row tombstones at random timestamps. Returns the merge of every write per
/// partition, what a reconciled read must answer.
async fn diverge(cluster: &Cluster, seed: u64) -> BTreeMap<i64, BTreeMap<Vec<u8>, Row>> {
    diverge_with_headers(cluster, seed, false).await.0
}

/// `diverge`, with partition deletions and range tombstones too if `headers`: also returns
/// the merged header of each partition.
async fn diverge_with_headers(
    cluster: &Cluster,
    seed: u64,
    headers: bool,
) -> (
    BTreeMap<i64, BTreeMap<Vec<u8>, Row>>,
    BTreeMap<i64, mutation::PartitionHeader>,
) {
    let mut rng = Rng(seed);
    let mut model: BTreeMap<i64, BTreeMap<Vec<u8>, Row>> = BTreeMap::new();
    let mut model_headers: BTreeMap<i64, mutation::PartitionHeader> = BTreeMap::new();
    for _ in 0..120 {
        let token = rng.below(4) as i64 * 7_000 + 11;
        let clustering = vec![rng.below(12) as u8];
        let timestamp = rng.below(50) as i64 + 1;
        let written = if rng.below(4) == 0 {
            Row {
                deletion: Some(mutation::DeletionTime {
                    marked_for_delete_at: timestamp,
                    local_deletion_time: 1,
                }),
                ..Row::default()
            }
        } else {
            row(timestamp, &clustering)
        };
        let deletion = mutation::DeletionTime {
            marked_for_delete_at: timestamp,
            local_deletion_time: 1,
        };
        let header = (headers && rng.below(6) == 0).then(|| match rng.below(2) {
            0 => mutation::PartitionHeader {
                deletion: Some(deletion),
                range_tombstones: Vec::new(),
            },
            _ => mutation::PartitionHeader {
                deletion: None,
                range_tombstones: vec![mutation::RangeTombstone {
                    start: Some(mutation::ClusteringBound {
                        prefix: clustering.clone(),
                        inclusive: true,
                    }),
                    end: Some(mutation::ClusteringBound {
                        prefix: vec![clustering[0] + 2],
                        inclusive: false,
                    }),
                    deletion,
                }],
            },
        });
        let update = PartitionUpdate {
            rows: vec![(clustering.clone(), written.clone())],
            header: header.clone(),
            ..update(&key(token), &[], timestamp)
        };
        if let Some(header) = header {
            let merged = model_headers
                .remove(&token)
                .unwrap_or_default()
                .merge(header);
            model_headers.insert(token, merged);
        }
        let replicas = rng.below(7) + 1; // a non-empty subset of the three, as bits
        for n in 1..=3u8 {
            if replicas & (1 << (n - 1)) != 0 {
                let mutation = Mutation {
                    updates: Arc::new(vec![update.clone()]),
                    durable_writes: true,
                };
                cluster
                    .node(n)
                    .replica
                    .apply_mutation(mutation, later())
                    .await
                    .expect("apply");
            }
        }
        let rows = model.entry(token).or_default();
        let merged = match rows.remove(&clustering) {
            Some(mine) => mine.merge(written),
            None => written,
        };
        rows.insert(clustering, merged);
    }
    (model, model_headers)
}

#[tokio::test]
async fn reads_at_all_over_diverging_replicas_page_through_the_reconciled_data() {
    let ks = simple("3");
    for seed in 1..=4u64 {
        for (max_rows, reversed) in [(1, false), (2, true), (3, false), (5, true), (100, false)] {
            let (cluster, coordinator) = cluster(&["dc1"; 3]);
            let model = diverge(&cluster, seed).await;
            for (token, rows) in &model {
                let mut got: Vec<(Vec<u8>, Row)> = Vec::new();
                let mut resume = None;
                loop {
                    let command = ReadCommand::Partition {
                        table: TABLE,
                        key: key(*token),
                        slice: ClusteringSlice {
                            reversed,
                            ..ClusteringSlice::all()
                        },
                        max_rows,
                        resume,
                    };
                    let ReadResponse::Partition(page) = coordinator
                        .read(&ks, command, All, later())
                        .await
                        .expect("read")
                    else {
                        panic!("a partition page")
                    };
                    assert!(page.data.rows.len() <= max_rows);
                    got.extend(page.data.rows);
                    match page.resume {
                        Some(r) => resume = Some(r),
                        None => break,
                    }
                }
                let mut expected: Vec<(Vec<u8>, Row)> =
                    rows.iter().map(|(c, r)| (c.clone(), r.clone())).collect();
                if reversed {
                    expected.reverse();
                }
                assert_eq!(
                    got, expected,
                    "seed {seed}, {max_rows} a page, token {token}"
                );
                // Every replica holds the reconciled partition now.
                for n in 1..=3 {
                    let stored: Vec<(Vec<u8>, Row)> = cluster.stored(n, &key(*token)).await.rows;
                    let forward: BTreeMap<Vec<u8>, Row> = stored.into_iter().collect();
                    assert_eq!(&forward, rows, "node {n} repaired, seed {seed}");
                }
            }
        }
    }
}

#[tokio::test]
async fn scans_at_all_over_diverging_replicas_page_through_the_reconciled_data() {
    let ks = simple("3");
    for seed in 1..=4u64 {
        for max_rows in [1, 2, 3, 7, 1_000] {
            let (cluster, coordinator) = cluster(&["dc1"; 3]);
            let model = diverge(&cluster, seed).await;
            let expected: Vec<(i64, Vec<u8>)> = model
                .iter()
                .flat_map(|(token, rows)| rows.keys().map(|c| (*token, c.clone())))
                .collect();
            assert_eq!(
                scan_all(&coordinator, &ks, All, max_rows).await,
                expected,
                "seed {seed}, {max_rows} a page"
            );
        }
    }
}

#[tokio::test]
async fn reads_at_all_reconcile_and_repair_partition_deletions_and_range_tombstones() {
    let ks = simple("3");
    for seed in 11..=16u64 {
        let (cluster, coordinator) = cluster(&["dc1"; 3]);
        let (model, headers) = diverge_with_headers(&cluster, seed, true).await;
        assert!(headers.len() >= 2, "seed {seed} writes tombstones");
        for (token, rows) in &model {
            let ReadResponse::Partition(page) = coordinator
                .read(&ks, partition_read(&key(*token), 1_000), All, later())
                .await
                .expect("read")
            else {
                panic!("a partition page")
            };
            let header = headers.get(token).cloned().unwrap_or_default();
            assert_eq!(page.data.header, header, "seed {seed}, token {token}");
            let got: BTreeMap<Vec<u8>, Row> = page.data.rows.into_iter().collect();
            assert_eq!(&got, rows, "seed {seed}, token {token}");
            for n in 1..=3 {
                let stored = cluster.stored(n, &key(*token)).await;
                assert_eq!(stored.header, header, "node {n} repaired, seed {seed}");
            }
        }
    }
}
