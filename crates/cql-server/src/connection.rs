//! One client connection, served by one task: it reads and decodes requests, runs them
//! concurrently (many in flight, completed out of order by stream id) and writes their
//! responses, everything that completed since the last send going out in one write.
//!
//! A connection's requests run on the task that owns the connection, never spread over the
//! runtime's workers: requests complete mostly without waiting (storage calls are first tried
//! on the worker, see `replica::LocalReplica`), and handing each to another worker and its
//! response back cost more than the request. Measured on two cores with one latte connection:
//! 23,000 writes/s and 56,000 point reads/s spread over the workers, 43,000 and 76,000 on the
//! connection's task. Connections are spread over the shards instead (`shards.rs`), as
//! ScyllaDB pins a connection to a shard; a connection yields to the other tasks of its shard
//! after `REQUESTS_PER_PASS` requests.

use std::future::Future;
use std::io::ErrorKind;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use bytes::{Buf, Bytes, BytesMut};
use cql_protocol as wire;
use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use query::{
    BatchItem, BatchKind, BoundValue, BoundValues, Outcome, QueryError, QueryOptions,
    QueryProcessor, QueryResult, Session,
};
use schema_service::{SchemaChangeEvent, SchemaChangeKind, SchemaChangeTarget};
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};

use crate::errors::{consistency_from_wire, error_body};
use crate::in_flight::{ConnectionBudget, InFlightLimits, GRANT_BYTES};
use crate::{ClusterEvent, EventSources, ServerConfig};

/// Encoded responses waiting for the socket beyond which no new request is started (a client
/// that does not read its responses stops the server reading its requests).
const OUT_HIGH_WATER_BYTES: usize = 1024 * 1024;
/// Responses written as soon as this much has accumulated, even with requests read and not yet
/// run: the client starts on them while the server runs the rest. (Holding all of a read's
/// responses for one write halved read throughput at saturation: client and server took turns
/// instead of overlapping.) Not while the client shares this thread's core: see `FlushPolicy`.
const FLUSH_BYTES: usize = 8 * 1024;
/// The flush threshold while `FlushPolicy` holds responses to the end of the pass: a bound on
/// the buffer, reached only by passes of large results.
const LATE_FLUSH_BYTES: usize = 64 * 1024;
/// Bytes read from the socket per read call.
const READ_CHUNK_BYTES: usize = 64 * 1024;
/// The most an idle connection keeps of each of its buffers (input, output, the codecs'):
/// one that grew for a large frame (up to 16 MiB and more) gives the memory back once the
/// frame is done instead of keeping its high-water mark for the connection's life.
const IDLE_BUFFER_BYTES: usize = 4 * READ_CHUNK_BYTES;
/// Requests started in one pass before the connection yields to the other tasks of its shard
/// (other connections, write groups): a client pipelining a whole read chunk (over a thousand
/// small requests, ~15 ms of work) must not hold the shard's thread for all of it. At the
/// benchmark's 128 in flight a pass rarely reaches it.
const REQUESTS_PER_PASS: usize = 128;
/// Events waiting to be sent to a registered connection.
const EVENT_QUEUE: usize = 1024;
/// Result column specs a connection keeps encoded (`SpecCache`).
const SPEC_CACHE_ENTRIES: usize = 16;

struct Shared {
    processor: Arc<QueryProcessor>,
    session: Mutex<Session>,
    version: wire::Version,
}

/// A request in flight and, when it completes, its response.
type InFlight = Pin<Box<dyn Future<Output = Done> + Send>>;

struct Done {
    version: wire::Version,
    stream: i16,
    /// The request's frame bytes, accounted in `Connection::requests_bytes` until answered.
    bytes: u64,
    answer: Answer,
}

/// What the connection is doing with its socket.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading, running and answering requests.
    Open,
    /// The client closed its side, or the server is shutting down: no more requests are read;
    /// those in flight complete and are answered.
    Draining,
    /// A fatal error response was queued: it is sent and the connection closed; requests in
    /// flight complete unanswered.
    Failing,
    /// The socket cannot be written: requests in flight complete unanswered.
    Broken,
}

/// The connection's state outside the socket halves.
struct Connection {
    peer: SocketAddr,
    processor: Arc<QueryProcessor>,
    /// What a REGISTER subscribes to.
    events: EventSources,
    max_in_flight: usize,
    decoder: wire::FrameCodec,
    encoder: wire::FrameCodec,
    /// Bytes read and not yet decoded.
    input: BytesMut,
    /// Encoded responses not yet written.
    output: BytesMut,
    /// Set by STARTUP.
    shared: Option<Arc<Shared>>,
    in_flight: FuturesUnordered<InFlight>,
    state: State,
    /// Decoding stopped at a bound (in flight, output), not for want of bytes.
    held: bool,
    /// A request started in this pass did not complete on its first poll.
    started_waiting: bool,
    /// The pass stopped at `REQUESTS_PER_PASS`: complete requests may still be buffered.
    pass_full: bool,
    /// Bytes were read since a pass last ran out of complete frames.
    fresh_input: bool,
    events_tx: mpsc::Sender<wire::Response>,
    events_task: Option<tokio::task::JoinHandle<()>>,
    /// The event kinds REGISTERed for (served by `events_task`).
    registered: Registered,
    flush: FlushPolicy,
    specs: SpecCache,
    /// What this connection holds of the node's and its address's bytes in flight.
    budget: ConnectionBudget,
    /// The frame bytes of the requests started and not yet answered.
    requests_bytes: u64,
    /// Reading waits for bytes in flight to be given back (`account_memory`).
    memory_wait: bool,
}

/// The result column specs this connection encoded last, most recent first. A prepared
/// statement shares one `Arc` of specs into all its results, so its address names them: a
/// connection answering EXECUTEs of a few statements encodes each one's specs once, not on
/// every response (they were 5% of a cached point read's instructions, for clients that do
/// not ask to skip metadata). The entry keeps its `Arc`, so the address cannot be reused by
/// other specs while cached.
#[derive(Default)]
struct SpecCache {
    entries: Vec<(Arc<[wire::ColumnSpec]>, wire::EncodedColumnSpecs)>,
}

