//! A peer's outbound connections: two per lane (small and large messages; `lanes.rs`), each a
//! bounded queue and a task on its lane's runtime that dials the peer when there is something
//! to send, handshakes, writes the queue's messages, and redials with capped, jittered
//! exponential backoff when the connection fails. A message goes on the connection of the
//! lane it is sent from, so queueing it wakes no other thread.
//!
//! A connection remembers the generation of the peer's process it handshook with: when gossip
//! shows the peer under a newer one (`MessagingService::peer_restarted`), a connection to an
//! older process closes and redials at once, keeping its queue.
//!
//! A connection that was open and is lost (the peer ended it: no conviction, no restart)
//! redials at once, whether or not anything is queued; if the operating system refuses that
//! dial (`ECONNREFUSED`: nothing listens at the peer's address any more), the peer's process
//! is gone, and the service's peer-gone listener is told, once until a connection to the peer
//! opens again (`MessagingService::on_peer_gone`). A dial that connects and is ended during
//! the handshake, as a dying process's listener may do, leaves the question to the dial after
//! it. A timeout, a handshake refusal or a fault-injected cut (which drops messages and never
//! closes a connection) is no such proof, and is left to the failure detector. The main lane's small connection of a peer asked to be
//! kept connected (`MessagingService::keep_connected`) dials without waiting for a message,
//! so that a peer this node has nothing to send to is noticed going away too.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::BytesMut;
use locator::HostId;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, watch};
use tokio::time::{timeout, Instant};

use crate::environment::{reconnect_delay, Interception};
use crate::frame::{encode_frame, Frame, FrameKind, PROTOCOL_VERSION};
use crate::handshake::{self, ConnectionType, Hello, Reply};
use crate::metrics::{Counters, VerbCount};
use crate::network::Stream;
use crate::options::MessagingOptions;
use crate::service::{stopped, Inner, MessagingError};

/// A connection writes when its buffer reaches this, so one write covers many small messages
/// without holding a large one back.
const WRITE_BATCH_BYTES: usize = 64 * 1024;

/// A connection that lasted this long was healthy: when it closes, the peer is redialled at
/// once and the backoff starts over. One that closed sooner counts as a failed attempt.
const HEALTHY_CONNECTION: Duration = Duration::from_secs(1);

/// A message waiting on a connection.
pub(crate) struct Outbound {
    pub frame: Frame,
    /// Not written after this (the request's deadline; a response's request's): the
    /// requester has stopped waiting.
    pub deadline: Instant,
    /// When it was queued: a fault-injected delay counts from here.
    pub queued_at: Instant,
}

/// Why a message was not queued.
#[derive(Debug)]
pub(crate) enum EnqueueError {
    Full,
    Refused(String),
    Shutdown,
    /// The peer was forgotten (`MessagingService::forget_peer`) after the request found it.
    Forgotten,
    /// The failure detector holds the peer down (`MessagingService::mark_down`).
    Down,
}

/// One of a peer's connections: its queue, bounded in messages and payload bytes.
pub(crate) struct Connection {
    sender: mpsc::UnboundedSender<Outbound>,
    /// Taken by the connection's task when the first message starts it.
    receiver: Mutex<Option<mpsc::UnboundedReceiver<Outbound>>>,
    /// Messages and payload bytes queued and not yet written or discarded by the task. The
    /// channel itself is unbounded: these are its bounds, checked before a message goes in.
    queued_messages: AtomicUsize,
    queued_bytes: AtomicUsize,
    /// The peer's reason while it refuses this node's handshake: requests fail at once.
    refused: Mutex<Option<String>>,
}

/// A lane's two connections to a peer.
struct LaneConnections {
    small: Connection,
    large: Connection,
}

/// A peer and its connections, two per lane.
pub(crate) struct Peer {
    pub host_id: HostId,
    address: Mutex<SocketAddr>,
    /// Indexed by lane (`Lanes`): each lane's connections' tasks run on its runtime.
    lanes: Vec<LaneConnections>,
    capacity_messages: usize,
    capacity_bytes: usize,
    large_threshold_bytes: usize,
    /// Set when the service stops or the peer is forgotten: the peer's connection tasks
    /// watch it and end.
    stop: watch::Sender<bool>,
    /// The peer's liveness as the failure detector holds it (`MessagingService::mark_down`,
    /// `mark_up`). A peer is up until convicted.
    up: watch::Sender<Liveness>,
    /// The newest generation of the peer's process gossip has reported a restart to
    /// (`MessagingService::peer_restarted`); 0 until then. Only grows.
    generation: watch::Sender<u64>,
    /// Whether the peer's process was reported gone (`MessagingService::on_peer_gone`) since a
    /// connection to it last opened: it is reported once per loss, whichever of its
    /// connections finds it.
    gone_reported: AtomicBool,
    /// Whether the main lane's small connection is kept open while the peer is up, with or
    /// without messages to send (`MessagingService::keep_connected`).
    keep_open: watch::Sender<bool>,
}

