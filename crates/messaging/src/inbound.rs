//! The listener and the connections peers open to this node: the handshake's acceptor side,
//! then frames read and dispatched (responses to the requests waiting for them, requests to
//! the replica or a registered handler, whose answers go back on this node's own outbound
//! connection to the peer). Handshakes run on the main runtime; a connection is then served on
//! the lane its dialer named (`lanes.rs`).
//!
//! Bytes from a peer are untrusted: a handshake that does not decode or is refused, and a
//! frame that does not decode (bad magic, version, flags or checksum, a length over the cap, a
//! verb id out of range, an lz4 body that does not decompress), close that one connection, are
//! logged (at most `log_limit::WARNINGS_PER_WINDOW` lines per window, however many peers
//! misbehave) and counted, and the node goes on serving everyone else. A request whose payload
//! does not decode (a truncated body, a mutation that does not decode) or whose verb this node
//! does not serve is answered with an error, logged and counted the same way: its frame was
//! whole, so the stream is still in step and the connection stays open.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use coordinator::{Deadline, ReplicaError};
use locator::HostId;
use tokio::io::AsyncReadExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::{timeout, Instant};

use crate::codec::{self, PayloadError, RemoteError};
use crate::frame::{decode_frame, Frame, FrameKind};
use crate::handshake::{self, Hello, Reply};
use crate::log_limit::warn_limited;
use crate::metrics::{Counters, VerbCount};
use crate::network::{Listener, Portable, Stream};
use crate::service::{stopped, Inner};
use crate::verb::Verb;

/// A connection's read buffer starts at this and grows to hold the largest frame in flight.
const READ_BUFFER_BYTES: usize = 64 * 1024;
/// After a failed accept (out of file descriptors, say), the listener waits this long, so it
/// does not spin.
const ACCEPT_RETRY_MS: u64 = 100;

/// An accepted connection after its handshake, on its way to the lane that serves it.
struct Handshaken {
    stream: Portable,
    hello: Hello,
    from: SocketAddr,
}

/// Accepts connections until shutdown; owns them (they are aborted when it ends). Each
/// connection's handshake runs here, on the main runtime; the connection is then served on
/// the lane its dialer named (`lanes.rs`): the same-numbered shard, if the stream can move
/// there (TCP), else here.
pub(crate) async fn run_listener(inner: Arc<Inner>, mut listener: Box<dyn Listener>) {
    let mut shutdown = inner.shutdown.subscribe();
    let limit = inner
        .options
        .max_inbound_connections
        .saturating_mul(inner.lanes.count());
    // Handshakes (whose output is the connection to serve) and served connections.
    let mut connections: JoinSet<Option<Handshaken>> = JoinSet::new();
    loop {
        tokio::select! {
            _ = stopped(&mut shutdown) => break,
            Some(joined) = connections.join_next(), if !connections.is_empty() => {
                if let Ok(Some(handshaken)) = joined {
                    serve_on_lane(&inner, &mut connections, handshaken);
                }
            }
            accepted = listener.accept() => match accepted {
                Ok((stream, from)) => {
                    if connections.len() >= limit {
                        tracing::warn!(%from, limit,
                            "too many inbound messaging connections; closing the new one");
                        continue;
                    }
                    connections.spawn(handshake(inner.clone(), stream, from));
                }
                Err(e) => {
                    tracing::warn!("accepting a messaging connection failed: {e}");
                    tokio::time::sleep(Duration::from_millis(ACCEPT_RETRY_MS)).await;
                }
            },
        }
    }
    connections.shutdown().await;
}

/// Runs an accepted connection's handshake; the connection, ready to move, if accepted.
async fn handshake(
    inner: Arc<Inner>,
    mut stream: Box<dyn Stream>,
    from: SocketAddr,
) -> Option<Handshaken> {
    let hello = accept_handshake(&inner, &mut stream, from).await?;
    match Portable::detach(stream) {
        Ok(stream) => Some(Handshaken {
            stream,
            hello,
            from,
        }),
        Err(e) => {
            tracing::warn!(%from, "cannot take a messaging connection off the runtime: {e}");
            None
        }
    }
}

