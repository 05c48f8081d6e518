//! Gossip membership in the simulation: every node runs the real `gossip::Membership`
//! (chitchat, with its phi-accrual failure detector) over [`SimGossipTransport`], an
//! in-process datagram transport routed through the run's link state, and follows it as the
//! node does: `gossip::follow_liveness` drives its messaging (a conviction is `mark_down`, an
//! UP `mark_up`, a newer generation reconnects, keeping the queues), and gossip's UP events start the replay of
//! its hints (`HintStore::target_up`, as the node's `start_hints` wires it); its coordinator
//! and hint store ask its view who is up (`GossipShared::is_live`).
//!
//! The transport passes chitchat's messages (`ChitchatEnvelope` values; chitchat's wire
//! codec is crate-private, so no bytes) as UDP would carry them, by the same link state the
//! harness gives turmoil's TCP: each datagram takes a latency drawn up to its link's current
//! bound (the run's, or a slow link's), is lost across a partition (UDP does not wait for the
//! partition to heal, as TCP's retransmissions do) or to a crashed node (its socket is gone),
//! and while the chaos runs is lost or delayed by the rates messaging's `Chaos` uses. Its
//! draws come from a generator seeded by the run, the node and its start; time is sim time,
//! so turmoil drives chitchat's rounds and its failure detector.
//!
//! What it records ([`GossipHistory`]): every node's UP and DOWN events, by sim time, and
//! the views the nodes hold; `check` turns them into the run's gossip invariants:
//! - a crashed node is convicted by every other node within [`CONVICTION_BOUND_MS`], or
//!   [`CONVICTION_BOUND_FEW_SAMPLES_MS`] by one that had held it up for less than
//!   [`FEW_SAMPLES_MS`] (checked for crashes at least that long; the times are reported,
//!   [`GossipHistory::convictions`]);
//! - the views converge within [`CONVERGENCE_BOUND_MS`] of the heal: every node's view has
//!   every node up under its current generation, with the same host ids, tokens and state as
//!   every other view, and the ring built from each view (`ClusterView::token_metadata`)
//!   owns the tokens the nodes claimed in the metadata log (which `metadata::check` holds to
//!   the log's own final state).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use chitchat::transport::{RecvOutcome, SendOutcome, Socket, Transport};
use chitchat::ChitchatEnvelope;
use gossip::{ClusterView, EventKind, Membership, MembershipConfig, MembershipEvent, PeerChange};
use hints::HintStore;
use locator::{Endpoint, HostId};
use messaging::{MessagingService, RandomSource, SplitMix64};
use tokio::sync::{broadcast, mpsc, watch};

use crate::faults::{Fault, ScheduledFault};

/// How often each node gossips. Cassandra's is a second; the run's fault phase lasts under
/// two, so rounds twenty times as frequent make its detector convict a crashed node within
/// the phase (its phi threshold is still Cassandra's 8: about 18 mean heartbeat intervals of
/// silence; 200 seeds: 0.67 s median, 1.2 s at most).
pub const GOSSIP_INTERVAL: Duration = Duration::from_millis(50);
/// The longest a crashed node may stay unconvicted by a live node, from its crash (sim ms):
/// the detector's 18.4 mean intervals of 50 ms, with room for the intervals slow links and
/// lost datagrams stretch.
pub const CONVICTION_BOUND_MS: u64 = 1_500;
/// The bound for an observer that had held the crashed node up for less than
/// `FEW_SAMPLES_MS` when it crashed: its detector then has few intervals, and its mean leans on
/// chitchat's prior (twice the gossip interval, weighted as five intervals), so the 18.4 mean
/// intervals of silence approach 18.4 × 100 ms. Seed 542 (before the metadata log's
/// pre-vote changed its history): a crash 105 ms after the observer first saw the node,
/// convicted 1,595 ms later.
pub const CONVICTION_BOUND_FEW_SAMPLES_MS: u64 = 2_000;
/// How long an observer must have held a node up for its detector to have its own mean.
pub const FEW_SAMPLES_MS: u64 = 500;
/// The longest after the heal before every node's view has converged (sim ms): a restarted
/// node's first rounds, and the others hearing its new generation (200 ms at most seen).
pub const CONVERGENCE_BOUND_MS: u64 = 1_000;
/// Datagrams waiting in a socket before more are dropped (as a full UDP receive buffer drops
/// them): several rounds of every peer's messages.
const SOCKET_QUEUE: usize = 256;
/// The longest extra delay the chaos gives a datagram (as `Chaos`'s for messages).
const CHAOS_MAX_DELAY_MS: u64 = 50;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Sim time since the run started, milliseconds (on a simulated host).
fn sim_now_ms() -> u64 {
    turmoil::sim_elapsed().map_or(0, |d| d.as_millis() as u64)
}

