//! The elections this crate drives (`election`), on three services over the in-memory
//! network with tokio's paused clock: a pre-vote is refused while a leader is heard and
//! changes nothing; a leader's loss is repaired within a bounded time; votes split by
//! candidates campaigning together are resolved by fresh timeouts. (A partitioned voter's
//! return is in `tests/cluster.rs`.)

use std::sync::Arc;
use std::time::Duration;

use openraft::{CommittedLeaderId, LogId, ServerState};
use tokio::time::Instant;
use uuid::Uuid;

use crate::transport::{decode, encode, Reply, Request};
use crate::transport::{PreVoteRequest, PreVoteResponse};
use crate::{MemoryNetwork, MetadataConfig, MetadataService, NoApplier, NodeId};

const TIMEOUT: Duration = Duration::from_secs(10);

fn id(node: usize) -> NodeId {
    Uuid::from_u128(node as u128 + 1)
}

fn config(election_timeout_max_ms: u64) -> MetadataConfig {
    MetadataConfig {
        cluster_name: "election".to_string(),
        heartbeat_interval_ms: 50,
        election_timeout_min_ms: 150,
        election_timeout_max_ms,
        snapshot_every_entries: 1000,
        entries_kept_after_snapshot: 1000,
    }
}

/// Three services, node 0 bootstrapped, 1 and 2 joined.
struct Group {
    network: Arc<MemoryNetwork>,
    _dirs: Vec<tempfile::TempDir>,
    nodes: Vec<Option<Arc<MetadataService>>>,
}

impl Group {
    async fn start(config: MetadataConfig) -> Group {
        let network = MemoryNetwork::new();
        let dirs: Vec<_> = (0..3)
            .map(|_| tempfile::tempdir().expect("a temporary directory"))
            .collect();
        let mut nodes = Vec::new();
        for (n, dir) in dirs.iter().enumerate() {
            let service = MetadataService::open(
                id(n),
                format!("127.0.0.{}:7000", n + 1),
                dir.path(),
                network.transport(id(n)),
                Arc::new(NoApplier),
                config.clone(),
            )
            .await
            .expect("opened");
            network.register(&service);
            nodes.push(Some(service));
        }
        let group = Group {
            network,
            _dirs: dirs,
            nodes,
        };
        group.node(0).bootstrap().await.expect("bootstrapped");
        let seeds = [(id(0), "127.0.0.1:7000".to_string())];
        for n in 1..3 {
            group.node(n).join(&seeds, TIMEOUT).await.expect("joined");
        }
        group
    }

    fn node(&self, n: usize) -> &Arc<MetadataService> {
        self.nodes[n].as_ref().expect("running")
    }

    fn running(&self) -> impl Iterator<Item = (usize, &Arc<MetadataService>)> {
        self.nodes
            .iter()
            .enumerate()
            .filter_map(|(n, s)| Some((n, s.as_ref()?)))
    }

    /// The running node that leads, once the others follow it.
    fn leader(&self) -> Option<usize> {
        let (n, leader) = self
            .running()
            .find(|(_, s)| s.metrics().state == ServerState::Leader)?;
        let term = leader.metrics().current_term;
        self.running()
            .all(|(_, s)| s.leader() == Some(id(n)) && s.metrics().current_term == term)
            .then_some(n)
    }

