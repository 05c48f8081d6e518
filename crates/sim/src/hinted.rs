//! Hinted handoff in the simulation: each node's coordinator keeps the writes its replicas
//! missed in the real `hints::HintStore` and replays them through the real `HintsService`,
//! and after the heal the run checks that the hints were delivered and that every
//! acknowledged write is on every one of its replicas.
//!
//! What stands in for what a node has:
//! - the disk: each node's store lives in [`SimHints`], outside turmoil's hosts, so it
//!   survives the node's crashes and restarts as its files would; its files are written with
//!   std::fs (deterministic) in a per-node directory under a temporary directory the run
//!   owns and removes. Keeping the store object itself (not reopening the files) also keeps
//!   hints still buffered at a crash: as the engines do ("a commit log synced on every
//!   write"), the simulation treats every kept hint as durable. A real node loses the hints of
//!   its last `hints_flush_period`; the e2e tests cover that. The service's file steps run
//!   inline (`hints::FileIo::Inline`): a step on tokio's blocking pool would finish at a point
//!   of sim time that depends on the real machine, and a seed would not replay.
//! - the replay's trigger is gossip's: a node's UP events call `target_up`, as the node's
//!   wiring does (`membership`); the harness adds one at the heal and once more after the
//!   clients' last requests ended, for the hints their timeouts kept (the service's own
//!   period is Cassandra's 10 s, longer than the run), and from then on for each peer with
//!   hints still pending.
//! - the store's view of who is up ([`SimView`], its `HintTargets`): the node's gossip view,
//!   as the node's; how long a target has been down is still the crash and restart schedule
//!   of the seed (a crashed node is down until its restart), which only `max_hint_window`
//!   reads, hours, longer than any run.
//!
//! The checks ([`SimHints::check`]), made once every node's store has no hint pending after
//! the clients' last requests, or a second past the final reads' time at the latest; the final
//! reads at ALL wait for them ([`SimHints::checked`]): they read-repair what they read, and
//! would hide a lost hint.
//! - "hints are delivered": no store holds a pending hint ([`Violation::HintsNotDelivered`]);
//! - every acknowledged write is readable at ONE from each of its replicas: each replica's
//!   engine, read directly, holds the write's cell or a later one
//!   ([`Violation::MissingAtOne`]). A write whose coordinator crashed before the write's
//!   timeout is left out: its coordinator may have died with a replica's copy in flight and
//!   before the timeout that hints it (Cassandra's gap too; repair closes it).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};
use std::time::Duration;

use coordinator::{Deadline, Endpoints, Mutation, ReadDigest, Replica, ReplicaFuture, WallClock};
use hints::{FileIo, HintStore, HintTargets, HintsConfig, HintsService, LocalDisk, TableLookup};
use locator::{HostId, TokenMetadata};
use mutation::{ClusteringSlice, ColumnData, ReadCommand, ReadResponse, TableId};
use schema::KeyspaceMetadata;
use storage::{MemoryEngine, StorageEngine};

use crate::cluster::{partition_key, TABLE};
use crate::faults::{schedule, Fault};
use crate::history::{History, OpKind, Outcome, Violation};
use crate::membership::GossipShared;

/// How often a node's [`SimView`] looks at who is up (gossip's round).
const VIEW_PERIOD: Duration = Duration::from_millis(100);
/// The table's `gc_grace_seconds` (Cassandra's default): no hint of the run expires.
const GC_GRACE_SECONDS: u32 = 864_000;
/// How often a node's buffered hints are written to its files.
const FLUSH_PERIOD: Duration = Duration::from_millis(100);