/// The links gossip's datagrams cross, as the harness sets them (kept outside the hosts).
pub(crate) struct GossipLinks {
    /// The open sockets by address, with their node and the phase of its gossip rounds: a
    /// restart's socket replaces the last.
    sockets: Mutex<BTreeMap<SocketAddr, OpenSocket>>,
    /// Node pairs a partition cuts (lower first).
    held: Mutex<BTreeSet<(usize, usize)>>,
    /// Each slow link's latency bound (lower node first); others have `max_latency_ms`.
    slow: Mutex<BTreeMap<(usize, usize), u64>>,
    max_latency_ms: u64,
    chaos: AtomicBool,
    drop_per_mille: u64,
    delay_per_mille: u64,
}

/// A socket [`GossipLinks`] delivers to.
#[derive(Clone)]
struct OpenSocket {
    node: usize,
    /// Its node's gossip rounds fall on the sim milliseconds equal to this modulo
    /// `GOSSIP_INTERVAL` (chitchat's round timer starts as it opens its socket).
    round_phase_ms: u64,
    tx: mpsc::Sender<RecvOutcome>,
}

fn interval_ms() -> u64 {
    GOSSIP_INTERVAL.as_millis() as u64
}

fn pair(a: usize, b: usize) -> (usize, usize) {
    (a.min(b), a.max(b))
}

impl GossipLinks {
    pub(crate) fn new(max_latency: Duration, drop_per_mille: u64, delay_per_mille: u64) -> Self {
        GossipLinks {
            sockets: Mutex::default(),
            held: Mutex::default(),
            slow: Mutex::default(),
            max_latency_ms: max_latency.as_millis() as u64,
            chaos: AtomicBool::new(false),
            drop_per_mille,
            delay_per_mille,
        }
    }

    /// Follows one of the harness's faults (crashes need nothing: the node's socket goes with
    /// its runtime).
    pub(crate) fn apply(&self, fault: &Fault, nodes: usize) {
        match fault {
            Fault::Partition { minority } => {
                let mut held = lock(&self.held);
                for &a in minority {
                    for b in (0..nodes).filter(|b| !minority.contains(b)) {
                        held.insert(pair(a, b));
                    }
                }
            }
            Fault::HealPartitions => lock(&self.held).clear(),
            Fault::SlowLink {
                a,
                b,
                max_latency_ms,
            } => {
                lock(&self.slow).insert(pair(*a, *b), *max_latency_ms);
            }
            Fault::HealSlowLinks => lock(&self.slow).clear(),
            Fault::Chaos(on) => self.chaos.store(*on, Ordering::Relaxed),
            Fault::Crash(_) | Fault::Restart(_) | Fault::ClockSkew { .. } => {}
        }
    }

    fn is_held(&self, a: usize, b: usize) -> bool {
        lock(&self.held).contains(&pair(a, b))
    }

    fn node_at(&self, address: SocketAddr) -> Option<usize> {
        lock(&self.sockets).get(&address).map(|socket| socket.node)
    }

    /// Hands a datagram to the socket now open at `to`, if any and if it has room (else it is
    /// lost), or returns it if its socket's gossip round falls in this millisecond or the next
    /// (where the receiver may read it): chitchat's
    /// server picks between a datagram and its round timer with an unbiased `tokio::select!`,
    /// whose draw tokio seeds from a process-wide counter (which other threads' runtimes
    /// advance), so were both ready in one poll the order would differ between replays. The
    /// caller tries again a millisecond later.
    fn deliver(
        &self,
        from: (usize, SocketAddr),
        to: SocketAddr,
        envelope: ChitchatEnvelope,
    ) -> Result<(), ChitchatEnvelope> {
        let Some(socket) = lock(&self.sockets).get(&to).cloned() else {
            return Ok(());
        };
        if self.is_held(from.0, socket.node) {
            return Ok(()); // a partition began while it was in flight
        }
        // This host may run this millisecond after the receiver did (turmoil runs the hosts
        // of a step one after another): the receiver then reads it in the next millisecond.
        let now_ms = sim_now_ms();
        if [now_ms, now_ms + 1]
            .iter()
            .any(|ms| ms % interval_ms() == socket.round_phase_ms)
        {
            return Err(envelope);
        }
        let _ = socket.tx.try_send(RecvOutcome {
            from_addr: from.1,
            envelope,
            num_bytes_received: 0,
        });
        Ok(())
    }
}

