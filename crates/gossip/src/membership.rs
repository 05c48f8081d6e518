//! The running membership service: chitchat's gossip server for this node, and the task that
//! turns chitchat's state into [`ClusterView`]s and [`MembershipEvent`]s.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use chitchat::transport::Transport;
use chitchat::{
    spawn_chitchat, Chitchat, ChitchatConfig, ChitchatHandle, ChitchatId, FailureDetectorConfig,
    ProtocolVersion,
};
use locator::HostId;
use locator::{Endpoint, NodeState, Token};
use tokio::sync::{broadcast, mpsc, watch, Mutex};
use tokio::task::JoinHandle;

use crate::conviction::LocalConvictions;
use crate::events::{EventTracker, MembershipEvent};
use crate::pause::LocalPauseGuard;
use crate::state::{
    encode_tokens, local_key_values, parse_member, status_word, Member, StateError, KEYS, KEY_LOAD,
    KEY_SCHEMA, KEY_STATUS, KEY_TOKENS, MAX_TOKENS_PER_NODE, OPTIONAL_KEYS,
};
use crate::view::{ClusterView, GossipNode};
use crate::GossipError;

/// Cassandra's gossip round, `Gossiper.intervalInMillis`.
pub const DEFAULT_GOSSIP_INTERVAL: Duration = Duration::from_secs(1);

/// Cassandra's `phi_convict_threshold` default.
pub const DEFAULT_PHI_CONVICT_THRESHOLD: f64 = 8.0;

/// Cassandra's `max_local_pause` default (`cassandra.max_local_pause_in_ms`, 5,000 ms): a
/// refresh of the view this much later than its round means this node itself stopped (a
/// `SIGSTOP`, a virtual machine paused, a starved runtime), not its peers.
pub const DEFAULT_MAX_LOCAL_PAUSE: Duration = Duration::from_secs(5);

/// The range Cassandra accepts for `phi_convict_threshold`.
const PHI_CONVICT_THRESHOLD_RANGE: std::ops::RangeInclusive<f64> = 5.0..=16.0;

/// Cassandra's `FailureDetector.PHI_FACTOR`: its phi is `PHI_FACTOR × elapsed / mean interval`
/// (the exponential distribution's -log10 of the probability the node is still up), chitchat's
/// `elapsed / mean interval`, so Cassandra's threshold `t` is chitchat's `t / PHI_FACTOR`
/// (`t × ln 10`): at the default 8, a node is convicted after about 18.4 mean heartbeat
/// intervals without one.
const PHI_FACTOR: f64 = std::f64::consts::LOG10_E;

/// Cassandra's `ArrivalWindow` sample count.
const SAMPLING_WINDOW_SIZE: usize = 1000;

/// How long chitchat keeps a dead node's state before forgetting it: Cassandra's
/// `VERY_LONG_TIME_MS` (3 days), its quarantine of dead endpoints. The view keeps the node
/// after that anyway (down), so this only bounds what is gossiped.
const DEAD_NODE_GRACE_PERIOD: Duration = Duration::from_secs(3 * 24 * 3600);

/// How long a deleted key's tombstone is gossiped; this crate deletes no key, chitchat
/// requires a value.
const DELETED_KEY_GRACE_PERIOD: Duration = Duration::from_secs(3600);

/// The events buffered for a subscriber that has not read them: past it, the subscriber's
/// next `recv` reports how many it lost (`RecvError::Lagged`) and it should read the view
/// afresh. 1,024 is a whole cluster's nodes changing several times over.
pub const EVENT_CHANNEL_CAPACITY: usize = 1024;

/// Bound on the convictions a [`Convicter`] queues for the refresh task: far more than a
/// cluster's peers (each is reported once per loss); past it a report is dropped, with a
/// warning, and phi convicts that peer as before.
pub const CONVICTION_QUEUE_CAPACITY: usize = 1024;

/// Bound on the peers remembered as having published an invalid state (each warned of once
/// per generation); past it the memory is cleared, and they are warned of again.
const MAX_WARNED_STATES: usize = 1024;

