//! Three metadata services in one process, over the in-memory network, with tokio's paused
//! clock (timers fire as soon as every task waits, so elections and timeouts take no real
//! time). Each node keeps its Raft state in a temporary directory, so a node can be stopped
//! and started again from it.

use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cluster_metadata::{
    MemoryNetwork, MetadataApplier, MetadataCommand, MetadataConfig, MetadataError,
    MetadataService, MetadataState, NodeId, NodeOwnership, OwnershipState, SchemaEntry,
    SchemaSource, INITIAL_SCHEMA_VERSION,
};
use futures_util::future::BoxFuture;
use tokio::time::Instant;
use uuid::Uuid;

const TIMEOUT: Duration = Duration::from_secs(10);

/// Records every schema the state machine hands over, in order.
#[derive(Default)]
struct RecordingApplier {
    applied: Mutex<Vec<(Uuid, SchemaSource)>>,
    /// How long applying a schema change takes (a slow node).
    delay: Mutex<Duration>,
    /// Every entry applied (`entry_applied`): its index and whether it was a command.
    entries: Mutex<Vec<(u64, bool)>>,
}

impl RecordingApplier {
    fn versions(&self) -> Vec<Uuid> {
        self.applied
            .lock()
            .unwrap()
            .iter()
            .map(|(v, _)| *v)
            .collect()
    }
    fn sources(&self) -> Vec<SchemaSource> {
        self.applied
            .lock()
            .unwrap()
            .iter()
            .map(|(_, s)| *s)
            .collect()
    }
}

impl MetadataApplier for RecordingApplier {
    fn apply_schema(
        &self,
        entry: SchemaEntry,
        source: SchemaSource,
    ) -> BoxFuture<'static, Result<(), String>> {
        self.applied.lock().unwrap().push((entry.version, source));
        let delay = *self.delay.lock().unwrap();
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            Ok(())
        })
    }

    fn entry_applied(
        &self,
        index: u64,
        command: Option<&MetadataCommand>,
        _: &cluster_metadata::MetadataResponse,
    ) {
        self.entries
            .lock()
            .unwrap()
            .push((index, command.is_some()));
    }
}

struct Cluster {
    network: Arc<MemoryNetwork>,
    config: MetadataConfig,
    dirs: Vec<tempfile::TempDir>,
    nodes: Vec<Option<Arc<MetadataService>>>,
    appliers: Vec<Arc<RecordingApplier>>,
}

fn id(node: usize) -> NodeId {
    Uuid::from_u128(node as u128 + 1)
}

fn address(node: usize) -> String {
    format!("127.0.0.{}:7000", node + 1)
}

impl Cluster {
    /// Node 0 bootstraps the group; nodes 1 and 2 join it at the same time.
    async fn start(config: MetadataConfig) -> Cluster {
        let mut cluster = Cluster {
            network: MemoryNetwork::new(),
            config,
            dirs: (0..3)
                .map(|_| tempfile::tempdir().expect("a temporary directory"))
                .collect(),
            nodes: vec![None, None, None],
            appliers: Vec::new(),
        };
        for n in 0..3 {
            cluster.appliers.push(Arc::default());
            cluster.open(n).await;
        }
        cluster.node(0).bootstrap().await.expect("bootstrapped");
        let seeds = [(id(0), address(0))];
        let (one, two) = tokio::join!(
            cluster.node(1).join(&seeds, TIMEOUT),
            cluster.node(2).join(&seeds, TIMEOUT)
        );
        one.expect("node 1 joined");
        two.expect("node 2 joined");
        cluster
    }

    async fn open(&mut self, n: usize) {
        let service = MetadataService::open(
            id(n),
            address(n),
            self.dirs[n].path(),
            self.network.transport(id(n)),
            self.appliers[n].clone(),
            self.config.clone(),
        )
        .await
        .expect("opened");
        self.network.register(&service);
        self.nodes[n] = Some(service);
    }

    async fn stop(&mut self, n: usize) {
        self.network.unregister(id(n));
        let service = self.nodes[n].take().expect("running");
        service.shutdown().await.expect("shut down");
    }

    /// Starts node `n` again from its directory, with a fresh applier record.
    async fn restart(&mut self, n: usize) {
        self.appliers[n] = Arc::default();
        self.open(n).await;
    }