/// Chitchat's `Transport` for one node of the run: its one socket, at the node's gossip
/// address, over [`GossipLinks`].
pub(crate) struct SimGossipTransport {
    pub(crate) links: Arc<GossipLinks>,
    pub(crate) node: usize,
    /// Where the node gossips (its broadcast address and storage port): what the socket is
    /// bound as, whatever address chitchat listens on.
    pub(crate) address: SocketAddr,
    /// Seeds the socket's draws (latency, loss, delay).
    pub(crate) seed: u64,
}

#[async_trait]
impl Transport for SimGossipTransport {
    async fn open(&self, _listen: SocketAddr) -> anyhow::Result<Box<dyn Socket>> {
        let (tx, rx) = mpsc::channel(SOCKET_QUEUE);
        let socket = OpenSocket {
            node: self.node,
            round_phase_ms: sim_now_ms() % interval_ms(),
            tx,
        };
        lock(&self.links.sockets).insert(self.address, socket);
        Ok(Box::new(SimSocket {
            links: self.links.clone(),
            node: self.node,
            address: self.address,
            random: SplitMix64::new(self.seed),
            rx,
        }))
    }
}

struct SimSocket {
    links: Arc<GossipLinks>,
    node: usize,
    address: SocketAddr,
    random: SplitMix64,
    rx: mpsc::Receiver<RecvOutcome>,
}

#[async_trait]
impl Socket for SimSocket {
    fn local_addr(&self) -> anyhow::Result<SocketAddr> {
        Ok(self.address)
    }

    async fn send(
        &mut self,
        to: SocketAddr,
        envelope: ChitchatEnvelope,
    ) -> anyhow::Result<SendOutcome> {
        let sent = SendOutcome { num_bytes_sent: 0 };
        // A datagram to no one, or across a partition, is lost (UDP reports nothing).
        let Some(peer) = self.links.node_at(to) else {
            return Ok(sent);
        };
        if self.links.is_held(self.node, peer) {
            return Ok(sent);
        }
        let links = &self.links;
        let bound_ms = lock(&links.slow)
            .get(&pair(self.node, peer))
            .copied()
            .unwrap_or(links.max_latency_ms)
            .max(1);
        let mut latency_ms = 1 + self.random.next_u64() % bound_ms;
        if links.chaos.load(Ordering::Relaxed) {
            if self.random.next_u64() % 1000 < links.drop_per_mille {
                return Ok(sent);
            }
            if self.random.next_u64() % 1000 < links.delay_per_mille {
                latency_ms += self.random.next_u64() % CHAOS_MAX_DELAY_MS;
            }
        }
        let links = links.clone();
        let from = (self.node, self.address);
        // On the sender's runtime: a crash loses what it had in flight.
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(latency_ms)).await;
            let mut envelope = envelope;
            while let Err(waiting) = links.deliver(from, to, envelope) {
                envelope = waiting;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
        Ok(sent)
    }

    async fn recv(&mut self) -> anyhow::Result<RecvOutcome> {
        match self.rx.recv().await {
            Some(datagram) => Ok(datagram),
            None => anyhow::bail!("the simulated gossip socket at {} closed", self.address),
        }
    }
}

/// One node's UP or DOWN event about a peer (gossip's STATUS_CHANGE), at sim time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GossipEvent {
    pub at_ms: u64,
    pub observer: usize,
    /// The observer's start (1 for its first) the event is of.
    pub start: u64,
    pub peer: usize,
    pub up: bool,
}

/// What gossip did over a run: every node's events, and when the views converged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GossipHistory {
    /// The run's node count.
    pub nodes: usize,
    pub events: Vec<GossipEvent>,
    /// The first sim time after the heal at which every node's view had converged (`None`:
    /// never within the run).
    pub converged_at_ms: Option<u64>,
}

