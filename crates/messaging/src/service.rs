//! The messaging service: this node's listener, its connections to every peer, the requests
//! waiting for responses, the handlers of incoming verbs, and the counters.
//!
//! Connections are one-way, as Cassandra 4.0's: this node writes its requests *and its
//! responses* to a peer on its own outbound connections to that peer, and reads the peer's on
//! the connections the peer opened. A response so goes back on the responder's connection
//! chosen by the response's size, and no connection carries both directions' head-of-line
//! blocking. The handshake's broadcast address tells the acceptor where to send responses.
//!
//! A node started with shards has a lane per shard (`lanes.rs`): a request goes out on its
//! sender's shard's connections, is served on the same-numbered shard of the peer, and its
//! response comes back on that shard's connection to the sender's shard.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use bytes::Bytes;
use coordinator::{Deadline, Replica};
use locator::HostId;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::codec::{self, RemoteError};
use crate::environment::{Environment, OutboundInterceptor, RandomSource};
use crate::frame::{Frame, FrameKind};
use crate::handshake::MAX_CLUSTER_NAME_BYTES;
use crate::metrics::{Counters, MessagingMetrics, VerbCount};
use crate::network::Network;
use crate::options::MessagingOptions;
use crate::outbound::{EnqueueError, Outbound, Peer};
use crate::remote::RemoteReplica;
use crate::verb::Verb;

/// What a node's messaging service is started with.
#[derive(Debug, Clone)]
pub struct MessagingConfig {
    /// This node's host id: sent in every handshake, and refused when a dialer claims it.
    pub host_id: HostId,
    /// Cassandra's `cluster_name`: a node of another cluster is refused at the handshake.
    pub cluster_name: String,
    /// Where to listen (Cassandra's `listen_address` and `storage_port`). Port 0 takes a free
    /// port ([`MessagingService::listen_address`] says which).
    pub listen_address: SocketAddr,
    /// Where peers reach this node (Cassandra's `broadcast_address`); the bound listen address
    /// if `None`.
    pub broadcast_address: Option<SocketAddr>,
    /// This process's start generation (gossip's, greater than any earlier start's; 0 if
    /// unknown): every accepted handshake carries it, so a dialer knows which process of this
    /// node its connection reaches (`MessagingService::peer_restarted`).
    pub generation: u64,
    /// Bounds and timeouts.
    pub options: MessagingOptions,
}

/// Why a message did not get its answer.
#[derive(Debug, thiserror::Error)]
pub enum MessagingError {
    /// The listener could not bind (at start).
    #[error("cannot listen on {address}: {source}")]
    Bind {
        address: SocketAddr,
        source: std::io::Error,
    },
    /// The configuration cannot be used (at start).
    #[error("invalid messaging configuration: {0}")]
    Config(String),
    /// No address is known for the peer (`MessagingService::set_peer_address`).
    #[error("no address known for peer {0}")]
    UnknownPeer(HostId),
    /// No response by the request's deadline (the verb's timeout, or the caller's deadline if
    /// sooner).
    #[error("{verb} to {to} timed out")]
    Timeout { verb: Verb, to: HostId },
    /// The connection's queue was full: the message was dropped and counted (back-pressure).
    #[error("{verb} to {to} dropped: the outbound queue is full")]
    QueueFull { verb: Verb, to: HostId },
    /// The peer refused this node's handshake (another cluster, no common version); the
    /// connection retries after `refused_retry_ms`, and requests fail at once until then.
    #[error("{to} refused this node's connection: {reason}")]
    Refused { to: HostId, reason: String },
    /// The failure detector holds the peer down (`MessagingService::mark_down`): the request
    /// was not sent, or was waiting for its response when the peer was convicted.
    #[error("{to} is down")]
    PeerDown { to: HostId },
    /// The payload is over `max_message_bytes`: refused before it is queued.
    #[error("a message of {bytes} bytes is over the {cap_bytes}-byte cap")]
    TooLarge { bytes: usize, cap_bytes: usize },
    /// The peer answered with an error.
    #[error(transparent)]
    Remote(#[from] RemoteError),
    /// The peer's response is not a well-formed answer to the verb.
    #[error("malformed {verb} response from {from}: {detail}")]
    MalformedResponse {
        verb: Verb,
        from: HostId,
        detail: String,
    },
    /// The service is stopping or stopped.
    #[error("the messaging service is shut down")]
    Shutdown,
    /// `register_handler` for a built-in verb or one that already has a handler.
    #[error("verb {0} is built in or already has a handler")]
    HandlerTaken(Verb),
}

/// An extension verb handler's failure; the requester gets its message
/// (`RemoteError::Handler`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct HandlerError(pub String);

/// What a handler returns: the response payload, or an error for the requester.
pub type HandlerFuture = Pin<Box<dyn Future<Output = Result<Bytes, HandlerError>> + Send>>;

/// Serves an extension verb (Raft metadata, later hints and streaming): opaque bytes in, opaque
/// bytes out. `deadline` is the request's, recomputed on this node's clock; a handler should
/// not start work whose deadline has passed (the requester has stopped waiting). Any
/// `Fn(HostId, Bytes, Deadline) -> impl Future<Output = Result<Bytes, HandlerError>>` is one.
pub trait VerbHandler: Send + Sync + 'static {
    /// Serves one request from `from`; the bytes returned are the response's payload.
    fn handle(&self, from: HostId, payload: Bytes, deadline: Deadline) -> HandlerFuture;
}

