//! One simulated run: N nodes, each the real `MessagingService` over turmoil TCP, a
//! `LocalReplica` over a `MemoryEngine`, a `Coordinator::for_cluster` over a static ring
//! (RF=3, SimpleStrategy) on the node's skewed clock, and the metadata log (`metadata`), with
//! clients on every node writing and reading register-like keys at QUORUM and proposing
//! schema changes under the seed's faults, then reading every key at ALL from every node once
//! the faults healed. The history is checked by `history::check`, the metadata log by
//! `metadata::check`.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, UNIX_EPOCH};

use arc_swap::ArcSwap;
use coordinator::{
    ConsistencyLevel, Coordinator, Deadline, Endpoints, Replica, WallClock, WriteType,
};
use locator::{Endpoint, HostId, Location, NodeState, TokenMetadata};
use messaging::SplitMix64;
use messaging::{Environment, MessagingConfig, MessagingOptions, MessagingService, RandomSource};
use mutation::{
    Cell, CellValue, ClusteringSlice, ColumnData, PartitionKey, PartitionUpdate, ReadCommand,
    ReadResponse, Row, TableId,
};
use schema::{KeyspaceMetadata, Replication};
use storage::{Durability, MemoryEngine, StorageEngine};

use crate::faults::{clock_skews, schedule, Chaos, Fault, ScheduledFault};
use crate::hinted::{RunState, SimHints};
use crate::history::{check, History, Level, OpKind, Outcome, Violation};
use crate::membership::{
    GossipBug, GossipHistory, GossipLinks, GossipShared, GossipViolation, NodeGossip,
    CONVERGENCE_BOUND_MS,
};
use crate::metadata::{MetadataBug, MetadataHistory, MetadataShared, MetadataViolation};
use crate::network::TurmoilNetwork;

/// The one table of the run: `CREATE TABLE ks.registers (key blob PRIMARY KEY, value bigint)`.
pub(crate) const TABLE: TableId = TableId::from_u128(0x5151_0000_0000_0000_0000_0000_0000_0001);
/// The `value` column's id.
const VALUE_COLUMN: u32 = 1;
/// Where every node's messaging listens.
pub(crate) const STORAGE_PORT: u16 = 7000;
/// The longest wait between redials of a peer (messaging's `reconnect_max_backoff_ms`).
pub const RECONNECT_MAX_BACKOFF_MS: u64 = 500;
/// How long past `final_reads_ms` the replay of hints may take before the check after it is
/// made anyway (and the final reads, which wait for it, start): a peer restarted at the heal
/// is held up by gossip a few rounds later, and its connections redialled only then.
const HINT_REPLAY_GRACE_MS: u64 = 1_000;
/// The keyspace's replication factor (SimpleStrategy).
const REPLICATION_FACTOR: usize = 3;
/// The ring's tokens per node (vnodes), so each node's replicas vary by key.
const TOKENS_PER_NODE: usize = 4;

/// What a run does. [`SimConfig::new`] gives the defaults the test command uses.
#[derive(Debug, Clone)]
pub struct SimConfig {
    pub seed: u64,
    /// 3 to 9.
    pub nodes: usize,
    /// Register keys the clients share.
    pub keys: u32,
    /// Concurrent clients on each node's coordinator.
    pub clients_per_node: usize,
    /// Faults start here...
    pub faults_from_ms: u64,
    /// ...and all heal here; the clients stop here too.
    pub heal_ms: u64,
    /// The final reads at ALL start here: after the heal and the clients' last requests'
    /// timeouts, once connections are back.
    pub final_reads_ms: u64,
    /// A client request's timeout (its coordinator deadline).
    pub request_timeout_ms: u64,
    /// The consistency level the clients' writes and reads are really issued at. QUORUM;
    /// anything weaker plants a bug (the history still records QUORUM, as the checker
    /// believes).
    pub client_consistency: ConsistencyLevel,
    /// Messages dropped and delayed per thousand while faults run.
    pub drop_per_mille: u64,
    pub delay_per_mille: u64,
    /// The mean time between a node's metadata proposals (schema changes) while the faults
    /// run.
    pub metadata_think_ms: u64,
    /// A planted bug in a node's metadata log (`None`: none).
    pub metadata_bug: Option<MetadataBug>,
    /// Plants a bug in hinted handoff: every hint delivered is acknowledged by its target
    /// without being applied, as a replay that skips its hints (`hinted`).
    pub lose_hints: bool,
    /// A planted bug in how node 1 follows gossip (`None`: none).
    pub gossip_bug: Option<GossipBug>,
}