/// What a peer's connection tasks watch to learn that it was convicted.
///
/// A `watch` keeps only the latest value, so a bare up/down flag loses a conviction that is
/// lifted before a task looks: `mark_down` then `mark_up` in one breath would leave the task
/// writing to the connection of a process the failure detector gave up on. The count
/// makes every conviction visible, however soon it is lifted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Liveness {
    /// `false` while the failure detector holds the peer down: messages to it are refused,
    /// its connections are closed and not redialled.
    up: bool,
    /// How many times the peer was convicted: a connection task that saw fewer closes its
    /// connection and discards its queue, even if the peer is up again by then.
    convictions: u64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Connection {
    fn new() -> Connection {
        let (sender, receiver) = mpsc::unbounded_channel();
        Connection {
            sender,
            receiver: Mutex::new(Some(receiver)),
            queued_messages: AtomicUsize::new(0),
            queued_bytes: AtomicUsize::new(0),
            refused: Mutex::new(None),
        }
    }

    /// Takes a message's share of the queue's bounds again (put back in the backlog), past
    /// them if need be: it was in the queue already.
    fn hold(&self, message: &Outbound) {
        self.queued_messages.fetch_add(1, Ordering::Relaxed);
        self.queued_bytes
            .fetch_add(message.frame.payload.len(), Ordering::Relaxed);
    }

    /// Gives back a message's share of the queue's bounds (written or discarded).
    fn release(&self, message: &Outbound) {
        self.queued_messages.fetch_sub(1, Ordering::Relaxed);
        self.queued_bytes
            .fetch_sub(message.frame.payload.len(), Ordering::Relaxed);
    }
}

impl Peer {
    /// A peer with `lanes` lanes' connections, none open yet.
    pub fn new(
        host_id: HostId,
        address: SocketAddr,
        options: &MessagingOptions,
        lanes: usize,
    ) -> Peer {
        Peer {
            host_id,
            address: Mutex::new(address),
            lanes: (0..lanes.max(1))
                .map(|_| LaneConnections {
                    small: Connection::new(),
                    large: Connection::new(),
                })
                .collect(),
            capacity_messages: options.queue_capacity_messages,
            capacity_bytes: options.queue_capacity_bytes,
            large_threshold_bytes: options.large_message_threshold_bytes,
            stop: watch::Sender::new(false),
            up: watch::Sender::new(Liveness {
                up: true,
                convictions: 0,
            }),
            generation: watch::Sender::new(0),
            gone_reported: AtomicBool::new(false),
            keep_open: watch::Sender::new(false),
        }
    }

    /// Keeps the main lane's small connection open while the peer is up (its task dials
    /// without waiting for a message, and redials when it is lost), starting its task if no
    /// message has yet. Returns whether it was not kept open before.
    pub fn keep_connected(self: &Arc<Self>, inner: &Arc<Inner>) -> bool {
        if inner.is_shut_down() || *self.stop.borrow() {
            return false;
        }
        let newly = !self.keep_open.send_replace(true);
        self.start_task(inner, inner.lanes.main(), ConnectionType::Small);
        newly
    }

    /// Whether this report of the peer's process being gone is the first since a connection
    /// to it last opened.
    fn first_gone_report(&self) -> bool {
        !self.gone_reported.swap(true, Ordering::Relaxed)
    }

    /// A connection to the peer opened: a later loss is reported again.
    fn connected(&self) {
        self.gone_reported.store(false, Ordering::Relaxed);
    }

    /// Starts the task of `lane`'s `connection_type` connection on the lane's runtime, unless
    /// it runs already.
    fn start_task(
        self: &Arc<Self>,
        inner: &Arc<Inner>,
        lane: usize,
        connection_type: ConnectionType,
    ) {
        let connection = self.connection(lane, connection_type);
        if let Some(receiver) = lock(&connection.receiver).take() {
            let task = inner.lanes.runtime(lane).spawn(run(
                inner.clone(),
                self.clone(),
                lane,
                connection_type,
                receiver,
            ));
            inner.track(task);
        }
    }