impl SpecCache {
    /// Attaches the encoded form of `metadata`'s specs, when they are written.
    fn fill(&mut self, version: wire::Version, metadata: &mut wire::RowsMetadata) {
        let skipped = metadata.no_metadata && metadata.new_metadata_id.is_none();
        if skipped || metadata.columns.is_empty() || metadata.encoded_columns.is_some() {
            return;
        }
        let found = self.entries.iter().position(|(columns, encoded)| {
            Arc::ptr_eq(columns, &metadata.columns) && encoded.version() == version
        });
        match found {
            Some(i) => self.entries[..=i].rotate_right(1),
            None => {
                let encoded = wire::encode_column_specs(version, &metadata.columns);
                self.entries.truncate(SPEC_CACHE_ENTRIES - 1);
                self.entries.insert(0, (metadata.columns.clone(), encoded));
            }
        }
        metadata.encoded_columns = Some(self.entries[0].1.clone());
    }
}

/// Whether a pass writes its responses as they accumulate (every `FLUSH_BYTES`) or at its end.
///
/// Writing them early lets a client on another core work on them while the pass runs. A
/// client on this core (a benchmark client sharing a small machine) gains nothing: each write
/// wakes it, the scheduler puts it on the writer's core (loopback TCP wakes with a sync
/// hint), and it preempts the pass, so the rest of the pass waits for the client and each
/// write costs a send and two switches. Measured with latte on two cores at fixed rates, the
/// shard thread was preempted by latte 940-1,220 times a second, about twice per pass; at
/// saturation, with latte on the other core, 3 times a second.
///
/// So a pass that writes early checks whether its thread was preempted meanwhile
/// (`getrusage(RUSAGE_THREAD)`): once `PREEMPTED_OF_PROBED` of `PROBED_PASSES` such passes
/// were, the connection writes at the end of each pass (or every `LATE_FLUSH_BYTES`) for the
/// next `LATE_PASSES` passes, then probes again. At the fixed rates 40-60% of probed passes
/// were preempted, at saturation 1-2% (other threads). Measured on the mixed workload at
/// 23,542 ops/s, five alternations: p99 0.995-1.455 (median 1.061) against 1.078-1.925
/// (median 1.282) ms; point-read saturation unchanged (254,203 and 255,681 against 252,233
/// reads/s), which writing at the end of every pass halved.
#[derive(Default)]
struct FlushPolicy {
    /// Passes left that write at their end; 0: writing early, and probing.
    late_passes: u32,
    /// Passes that wrote early since probing began, and those preempted meanwhile.
    probed: u32,
    preempted: u32,
}

const PROBED_PASSES: u32 = 32;
const PREEMPTED_OF_PROBED: u32 = 8;
const LATE_PASSES: u32 = 2048;

impl FlushPolicy {
    /// Passes write at their end (the client was found to share the core).
    fn holds_to_pass_end(&self) -> bool {
        self.late_passes > 0
    }

    fn threshold(&self) -> usize {
        if self.late_passes > 0 {
            LATE_FLUSH_BYTES
        } else {
            FLUSH_BYTES
        }
    }

    /// Called once per pass that started requests; `preempted` tells, for a pass that wrote
    /// early, whether the thread was preempted after its first early write.
    fn end_pass(&mut self, preempted: Option<bool>) {
        if self.late_passes > 0 {
            self.late_passes -= 1;
            return;
        }
        let Some(preempted) = preempted else {
            return;
        };
        self.probed += 1;
        self.preempted += u32::from(preempted);
        if self.preempted >= PREEMPTED_OF_PROBED {
            self.late_passes = LATE_PASSES;
        }
        if self.preempted >= PREEMPTED_OF_PROBED || self.probed >= PROBED_PASSES {
            self.probed = 0;
            self.preempted = 0;
        }
    }
}

/// This thread's involuntary context switches so far (times it was preempted).
#[cfg(target_os = "linux")]
fn involuntary_switches() -> u64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `getrusage` writes a `rusage` to the pointer, which points to one; on failure
    // the zeroed value is read.
    unsafe {
        libc::getrusage(libc::RUSAGE_THREAD, usage.as_mut_ptr());
        usage.assume_init().ru_nivcsw as u64
    }
}

/// Elsewhere preemption is not measured: passes always write early.
#[cfg(not(target_os = "linux"))]
fn involuntary_switches() -> u64 {
    0
}