/// How a node takes part in gossip: who it is, what it publishes, whom it asks first, and how
/// quickly it convicts a silent peer.
#[derive(Debug, Clone)]
pub struct MembershipConfig {
    /// Cassandra's `cluster_name`, chitchat's cluster id: gossip from a node of another
    /// cluster is refused, both ways.
    pub cluster_name: String,
    /// This node: host id, broadcast address (what peers gossip and send messages to), native
    /// address and port, data centre, rack and state.
    pub endpoint: Endpoint,
    /// This node's tokens: at least one, at most [`MAX_TOKENS_PER_NODE`], not the minimum.
    pub tokens: Vec<Token>,
    /// This node's schema version.
    pub schema_version: uuid::Uuid,
    /// This node's release version (`system.local`'s `release_version`).
    pub release_version: String,
    /// This start's gossip generation. It must grow at every restart, so peers tell the new
    /// process from the old one: Cassandra takes the current time in seconds, or the stored
    /// generation plus one if that is not larger (`SystemKeyspace.incrementAndGetGeneration`).
    pub generation: u64,
    /// The address the gossip socket binds (`listen_address` and `storage_port`).
    pub listen_address: SocketAddr,
    /// The port peers gossip with this node on, at its broadcast address (`storage_port`; the
    /// same number carries messaging over TCP).
    pub storage_port: u16,
    /// The seeds' gossip addresses (`seed_provider`'s, with the storage port). A node that is
    /// its own seed may be listed: it does not gossip with itself.
    pub seeds: Vec<SocketAddr>,
    /// How often this node gossips ([`DEFAULT_GOSSIP_INTERVAL`]).
    pub gossip_interval: Duration,
    /// Cassandra's `phi_convict_threshold` (5 to 16, [`DEFAULT_PHI_CONVICT_THRESHOLD`]).
    pub phi_convict_threshold: f64,
    /// Cassandra's `max_local_pause` ([`DEFAULT_MAX_LOCAL_PAUSE`], positive): when this node
    /// finds it ran this much later than its gossip round, every peer's silence is its own, so
    /// no peer up before the pause is marked down until the pause is that long behind it.
    pub max_local_pause: Duration,
    /// The peers this node knew when it last ran (the node keeps them, as Cassandra keeps
    /// `system.peers`, from the views it was given): they are in the view from the start,
    /// down, so a peer that is down while this node restarts keeps its tokens in the ring;
    /// their gossip addresses are asked as seeds too. Their tokens are checked as
    /// [`MembershipConfig::tokens`] (none is allowed: a joining peer's).
    pub saved_peers: Vec<Member>,
}

impl MembershipConfig {
    /// Where peers gossip with this node: its broadcast address and storage port.
    pub fn gossip_address(&self) -> SocketAddr {
        SocketAddr::new(self.endpoint.broadcast_address, self.storage_port)
    }

    fn validate(&self) -> Result<(), GossipError> {
        let invalid = |detail: String| Err(GossipError::InvalidConfig(detail));
        if self.cluster_name.is_empty() {
            return invalid("cluster_name must not be empty".to_string());
        }
        if !PHI_CONVICT_THRESHOLD_RANGE.contains(&self.phi_convict_threshold) {
            // Cassandra's words.
            return invalid("phi_convict_threshold must be between 5 and 16".to_string());
        }
        if self.gossip_interval.is_zero() {
            return invalid("the gossip interval must be positive".to_string());
        }
        if self.max_local_pause.is_zero() {
            return invalid("max_local_pause must be positive".to_string());
        }
        check_tokens(&self.tokens)?;
        for peer in &self.saved_peers {
            if !peer.tokens.is_empty() {
                check_tokens(&peer.tokens)?;
            }
        }
        Ok(())
    }
}