    /// The peer runs as a new process started under `generation`: its connection tasks close
    /// connections handshaken with an older process and redial at once, keeping their queues.
    /// Returns whether `generation` is newer than the newest known.
    pub fn restarted(&self, generation: u64) -> bool {
        self.generation.send_if_modified(|newest| {
            if generation <= *newest {
                return false;
            }
            *newest = generation;
            true
        })
    }

    /// Whether the peer is up (not convicted by the failure detector).
    pub fn is_up(&self) -> bool {
        self.up.borrow().up
    }

    /// Marks the peer up or down; returns whether that changed anything. Its connection tasks
    /// see the change at once: down, they close their connections and discard their queues
    /// (also when the peer is up again before they look); up, they dial again without
    /// waiting out a backoff.
    pub fn set_up(&self, up: bool) -> bool {
        self.up.send_if_modified(|current| {
            if current.up == up {
                return false;
            }
            current.up = up;
            if !up {
                current.convictions += 1;
            }
            true
        })
    }

    pub fn address(&self) -> SocketAddr {
        *lock(&self.address)
    }

    pub fn set_address(&self, address: SocketAddr) {
        *lock(&self.address) = address;
    }

    /// Ends the peer's connection tasks (service shutdown, or the peer forgotten).
    pub fn stop(&self) {
        self.stop.send_replace(true);
    }

    fn connection(&self, lane: usize, connection_type: ConnectionType) -> &Connection {
        let lane = &self.lanes[lane];
        match connection_type {
            ConnectionType::Small => &lane.small,
            ConnectionType::Large => &lane.large,
        }
    }

    /// Queues `message` on the calling thread's lane's connection its size picks, starting
    /// the connection's task (on the lane's runtime) if this is its first message. Refuses when the queue is at a bound (an empty queue takes
    /// any one message), while the peer refuses the handshake, or after shutdown.
    pub fn enqueue(
        self: &Arc<Self>,
        inner: &Arc<Inner>,
        message: Outbound,
    ) -> Result<(), EnqueueError> {
        let connection_type = if message.frame.payload.len() > self.large_threshold_bytes {
            ConnectionType::Large
        } else {
            ConnectionType::Small
        };
        // A lane beyond this peer's (cannot happen: every peer has the service's lanes) would
        // go on the main lane's.
        let lane = inner.lanes.current().min(self.lanes.len() - 1);
        let connection = self.connection(lane, connection_type);
        if let Some(reason) = lock(&connection.refused).as_ref() {
            return Err(EnqueueError::Refused(reason.clone()));
        }
        if inner.is_shut_down() {
            return Err(EnqueueError::Shutdown);
        }
        if *self.stop.borrow() {
            return Err(EnqueueError::Forgotten);
        }
        if !self.is_up() {
            return Err(EnqueueError::Down);
        }
        self.start_task(inner, lane, connection_type);
        let bytes = message.frame.payload.len();
        let messages_before = connection.queued_messages.fetch_add(1, Ordering::Relaxed);
        let bytes_before = connection.queued_bytes.fetch_add(bytes, Ordering::Relaxed);
        let over = messages_before >= self.capacity_messages
            || (messages_before > 0 && bytes_before + bytes > self.capacity_bytes);
        if over {
            connection.release(&message);
            return Err(EnqueueError::Full);
        }
        connection.sender.send(message).map_err(|e| {
            connection.release(&e.0);
            EnqueueError::Shutdown
        })
    }
}