impl<F, Fut> VerbHandler for F
where
    F: Fn(HostId, Bytes, Deadline) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Bytes, HandlerError>> + Send + 'static,
{
    fn handle(&self, from: HostId, payload: Bytes, deadline: Deadline) -> HandlerFuture {
        Box::pin(self(from, payload, deadline))
    }
}

/// The pending-response map is split by request id so concurrent requests rarely share a
/// lock.
const PENDING_SHARDS: usize = 16;

/// Peers learned from handshakes beyond this many are not recorded (their connection is
/// refused): far more nodes than a cluster has, few enough that the map stays small.
pub(crate) const MAX_LEARNED_PEERS: usize = 4096;

/// A request waiting for its response.
struct Pending {
    to: HostId,
    verb: Verb,
    done: oneshot::Sender<Result<Bytes, MessagingError>>,
}

/// The state every task of the service shares.
pub(crate) struct Inner {
    pub host_id: HostId,
    pub cluster_name: String,
    pub broadcast_address: SocketAddr,
    /// `MessagingConfig::generation`.
    pub generation: u64,
    pub options: MessagingOptions,
    pub network: Arc<dyn Network>,
    pub interceptor: Arc<dyn OutboundInterceptor>,
    pub random: Mutex<Box<dyn RandomSource>>,
    /// Serves the replica verbs from peers (`replica::LocalReplica` in the node).
    pub replica: Arc<dyn Replica>,
    handlers: RwLock<HashMap<Verb, Arc<dyn VerbHandler>>>,
    /// Every peer this node has an address for. Bounded by the cluster's size: entries come
    /// from `set_peer_address` and from accepted handshakes.
    peers: RwLock<HashMap<HostId, Arc<Peer>>>,
    /// Requests waiting for a response, by request id. Each entry is removed by its request
    /// (answered, timed out or cancelled), so the map holds at most the requests in flight.
    pending: [Mutex<HashMap<u64, Pending>>; PENDING_SHARDS],
    next_request_id: AtomicU64,
    pub counters: Counters,
    /// Limits the warnings about peers' bad input (`log_limit.rs`).
    pub bad_input_log: crate::log_limit::LogLimiter,
    /// `true` once the service is stopping; every task watches it.
    pub shutdown: watch::Sender<bool>,
    /// The runtimes the service's tasks run on: a lane per shard (its connections and the
    /// peers' connections served there) and the main lane (the runtime the service was
    /// started on: the listener, and the connections of every other thread).
    pub lanes: crate::lanes::Lanes,
    /// The listener and the outbound connections' tasks, awaited by `shutdown`. (Inbound
    /// connections are the listener's, handler tasks their connection's.)
    tasks: Mutex<Vec<JoinHandle<()>>>,
    /// Told of each peer whose process is gone (`MessagingService::on_peer_gone`).
    peer_gone: RwLock<Option<PeerGoneListener>>,
}