pub(crate) async fn run(
    socket: TcpStream,
    peer: SocketAddr,
    processor: Arc<QueryProcessor>,
    events: EventSources,
    config: Arc<ServerConfig>,
    limits: Arc<InFlightLimits>,
    mut stop: watch::Receiver<bool>,
) {
    tracing::debug!(%peer, "connection opened");
    let (reader, mut writer) = socket.into_split();
    let (events_tx, mut events_rx) = mpsc::channel(EVENT_QUEUE);
    let mut conn = Connection {
        peer,
        processor,
        events,
        max_in_flight: config.max_requests_per_connection.max(1),
        decoder: wire::FrameCodec::new(config.max_frame_size_bytes),
        encoder: wire::FrameCodec::new(usize::MAX),
        input: BytesMut::with_capacity(READ_CHUNK_BYTES),
        output: BytesMut::with_capacity(64 * 1024),
        shared: None,
        in_flight: FuturesUnordered::new(),
        state: State::Open,
        held: false,
        started_waiting: false,
        pass_full: false,
        fresh_input: false,
        events_tx,
        events_task: None,
        registered: Registered::default(),
        flush: FlushPolicy::default(),
        specs: SpecCache::default(),
        budget: limits.open(peer.ip()),
        requests_bytes: 0,
        memory_wait: false,
    };
    let mut shut_down = false;
    loop {
        loop {
            conn.start_buffered(&writer);
            conn.collect_completed();
            let waiting = std::mem::take(&mut conn.started_waiting);
            // While the client shares this thread's core (see `FlushPolicy`), a pass whose
            // requests wait keeps what it answered for the one write after the wait: a write
            // now would wake the client, which would preempt the thread before the work waited
            // for ran. Measured on the mixed workload at 35,141 ops/s (bench/ab.py, two
            // alternations of three runs): inserts' p50 0.376-0.397 to 0.329-0.357 ms,
            // selects' unchanged (0.278-0.292 and 0.281-0.305), the p99 of all 0.738-0.967
            // (median 0.846) to 0.705-0.897 (median 0.714).
            let hold = waiting && conn.flush.holds_to_pass_end();
            if !hold && !conn.output.is_empty() && conn.state != State::Broken {
                conn.write_some(&writer);
            }
            if waiting {
                // Requests of this pass wait for work they handed to other tasks (a write
                // group's storage write, see `replica::LocalReplica`): let that run and
                // answer them before reading more. Reading on instead would gather every
                // request the client has in flight into one group, and client and server
                // would take turns.
                tokio::task::yield_now().await;
                conn.collect_completed();
                if !conn.output.is_empty() && conn.state != State::Broken {
                    conn.write_some(&writer);
                }
            }
            if std::mem::take(&mut conn.pass_full) {
                // Let the shard's other tasks run, then start the rest of what was read
                // (nothing would wake the task for bytes already buffered).
                tokio::task::yield_now().await;
                conn.collect_completed();
                continue;
            }
            // Completions and writes can make room for requests a bound held back; nothing
            // else would wake the task for them.
            if !(conn.held && conn.has_room()) {
                break;
            }
        }
        if conn.state == State::Failing && conn.output.is_empty() && !shut_down {
            // The error is out: close our side now, as the client expects, and let the requests
            // in flight finish below.
            let _ = writer.shutdown().await;
            shut_down = true;
        }
        let quiet = conn.output.is_empty() || conn.state == State::Broken;
        if conn.state != State::Open && conn.in_flight.is_empty() && quiet {
            break;
        }
        let need = conn.account_memory();
        tokio::select! {
            biased;
            done = conn.in_flight.next(), if !conn.in_flight.is_empty() => {
                if let Some(done) = done {
                    conn.answer(done);
                }
            }
            writable = writer.writable(), if !conn.output.is_empty() && conn.state != State::Broken => {
                if writable.is_err() {
                    conn.state = State::Broken;
                }
            }
            readable = reader.readable(), if conn.wants_input() => {
                match readable {
                    Ok(()) => conn.read_some(&reader),
                    Err(_) => conn.stop_reading(),
                }
            }
            Some(event) = events_rx.recv() => conn.event(event),
            _ = stop.changed(), if conn.state == State::Open => conn.stop_reading(),
            // Another connection gave bytes back: `account_memory` tries again.
            () = conn.budget.room_for(need), if conn.memory_wait => {}
        }
    }
    if let Some(t) = conn.events_task.take() {
        t.abort();
    }
    if !shut_down {
        let _ = writer.shutdown().await;
    }
    tracing::debug!(%peer, "connection closed");
}

impl Connection {
    /// Reading more is useful: the connection is open and every complete frame read so far
    /// was started.
    fn wants_input(&self) -> bool {
        self.state == State::Open && !self.held && !self.memory_wait
    }

    /// Holds from the in-flight budgets what the connection needs to read again: its
    /// requests in flight, what it buffers of the next ones (a frame whose header has arrived
    /// counts whole) and room for one more read; if they have no room, reading waits
    /// (`memory_wait`). Returns the bytes needed. A connection with nothing in flight and
    /// nothing buffered holds nothing, and gives back the memory of buffers that grew for a
    /// large frame.
    fn account_memory(&mut self) -> u64 {
        let buffered = self.input.len() + self.decoder.incomplete_frame_held_bytes();
        let frame = self
            .decoder
            .incomplete_frame_bytes(&self.input)
            .unwrap_or(0);
        let pending = self.requests_bytes + buffered.max(frame) as u64;
        if pending == 0 {
            self.memory_wait = false;
            self.budget.keep(0);
            self.shrink_idle_buffers();
            return 0;
        }
        let need = pending + READ_CHUNK_BYTES as u64;
        // Only a connection that would read waits for room: one that is held (its buffered
        // frames fill the request bound) or draining must not keep `room_for` armed, or the
        // select loop would find it ready again and again without awaiting anything.
        self.memory_wait = self.state == State::Open && !self.held && !self.budget.hold(need);
        if self.memory_wait {
            // While it waits it holds only what its requests in flight need, which their
            // answers give back on their own: holding its half-read frame's grants too, two
            // connections waiting for room for their next frames could each hold the room the
            // other needs, for good.
            self.budget.keep(self.requests_bytes);
        } else if self.budget.held_bytes() > need + 4 * GRANT_BYTES {
            self.budget.keep(need);
        }
        need
    }

    fn shrink_idle_buffers(&mut self) {
        if self.input.capacity() > IDLE_BUFFER_BYTES {
            self.input = BytesMut::new();
        }
        if self.output.is_empty() && self.output.capacity() > IDLE_BUFFER_BYTES {
            self.output = BytesMut::new();
        }
        self.decoder.shrink_idle_buffers(IDLE_BUFFER_BYTES);
        self.encoder.shrink_idle_buffers(IDLE_BUFFER_BYTES);
    }

    fn read_some(&mut self, reader: &OwnedReadHalf) {
        self.input.reserve(READ_CHUNK_BYTES);
        // At most one chunk, which `account_memory` held room for (a reserve may leave more
        // spare capacity than that).
        let mut chunk = bytes::BufMut::limit(&mut self.input, READ_CHUNK_BYTES);
        match reader.try_read_buf(&mut chunk) {
            Ok(0) => self.stop_reading(),
            Ok(_) => self.fresh_input = true,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(_) => self.stop_reading(),
        }
    }

    fn stop_reading(&mut self) {
        if self.state == State::Open {
            self.state = State::Draining;
        }
    }

    /// Writes as much of the output as the socket takes now.
    fn write_some(&mut self, writer: &OwnedWriteHalf) {
        while !self.output.is_empty() {
            match writer.try_write(&self.output) {
                Ok(n) => self.output.advance(n),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(_) => {
                    self.state = State::Broken;
                    self.output.clear();
                    return;
                }
            }
        }
    }

