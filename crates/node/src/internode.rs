//! This node's place in the cluster, wired from the cluster crates in the order a node joins:
//! messaging (the replica verbs and the metadata log's messages, on `storage_port` over TCP),
//! membership (gossip on `storage_port` over UDP: who is up, and the seeds' host ids), the
//! cluster metadata log (Raft: the schema and the token ring, in `<data dir>/metadata`), this
//! node's ownership of its tokens proposed to the log, and then the tasks that follow them:
//! every applied token map becomes the ring the coordinator and `system.peers` read, every
//! membership change an event for registered connections, every schema change this node's
//! gossiped schema version.
//!
//! Who starts the metadata log: the first seed, when its metadata directory is new (a new
//! cluster); every other node joins it through the seeds. A seed whose data was lost must
//! not be started as the first seed of a running cluster (it would start a second log): as
//! in Cassandra, replacing a node is its own procedure (node lifecycle issue).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use arc_swap::ArcSwap;
use bytes::Bytes;
use cluster_metadata::{
    MetadataCommand, MetadataConfig, MetadataError, MetadataService, MetadataState, NodeOwnership,
    OwnershipState, RaftTransport, TransportError,
};
use coordinator::{Deadline, Endpoints, Replica};
use gossip::{ClusterView, EventKind, Membership, MembershipConfig};
use locator::{Endpoint, HostId, Token, TokenMetadata};
use messaging::{HandlerError, MessagingConfig, MessagingService, Verb};
use query::{PeerDetails, PeerDetailsMap};
use schema_service::SchemaService;

use crate::schema_catch_up::SchemaCatchUp;
use tokio::sync::watch;
use tokio::time::Instant;

/// The metadata log's messages between nodes (an extension verb of messaging's).
const METADATA_VERB: Verb = Verb::extension(64);

/// How this node takes part in the cluster (from its configuration).
pub struct ClusterSettings {
    pub cluster_name: String,
    /// What the messaging listener and the gossip socket bind.
    pub listen_address: IpAddr,
    /// Where peers reach this node.
    pub broadcast_address: IpAddr,
    pub storage_port: u16,
    /// The seeds' storage addresses (`seed_provider`): gossip (UDP) and messaging (TCP).
    pub seeds: Vec<SocketAddr>,
    pub phi_convict_threshold: f64,
    /// This start's gossip generation (greater than any earlier start's).
    pub generation: u64,
    /// How long a start waits to join the metadata log through the seeds.
    pub join_timeout: Duration,
    /// How long a metadata change (a DDL statement, this node's ownership) may take.
    pub metadata_timeout: Duration,
    /// Messaging through a fault injector (`fault_injection`, for tests).
    pub fault_injection: bool,
    /// Hinted handoff: where hints are kept, and how they are kept and replayed.
    pub hints: hints::HintsConfig,
    /// The CQL server's shards: messaging runs a lane on each (`MessagingService::
    /// start_on_shards`), so a write's internode hops stay on its shard's thread. They must
    /// run until `Cluster::shutdown` returns.
    pub shards: Vec<tokio::runtime::Handle>,
}

/// The running cluster services of this node.
pub struct Cluster {
    /// The ring every request is placed on, rebuilt from each applied token map.
    pub ring: Arc<ArcSwap<TokenMetadata>>,
    /// Who serves each endpoint's replica verbs, and who is up (for the coordinator).
    pub endpoints: Arc<ClusterEndpoints>,
    /// What gossip says of each peer (versions, up or down), for `system.peers`.
    pub peer_details: Arc<ArcSwap<PeerDetailsMap>>,
    pub messaging: Arc<MessagingService>,
    pub metadata: Arc<MetadataService>,
    pub membership: Arc<Membership>,
    /// The fault injector on messaging, when `fault_injection` is on.
    pub faults: Option<Arc<messaging::FaultInjector>>,
    /// Hinted handoff: the store the coordinator hands missed writes to, its flusher and its
    /// dispatcher.
    pub hints: hints::HintsService,
}

