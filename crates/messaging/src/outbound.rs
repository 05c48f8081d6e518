//! A peer's two outbound connections (small and large messages), each a bounded queue and a
//! task that dials the peer when there is something to send, handshakes, writes the queue's
//! messages, and redials with capped, jittered exponential backoff when the connection fails.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
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

/// A message waiting on a connection.
pub(crate) struct Outbound {
    pub frame: Frame,
    /// Not written after this (the request's deadline; a response's request's): the
    /// requester has stopped waiting.
    pub deadline: Instant,
}

/// Why a message was not queued.
#[derive(Debug)]
pub(crate) enum EnqueueError {
    Full,
    Refused(String),
    Shutdown,
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

/// A peer and its two connections.
pub(crate) struct Peer {
    pub host_id: HostId,
    address: Mutex<SocketAddr>,
    small: Connection,
    large: Connection,
    capacity_messages: usize,
    capacity_bytes: usize,
    large_threshold_bytes: usize,
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

    /// Gives back a message's share of the queue's bounds (written or discarded).
    fn release(&self, message: &Outbound) {
        self.queued_messages.fetch_sub(1, Ordering::Relaxed);
        self.queued_bytes
            .fetch_sub(message.frame.payload.len(), Ordering::Relaxed);
    }
}

impl Peer {
    pub fn new(host_id: HostId, address: SocketAddr, options: &MessagingOptions) -> Peer {
        Peer {
            host_id,
            address: Mutex::new(address),
            small: Connection::new(),
            large: Connection::new(),
            capacity_messages: options.queue_capacity_messages,
            capacity_bytes: options.queue_capacity_bytes,
            large_threshold_bytes: options.large_message_threshold_bytes,
        }
    }

    pub fn address(&self) -> SocketAddr {
        *lock(&self.address)
    }

    pub fn set_address(&self, address: SocketAddr) {
        *lock(&self.address) = address;
    }

    fn connection(&self, connection_type: ConnectionType) -> &Connection {
        match connection_type {
            ConnectionType::Small => &self.small,
            ConnectionType::Large => &self.large,
        }
    }