/// Hinted handoff's state for a whole run: kept by the harness, outside the nodes.
pub(crate) struct SimHints {
    /// The run's hint directories (removed with it).
    root: tempfile::TempDir,
    host_ids: Vec<HostId>,
    /// Each node's store, opened at its first start and kept across its restarts.
    stores: Vec<Mutex<Option<Arc<HintStore>>>>,
    /// Each node's view (the replicas of its current incarnation), shared by its store.
    views: Vec<Arc<SimView>>,
    /// The write timestamp of each value written (values are unique), for the check.
    timestamps: Mutex<BTreeMap<u64, i64>>,
    /// When the faults heal, and the clients' last requests have ended (sim ms).
    heal_ms: u64,
    quiet_ms: u64,
    /// Each node's crash times (sim ms), from the schedule.
    crashes: Vec<Vec<u64>>,
    /// Whether the check ran.
    checked: Mutex<bool>,
    /// Each key's replicas (node indexes), from the first node's start (the ring is static;
    /// placing a key needs the nodes' addresses, which only a simulated host can look up).
    replicas: OnceLock<Vec<Vec<usize>>>,
    keys: u32,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Who is up as node `node` sees it, and the replicas to deliver its hints through: the
/// `hints::HintTargets` of its store.
pub(crate) struct SimView {
    node: usize,
    /// Who is up: the node's gossip view.
    gossip: Arc<GossipShared>,
    host_ids: Vec<HostId>,
    /// Per node, the `[crash, restart)` spans of sim time it is down (restart `u64::MAX` if
    /// none before the heal; every node is up from the heal on): how long a target has been
    /// down (`HintTargets::downtime`, against `max_hint_window`, hours, longer than any run).
    down: Vec<Vec<(u64, u64)>>,
    heal_ms: u64,
    /// The endpoints of the node's current incarnation (its messaging), set at each start.
    endpoints: RwLock<Option<Arc<dyn Endpoints>>>,
    /// The planted bug (`SimConfig::lose_hints`).
    lose_hints: bool,
}

impl SimView {
    fn index(&self, host: HostId) -> Option<usize> {
        self.host_ids.iter().position(|h| *h == host)
    }

    /// Since when `node` is down at `now_ms`, if it is.
    fn down_since(&self, node: usize, now_ms: u64) -> Option<u64> {
        if now_ms >= self.heal_ms {
            return None;
        }
        self.down[node]
            .iter()
            .find(|(from, to)| *from <= now_ms && now_ms < *to)
            .map(|(from, _)| *from)
    }
}

fn sim_now_ms() -> u64 {
    turmoil::sim_elapsed().map_or(0, |d| d.as_millis() as u64)
}

impl HintTargets for SimView {
    fn is_alive(&self, host: HostId) -> bool {
        self.gossip.is_live(self.node, host)
    }

    fn downtime(&self, host: HostId) -> Option<Duration> {
        let now = sim_now_ms();
        let since = self.down_since(self.index(host)?, now)?;
        Some(Duration::from_millis(now - since))
    }

    fn replica(&self, host: HostId) -> Option<Arc<dyn Replica>> {
        let endpoints = self
            .endpoints
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()?;
        let replica = endpoints.replica(host)?;
        if self.lose_hints {
            return Some(Arc::new(LoseMutations(replica)));
        }
        Some(replica)
    }

    fn node_count(&self) -> usize {
        self.host_ids.len()
    }

    fn datacenter(&self, host: HostId) -> Option<String> {
        // The run's ring is one data centre (`cluster::endpoint`).
        self.index(host).map(|_| "dc1".to_string())
    }
}

/// The planted bug: a replica that acknowledges every mutation and applies none (the hints
/// delivered through it are lost).
struct LoseMutations(Arc<dyn Replica>);

impl Replica for LoseMutations {
    fn apply_mutation(&self, _: Mutation, _: Deadline) -> ReplicaFuture<()> {
        Box::pin(async { Ok(()) })
    }

    fn read(&self, command: ReadCommand, deadline: Deadline) -> ReplicaFuture<ReadResponse> {
        self.0.read(command, deadline)
    }

    fn digest(&self, command: ReadCommand, deadline: Deadline) -> ReplicaFuture<ReadDigest> {
        self.0.digest(command, deadline)
    }

    fn truncate(&self, table: TableId, deadline: Deadline) -> ReplicaFuture<()> {
        self.0.truncate(table, deadline)
    }
}

/// The run's one table, which is never dropped.
struct OneTable(TableId);

impl TableLookup for OneTable {
    fn gc_grace_seconds(&self, table: TableId) -> Option<u32> {
        (table == self.0).then_some(GC_GRACE_SECONDS)
    }
}

/// What [`SimHints::check`] needs of the run.
pub(crate) struct RunState<'a> {
    pub(crate) history: &'a History,
    /// Each node's storage.
    pub(crate) engines: &'a [Arc<MemoryEngine>],
}

impl RunState<'_> {
    /// The write timestamp `node`'s storage holds for `key`'s register (`None`: none).
    fn held(&self, node: usize, key: u32) -> Option<i64> {
        let page = self.engines[node]
            .read_partition(
                TABLE,
                &partition_key(key),
                &ClusteringSlice::all(),
                10,
                None,
            )
            .expect("a memory engine reads");
        let (_, row) = page.data.rows.first()?;
        row.columns.iter().find_map(|c| match c {
            ColumnData::Simple { cell, .. } => Some(cell.timestamp),
            _ => None,
        })
    }
}