/// How long a starting node waits for its data centre's peers to be seen up before it serves
/// CQL (Cassandra's `block_for_peers_timeout_in_secs`).
pub const BLOCK_FOR_PEERS_TIMEOUT: Duration = Duration::from_secs(10);

impl Cluster {
    /// Waits until gossip shows every other node of this node's data centre in the ring up, or
    /// `timeout` passes (Cassandra's `StartupClusterConnectivityChecker`): a restarted node
    /// that served CQL at once would see its peers down for a gossip round or two and answer
    /// Unavailable to requests its replicas could serve. Answers the peers still down.
    pub async fn wait_for_peers(&self, timeout: Duration) -> Vec<IpAddr> {
        let ring = self.ring.load_full();
        let local = ring.local_host_id();
        let topology = ring.topology();
        let Some(dc) = topology.location(local).map(|l| l.datacenter.clone()) else {
            return Vec::new();
        };
        let peers: Vec<(HostId, IpAddr)> = topology
            .endpoints()
            .filter(|e| e.host_id != local && e.location.datacenter == dc)
            .map(|e| (e.host_id, e.broadcast_address))
            .collect();
        let mut view = self.membership.watch_view();
        let down = |view: &ClusterView| -> Vec<IpAddr> {
            peers
                .iter()
                .filter(|(host, _)| !view.is_live(*host))
                .map(|(_, address)| *address)
                .collect()
        };
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let still_down = down(&view.borrow_and_update());
            if still_down.is_empty() {
                return still_down;
            }
            match tokio::time::timeout_at(deadline, view.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => return still_down,
            }
        }
    }

    /// Stops hint delivery and flushes the hints kept (the coordinator hands over no more by
    /// then), then gossip (peers then see this node go down), then the metadata log and
    /// messaging.
    pub async fn shutdown(self) {
        self.hints.shutdown().await;
        drop(self.membership);
        if let Err(e) = self.metadata.shutdown().await {
            tracing::warn!("stopping the metadata log: {e}");
        }
        self.messaging.shutdown().await;
    }
}

