//! The CQL native protocol server.
//!
//! Owns: the listening socket, the shards (one thread and single-threaded runtime per core,
//! each serving the connections placed on it: `shards.rs`), one task per connection (reading,
//! running its requests and writing their responses), protocol version negotiation,
//! compression and v5 framing switches,
//! many requests in flight per connection (answered out of order by stream id), the
//! per-connection bounds on requests in flight and unsent responses and the per-address and
//! node-wide bound on the bytes of requests in flight (backpressure: the connection stops
//! reading), event delivery to registered connections, graceful drain on
//! shutdown, and the single mapping from `query::QueryError` to protocol error codes.
//!
//! Must not know: CQL grammar or semantics (the query crate executes statements), storage.

mod connection;
mod connection_limits;
mod errors;
mod in_flight;
mod shards;

pub use connection::{answer, startup_compression, supported, Answer};
pub use shards::Shards;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use query::QueryProcessor;
use schema_service::SchemaService;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Largest frame (or reassembled v5 frame) accepted; larger ones get a protocol error and
    /// the connection is closed.
    pub max_frame_size_bytes: usize,
    /// Requests one connection may have in flight; beyond that the server stops reading from
    /// the socket until one completes.
    pub max_requests_per_connection: usize,
    /// Shard threads serving connections (one per core is the intent); at least one.
    pub shards: usize,
    /// Each shard's blocking pool, where its storage calls that may wait run.
    pub max_blocking_threads_per_shard: usize,
    /// `native_transport_max_request_data_in_flight`: bytes of requests being received or run
    /// on all connections together; past it, connections stop reading (`in_flight.rs`).
    pub max_request_data_in_flight_bytes: u64,
    /// `native_transport_max_request_data_in_flight_per_ip`: the same per client address.
    pub max_request_data_in_flight_per_ip_bytes: u64,
    /// Connections open at once, node-wide (Cassandra's
    /// `native_transport_max_concurrent_connections`); one past it is closed as soon as it is
    /// accepted (`connection_limits`).
    pub max_concurrent_connections: usize,
    /// Connections open at once from one client address
    /// (`native_transport_max_concurrent_connections_per_ip`); `None` for no cap.
    pub max_concurrent_connections_per_ip: Option<usize>,
}

/// Where the events a connection may REGISTER for come from: schema changes from the schema
/// service (the native protocol's SCHEMA_CHANGE), topology and status changes from membership
/// (TOPOLOGY_CHANGE, STATUS_CHANGE), beside it, not through the query processor.
#[derive(Clone)]
pub struct EventSources {
    pub schema: Arc<SchemaService>,
    /// Membership's changes, as the node sends them (`ClusterEvents::send`).
    pub cluster: ClusterEvents,
}

/// A change of the cluster a driver is told of: a node joined or left the ring
/// (TOPOLOGY_CHANGE), or was seen up or down (STATUS_CHANGE). The address is the node's
/// native-protocol address (`broadcast_rpc_address` and `native_transport_port`), the one a
/// driver connects to, as Cassandra's `Server.EventNotifier` sends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterEvent {
    NewNode(SocketAddr),
    RemovedNode(SocketAddr),
    Up(SocketAddr),
    Down(SocketAddr),
}

/// Events buffered per registered connection before a slow one misses some (it is told in the
/// log, as for schema events).
pub const CLUSTER_EVENT_BUFFER: usize = 256;

/// The channel membership's changes reach registered connections through: the node sends, each
/// connection that REGISTERed for TOPOLOGY_CHANGE or STATUS_CHANGE receives. Cheap to clone.
#[derive(Clone)]
pub struct ClusterEvents(tokio::sync::broadcast::Sender<ClusterEvent>);

impl ClusterEvents {
    pub fn new() -> ClusterEvents {
        ClusterEvents(tokio::sync::broadcast::channel(CLUSTER_EVENT_BUFFER).0)
    }

    /// Tells every registered connection of `event` (none registered: nothing happens).
    pub fn send(&self, event: ClusterEvent) {
        let _ = self.0.send(event);
    }

    pub(crate) fn subscribe(&self) -> tokio::sync::broadcast::Receiver<ClusterEvent> {
        self.0.subscribe()
    }
}

impl Default for ClusterEvents {
    fn default() -> ClusterEvents {
        ClusterEvents::new()
    }
}