impl SimConfig {
    /// The defaults for `seed`: its node count (3 to 9) drawn from the seed.
    pub fn new(seed: u64) -> SimConfig {
        SimConfig {
            seed,
            nodes: 3 + (SplitMix64::new(seed).next_u64() % 7) as usize,
            keys: 4,
            clients_per_node: 2,
            faults_from_ms: 200,
            heal_ms: 2_000,
            // The clients' last requests end, and every connection's backoff, before.
            final_reads_ms: 2_000 + 500 + RECONNECT_MAX_BACKOFF_MS + 100,
            request_timeout_ms: 500,
            client_consistency: ConsistencyLevel::Quorum,
            drop_per_mille: 10,
            delay_per_mille: 20,
            metadata_think_ms: 700,
            metadata_bug: None,
            lose_hints: false,
            gossip_bug: None,
        }
    }
}

/// What a run found.
#[derive(Debug, Clone)]
pub struct RunReport {
    pub config: SimConfig,
    pub faults: Vec<ScheduledFault>,
    pub history: History,
    pub violations: Vec<Violation>,
    /// The metadata log's proposals and every node's applied log.
    pub metadata: MetadataHistory,
    pub metadata_violations: Vec<MetadataViolation>,
    pub end_ms: u64,
    /// Hints the nodes kept, and delivered, over the run.
    pub hints_stored: u64,
    pub hints_delivered: u64,
    /// Gossip's UP and DOWN events and when the views converged.
    pub gossip: GossipHistory,
    pub gossip_violations: Vec<GossipViolation>,
}

impl RunReport {
    /// Whether the run broke no invariant.
    pub fn is_clean(&self) -> bool {
        self.violations.is_empty()
            && self.metadata_violations.is_empty()
            && self.gossip_violations.is_empty()
    }

    /// The seed, its faults, and the first violation with the history around it.
    pub fn describe(&self) -> String {
        let mut text = format!(
            "seed {} ({} nodes, {} operations, {} metadata proposals): {} violation(s), {} of the metadata log, {} of gossip\nreplay: SIM_SEED={} cargo test -p sim --test seeds replay_one -- --nocapture\nfaults:\n",
            self.config.seed,
            self.config.nodes,
            self.history.ops().len(),
            self.metadata.proposals.len(),
            self.violations.len(),
            self.metadata_violations.len(),
            self.gossip_violations.len(),
            self.config.seed,
        );
        for fault in &self.faults {
            text += &format!("  {fault}\n");
        }
        if let Some(first) = self.violations.first() {
            text += &format!("first violation: {}", first.explain(&self.history));
        }
        if !self.gossip_violations.is_empty() {
            text += "gossip violations:\n";
            for v in &self.gossip_violations {
                text += &format!("  {v:?}\n");
            }
            text += &format!(
                "gossip events (ms observer/start peer up):\n{}",
                self.gossip.render()
            );
        }
        if !self.metadata_violations.is_empty() {
            text += "metadata violations:\n";
            for v in &self.metadata_violations {
                text += &format!("  {v:?}\n");
            }
            text += &format!(
                "applied logs:\n{}metadata proposals:\n{}",
                self.metadata.render_applied(),
                self.metadata.render()
            );
        }
        text
    }
}