/// Why a connection attempt failed.
#[derive(Debug, thiserror::Error)]
enum DialError {
    #[error("connect: {0}")]
    Connect(std::io::Error),
    #[error("connect timed out")]
    ConnectTimeout,
    #[error("{0}")]
    Handshake(#[from] handshake::HandshakeError),
    #[error("handshake timed out")]
    HandshakeTimeout,
    #[error("the peer refused the handshake: {0}")]
    Refused(String),
    #[error("the node at this address is {0}, not the peer expected")]
    WrongHost(HostId),
    #[error("the peer's process at this address is generation {found}, older than {newest}")]
    OldProcess { found: u64, newest: u64 },
}

/// Returned when the service is stopping: the task ends.
struct Stopping;

/// A connection's task and what it keeps between connections.
struct ConnectionTask {
    inner: Arc<Inner>,
    peer: Arc<Peer>,
    /// The lane whose connection this is (its runtime runs this task).
    lane: usize,
    connection_type: ConnectionType,
    receiver: mpsc::UnboundedReceiver<Outbound>,
    /// Messages taken off the channel and not yet written or discarded.
    backlog: VecDeque<Outbound>,
    shutdown: watch::Receiver<bool>,
    /// The peer's liveness (`Peer::up`).
    up: watch::Receiver<Liveness>,
    /// The peer's convictions this task has acted on (`Liveness::convictions`): one more
    /// means its connection is to be closed and its queue discarded.
    convictions_seen: u64,
    /// The newest generation of the peer's process known (`Peer::generation`).
    generation: watch::Receiver<u64>,
    /// The generation the open connection's process is held to be: the acceptor's, or, if it
    /// did not know its own (0), the newest known when it was dialled. A newer generation
    /// known means the connection leads to a process that is gone.
    connected_generation: u64,
    /// Failed connection attempts since the last success: the backoff's exponent.
    failures: u32,
    /// An open connection was lost (not for a conviction or a restart) and the peer not
    /// dialled since: the next dial happens at once, queue or not, and its refusal by the
    /// operating system reports the peer's process gone.
    lost: bool,
    /// `Peer::keep_open`, for the connection it concerns (the main lane's small one).
    keep_open: Option<watch::Receiver<bool>>,
}

/// The connection's task: waits for a message, dials, writes until the connection fails,
/// and dials again, until shutdown.
async fn run(
    inner: Arc<Inner>,
    peer: Arc<Peer>,
    lane: usize,
    connection_type: ConnectionType,
    receiver: mpsc::UnboundedReceiver<Outbound>,
) {
    let shutdown = peer.stop.subscribe();
    let up = peer.up.subscribe();
    let convictions_seen = up.borrow().convictions;
    let generation = peer.generation.subscribe();
    let keep_open = (lane == inner.lanes.main() && connection_type == ConnectionType::Small)
        .then(|| peer.keep_open.subscribe());
    let mut task = ConnectionTask {
        inner,
        peer,
        lane,
        connection_type,
        receiver,
        backlog: VecDeque::new(),
        shutdown,
        up,
        convictions_seen,
        generation,
        connected_generation: 0,
        failures: 0,
        lost: false,
        keep_open,
    };
    let Err(Stopping) = task.run().await;
}

impl ConnectionTask {
    fn connection(&self) -> &Connection {
        self.peer.connection(self.lane, self.connection_type)
    }

