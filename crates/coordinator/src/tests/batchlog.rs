//! The batch log: ids, the stored format, the choice of endpoints, the order of a logged
//! batch's steps, its timeouts, and the replay's selection.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use locator::{Endpoint, Location, NodeState};
use mutation::{PartitionKey, TableId};
use schema::{ClusteringOrder, Replication, TableMetadata, TableOptions};
use tokio::time::Instant;

use super::*;
use crate::{Endpoints, Replica, ReplicaFuture, TokioWallClock};

fn host(n: u8) -> HostId {
    HostId(uuid::Uuid::from_u128(n.into()))
}

fn update(token: i64) -> PartitionUpdate {
    PartitionUpdate {
        table: TableId::from_u128(1),
        key: PartitionKey {
            token,
            key: vec![token as u8],
        },
        header: None,
        static_row: None,
        rows: Vec::new(),
    }
}

#[test]
fn a_batch_id_is_a_time_uuid_that_tells_its_age() {
    let micros = 1_764_000_000_123_456;
    let id = BatchId::new(micros, host(7));
    assert_eq!(id.as_uuid().get_version_num(), 1);
    assert_eq!(id.unix_millis(), micros / 1000);
    assert_ne!(
        id,
        BatchId::new(micros, host(8)),
        "hosts differ in node bits"
    );
    assert_ne!(id, BatchId::new(micros + 1, host(7)));
}

#[test]
fn a_batch_body_round_trips_and_a_malformed_one_is_refused() {
    let id = BatchId::new(1_000_000, host(1));
    let batch = Batch::encode(id, &[&[update(1), update(2)], &[update(3)]]);
    let again = Batch::new(id, batch.body()).expect("well formed");
    let mutations = again.mutations().expect("decodes");
    assert_eq!(mutations.len(), 2);
    assert_eq!(mutations[0], vec![update(1), update(2)]);
    assert_eq!(mutations[1], vec![update(3)]);
    let encoded = again.encoded_mutations();
    assert_eq!(encoded.len(), 2);
    assert_eq!(mutation::decode_mutation(encoded[1]), Ok(vec![update(3)]));
    let body = batch.body();
    for cut in 0..body.len() {
        assert!(Batch::new(id, &body[..cut]).is_err(), "cut at {cut}");
    }
    let mut extra = body.to_vec();
    extra.push(0);
    assert!(Batch::new(id, &extra).is_err());
    let mut version = body.to_vec();
    version[0] = 9;
    assert_eq!(
        Batch::new(id, &version).expect_err("version"),
        BatchError::Version(9)
    );
    // A count far beyond the bytes present is refused before allocating.
    assert!(Batch::new(id, &[1, 0xff, 0xff, 0xff, 0xff]).is_err());
}

fn choose(racks: &[(u8, &str)], dead: &[u8], local_rack: &str, seed: u64) -> BTreeSet<HostId> {
    let endpoints: Vec<(HostId, String)> = racks
        .iter()
        .map(|(n, r)| (host(*n), r.to_string()))
        .collect();
    let mut x = seed | 1;
    let mut pick = |n: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % n as u64) as usize
    };
    let chosen = batchlog_endpoints(
        host(1),
        local_rack,
        &endpoints,
        |e| !dead.iter().any(|d| host(*d) == e),
        &mut pick,
    );
    assert!(chosen.len() <= 2);
    let set: BTreeSet<HostId> = chosen.iter().copied().collect();
    assert_eq!(set.len(), chosen.len(), "distinct endpoints");
    set
}

fn hosts(ns: &[u8]) -> BTreeSet<HostId> {
    ns.iter().map(|n| host(*n)).collect()
}