/// What [`MessagingService::on_peer_gone`] calls with the host id of a peer whose process is
/// gone. It runs on a connection's task: it must not block (send to a channel, or set a flag).
pub type PeerGoneListener = Arc<dyn Fn(HostId) + Send + Sync>;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Inner {
    pub fn is_shut_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// Keeps `task` to await at shutdown (and forgets the finished ones).
    pub fn track(&self, task: JoinHandle<()>) {
        let mut tasks = lock(&self.tasks);
        tasks.retain(|t| !t.is_finished());
        tasks.push(task);
    }

    pub fn peer(&self, host_id: HostId) -> Option<Arc<Peer>> {
        self.peers
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&host_id)
            .cloned()
    }

    /// Records where `host_id` is reached: a new peer, or a new address for a known one (used
    /// from the next connection attempt on).
    pub fn set_peer_address(&self, host_id: HostId, address: SocketAddr) {
        let mut peers = self.peers.write().unwrap_or_else(PoisonError::into_inner);
        match peers.get(&host_id) {
            Some(peer) => peer.set_address(address),
            None => {
                let peer = Peer::new(host_id, address, &self.options, self.lanes.count());
                peers.insert(host_id, Arc::new(peer));
            }
        }
    }

    /// Records the address a dialer's handshake gave (where this node answers it), unless the
    /// peer is new and `MAX_LEARNED_PEERS` are known already: dialers choose their host ids,
    /// so they must not grow the map without bound. Returns whether the peer is known.
    pub fn learn_peer_address(&self, host_id: HostId, address: SocketAddr) -> bool {
        let mut peers = self.peers.write().unwrap_or_else(PoisonError::into_inner);
        match peers.get(&host_id) {
            Some(peer) => peer.set_address(address),
            None if peers.len() >= MAX_LEARNED_PEERS => return false,
            None => {
                let peer = Peer::new(host_id, address, &self.options, self.lanes.count());
                peers.insert(host_id, Arc::new(peer));
            }
        }
        true
    }

    /// Tells the peer-gone listener, if there is one, that `host_id`'s process is gone.
    pub fn report_peer_gone(&self, host_id: HostId) {
        let listener = self
            .peer_gone
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(listener) = listener {
            listener(host_id);
        }
    }

    pub fn handler(&self, verb: Verb) -> Option<Arc<dyn VerbHandler>> {
        self.handlers
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&verb)
            .cloned()
    }

    fn pending_shard(&self, request_id: u64) -> &Mutex<HashMap<u64, Pending>> {
        &self.pending[(request_id % PENDING_SHARDS as u64) as usize]
    }

    /// Sends a request and waits for its response until the deadline: the caller's, capped by
    /// the verb's timeout.
    pub async fn request(
        self: &Arc<Self>,
        to: HostId,
        verb: Verb,
        payload: Bytes,
        deadline: Option<Deadline>,
    ) -> Result<Bytes, MessagingError> {
        let now = Instant::now();
        let longest = now + self.options.verb_timeout(verb);
        let deadline = deadline.map_or(longest, |d| d.instant().min(longest));
        if deadline <= now {
            self.counters.count(verb, VerbCount::Expired);
            return Err(MessagingError::Timeout { verb, to });
        }
        let cap_bytes = self.options.message_cap_bytes();
        if payload.len() > cap_bytes {
            return Err(MessagingError::TooLarge {
                bytes: payload.len(),
                cap_bytes,
            });
        }
        if self.is_shut_down() {
            return Err(MessagingError::Shutdown);
        }
        let peer = self.peer(to).ok_or(MessagingError::UnknownPeer(to))?;
        let request_id = self.next_request_id.fetch_add(1, Ordering::Relaxed);
        let (done, answer) = oneshot::channel();
        lock(self.pending_shard(request_id)).insert(request_id, Pending { to, verb, done });
        // Removes the entry however this future ends (answered, timed out, dropped).
        let _pending = PendingGuard {
            inner: self,
            request_id,
        };
        let message = Outbound {
            frame: Frame {
                kind: FrameKind::Request,
                verb,
                request_id,
                expires_in_ms: 0,
                payload,
            },
            deadline,
            queued_at: now,
        };
        if let Err(e) = peer.enqueue(self, message) {
            self.counters.count(verb, VerbCount::Dropped);
            return Err(e.into_error(verb, to));
        }
        match tokio::time::timeout_at(deadline, answer).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(MessagingError::Shutdown),
            Err(_) => {
                self.counters.count(verb, VerbCount::Timeout);
                Err(MessagingError::Timeout { verb, to })
            }
        }
    }

    /// Fails the request `request_id` now with `error` (its message could not be sent).
    pub fn fail(&self, request_id: u64, error: MessagingError) {
        if let Some(pending) = lock(self.pending_shard(request_id)).remove(&request_id) {
            let _ = pending.done.send(Err(error));
        }
    }

    /// Routes a response from `from` to the request it answers. A response nobody waits for
    /// any more (late), or from a peer the request did not go to, is counted and dropped.
    pub fn complete(&self, from: HostId, frame: Frame) {
        let mut shard = lock(self.pending_shard(frame.request_id));
        let expected = shard
            .get(&frame.request_id)
            .is_some_and(|p| p.to == from && p.verb == frame.verb);
        if !expected {
            drop(shard);
            Counters::add(&self.counters.unexpected_responses, 1);
            tracing::debug!(peer = %from, verb = %frame.verb, request_id = frame.request_id,
                "response to no request in flight (late, or not this peer's)");
            return;
        }
        let pending = shard
            .remove(&frame.request_id)
            .expect("checked under the same lock");
        drop(shard);
        let result = match codec::decode_response(frame.payload) {
            Ok(Ok(body)) => Ok(body),
            Ok(Err(remote)) => Err(MessagingError::Remote(remote)),
            Err(e) => Err(MessagingError::MalformedResponse {
                verb: frame.verb,
                from,
                detail: e.to_string(),
            }),
        };
        let _ = pending.done.send(result);
    }

    /// Queues the response to request `request_id` of `verb` from `to`. The response is
    /// dropped (and counted) if the connection's queue is full, or once `deadline` (the
    /// request's) passes: the requester has stopped waiting then.
    pub fn send_response(
        self: &Arc<Self>,
        to: HostId,
        verb: Verb,
        request_id: u64,
        payload: Bytes,
        deadline: Instant,
    ) {
        let Some(peer) = self.peer(to) else {
            tracing::debug!(peer = %to, %verb, "no address to answer the peer at");
            self.counters.count(verb, VerbCount::Dropped);
            return;
        };
        let message = Outbound {
            frame: Frame {
                kind: FrameKind::Response,
                verb,
                request_id,
                expires_in_ms: 0,
                payload,
            },
            deadline,
            queued_at: Instant::now(),
        };
        if let Err(e) = peer.enqueue(self, message) {
            self.counters.count(verb, VerbCount::Dropped);
            tracing::debug!(peer = %to, %verb, "response dropped: {}", e.into_error(verb, to));
        }
    }

    /// The failure detector convicted `host_id`: its requests fail now (`PeerDown`), queued or
    /// waiting for their responses, its connections close, and new messages to it are refused
    /// until `mark_up`. Nothing for a peer without a known address. Returns whether the peer
    /// was up.
    pub fn mark_down(&self, host_id: HostId) -> bool {
        let Some(peer) = self.peer(host_id) else {
            return false;
        };
        if !peer.set_up(false) {
            return false;
        }
        let mut failed = 0u64;
        for shard in &self.pending {
            let mut shard = lock(shard);
            let ids: Vec<u64> = shard
                .iter()
                .filter(|(_, p)| p.to == host_id)
                .map(|(id, _)| *id)
                .collect();
            for id in ids {
                let pending = shard.remove(&id).expect("listed under the same lock");
                let _ = pending
                    .done
                    .send(Err(MessagingError::PeerDown { to: host_id }));
                failed += 1;
            }
        }
        Counters::add(&self.counters.failed_peer_down, failed);
        tracing::info!(peer = %host_id, requests_failed = failed,
            "peer is down: its requests fail and its connections close until it is up");
        true
    }

    /// `host_id` is up again: messages to it are accepted, and its connections dial at once.
    /// Returns whether it was down.
    pub fn mark_up(&self, host_id: HostId) -> bool {
        let changed = self.peer(host_id).is_some_and(|peer| peer.set_up(true));
        if changed {
            tracing::info!(peer = %host_id, "peer is up: messages to it are sent again");
        }
        changed
    }

    /// `host_id` runs as a new process, started under `generation`: its connections
    /// handshaken with an older process close and redial at once, keeping their queues.
    /// Returns whether `generation` is newer than any seen before for the peer.
    pub fn peer_restarted(&self, host_id: HostId, generation: u64) -> bool {
        let newer = self
            .peer(host_id)
            .is_some_and(|peer| peer.restarted(generation));
        if newer {
            tracing::info!(peer = %host_id, generation,
                "peer restarted: connections to its old process close, its queued messages \
                 go to the new one");
        }
        newer
    }

    /// Forgets `host_id`: closes its connections and drops its queued messages.
    pub fn forget_peer(&self, host_id: HostId) {
        let removed = self
            .peers
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&host_id);
        if let Some(peer) = removed {
            peer.stop();
        }
    }

    /// Marks the service stopping, ends every peer's connection tasks and fails every waiting
    /// request with `Shutdown`.
    fn stop(&self) {
        self.shutdown.send_replace(true);
        for peer in self
            .peers
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
        {
            peer.stop();
        }
        self.fail_all_pending();
    }

    /// Fails every waiting request with `Shutdown`.
    fn fail_all_pending(&self) {
        for shard in &self.pending {
            for (_, pending) in lock(shard).drain() {
                let _ = pending.done.send(Err(MessagingError::Shutdown));
            }
        }
    }
}