    async fn run(&mut self) -> Result<std::convert::Infallible, Stopping> {
        loop {
            let liveness = *self.up.borrow_and_update();
            if !liveness.up || liveness.convictions != self.convictions_seen {
                self.wait_until_up().await?;
            }
            // Dial only when there is something to send (Cassandra connects lazily too), the
            // connection was just lost (is the peer's process still there?), or it is kept
            // open.
            if self.backlog.is_empty() && !self.lost && !self.kept_open() {
                let message = tokio::select! {
                    _ = stopped(&mut self.shutdown) => return Err(Stopping),
                    _ = convicted(&mut self.up, self.convictions_seen) => continue,
                    _ = keep_open_asked(&mut self.keep_open) => continue,
                    message = self.receiver.recv() => message.ok_or(Stopping)?,
                };
                self.backlog.push_back(message);
            }
            let address = self.peer.address();
            let dialed = tokio::select! {
                _ = stopped(&mut self.shutdown) => return Err(Stopping),
                _ = convicted(&mut self.up, self.convictions_seen) => continue,
                dialed = dial(&self.inner, self.peer.host_id, address, self.lane, self.connection_type) => dialed,
            };
            let after_loss = std::mem::take(&mut self.lost);
            let dialed = dialed.and_then(|(stream, acceptor_generation)| {
                let newest = *self.generation.borrow_and_update();
                match acceptor_generation {
                    0 => self.connected_generation = newest,
                    found if found < newest => {
                        return Err(DialError::OldProcess { found, newest });
                    }
                    found => self.connected_generation = found,
                }
                Ok(stream)
            });
            let wait = match dialed {
                Ok(stream) => {
                    self.peer.connected();
                    lock(&self.connection().refused).take();
                    Counters::add(&self.inner.counters.connections_opened, 1);
                    tracing::debug!(peer = %self.peer.host_id, %address,
                        connection_type = ?self.connection_type, "connected");
                    let connected_at = Instant::now();
                    let reason = self.write_messages(stream).await?;
                    tracing::debug!(peer = %self.peer.host_id, %address,
                        connection_type = ?self.connection_type, "connection closed: {reason}");
                    let liveness = *self.up.borrow();
                    if !liveness.up || liveness.convictions != self.convictions_seen {
                        // Closed for the conviction: the loop's top discards the queue.
                        continue;
                    }
                    if *self.generation.borrow() > self.connected_generation {
                        // Closed for the peer's restart: the queue goes to the new process.
                        self.failures = 0;
                        continue;
                    }
                    // Lost: the next dial, at once or after the backoff, tells whether the
                    // peer's process is still there.
                    self.lost = true;
                    if connected_at.elapsed() >= HEALTHY_CONNECTION {
                        // Redial at once: the peer may only have closed an idle connection.
                        self.failures = 0;
                        continue;
                    }
                    // Closed as soon as it opened: count it as a failure, or a peer that
                    // accepts and then drops would be redialled in a tight loop.
                    self.failures += 1;
                    self.backoff()
                }
                Err(DialError::Refused(reason)) => self.refused(address, reason),
                Err(DialError::Connect(e))
                    if after_loss && e.kind() == std::io::ErrorKind::ConnectionRefused =>
                {
                    self.failures += 1;
                    self.peer_gone(address, &e);
                    self.backoff()
                }
                Err(DialError::Handshake(handshake::HandshakeError::Io(e)))
                    if after_loss && ended_by_peer(&e) =>
                {
                    // A dying process's listener can still complete the connection (the
                    // kernel closes its sockets one by one) and then drop it: the next dial
                    // tells.
                    self.lost = true;
                    self.failures += 1;
                    tracing::debug!(peer = %self.peer.host_id, %address,
                        connection_type = ?self.connection_type,
                        "connection ended during the handshake after a loss: {e}");
                    self.backoff()
                }
                Err(e) => {
                    self.failures += 1;
                    tracing::debug!(peer = %self.peer.host_id, %address,
                        connection_type = ?self.connection_type, failures = self.failures,
                        "cannot connect: {e}");
                    self.backoff()
                }
            };
            self.wait(wait).await?;
        }
    }

    /// A lost connection's redial was refused by the operating system: nothing listens at the
    /// peer's address, its process is gone. Tells the service's listener, once per loss.
    fn peer_gone(&self, address: SocketAddr, error: &std::io::Error) {
        if !self.peer.first_gone_report() {
            return;
        }
        tracing::info!(peer = %self.peer.host_id, %address,
            "peer's process is gone: its connection closed and its port refuses connections ({error})");
        self.inner.report_peer_gone(self.peer.host_id);
    }

    /// Whether this is the connection kept open and it is asked to be.
    fn kept_open(&self) -> bool {
        self.keep_open.as_ref().is_some_and(|keep| *keep.borrow())
    }

    /// The peer refused the handshake: logs why, fails the queued requests with the reason,
    /// and makes new ones fail at once until `refused_retry_ms` has passed (the wait it
    /// returns).
    fn refused(&mut self, address: SocketAddr, reason: String) -> Duration {
        let inner = &self.inner;
        tracing::warn!(peer = %self.peer.host_id, %address,
            connection_type = ?self.connection_type, retry_ms = inner.options.refused_retry_ms,
            "peer refused the messaging handshake: {reason}");
        Counters::add(&inner.counters.refused_by_peers, 1);
        *lock(&self.connection().refused) = Some(reason.clone());
        let to = self.peer.host_id;
        self.drain(|_| {
            Some(MessagingError::Refused {
                to,
                reason: reason.clone(),
            })
        });
        Duration::from_millis(self.inner.options.refused_retry_ms)
    }