/// Serves a handshaken connection on its dialer's lane, as a task of `connections`.
fn serve_on_lane(
    inner: &Arc<Inner>,
    connections: &mut JoinSet<Option<Handshaken>>,
    handshaken: Handshaken,
) {
    let Handshaken {
        stream,
        hello,
        from,
    } = handshaken;
    let lane = if stream.is_movable() {
        inner.lanes.for_dialer(hello.lane)
    } else {
        inner.lanes.main()
    };
    let served = {
        let inner = inner.clone();
        async move {
            match stream.attach() {
                Ok(stream) => run_connection(inner, stream, hello, from).await,
                Err(e) => tracing::warn!(%from, "cannot register a messaging connection: {e}"),
            }
            None
        }
    };
    connections.spawn_on(served, inner.lanes.runtime(lane));
}

/// Reads the dialer's hello and answers it; the hello if accepted.
async fn accept_handshake(
    inner: &Inner,
    stream: &mut Box<dyn Stream>,
    from: SocketAddr,
) -> Option<Hello> {
    let exchange = async {
        let body = handshake::read_body(stream).await?;
        let hello = Hello::decode(&body)?;
        let mut reply =
            handshake::judge(&hello, inner.host_id, inner.generation, &inner.cluster_name);
        // Record where to answer the dialer before accepting it; a new peer past the bound
        // is refused (a dialer chooses its host id, so it must not grow the map forever).
        if matches!(reply, Reply::Accepted { .. })
            && !inner.learn_peer_address(hello.host_id, hello.broadcast_address)
        {
            reply = Reply::Refused {
                host_id: inner.host_id,
                reason: format!(
                    "the acceptor already knows {} peers",
                    crate::service::MAX_LEARNED_PEERS
                ),
            };
        }
        handshake::write_all(stream, &reply.encode()).await?;
        Ok::<_, handshake::HandshakeError>((hello, reply))
    };
    let handshake_timeout = Duration::from_millis(inner.options.handshake_timeout_ms);
    match timeout(handshake_timeout, exchange).await {
        Err(_) => {
            tracing::debug!(%from, "messaging handshake timed out");
            None
        }
        Ok(Err(handshake::HandshakeError::Io(e))) => {
            // Closed or reset before a whole hello arrived: not a malformed message.
            tracing::debug!(%from, "messaging handshake ended early: {e}");
            None
        }
        Ok(Err(e)) => {
            Counters::add(&inner.counters.malformed, 1);
            warn_limited!(inner.bad_input_log, %from, "messaging handshake refused: {e}");
            None
        }
        Ok(Ok((hello, Reply::Refused { reason, .. }))) => {
            Counters::add(&inner.counters.handshakes_refused, 1);
            warn_limited!(inner.bad_input_log, %from, peer = %hello.host_id,
                "refused a messaging connection: {reason}");
            None
        }
        Ok(Ok((hello, Reply::Accepted { .. }))) => Some(hello),
    }
}

/// One inbound connection after its handshake: frames until the peer closes it, a frame is
/// malformed, or shutdown (which aborts this task). Runs on the connection's lane: the
/// requests it reads are served there, and their responses queued on that lane's connection.
async fn run_connection(
    inner: Arc<Inner>,
    mut stream: Box<dyn Stream>,
    hello: Hello,
    from: SocketAddr,
) {
    let peer = hello.host_id;
    tracing::debug!(%from, %peer, connection_type = ?hello.connection_type, lane = hello.lane,
        "accepted a messaging connection");
    let cap_bytes = inner.options.message_cap_bytes();
    let permits = Arc::new(Semaphore::new(
        inner.options.max_inbound_requests_per_connection.max(1),
    ));
    let mut handlers = JoinSet::new();
    let mut buffer = BytesMut::with_capacity(READ_BUFFER_BYTES);
    'reading: loop {
        loop {
            let frame = match decode_frame(&mut buffer, cap_bytes) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(e) => {
                    Counters::add(&inner.counters.malformed, 1);
                    warn_limited!(inner.bad_input_log, %from, %peer,
                        "malformed message; closing the connection: {e}");
                    break 'reading;
                }
            };
            inner.counters.count(frame.verb, VerbCount::Received);
            match frame.kind {
                FrameKind::Response => inner.complete(peer, frame),
                FrameKind::Request => {
                    let arrived = Instant::now();
                    let deadline = arrived + Duration::from_millis(u64::from(frame.expires_in_ms));
                    // At the bound this waits, and the connection stops reading.
                    let permit = permits
                        .clone()
                        .acquire_owned()
                        .await
                        .expect("the semaphore is never closed");
                    handlers.spawn(serve(inner.clone(), peer, frame, deadline, permit));
                }
            }
        }
        while handlers.try_join_next().is_some() {}
        match stream.read_buf(&mut buffer).await {
            Ok(0) => break,
            Ok(n) => Counters::add(&inner.counters.bytes_received, n as u64),
            Err(e) => {
                tracing::debug!(%from, %peer, "messaging connection failed: {e}");
                break;
            }
        }
    }
    // The requests already read still get their answers (they go out on this node's own
    // connection to the peer); shutdown aborts this wait.
    while handlers.join_next().await.is_some() {}
}