    /// Waits (polling every 5 ms, up to `TIMEOUT`) for a leader the running nodes agree on.
    async fn await_leader(&self) -> usize {
        tokio::time::timeout(TIMEOUT, async {
            loop {
                if let Some(n) = self.leader() {
                    return n;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("a leader")
    }

    async fn stop(&mut self, n: usize) {
        self.network.unregister(id(n));
        let service = self.nodes[n].take().expect("running");
        service.shutdown().await.expect("shut down");
    }

    async fn stop_all(mut self) {
        for n in 0..3 {
            if self.nodes[n].is_some() {
                self.stop(n).await;
            }
        }
    }
}

fn pre_vote(service: &MetadataService, candidate: NodeId, last_log_id: LogId<NodeId>) -> Request {
    let _ = service;
    Request::PreVote(PreVoteRequest {
        candidate,
        next_term: 1_000,
        last_log_id: Some(last_log_id),
    })
}

async fn ask(service: &MetadataService, request: &Request) -> bool {
    match decode::<Reply>(&service.handle(&encode(request)).await).expect("a reply") {
        Reply::PreVote(PreVoteResponse { granted }) => granted,
        other => panic!("unexpected reply {other:?}"),
    }
}

/// While the leader's heartbeats arrive, no voter grants a pre-vote, not even to a candidate
/// whose log is longer than everyone's; and answering one changes no vote or term.
#[tokio::test(start_paused = true)]
async fn a_pre_vote_is_refused_while_a_leader_is_heard_and_changes_nothing() {
    crate::seed_rng(1);
    let group = Group::start(config(300)).await;
    let leader = group.await_leader().await;
    let longest = LogId::new(CommittedLeaderId::new(1_000, id(9)), 1_000);
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(37)).await;
        for (n, service) in group.running() {
            let vote = service.metrics().vote;
            let request = pre_vote(service, id(9), longest);
            assert!(!ask(service, &request).await, "node {n} granted");
            assert_eq!(service.metrics().vote, vote, "node {n}'s vote changed");
        }
    }
    assert_eq!(group.leader(), Some(leader));
    group.stop_all().await;
}

/// The leader stops: the others elect one of themselves within a bound (a timeout of at most
/// `election_timeout_max` after the last heartbeat, a pre-vote and a vote; a split costs a
/// further timeout), for every seed of the timeouts' generator.
#[tokio::test(start_paused = true)]
async fn a_lost_leader_is_replaced_within_a_bounded_time() {
    let mut waits_ms = Vec::new();
    for seed in 0..8 {
        crate::seed_rng(seed);
        let mut group = Group::start(config(300)).await;
        let leader = group.await_leader().await;
        let term = group.node(leader).metrics().current_term;
        group.stop(leader).await;
        let stopped = Instant::now();
        let next = group.await_leader().await;
        let waited = stopped.elapsed();
        assert_ne!(next, leader);
        assert!(group.node(next).metrics().current_term > term);
        assert!(
            waited <= Duration::from_millis(2 * 300),
            "seed {seed}: no leader for {waited:?}"
        );
        waits_ms.push(waited.as_millis());
        group.stop_all().await;
    }
    // Not all alike: the timeouts are random.
    assert!(waits_ms.windows(2).any(|w| w[0] != w[1]), "{waits_ms:?}");
}

/// Two candidates in one term, each with its own vote: a split vote. (Made by hand: the
/// three nodes are cut off from each other, the leader stopped, both followers told to
/// campaign, and the network healed.) Each waits a new timeout, drawn from a 2 ms range so
/// that the two often coincide; one passes the pre-vote (the other, a candidate, has heard
/// no leader) and wins the next term. (In process, one of two coinciding timers runs first
/// and its vote request reaches the other before that one campaigns, so this test does not
/// tell fresh timeouts from fixed ones; `election::tests` checks the draws, and the
/// simulation the timing over a network with delays.)
#[tokio::test(start_paused = true)]
async fn a_split_vote_is_resolved_by_fresh_timeouts() {
    for seed in 0..8 {
        crate::seed_rng(seed);
        let mut group = Group::start(config(152)).await;
        let leader = group.await_leader().await;
        let term = group.node(leader).metrics().current_term;
        for n in 0..3 {
            group.network.isolate(id(n));
        }
        group.stop(leader).await;
        let followers: Vec<usize> = (0..3).filter(|n| *n != leader).collect();
        for n in &followers {
            group
                .node(*n)
                .raft()
                .trigger()
                .elect()
                .await
                .expect("running");
        }
        for n in &followers {
            let node = group.node(*n);
            tokio::time::timeout(TIMEOUT, async {
                while node.metrics().vote.leader_id().voted_for() != Some(id(*n)) {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            })
            .await
            .expect("campaigning");
            assert_eq!(node.metrics().current_term, term + 1, "node {n}");
        }
        for n in 0..3 {
            group.network.heal(id(n));
        }
        let split = Instant::now();
        let next = group.await_leader().await;
        let waited = split.elapsed();
        assert!(
            waited <= Duration::from_millis(20 * 152),
            "seed {seed}: no leader for {waited:?}"
        );
        assert!(group.node(next).metrics().current_term >= term + 2);
        group.stop_all().await;
    }
}