    /// Answers whatever in-flight requests complete without waiting (most do, on their first
    /// poll), so their responses share the next write.
    fn collect_completed(&mut self) {
        while !self.in_flight.is_empty() {
            match self.in_flight.next().now_or_never() {
                Some(Some(done)) => self.answer(done),
                _ => return,
            }
        }
    }

    fn answer(&mut self, done: Done) {
        self.requests_bytes -= done.bytes;
        let Done {
            version,
            stream,
            bytes: _,
            answer: Answer {
                mut response,
                warnings,
            },
        } = done;
        if let wire::Response::Result(wire::ResultBody::Rows(rows)) = &mut response {
            self.specs.fill(version, rows.metadata_mut());
        }
        self.respond(version, stream, &response, &warnings);
    }

    fn event(&mut self, response: wire::Response) {
        if let Some(version) = self.shared.as_ref().map(|s| s.version) {
            self.respond(version, -1, &response, &[]);
        }
    }

    fn respond(
        &mut self,
        version: wire::Version,
        stream: i16,
        response: &wire::Response,
        warnings: &[String],
    ) {
        if matches!(self.state, State::Open | State::Draining) {
            self.encoder.encode_with_warnings(
                version,
                stream,
                response,
                warnings,
                &mut self.output,
            );
        }
    }

    /// Queues a protocol error and closes the connection after sending it.
    fn fail(
        &mut self,
        version: wire::Version,
        stream: i16,
        code: wire::ErrorCode,
        message: String,
    ) {
        let response = wire::Response::Error(wire::ErrorBody {
            code,
            message,
            extra: wire::ErrorExtra::None,
        });
        self.respond(version, stream, &response, &[]);
        if self.state != State::Broken {
            self.state = State::Failing;
        }
    }

    fn error(&mut self, version: wire::Version, stream: i16, message: String) {
        let response = wire::Response::Error(wire::ErrorBody {
            code: wire::ErrorCode::ProtocolError,
            message,
            extra: wire::ErrorExtra::None,
        });
        self.respond(version, stream, &response, &[]);
    }

    /// Another request may start: fewer than the bound in flight, and the output below its
    /// bound.
    fn has_room(&self) -> bool {
        self.in_flight.len() < self.max_in_flight && self.output.len() < OUT_HIGH_WATER_BYTES
    }

    /// Decodes and starts every complete request read so far, up to the in-flight and output
    /// bounds (at a bound `held` is set and reading waits until requests complete) and
    /// `REQUESTS_PER_PASS` (then `pass_full` is set).
    fn start_buffered(&mut self, writer: &OwnedWriteHalf) {
        let mut switches_at_flush = None;
        let started = self.start_pass(writer, &mut switches_at_flush);
        if started > 0 {
            let preempted = switches_at_flush.map(|before| involuntary_switches() > before);
            self.flush.end_pass(preempted);
        }
    }

    /// `start_buffered`'s pass; returns the number of frames it took. If it wrote early (and
    /// the policy is probing), `switches_at_flush` gets this thread's involuntary context
    /// switches before its first early write.
    fn start_pass(
        &mut self,
        writer: &OwnedWriteHalf,
        switches_at_flush: &mut Option<u64>,
    ) -> usize {
        self.held = false;
        let mut started = 0;
        let threshold = self.flush.threshold();
        while self.state == State::Open {
            if !self.has_room() {
                self.held = true;
                return started;
            }
            if started == REQUESTS_PER_PASS {
                // Checked before decoding, so `pass_full` means a frame may be buffered (in
                // `input`, or in the decoder: a v5 segment carries many frames); the next pass
                // finds out.
                self.pass_full = true;
                return started;
            }
            started += 1;
            let frame = match self.decoder.decode(&mut self.input) {
                Ok(Some(frame)) => frame,
                Ok(None) => {
                    let incomplete = !self.input.is_empty() || self.decoder.has_incomplete_frame();
                    if started == 1 && self.fresh_input && incomplete {
                        acknowledge_now(writer);
                    }
                    self.fresh_input = false;
                    return started - 1;
                }
                Err(e) => {
                    let (stream, version, message, code) = protocol_error_details(&e);
                    tracing::debug!(peer = %self.peer, error = %e, "protocol error; closing");
                    self.fail(version, stream, code, message);
                    return started;
                }
            };
            let version = frame.version;
            let stream = frame.stream;
            // STARTUP fixes the connection's version; a frame of another is refused (in the
            // connection's version) before its body is read, as Cassandra refuses it.
            if let Some(shared) = &self.shared {
                if version != shared.version {
                    let message = format!(
                        "Invalid message version. Got {}/v{0} but previous messages on this connection had version {}/v{1}",
                        version.number(),
                        shared.version.number()
                    );
                    self.error(shared.version, stream, message);
                    continue;
                }
            }
            let bytes = (wire::frame::HEADER_BYTES + frame.body.len()) as u64;
            match wire::Request::decode(version, frame.opcode, frame.body) {
                Ok(request) => {
                    self.start(version, stream, bytes, request);
                    if self.output.len() >= threshold && self.state != State::Broken {
                        if switches_at_flush.is_none() && threshold == FLUSH_BYTES {
                            *switches_at_flush = Some(involuntary_switches());
                        }
                        self.write_some(writer);
                    }
                }
                // The frame was read whole, so the stream stays in step: the error answers this
                // request alone and the connection goes on, as Cassandra's does.
                Err(e) => self.error(version, stream, e.to_string()),
            }
        }
        started
    }