/// Starts this node's cluster services and joins the cluster (module docs). `local` is this
/// node as the ring will know it, `tokens` its tokens; `local_replica` serves peers' replica
/// verbs; `schema` is opened replicated (`SchemaService::open_replicated`) and is made to
/// propose through the log; `events` receives membership's changes for registered
/// connections.
#[allow(clippy::too_many_arguments)]
pub async fn start(
    settings: ClusterSettings,
    data_dir: &Path,
    local: Endpoint,
    tokens: Vec<Token>,
    local_replica: Arc<dyn Replica>,
    schema: Arc<SchemaService>,
    events: cql_server::ClusterEvents,
) -> Result<Cluster> {
    let host_id = local.host_id;
    let storage_address = SocketAddr::new(settings.broadcast_address, settings.storage_port);
    let served_replica = Arc::new(SchemaCatchUp::new(local_replica.clone()));
    let (environment, faults) = crate::internode_faults::messaging_environment(
        host_id.0.as_u64_pair().1,
        settings.fault_injection,
    );
    let messaging = Arc::new(
        MessagingService::start_on_shards(
            MessagingConfig {
                host_id,
                cluster_name: settings.cluster_name.clone(),
                listen_address: SocketAddr::new(settings.listen_address, settings.storage_port),
                broadcast_address: Some(storage_address),
                generation: settings.generation,
                options: messaging::MessagingOptions::default(),
            },
            served_replica.clone(),
            environment,
            settings.shards.clone(),
        )
        .await
        .context("cannot start internode messaging")?,
    );

    let generation = settings.generation;
    let seeds = settings.seeds.clone();
    let membership = Arc::new(
        Membership::start(
            MembershipConfig {
                cluster_name: settings.cluster_name.clone(),
                endpoint: local.clone(),
                tokens: tokens.clone(),
                schema_version: schema.snapshot().version,
                release_version: crate::RELEASE_VERSION.to_string(),
                generation,
                listen_address: SocketAddr::new(settings.listen_address, settings.storage_port),
                storage_port: settings.storage_port,
                seeds: seeds.clone(),
                gossip_interval: gossip::DEFAULT_GOSSIP_INTERVAL,
                phi_convict_threshold: settings.phi_convict_threshold,
                max_local_pause: gossip::DEFAULT_MAX_LOCAL_PAUSE,
                saved_peers: Vec::new(),
            },
            &gossip::UdpTransport,
        )
        .await
        .context("cannot start gossip")?,
    );

    let transport = Arc::new(MessagingTransport {
        messaging: messaging.clone(),
    });
    let metadata = MetadataService::open(
        host_id.0,
        storage_address.to_string(),
        &data_dir.join("metadata"),
        transport,
        schema.applier(),
        MetadataConfig {
            cluster_name: settings.cluster_name.clone(),
            ..MetadataConfig::default()
        },
    )
    .await
    .context("cannot open the cluster metadata log")?;
    served_replica.catch_up_with(&metadata);
    let served = Arc::downgrade(&metadata);
    messaging
        .register_handler(
            METADATA_VERB,
            Arc::new(move |_from: HostId, payload: Bytes, _deadline: Deadline| {
                let served = served.clone();
                async move {
                    match served.upgrade() {
                        Some(metadata) => Ok(Bytes::from(metadata.handle(&payload).await)),
                        None => Err(HandlerError("the metadata log has stopped".to_string())),
                    }
                }
            }),
        )
        .context("cannot serve the metadata log's messages")?;

    // A node already in the group (a restart) needs no seed: Raft finds the others itself.
    let restarted = metadata
        .is_voter()
        .await
        .context("cannot read the cluster metadata log")?;
    if !restarted && seeds.first() == Some(&storage_address) {
        metadata
            .bootstrap()
            .await
            .context("cannot start the cluster metadata log")?;
    } else if !restarted {
        join_through_seeds(&metadata, &membership, &messaging, &seeds, &settings).await?;
    }
    schema
        .replicate_through(metadata.clone(), settings.metadata_timeout)
        .await
        .context("cannot take the cluster's schema")?;
    claim_tokens(&metadata, &local, &tokens, settings.metadata_timeout).await?;

    let state = metadata.state();
    let ring = Arc::new(ArcSwap::from_pointee(
        ring_of(&state.borrow(), host_id).context("this node is not in the ring it joined")?,
    ));
    let endpoints = Arc::new(ClusterEndpoints {
        local: host_id,
        local_replica,
        messaging: messaging.clone(),
        view: membership.watch_view(),
        remotes: RwLock::default(),
    });
    follow_ring(
        state,
        ring.clone(),
        messaging.clone(),
        settings.storage_port,
    );
    let peer_details = Arc::new(ArcSwap::from_pointee(PeerDetailsMap::new()));
    follow_peers(membership.watch_view(), peer_details.clone());
    crate::internode_faults::follow_liveness(membership.watch_view(), messaging.clone());
    // A peer whose process messaging finds gone (its connection lost, its port refusing
    // connections) is convicted at once, not when phi would (about 18 gossip rounds).
    let convicter = membership.convicter();
    messaging.on_peer_gone(move |host_id| convicter.convict(host_id));
    follow_events(&membership, events);
    let hints = start_hints(
        settings.hints,
        &membership,
        endpoints.clone(),
        ring.clone(),
        schema.clone(),
    )
    .await?;
    follow_schema(&membership, schema);
    Ok(Cluster {
        ring,
        endpoints,
        peer_details,
        messaging,
        metadata,
        membership,
        faults,
        hints,
    })
}