fn check_tokens(tokens: &[Token]) -> Result<(), GossipError> {
    let invalid = |detail: String| Err(GossipError::InvalidConfig(detail));
    if tokens.is_empty() {
        return invalid("a node needs at least one token".to_string());
    }
    if tokens.len() > MAX_TOKENS_PER_NODE {
        return invalid(format!(
            "{} tokens, more than the {MAX_TOKENS_PER_NODE} gossip carries",
            tokens.len()
        ));
    }
    if tokens.contains(&Token::MIN) {
        return invalid(format!("{} is the minimum token", Token::MIN));
    }
    Ok(())
}

/// This node's membership: gossips its state with the cluster, keeps the cluster's
/// [`ClusterView`] and announces changes to it. Dropping it stops gossip at once (peers then
/// convict this node); [`Membership::shutdown`] also waits for the gossip server to stop.
pub struct Membership {
    shared: Arc<Shared>,
    chitchat: Option<ChitchatHandle>,
    /// Rebuilds the view on chitchat's liveness changes, every gossip round and every
    /// conviction a [`Convicter`] queues.
    refresher: JoinHandle<()>,
    /// Queues convictions for the refresher ([`Membership::convicter`]).
    convictions_tx: mpsc::Sender<HostId>,
}

/// Convicts peers from a context that cannot wait (a messaging connection's task): a cheap
/// clone of a queue to [`Membership`]'s refresh task, which convicts as
/// [`Membership::convict`] does. Outlives the membership harmlessly (its reports are then
/// dropped).
#[derive(Debug, Clone)]
pub struct Convicter {
    queue: mpsc::Sender<HostId>,
}

impl Convicter {
    /// Convicts `host_id` as [`Membership::convict`] does, soon (the refresh task takes it at
    /// once). A report past [`CONVICTION_QUEUE_CAPACITY`] queued is dropped with a warning.
    pub fn convict(&self, host_id: HostId) {
        match self.queue.try_send(host_id) {
            Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                tracing::warn!(peer = %host_id, "too many convictions queued: this one is left to phi");
            }
        }
    }
}

/// What the refresh task and the setters share.
struct Shared {
    chitchat: Arc<Mutex<Chitchat>>,
    /// Held across a whole refresh, so views are built and diffed one at a time, in order.
    refresh: Mutex<RefreshState>,
    view_tx: watch::Sender<Arc<ClusterView>>,
    events_tx: broadcast::Sender<MembershipEvent>,
}

struct RefreshState {
    tracker: EventTracker,
    /// Whether this node has just resumed from a pause of its own, when no peer up before it
    /// is marked down.
    pause: LocalPauseGuard,
    /// Peers (node id, generation) already warned of for an invalid state.
    warned: HashSet<(String, u64)>,
    /// Peers held down on proof their process is gone (`conviction.rs`).
    convictions: LocalConvictions,
}