    /// Starts a request of `bytes` frame bytes (counted in `requests_bytes` until answered).
    fn start(&mut self, version: wire::Version, stream: i16, bytes: u64, request: wire::Request) {
        match request {
            wire::Request::Options => self.respond(version, stream, &supported(), &[]),
            wire::Request::Startup(options) => {
                let compression = match startup_compression(&options, version) {
                    Ok(c) => c,
                    Err(message) => return self.error(version, stream, message),
                };
                if self.shared.is_some() {
                    return self.error(
                        version,
                        stream,
                        "Unexpected message STARTUP, the connection is already initialized"
                            .to_string(),
                    );
                }
                self.shared = Some(Arc::new(Shared {
                    processor: self.processor.clone(),
                    session: Mutex::new(Session::default()),
                    version,
                }));
                self.respond(version, stream, &wire::Response::Ready, &[]);
                // Everything after READY uses the negotiated compression, and v5 switches to
                // segment framing, in both directions.
                if let Some(c) = compression {
                    self.encoder.set_compression(c);
                    self.decoder.set_compression(c);
                }
                if version == wire::Version::V5 {
                    self.encoder.switch_to_v5_segments();
                    self.decoder.switch_to_v5_segments();
                }
            }
            other => {
                let Some(shared) = self.shared.clone() else {
                    let message = format!(
                        "Unexpected message {}, expecting STARTUP or OPTIONS",
                        wire::frame::opcode::name(other.opcode())
                    );
                    return self.error(version, stream, message);
                };
                if let wire::Request::Register { events } = &other {
                    let registered = self.registered.with(events);
                    if registered != self.registered {
                        // One task serves every kind registered so far: a second REGISTER
                        // adds kinds to it, as Cassandra's connection tracker does.
                        if let Some(t) = self.events_task.take() {
                            t.abort();
                        }
                        self.registered = registered;
                        self.events_task = Some(spawn_events(
                            &self.events,
                            registered,
                            self.events_tx.clone(),
                        ));
                    }
                    return self.respond(version, stream, &wire::Response::Ready, &[]);
                }
                self.requests_bytes += bytes;
                let mut request: InFlight = Box::pin(async move {
                    let answer = handle(&shared, other).await;
                    Done {
                        version,
                        stream,
                        bytes,
                        answer,
                    }
                });
                // Most requests complete on their first poll; the others wait in `in_flight`,
                // which polls them again (with the task's waker) before the task sleeps.
                match (&mut request).now_or_never() {
                    Some(done) => self.answer(done),
                    None => {
                        self.in_flight.push(request);
                        self.started_waiting = true;
                    }
                }
            }
        }
    }
}

/// Acknowledges what the socket received now instead of after the delayed-ACK timer (40 ms
/// on Linux), for a pass that read only part of a frame. A client that leaves Nagle's algorithm
/// on and writes a large request in pieces (the Python driver: 4 KiB) sends the next piece only
/// once the previous one is acknowledged, and the server, with nothing to answer yet, would
/// delay that acknowledgement: every request over 4 KiB took 44 ms. A response acknowledges by
/// itself, so this is needed only when the pass started no request. Best effort: a socket that
/// refuses the option only costs that latency.
fn acknowledge_now(writer: &OwnedWriteHalf) {
    let _ = socket2::SockRef::from(writer.as_ref()).set_tcp_quickack(true);
}

fn protocol_error_details(
    e: &wire::ProtocolError,
) -> (i16, wire::Version, String, wire::ErrorCode) {
    match e {
        wire::ProtocolError::UnsupportedVersion { version, stream } => (
            *stream,
            wire::Version::V4,
            format!(
                "Invalid or unsupported protocol version ({version}); supported versions are (4/v4, 5/v5)"
            ),
            wire::ErrorCode::ProtocolError,
        ),
        other => (0, wire::Version::V4, other.to_string(), wire::ErrorCode::ProtocolError),
    }
}

/// SUPPORTED, the answer to OPTIONS: the CQL version, compressions and protocol versions.
pub fn supported() -> wire::Response {
    wire::Response::Supported(vec![
        ("CQL_VERSION".to_string(), vec!["3.4.7".to_string()]),
        (
            "COMPRESSION".to_string(),
            vec!["lz4".to_string(), "snappy".to_string()],
        ),
        (
            "PROTOCOL_VERSIONS".to_string(),
            vec!["4/v4".to_string(), "5/v5".to_string()],
        ),
    ])
}

/// Checks STARTUP's options and returns the compression they ask for. The error is the message
/// of the protocol error to answer (the connection stays open, unstarted).
pub fn startup_compression(
    options: &[(String, String)],
    version: wire::Version,
) -> Result<Option<wire::Compression>, String> {
    let mut cql_version_ok = false;
    let mut compression = None;
    for (k, v) in options {
        match k.to_ascii_uppercase().as_str() {
            "CQL_VERSION" => {
                check_cql_version(v)?;
                cql_version_ok = true;
            }
            "COMPRESSION" => {
                compression = match (v.to_ascii_lowercase().as_str(), version) {
                    ("lz4", _) => Some(wire::Compression::Lz4),
                    ("snappy", wire::Version::V4) => Some(wire::Compression::Snappy),
                    ("snappy", _) => {
                        return Err("Snappy compression is not supported in protocol v5".to_string())
                    }
                    (other, _) => return Err(format!("Unknown compression algorithm: {other}")),
                }
            }
            _ => {}
        }
    }
    if !cql_version_ok {
        return Err("Missing value CQL_VERSION in STARTUP message".to_string());
    }
    Ok(compression)
}

/// Cassandra's STARTUP check: any well-formed CQL version from 3.0.0 up (drivers send 3.0.0,
/// 3.4.x, or, like the Rust `scylla` crate, 4.0.0).
fn check_cql_version(v: &str) -> Result<(), String> {
    let mut parts = v.splitn(3, '.');
    let mut number = || -> Option<u32> {
        let part = parts.next()?;
        // The patch level may carry a suffix ("3.4.7-SNAPSHOT").
        let digits = part.split(|c: char| !c.is_ascii_digit()).next()?;
        digits.parse().ok()
    };
    let (Some(major), Some(minor)) = (number(), number()) else {
        return Err(format!("Invalid version value: {v}"));
    };
    if (major, minor) < (2, 99) {
        return Err(format!(
            "CQL version {v} is not supported by the binary protocol (supported version are >= 3.0.0)"
        ));
    }
    Ok(())
}

/// The event kinds a connection registered for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Registered {
    schema: bool,
    topology: bool,
    status: bool,
}

impl Registered {
    /// These kinds and those `events` names (the protocol's names; the codec has refused
    /// unknown ones).
    fn with(self, events: &[String]) -> Registered {
        let has = |name: &str| events.iter().any(|e| e == name);
        Registered {
            schema: self.schema || has("SCHEMA_CHANGE"),
            topology: self.topology || has("TOPOLOGY_CHANGE"),
            status: self.status || has("STATUS_CHANGE"),
        }
    }
}