#[test]
fn batchlog_endpoints_are_two_live_others_on_distinct_racks_where_possible() {
    // Alone in the data centre: this node logs its own batches.
    assert_eq!(choose(&[(1, "r1")], &[], "r1", 1), hosts(&[1]));
    // Never this node otherwise; the live others, at most two.
    assert_eq!(
        choose(&[(1, "r1"), (2, "r1"), (3, "r1")], &[], "r1", 1),
        hosts(&[2, 3])
    );
    assert_eq!(
        choose(&[(1, "r1"), (2, "r1"), (3, "r1")], &[3], "r1", 1),
        hosts(&[2])
    );
    assert_eq!(
        choose(&[(1, "r1"), (2, "r1"), (3, "r1")], &[2, 3], "r1", 1),
        hosts(&[])
    );
    for seed in 1..50 {
        // Enough on other racks: none of this node's rack, one of each other rack.
        let chosen = choose(
            &[(1, "r1"), (2, "r1"), (3, "r2"), (4, "r3"), (5, "r3")],
            &[],
            "r1",
            seed,
        );
        assert!(chosen.contains(&host(3)), "{chosen:?}");
        assert!(chosen.contains(&host(4)) ^ chosen.contains(&host(5)));
        // One other rack with one node: it, and one of this node's rack.
        let chosen = choose(
            &[(1, "r1"), (2, "r1"), (3, "r1"), (4, "r2")],
            &[],
            "r1",
            seed,
        );
        assert!(chosen.contains(&host(4)), "{chosen:?}");
        assert_eq!(chosen.len(), 2);
        // One rack left: two of it at random.
        let chosen = choose(
            &[(1, "r1"), (2, "r2"), (3, "r2"), (4, "r2")],
            &[],
            "r1",
            seed,
        );
        assert_eq!(chosen.len(), 2);
        assert!(!chosen.contains(&host(1)));
    }
}

/// What happened, across every node, in order.
type Events = Arc<Mutex<Vec<String>>>;

/// A node's replica with a batch log in memory, recording every request in `events`.
struct Node {
    n: u8,
    events: Events,
    batches: Mutex<BTreeMap<BatchId, Batch>>,
    /// Batch stores answered after this long (tokio's time); `None`: never.
    store_delay: Mutex<Option<Duration>>,
    /// Mutations never acknowledged.
    silent_writes: std::sync::atomic::AtomicBool,
}

impl Node {
    fn new(n: u8, events: &Events) -> Arc<Node> {
        Arc::new(Node {
            n,
            events: events.clone(),
            batches: Mutex::default(),
            store_delay: Mutex::new(Some(Duration::ZERO)),
            silent_writes: Default::default(),
        })
    }

    fn log(&self, event: &str) {
        let line = format!("{event}@{}", self.n);
        self.events.lock().expect("lock").push(line);
    }

    fn stored(&self) -> usize {
        self.batches.lock().expect("lock").len()
    }
}

struct Shared(Arc<Node>);

impl Replica for Shared {
    fn apply_mutation(&self, mutation: Mutation, _: Deadline) -> ReplicaFuture<()> {
        let tokens: Vec<String> = mutation
            .updates
            .iter()
            .map(|u| u.key.token.to_string())
            .collect();
        self.0.log(&format!("apply {}", tokens.join(",")));
        if self.0.silent_writes.load(Ordering::Relaxed) {
            return Box::pin(std::future::pending());
        }
        Box::pin(std::future::ready(Ok(())))
    }
    fn read(&self, _: mutation::ReadCommand, _: Deadline) -> ReplicaFuture<mutation::ReadResponse> {
        unreachable!("no reads here")
    }
    fn digest(&self, _: mutation::ReadCommand, _: Deadline) -> ReplicaFuture<crate::ReadDigest> {
        unreachable!("no reads here")
    }
    fn truncate(&self, _: TableId, _: Deadline) -> ReplicaFuture<()> {
        unreachable!("no truncates here")
    }
    fn store_batch(&self, batch: Batch, _: Deadline) -> ReplicaFuture<()> {
        let node = self.0.clone();
        node.log("store");
        let delay = *node.store_delay.lock().expect("lock");
        Box::pin(async move {
            let Some(delay) = delay else {
                return std::future::pending().await;
            };
            tokio::time::sleep(delay).await;
            node.batches.lock().expect("lock").insert(batch.id, batch);
            node.log("stored");
            Ok(())
        })
    }
    fn remove_batch(&self, id: BatchId, _: Deadline) -> ReplicaFuture<()> {
        self.0.log("remove");
        self.0.batches.lock().expect("lock").remove(&id);
        Box::pin(std::future::ready(Ok(())))
    }
}