    /// Queues `message` on the connection its size picks, starting the connection's task if
    /// this is its first message. Refuses when the queue is at a bound (an empty queue takes
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
        let connection = self.connection(connection_type);
        if let Some(reason) = lock(&connection.refused).as_ref() {
            return Err(EnqueueError::Refused(reason.clone()));
        }
        if inner.is_shut_down() {
            return Err(EnqueueError::Shutdown);
        }
        if let Some(receiver) = lock(&connection.receiver).take() {
            let task = tokio::spawn(run(inner.clone(), self.clone(), connection_type, receiver));
            inner.track(task);
        }
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

/// How a connected spell ended.
enum Ended {
    Shutdown,
    Closed(String),
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
}

/// The connection's task: waits for a message, dials, writes until the connection fails,
/// and dials again, until shutdown.
async fn run(
    inner: Arc<Inner>,
    peer: Arc<Peer>,
    connection_type: ConnectionType,
    mut receiver: mpsc::UnboundedReceiver<Outbound>,
) {
    let mut shutdown = inner.shutdown.subscribe();
    let connection = peer.connection(connection_type);
    let mut backlog: VecDeque<Outbound> = VecDeque::new();
    let mut failures = 0u32;
    loop {
        // Dial only when there is something to send (Cassandra connects lazily too).
        if backlog.is_empty() {
            tokio::select! {
                _ = stopped(&mut shutdown) => return,
                message = receiver.recv() => match message {
                    Some(message) => backlog.push_back(message),
                    None => return,
                },
            }
        }
        let address = peer.address();
        let dialed = tokio::select! {
            _ = stopped(&mut shutdown) => return,
            dialed = dial(&inner, peer.host_id, address, connection_type) => dialed,
        };
        let wait = match dialed {
            Ok(stream) => {
                failures = 0;
                lock(&connection.refused).take();
                Counters::add(&inner.counters.connections_opened, 1);
                tracing::debug!(peer = %peer.host_id, %address, ?connection_type, "connected");
                let ended = write_messages(
                    &inner,
                    &peer,
                    connection,
                    stream,
                    &mut receiver,
                    &mut backlog,
                    &mut shutdown,
                )
                .await;
                match ended {
                    Ended::Shutdown => return,
                    Ended::Closed(reason) => {
                        tracing::debug!(peer = %peer.host_id, %address, ?connection_type,
                            "connection closed: {reason}");
                        // Redial at once: the peer may only have closed an idle connection.
                        Duration::ZERO
                    }
                }
            }
            Err(DialError::Refused(reason)) => {
                tracing::warn!(peer = %peer.host_id, %address, ?connection_type,
                    retry_ms = inner.options.refused_retry_ms,
                    "peer refused the messaging handshake: {reason}");
                Counters::add(&inner.counters.refused_by_peers, 1);
                *lock(&connection.refused) = Some(reason.clone());
                drain(&inner, connection, &mut receiver, &mut backlog, |_| {
                    Some(MessagingError::Refused {
                        to: peer.host_id,
                        reason: reason.clone(),
                    })
                });
                Duration::from_millis(inner.options.refused_retry_ms)
            }
            Err(e) => {
                failures += 1;
                tracing::debug!(peer = %peer.host_id, %address, ?connection_type, failures,
                    "cannot connect: {e}");
                let random = &mut **inner.random.lock().unwrap_or_else(PoisonError::into_inner);
                reconnect_delay(
                    failures,
                    Duration::from_millis(inner.options.reconnect_initial_backoff_ms),
                    Duration::from_millis(inner.options.reconnect_max_backoff_ms),
                    random,
                )
            }
        };
        if !wait.is_zero() {
            tokio::select! {
                _ = stopped(&mut shutdown) => return,
                _ = tokio::time::sleep(wait) => {}
            }
            // A refusal's wait is over: the next message dials again (and fails at once if
            // the peer still refuses).
            lock(&connection.refused).take();
            // Messages that expired while the peer was unreachable go now, so the queue's
            // bounds count only messages that can still be sent.
            let now = Instant::now();
            drain(&inner, connection, &mut receiver, &mut backlog, |m| {
                (m.deadline <= now).then_some(MessagingError::Timeout {
                    verb: m.frame.verb,
                    to: peer.host_id,
                })
            });
        }
    }
}

/// Moves the channel's messages to the backlog, then removes the backlog's messages for which
/// `discard` names an error: a request fails with it (its caller learns at once), and every
/// discarded message is counted (dropped while refused, else expired).
fn drain(
    inner: &Inner,
    connection: &Connection,
    receiver: &mut mpsc::UnboundedReceiver<Outbound>,
    backlog: &mut VecDeque<Outbound>,
    discard: impl Fn(&Outbound) -> Option<MessagingError>,
) {
    while let Ok(message) = receiver.try_recv() {
        backlog.push_back(message);
    }
    backlog.retain(|message| {
        let Some(error) = discard(message) else {
            return true;
        };
        connection.release(message);
        let verb = message.frame.verb;
        match error {
            MessagingError::Refused { .. } => inner.counters.count(verb, VerbCount::Dropped),
            _ => inner.counters.count(verb, VerbCount::Expired),
        }
        if message.frame.kind == FrameKind::Request {
            inner.fail(message.frame.request_id, error);
        }
        false
    });
}

/// Connects to `address` and handshakes as `connection_type`, expecting `peer` there.
async fn dial(
    inner: &Inner,
    peer: HostId,
    address: SocketAddr,
    connection_type: ConnectionType,
) -> Result<Box<dyn Stream>, DialError> {
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
        Reply::Accepted { .. } => Ok(stream),
        Reply::Refused { reason, .. } => Err(DialError::Refused(reason)),
    }
}

/// Writes the backlog's and the queue's messages to `stream` until it fails, the peer closes
/// it, or the service stops. Nothing is ever read from an outbound connection but its end:
/// the read that returns it is how a restarted peer is noticed while this side is idle.
#[allow(clippy::too_many_arguments)]
async fn write_messages(
    inner: &Inner,
    peer: &Peer,
    connection: &Connection,
    stream: Box<dyn Stream>,
    receiver: &mut mpsc::UnboundedReceiver<Outbound>,
    backlog: &mut VecDeque<Outbound>,
    shutdown: &mut watch::Receiver<bool>,
) -> Ended {
    let (mut reader, mut writer) = tokio::io::split(stream);
    let mut buffer = BytesMut::with_capacity(WRITE_BATCH_BYTES);
    let mut probe = [0u8; 64];
    loop {
        if backlog.is_empty() {
            tokio::select! {
                biased;
                _ = stopped(shutdown) => return Ended::Shutdown,
                read = reader.read(&mut probe) => return Ended::Closed(match read {
                    Ok(0) => "closed by the peer".to_string(),
                    Ok(_) => "the peer wrote on an outbound connection".to_string(),
                    Err(e) => e.to_string(),
                }),
                message = receiver.recv() => match message {
                    Some(message) => backlog.push_back(message),
                    None => return Ended::Shutdown,
                },
            }
        }
        while let Ok(message) = receiver.try_recv() {
            backlog.push_back(message);
        }
        let now = Instant::now();
        while let Some(mut message) = backlog.pop_front() {
            connection.release(&message);
            let verb = message.frame.verb;
            let left = message.deadline.saturating_duration_since(now);
            let left_ms = u32::try_from(left.as_millis()).unwrap_or(u32::MAX);
            if left_ms == 0 {
                inner.counters.count(verb, VerbCount::Expired);
                continue;
            }
            match inner
                .interceptor
                .intercept(peer.host_id, verb, message.frame.kind)
            {
                Interception::Deliver => {}
                Interception::Drop => {
                    inner.counters.count(verb, VerbCount::Intercepted);
                    continue;
                }
                Interception::Delay(delay) => {
                    // Whatever is buffered was due before this message: send it first.
                    if let Err(e) = writer.write_all(&buffer).await {
                        return Ended::Closed(e.to_string());
                    }
                    buffer.clear();
                    tokio::select! {
                        _ = stopped(shutdown) => return Ended::Shutdown,
                        _ = tokio::time::sleep(delay) => {}
                    }
                }
            }
            if message.frame.kind == FrameKind::Request {
                message.frame.expires_in_ms = left_ms;
            }
            let written = encode_frame(
                &message.frame,
                inner.options.compress_above_bytes,
                &mut buffer,
            );
            inner.counters.count(verb, VerbCount::Sent);
            Counters::add(&inner.counters.bytes_sent, written as u64);
            if buffer.len() >= WRITE_BATCH_BYTES {
                break;
            }
        }
        if buffer.is_empty() {
            continue;
        }
        tokio::select! {
            _ = stopped(shutdown) => return Ended::Shutdown,
            written = writer.write_all(&buffer) => if let Err(e) = written {
                return Ended::Closed(e.to_string());
            },
        }
        buffer.clear();
    }
}