/// A task that forwards the events of the `registered` kinds to the connection's writer.
fn spawn_events(
    sources: &EventSources,
    registered: Registered,
    out: mpsc::Sender<wire::Response>,
) -> tokio::task::JoinHandle<()> {
    use tokio::sync::broadcast::error::RecvError;
    let mut schema = registered.schema.then(|| sources.schema.subscribe());
    let mut cluster =
        (registered.topology || registered.status).then(|| sources.cluster.subscribe());
    tokio::spawn(async move {
        loop {
            let event = tokio::select! {
                e = recv(&mut schema) => match e {
                    Ok(e) => Some(wire::Event::SchemaChange(schema_change(&e))),
                    Err(RecvError::Lagged(n)) => {
                        tracing::warn!(missed = n, "client fell behind on schema events");
                        None
                    }
                    Err(RecvError::Closed) => return,
                },
                e = recv(&mut cluster) => match e {
                    Ok(e) => cluster_event(e, registered),
                    Err(RecvError::Lagged(n)) => {
                        tracing::warn!(missed = n, "client fell behind on cluster events");
                        None
                    }
                    Err(RecvError::Closed) => return,
                },
            };
            if let Some(event) = event {
                if out.send(wire::Response::Event(event)).await.is_err() {
                    return;
                }
            }
        }
    })
}

/// The next event of `receiver`, or never if the connection did not register for its kind.
async fn recv<T: Clone>(
    receiver: &mut Option<tokio::sync::broadcast::Receiver<T>>,
) -> Result<T, tokio::sync::broadcast::error::RecvError> {
    match receiver {
        Some(r) => r.recv().await,
        None => std::future::pending().await,
    }
}

/// `event` in the protocol's words, if the connection registered for its kind.
fn cluster_event(event: ClusterEvent, registered: Registered) -> Option<wire::Event> {
    let topology = |change: &str, addr| {
        registered.topology.then(|| wire::Event::TopologyChange {
            change: change.to_string(),
            addr,
        })
    };
    let status = |change: &str, addr| {
        registered.status.then(|| wire::Event::StatusChange {
            change: change.to_string(),
            addr,
        })
    };
    match event {
        ClusterEvent::NewNode(addr) => topology("NEW_NODE", addr),
        ClusterEvent::RemovedNode(addr) => topology("REMOVED_NODE", addr),
        ClusterEvent::Up(addr) => status("UP", addr),
        ClusterEvent::Down(addr) => status("DOWN", addr),
    }
}

fn schema_change(e: &SchemaChangeEvent) -> wire::SchemaChange {
    wire::SchemaChange {
        change_type: match e.kind {
            SchemaChangeKind::Created => wire::SchemaChangeType::Created,
            SchemaChangeKind::Updated => wire::SchemaChangeType::Updated,
            SchemaChangeKind::Dropped => wire::SchemaChangeType::Dropped,
        },
        target: match e.target {
            SchemaChangeTarget::Keyspace => wire::SchemaChangeTarget::Keyspace {
                keyspace: e.keyspace.clone(),
            },
            SchemaChangeTarget::Table => wire::SchemaChangeTarget::Table {
                keyspace: e.keyspace.clone(),
                name: e.name.clone().unwrap_or_default(),
            },
            SchemaChangeTarget::Type => wire::SchemaChangeTarget::Type {
                keyspace: e.keyspace.clone(),
                name: e.name.clone().unwrap_or_default(),
            },
        },
    }
}

fn bound(values: wire::Values) -> BoundValues {
    let one = |v: wire::RawValue| match v {
        wire::RawValue::Null => BoundValue::Null,
        wire::RawValue::NotSet => BoundValue::Unset,
        wire::RawValue::Value(b) => BoundValue::Value(b),
    };
    match values {
        wire::Values::Positional(v) if v.is_empty() => BoundValues::None,
        wire::Values::Positional(v) => BoundValues::Positional(v.into_iter().map(one).collect()),
        wire::Values::Named(v) => {
            BoundValues::Named(v.into_iter().map(|(n, x)| (n, one(x))).collect())
        }
    }
}

fn options(p: wire::QueryParameters) -> QueryOptions {
    QueryOptions {
        consistency: consistency_from_wire(p.consistency),
        values: bound(p.values),
        page_size: p.page_size,
        paging_state: p.paging_state,
        serial_consistency: p.serial_consistency.map(consistency_from_wire),
        timestamp: p.default_timestamp,
        keyspace: p.keyspace,
        now_in_seconds: p.now_in_seconds,
    }
}

async fn handle(shared: &Shared, request: wire::Request) -> Answer {
    answer(&shared.processor, &shared.session, request).await
}

/// A response and the client warnings to send with it (frame flag WARNING, protocol v4+).
#[derive(Debug)]
pub struct Answer {
    pub response: wire::Response,
    pub warnings: Vec<String>,
}

/// Answers a QUERY, PREPARE, EXECUTE, BATCH or AUTH_RESPONSE through `processor` exactly as a
/// connection of this server does, errors included; `session` is the connection's state (its
/// keyspace after USE). OPTIONS, STARTUP and REGISTER belong to the connection and get a server
/// error here.
pub async fn answer(
    processor: &QueryProcessor,
    session: &Mutex<Session>,
    request: wire::Request,
) -> Answer {
    match execute(processor, session, request).await {
        Ok(answer) => answer,
        Err(e) => Answer {
            response: wire::Response::Error(error_body(&e)),
            warnings: Vec::new(),
        },
    }
}