    /// The peer is down, or was convicted since this task last looked: discards every
    /// queued message (a request's caller learns at once that its peer is down, if
    /// `MessagingService::mark_down` has not told it already), then waits until the peer is up
    /// again, and dials at once from then on. (A conviction already lifted also discards the
    /// few messages queued after `mark_up` and before this task looked: the task cannot tell
    /// them apart, and their requests fail as `PeerDown` rather than wait on a dead
    /// connection.)
    async fn wait_until_up(&mut self) -> Result<(), Stopping> {
        let to = self.peer.host_id;
        self.drain(|_| Some(MessagingError::PeerDown { to }));
        let liveness = tokio::select! {
            _ = stopped(&mut self.shutdown) => return Err(Stopping),
            liveness = self.up.wait_for(|liveness| liveness.up) => match liveness {
                Ok(liveness) => *liveness,
                // The peer, and with it this task, is going away.
                Err(_) => return Err(Stopping),
            },
        };
        self.convictions_seen = liveness.convictions;
        self.failures = 0;
        // The conviction came first: nothing is left to report.
        self.lost = false;
        Ok(())
    }

    /// The wait before the next attempt after `failures` failures.
    fn backoff(&self) -> Duration {
        let options = &self.inner.options;
        let mut random = self
            .inner
            .random
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        reconnect_delay(
            self.failures,
            Duration::from_millis(options.reconnect_initial_backoff_ms),
            Duration::from_millis(options.reconnect_max_backoff_ms),
            &mut **random,
        )
    }

    /// Sleeps `wait`, then lifts a refusal and discards the messages that expired meanwhile
    /// (so the queue's bounds count only messages that can still be sent).
    async fn wait(&mut self, wait: Duration) -> Result<(), Stopping> {
        tokio::select! {
            _ = stopped(&mut self.shutdown) => return Err(Stopping),
            // The run loop discards the queue and waits for the peer to come back.
            _ = convicted(&mut self.up, self.convictions_seen) => return Ok(()),
            // A new process is up: dial it at once, whatever the backoff was.
            _ = restarted(&mut self.generation) => {
                self.failures = 0;
                return Ok(());
            }
            _ = tokio::time::sleep(wait) => {}
        }
        // A refusal's wait is over: the next message dials again (and fails at once if the
        // peer still refuses).
        lock(&self.connection().refused).take();
        let now = Instant::now();
        let to = self.peer.host_id;
        self.drain(|m| {
            (m.deadline <= now).then_some(MessagingError::Timeout {
                verb: m.frame.verb,
                to,
            })
        });
        Ok(())
    }

    /// Moves the channel's messages to the backlog, then removes the backlog's messages for
    /// which `discard` names an error: a request fails with it (its caller learns at once), and
    /// every discarded message is counted (dropped while refused or down, else expired).
    fn drain(&mut self, discard: impl Fn(&Outbound) -> Option<MessagingError>) {
        while let Ok(message) = self.receiver.try_recv() {
            self.backlog.push_back(message);
        }
        let inner = &self.inner;
        let connection = self.peer.connection(self.lane, self.connection_type);
        self.backlog.retain(|message| {
            let Some(error) = discard(message) else {
                return true;
            };
            connection.release(message);
            let verb = message.frame.verb;
            match error {
                MessagingError::Refused { .. } | MessagingError::PeerDown { .. } => {
                    inner.counters.count(verb, VerbCount::Dropped)
                }
                _ => inner.counters.count(verb, VerbCount::Expired),
            }
            if message.frame.kind == FrameKind::Request {
                inner.fail(message.frame.request_id, error);
            }
            false
        });
    }

    /// Writes the backlog's and the queue's messages to `stream` until it fails or the peer
    /// closes it (the reason is returned) or the service stops. Nothing is ever read from an
    /// outbound connection but its end: the read that returns it is how a restarted peer is
    /// noticed while this side is idle or blocked writing.
    async fn write_messages(&mut self, stream: Box<dyn Stream>) -> Result<String, Stopping> {
        let (reader, writer) = tokio::io::split(stream);
        let mut open = OpenConnection {
            reader,
            writer,
            probe: [0u8; 64],
        };
        let mut buffer = BytesMut::with_capacity(WRITE_BATCH_BYTES);
        loop {
            if self.backlog.is_empty() {
                let message = tokio::select! {
                    biased;
                    _ = stopped(&mut self.shutdown) => return Err(Stopping),
                    _ = convicted(&mut self.up, self.convictions_seen) => return Ok(CONVICTED.to_string()),
                    _ = superseded(&mut self.generation, self.connected_generation) => return Ok(RESTARTED.to_string()),
                    read = open.reader.read(&mut open.probe) => return Ok(ended(read)),
                    message = self.receiver.recv() => message.ok_or(Stopping)?,
                };
                self.backlog.push_back(message);
            }
            while let Ok(message) = self.receiver.try_recv() {
                self.backlog.push_back(message);
            }
            if let Err(reason) = self.encode_backlog(&mut buffer, &mut open).await? {
                return Ok(reason);
            }
            if buffer.is_empty() {
                continue;
            }
            if let Err(reason) = self.write(&mut open, &buffer).await? {
                return Ok(reason);
            }
            buffer.clear();
        }
    }