impl SimHints {
    /// The hints of a run of `config`'s seed: its crash schedule drawn as the harness draws it.
    pub(crate) fn new(
        config: &crate::SimConfig,
        host_ids: Vec<HostId>,
        gossip: Arc<GossipShared>,
    ) -> SimHints {
        let nodes = host_ids.len();
        let mut down: Vec<Vec<(u64, u64)>> = vec![Vec::new(); nodes];
        let mut crashes: Vec<Vec<u64>> = vec![Vec::new(); nodes];
        for f in schedule(config.seed, nodes, config.faults_from_ms, config.heal_ms) {
            match f.fault {
                Fault::Crash(n) => {
                    down[n].push((f.at_ms, u64::MAX));
                    crashes[n].push(f.at_ms);
                }
                Fault::Restart(n) => {
                    if let Some(span) = down[n].last_mut().filter(|s| s.1 == u64::MAX) {
                        span.1 = f.at_ms;
                    }
                }
                _ => {}
            }
        }
        let views = (0..nodes)
            .map(|node| {
                Arc::new(SimView {
                    node,
                    gossip: gossip.clone(),
                    host_ids: host_ids.clone(),
                    down: down.clone(),
                    heal_ms: config.heal_ms,
                    endpoints: RwLock::new(None),
                    lose_hints: config.lose_hints,
                })
            })
            .collect();
        SimHints {
            root: tempfile::tempdir().expect("a temporary directory for the run's hints"),
            stores: (0..nodes).map(|_| Mutex::new(None)).collect(),
            views,
            host_ids,
            timestamps: Mutex::default(),
            heal_ms: config.heal_ms,
            // The last requests' deadlines fire within a few ticks of their time.
            quiet_ms: config.heal_ms + config.request_timeout_ms + 20,
            crashes,
            checked: Mutex::new(false),
            replicas: OnceLock::new(),
            keys: config.keys,
        }
    }

    /// Records the timestamp of the write of `value`.
    pub(crate) fn wrote(&self, value: u64, timestamp: i64) {
        lock(&self.timestamps).insert(value, timestamp);
    }

    fn directory(&self, node: usize) -> PathBuf {
        self.root.path().join(format!("node{node}"))
    }

    /// Starts hinted handoff on `node`'s new incarnation, whose replicas are `endpoints`: its
    /// store (opened at its first start, kept since), the service's tasks and the view's
    /// (on the node's runtime: they end with it). The store is the coordinator's
    /// `HintedHandoff`; the service must be kept as long as the node runs.
    pub(crate) fn start_node(
        &self,
        node: usize,
        endpoints: Arc<dyn Endpoints>,
        clock: Arc<dyn WallClock>,
        request_timeout: Duration,
        placement: (&TokenMetadata, &KeyspaceMetadata),
    ) -> (Arc<HintStore>, HintsService) {
        self.replicas.get_or_init(|| {
            let (ring, keyspace) = placement;
            (0..self.keys)
                .map(|key| {
                    keyspace
                        .replication
                        .strategy()
                        .natural_replicas(ring, partition_key(key).token)
                        .into_iter()
                        .filter_map(|h| self.host_ids.iter().position(|x| *x == h))
                        .collect()
                })
                .collect()
        });
        let view = self.views[node].clone();
        *view
            .endpoints
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(endpoints);
        let store = lock(&self.stores[node])
            .get_or_insert_with(|| {
                let mut config = HintsConfig::new(self.host_ids[node], self.directory(node));
                config.flush_period = FLUSH_PERIOD;
                config.delivery_timeout = request_timeout;
                config.file_io = FileIo::Inline;
                Arc::new(
                    HintStore::open(
                        config,
                        view.clone(),
                        Arc::new(OneTable(TABLE)),
                        clock,
                        Arc::new(LocalDisk),
                    )
                    .expect("the run's hint directory opens"),
                )
            })
            .clone();
        let service = HintsService::start(store.clone());
        tokio::spawn(follow_view(
            view,
            store.clone(),
            node,
            self.heal_ms,
            self.quiet_ms,
        ));
        (store, service)
    }

    /// Hints kept and hints delivered, all nodes together, over the run.
    pub(crate) fn totals(&self) -> (u64, u64) {
        self.stores
            .iter()
            .filter_map(|s| lock(s).clone())
            .flat_map(|store| store.stats())
            .fold((0, 0), |(s, d), t| (s + t.stored, d + t.delivered))
    }

    /// Whether the checks are still to make at `now_ms` (sim ms), the clients' last requests
    /// over: the harness calls [`SimHints::check`] then.
    pub(crate) fn due(&self, now_ms: u64) -> bool {
        now_ms >= self.quiet_ms && !*lock(&self.checked)
    }