impl GossipHistory {
    /// Whether `observer`'s view held `peer` up at `at_ms`: its last event about `peer`
    /// before then, in the observer's incarnation running then (a start sees every peer down
    /// until it hears from it).
    fn up_at(&self, observer: usize, peer: usize, at_ms: u64) -> bool {
        self.up_since(observer, peer, at_ms).is_some()
    }

    /// When `observer`'s view last turned `peer` up, if it held it up at `at_ms` (as
    /// [`GossipHistory::up_at`]).
    fn up_since(&self, observer: usize, peer: usize, at_ms: u64) -> Option<u64> {
        let start = self
            .events
            .iter()
            .filter(|e| e.observer == observer && e.at_ms <= at_ms)
            .map(|e| e.start)
            .max();
        self.events
            .iter()
            .rfind(|e| {
                e.observer == observer
                    && e.peer == peer
                    && e.at_ms <= at_ms
                    && Some(e.start) == start
            })
            .filter(|e| e.up)
            .map(|e| e.at_ms)
    }

    /// The events, one a line: sim ms, observer/its start, peer, up or down.
    pub fn render(&self) -> String {
        self.events
            .iter()
            .map(|e| {
                let word = if e.up { "UP" } else { "DOWN" };
                format!(
                    "  {:>6} node{}/{} node{} {word}\n",
                    e.at_ms, e.observer, e.start, e.peer
                )
            })
            .collect()
    }

    /// For each crash in `faults` and each other node: how long after the crash that node's
    /// view first held the crashed one down (`None`: not before the restart or the heal).
    pub fn convictions(&self, faults: &[ScheduledFault]) -> Vec<(u64, usize, usize, Option<u64>)> {
        let mut found = Vec::new();
        for (crash_ms, node, restart_ms) in crashes(faults) {
            for observer in (0..self.nodes).filter(|o| *o != node) {
                let convicted = (crash_ms..restart_ms)
                    .step_by(10)
                    .find(|&t| !self.up_at(observer, node, t))
                    .map(|t| t - crash_ms);
                found.push((crash_ms, node, observer, convicted));
            }
        }
        found
    }
}

/// Each crash of `faults`: its time, node and restart time.
fn crashes(faults: &[ScheduledFault]) -> Vec<(u64, usize, u64)> {
    faults
        .iter()
        .filter_map(|f| match f.fault {
            Fault::Crash(node) => {
                let restart = faults
                    .iter()
                    .find(|r| r.at_ms > f.at_ms && r.fault == Fault::Restart(node))
                    .map_or(u64::MAX, |r| r.at_ms);
                Some((f.at_ms, node, restart))
            }
            _ => None,
        })
        .collect()
}

/// A broken gossip invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GossipViolation {
    /// `observer` still held `node` up `CONVICTION_BOUND_MS` (or, with few samples,
    /// `CONVICTION_BOUND_FEW_SAMPLES_MS`) after its crash at `crash_ms`.
    NotConvicted {
        crash_ms: u64,
        node: usize,
        observer: usize,
    },
    /// The views had not converged `CONVERGENCE_BOUND_MS` after the heal: the first node
    /// whose view differs, and how.
    NotConverged { node: usize, detail: String },
}

/// A planted bug in how node 1 follows gossip, for the tests that the checks catch it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GossipBug {
    /// Node 1's view loses node 0's tokens (as a view that failed to read them): its ring
    /// lacks them.
    DropTokens,
    /// Once node 1 convicted node 0 it never holds it up again (as a follower that misses
    /// the UP): its view, its messaging and its hint replay keep node 0 down.
    NeverUpAgain,
}

/// What the views must agree on about a member: host id, generation, tokens, state, up.
type MemberSummary = (HostId, u64, Vec<i64>, String, bool);

/// A node's view as the checks read it: its members (host id order) and the ring it builds.
#[derive(Debug, Clone)]
struct ViewRecord {
    local_generation: u64,
    members: Vec<gossip::Member>,
    ring: Result<Vec<(i64, HostId)>, String>,
}

impl ViewRecord {
    fn of(view: &ClusterView, bug: Option<GossipBug>, peer_0: HostId, peer_0_down: bool) -> Self {
        let mut members: Vec<gossip::Member> = view.members().cloned().collect();
        let mut ring = view
            .token_metadata()
            .map(|ring| ring.ring().to_vec())
            .map_err(|e| e.to_string());
        for member in members.iter_mut().filter(|m| m.endpoint.host_id == peer_0) {
            match bug {
                Some(GossipBug::DropTokens) => {
                    member.tokens.clear();
                    if let Ok(ring) = &mut ring {
                        ring.retain(|(_, owner)| *owner != peer_0);
                    }
                }
                Some(GossipBug::NeverUpAgain) if peer_0_down => member.live = false,
                _ => {}
            }
        }
        ViewRecord {
            local_generation: view.local().generation,
            members,
            ring,
        }
    }
}