    /// Writes `bytes` to the connection, unless the service stops, the peer is convicted or
    /// the peer ends the connection first. The inner error is why the connection is done.
    async fn write(
        &mut self,
        open: &mut OpenConnection,
        bytes: &[u8],
    ) -> Result<Result<(), String>, Stopping> {
        tokio::select! {
            _ = stopped(&mut self.shutdown) => Err(Stopping),
            // A dead peer's socket buffer may be full: the write would wait forever.
            _ = convicted(&mut self.up, self.convictions_seen) => Ok(Err(CONVICTED.to_string())),
            // The process at the other end is gone: its socket buffer may be full too.
            _ = superseded(&mut self.generation, self.connected_generation) => Ok(Err(RESTARTED.to_string())),
            // A write blocked on a full window must also end when the peer resets the
            // connection (its process restarted): not every stack wakes the blocked writer
            // for it (turmoil's does not), and nothing else would read the reset.
            read = open.reader.read(&mut open.probe) => Ok(Err(ended(read))),
            written = open.writer.write_all(bytes) => Ok(written.map_err(|e| e.to_string())),
        }
    }

    /// Encodes backlog messages into `buffer` until it holds `WRITE_BATCH_BYTES` or the
    /// backlog is empty, skipping expired messages and applying the interceptor (a delay first
    /// writes what is buffered, to `open`). The inner error is why the connection is done.
    async fn encode_backlog(
        &mut self,
        buffer: &mut BytesMut,
        open: &mut OpenConnection,
    ) -> Result<Result<(), String>, Stopping> {
        while let Some(mut message) = self.backlog.pop_front() {
            self.connection().release(&message);
            let inner = &self.inner;
            let verb = message.frame.verb;
            if message.deadline <= Instant::now() {
                inner.counters.count(verb, VerbCount::Expired);
                continue;
            }
            match inner
                .interceptor
                .intercept(self.peer.host_id, verb, message.frame.kind)
            {
                Interception::Deliver => {}
                Interception::Drop => {
                    inner.counters.count(verb, VerbCount::Intercepted);
                    continue;
                }
                Interception::Delay(delay) => {
                    let due = message.queued_at + delay;
                    if due >= message.deadline {
                        // It could only be written after its deadline.
                        inner.counters.count(verb, VerbCount::Expired);
                        continue;
                    }
                    if due > Instant::now() {
                        // Whatever is buffered was due before this message: send it first.
                        if let Err(reason) = self.write(open, buffer).await? {
                            return Ok(Err(reason));
                        }
                        buffer.clear();
                        let closed = tokio::select! {
                            _ = stopped(&mut self.shutdown) => return Err(Stopping),
                            _ = convicted(&mut self.up, self.convictions_seen) => CONVICTED,
                            _ = superseded(&mut self.generation, self.connected_generation) => RESTARTED,
                            _ = tokio::time::sleep_until(due) => "",
                        };
                        if !closed.is_empty() {
                            // Not written: it goes on the next connection (a conviction
                            // discards it with the rest of the queue).
                            self.connection().hold(&message);
                            self.backlog.push_front(message);
                            return Ok(Err(closed.to_string()));
                        }
                    }
                }
            }
            let inner = &self.inner;
            // Milliseconds left, rounded down: under one left, the peer could not start it.
            let left = message.deadline.saturating_duration_since(Instant::now());
            let left_ms = u32::try_from(left.as_millis()).unwrap_or(u32::MAX);
            if left_ms == 0 {
                inner.counters.count(verb, VerbCount::Expired);
                continue;
            }
            if message.frame.kind == FrameKind::Request {
                message.frame.expires_in_ms = left_ms;
            }
            let written = encode_frame(&message.frame, inner.options.compress_above_bytes, buffer);
            inner.counters.count(verb, VerbCount::Sent);
            Counters::add(&inner.counters.bytes_sent, written as u64);
            if buffer.len() >= WRITE_BATCH_BYTES {
                break;
            }
        }
        Ok(Ok(()))
    }
}

/// An open outbound connection: its halves, and the buffer its end is read into.
struct OpenConnection {
    reader: tokio::io::ReadHalf<Box<dyn Stream>>,
    writer: tokio::io::WriteHalf<Box<dyn Stream>>,
    /// Nothing is ever read from an outbound connection but its end: no more is kept.
    probe: [u8; 64],
}

/// Why a connection ended, from the read that saw its end.
fn ended(read: std::io::Result<usize>) -> String {
    match read {
        Ok(0) => "closed by the peer".to_string(),
        Ok(_) => "the peer wrote on an outbound connection".to_string(),
        Err(e) => e.to_string(),
    }
}

/// Whether `error` is the peer's end of the connection (closed or reset), not a timeout.
fn ended_by_peer(error: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(
        error.kind(),
        ErrorKind::UnexpectedEof
            | ErrorKind::ConnectionReset
            | ErrorKind::ConnectionAborted
            | ErrorKind::BrokenPipe
    )
}

/// Why a connection was closed when its peer was convicted.
const CONVICTED: &str = "the failure detector convicted the peer";

/// Why a connection was closed when its peer restarted.
const RESTARTED: &str = "the peer restarted: the connection leads to its old process";

/// Completes once a generation newer than `connected_generation` is known for the peer (at
/// once if so already): what an open connection's waits `select!` on, so that a connection to
/// a process that is gone closes whatever it was doing.
async fn superseded(generation: &mut watch::Receiver<u64>, connected_generation: u64) {
    // An error means the peer is gone, and with it the task: nothing to wait for.
    if generation
        .wait_for(|newest| *newest > connected_generation)
        .await
        .is_err()
    {
        std::future::pending::<()>().await;
    }
}

/// Completes once the connection `keep_open` concerns is asked to be kept open (at once if it
/// is); never for another connection (`None`).
async fn keep_open_asked(keep_open: &mut Option<watch::Receiver<bool>>) {
    let asked = match keep_open {
        Some(keep) => keep.wait_for(|keep| *keep).await.is_ok(),
        None => false,
    };
    if !asked {
        // Not this connection, or the peer is gone and with it the task: nothing to wait for.
        std::future::pending::<()>().await;
    }
}

/// Completes once the peer restarted since the task last looked at its generation.
async fn restarted(generation: &mut watch::Receiver<u64>) {
    if generation.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Completes once the peer is down or was convicted more than `convictions_seen` times (at
/// once if so already): what the connection's waits `select!` on so that a convicted peer's
/// connection is dropped whatever it was doing, even if the peer is up again by then.
async fn convicted(up: &mut watch::Receiver<Liveness>, convictions_seen: u64) {
    let convicted = |liveness: &Liveness| !liveness.up || liveness.convictions != convictions_seen;
    // An error means the peer is gone, and with it the task: nothing to wait for.
    if up.wait_for(convicted).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Connects to `address` and handshakes as `lane`'s `connection_type`, expecting `peer` there;
/// the stream and the generation of the peer's process (0 if it does not know its own).
async fn dial(
    inner: &Inner,
    peer: HostId,
    address: SocketAddr,
    lane: usize,
    connection_type: ConnectionType,
) -> Result<(Box<dyn Stream>, u64), DialError> {
    let connect_timeout = Duration::from_millis(inner.options.connect_timeout_ms);
    let mut stream = timeout(connect_timeout, inner.network.connect(address))
        .await
        .map_err(|_| DialError::ConnectTimeout)?
        .map_err(DialError::Connect)?;
    let hello = Hello {
        min_version: PROTOCOL_VERSION,
        max_version: PROTOCOL_VERSION,
        connection_type,
        host_id: inner.host_id,
        broadcast_address: inner.broadcast_address,
        cluster_name: inner.cluster_name.clone(),
        lane: inner.lanes.wire(lane),
    };
    let exchange = async {
        handshake::write_all(&mut stream, &hello.encode()).await?;
        let body = handshake::read_body(&mut stream).await?;
        Reply::decode(&body)
    };
    let handshake_timeout = Duration::from_millis(inner.options.handshake_timeout_ms);
    let reply = timeout(handshake_timeout, exchange)
        .await
        .map_err(|_| DialError::HandshakeTimeout)??;
    match reply {
        Reply::Accepted { host_id, .. } if host_id != peer => Err(DialError::WrongHost(host_id)),
        Reply::Accepted { generation, .. } => Ok((stream, generation)),
        Reply::Refused { reason, .. } => Err(DialError::Refused(reason)),
    }
}