/// Removes a request's pending entry when the request ends, however it ends.
struct PendingGuard<'a> {
    inner: &'a Inner,
    request_id: u64,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        lock(self.inner.pending_shard(self.request_id)).remove(&self.request_id);
    }
}

impl EnqueueError {
    pub(crate) fn into_error(self, verb: Verb, to: HostId) -> MessagingError {
        match self {
            EnqueueError::Full => MessagingError::QueueFull { verb, to },
            EnqueueError::Refused(reason) => MessagingError::Refused { to, reason },
            EnqueueError::Shutdown => MessagingError::Shutdown,
            EnqueueError::Forgotten => MessagingError::UnknownPeer(to),
            EnqueueError::Down => MessagingError::PeerDown { to },
        }
    }
}

/// A node's internode messaging (Cassandra's `MessagingService`, ScyllaDB's
/// `messaging_service`): listens for peers, keeps two lazily opened connections to each peer
/// (small and large messages), sends requests and routes their responses back, and serves
/// peers' requests: the replica verbs through the [`Replica`] given at start, other verbs
/// through registered [`VerbHandler`]s.
///
/// Owns its tasks: [`MessagingService::shutdown`] stops and awaits them, and dropping the
/// service stops them without waiting.
pub struct MessagingService {
    inner: Arc<Inner>,
    listen_address: SocketAddr,
}