    fn node(&self, n: usize) -> &Arc<MetadataService> {
        self.nodes[n].as_ref().expect("running")
    }

    fn state(&self, n: usize) -> Arc<MetadataState> {
        self.node(n).state().borrow().clone()
    }

    /// Waits until every running node has applied what node `n` has.
    async fn converge_on(&self, n: usize) -> Arc<MetadataState> {
        let target = self.node(n).metrics().last_applied.map(|l| l.index);
        for node in self.nodes.iter().flatten() {
            tokio::time::timeout(TIMEOUT, async {
                while node.metrics().last_applied.map(|l| l.index) < target {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
            .await
            .expect("caught up");
        }
        self.state(n)
    }

    /// Proposes a schema change from node `n`, on the version node `n` has applied.
    async fn change_schema(&self, n: usize) -> Result<Uuid, MetadataError> {
        let base = self.state(n).schema_version();
        let version = Uuid::new_v4();
        self.node(n)
            .propose(schema(base, version), TIMEOUT)
            .await
            .map(|_| version)
    }
}

fn schema(base_version: Uuid, version: Uuid) -> MetadataCommand {
    MetadataCommand::Schema(SchemaEntry {
        base_version,
        version,
        change: format!("{{\"schema\": \"{version}\"}}"),
    })
}

fn ownership(host: u128, tokens: Vec<i64>, state: OwnershipState) -> MetadataCommand {
    MetadataCommand::Ownership(NodeOwnership {
        host_id: Uuid::from_u128(host),
        broadcast_address: IpAddr::from([127, 0, 0, host as u8]),
        native_address: IpAddr::from([127, 0, 0, host as u8]),
        native_port: 9042,
        datacenter: "datacenter1".to_string(),
        rack: "rack1".to_string(),
        tokens,
        state,
    })
}

fn test_config() -> MetadataConfig {
    MetadataConfig {
        cluster_name: "test".to_string(),
        heartbeat_interval_ms: 50,
        election_timeout_min_ms: 150,
        election_timeout_max_ms: 300,
        snapshot_every_entries: 1000,
        entries_kept_after_snapshot: 1000,
    }
}

#[tokio::test(start_paused = true)]
async fn two_nodes_join_at_once_and_every_node_applies_the_same_changes_in_order() {
    let cluster = Cluster::start(test_config()).await;
    for n in 0..3 {
        assert_eq!(cluster.node(n).voters(), (0..3).map(id).collect());
    }
    // Changes proposed from every node in turn, the leader and the followers alike, each on
    // the schema the one before left (proposing waits for it to apply on the proposer).
    let mut versions = Vec::new();
    for round in 0..6 {
        let proposer = round % 3;
        cluster
            .converge_on(if round == 0 { 0 } else { (round - 1) % 3 })
            .await;
        versions.push(cluster.change_schema(proposer).await.expect("applied"));
        assert_eq!(cluster.state(proposer).schema_version(), versions[round]);
    }
    let last = cluster.converge_on(0).await;
    assert_eq!(last.schema_version(), *versions.last().unwrap());
    for n in 0..3 {
        assert_eq!(cluster.appliers[n].versions(), versions, "node {n}");
        assert_eq!(*cluster.state(n), *last, "node {n}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_stale_schema_change_is_refused_alike_everywhere() {
    let cluster = Cluster::start(test_config()).await;
    // Three changes decided on the same version, proposed at once from the three nodes:
    // exactly one applies, the log refuses the others with the same reason.
    let base = cluster.state(0).schema_version();
    assert_eq!(base, INITIAL_SCHEMA_VERSION);
    let versions: Vec<Uuid> = (0..3).map(|_| Uuid::new_v4()).collect();
    let (a, b, c) = tokio::join!(
        cluster.node(0).propose(schema(base, versions[0]), TIMEOUT),
        cluster.node(1).propose(schema(base, versions[1]), TIMEOUT),
        cluster.node(2).propose(schema(base, versions[2]), TIMEOUT),
    );
    let results = [a, b, c];
    let winners: Vec<usize> = (0..3).filter(|n| results[*n].is_ok()).collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    let winner = versions[winners[0]];
    for result in results.iter().filter(|r| r.is_err()) {
        let Err(MetadataError::Refused(reason)) = result else {
            panic!("not refused: {result:?}");
        };
        assert_eq!(
            *reason,
            format!(
                "the schema changed (to version {winner}) since this change was decided on version {base}"
            )
        );
    }
    cluster.converge_on(winners[0]).await;
    for n in 0..3 {
        assert_eq!(cluster.state(n).schema_version(), winner, "node {n}");
        assert_eq!(cluster.appliers[n].versions(), vec![winner], "node {n}");
    }
}

#[tokio::test(start_paused = true)]
async fn concurrent_token_claims_are_serialised() {
    let cluster = Cluster::start(test_config()).await;
    cluster
        .node(0)
        .propose(
            ownership(1, vec![-100, 100], OwnershipState::Normal),
            TIMEOUT,
        )
        .await
        .expect("node 1 owns its tokens");
    // Two joining nodes claim overlapping tokens at once, through different nodes.
    let (two, three) = tokio::join!(
        cluster
            .node(1)
            .propose(ownership(2, vec![0, 50], OwnershipState::Joining), TIMEOUT),
        cluster
            .node(2)
            .propose(ownership(3, vec![50, 75], OwnershipState::Joining), TIMEOUT),
    );
    let (winner, loser, refusal) = match (two, three) {
        (Ok(_), Err(MetadataError::Refused(r))) => (2u128, 3u128, r),
        (Err(MetadataError::Refused(r)), Ok(_)) => (3, 2, r),
        other => panic!("not one claim applied and one refused: {other:?}"),
    };
    assert_eq!(
        refusal,
        format!(
            "token 50 is already owned by host {} (Joining)",
            Uuid::from_u128(winner)
        )
    );
    let state = cluster.converge_on(0).await;
    for n in 0..3 {
        let nodes = &cluster.state(n).nodes;
        assert_eq!(*nodes, state.nodes, "node {n}");
        assert!(nodes.contains_key(&Uuid::from_u128(winner)));
        assert!(!nodes.contains_key(&Uuid::from_u128(loser)));
    }
    // The ring the token map describes, from node 1's point of view: joining nodes pending.
    let ring = cluster_metadata::token_metadata(&state.nodes, Uuid::from_u128(1)).expect("ring");
    assert_eq!(ring.ring().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_restarted_node_resumes_from_its_directory_and_catches_up_from_the_log() {
    let mut cluster = Cluster::start(test_config()).await;
    let leader = cluster.node(0).leader().expect("a leader");
    let down = (0..3).find(|n| id(*n) != leader).expect("a follower");
    let up = (0..3).find(|n| *n != down).expect("another node");
    for _ in 0..3 {
        cluster.change_schema(up).await.expect("applied");
    }
    let before = cluster.converge_on(up).await;
    cluster.stop(down).await;
    for _ in 0..3 {
        cluster
            .change_schema(up)
            .await
            .expect("applied with two of three voters");
    }
    cluster.restart(down).await;
    // Its directory gives it back what it had applied, before it hears from anyone.
    assert_eq!(*cluster.state(down), *before);
    let after = cluster.converge_on(up).await;
    assert_eq!(*cluster.state(down), *after);
    assert_eq!(cluster.appliers[down].versions().len(), 3);
    assert!(cluster.appliers[down]
        .sources()
        .iter()
        .all(|s| *s == SchemaSource::Entry));
    assert_eq!(cluster.node(down).metrics().snapshot, None);
}

#[tokio::test(start_paused = true)]
async fn a_node_behind_a_compacted_log_catches_up_from_a_snapshot() {
    let config = MetadataConfig {
        snapshot_every_entries: 5,
        entries_kept_after_snapshot: 0,
        ..test_config()
    };
    let mut cluster = Cluster::start(config).await;
    let leader = cluster.node(0).leader().expect("a leader");
    let down = (0..3).find(|n| id(*n) != leader).expect("a follower");
    let up = (0..3).find(|n| *n != down).expect("another node");
    cluster.change_schema(up).await.expect("applied");
    cluster.converge_on(up).await;
    cluster.stop(down).await;
    for _ in 0..12 {
        cluster.change_schema(up).await.expect("applied");
    }
    let leader_index = (0..3).find(|n| id(*n) == leader).expect("the leader");
    let purged = tokio::time::timeout(TIMEOUT, async {
        loop {
            if let Some(purged) = cluster.node(leader_index).metrics().purged {
                break purged;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the leader compacted its log");
    cluster.restart(down).await;
    let behind = cluster.node(down).metrics().last_log_index;
    assert!(behind < Some(purged.index), "{behind:?} {purged}");
    let after = cluster.converge_on(up).await;
    assert_eq!(*cluster.state(down), *after);
    assert!(cluster.node(down).metrics().snapshot.is_some());
    assert!(
        cluster.appliers[down]
            .sources()
            .contains(&SchemaSource::Snapshot),
        "{:?}",
        cluster.appliers[down].sources()
    );
}

/// Stops two of the three nodes, keeping the leader or a follower, and proposes on the one
/// left.
async fn propose_without_a_quorum(keep_the_leader: bool) {
    let mut cluster = Cluster::start(test_config()).await;
    cluster.change_schema(0).await.expect("applied");
    cluster.converge_on(0).await;
    let leader = cluster.node(0).leader().expect("a leader");
    let survivor = (0..3)
        .find(|n| (id(*n) == leader) == keep_the_leader)
        .expect("a survivor");
    for n in (0..3).filter(|n| *n != survivor) {
        cluster.stop(n).await;
    }
    let timeout = Duration::from_secs(3);
    let start = Instant::now();
    let base = cluster.state(survivor).schema_version();
    let refused = cluster
        .node(survivor)
        .propose(schema(base, Uuid::new_v4()), timeout)
        .await
        .expect_err("no quorum");
    let elapsed = start.elapsed();
    assert!(
        elapsed <= timeout + Duration::from_millis(100),
        "{elapsed:?}"
    );
    assert!(
        matches!(
            refused,
            MetadataError::NoQuorum {
                reachable: 1,
                voters: 3,
                timeout_ms: 3000
            }
        ),
        "{refused}"
    );
    assert!(
        refused
            .to_string()
            .starts_with("no quorum: 1 of 3 voters reachable"),
        "{refused}"
    );
    // With one node back, a quorum commits again (a token claim: the timed-out schema
    // change may yet commit, which would make a new one decided now stale).
    let back = (0..3).find(|n| *n != survivor).expect("a stopped node");
    cluster.restart(back).await;
    cluster
        .node(survivor)
        .propose(ownership(1, vec![1], OwnershipState::Normal), TIMEOUT)
        .await
        .expect("a quorum again");
}

#[tokio::test(start_paused = true)]
async fn without_a_quorum_a_proposal_on_the_leader_fails_within_its_timeout() {
    propose_without_a_quorum(true).await;
}

#[tokio::test(start_paused = true)]
async fn without_a_quorum_a_proposal_on_a_follower_fails_within_its_timeout() {
    propose_without_a_quorum(false).await;
}

#[tokio::test(start_paused = true)]
async fn the_whole_cluster_restarts_from_its_directories() {
    let mut cluster = Cluster::start(test_config()).await;
    cluster
        .node(1)
        .propose(ownership(1, vec![10], OwnershipState::Normal), TIMEOUT)
        .await
        .expect("applied");
    cluster.change_schema(2).await.expect("applied");
    let before = cluster.converge_on(2).await;
    for n in 0..3 {
        cluster.stop(n).await;
    }
    for n in 0..3 {
        cluster.restart(n).await;
        assert_eq!(*cluster.state(n), *before, "node {n}");
    }
    // A restarted node is still a member: it neither bootstraps nor joins again.
    cluster.node(0).bootstrap().await.expect("a no-op");
    cluster
        .node(1)
        .join(&[(id(0), address(0))], TIMEOUT)
        .await
        .expect("a no-op");
    cluster
        .change_schema(0)
        .await
        .expect("a quorum after the restart");
    let after = cluster.converge_on(0).await;
    for n in 0..3 {
        assert_eq!(cluster.node(n).voters(), (0..3).map(id).collect());
        assert_eq!(*cluster.state(n), *after, "node {n}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_node_in_no_group_refuses_to_propose() {
    let network = MemoryNetwork::new();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let alone = MetadataService::open(
        id(0),
        address(0),
        dir.path(),
        network.transport(id(0)),
        Arc::new(cluster_metadata::NoApplier),
        test_config(),
    )
    .await
    .expect("opened");
    let refused = alone
        .propose(ownership(1, vec![1], OwnershipState::Normal), TIMEOUT)
        .await
        .expect_err("not a member");
    assert!(matches!(refused, MetadataError::NotMember), "{refused}");
}

#[tokio::test(start_paused = true)]
async fn a_read_barrier_waits_until_a_lagging_node_has_what_was_committed() {
    let cluster = Cluster::start(test_config()).await;
    let leader = cluster.node(0).leader().expect("a leader");
    let lagging = (0..3).find(|n| id(*n) != leader).expect("a follower");
    let proposer = (0..3).find(|n| *n != lagging).expect("another node");
    cluster.network.isolate(id(lagging));
    let version = cluster
        .change_schema(proposer)
        .await
        .expect("committed without the isolated node");
    cluster.network.heal(id(lagging));
    assert_ne!(cluster.state(lagging).schema_version(), version);
    cluster
        .node(lagging)
        .read_barrier(TIMEOUT)
        .await
        .expect("caught up");
    assert_eq!(cluster.state(lagging).schema_version(), version);
    // Cut off, the barrier cannot reach a leader and says so within its timeout.
    cluster.network.isolate(id(lagging));
    let start = Instant::now();
    let error = cluster
        .node(lagging)
        .read_barrier(Duration::from_secs(2))
        .await
        .expect_err("no leader reachable");
    assert!(start.elapsed() <= Duration::from_millis(2100));
    assert!(matches!(error, MetadataError::NoQuorum { .. }), "{error}");
}

#[tokio::test(start_paused = true)]
async fn proposals_commit_through_lost_messages_and_retries_apply_once() {
    let cluster = Cluster::start(test_config()).await;
    cluster.network.lose_every(Some(4));
    // Claims from every node in turn; a lost reply makes the proposer ask again, and the
    // same claim applies once.
    for host in 1..=9u128 {
        let proposer = (host % 3) as usize;
        let token = host as i64 * 10;
        cluster
            .node(proposer)
            .propose(
                ownership(host, vec![token], OwnershipState::Normal),
                TIMEOUT,
            )
            .await
            .unwrap_or_else(|e| panic!("claim of host {host}: {e}"));
    }
    cluster.network.lose_every(None);
    let state = cluster.converge_on(0).await;
    assert_eq!(state.nodes.len(), 9);
    for n in 0..3 {
        assert_eq!(*cluster.state(n), *state, "node {n}");
    }
}

#[tokio::test(start_paused = true)]
async fn the_majority_side_of_a_partition_goes_on_and_the_minority_catches_up() {
    let cluster = Cluster::start(test_config()).await;
    let leader = cluster.node(0).leader().expect("a leader");
    let old_leader = (0..3).find(|n| id(*n) == leader).expect("the leader");
    let majority: Vec<usize> = (0..3).filter(|n| *n != old_leader).collect();
    for n in &majority {
        cluster.network.cut(id(old_leader), id(*n));
    }
    let version = cluster
        .change_schema(majority[0])
        .await
        .expect("the majority elects a leader and commits");
    let refused = cluster
        .node(old_leader)
        .propose(
            ownership(1, vec![1], OwnershipState::Normal),
            Duration::from_secs(2),
        )
        .await
        .expect_err("the minority cannot commit");
    assert!(
        matches!(
            refused,
            MetadataError::NoQuorum {
                reachable: 1,
                voters: 3,
                ..
            }
        ),
        "{refused}"
    );
    for n in &majority {
        cluster.network.mend(id(old_leader), id(*n));
    }
    cluster
        .node(old_leader)
        .read_barrier(TIMEOUT)
        .await
        .expect("caught up");
    assert_eq!(cluster.state(old_leader).schema_version(), version);
    let state = cluster.converge_on(majority[0]).await;
    for n in 0..3 {
        assert_eq!(*cluster.state(n), *state, "node {n}");
    }
}

/// A proposal committed by the others while the proposing node is too slow to apply it in
/// time fails as a timeout (a quorum reachable), not as a stopped log: its log is
/// well, only behind. (It answered `Stopped("not applied here: timeout ...")` before; the
/// simulation found it.)
#[tokio::test(start_paused = true)]
async fn a_proposal_committed_but_not_applied_here_in_time_is_a_timeout() {
    let cluster = Cluster::start(test_config()).await;
    let leader = cluster.node(0).leader().expect("a leader");
    let slow = (0..3).find(|n| id(*n) != leader).expect("a follower");
    *cluster.appliers[slow].delay.lock().unwrap() = Duration::from_secs(5);
    let base = cluster.state(slow).schema_version();
    let timeout = Duration::from_secs(1);
    let failed = cluster
        .node(slow)
        .propose(schema(base, Uuid::new_v4()), timeout)
        .await
        .expect_err("not applied in time");
    assert!(
        matches!(
            failed,
            MetadataError::Timeout {
                voters: 3,
                timeout_ms: 1000,
                ..
            }
        ),
        "{failed}"
    );
}

/// Every node observes every entry it applies, once, in log order, the same as the others.
#[tokio::test(start_paused = true)]
async fn every_node_observes_the_same_applied_entries_in_order() {
    let cluster = Cluster::start(test_config()).await;
    for n in 0..3 {
        cluster.change_schema(n).await.expect("applied");
    }
    cluster.converge_on(0).await;
    let entries = |n: usize| cluster.appliers[n].entries.lock().unwrap().clone();
    let first = entries(0);
    assert_eq!(
        first.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
        (0..first.len() as u64).collect::<Vec<_>>()
    );
    assert_eq!(first.iter().filter(|(_, command)| *command).count(), 3);
    for n in 1..3 {
        assert_eq!(entries(n), first, "node {n}");
    }
}

/// A follower cut off for several election timeouts does not campaign: its pre-votes find
/// no majority, so its term stays. When it comes back, the leader and its term are the same
/// (before pre-vote, the returning node's raised term deposed the leader: openraft 0.9 has no
/// Pre-Vote, databendlabs/openraft#1770; the simulation's seeds 5534 and 11532), and a
/// proposal made from it commits at once.
#[tokio::test(start_paused = true)]
async fn a_partitioned_voter_rejoining_changes_neither_the_leader_nor_its_term() {
    let cluster = Cluster::start(test_config()).await;
    let leader = cluster.node(0).leader().expect("a leader");
    let old_leader = (0..3).find(|n| id(*n) == leader).expect("the leader");
    let cut_off = (0..3).find(|n| *n != old_leader).expect("a follower");
    let term_before = cluster.node(old_leader).metrics().current_term;
    cluster.network.isolate(id(cut_off));
    // The others go on (the cut-off node's log falls behind), while it times out again and
    // again.
    let version = cluster
        .change_schema(old_leader)
        .await
        .expect("the majority commits");
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    assert_eq!(
        cluster.node(cut_off).metrics().current_term,
        term_before,
        "the cut-off node raised its term"
    );
    cluster.network.heal(id(cut_off));
    let healed = tokio::time::Instant::now();
    let index = cluster
        .node(cut_off)
        .propose(
            ownership(9, vec![9], OwnershipState::Normal),
            Duration::from_secs(5),
        )
        .await
        .expect("committed by the leader");
    assert!(
        healed.elapsed() <= Duration::from_millis(test_config().election_timeout_min_ms),
        "the proposal waited {:?}",
        healed.elapsed()
    );
    let state = cluster.converge_on(cut_off).await;
    assert_eq!(state.schema_version(), version);
    assert!(state.nodes.contains_key(&Uuid::from_u128(9)), "{state:?}");
    for n in 0..3 {
        assert_eq!(*cluster.state(n), *state, "node {n}");
        assert!(cluster.node(n).metrics().last_applied.map(|l| l.index) >= Some(index));
        assert_eq!(cluster.node(n).leader(), Some(leader), "node {n}'s leader");
        assert_eq!(
            cluster.node(n).metrics().current_term,
            term_before,
            "node {n}'s term"
        );
    }
}