impl Membership {
    /// Starts gossiping as `config` says, over `transport` (chitchat's `UdpTransport` in the
    /// node, its `ChannelTransport` in tests, `sim`'s own in the simulation). The view starts
    /// with this node and its saved peers (down); peers join it as gossip brings their
    /// complete states.
    pub async fn start(
        mut config: MembershipConfig,
        transport: &dyn Transport,
    ) -> Result<Membership, GossipError> {
        config.validate()?;
        for peer in &mut config.saved_peers {
            peer.tokens.sort_unstable();
            peer.tokens.dedup();
        }
        let chitchat_id = ChitchatId::new(
            config.endpoint.host_id.to_string(),
            config.generation,
            config.gossip_address(),
        );
        let key_values = local_key_values(
            &config.endpoint,
            &config.tokens,
            config.schema_version,
            &config.release_version,
        );
        let local = parse_member(
            &chitchat_id.node_id,
            config.generation,
            chitchat_id.gossip_advertise_addr,
            &key_values.iter().cloned().collect(),
            true,
        )
        .expect("this node's validated state reads back");
        let gossip_interval = config.gossip_interval;
        let chitchat_config = ChitchatConfig {
            chitchat_id,
            cluster_id: config.cluster_name.clone(),
            gossip_interval,
            listen_addr: config.listen_address,
            seed_nodes: config
                .seeds
                .iter()
                .chain(config.saved_peers.iter().map(|peer| &peer.storage_address))
                .map(SocketAddr::to_string)
                .collect(),
            failure_detector_config: FailureDetectorConfig {
                phi_threshold: config.phi_convict_threshold / PHI_FACTOR,
                sampling_window_size: SAMPLING_WINDOW_SIZE,
                // Cassandra's `fd_max_interval_ms` and `fd_initial_value_ms` defaults: twice the
                // gossip round. A longer silence is not a sample (it is what conviction is
                // for); the first samples are smoothed towards the initial value.
                max_interval: gossip_interval * 2,
                initial_interval: gossip_interval * 2,
                dead_node_grace_period: DEAD_NODE_GRACE_PERIOD,
            },
            marked_for_deletion_grace_period: DELETED_KEY_GRACE_PERIOD,
            catchup_callback: None,
            extra_liveness_predicate: None,
            // Every Helenus node speaks chitchat 0.13, which reads the compressed digest.
            protocol_version: ProtocolVersion::V1,
        };
        let handle = spawn_chitchat(chitchat_config, key_values, transport)
            .await
            .map_err(|e| GossipError::Start {
                address: config.listen_address,
                detail: format!("{e:#}"),
            })?;
        let chitchat = handle.chitchat();
        let liveness = chitchat.lock().await.live_nodes_watcher();
        let view = ClusterView::new(local, config.saved_peers);
        // The saved peers were told of before this start: no event for them until they change.
        let mut tracker = EventTracker::default();
        tracker.diff(&view);
        let (view_tx, _) = watch::channel(Arc::new(view));
        let (events_tx, _) = broadcast::channel(EVENT_CHANNEL_CAPACITY);
        let shared = Arc::new(Shared {
            chitchat,
            refresh: Mutex::new(RefreshState {
                tracker,
                pause: LocalPauseGuard::new(
                    config.max_local_pause,
                    gossip_interval,
                    tokio::time::Instant::now(),
                ),
                warned: HashSet::new(),
                convictions: LocalConvictions::new(gossip_interval),
            }),
            view_tx,
            events_tx,
        });
        let (convictions_tx, convictions_rx) = mpsc::channel(CONVICTION_QUEUE_CAPACITY);
        let refresher = tokio::spawn(refresh_loop(
            shared.clone(),
            liveness,
            convictions_rx,
            gossip_interval,
        ));
        tracing::info!(
            host_id = %config.endpoint.host_id,
            generation = config.generation,
            address = %config.endpoint.broadcast_address,
            storage_port = config.storage_port,
            seeds = ?config.seeds,
            "gossip started"
        );
        Ok(Membership {
            shared,
            chitchat: Some(handle),
            refresher,
            convictions_tx,
        })
    }

    /// Convicts `host_id` now, on proof that its process is gone (messaging found its
    /// connection closed and its port refusing connections): the peer is marked down in the
    /// view at once (a STATUS_CHANGE `DOWN` to drivers, `follow_liveness`'s `Down`), without
    /// waiting for phi, and stays down until it heartbeats again (past its last heartbeats
    /// still propagating: a false alarm costs a few gossip rounds) or restarts (a new
    /// generation, judged by chitchat alone). Cassandra has no such shortcut for a killed
    /// process, only for one that announces its shutdown; the proof is as strong. Returns
    /// whether the peer was up and is now convicted (not this node, an unknown peer or one
    /// already down).
    pub async fn convict(&self, host_id: HostId) -> bool {
        self.shared.convict(host_id).await
    }

    /// A handle that convicts peers as [`Membership::convict`] does, from a context that
    /// cannot wait (messaging's `on_peer_gone` listener).
    pub fn convicter(&self) -> Convicter {
        Convicter {
            queue: self.convictions_tx.clone(),
        }
    }

    /// The cluster as this node sees it now.
    pub fn view(&self) -> Arc<ClusterView> {
        self.shared.view_tx.borrow().clone()
    }

    /// A receiver of every new view (the coordinator and `system.peers` swap in
    /// `ClusterView::token_metadata` of each).
    pub fn watch_view(&self) -> watch::Receiver<Arc<ClusterView>> {
        self.shared.view_tx.subscribe()
    }