impl MessagingService {
    /// Binds the listener and starts accepting peers. `replica` serves peers' replica verbs
    /// (`replica::LocalReplica` in the node). Every task of the service (listener,
    /// connections, peers' requests) runs on the runtime this is called on; requests may be
    /// sent from any runtime.
    pub async fn start(
        config: MessagingConfig,
        replica: Arc<dyn Replica>,
        environment: Environment,
    ) -> Result<MessagingService, MessagingError> {
        MessagingService::start_on_shards(config, replica, environment, Vec::new()).await
    }

    /// [`MessagingService::start`] with a lane per shard (`shards`: current-thread runtimes,
    /// each driven by one thread, as `cql_server::Shards`'s; ScyllaDB's shard-per-core
    /// messaging): a message sent from a shard's thread goes out on that shard's own
    /// connections to the peer, whose tasks run on the shard, and the peer serves it on its
    /// same-numbered shard (modulo its shard count), which answers on its own connection
    /// back, served on the sender's shard. So a request, the peer's replica work and the
    /// response stay on one thread per node. Everything else (the listener, the handshakes,
    /// messages from other threads and peers' messages from theirs) runs on the runtime this
    /// is called on. The shards must run until [`MessagingService::shutdown`] returns.
    pub async fn start_on_shards(
        config: MessagingConfig,
        replica: Arc<dyn Replica>,
        environment: Environment,
        shards: Vec<tokio::runtime::Handle>,
    ) -> Result<MessagingService, MessagingError> {
        if config.cluster_name.len() > MAX_CLUSTER_NAME_BYTES {
            return Err(MessagingError::Config(format!(
                "cluster_name is longer than {MAX_CLUSTER_NAME_BYTES} bytes"
            )));
        }
        let bind_error = |source| MessagingError::Bind {
            address: config.listen_address,
            source,
        };
        let listener = environment
            .network
            .bind(config.listen_address)
            .await
            .map_err(bind_error)?;
        let listen_address = listener.local_addr().map_err(bind_error)?;
        let inner = Arc::new(Inner {
            host_id: config.host_id,
            cluster_name: config.cluster_name,
            broadcast_address: config.broadcast_address.unwrap_or(listen_address),
            generation: config.generation,
            options: config.options,
            network: environment.network,
            interceptor: environment.interceptor,
            random: Mutex::new(environment.random),
            replica,
            handlers: RwLock::default(),
            peers: RwLock::default(),
            pending: Default::default(),
            next_request_id: AtomicU64::new(1),
            counters: Counters::default(),
            bad_input_log: crate::log_limit::LogLimiter::default(),
            shutdown: watch::Sender::new(false),
            lanes: crate::lanes::Lanes::new(shards, tokio::runtime::Handle::current()),
            tasks: Mutex::default(),
            peer_gone: RwLock::default(),
        });
        inner.lanes.register().await;
        let listening = tokio::spawn(crate::inbound::run_listener(inner.clone(), listener));
        inner.track(listening);
        tracing::info!(host_id = %inner.host_id, address = %listen_address,
            broadcast_address = %inner.broadcast_address, "messaging service listening");
        Ok(MessagingService {
            inner,
            listen_address,
        })
    }

