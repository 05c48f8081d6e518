//! This node's place in the cluster: its gossip generation and the peers it knew (kept in
//! storage's meta space, as Cassandra keeps them in `system.local` and `system.peers`),
//! membership started from them, and the tasks that follow membership: each new view's ring
//! handed to the node (coordinator, `system.peers`), each change told to registered
//! connections, and this node's schema version gossiped after every schema change.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use gossip::{ClusterView, EventKind, Member, Membership, MembershipConfig};
use locator::{Endpoint, HostId, Location, NodeState, Token};
use schema_service::SchemaService;
use storage::StorageEngine;

const GENERATION_KEY: &[u8] = b"local/gossip_generation";
const PEERS_KEY: &[u8] = b"local/peers";

/// This start's gossip generation, stored before it is used: the current time in seconds, or
/// the stored one plus one if that is not larger (Cassandra's
/// `SystemKeyspace.incrementAndGetGeneration`), so that it grows at every restart even if the
/// clock went back.
pub fn next_generation(engine: &dyn StorageEngine) -> Result<u64> {
    let stored = match engine.get_meta(GENERATION_KEY)? {
        Some(bytes) => Some(u64::from_be_bytes(
            bytes
                .as_slice()
                .try_into()
                .context("corrupt stored gossip generation")?,
        )),
        None => None,
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let generation = match stored {
        Some(stored) if stored >= now => stored + 1,
        _ => now,
    };
    engine.put_meta(GENERATION_KEY, &generation.to_be_bytes())?;
    Ok(generation)
}

/// A peer as this node keeps it between runs: enough to put it in the ring, down, before its
/// gossip arrives.
#[derive(serde::Serialize, serde::Deserialize)]
struct SavedPeer {
    host_id: uuid::Uuid,
    broadcast_address: std::net::IpAddr,
    storage_port: u16,
    native_address: std::net::IpAddr,
    native_port: u16,
    datacenter: String,
    rack: String,
    tokens: Vec<Token>,
    release_version: String,
}

/// The peers this node knew when it last ran (none on a first start).
pub fn saved_peers(engine: &dyn StorageEngine) -> Result<Vec<Member>> {
    let Some(bytes) = engine.get_meta(PEERS_KEY)? else {
        return Ok(Vec::new());
    };
    let saved: Vec<SavedPeer> =
        serde_json::from_slice(&bytes).context("corrupt stored list of peers")?;
    Ok(saved
        .into_iter()
        .map(|p| Member {
            endpoint: Endpoint {
                host_id: HostId(p.host_id),
                broadcast_address: p.broadcast_address,
                native_address: p.native_address,
                native_port: p.native_port,
                location: Location {
                    datacenter: p.datacenter,
                    rack: p.rack,
                },
                state: NodeState::Normal,
            },
            storage_address: SocketAddr::new(p.broadcast_address, p.storage_port),
            tokens: p.tokens,
            schema_version: uuid::Uuid::nil(),
            release_version: p.release_version,
            generation: 0,
            live: false,
        })
        .collect())
}

/// Keeps the ring members among `view`'s peers for the next start.
fn save_peers(engine: &dyn StorageEngine, view: &ClusterView) -> Result<()> {
    let peers: Vec<SavedPeer> = view
        .peers()
        .filter(|m| m.in_ring())
        .map(|m| SavedPeer {
            host_id: m.endpoint.host_id.0,
            broadcast_address: m.endpoint.broadcast_address,
            storage_port: m.storage_address.port(),
            native_address: m.endpoint.native_address,
            native_port: m.endpoint.native_port,
            datacenter: m.endpoint.location.datacenter.clone(),
            rack: m.endpoint.location.rack.clone(),
            tokens: m.tokens.clone(),
            release_version: m.release_version.clone(),
        })
        .collect();
    engine.put_meta(PEERS_KEY, &serde_json::to_vec(&peers)?)?;
    Ok(())
}

/// What the node does with membership's news.
pub struct Followers {
    /// Takes each new view (the ring, who is up): the coordinator's and `system.peers`'.
    pub on_view: Box<dyn Fn(&Arc<ClusterView>) + Send + Sync>,
    /// Registered connections' TOPOLOGY_CHANGE and STATUS_CHANGE events.
    pub events: cql_server::ClusterEvents,
}

/// Starts membership with `config` and the tasks that follow it (they end when membership
/// does). The peers in each new view are saved for the next start.
pub async fn start(
    config: MembershipConfig,
    engine: Arc<dyn StorageEngine>,
    schema: Arc<SchemaService>,
    followers: Followers,
) -> Result<Arc<Membership>> {
    let address = config.listen_address;
    let membership = Arc::new(
        Membership::start(config, &gossip::UdpTransport)
            .await
            .with_context(|| format!("cannot start gossip on {address}"))?,
    );
    let mut views = membership.watch_view();
    let on_view = followers.on_view;
    on_view(&views.borrow_and_update());
    tokio::spawn(async move {
        let mut saved: Vec<(HostId, Vec<Token>)> = Vec::new();
        while views.changed().await.is_ok() {
            let view = views.borrow_and_update().clone();
            on_view(&view);
            let ring: Vec<(HostId, Vec<Token>)> = view
                .peers()
                .filter(|m| m.in_ring())
                .map(|m| (m.endpoint.host_id, m.tokens.clone()))
                .collect();
            if ring != saved {
                let engine = engine.clone();
                let view = view.clone();
                let stored =
                    tokio::task::spawn_blocking(move || save_peers(engine.as_ref(), &view)).await;
                match stored {
                    Ok(Ok(())) => saved = ring,
                    Ok(Err(e)) => tracing::warn!("cannot save the list of peers: {e:#}"),
                    Err(e) => tracing::warn!("cannot save the list of peers: {e}"),
                }
            }
        }
    });
    let mut events = membership.subscribe();
    let sink = followers.events;
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
    let mut changes = schema.subscribe();
    let gossiped = Arc::downgrade(&membership);
    tokio::spawn(async move {
        use tokio::sync::broadcast::error::RecvError;
        loop {
            match changes.recv().await {
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return,
            }
            let Some(membership) = gossiped.upgrade() else {
                return;
            };
            membership
                .set_schema_version(schema.snapshot().version)
                .await;
        }
    });
    Ok(membership)
}

/// How often a node gossips; Cassandra's is one second.
pub const GOSSIP_INTERVAL: Duration = gossip::DEFAULT_GOSSIP_INTERVAL;