/// Opens the hint store in its directory (created if missing; its files checked) and starts
/// its flusher and dispatcher, which gossip's UP events start replaying a node's hints.
async fn start_hints(
    config: hints::HintsConfig,
    membership: &Membership,
    endpoints: Arc<ClusterEndpoints>,
    ring: Arc<ArcSwap<TokenMetadata>>,
    schema: Arc<SchemaService>,
) -> Result<hints::HintsService> {
    let targets = Arc::new(HintTargets {
        endpoints,
        ring,
        down_since: Arc::new(DownSince::follow(membership.watch_view())),
    });
    let directory = config.directory.clone();
    let store = tokio::task::spawn_blocking(move || {
        hints::HintStore::open(
            config,
            targets,
            Arc::new(SchemaTables(schema)),
            Arc::new(coordinator::SystemClock),
            Arc::new(hints::LocalDisk),
        )
    })
    .await?
    .with_context(|| format!("cannot open the hints directory {}", directory.display()))?;
    let service = hints::HintsService::start(Arc::new(store));
    let store = service.store().clone();
    let mut events = membership.subscribe();
    tokio::spawn(async move {
        use tokio::sync::broadcast::error::RecvError;
        loop {
            match events.recv().await {
                Ok(e) if e.kind == EventKind::Up => store.target_up(e.host_id),
                Ok(_) => {}
                // A missed UP is made up for by the dispatcher's periodic look.
                Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return,
            }
        }
    });
    Ok(service)
}

/// When each node was first seen down (gossip's view), for how long a hint's target has been
/// down (Cassandra's `Gossiper.getEndpointDowntime`). A node never seen up since this start
/// counts as down since the start.
struct DownSince {
    started: Instant,
    since: Arc<RwLock<HashMap<HostId, Instant>>>,
}

impl DownSince {
    fn follow(mut views: watch::Receiver<Arc<ClusterView>>) -> DownSince {
        let since: Arc<RwLock<HashMap<HostId, Instant>>> = Arc::default();
        let followed = Arc::downgrade(&since);
        tokio::spawn(async move {
            loop {
                let view = views.borrow_and_update().clone();
                let Some(since) = followed.upgrade() else {
                    return;
                };
                record_downs(&since, &view, Instant::now());
                drop(since);
                if views.changed().await.is_err() {
                    return;
                }
            }
        });
        DownSince {
            started: Instant::now(),
            since,
        }
    }

    fn down_for(&self, host: HostId) -> Duration {
        let since = self
            .since
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&host)
            .copied()
            .unwrap_or(self.started);
        since.elapsed()
    }
}

/// Notes when each peer of `view` that is down was first seen down, and forgets the ones up.
fn record_downs(since: &RwLock<HashMap<HostId, Instant>>, view: &ClusterView, now: Instant) {
    let mut since = since
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for member in view.peers() {
        let host = member.endpoint.host_id;
        if member.live {
            since.remove(&host);
        } else {
            since.entry(host).or_insert(now);
        }
    }
}

/// The cluster as the hint store sees it: gossip's liveness and this node's replicas of the
/// coordinator's endpoints, the ring's size.
struct HintTargets {
    endpoints: Arc<ClusterEndpoints>,
    ring: Arc<ArcSwap<TokenMetadata>>,
    down_since: Arc<DownSince>,
}

impl hints::HintTargets for HintTargets {
    fn is_alive(&self, host: HostId) -> bool {
        self.endpoints.is_alive(host)
    }

    fn downtime(&self, host: HostId) -> Option<Duration> {
        match self.endpoints.is_alive(host) {
            true => None,
            false => Some(self.down_since.down_for(host)),
        }
    }

    fn replica(&self, host: HostId) -> Option<Arc<dyn Replica>> {
        self.endpoints.replica(host)
    }

    fn node_count(&self) -> usize {
        self.ring.load().topology().endpoints().count()
    }

    fn datacenter(&self, host: HostId) -> Option<String> {
        self.ring
            .load()
            .topology()
            .endpoints()
            .find(|e| e.host_id == host)
            .map(|e| e.location.datacenter.clone())
    }
}

/// Tables' `gc_grace_seconds` from the schema in force (`None`: dropped).
struct SchemaTables(Arc<SchemaService>);