    /// A receiver of the events from now on, each published after the view that holds the
    /// change (bounded by [`EVENT_CHANNEL_CAPACITY`]).
    pub fn subscribe(&self) -> broadcast::Receiver<MembershipEvent> {
        self.shared.events_tx.subscribe()
    }

    /// Publishes this node's new state (joining, normal, leaving, moving).
    pub async fn set_state(&self, state: NodeState) {
        self.publish(KEY_STATUS, status_word(state).to_string())
            .await;
    }

    /// Publishes this node's new schema version.
    pub async fn set_schema_version(&self, schema_version: uuid::Uuid) {
        self.publish(KEY_SCHEMA, schema_version.hyphenated().to_string())
            .await;
    }

    /// Publishes how many bytes of data this node stores (`nodetool status`'s load).
    pub async fn set_load(&self, bytes: u64) {
        self.publish(KEY_LOAD, bytes.to_string()).await;
    }

    /// Publishes this node's new tokens (checked as [`MembershipConfig::tokens`]).
    pub async fn set_tokens(&self, tokens: &[Token]) -> Result<(), GossipError> {
        check_tokens(tokens)?;
        self.publish(KEY_TOKENS, encode_tokens(tokens)).await;
        Ok(())
    }

    /// Sets one of this node's keys, then brings the view up to date so a caller reads its
    /// own change.
    async fn publish(&self, key: &str, value: String) {
        self.shared
            .chitchat
            .lock()
            .await
            .self_node_state()
            .set(key, value);
        self.shared.refresh().await;
    }

    /// Stops gossiping and waits for the gossip server to stop (its socket closed).
    pub async fn shutdown(mut self) {
        self.refresher.abort();
        if let Some(handle) = self.chitchat.take() {
            if let Err(e) = handle.shutdown().await {
                tracing::warn!(error = %e, "gossip server stopped with an error");
            }
        }
        tracing::info!("gossip stopped");
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        // Dropping the chitchat handle closes its command channel, which stops its server.
        self.refresher.abort();
    }
}

async fn refresh_loop(
    shared: Arc<Shared>,
    mut liveness: watch::Receiver<BTreeMap<ChitchatId, chitchat::NodeState>>,
    mut convictions: mpsc::Receiver<HostId>,
    gossip_interval: Duration,
) {
    let mut round = tokio::time::interval(gossip_interval);
    round.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            changed = liveness.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            _ = round.tick() => {}
            Some(host_id) = convictions.recv() => {
                shared.convict(host_id).await;
                continue;
            }
        }
        shared.refresh().await;
    }
}

impl Shared {
    /// `Membership::convict`.
    async fn convict(&self, host_id: HostId) -> bool {
        {
            let mut guard = self.refresh.lock().await;
            let view = self.view_tx.borrow().clone();
            let Some(member) = view.member(host_id) else {
                return false;
            };
            if host_id == view.local().endpoint.host_id || !member.live {
                return false;
            }
            let node_id = host_id.to_string();
            let heartbeat = self
                .chitchat
                .lock()
                .await
                .node_states()
                .iter()
                .find(|(id, _)| *id.node_id == *node_id && id.generation_id == member.generation)
                .map_or(0, |(_, state)| u64::from(state.heartbeat()));
            let now = tokio::time::Instant::now();
            if !guard
                .convictions
                .convict(host_id, member.generation, heartbeat, now)
            {
                return false;
            }
            tracing::info!(peer = %host_id, generation = member.generation, heartbeat,
                "peer convicted: its process is gone (its connection closed, its port refuses connections)");
        }
        self.refresh().await;
        true
    }