/// What the nodes share about gossip: the links, each node's latest view, the events.
pub(crate) struct GossipShared {
    pub(crate) links: Arc<GossipLinks>,
    /// Each node's latest view (its current incarnation's, once it published one).
    views: Vec<Mutex<Option<ViewRecord>>>,
    pub(crate) history: Mutex<GossipHistory>,
    bug: Option<GossipBug>,
}

/// What a node needs to start its membership.
pub(crate) struct NodeGossip<'a> {
    pub(crate) node: usize,
    pub(crate) start: u64,
    pub(crate) seed: u64,
    pub(crate) endpoint: Endpoint,
    pub(crate) tokens: Vec<i64>,
    pub(crate) storage_port: u16,
    /// The seeds' gossip addresses.
    pub(crate) seeds: Vec<SocketAddr>,
    pub(crate) messaging: &'a Arc<MessagingService>,
    pub(crate) hints: Arc<HintStore>,
    /// Node indexes by host id (for the record).
    pub(crate) host_ids: &'a [HostId],
}

impl GossipShared {
    pub(crate) fn new(nodes: usize, links: GossipLinks, bug: Option<GossipBug>) -> Self {
        GossipShared {
            links: Arc::new(links),
            views: (0..nodes).map(|_| Mutex::new(None)).collect(),
            history: Mutex::new(GossipHistory {
                nodes,
                ..GossipHistory::default()
            }),
            bug,
        }
    }

    /// Starts `node`'s membership and what follows it (on the node's runtime: it all ends
    /// with it). The returned membership must be kept as long as the node runs.
    pub(crate) async fn start_node(
        self: &Arc<Self>,
        node: NodeGossip<'_>,
    ) -> anyhow::Result<Membership> {
        let address = SocketAddr::new(node.endpoint.broadcast_address, node.storage_port);
        // The peers it knew (Cassandra's `system.peers`): its last incarnation's view.
        // Taken: until the new incarnation publishes its view, it holds no peer up.
        let saved_peers = lock(&self.views[node.node])
            .take()
            .map(|view| {
                let local = node.endpoint.host_id;
                let peers = view.members.into_iter();
                peers.filter(|m| m.endpoint.host_id != local).collect()
            })
            .unwrap_or_default();
        let config = MembershipConfig {
            cluster_name: "sim".to_string(),
            endpoint: node.endpoint,
            tokens: node.tokens,
            schema_version: uuid::Uuid::nil(),
            release_version: "sim".to_string(),
            generation: node.start,
            listen_address: address,
            storage_port: node.storage_port,
            seeds: node.seeds,
            gossip_interval: GOSSIP_INTERVAL,
            phi_convict_threshold: gossip::DEFAULT_PHI_CONVICT_THRESHOLD,
            max_local_pause: gossip::DEFAULT_MAX_LOCAL_PAUSE,
            saved_peers,
        };
        let transport = SimGossipTransport {
            links: self.links.clone(),
            node: node.node,
            address,
            seed: node.seed,
        };
        let membership = Membership::start(config, &transport).await?;
        let messaging = node.messaging.clone();
        // The planted `NeverUpAgain`: node 1, once it convicted node 0.
        let buggy = self.bug == Some(GossipBug::NeverUpAgain) && node.node == 1;
        let peer_0 = node.host_ids[0];
        let peer_0_down = Arc::new(AtomicBool::new(false));
        let down = peer_0_down.clone();
        gossip::follow_liveness(
            membership.watch_view(),
            move |host_id, change| match change {
                PeerChange::Restarted { generation } => {
                    messaging.peer_restarted(host_id, generation);
                }
                PeerChange::Down => {
                    if host_id == peer_0 {
                        down.store(buggy, Ordering::Relaxed);
                    }
                    messaging.mark_down(host_id);
                }
                PeerChange::Up if host_id == peer_0 && down.load(Ordering::Relaxed) => {}
                PeerChange::Up => {
                    messaging.mark_up(host_id);
                }
            },
        );
        let follower = Follower {
            shared: self.clone(),
            observer: node.node,
            start: node.start,
            host_ids: node.host_ids.to_vec(),
            peer_0_down,
        };
        tokio::spawn(follower.clone().events(membership.subscribe(), node.hints));
        tokio::spawn(follower.views(membership.watch_view()));
        Ok(membership)
    }