impl hints::TableLookup for SchemaTables {
    fn gc_grace_seconds(&self, table: mutation::TableId) -> Option<u32> {
        let schema = self.0.snapshot();
        schema
            .table_by_id(table)
            .map(|t| u32::try_from(t.options.gc_grace_seconds).unwrap_or(0))
    }
}

/// Forgets the coordinator's statistics of each table the schema no longer has (a DROP TABLE,
/// or a DROP KEYSPACE's tables) after every schema change, until the schema service stops: the
/// statistics map then holds no more than the schema's tables (`CoordinatorStats`). Compared
/// with the schema in force, as `SchemaTables` judges hints, so a missed event costs nothing
/// but a delay. A read that raced with the drop may bring a table's entry back; the next
/// change removes it.
pub fn forget_dropped_tables(
    schema: Arc<SchemaService>,
    stats: Arc<coordinator::CoordinatorStats>,
) {
    let mut changes = schema.subscribe();
    tokio::spawn(async move {
        use tokio::sync::broadcast::error::RecvError;
        loop {
            match changes.recv().await {
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return,
            }
            for table in stats.tables() {
                if schema.snapshot().table_by_id(table.table).is_none() {
                    stats.forget_table(table.table);
                }
            }
        }
    });
}

/// Joins the metadata log through the seeds gossip has found (their host ids come from
/// gossip), trying until `join_timeout`.
async fn join_through_seeds(
    metadata: &MetadataService,
    membership: &Membership,
    messaging: &MessagingService,
    seeds: &[SocketAddr],
    settings: &ClusterSettings,
) -> Result<()> {
    let deadline = Instant::now() + settings.join_timeout;
    let mut views = membership.watch_view();
    loop {
        let found: Vec<(uuid::Uuid, String)> = views
            .borrow_and_update()
            .peers()
            .filter(|m| seeds.contains(&m.storage_address))
            .map(|m| {
                messaging.set_peer_address(m.endpoint.host_id, m.storage_address);
                (m.endpoint.host_id.0, m.storage_address.to_string())
            })
            .collect();
        let left = deadline.saturating_duration_since(Instant::now());
        if !found.is_empty() {
            match metadata
                .join(&found, left.min(Duration::from_secs(10)))
                .await
            {
                Ok(()) => return Ok(()),
                Err(e) if Instant::now() >= deadline => {
                    return Err(e).context("cannot join the cluster through its seeds")
                }
                Err(e) => tracing::info!("joining the cluster: {e}; trying again"),
            }
        } else if left.is_zero() {
            bail!(
                "no seed ({}) answered gossip within {} s: cannot join the cluster",
                seeds
                    .iter()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                settings.join_timeout.as_secs()
            );
        } else {
            let _ = tokio::time::timeout(left.min(Duration::from_secs(1)), views.changed()).await;
        }
    }
}

/// Proposes this node's ownership of `tokens` (normal: there is no streaming yet, so a node
/// joins owning its ranges at once, as a new cluster's nodes do with `auto_bootstrap:
/// false`), unless the log already holds exactly that (a restart).
async fn claim_tokens(
    metadata: &MetadataService,
    local: &Endpoint,
    tokens: &[Token],
    timeout: Duration,
) -> Result<()> {
    let ownership = NodeOwnership {
        host_id: local.host_id.0,
        broadcast_address: local.broadcast_address,
        native_address: local.native_address,
        native_port: local.native_port,
        datacenter: local.location.datacenter.clone(),
        rack: local.location.rack.clone(),
        tokens: tokens.to_vec(),
        state: OwnershipState::Normal,
    };
    let held = metadata
        .state()
        .borrow()
        .nodes
        .get(&local.host_id.0)
        .cloned();
    if held.as_ref().is_some_and(|h| same_ownership(h, &ownership)) {
        return Ok(());
    }
    match metadata
        .propose(MetadataCommand::Ownership(ownership), timeout)
        .await
    {
        Ok(_) => Ok(()),
        Err(MetadataError::Refused(why)) => bail!("the cluster refused this node's tokens: {why}"),
        Err(e) => Err(e).context("cannot record this node's tokens in the cluster metadata"),
    }
}