    /// Builds the view from chitchat's state; publishes it and its events if it changed.
    /// Right after a local pause, peers up before it stay up (`pause.rs`).
    async fn refresh(&self) {
        let mut guard = self.refresh.lock().await;
        let state = &mut *guard;
        let mut nodes = snapshot(&*self.chitchat.lock().await);
        // Measured once the locks are held: a refresh that waited for them ran that late too.
        let now = tokio::time::Instant::now();
        let holding = state.pause.check(now);
        for host_id in state.convictions.apply(&mut nodes, now) {
            tracing::info!(peer = %host_id, "local conviction lifted: the peer heartbeats again, restarted or was forgotten");
        }
        let previous = self.view_tx.borrow().clone();
        let warned = &mut state.warned;
        let mut view = previous.next(&nodes, |node, error| report(warned, node, error));
        if holding {
            view = view
                .holding_live(&previous)
                .marking_down(state.convictions.host_ids());
        }
        if view == *previous {
            return;
        }
        let events = state.tracker.diff(&view);
        self.view_tx.send_replace(Arc::new(view));
        for event in events {
            tracing::info!(kind = ?event.kind, host_id = %event.host_id, address = %event.address, "membership change");
            // No subscriber is not an error.
            let _ = self.events_tx.send(event);
        }
    }
}

fn report(warned: &mut HashSet<(String, u64)>, node: &GossipNode, error: StateError) {
    match error {
        StateError::Incomplete(key) => {
            tracing::debug!(node_id = %node.node_id, generation = node.generation, key, "gossip state incomplete");
        }
        StateError::Invalid { key, detail } => {
            if warned.len() >= MAX_WARNED_STATES {
                warned.clear();
            }
            if warned.insert((node.node_id.clone(), node.generation)) {
                tracing::warn!(
                    node_id = %node.node_id,
                    generation = node.generation,
                    address = %node.gossip_address,
                    key,
                    detail,
                    "ignoring a node whose gossip state is invalid"
                );
            }
        }
    }
}