/// Serves one request and queues its response.
async fn serve(
    inner: Arc<Inner>,
    from: HostId,
    frame: Frame,
    deadline: Instant,
    _permit: OwnedSemaphorePermit,
) {
    let verb = frame.verb;
    let response = if Instant::now() >= deadline {
        // Expired in flight or while waiting for a permit: not started, as Cassandra drops
        // expired messages; the answer tells the requester why.
        inner.counters.count(verb, VerbCount::Expired);
        codec::encode_error(&ReplicaError::DeadlinePassed.into())
    } else {
        let request_deadline = Deadline::at(deadline);
        match dispatch(&inner, from, verb, frame.payload, request_deadline).await {
            Ok(response) => response,
            Err(error) => {
                match &error {
                    RemoteError::BadRequest(detail) => {
                        Counters::add(&inner.counters.bad_requests, 1);
                        warn_limited!(inner.bad_input_log, peer = %from, %verb,
                            "malformed request refused: {detail}");
                    }
                    RemoteError::UnknownVerb => {
                        Counters::add(&inner.counters.unknown_verbs, 1);
                        warn_limited!(inner.bad_input_log, peer = %from, %verb,
                            "request for a verb this node does not serve refused");
                    }
                    _ => {}
                }
                codec::encode_error(&error)
            }
        }
    };
    inner.send_response(from, verb, frame.request_id, response, deadline);
}

fn bad_request(e: PayloadError) -> RemoteError {
    RemoteError::BadRequest(e.to_string())
}

/// Runs `verb` and encodes its success response.
async fn dispatch(
    inner: &Inner,
    from: HostId,
    verb: Verb,
    payload: Bytes,
    deadline: Deadline,
) -> Result<Bytes, RemoteError> {
    let replica = &inner.replica;
    match verb {
        Verb::PING => {
            codec::decode_empty(&payload).map_err(bad_request)?;
            Ok(codec::encode_ok(&[]))
        }
        Verb::MUTATION => {
            let mutation = codec::decode_mutation_request(&payload).map_err(bad_request)?;
            replica.apply_mutation(mutation, deadline).await?;
            Ok(codec::encode_ok(&[]))
        }
        Verb::READ => {
            let command = codec::decode_read_request(&payload).map_err(bad_request)?;
            let response = replica.read(command, deadline).await?;
            Ok(codec::encode_read_ok(&response))
        }
        Verb::DIGEST => {
            let command = codec::decode_read_request(&payload).map_err(bad_request)?;
            let digest = replica.digest(command, deadline).await?;
            Ok(codec::encode_ok(&digest.0))
        }
        Verb::TRUNCATE => {
            let table = codec::decode_table_id(&payload).map_err(bad_request)?;
            replica.truncate(table, deadline).await?;
            Ok(codec::encode_ok(&[]))
        }
        Verb::BATCH_STORE => {
            let batch = codec::decode_batch_store_request(&payload).map_err(bad_request)?;
            replica.store_batch(batch, deadline).await?;
            Ok(codec::encode_ok(&[]))
        }
        Verb::BATCH_REMOVE => {
            let id = codec::decode_batch_id(&payload).map_err(bad_request)?;
            replica.remove_batch(id, deadline).await?;
            Ok(codec::encode_ok(&[]))
        }
        _ => {
            let handler = inner.handler(verb).ok_or(RemoteError::UnknownVerb)?;
            let body = handler
                .handle(from, payload, deadline)
                .await
                .map_err(|e| RemoteError::Handler(e.0))?;
            Ok(codec::encode_ok(&body))
        }
    }
}