/// How long shutdown waits for in-flight requests before closing connections anyway.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

pub struct Server {
    listener: TcpListener,
    /// Shared with the node when it started them (`Server::bind_on_shards`): whoever holds
    /// the last reference stops them.
    shards: Arc<shards::Shards>,
    processor: Arc<QueryProcessor>,
    events: EventSources,
    config: Arc<ServerConfig>,
    in_flight: Arc<in_flight::InFlightLimits>,
    limits: Arc<connection_limits::ConnectionLimits>,
}

impl Server {
    /// Listens at `addr`, serving connections on `config.shards` shards of its own.
    pub async fn bind(
        addr: SocketAddr,
        processor: Arc<QueryProcessor>,
        events: EventSources,
        config: ServerConfig,
    ) -> std::io::Result<Server> {
        let shards = shards::Shards::start(config.shards, config.max_blocking_threads_per_shard)?;
        Server::bind_on_shards(addr, processor, events, config, Arc::new(shards)).await
    }

    /// Listens at `addr`, serving connections on `shards` (started by the caller, who may
    /// share them: the node runs internode messaging's lanes on them too; `config.shards` and
    /// `config.max_blocking_threads_per_shard` are not used). [`Server::run`] stops the shards
    /// only if it holds the last reference to them.
    pub async fn bind_on_shards(
        addr: SocketAddr,
        processor: Arc<QueryProcessor>,
        events: EventSources,
        config: ServerConfig,
        shards: Arc<shards::Shards>,
    ) -> std::io::Result<Server> {
        let listener = TcpListener::bind(addr).await?;
        let in_flight = in_flight::InFlightLimits::new(
            config.max_request_data_in_flight_bytes,
            config.max_request_data_in_flight_per_ip_bytes,
        );
        let limits = Arc::new(connection_limits::ConnectionLimits::new(
            config.max_concurrent_connections,
            config.max_concurrent_connections_per_ip,
        ));
        Ok(Server {
            listener,
            shards,
            processor,
            events,
            config: Arc::new(config),
            in_flight,
            limits,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)))
    }

    /// The number of shard threads serving connections.
    pub fn shard_count(&self) -> usize {
        self.shards.count()
    }

    /// Accepts connections until `shutdown` completes, placing each on a shard, then stops
    /// accepting, lets every connection finish its in-flight requests (up to
    /// [`DRAIN_TIMEOUT`]), stops the shards (unless shared: see [`Server::bind_on_shards`])
    /// and returns.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut connections = JoinSet::new();
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                _ = &mut shutdown => break,
                accepted = self.listener.accept() => match accepted {
                    Ok((socket, peer)) => {
                        let admitted = match self.limits.admit(peer.ip()) {
                            Ok(admitted) => admitted,
                            Err(refusal) => {
                                drop(socket); // closed, as Cassandra closes it
                                self.limits.warn(refusal, peer);
                                continue;
                            }
                        };
                        let _ = socket.set_nodelay(true);
                        let processor = self.processor.clone();
                        let events = self.events.clone();
                        let config = self.config.clone();
                        let in_flight = self.in_flight.clone();
                        let stop = stop_rx.clone();
                        let placed = self.shards.spawn(&mut connections, socket, peer, move |socket| async move {
                            // Its place under the caps is given back when the connection ends.
                            let _admitted = admitted;
                            connection::run(socket, peer, processor, events, config, in_flight, stop).await
                        });
                        if let Err(e) = placed {
                            tracing::warn!(%peer, error = %e, "cannot hand a connection to a shard");
                        }
                    }
                    Err(e) => {
                        // Out of file descriptors and the like: back off briefly, keep serving.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                },
                // Reap finished connections so the set does not grow without bound.
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
        drop(self.listener);
        let _ = stop_tx.send(true);
        let drained = tokio::time::timeout(DRAIN_TIMEOUT, async {
            while connections.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!("connections still busy after the drain timeout; closing them");
            connections.shutdown().await;
        }
        // Shared shards are stopped by their other holder, once it is done with them.
        let Ok(shards) = Arc::try_unwrap(self.shards) else {
            return;
        };
        // Joining the shard threads blocks: not on this runtime's worker.
        if tokio::task::spawn_blocking(move || shards.stop())
            .await
            .is_err()
        {
            tracing::error!("stopping the shards failed");
        }
    }
}