fn session_snapshot(session: &Mutex<Session>) -> Session {
    session.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

fn store_session(state: &Mutex<Session>, session: Session) {
    *state.lock().unwrap_or_else(|p| p.into_inner()) = session;
}

async fn execute(
    processor: &QueryProcessor,
    state: &Mutex<Session>,
    request: wire::Request,
) -> Result<Answer, QueryError> {
    match request {
        wire::Request::Query { query, params } => {
            if params.page_size == Some(0) {
                return Ok(zero_page_size());
            }
            let skip_metadata = params.skip_metadata;
            let mut session = session_snapshot(state);
            let before = session.keyspace.clone();
            let outcome = processor
                .query(&query, options(params), &mut session)
                .await?;
            if session.keyspace != before {
                store_session(state, session);
            }
            Ok(result_response(outcome, skip_metadata, None))
        }
        wire::Request::Prepare { query, keyspace } => {
            let session = session_snapshot(state);
            let prepared = processor.prepare(&query, keyspace.as_deref(), &session)?;
            let response =
                wire::Response::Result(wire::ResultBody::Prepared(wire::PreparedResult {
                    id: prepared.id.clone(),
                    result_metadata_id: Some(prepared.result_metadata_id.clone()),
                    bind_columns: prepared.bind_specs.clone(),
                    pk_indexes: prepared.pk_indexes.clone(),
                    result_columns: prepared.result_columns.clone(),
                }));
            Ok(Answer {
                response,
                warnings: Vec::new(),
            })
        }
        wire::Request::Execute {
            id,
            result_metadata_id,
            params,
        } => {
            let prepared = processor
                .prepared(&id)
                .ok_or_else(|| QueryError::Unprepared { id: id.to_vec() })?;
            // After the lookup, as Cassandra checks it: an unknown id is Unprepared first.
            if params.page_size == Some(0) {
                return Ok(zero_page_size());
            }
            let mut skip_metadata = params.skip_metadata;
            // v5: when the client's result metadata is stale (the table changed since it
            // prepared), send the full metadata and its new id instead of skipping it.
            let mut new_metadata_id = None;
            if let Some(client_id) = &result_metadata_id {
                if *client_id != prepared.result_metadata_id {
                    skip_metadata = false;
                    new_metadata_id = Some(prepared.result_metadata_id.clone());
                }
            }
            let mut session = session_snapshot(state);
            let before = session.keyspace.clone();
            let outcome = processor
                .execute_prepared(&prepared, options(params), &mut session)
                .await?;
            if session.keyspace != before {
                store_session(state, session);
            }
            Ok(result_response(outcome, skip_metadata, new_metadata_id))
        }
        wire::Request::Batch(batch) => {
            let kind = match batch.kind {
                wire::BatchKind::Logged => BatchKind::Logged,
                wire::BatchKind::Unlogged => BatchKind::Unlogged,
                wire::BatchKind::Counter => BatchKind::Counter,
            };
            let items = batch
                .statements
                .into_iter()
                .map(|s| {
                    let values = bound(s.values);
                    match s.kind {
                        wire::BatchStatementKind::Query(q) => BatchItem::Query(q, values),
                        wire::BatchStatementKind::Prepared(id) => BatchItem::Prepared(id, values),
                    }
                })
                .collect();
            let opts = QueryOptions {
                consistency: consistency_from_wire(batch.consistency),
                serial_consistency: batch.serial_consistency.map(consistency_from_wire),
                timestamp: batch.default_timestamp,
                keyspace: batch.keyspace,
                now_in_seconds: batch.now_in_seconds,
                ..QueryOptions::default()
            };
            let mut session = session_snapshot(state);
            let outcome = processor.batch(kind, items, opts, &mut session).await?;
            Ok(result_response(outcome, false, None))
        }
        wire::Request::AuthResponse(_) => Err(QueryError::Server(
            "Authentication is not enabled on this node".to_string(),
        )),
        wire::Request::Options | wire::Request::Startup(_) | wire::Request::Register { .. } => {
            Err(QueryError::Server("unexpected request".to_string()))
        }
    }
}

/// A page size of 0 in QUERY or EXECUTE: Cassandra's protocol error (a negative one means no
/// paging, and is taken).
fn zero_page_size() -> Answer {
    Answer {
        response: wire::Response::Error(wire::ErrorBody {
            code: wire::ErrorCode::ProtocolError,
            message: "The page size cannot be 0".to_string(),
            extra: wire::ErrorExtra::None,
        }),
        warnings: Vec::new(),
    }
}

fn result_response(
    outcome: Outcome,
    skip_metadata: bool,
    new_metadata_id: Option<Bytes>,
) -> Answer {
    let body = match outcome.result {
        QueryResult::Void => wire::ResultBody::Void,
        QueryResult::SetKeyspace(k) => wire::ResultBody::SetKeyspace(k),
        QueryResult::SchemaChange(e) => wire::ResultBody::SchemaChange(schema_change(&e)),
        QueryResult::Rows(rows) => {
            let column_count = rows.columns.len();
            // The columns are the prepared statement's own (shared, not copied); without
            // metadata none are written.
            let columns = if skip_metadata && new_metadata_id.is_none() {
                Default::default()
            } else {
                rows.columns
            };
            // The cells go into the frame as it is encoded: one copy of each value.
            wire::ResultBody::Rows(wire::Rows::from_cells(
                column_count,
                rows.rows,
                wire::RowsMetadata {
                    columns,
                    paging_state: rows.paging_state.map(Bytes::from),
                    no_metadata: skip_metadata,
                    new_metadata_id,
                    encoded_columns: None,
                },
            ))
        }
    };
    Answer {
        response: wire::Response::Result(body),
        warnings: outcome.warnings,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use cql_protocol as wire;
    use types::CqlType;

    use super::{
        check_cql_version, FlushPolicy, SpecCache, FLUSH_BYTES, LATE_FLUSH_BYTES, LATE_PASSES,
        PREEMPTED_OF_PROBED, PROBED_PASSES, SPEC_CACHE_ENTRIES,
    };

    fn metadata(columns: &Arc<[wire::ColumnSpec]>, no_metadata: bool) -> wire::RowsMetadata {
        wire::RowsMetadata {
            columns: columns.clone(),
            paging_state: None,
            no_metadata,
            new_metadata_id: None,
            encoded_columns: None,
        }
    }

    fn specs(name: &str) -> Arc<[wire::ColumnSpec]> {
        vec![wire::ColumnSpec {
            keyspace: "ks".into(),
            table: "t".into(),
            name: name.into(),
            ty: CqlType::Int,
        }]
        .into()
    }

    #[test]
    fn a_statements_specs_are_encoded_once_per_connection() {
        let mut cache = SpecCache::default();
        let statement = specs("a");
        let v4 = wire::Version::V4;
        let mut first = metadata(&statement, false);
        cache.fill(v4, &mut first);
        let expected = wire::encode_column_specs(v4, &statement);
        assert_eq!(first.encoded_columns.as_ref(), Some(&expected));
        let mut second = metadata(&statement, false);
        cache.fill(v4, &mut second);
        assert_eq!(second.encoded_columns, first.encoded_columns);
        assert_eq!(cache.entries.len(), 1);
        // Equal specs of another statement are another entry: only the `Arc` names them.
        let mut other = metadata(&specs("a"), false);
        cache.fill(v4, &mut other);
        assert_eq!(cache.entries.len(), 2);
        // Specs that are not written are not encoded.
        let mut skipped = metadata(&statement, true);
        cache.fill(v4, &mut skipped);
        assert_eq!(skipped.encoded_columns, None);
        // The cache is bounded, and what was used last stays in it.
        let kept: Vec<_> = (0..2 * SPEC_CACHE_ENTRIES)
            .map(|i| specs(&format!("c{i}")))
            .collect();
        for columns in &kept {
            cache.fill(v4, &mut metadata(columns, false));
            cache.fill(v4, &mut metadata(&statement, false));
        }
        assert_eq!(cache.entries.len(), SPEC_CACHE_ENTRIES);
        assert!(Arc::ptr_eq(&cache.entries[0].0, &statement));
    }

    #[test]
    fn cql_versions_from_3_0_0_up_are_accepted() {
        for ok in ["3.0.0", "3.4.7", "4.0.0", "3.4.7-SNAPSHOT", "3.0"] {
            assert_eq!(check_cql_version(ok), Ok(()), "{ok}");
        }
        assert!(check_cql_version("2.0.0")
            .unwrap_err()
            .contains("supported version are >= 3.0.0"));
        for bad in ["", "x", "3", "three.0.0"] {
            assert!(check_cql_version(bad)
                .unwrap_err()
                .starts_with("Invalid version value"));
        }
    }

    #[test]
    fn passes_write_late_once_early_writes_get_preempted_and_probe_again_later() {
        let mut policy = FlushPolicy::default();
        assert_eq!(policy.threshold(), FLUSH_BYTES);
        // Passes without an early write tell nothing.
        for _ in 0..10 * PROBED_PASSES {
            policy.end_pass(None);
        }
        assert_eq!(policy.threshold(), FLUSH_BYTES);
        // A client on another core: now and then a pass is preempted (other threads), under
        // the bar in every window.
        for i in 0..10 * PROBED_PASSES {
            policy.end_pass(Some(i % PROBED_PASSES < PREEMPTED_OF_PROBED - 1));
        }
        assert_eq!(policy.threshold(), FLUSH_BYTES);
        // A client on this core: early writes get preempted.
        for _ in 0..PREEMPTED_OF_PROBED - 1 {
            policy.end_pass(Some(true));
        }
        assert_eq!(policy.threshold(), FLUSH_BYTES);
        policy.end_pass(Some(true));
        assert_eq!(policy.threshold(), LATE_FLUSH_BYTES);
        // Late for `LATE_PASSES` passes, whatever they report, then probing again from zero.
        for _ in 0..LATE_PASSES {
            assert_eq!(policy.threshold(), LATE_FLUSH_BYTES);
            policy.end_pass(Some(true));
        }
        assert_eq!(policy.threshold(), FLUSH_BYTES);
        for _ in 0..PREEMPTED_OF_PROBED - 1 {
            policy.end_pass(Some(true));
        }
        policy.end_pass(Some(false));
        assert_eq!(policy.threshold(), FLUSH_BYTES);
        policy.end_pass(Some(true));
        assert_eq!(policy.threshold(), LATE_FLUSH_BYTES);
    }

    mod events {
        use std::net::SocketAddr;
        use std::sync::Arc;
        use std::time::Duration;

        use cql_protocol as wire;
        use tokio::sync::mpsc;

        use super::super::{spawn_events, Registered};
        use crate::{ClusterEvent, ClusterEvents, EventSources};

        fn names(names: &[&str]) -> Vec<String> {
            names.iter().map(|n| n.to_string()).collect()
        }

        #[test]
        fn a_second_register_adds_kinds() {
            let first = Registered::default().with(&names(&["STATUS_CHANGE"]));
            assert!(first.status && !first.topology && !first.schema);
            let both = first.with(&names(&["TOPOLOGY_CHANGE"]));
            assert!(both.status && both.topology && !both.schema);
            assert_eq!(both.with(&names(&["STATUS_CHANGE"])), both);
        }

        /// A connection registered for STATUS_CHANGE only gets UP and DOWN, in the protocol's
        /// words, and neither topology nor schema events.
        #[tokio::test]
        async fn only_the_registered_kinds_reach_the_connection() {
            let engine = Arc::new(storage::MemoryEngine::new());
            let schema =
                Arc::new(schema_service::SchemaService::open(engine, vec![]).expect("schema"));
            let cluster = ClusterEvents::new();
            let sources = EventSources {
                schema,
                cluster: cluster.clone(),
            };
            let (tx, mut rx) = mpsc::channel(16);
            let registered = Registered::default().with(&names(&["STATUS_CHANGE"]));
            let task = spawn_events(&sources, registered, tx);
            tokio::task::yield_now().await;
            let node: SocketAddr = "127.0.0.2:9042".parse().expect("address");
            cluster.send(ClusterEvent::NewNode(node));
            cluster.send(ClusterEvent::Down(node));
            cluster.send(ClusterEvent::RemovedNode(node));
            cluster.send(ClusterEvent::Up(node));
            let mut got = Vec::new();
            for _ in 0..2 {
                let next = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await;
                got.push(next.expect("an event in time").expect("open"));
            }
            let status = |change: &str| {
                wire::Response::Event(wire::Event::StatusChange {
                    change: change.to_string(),
                    addr: node,
                })
            };
            assert_eq!(got, vec![status("DOWN"), status("UP")]);
            assert!(rx.try_recv().is_err(), "no other event");
            task.abort();
        }
    }
}