/// The state shared by the harness and the nodes' software: it lives outside turmoil's hosts,
/// so it survives their crashes (each node's storage, as a synced commit log would).
pub(crate) struct Shared {
    pub(crate) config: SimConfig,
    names: Vec<String>,
    host_ids: Vec<HostId>,
    pub(crate) tokens: Vec<Vec<i64>>,
    engines: Vec<Arc<MemoryEngine>>,
    chaos: Vec<Arc<Chaos>>,
    /// How many times each node's software has started.
    starts: Vec<Mutex<u64>>,
    history: Mutex<History>,
    keyspace: KeyspaceMetadata,
    /// The run's link latency bound, which healed slow links return to.
    max_latency: Duration,
    /// The metadata log's directories and history.
    pub(crate) metadata: MetadataShared,
    /// Each node's clock skew, microseconds (`Fault::ClockSkew`).
    skews_micros: Vec<Arc<AtomicI64>>,
    /// Each node's hint store and the view that replays it (`hinted`).
    hints: SimHints,
    /// Gossip's links, views and events (`membership`).
    gossip: Arc<GossipShared>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs `config` to its end and checks its history. Panics only on a harness failure (a node's
/// software returning an error), never on a violation: those are in the report.
///
/// The run has a thread of its own, whose entropy (`getrandom`) is seeded by the run before
/// anything draws from it (`entropy`): chitchat's generator and std's hash maps follow it.
pub fn run(config: &SimConfig) -> RunReport {
    let config = config.clone();
    std::thread::Builder::new()
        .name(format!("sim-seed-{}", config.seed))
        .spawn(move || {
            crate::entropy::seed_thread(config.seed ^ 0xE7_7809);
            run_on_this_thread(&config)
        })
        .expect("a thread for the run")
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

fn run_on_this_thread(config: &SimConfig) -> RunReport {
    assert!((3..=9).contains(&config.nodes), "3 to 9 nodes");
    assert!(
        config.final_reads_ms
            > config.heal_ms + config.request_timeout_ms + RECONNECT_MAX_BACKOFF_MS,
        "the final reads start once the clients' requests have ended"
    );
    // openraft's election timeouts, drawn on this thread (turmoil runs every host on it).
    cluster_metadata::seed_rng(config.seed);
    let mut random = SplitMix64::new(config.seed);
    let max_latency = Duration::from_millis(1 + random.next_u64() % 20);
    let mut sim = turmoil::Builder::new()
        // A fixed epoch: write timestamps come from sim time, so they replay too.
        .epoch(UNIX_EPOCH + Duration::from_secs(1_700_000_000))
        .simulation_duration(Duration::from_secs(3_600))
        .min_message_latency(Duration::from_millis(1))
        .max_message_latency(max_latency)
        .enable_random_order()
        .rng_seed(config.seed)
        .build();
    let names: Vec<String> = (0..config.nodes).map(|i| format!("node{i}")).collect();
    let host_ids: Vec<HostId> = (0..config.nodes).map(crate::metadata::host_id).collect();
    let gossip = Arc::new(GossipShared::new(
        config.nodes,
        GossipLinks::new(max_latency, config.drop_per_mille, config.delay_per_mille),
        config.gossip_bug,
    ));
    let shared = Arc::new(Shared {
        config: config.clone(),
        names: names.clone(),
        hints: SimHints::new(config, host_ids.clone(), gossip.clone()),
        host_ids,
        tokens: (0..config.nodes)
            .map(|_| {
                (0..TOKENS_PER_NODE)
                    .map(|_| random.next_u64() as i64)
                    .filter(|t| *t != i64::MIN)
                    .collect()
            })
            .collect(),
        engines: (0..config.nodes)
            .map(|_| {
                let engine = MemoryEngine::new();
                engine.create_table(TABLE).expect("a new table");
                Arc::new(engine)
            })
            .collect(),
        chaos: (0..config.nodes)
            .map(|i| {
                Arc::new(Chaos::new(
                    config.seed ^ (i as u64) << 32,
                    config.drop_per_mille,
                    config.delay_per_mille,
                    50,
                ))
            })
            .collect(),
        starts: (0..config.nodes).map(|_| Mutex::new(0)).collect(),
        history: Mutex::default(),
        keyspace: keyspace(),
        max_latency,
        metadata: MetadataShared::new(config.nodes, config.metadata_bug),
        skews_micros: (0..config.nodes).map(|_| Arc::default()).collect(),
        gossip,
    });
    for (node, name) in names.iter().enumerate() {
        let shared = shared.clone();
        sim.host(name.as_str(), move || {
            let shared = shared.clone();
            async move { node_main(shared, node).await }
        });
    }
    let mut faults = schedule(
        config.seed,
        config.nodes,
        config.faults_from_ms,
        config.heal_ms,
    );
    let skews = clock_skews(
        config.seed,
        config.nodes,
        config.faults_from_ms,
        config.heal_ms,
    );
    if !skews.is_empty() {
        lock(&shared.history).judge_by_timestamps(true);
    }
    faults.extend(skews);
    // Stable: faults at the same time keep their order (the skews after the others).
    faults.sort_by_key(|f| f.at_ms);
    // The run ends once every node read every key at ALL and applied the same metadata log
    // with every token claim settled, or when they cannot have.
    let final_reads = config.nodes * config.keys as usize;
    let last_ms = (config.final_reads_ms
        + (u64::from(config.keys) + 1) * config.request_timeout_ms)
        .max(config.heal_ms + CONVERGENCE_BOUND_MS);
    let mut pending = faults.iter().peekable();
    let mut held = BTreeSet::new();
    let mut hint_violations = Vec::new();
    let mut leaderless_after_heal_ms = None;
    let end_ms = loop {
        let now_ms = sim.elapsed().as_millis() as u64;
        // After the heal and the replay of hints, before the final reads (which repair, and
        // wait for it).
        let last_chance = now_ms + 1 >= config.final_reads_ms + HINT_REPLAY_GRACE_MS;
        if shared.hints.due(now_ms) {
            let state = RunState {
                history: &lock(&shared.history),
                engines: &shared.engines,
            };
            hint_violations.extend(shared.hints.check(last_chance, &state).unwrap_or_default());
        }
        let gossip_converged = gossip_converged(&shared, now_ms);
        if now_ms >= config.heal_ms
            && leaderless_after_heal_ms.is_none()
            && shared.metadata.leader_agreed()
        {
            leaderless_after_heal_ms = Some(now_ms - config.heal_ms);
        }
        if now_ms >= last_ms
            || (lock(&shared.history).completed_at(Level::All) == final_reads
                && lock(&shared.metadata.history).settled()
                && gossip_converged)
        {
            break now_ms;
        }
        while let Some(f) = pending.next_if(|f| f.at_ms <= now_ms) {
            apply(&mut sim, &shared, &mut held, &f.fault);
        }
        if let Err(e) = sim.step() {
            panic!("seed {}: a node's software failed: {e}", config.seed);
        }
    };
    let history = lock(&shared.history).clone();
    let mut violations = check(&history, end_ms);
    violations.extend(hint_violations);
    let (hints_stored, hints_delivered) = shared.hints.totals();
    violations.extend(replicas_disagree(&shared));
    let mut metadata = shared.metadata.finish();
    metadata.leaderless_after_heal_ms = leaderless_after_heal_ms;
    let metadata_violations = crate::metadata::check(&metadata, &shared.tokens, end_ms);
    let gossip = lock(&shared.gossip.history).clone();
    let divergence = shared
        .gossip
        .divergence(&starts(&shared), &shared.host_ids, &shared.tokens);
    let gossip_violations = crate::membership::check(&gossip, &faults, config.heal_ms, divergence);
    RunReport {
        config: config.clone(),
        faults,
        history,
        violations,
        metadata,
        metadata_violations,
        end_ms,
        hints_stored,
        hints_delivered,
        gossip,
        gossip_violations,
    }
}

/// Each node's start count (its gossip generation).
fn starts(shared: &Shared) -> Vec<u64> {
    shared.starts.iter().map(|s| *lock(s)).collect()
}

/// Whether the gossip views have converged (after the heal), noting when they first did.
fn gossip_converged(shared: &Shared, now_ms: u64) -> bool {
    if now_ms < shared.config.heal_ms {
        return false;
    }
    if lock(&shared.gossip.history).converged_at_ms.is_some() {
        return true;
    }
    let diverged = shared
        .gossip
        .divergence(&starts(shared), &shared.host_ids, &shared.tokens);
    if diverged.is_none() {
        lock(&shared.gossip.history).converged_at_ms = Some(now_ms);
    }
    diverged.is_none()
}

/// Applies `fault`; `held` is the links partitions hold now (node pairs, lower first).
fn apply(
    sim: &mut turmoil::Sim<'_>,
    shared: &Shared,
    held: &mut BTreeSet<(usize, usize)>,
    fault: &Fault,
) {
    let names = &shared.names;
    shared.gossip.links.apply(fault, names.len());
    match fault {
        Fault::Partition { minority } => {
            for &a in minority {
                for b in (0..names.len()).filter(|b| !minority.contains(b)) {
                    sim.hold(names[a].as_str(), names[b].as_str());
                    held.insert((a.min(b), a.max(b)));
                }
            }
        }
        Fault::HealPartitions => {
            for a in 0..names.len() {
                for b in a + 1..names.len() {
                    sim.release(names[a].as_str(), names[b].as_str());
                }
            }
            held.clear();
        }
        Fault::SlowLink {
            a,
            b,
            max_latency_ms,
        } => sim.set_link_max_message_latency(
            names[*a].as_str(),
            names[*b].as_str(),
            Duration::from_millis(*max_latency_ms),
        ),
        Fault::HealSlowLinks => {
            for a in 0..names.len() {
                for b in a + 1..names.len() {
                    sim.set_link_max_message_latency(
                        names[a].as_str(),
                        names[b].as_str(),
                        shared.max_latency,
                    );
                }
            }
        }
        Fault::Crash(node) => {
            // Tokio drops a crashed runtime's tasks in an order that depends on its global
            // task ids (which other threads' runtimes advance), and each socket dropped sends
            // a segment whose latency turmoil draws from the run's generator: the draws would
            // follow that order, and a replay would diverge. Cutting the node's links first
            // makes those segments vanish without a draw. (So the crash also loses what the
            // node had in flight to its peers, as a power cut might.)
            let others: Vec<usize> = (0..names.len()).filter(|o| o != node).collect();
            for &o in &others {
                sim.partition(names[*node].as_str(), names[o].as_str());
            }
            sim.crash(names[*node].as_str());
            for &o in &others {
                sim.repair(names[*node].as_str(), names[o].as_str());
                if held.contains(&(o.min(*node), o.max(*node))) {
                    sim.hold(names[*node].as_str(), names[o].as_str());
                }
            }
            lock(&shared.history).crash(*node);
            lock(&shared.metadata.history).crash(*node);
        }
        Fault::Restart(node) => sim.bounce(names[*node].as_str()),
        Fault::Chaos(on) => {
            for chaos in &shared.chaos {
                chaos.set_enabled(*on);
            }
        }
        Fault::ClockSkew { node, skew_ms } => {
            shared.skews_micros[*node].store(skew_ms * 1_000, Ordering::Relaxed)
        }
    }
}

/// After the final reads at ALL (which repair what they read), every node's storage is read
/// directly: the nodes holding a key must hold the same value, and a written key must be held
/// by exactly the replication factor's nodes (there are no hints: only replicas are written).
fn replicas_disagree(shared: &Shared) -> Vec<Violation> {
    let mut found = Vec::new();
    for key in 0..shared.config.keys {
        let held: Vec<(usize, Option<u64>)> = shared
            .engines
            .iter()
            .enumerate()
            .map(|(node, engine)| {
                let page = engine
                    .read_partition(
                        TABLE,
                        &partition_key(key),
                        &ClusteringSlice::all(),
                        10,
                        None,
                    )
                    .expect("a memory engine reads");
                let value = register_value(&ReadResponse::Partition(page))
                    .expect("the harness writes only registers");
                (node, value)
            })
            .collect();
        let values: BTreeSet<u64> = held.iter().filter_map(|(_, v)| *v).collect();
        let holders = held.iter().filter(|(_, v)| v.is_some()).count();
        if values.len() > 1 || (holders != 0 && holders != REPLICATION_FACTOR) {
            found.push(Violation::ReplicasDisagree { key, held });
        }
    }
    found
}

fn keyspace() -> KeyspaceMetadata {
    let options = BTreeMap::from([
        ("class".to_string(), "SimpleStrategy".to_string()),
        (
            "replication_factor".to_string(),
            REPLICATION_FACTOR.to_string(),
        ),
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

/// `node`'s address (turmoil's DNS: every host is registered before the run starts).
pub(crate) fn address(shared: &Shared, node: usize) -> IpAddr {
    turmoil::lookup(shared.names[node].as_str())
}

fn endpoint(shared: &Shared, node: usize) -> Endpoint {
    Endpoint {
        host_id: shared.host_ids[node],
        broadcast_address: address(shared, node),
        native_address: address(shared, node),
        native_port: 9042,
        location: Location {
            datacenter: "dc1".to_string(),
            rack: "rack1".to_string(),
        },
        state: NodeState::Normal,
    }
}

/// `node`'s view of the static ring: every node with its tokens.
fn ring(shared: &Shared, node: usize) -> TokenMetadata {
    let mut ring = TokenMetadata::new(endpoint(shared, node), shared.tokens[node].clone())
        .expect("valid tokens");
    for peer in (0..shared.names.len()).filter(|p| *p != node) {
        ring = ring
            .with_normal_tokens(endpoint(shared, peer), shared.tokens[peer].clone())
            .expect("valid tokens");
    }
    ring
}

/// Sim time since the run started, milliseconds (on a simulated host).
pub(crate) fn now_ms() -> u64 {
    turmoil::sim_elapsed()
        .expect("on a simulated host")
        .as_millis() as u64
}

/// Write timestamps from sim time (turmoil's epoch plus its elapsed time), plus the node's
/// clock skew.
struct SimClock {
    skew_micros: Arc<AtomicI64>,
}

impl WallClock for SimClock {
    fn now_micros(&self) -> i64 {
        let now = turmoil::since_epoch().map_or(0, |d| d.as_micros() as i64);
        now + self.skew_micros.load(Ordering::Relaxed)
    }
}

/// The cluster as the node's coordinator sees it (as the node's `ClusterEndpoints`): this
/// node's replica, a `RemoteReplica` per peer, and who is up from this node's gossip view (a
/// request to a crashed or cut-off node times out until gossip convicts it, then fails
/// `Unavailable` before it is sent).
struct StaticEndpoints {
    local: HostId,
    node: usize,
    gossip: Arc<GossipShared>,
    local_replica: Arc<dyn Replica>,
    messaging: Arc<MessagingService>,
    remotes: RwLock<BTreeMap<HostId, Arc<dyn Replica>>>,
}

impl Endpoints for StaticEndpoints {
    fn replica(&self, endpoint: HostId) -> Option<Arc<dyn Replica>> {
        if endpoint == self.local {
            return Some(self.local_replica.clone());
        }
        let mut remotes = self.remotes.write().unwrap_or_else(PoisonError::into_inner);
        let replica = remotes
            .entry(endpoint)
            .or_insert_with(|| Arc::new(self.messaging.remote_replica(endpoint)));
        Some(replica.clone())
    }

    fn is_alive(&self, endpoint: HostId) -> bool {
        endpoint == self.local || self.gossip.is_live(self.node, endpoint)
    }
}

/// A node's software: messaging, replica and coordinator, its clients, and (once the faults
/// healed) its final reads. Runs until the run ends or the node crashes.
async fn node_main(shared: Arc<Shared>, node: usize) -> turmoil::Result {
    let start = {
        let mut starts = lock(&shared.starts[node]);
        *starts += 1;
        *starts
    };
    let host_id = shared.host_ids[node];
    let local_replica: Arc<dyn Replica> = Arc::new(replica::LocalReplica::new(
        shared.engines[node].clone(),
        Durability::Batch,
    ));
    // turmoil binds only the unspecified address (or loopback); peers reach the host's own.
    let listen = SocketAddr::new(IpAddr::from([0, 0, 0, 0]), STORAGE_PORT);
    let broadcast = SocketAddr::new(address(&shared, node), STORAGE_PORT);
    let messaging = MessagingService::start(
        MessagingConfig {
            host_id,
            cluster_name: "sim".to_string(),
            listen_address: listen,
            broadcast_address: Some(broadcast),
            generation: start,
            options: MessagingOptions {
                // Cassandra's cap is minutes; the run's whole fault phase lasts seconds, and
                // the final reads must find every connection back soon after the heal.
                reconnect_max_backoff_ms: RECONNECT_MAX_BACKOFF_MS,
                ..MessagingOptions::default()
            },
        },
        local_replica.clone(),
        Environment {
            network: Arc::new(TurmoilNetwork),
            random: Box::new(SplitMix64::new(
                shared.config.seed ^ start << 8 ^ node as u64,
            )),
            interceptor: shared.chaos[node].clone(),
        },
    )
    .await?;
    let messaging = Arc::new(messaging);
    for peer in (0..shared.names.len()).filter(|p| *p != node) {
        messaging.set_peer_address(
            shared.host_ids[peer],
            SocketAddr::new(address(&shared, peer), STORAGE_PORT),
        );
    }
    // Held for the node's life: the handler serving peers holds it weakly.
    let metadata = crate::metadata::start(&shared, node, &messaging, broadcast).await?;
    tokio::spawn(crate::metadata::member(
        shared.clone(),
        node,
        metadata.clone(),
        start,
    ));
    let endpoints = Arc::new(StaticEndpoints {
        local: host_id,
        node,
        gossip: shared.gossip.clone(),
        local_replica,
        messaging: messaging.clone(),
        remotes: RwLock::default(),
    });
    let timeout = Duration::from_millis(shared.config.request_timeout_ms);
    let ring = ring(&shared, node);
    let placement = (&ring, &shared.keyspace);
    let clock = Arc::new(SimClock {
        skew_micros: shared.skews_micros[node].clone(),
    });
    let (hint_store, _hints) =
        shared
            .hints
            .start_node(node, endpoints.clone(), clock.clone(), timeout, placement);
    let coordinator = Arc::new(
        Coordinator::for_cluster(Arc::new(ArcSwap::from_pointee(ring)), endpoints)
            .with_clock(clock)
            .with_hinted_handoff(hint_store.clone()),
    );
    let seeds = [0, 1].map(|seed| SocketAddr::new(address(&shared, seed), STORAGE_PORT));
    // Held for the node's life: dropping it stops its gossip.
    let _membership = shared
        .gossip
        .start_node(NodeGossip {
            node,
            start,
            seed: shared.config.seed ^ start << 16 ^ (node as u64) << 48 ^ 0x6055,
            endpoint: endpoint(&shared, node),
            tokens: shared.tokens[node].clone(),
            storage_port: STORAGE_PORT,
            seeds: seeds.to_vec(),
            messaging: &messaging,
            hints: hint_store.clone(),
            host_ids: &shared.host_ids,
        })
        .await?;
    let mut _clients = Vec::new();
    for client in 0..shared.config.clients_per_node {
        let seed = shared.config.seed ^ (node as u64) << 40 ^ (client as u64) << 20 ^ start;
        _clients.push(tokio::spawn(client_main(
            shared.clone(),
            coordinator.clone(),
            node,
            seed,
        )));
    }
    // Every node restarts by the heal, before the final reads' time.
    if now_ms() < shared.config.final_reads_ms {
        let wait_ms = shared.config.final_reads_ms - now_ms();
        tokio::time::sleep(Duration::from_millis(wait_ms)).await;
        shared.hints.checked().await;
        for key in 0..shared.config.keys {
            read(&shared, &coordinator, node, key, Level::All).await;
        }
    }
    // Keep serving peers' requests until the run ends (the clients' tasks end by themselves).
    let _serving = metadata;
    std::future::pending::<turmoil::Result>().await
}

/// One client: writes and reads random keys until the faults heal.
async fn client_main(shared: Arc<Shared>, coordinator: Arc<Coordinator>, node: usize, seed: u64) {
    let mut random = SplitMix64::new(seed);
    while now_ms() < shared.config.heal_ms {
        let think_ms = random.next_u64() % 60;
        tokio::time::sleep(Duration::from_millis(think_ms)).await;
        let key = (random.next_u64() % u64::from(shared.config.keys)) as u32;
        if random.next_u64().is_multiple_of(2) {
            write(&shared, &coordinator, node, key).await;
        } else {
            read(&shared, &coordinator, node, key, Level::Quorum).await;
        }
    }
}

pub(crate) fn partition_key(key: u32) -> PartitionKey {
    let bytes = key.to_be_bytes().to_vec();
    PartitionKey {
        token: SplitMix64::new(u64::from(key)).next_u64() as i64,
        key: bytes,
    }
}

async fn write(shared: &Shared, coordinator: &Coordinator, node: usize, key: u32) {
    let timeout_ms = shared.config.request_timeout_ms;
    let (id, value) = {
        let mut history = lock(&shared.history);
        let value = history.unique_value();
        let kind = OpKind::Write { value };
        let id = history.invoke(node, key, kind, Level::Quorum, now_ms(), timeout_ms);
        (id, value)
    };
    let timestamp = coordinator.next_timestamp();
    lock(&shared.history).set_write_timestamp(id, timestamp);
    let cell = Cell::live(timestamp, value.to_be_bytes().to_vec());
    shared.hints.wrote(value, timestamp);
    let update = PartitionUpdate {
        table: TABLE,
        key: partition_key(key),
        header: None,
        static_row: None,
        rows: vec![(
            Vec::new(),
            Row {
                liveness: None,
                deletion: None,
                columns: vec![ColumnData::Simple {
                    id: VALUE_COLUMN,
                    cell,
                }],
            },
        )],
    };
    let result = coordinator
        .write(
            &shared.keyspace,
            vec![update],
            shared.config.client_consistency,
            WriteType::Simple,
            Deadline::after(Duration::from_millis(timeout_ms)),
        )
        .await;
    let outcome = match result {
        Ok(()) => Outcome::Ok(None),
        Err(e) => Outcome::Failed(e.to_string()),
    };
    lock(&shared.history).complete(id, now_ms(), outcome);
}

async fn read(shared: &Shared, coordinator: &Coordinator, node: usize, key: u32, level: Level) {
    let timeout_ms = shared.config.request_timeout_ms;
    let id = lock(&shared.history).invoke(node, key, OpKind::Read, level, now_ms(), timeout_ms);
    let consistency = match level {
        Level::Quorum => shared.config.client_consistency,
        Level::All => ConsistencyLevel::All,
    };
    let command = ReadCommand::Partition {
        table: TABLE,
        key: partition_key(key),
        slice: ClusteringSlice::all(),
        max_rows: 10,
        resume: None,
    };
    let result = coordinator
        .read(
            &shared.keyspace,
            command,
            consistency,
            Deadline::after(Duration::from_millis(timeout_ms)),
        )
        .await;
    let outcome = match result {
        Ok(response) => match register_value(&response) {
            Ok(value) => Outcome::Ok(value),
            Err(e) => Outcome::Failed(e),
        },
        Err(e) => Outcome::Failed(e.to_string()),
    };
    lock(&shared.history).complete(id, now_ms(), outcome);
}

/// The register's value in a read's answer (`None`: no row).
fn register_value(response: &ReadResponse) -> Result<Option<u64>, String> {
    let ReadResponse::Partition(page) = response else {
        return Err("a range answer to a partition read".to_string());
    };
    let Some((_, row)) = page.data.rows.first() else {
        return Ok(None);
    };
    match row.columns.as_slice() {
        [ColumnData::Simple { id, cell }] if *id == VALUE_COLUMN => match &cell.value {
            CellValue::Live { value, .. } => {
                let bytes: [u8; 8] = value
                    .as_slice()
                    .try_into()
                    .map_err(|_| "a value not of 8 bytes".to_string())?;
                Ok(Some(u64::from_be_bytes(bytes)))
            }
            CellValue::Tombstone { .. } => Ok(None),
        },
        other => Err(format!("an unexpected row: {other:?}")),
    }
}