    /// This node's host id, as its handshakes announce it.
    pub fn host_id(&self) -> HostId {
        self.inner.host_id
    }

    /// The address the listener is bound to.
    pub fn listen_address(&self) -> SocketAddr {
        self.listen_address
    }

    /// The address this node tells peers to answer it at.
    pub fn broadcast_address(&self) -> SocketAddr {
        self.inner.broadcast_address
    }

    /// Records where peer `host_id` listens (from the topology; membership will keep it
    /// current). A peer that connects to this node is recorded from its handshake too.
    pub fn set_peer_address(&self, host_id: HostId, address: SocketAddr) {
        self.inner.set_peer_address(host_id, address);
    }

    /// Forgets peer `host_id` (it left the cluster): closes this node's connections to it and
    /// drops the messages queued for it; requests to it then fail with `UnknownPeer` until its
    /// address is set again (or it connects to this node again).
    pub fn forget_peer(&self, host_id: HostId) {
        self.inner.forget_peer(host_id);
    }

    /// The failure detector convicted `host_id` (Cassandra's `convict`): every request to it,
    /// queued or waiting for its response, fails at once with `PeerDown` (a `RemoteReplica`'s
    /// caller sees `ReplicaError::Unreachable`, as for a replica it could not reach), its
    /// connections close, and requests to it fail at once without dialling until `mark_up`.
    /// Responses to it are dropped. Returns whether it was up (with a known address).
    pub fn mark_down(&self, host_id: HostId) -> bool {
        self.inner.mark_down(host_id)
    }

    /// The failure detector holds `host_id` up again (Cassandra's `onAlive`): messages to it
    /// are queued again and its connections dial at once, with no backoff left over from
    /// before. Returns whether it was down.
    pub fn mark_up(&self, host_id: HostId) -> bool {
        self.inner.mark_up(host_id)
    }

    /// Gossip sees `host_id` under a newer `generation`: it restarted (Cassandra's
    /// `StorageService.onRestart`, which interrupts the outbound connections). Each of its
    /// connections handshaken with an older process (or with one whose generation was unknown
    /// and dialled before this call) closes and redials at once, without backoff; one already
    /// handshaken with the new process stays. Unlike `mark_down`, nothing is failed or
    /// dropped: the queued messages — requests, and responses to the new process's requests —
    /// go out on the new connection. Requests already written to the old process are left to
    /// their deadlines (which connection a pending request went out on is not recorded).
    /// Returns whether `generation` is newer than any seen before for the peer (with a known
    /// address).
    pub fn peer_restarted(&self, host_id: HostId, generation: u64) -> bool {
        self.inner.peer_restarted(host_id, generation)
    }