fn same_ownership(a: &NodeOwnership, b: &NodeOwnership) -> bool {
    let sorted = |t: &[Token]| {
        let mut t = t.to_vec();
        t.sort_unstable();
        t
    };
    a.broadcast_address == b.broadcast_address
        && a.native_address == b.native_address
        && a.native_port == b.native_port
        && a.datacenter == b.datacenter
        && a.rack == b.rack
        && a.state == b.state
        && sorted(&a.tokens) == sorted(&b.tokens)
}

fn ring_of(state: &MetadataState, local: HostId) -> Result<TokenMetadata> {
    Ok(cluster_metadata::token_metadata(&state.nodes, local.0)?)
}

/// Rebuilds the ring from every applied token map, and tells messaging where each node is.
fn follow_ring(
    mut state: watch::Receiver<Arc<MetadataState>>,
    ring: Arc<ArcSwap<TokenMetadata>>,
    messaging: Arc<MessagingService>,
    storage_port: u16,
) {
    let local = ring.load().local_host_id();
    tokio::spawn(async move {
        loop {
            let current = state.borrow_and_update().clone();
            match ring_of(&current, local) {
                Ok(new) => {
                    for endpoint in new.peers() {
                        messaging.set_peer_address(
                            endpoint.host_id,
                            SocketAddr::new(endpoint.broadcast_address, storage_port),
                        );
                        // So that its death is noticed at once even when nothing is sent to
                        // it (gossip's `Up` asks too; its address may only come now).
                        messaging.keep_connected(endpoint.host_id);
                    }
                    ring.store(Arc::new(new));
                }
                Err(e) => tracing::error!("the cluster metadata's ring cannot be used: {e:#}"),
            }
            if state.changed().await.is_err() {
                return;
            }
        }
    });
}

/// Each gossip view's peers as `system.peers` shows them.
fn follow_peers(
    mut views: watch::Receiver<Arc<ClusterView>>,
    details: Arc<ArcSwap<PeerDetailsMap>>,
) {
    tokio::spawn(async move {
        loop {
            let view = views.borrow_and_update().clone();
            let peers: PeerDetailsMap = view
                .peers()
                .map(|m| {
                    let details = PeerDetails {
                        storage_port: m.storage_address.port(),
                        release_version: Some(m.release_version.clone()),
                        schema_version: Some(m.schema_version),
                        preferred_address: None,
                        up: m.live,
                    };
                    (m.endpoint.host_id, details)
                })
                .collect();
            details.store(Arc::new(peers));
            if views.changed().await.is_err() {
                return;
            }
        }
    });
}

/// How often this node measures and gossips its load (Cassandra's `LoadBroadcaster` waits a
/// minute; the measure is cheap here: RocksDB's per-table properties).
const LOAD_INTERVAL: Duration = Duration::from_secs(10);

/// Gossips `measure`'s answer (bytes stored, a blocking call) every `LOAD_INTERVAL`, until
/// membership stops.
pub fn publish_load(
    membership: &Arc<Membership>,
    measure: impl Fn() -> Result<u64> + Send + Sync + 'static,
) {
    let gossiped = Arc::downgrade(membership);
    let measure = Arc::new(measure);
    tokio::spawn(async move {
        loop {
            let measure = measure.clone();
            let load = tokio::task::spawn_blocking(move || measure()).await;
            let Some(membership) = gossiped.upgrade() else {
                return;
            };
            match load {
                Ok(Ok(bytes)) => membership.set_load(bytes).await,
                Ok(Err(e)) => tracing::debug!("cannot measure this node's load: {e:#}"),
                Err(e) => tracing::debug!("cannot measure this node's load: {e}"),
            }
            drop(membership);
            tokio::time::sleep(LOAD_INTERVAL).await;
        }
    });
}