    /// Returns once the checks were made (on a simulated host: polls in sim time). The final
    /// reads wait for it, as they repair what they read.
    pub(crate) async fn checked(&self) {
        while !*lock(&self.checked) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// The checks after replay (see the module's header), once: when every store has no hint
    /// pending after the clients' last requests, or at `last_chance` (the replay's time is
    /// up) whatever the stores hold. `None` until then.
    pub(crate) fn check(&self, last_chance: bool, run: &RunState<'_>) -> Option<Vec<Violation>> {
        let mut checked = lock(&self.checked);
        if *checked {
            return None;
        }
        let pending: Vec<(usize, HostId, u64)> = self
            .stores
            .iter()
            .enumerate()
            .filter_map(|(n, s)| lock(s).clone().map(|s| (n, s)))
            .flat_map(|(n, store)| {
                store
                    .stats()
                    .into_iter()
                    .filter(|t| t.pending > 0)
                    .map(move |t| (n, t.host, t.pending))
            })
            .collect();
        if !pending.is_empty() && !last_chance {
            return None;
        }
        *checked = true;
        let mut found: Vec<Violation> = pending
            .into_iter()
            .map(|(node, host, pending)| Violation::HintsNotDelivered {
                node,
                target: self
                    .host_ids
                    .iter()
                    .position(|h| *h == host)
                    .unwrap_or(usize::MAX),
                pending,
            })
            .collect();
        found.extend(self.missing_at_one(run));
        Some(found)
    }

    /// Every acknowledged write (its coordinator not crashed before its timeout) that one of
    /// its replicas does not hold (nor a later write of its key).
    fn missing_at_one(&self, run: &RunState<'_>) -> Vec<Violation> {
        let timestamps = lock(&self.timestamps);
        // Per key, the latest acknowledged write that counts: if a replica holds it (or
        // later), it holds every earlier one's effect too.
        let mut latest: BTreeMap<u32, (i64, usize)> = BTreeMap::new();
        for op in run.history.ops() {
            let (OpKind::Write { value }, Outcome::Ok(_)) = (&op.kind, &op.outcome) else {
                continue;
            };
            let deadline_ms = op.invoked_ms + op.timeout_ms;
            let coordinator_crashed = self.crashes[op.node]
                .iter()
                .any(|&c| op.invoked_ms <= c && c <= deadline_ms);
            if coordinator_crashed {
                continue;
            }
            let ts = *timestamps
                .get(value)
                .expect("every write's timestamp is recorded");
            let entry = latest.entry(op.key).or_insert((ts, op.id));
            if ts > entry.0 {
                *entry = (ts, op.id);
            }
        }
        let mut found = Vec::new();
        for (&key, &(ts, write)) in &latest {
            let replicas = self.replicas.get().map_or(&[][..], |r| &r[key as usize]);
            for &node in replicas {
                let held = run.held(node, key);
                if held.is_none_or(|h| h < ts) {
                    found.push(Violation::MissingAtOne { key, node, write });
                }
            }
        }
        found
    }
}

/// What node `node` adds to gossip's UP events (`membership`, which call `target_up` as the
/// node's wiring does): at the heal and once the clients' last requests ended (`quiet_ms`),
/// `target_up` for every peer its view holds up, and from then on, every `VIEW_PERIOD`, for
/// every peer with hints still pending (a delivery that failed is tried again without its
/// backoff): the service's own period is Cassandra's 10 s, longer than the run.
async fn follow_view(
    view: Arc<SimView>,
    store: Arc<HintStore>,
    node: usize,
    heal_ms: u64,
    quiet_ms: u64,
) {
    let peers: Vec<usize> = (0..view.host_ids.len()).filter(|p| *p != node).collect();
    let mut last_ms = sim_now_ms();
    loop {
        tokio::time::sleep(VIEW_PERIOD).await;
        let now = sim_now_ms();
        let all = (last_ms < heal_ms && heal_ms <= now) || (last_ms < quiet_ms && quiet_ms <= now);
        let pending: Vec<HostId> = store
            .stats()
            .into_iter()
            .filter(|t| t.pending > 0)
            .map(|t| t.host)
            .collect();
        for peer in &peers {
            let host = view.host_ids[*peer];
            let up = view.gossip.is_live(node, host);
            // Once everything healed, a target with hints is not left to a backoff: the run's
            // final reads come within a second, Cassandra's next try might not.
            let healed_with_hints = now >= quiet_ms && pending.contains(&host);
            if up && (all || healed_with_hints) {
                store.target_up(host);
            }
        }
        last_ms = now;
    }
}