/// The nodes by host id; those in `down` are down.
struct Nodes {
    nodes: BTreeMap<HostId, Arc<Node>>,
    down: Mutex<BTreeSet<HostId>>,
}

impl Endpoints for Nodes {
    fn replica(&self, endpoint: HostId) -> Option<Arc<dyn Replica>> {
        Some(Arc::new(Shared(self.nodes.get(&endpoint)?.clone())))
    }
    fn is_alive(&self, endpoint: HostId) -> bool {
        !self.down.lock().expect("lock").contains(&endpoint)
    }
}

fn endpoint(n: u8) -> Endpoint {
    let address = std::net::IpAddr::from([127, 0, 0, n]);
    Endpoint {
        host_id: host(n),
        broadcast_address: address,
        native_address: address,
        native_port: 9042,
        location: Location {
            datacenter: "dc1".to_string(),
            rack: "rack1".to_string(),
        },
        state: NodeState::Normal,
    }
}

/// `count` nodes of one rack owning tokens 100, 200, ...; node 1 coordinates.
fn cluster(count: u8) -> (Vec<Arc<Node>>, Arc<Nodes>, Coordinator, Events) {
    let events = Events::default();
    let mut ring = TokenMetadata::new(endpoint(1), vec![100]).expect("ring");
    for n in 2..=count {
        ring = ring
            .with_normal_tokens(endpoint(n), vec![i64::from(n) * 100])
            .expect("ring");
    }
    let nodes: Vec<Arc<Node>> = (1..=count).map(|n| Node::new(n, &events)).collect();
    let endpoints = Arc::new(Nodes {
        nodes: nodes.iter().map(|n| (host(n.n), n.clone())).collect(),
        down: Mutex::default(),
    });
    let coordinator = Coordinator::for_cluster(
        Arc::new(arc_swap::ArcSwap::from_pointee(ring)),
        endpoints.clone(),
    );
    (nodes, endpoints, coordinator, events)
}