    /// Whether `observer`'s gossip view (its current incarnation's) holds `host` up: what its
    /// coordinator and hint store ask (`Endpoints::is_alive`, `HintTargets::is_alive`). False
    /// before the incarnation published its first view.
    pub(crate) fn is_live(&self, observer: usize, host: HostId) -> bool {
        lock(&self.views[observer]).as_ref().is_some_and(|view| {
            view.members
                .iter()
                .any(|m| m.endpoint.host_id == host && m.live)
        })
    }

    /// Why the views have not converged (`None`: they have): every node's view holds every
    /// node up, at its generation `starts` (each node's current start), with the same
    /// members as node 0's view, and rings owning `tokens` (each node's claimed tokens).
    pub(crate) fn divergence(
        &self,
        starts: &[u64],
        host_ids: &[HostId],
        tokens: &[Vec<i64>],
    ) -> Option<GossipViolation> {
        let mut expected_ring: Vec<(i64, HostId)> = tokens
            .iter()
            .zip(host_ids)
            .flat_map(|(ts, h)| ts.iter().map(move |t| (*t, *h)))
            .collect();
        expected_ring.sort_unstable();
        let views: Vec<Option<ViewRecord>> = self.views.iter().map(|v| lock(v).clone()).collect();
        let summary = |view: &ViewRecord| -> Vec<MemberSummary> {
            view.members
                .iter()
                .map(|m| {
                    (
                        m.endpoint.host_id,
                        m.generation,
                        m.tokens.clone(),
                        format!("{:?}", m.endpoint.state),
                        m.live,
                    )
                })
                .collect()
        };
        let mut first: Option<Vec<MemberSummary>> = None;
        for (node, view) in views.iter().enumerate() {
            let not = |detail: String| Some(GossipViolation::NotConverged { node, detail });
            let Some(view) = view else {
                return not("no view".to_string());
            };
            if view.local_generation != starts[node] {
                return not("its view is of an earlier start".to_string());
            }
            for (peer, host_id) in host_ids.iter().enumerate() {
                match view.members.iter().find(|m| m.endpoint.host_id == *host_id) {
                    None => return not(format!("node {peer} is not a member")),
                    Some(m) if !m.live => return not(format!("node {peer} is down")),
                    Some(m) if m.generation != starts[peer] => {
                        return not(format!(
                            "node {peer} is at generation {}, not {}",
                            m.generation, starts[peer]
                        ))
                    }
                    Some(_) => {}
                }
            }
            if view.members.len() != host_ids.len() {
                return not(format!("{} members", view.members.len()));
            }
            let ring = match &view.ring {
                Ok(ring) => ring.clone(),
                Err(e) => return not(format!("its ring: {e}")),
            };
            if ring != expected_ring {
                let missing: Vec<_> = expected_ring.iter().filter(|t| !ring.contains(t)).collect();
                let extra: Vec<_> = ring.iter().filter(|t| !expected_ring.contains(t)).collect();
                return not(format!(
                    "its ring is not the tokens claimed: {missing:?} missing, {extra:?} extra"
                ));
            }
            let this = summary(view);
            match &first {
                None => first = Some(this),
                Some(first) if *first != this => {
                    return not(format!(
                        "its members {this:?} differ from node 0's {first:?}"
                    ))
                }
                Some(_) => {}
            }
        }
        None
    }
}

/// What follows one incarnation of a node's membership for the run: its events and views.
#[derive(Clone)]
struct Follower {
    shared: Arc<GossipShared>,
    observer: usize,
    start: u64,
    host_ids: Vec<HostId>,
    /// Whether the planted `NeverUpAgain` holds node 0 down for it.
    peer_0_down: Arc<AtomicBool>,
}