    /// Calls `listener` with the host id of each peer whose process this service finds gone:
    /// a connection to it that was open closed (not for a conviction, a restart or this
    /// node's shutdown) and the dial that follows at once was refused by the operating system
    /// (`ECONNREFUSED`: nothing listens at its address). That is proof, not suspicion: the
    /// node hands it to the failure detector as a conviction (gossip's
    /// `Membership::convict`), which is how a killed peer is marked down within moments
    /// rather than when phi-accrual would convict it. A connect timeout, a handshake refusal
    /// or a fault-injected cut is not reported. Each peer is reported once per loss: again
    /// only after a connection to it has opened since. Replaces an earlier listener.
    pub fn on_peer_gone(&self, listener: impl Fn(HostId) + Send + Sync + 'static) {
        *self
            .inner
            .peer_gone
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(listener));
    }

    /// Keeps a connection open to `host_id` while it is up, whether or not anything is sent
    /// to it (the main lane's small connection, which dials now and redials when it is lost),
    /// so that its process going away is noticed (`on_peer_gone`) even when this node has
    /// nothing to send it: Cassandra's gossip keeps a connection to every live peer for the
    /// same reason. Nothing is written on it but what is sent. Returns whether it was not kept
    /// open before (false for a peer without a known address).
    pub fn keep_connected(&self, host_id: HostId) -> bool {
        self.inner
            .peer(host_id)
            .is_some_and(|peer| peer.keep_connected(&self.inner))
    }

    /// Whether messages to `host_id` are accepted (it has a known address and is not held
    /// down).
    pub fn is_up(&self, host_id: HostId) -> bool {
        self.inner.peer(host_id).is_some_and(|p| p.is_up())
    }

    /// `host_id`'s replica verbs over this service: what the coordinator holds for a peer.
    pub fn remote_replica(&self, host_id: HostId) -> RemoteReplica {
        RemoteReplica::new(self.inner.clone(), host_id)
    }

    /// Serves `verb` (an extension verb, `Verb::extension`) with `handler`. Fails for a
    /// built-in verb or one already registered.
    pub fn register_handler(
        &self,
        verb: Verb,
        handler: Arc<dyn VerbHandler>,
    ) -> Result<(), MessagingError> {
        let mut handlers = self
            .inner
            .handlers
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if verb.is_builtin() || handlers.contains_key(&verb) {
            return Err(MessagingError::HandlerTaken(verb));
        }
        handlers.insert(verb, handler);
        Ok(())
    }

    /// Sends `payload` as a `verb` request to `to` and waits for the response's payload, until
    /// `deadline` or the verb's timeout, whichever comes first.
    pub async fn request(
        &self,
        to: HostId,
        verb: Verb,
        payload: Bytes,
        deadline: Option<Deadline>,
    ) -> Result<Bytes, MessagingError> {
        self.inner.request(to, verb, payload, deadline).await
    }

    /// PING: whether `to` answers within the request timeout (or `deadline`).
    pub async fn ping(&self, to: HostId, deadline: Option<Deadline>) -> Result<(), MessagingError> {
        let body = self
            .inner
            .request(to, Verb::PING, Bytes::new(), deadline)
            .await?;
        codec::decode_empty(&body).map_err(|e| MessagingError::MalformedResponse {
            verb: Verb::PING,
            from: to,
            detail: e.to_string(),
        })
    }

    /// A snapshot of the service's counters.
    pub fn metrics(&self) -> MessagingMetrics {
        self.inner.counters.snapshot()
    }

    /// Stops listening, closes every connection, fails the requests still waiting
    /// (`Shutdown`), and waits for the service's tasks to end. Messages still queued are not
    /// sent.
    pub async fn shutdown(&self) {
        self.inner.stop();
        let tasks = std::mem::take(&mut *lock(&self.inner.tasks));
        for task in tasks {
            if let Err(e) = task.await {
                if e.is_panic() {
                    tracing::error!("messaging task panicked: {e}");
                }
            }
        }
        tracing::info!(host_id = %self.inner.host_id, "messaging service stopped");
    }
}

impl Drop for MessagingService {
    fn drop(&mut self) {
        self.inner.stop();
    }
}

/// Completes once the service is stopping (at once if it has stopped): what every task's
/// `select!` waits on beside its work.
pub(crate) async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    // An error means the sender is gone: the service is gone too.
    let _ = shutdown.wait_for(|stopping| *stopping).await;
}