/// Membership's changes to the connections registered for them.
fn follow_events(membership: &Membership, sink: cql_server::ClusterEvents) {
    let mut events = membership.subscribe();
    tokio::spawn(async move {
        use tokio::sync::broadcast::error::RecvError;
        loop {
            match events.recv().await {
                Ok(e) => sink.send(match e.kind {
                    EventKind::NewNode => cql_server::ClusterEvent::NewNode(e.address),
                    EventKind::RemovedNode => cql_server::ClusterEvent::RemovedNode(e.address),
                    EventKind::Up => cql_server::ClusterEvent::Up(e.address),
                    EventKind::Down => cql_server::ClusterEvent::Down(e.address),
                }),
                Err(RecvError::Lagged(n)) => {
                    tracing::warn!(missed = n, "fell behind on membership events")
                }
                Err(RecvError::Closed) => return,
            }
        }
    });
}

/// Gossips this node's schema version now (joining, it took the log's schema after gossip
/// started) and after every schema change.
fn follow_schema(membership: &Arc<Membership>, schema: Arc<SchemaService>) {
    let mut changes = schema.subscribe();
    let gossiped = Arc::downgrade(membership);
    tokio::spawn(async move {
        use tokio::sync::broadcast::error::RecvError;
        loop {
            let Some(membership) = gossiped.upgrade() else {
                return;
            };
            membership
                .set_schema_version(schema.snapshot().version)
                .await;
            drop(membership);
            if let Err(RecvError::Closed) = changes.recv().await {
                return;
            }
        }
    });
}

/// The metadata log's messages over messaging (`METADATA_VERB`).
struct MessagingTransport {
    messaging: Arc<MessagingService>,
}

/// How long one metadata message may wait for its answer (a snapshot's included).
const METADATA_MESSAGE_TIMEOUT: Duration = Duration::from_secs(10);

impl RaftTransport for MessagingTransport {
    fn send(
        &self,
        target: uuid::Uuid,
        address: &str,
        message: Vec<u8>,
    ) -> futures_util::future::BoxFuture<'static, Result<Vec<u8>, TransportError>> {
        let messaging = self.messaging.clone();
        let address = address.parse::<SocketAddr>();
        Box::pin(async move {
            let unreachable = |reason: String| TransportError::Unreachable {
                node: target,
                reason,
            };
            let address = address.map_err(|e| unreachable(format!("bad address: {e}")))?;
            let to = HostId(target);
            messaging.set_peer_address(to, address);
            let deadline = Deadline::at(Instant::now() + METADATA_MESSAGE_TIMEOUT);
            messaging
                .request(to, METADATA_VERB, Bytes::from(message), Some(deadline))
                .await
                .map(|reply| reply.to_vec())
                .map_err(|e| unreachable(e.to_string()))
        })
    }
}

/// The coordinator's view of the cluster's replicas: this node's storage for itself, a
/// messaging `RemoteReplica` for a peer, and gossip's failure detector for who is up.
pub struct ClusterEndpoints {
    local: HostId,
    local_replica: Arc<dyn Replica>,
    messaging: Arc<MessagingService>,
    view: watch::Receiver<Arc<ClusterView>>,
    remotes: RwLock<HashMap<HostId, Arc<dyn Replica>>>,
}

impl ClusterEndpoints {
    /// Whether gossip holds `endpoint` up now.
    fn live(&self, endpoint: HostId) -> bool {
        self.view.borrow().is_live(endpoint)
    }
}

impl Endpoints for ClusterEndpoints {
    fn replica(&self, endpoint: HostId) -> Option<Arc<dyn Replica>> {
        if endpoint == self.local {
            return Some(self.local_replica.clone());
        }
        if let Some(r) = self
            .remotes
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&endpoint)
        {
            return Some(r.clone());
        }
        let replica: Arc<dyn Replica> = Arc::new(self.messaging.remote_replica(endpoint));
        self.remotes
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(endpoint, replica.clone());
        Some(replica)
    }

    fn is_alive(&self, endpoint: HostId) -> bool {
        endpoint == self.local || self.live(endpoint)
    }
}