impl Follower {
    /// Records its UP and DOWN events, and on UP replays the peer's hints (as the node's
    /// `start_hints`), until membership stops.
    async fn events(self, mut events: broadcast::Receiver<MembershipEvent>, store: Arc<HintStore>) {
        use tokio::sync::broadcast::error::RecvError;
        loop {
            let event = match events.recv().await {
                Ok(event) => event,
                Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => return,
            };
            let up = match event.kind {
                EventKind::Up => true,
                EventKind::Down => false,
                EventKind::NewNode | EventKind::RemovedNode => continue,
            };
            let missed =
                up && event.host_id == self.host_ids[0] && self.peer_0_down.load(Ordering::Relaxed);
            if up && !missed {
                store.target_up(event.host_id);
            }
            let Some(peer) = self.host_ids.iter().position(|h| *h == event.host_id) else {
                continue;
            };
            lock(&self.shared.history).events.push(GossipEvent {
                at_ms: sim_now_ms(),
                observer: self.observer,
                start: self.start,
                peer,
                up,
            });
        }
    }

    /// Keeps its latest view for the checks and `GossipShared::is_live`, until membership
    /// stops.
    async fn views(self, mut views: watch::Receiver<Arc<ClusterView>>) {
        let bug = self.shared.bug.filter(|_| self.observer == 1);
        loop {
            let view = views.borrow_and_update().clone();
            let down = self.peer_0_down.load(Ordering::Relaxed);
            let record = ViewRecord::of(&view, bug, self.host_ids[0], down);
            *lock(&self.shared.views[self.observer]) = Some(record);
            if views.changed().await.is_err() {
                return;
            }
        }
    }
}

/// The gossip invariants of a finished run (the module's header): convictions of the crashes
/// in `faults` within the bound, and the views converged by `heal_ms +
/// CONVERGENCE_BOUND_MS`, `divergence` being why they had not at the run's end.
pub(crate) fn check(
    history: &GossipHistory,
    faults: &[ScheduledFault],
    heal_ms: u64,
    divergence: Option<GossipViolation>,
) -> Vec<GossipViolation> {
    let mut found = Vec::new();
    for (crash_ms, node, restart_ms) in crashes(faults) {
        for observer in (0..history.nodes).filter(|o| *o != node) {
            // Not up in its view at the crash (it may hear of the node's last heartbeats
            // later): as few samples as can be.
            let few_samples = history
                .up_since(observer, node, crash_ms)
                .is_none_or(|up_since| crash_ms - up_since < FEW_SAMPLES_MS);
            let bound = if few_samples {
                CONVICTION_BOUND_FEW_SAMPLES_MS
            } else {
                CONVICTION_BOUND_MS
            };
            if restart_ms.min(heal_ms) < crash_ms + bound {
                continue;
            }
            if history.up_at(observer, node, crash_ms + bound) {
                found.push(GossipViolation::NotConvicted {
                    crash_ms,
                    node,
                    observer,
                });
            }
        }
    }
    let in_time = history
        .converged_at_ms
        .is_some_and(|t| t <= heal_ms + CONVERGENCE_BOUND_MS);
    if !in_time {
        found.push(divergence.unwrap_or(GossipViolation::NotConverged {
            node: 0,
            detail: format!("converged only at {:?} ms", history.converged_at_ms),
        }));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(at_ms: u64, observer: usize, peer: usize, up: bool) -> GossipEvent {
        GossipEvent {
            at_ms,
            observer,
            start: 1,
            peer,
            up,
        }
    }

    /// Node 2 crashes at 1,000 ms and is never restarted; node 0 had held it up since 100 ms,
    /// node 1 only since 900 ms; each convicts it `after` ms after the crash.
    fn violations(after_0: u64, after_1: u64) -> Vec<GossipViolation> {
        let history = GossipHistory {
            nodes: 3,
            events: vec![
                event(100, 0, 2, true),
                event(900, 1, 2, true),
                event(1_000 + after_0, 0, 2, false),
                event(1_000 + after_1, 1, 2, false),
            ],
            converged_at_ms: Some(5_000),
        };
        let faults = [ScheduledFault {
            at_ms: 1_000,
            fault: Fault::Crash(2),
        }];
        check(&history, &faults, 5_000, None)
    }

    #[test]
    fn an_observer_with_few_samples_gets_the_longer_bound() {
        assert_eq!(violations(1_400, 1_900), []);
        let late = |observer| GossipViolation::NotConvicted {
            crash_ms: 1_000,
            node: 2,
            observer,
        };
        assert_eq!(violations(1_600, 1_900), [late(0)]);
        assert_eq!(violations(1_400, 2_100), [late(1)]);
    }
}