fn keyspace(rf: u8) -> KeyspaceMetadata {
    let options = BTreeMap::from([
        ("class".to_string(), "SimpleStrategy".to_string()),
        ("replication_factor".to_string(), rf.to_string()),
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

fn later() -> Deadline {
    Deadline::at(Instant::now() + Duration::from_secs(2))
}

fn events(events: &Events) -> Vec<String> {
    events.lock().expect("lock").clone()
}

fn position(events: &[String], event: &str) -> usize {
    events
        .iter()
        .position(|e| e == event)
        .unwrap_or_else(|| panic!("{event} not in {events:?}"))
}

#[tokio::test(start_paused = true)]
async fn the_log_is_written_first_the_mutations_after_its_acknowledgement_the_removal_last() {
    let (nodes, _, coordinator, log) = cluster(3);
    *nodes[1].store_delay.lock().expect("lock") = Some(Duration::from_millis(50));
    let ks = keyspace(1);
    // Token 150 is node 2's, 250 node 3's; the batch log endpoints are nodes 2 and 3.
    coordinator
        .write_logged_batch(
            vec![(&ks, vec![update(150), update(250)])],
            ConsistencyLevel::One,
            later(),
        )
        .await
        .expect("written");
    coordinator.wait_for_late_acks().await;
    let seen = events(&log);
    let last_stored = position(&seen, "stored@2").max(position(&seen, "stored@3"));
    assert!(position(&seen, "apply 150@2") > last_stored, "{seen:?}");
    assert!(position(&seen, "apply 250@3") > last_stored, "{seen:?}");
    assert!(position(&seen, "remove@2") > position(&seen, "apply 150@2"));
    assert!(position(&seen, "remove@3") > position(&seen, "apply 250@3"));
    assert!(!seen
        .iter()
        .any(|e| e.ends_with("@1") && e.starts_with("store")));
    assert_eq!(nodes[1].stored() + nodes[2].stored(), 0, "removed");
    assert_eq!(coordinator.stats().snapshot().batches_logged, 1);
}

#[tokio::test(start_paused = true)]
async fn a_batch_that_misses_its_level_stays_logged() {
    let (nodes, _, coordinator, _) = cluster(3);
    nodes[2]
        .silent_writes
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let e = coordinator
        .write_logged_batch(
            vec![(&keyspace(1), vec![update(150), update(250)])],
            ConsistencyLevel::One,
            later(),
        )
        .await
        .expect_err("node 3 never acknowledges");
    assert!(
        matches!(
            e,
            CoordinatorError::WriteTimeout {
                write_type: WriteType::Batch,
                ..
            }
        ),
        "{e:?}"
    );
    coordinator.wait_for_late_acks().await;
    assert_eq!(nodes[1].stored() + nodes[2].stored(), 2, "kept for replay");
}

#[tokio::test(start_paused = true)]
async fn a_log_write_that_times_out_is_a_batch_log_timeout_and_sends_no_mutation() {
    let (nodes, _, coordinator, log) = cluster(3);
    *nodes[2].store_delay.lock().expect("lock") = None;
    let e = coordinator
        .write_logged_batch(
            vec![(&keyspace(1), vec![update(150), update(250)])],
            ConsistencyLevel::Quorum,
            later(),
        )
        .await
        .expect_err("node 3 never stores");
    assert!(
        matches!(
            e,
            CoordinatorError::WriteTimeout {
                consistency: ConsistencyLevel::Two,
                received: 1,
                block_for: 2,
                write_type: WriteType::BatchLog,
            }
        ),
        "{e:?}"
    );
    assert!(!events(&log).iter().any(|e| e.starts_with("apply")));
}

#[tokio::test(start_paused = true)]
async fn no_live_batch_log_endpoint_is_unavailable_and_one_node_logs_its_own() {
    let (_, endpoints, coordinator, log) = cluster(3);
    endpoints
        .down
        .lock()
        .expect("lock")
        .extend([host(2), host(3)]);
    // RF 1 on node 1's token: the write itself could go on, the batch log cannot.
    let e = coordinator
        .write_logged_batch(
            vec![(&keyspace(1), vec![update(50), update(60)])],
            ConsistencyLevel::One,
            later(),
        )
        .await
        .expect_err("no batch log endpoint");
    assert!(
        matches!(
            e,
            CoordinatorError::Unavailable {
                consistency: ConsistencyLevel::One,
                required: 1,
                alive: 0
            }
        ),
        "{e:?}"
    );
    assert!(events(&log).is_empty());
    // At ANY this node logs the batch itself, as Cassandra's `forBatchlogWrite(isAny)`.
    coordinator
        .write_logged_batch(
            vec![(&keyspace(1), vec![update(50), update(60)])],
            ConsistencyLevel::Any,
            later(),
        )
        .await
        .expect("logged here");
    coordinator.wait_for_late_acks().await;
    assert_eq!(
        events(&log),
        ["store@1", "stored@1", "apply 50,60@1", "remove@1"]
    );

    let (nodes, _, single, log) = cluster(1);
    single
        .write_logged_batch(
            vec![(&keyspace(1), vec![update(50), update(60)])],
            ConsistencyLevel::One,
            later(),
        )
        .await
        .expect("written");
    single.wait_for_late_acks().await;
    assert_eq!(
        events(&log),
        ["store@1", "stored@1", "apply 50,60@1", "remove@1"]
    );
    assert_eq!(nodes[0].stored(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_logged_batch_of_one_partition_skips_the_log() {
    let (_, _, coordinator, log) = cluster(3);
    coordinator
        .write_logged_batch(
            vec![(&keyspace(1), vec![update(150)])],
            ConsistencyLevel::One,
            later(),
        )
        .await
        .expect("written");
    assert_eq!(events(&log), ["apply 150@2"]);
}

/// A batch log in memory.
#[derive(Default)]
struct MemoryStore(Mutex<Vec<Batch>>);

impl BatchlogStore for MemoryStore {
    fn stored_batches(&self, after: Option<BatchId>, limit: usize) -> Result<Vec<Batch>, String> {
        let mut batches = self.0.lock().expect("lock").clone();
        let order = |b: &Batch| (b.id.unix_millis(), b.id);
        batches.sort_by_key(order);
        let after = after.map(|id| (id.unix_millis(), id));
        Ok(batches
            .into_iter()
            .filter(|b| after.is_none_or(|after| order(b) > after))
            .take(limit)
            .collect())
    }
    fn remove_batch(&self, id: BatchId) -> Result<(), String> {
        self.0.lock().expect("lock").retain(|b| b.id != id);
        Ok(())
    }
}

fn schema_with_table(gc_grace_seconds: i32) -> Arc<Schema> {
    let options = TableOptions {
        gc_grace_seconds,
        ..TableOptions::default()
    };
    let table = TableMetadata::new(
        "ks",
        "t",
        TableId::from_u128(1),
        vec![("k".to_string(), types::CqlType::Blob, false)],
        &["k".to_string()],
        &[] as &[(String, ClusteringOrder)],
        options,
    )
    .expect("table");
    let mut ks = keyspace(2);
    ks.tables.insert("t".to_string(), Arc::new(table));
    let mut schema = Schema::default();
    schema.keyspaces.insert("ks".to_string(), Arc::new(ks));
    Arc::new(schema)
}

#[tokio::test(start_paused = true)]
async fn the_replay_sends_old_batches_to_every_replica_and_deletes_them() {
    let now_micros = 1_800_000_000_000_000;
    let (_, endpoints, coordinator, log) = cluster(3);
    let coordinator =
        Arc::new(coordinator.with_clock(Arc::new(TokioWallClock::starting_at(now_micros))));
    endpoints.down.lock().expect("lock").insert(host(3));
    let store = Arc::new(MemoryStore::default());
    let old = Batch::encode(
        BatchId::new(now_micros - 10_000_000, host(2)),
        &[&[update(150)]],
    );
    let young = Batch::encode(
        BatchId::new(now_micros - 1_000_000, host(2)),
        &[&[update(250)]],
    );
    // A table dropped since: skipped, the batch deleted all the same.
    let mut dropped = update(150);
    dropped.table = TableId::from_u128(99);
    let orphan = Batch::encode(
        BatchId::new(now_micros - 10_000_000, host(3)),
        &[&[dropped]],
    );
    store
        .0
        .lock()
        .expect("lock")
        .extend([old.clone(), young.clone(), orphan]);
    let schema = schema_with_table(864_000);
    let mut config = BatchlogReplayConfig::new(Duration::from_secs(2));
    config.throttle_bytes_per_second = 0;
    let hints = Arc::new(Recorded::default());
    let coordinator = Arc::new(
        Arc::into_inner(coordinator)
            .expect("one owner")
            .with_hinted_handoff(hints.clone()),
    );
    let replay = BatchlogReplay::new(
        coordinator.clone(),
        store.clone(),
        Arc::new(move || schema.clone()),
        config,
    );
    let pass = replay.replay_due().await.expect("replayed");
    assert_eq!(pass, ReplayPass { replayed: 2 });
    assert_eq!(*store.0.lock().expect("lock"), vec![young]);
    // RF 2: token 150 is nodes 2 and 3's; node 3 is down and gets a hint.
    let seen = events(&log);
    assert_eq!(seen, ["apply 150@2"]);
    assert_eq!(*hints.0.lock().expect("lock"), vec![host(3)]);
    assert_eq!(coordinator.stats().snapshot().batches_replayed, 2);

    // Past its table's gc_grace_seconds a mutation is not replayed.
    let store = Arc::new(MemoryStore::default());
    store.0.lock().expect("lock").push(old);
    let (_, _, coordinator, log) = cluster(3);
    let coordinator = coordinator.with_clock(Arc::new(TokioWallClock::starting_at(now_micros)));
    let schema = schema_with_table(5);
    let replay = BatchlogReplay::new(
        Arc::new(coordinator),
        store.clone(),
        Arc::new(move || schema.clone()),
        config,
    );
    assert_eq!(replay.replay_due().await.expect("pass").replayed, 1);
    assert!(events(&log).is_empty());
    assert!(store.0.lock().expect("lock").is_empty());
}

/// Hinted handoff that records whom each hint is for.
#[derive(Default)]
struct Recorded(Mutex<Vec<HostId>>);

impl crate::HintedHandoff for Recorded {
    fn write_missed(&self, target: HostId, _: &Mutation, _: MissedWrite) -> bool {
        self.0.lock().expect("lock").push(target);
        true
    }
}

#[tokio::test(start_paused = true)]
async fn the_replay_runs_every_interval_until_stopped() {
    let now_micros = 1_800_000_000_000_000;
    let (_, _, coordinator, log) = cluster(3);
    let coordinator = coordinator.with_clock(Arc::new(TokioWallClock::starting_at(now_micros)));
    let store = Arc::new(MemoryStore::default());
    // Written just now: old enough (twice the 6 s write timeout) only at the second pass.
    store.0.lock().expect("lock").push(Batch::encode(
        BatchId::new(now_micros, host(2)),
        &[&[update(150)]],
    ));
    let schema = schema_with_table(864_000);
    let replay = BatchlogReplay::new(
        Arc::new(coordinator),
        store.clone(),
        Arc::new(move || schema.clone()),
        BatchlogReplayConfig::new(Duration::from_secs(6)),
    );
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(replay.run(stopped));
    tokio::time::sleep(Duration::from_millis(10_500)).await;
    assert_eq!(store.0.lock().expect("lock").len(), 1, "too young at 10 s");
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(store.0.lock().expect("lock").is_empty(), "replayed at 20 s");
    assert_eq!(events(&log), ["apply 150@2", "apply 150@3"]);
    stop.send(true).expect("running");
    task.await.expect("stopped");
}

#[tokio::test(start_paused = true)]
async fn the_replay_reads_the_log_in_pages_and_stops_at_the_first_young_batch() {
    let now_micros = 1_800_000_000_000_000;
    let (_, _, coordinator, log) = cluster(3);
    let coordinator = coordinator.with_clock(Arc::new(TokioWallClock::starting_at(now_micros)));
    let store = Arc::new(MemoryStore::default());
    let old = REPLAY_PAGE_BATCHES as i64 * 2 + 3;
    for n in 0..old {
        store.0.lock().expect("lock").push(Batch::encode(
            BatchId::new(now_micros - 60_000_000 + n, host(2)),
            &[&[update(150)]],
        ));
    }
    let young = Batch::encode(BatchId::new(now_micros, host(2)), &[&[update(150)]]);
    store.0.lock().expect("lock").push(young.clone());
    let schema = schema_with_table(864_000);
    let mut config = BatchlogReplayConfig::new(Duration::from_secs(2));
    config.throttle_bytes_per_second = 0;
    let replay = BatchlogReplay::new(
        Arc::new(coordinator),
        store.clone(),
        Arc::new(move || schema.clone()),
        config,
    );
    let pass = replay.replay_due().await.expect("pass");
    assert_eq!(pass.replayed, old as u64);
    assert_eq!(*store.0.lock().expect("lock"), vec![young]);
    assert_eq!(
        events(&log).len(),
        2 * old as usize,
        "RF 2: two replicas each"
    );
}

/// Hinted handoff that keeps every hint and counts `make_durable` calls, answering `durable`.
struct Syncing {
    durable: std::sync::atomic::AtomicBool,
    syncs: std::sync::atomic::AtomicUsize,
}

impl crate::HintedHandoff for Syncing {
    fn write_missed(&self, _: HostId, _: &Mutation, _: MissedWrite) -> bool {
        true
    }
    fn make_durable(&self) -> bool {
        self.syncs.fetch_add(1, Ordering::SeqCst);
        self.durable.load(Ordering::SeqCst)
    }
}

/// A batch log store that records how many hint syncs had happened when each batch was removed.
struct SyncCheckingStore(MemoryStore, Arc<Syncing>, Mutex<Vec<usize>>);

impl BatchlogStore for SyncCheckingStore {
    fn stored_batches(&self, after: Option<BatchId>, limit: usize) -> Result<Vec<Batch>, String> {
        self.0.stored_batches(after, limit)
    }
    fn remove_batch(&self, id: BatchId) -> Result<(), String> {
        let syncs = self.1.syncs.load(Ordering::SeqCst);
        self.2.lock().expect("lock").push(syncs);
        self.0.remove_batch(id)
    }
}

#[tokio::test(start_paused = true)]
async fn a_replayed_batch_is_deleted_only_after_its_hints_are_durable() {
    let now_micros = 1_800_000_000_000_000;
    for durable in [true, false] {
        let (_, endpoints, coordinator, _log) = cluster(3);
        endpoints.down.lock().expect("lock").insert(host(3));
        let hints = Arc::new(Syncing {
            durable: durable.into(),
            syncs: 0.into(),
        });
        let coordinator = Arc::new(
            coordinator
                .with_clock(Arc::new(TokioWallClock::starting_at(now_micros)))
                .with_hinted_handoff(hints.clone()),
        );
        let store = Arc::new(SyncCheckingStore(
            MemoryStore::default(),
            hints.clone(),
            Mutex::new(Vec::new()),
        ));
        // Token 150's replicas are nodes 2 and 3 (down: hinted); token 50's, 1 and 2 (live).
        let hinted = Batch::encode(
            BatchId::new(now_micros - 10_000_000, host(2)),
            &[&[update(150)]],
        );
        let delivered = Batch::encode(
            BatchId::new(now_micros - 9_000_000, host(2)),
            &[&[update(50)]],
        );
        store
            .0
             .0
            .lock()
            .expect("lock")
            .extend([hinted.clone(), delivered]);
        let schema = schema_with_table(864_000);
        let mut config = BatchlogReplayConfig::new(Duration::from_secs(2));
        config.throttle_bytes_per_second = 0;
        let replay = BatchlogReplay::new(
            coordinator.clone(),
            store.clone(),
            Arc::new(move || schema.clone()),
            config,
        );
        replay.replay_due().await.expect("replayed");
        let removals = store.2.lock().expect("lock").clone();
        let left = store.0 .0.lock().expect("lock").clone();
        if durable {
            // The hinted batch is removed after one sync; the delivered one needs none.
            assert_eq!(removals, [1, 1], "durable");
            assert!(left.is_empty());
            assert_eq!(coordinator.stats().snapshot().batches_replayed, 2);
        } else {
            // Hints not durable: the hinted batch stays for the next pass.
            assert_eq!(removals, [1], "not durable");
            assert_eq!(left, vec![hinted]);
            assert_eq!(coordinator.stats().snapshot().batches_replayed, 1);
        }
    }
}