/// Chitchat's node states, the keys this crate reads, and their liveness.
fn snapshot(chitchat: &Chitchat) -> Vec<GossipNode> {
    let live: BTreeSet<&ChitchatId> = chitchat.live_nodes().collect();
    chitchat
        .node_states()
        .iter()
        .map(|(id, state)| GossipNode {
            node_id: id.node_id.to_string(),
            generation: id.generation_id,
            gossip_address: id.gossip_advertise_addr,
            key_values: KEYS
                .iter()
                .chain(&OPTIONAL_KEYS)
                .filter_map(|&key| Some((key.to_string(), state.get(key)?.to_string())))
                .collect(),
            heartbeat: state.heartbeat().into(),
            live: live.contains(id),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EventKind;

    #[test]
    fn membership_can_be_shared_across_tasks() {
        fn shareable<T: Send + Sync + 'static>() {}
        shareable::<Membership>();
        shareable::<ClusterView>();
    }

    #[test]
    fn cassandra_s_threshold_is_its_phi_not_chitchat_s() {
        // Cassandra convicts when PHI_FACTOR × elapsed / mean > threshold.
        let chitchat_threshold = DEFAULT_PHI_CONVICT_THRESHOLD / PHI_FACTOR;
        assert!((chitchat_threshold - 8.0 * std::f64::consts::LN_10).abs() < 1e-9);
        assert!((chitchat_threshold - 18.42).abs() < 0.01);
    }

    fn config(node: u8) -> MembershipConfig {
        let address: std::net::IpAddr = format!("127.0.0.{node}").parse().expect("ip");
        MembershipConfig {
            cluster_name: "c".to_string(),
            endpoint: Endpoint {
                host_id: locator::HostId(uuid::Uuid::from_u128(node.into())),
                broadcast_address: address,
                native_address: address,
                native_port: 9042,
                location: locator::Location {
                    datacenter: "dc1".to_string(),
                    rack: "rack1".to_string(),
                },
                state: NodeState::Normal,
            },
            tokens: vec![i64::from(node)],
            schema_version: uuid::Uuid::nil(),
            release_version: "5.0.4".to_string(),
            generation: 1,
            listen_address: SocketAddr::new(address, 7000),
            storage_port: 7000,
            seeds: vec!["127.0.0.1:7000".parse().expect("address")],
            gossip_interval: Duration::from_millis(200),
            phi_convict_threshold: DEFAULT_PHI_CONVICT_THRESHOLD,
            max_local_pause: DEFAULT_MAX_LOCAL_PAUSE,
            saved_peers: Vec::new(),
        }
    }

    fn statuses(events: &mut broadcast::Receiver<MembershipEvent>) -> Vec<(EventKind, u128)> {
        let mut seen = Vec::new();
        while let Ok(event) = events.try_recv() {
            seen.push((event.kind, event.host_id.0.as_u128()));
        }
        seen
    }

    /// One node stops alone (as under `SIGSTOP`) while its peers go on gossiping: holding its
    /// refresh and chitchat locks stops both its view refresher and its gossip server, and
    /// nothing else of it runs. Its peers convict it and see it back, once each; it keeps them
    /// up. (In one process its gossip server may revive the peers it convicts at the resume
    /// within one poll, before the refresher runs, so this does not by itself reproduce the
    /// transient DOWN a real process shows; `tests/cluster.rs`'s whole-process pauses do.)
    #[tokio::test(start_paused = true)]
    async fn a_node_paused_alone_keeps_its_peers_up_and_they_see_it_back() {
        let transport = chitchat::transport::ChannelTransport::default();
        let mut nodes = Vec::new();
        for node in 1..=3 {
            nodes.push(
                Membership::start(config(node), &transport)
                    .await
                    .expect("starts"),
            );
        }
        let converged = |nodes: &[Membership]| {
            nodes.iter().all(|m| {
                let view = m.view();
                view.members().count() == 3 && view.members().all(|member| member.live)
            })
        };
        while !converged(&nodes) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(Duration::from_secs(20)).await;
        let mut paused_events = nodes[0].subscribe();
        let mut peer_events = nodes[1].subscribe();
        {
            let _refresh = nodes[0].shared.refresh.lock().await;
            let _chitchat = nodes[0].shared.chitchat.lock().await;
            tokio::time::sleep(Duration::from_secs(25)).await;
        }
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert_eq!(statuses(&mut paused_events), [], "its peers stayed up");
        assert!(converged(&nodes));
        // Its peers rightly convicted it while it was silent, and saw it back.
        assert_eq!(
            statuses(&mut peer_events),
            [(EventKind::Down, 1), (EventKind::Up, 1)]
        );
    }

    async fn converged(nodes: &[&Membership], count: usize) {
        let all_up = |m: &&Membership| {
            let view = m.view();
            view.members().count() == count && view.members().all(|member| member.live)
        };
        while !nodes.iter().all(all_up) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A peer's process is gone (messaging's proof): convicted at once, one DOWN event, down
    /// for good while it is gone (phi's later conviction adds no event), and UP once it
    /// restarts.
    #[tokio::test(start_paused = true)]
    async fn a_peer_convicted_on_proof_is_down_at_once_until_it_restarts() {
        let transport = chitchat::transport::ChannelTransport::default();
        let one = Membership::start(config(1), &transport)
            .await
            .expect("starts");
        let two = Membership::start(config(2), &transport)
            .await
            .expect("starts");
        let three = Membership::start(config(3), &transport)
            .await
            .expect("starts");
        converged(&[&one, &two, &three], 3).await;
        tokio::time::sleep(Duration::from_secs(10)).await;
        let mut events = one.subscribe();
        let three_id = locator::HostId(uuid::Uuid::from_u128(3));
        drop(three);
        assert!(one.convict(three_id).await);
        assert!(!one.view().is_live(three_id), "down at once");
        assert!(!one.convict(three_id).await, "down already");
        assert!(
            !one.convict(one.view().local().endpoint.host_id).await,
            "never itself"
        );
        assert_eq!(statuses(&mut events), [(EventKind::Down, 3)]);
        // Long past phi's conviction: still down, no other event.
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(!one.view().is_live(three_id));
        assert_eq!(statuses(&mut events), []);
        // Node two, which got no proof, convicted it by phi meanwhile.
        assert!(!two.view().is_live(three_id));

        let mut restarted = config(3);
        restarted.generation = 2;
        let three = Membership::start(restarted, &transport)
            .await
            .expect("restarts");
        converged(&[&one, &two, &three], 3).await;
        assert_eq!(statuses(&mut events), [(EventKind::Up, 3)]);
    }

    /// A conviction of a process that is in fact alive (a false alarm) is lifted once its
    /// heartbeat advances past its settled last one: DOWN, then UP, a few rounds later.
    #[tokio::test(start_paused = true)]
    async fn a_false_conviction_is_lifted_when_the_peer_heartbeats_on() {
        let transport = chitchat::transport::ChannelTransport::default();
        let one = Membership::start(config(1), &transport)
            .await
            .expect("starts");
        let two = Membership::start(config(2), &transport)
            .await
            .expect("starts");
        converged(&[&one, &two], 2).await;
        let mut events = one.subscribe();
        let two_id = locator::HostId(uuid::Uuid::from_u128(2));
        // Through the queue, as messaging's listener does.
        one.convicter().convict(two_id);
        let convicted_at = tokio::time::Instant::now();
        while one.view().is_live(two_id) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(
            convicted_at.elapsed() < Duration::from_millis(100),
            "at once"
        );
        let mut view = one.watch_view();
        view.wait_for(|view| view.is_live(two_id))
            .await
            .expect("up again");
        let down_for = convicted_at.elapsed();
        let round = config(1).gossip_interval;
        assert!(
            down_for >= round * crate::conviction::SETTLE_ROUNDS,
            "{down_for:?}"
        );
        assert!(
            down_for <= round * (crate::conviction::SETTLE_ROUNDS + 3),
            "{down_for:?}"
        );
        assert_eq!(
            statuses(&mut events),
            [(EventKind::Down, 2), (EventKind::Up, 2)]
        );
        drop(two);
    }

    #[test]
    fn settings_cassandra_refuses_are_refused() {
        let config = MembershipConfig {
            cluster_name: "c".to_string(),
            endpoint: Endpoint {
                host_id: locator::HostId(uuid::Uuid::from_u128(1)),
                broadcast_address: "127.0.0.1".parse().expect("ip"),
                native_address: "127.0.0.1".parse().expect("ip"),
                native_port: 9042,
                location: locator::Location {
                    datacenter: "dc1".to_string(),
                    rack: "rack1".to_string(),
                },
                state: NodeState::Normal,
            },
            tokens: vec![1],
            schema_version: uuid::Uuid::nil(),
            release_version: "5.0.4".to_string(),
            generation: 1,
            listen_address: "127.0.0.1:7000".parse().expect("address"),
            storage_port: 7000,
            seeds: Vec::new(),
            gossip_interval: DEFAULT_GOSSIP_INTERVAL,
            phi_convict_threshold: DEFAULT_PHI_CONVICT_THRESHOLD,
            max_local_pause: DEFAULT_MAX_LOCAL_PAUSE,
            saved_peers: Vec::new(),
        };
        assert_eq!(config.validate(), Ok(()));
        let refused = |change: fn(&mut MembershipConfig)| {
            let mut changed = config.clone();
            change(&mut changed);
            changed.validate().expect_err("refused").to_string()
        };
        assert_eq!(
            refused(|c| c.phi_convict_threshold = 4.9),
            "phi_convict_threshold must be between 5 and 16"
        );
        assert_eq!(
            refused(|c| c.phi_convict_threshold = 16.1),
            "phi_convict_threshold must be between 5 and 16"
        );
        assert!(refused(|c| c.tokens.clear()).contains("at least one token"));
        assert!(refused(|c| c.tokens.push(i64::MIN)).contains("minimum token"));
        assert!(refused(|c| c.cluster_name.clear()).contains("cluster_name"));
        assert!(refused(|c| c.gossip_interval = Duration::ZERO).contains("interval"));
        assert_eq!(
            refused(|c| c.max_local_pause = Duration::ZERO),
            "max_local_pause must be positive"
        );
    }
}
