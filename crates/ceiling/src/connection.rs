//! One client connection, served by one task: it decodes every complete request in what it has
//! read, answers each in arrival order (with its stream id) into one output buffer, writes that
//! buffer every `FLUSH_BYTES` and at the end of the batch, and reads again.
//!
//! The requests a benchmark measures are answered without being executed:
//!
//! - EXECUTE of a prepared INSERT, UPDATE or DELETE (or a BATCH statement of them) on a user
//!   table, a QUERY whose text is one, and a BATCH of only such statements: RESULT Void.
//! - EXECUTE or QUERY of a SELECT from a user table: RESULT Rows with no rows, described by the
//!   statement's prepared result metadata (or the No_metadata flag if the client asked to skip
//!   it).
//!
//! Bound values are not looked at. Everything else (system tables, DDL, USE, PREPARE, unknown
//! prepared ids, conditional writes) goes to the query processor through
//! `cql_server::answer`, so it gets exactly the answer or error the `helenus` server gives.
//! Unlike that server this one never sends events: REGISTER is acknowledged, but drivers only
//! learn of schema changes from the results of their own DDL.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::BytesMut;
use cql_protocol as wire;
use query::{PreparedInfo, QueryProcessor, Session, StatementKind};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Largest request frame accepted (Cassandra's default `native_transport_max_frame_size`).
const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;
/// Bytes read from the socket per read call.
const READ_CHUNK_BYTES: usize = 64 * 1024;
/// Answers are written once this many bytes are buffered, even mid-batch: the same as
/// `cql-server`'s connections, so the client works on the first answers while the rest are
/// made, as it does with the `helenus` server. Writing once per read chunk made the ceiling
/// slower than that server on point reads (client and ceiling took turns: 181k against
/// 219-243k reads/s with this on the benchmark machine). It also bounds the output buffered.
const FLUSH_BYTES: usize = 8 * 1024;

/// What to do after answering a frame.
enum After {
    Continue,
    /// The stream cannot be read further (a protocol error): write what is buffered and close.
    Close,
}

struct Connection {
    processor: Arc<QueryProcessor>,
    /// The connection's keyspace (USE); a mutex only because `cql_server::answer` shares the
    /// type with connections that answer concurrently. Never contended here.
    session: Mutex<Session>,
    codec: wire::FrameCodec,
    started: bool,
    output: BytesMut,
}

pub(crate) async fn run(mut socket: TcpStream, peer: SocketAddr, processor: Arc<QueryProcessor>) {
    tracing::debug!(%peer, "connection opened");
    let mut connection = Connection {
        processor,
        session: Mutex::new(Session::default()),
        codec: wire::FrameCodec::new(MAX_FRAME_BYTES),
        started: false,
        output: BytesMut::with_capacity(FLUSH_BYTES),
    };
    let mut input = BytesMut::with_capacity(READ_CHUNK_BYTES);
    'connection: loop {
        loop {
            let after = match connection.codec.decode(&mut input) {
                Ok(Some(frame)) => connection.answer_frame(frame).await,
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "protocol error; closing");
                    connection.fatal(&e);
                    After::Close
                }
            };
            if let After::Close = after {
                let _ = socket.write_all(&connection.output).await;
                let _ = socket.shutdown().await;
                break 'connection;
            }
            if connection.output.len() >= FLUSH_BYTES {
                if socket.write_all(&connection.output).await.is_err() {
                    break 'connection;
                }
                connection.output.clear();
            }
        }
        if !connection.output.is_empty() {
            if socket.write_all(&connection.output).await.is_err() {
                break;
            }
            connection.output.clear();
        }
        input.reserve(READ_CHUNK_BYTES);
        match socket.read_buf(&mut input).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    tracing::debug!(%peer, "connection closed");
}

impl Connection {
    fn send(&mut self, version: wire::Version, stream: i16, response: &wire::Response) {
        self.codec
            .encode(version, stream, response, &mut self.output);
    }

    fn protocol_error(&mut self, version: wire::Version, stream: i16, message: String) {
        let response = wire::Response::Error(wire::ErrorBody {
            code: wire::ErrorCode::ProtocolError,
            message,
            extra: wire::ErrorExtra::None,
        });
        self.send(version, stream, &response);
    }

    /// Answers an unreadable stream. An unsupported version is answered on the client's stream
    /// in v4, which is how a driver learns to step down to a version this server speaks.
    fn fatal(&mut self, e: &wire::ProtocolError) {
        let stream = match e {
            wire::ProtocolError::UnsupportedVersion { stream, .. } => *stream,
            _ => 0,
        };
        self.protocol_error(wire::Version::V4, stream, e.to_string());
    }

    async fn answer_frame(&mut self, frame: wire::Frame) -> After {
        let (version, stream) = (frame.version, frame.stream);
        let request = match wire::Request::decode(version, frame.opcode, frame.body) {
            Ok(r) => r,
            Err(e) => {
                self.protocol_error(version, stream, e.to_string());
                return After::Close;
            }
        };
        match request {
            wire::Request::Options => self.send(version, stream, &cql_server::supported()),
            wire::Request::Startup(options) => self.startup(version, stream, &options),
            _ if !self.started => self.protocol_error(
                version,
                stream,
                "Unexpected message, expecting STARTUP or OPTIONS".to_string(),
            ),
            wire::Request::Register { .. } => self.send(version, stream, &wire::Response::Ready),
            other => {
                let answer = match self.answer_at_once(&other) {
                    Some(response) => cql_server::Answer {
                        response,
                        warnings: Vec::new(),
                    },
                    None => cql_server::answer(&self.processor, &self.session, other).await,
                };
                self.codec.encode_with_warnings(
                    version,
                    stream,
                    &answer.response,
                    &answer.warnings,
                    &mut self.output,
                );
            }
        }
        After::Continue
    }

    /// STARTUP as the `helenus` server answers it: READY, then the negotiated compression (the
    /// codec implements it) and, in v5, segment framing, in both directions.
    fn startup(&mut self, version: wire::Version, stream: i16, options: &[(String, String)]) {
        if self.started {
            return self.protocol_error(
                version,
                stream,
                "Unexpected message STARTUP, the connection is already started".to_string(),
            );
        }
        let compression = match cql_server::startup_compression(options, version) {
            Ok(c) => c,
            Err(message) => return self.protocol_error(version, stream, message),
        };
        self.send(version, stream, &wire::Response::Ready);
        if let Some(c) = compression {
            self.codec.set_compression(c);
        }
        if version == wire::Version::V5 {
            self.codec.switch_to_v5_segments();
        }
        self.started = true;
    }

    /// The answer to a measured request, without executing it; `None` if it is not one.
    fn answer_at_once(&self, request: &wire::Request) -> Option<wire::Response> {
        let processor = &self.processor;
        match request {
            wire::Request::Execute {
                id,
                result_metadata_id,
                params,
            } => {
                // An unknown id gets UNPREPARED from the processor.
                let prepared = processor.prepared(id)?;
                match prepared.kind() {
                    StatementKind::UserWrite => Some(void()),
                    StatementKind::UserRead => {
                        // v5: a client whose result metadata is stale gets the full metadata
                        // and its new id, as from the `helenus` server.
                        let stale = result_metadata_id
                            .as_ref()
                            .is_some_and(|client| *client != prepared.result_metadata_id);
                        Some(empty_rows(&prepared, params.skip_metadata && !stale, stale))
                    }
                    StatementKind::Other => None,
                }
            }
            wire::Request::Query { query, params } => {
                match self.classify(query, params.keyspace.as_deref()) {
                    Some((StatementKind::UserWrite, _)) => Some(void()),
                    Some((StatementKind::UserRead, prepared)) => {
                        Some(empty_rows(&prepared, params.skip_metadata, false))
                    }
                    _ => None,
                }
            }
            wire::Request::Batch(batch) => {
                let all_writes = batch.kind != wire::BatchKind::Counter
                    && batch.statements.iter().all(|s| {
                        let kind = match &s.kind {
                            wire::BatchStatementKind::Prepared(id) => {
                                processor.prepared(id).map(|p| p.kind())
                            }
                            wire::BatchStatementKind::Query(text) => self
                                .classify(text, batch.keyspace.as_deref())
                                .map(|(kind, _)| kind),
                        };
                        kind == Some(StatementKind::UserWrite)
                    });
                all_writes.then(void)
            }
            _ => None,
        }
    }

    /// What the statement in a QUERY or a BATCH does, found by preparing it. Preparing is how
    /// the processor analyses a statement against the schema, and its cache makes a repeated
    /// text a hash lookup. `None` if it does not prepare; the processor then reports why.
    fn classify(
        &self,
        text: &str,
        keyspace: Option<&str>,
    ) -> Option<(StatementKind, Arc<PreparedInfo>)> {
        let session = self
            .session
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let prepared = self.processor.prepare(text, keyspace, &session).ok()?;
        Some((prepared.kind(), prepared))
    }
}

fn void() -> wire::Response {
    wire::Response::Result(wire::ResultBody::Void)
}

/// A Rows result with no rows for a SELECT: its columns, or only their count (No_metadata);
/// with `metadata_changed`, also the v5 result metadata id.
fn empty_rows(
    prepared: &PreparedInfo,
    no_metadata: bool,
    metadata_changed: bool,
) -> wire::Response {
    let rows = wire::RowsWriter::new(prepared.result_columns.len()).finish(wire::RowsMetadata {
        columns: prepared.result_columns.as_slice().into(),
        paging_state: None,
        no_metadata,
        new_metadata_id: metadata_changed.then(|| prepared.result_metadata_id.clone()),
        encoded_columns: None,
    });
    wire::Response::Result(wire::ResultBody::Rows(rows))
}

#[cfg(test)]
mod tests {
    //! A raw protocol v4 client against one served connection: frames built by hand, so these
    //! tests see exactly what goes over the wire.

    use super::*;
    use tokio::net::TcpListener;

    const STARTUP: u8 = 0x01;
    const OPTIONS: u8 = 0x05;
    const QUERY: u8 = 0x07;
    const PREPARE: u8 = 0x09;
    const EXECUTE: u8 = 0x0A;
    const BATCH: u8 = 0x0D;
    const ERROR: u8 = 0x00;
    const READY: u8 = 0x02;
    const SUPPORTED: u8 = 0x06;
    const RESULT: u8 = 0x08;
    const VOID: i32 = 1;
    const ROWS: i32 = 2;
    const PREPARED: i32 = 4;
    const SCHEMA_CHANGE: i32 = 5;
    const PROTOCOL_ERROR: i32 = 0x000A;
    const UNPREPARED: i32 = 0x2500;

    struct Client {
        socket: TcpStream,
        pending: Vec<u8>,
    }

    /// One decoded response frame.
    struct Answer {
        version: u8,
        stream: i16,
        opcode: u8,
        body: Vec<u8>,
    }

    impl Answer {
        fn int(&self, at: usize) -> i32 {
            i32::from_be_bytes(self.body[at..at + 4].try_into().unwrap())
        }

        /// RESULT kind, or ERROR code.
        fn kind(&self) -> i32 {
            self.int(0)
        }
    }

    async fn connect() -> Client {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let processor = crate::processor(addr).unwrap();
        tokio::spawn(async move {
            let (socket, peer) = listener.accept().await.unwrap();
            run(socket, peer, processor).await;
        });
        Client {
            socket: TcpStream::connect(addr).await.unwrap(),
            pending: Vec::new(),
        }
    }

    fn string(out: &mut Vec<u8>, s: &str) {
        out.extend_from_slice(&(s.len() as u16).to_be_bytes());
        out.extend_from_slice(s.as_bytes());
    }

    fn long_string(out: &mut Vec<u8>, s: &str) {
        out.extend_from_slice(&(s.len() as i32).to_be_bytes());
        out.extend_from_slice(s.as_bytes());
    }

    fn short_bytes(out: &mut Vec<u8>, b: &[u8]) {
        out.extend_from_slice(&(b.len() as u16).to_be_bytes());
        out.extend_from_slice(b);
    }

    /// `<consistency ONE><flags>`: the query parameters without values.
    fn params(out: &mut Vec<u8>, flags: u8) {
        out.extend_from_slice(&1u16.to_be_bytes());
        out.push(flags);
    }

    fn query_body(cql: &str) -> Vec<u8> {
        let mut b = Vec::new();
        long_string(&mut b, cql);
        params(&mut b, 0);
        b
    }

    impl Client {
        /// Queues a v4 request; `flush` sends everything queued in one write.
        fn queue(&mut self, version: u8, stream: i16, opcode: u8, body: &[u8]) {
            self.pending.push(version);
            self.pending.push(0);
            self.pending.extend_from_slice(&stream.to_be_bytes());
            self.pending.push(opcode);
            self.pending
                .extend_from_slice(&(body.len() as i32).to_be_bytes());
            self.pending.extend_from_slice(body);
        }

        async fn flush(&mut self) {
            self.socket.write_all(&self.pending).await.unwrap();
            self.pending.clear();
        }

        async fn recv(&mut self) -> Option<Answer> {
            let mut header = [0u8; 9];
            self.socket.read_exact(&mut header).await.ok()?;
            let length = i32::from_be_bytes(header[5..9].try_into().unwrap()) as usize;
            let mut body = vec![0u8; length];
            self.socket.read_exact(&mut body).await.ok()?;
            Some(Answer {
                version: header[0],
                stream: i16::from_be_bytes([header[2], header[3]]),
                opcode: header[4],
                body,
            })
        }

        async fn request(&mut self, stream: i16, opcode: u8, body: &[u8]) -> Answer {
            self.queue(4, stream, opcode, body);
            self.flush().await;
            let answer = self.recv().await.expect("an answer");
            assert_eq!(answer.stream, stream);
            answer
        }

        async fn start(&mut self) {
            let mut body = 1u16.to_be_bytes().to_vec();
            string(&mut body, "CQL_VERSION");
            string(&mut body, "3.0.0");
            let ready = self.request(0, STARTUP, &body).await;
            assert_eq!(ready.opcode, READY);
        }

        async fn prepare(&mut self, stream: i16, cql: &str) -> Vec<u8> {
            let mut body = Vec::new();
            long_string(&mut body, cql);
            let answer = self.request(stream, PREPARE, &body).await;
            assert_eq!((answer.opcode, answer.kind()), (RESULT, PREPARED), "{cql}");
            let length = u16::from_be_bytes([answer.body[4], answer.body[5]]) as usize;
            answer.body[6..6 + length].to_vec()
        }
    }

    /// The column names of a Rows result (global table spec, simple types only) and its row
    /// count; `None` for the names when the result has No_metadata.
    fn rows(answer: &Answer) -> (Option<Vec<String>>, i32, i32) {
        assert_eq!((answer.opcode, answer.kind()), (RESULT, ROWS));
        let flags = answer.int(4);
        let column_count = answer.int(8);
        let mut at = 12;
        let read_string = |at: &mut usize| {
            let n = u16::from_be_bytes([answer.body[*at], answer.body[*at + 1]]) as usize;
            let s = String::from_utf8(answer.body[*at + 2..*at + 2 + n].to_vec()).unwrap();
            *at += 2 + n;
            s
        };
        let names = if flags & 0x0004 != 0 {
            None
        } else {
            assert_ne!(flags & 0x0001, 0, "global table spec");
            read_string(&mut at);
            read_string(&mut at);
            let names = (0..column_count)
                .map(|_| {
                    let name = read_string(&mut at);
                    at += 2; // a simple type's option id
                    name
                })
                .collect();
            Some(names)
        };
        (names, column_count, answer.int(at))
    }

    #[tokio::test]
    async fn measured_requests_are_answered_at_once_and_in_order() {
        let mut c = connect().await;
        c.start().await;
        // Pipelined in one write; answered in order, each on its stream.
        let statements = [
            "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
            "CREATE TABLE ks.t (k int PRIMARY KEY, v text)",
            "INSERT INTO ks.t (k, v) VALUES (1, 'one')",
            "SELECT k, v FROM ks.t WHERE k = 1",
            "SELECT key FROM system.local",
        ];
        for (i, cql) in statements.iter().enumerate() {
            c.queue(4, 10 + i as i16, QUERY, &query_body(cql));
        }
        c.flush().await;
        let mut answers = Vec::new();
        for i in 0..statements.len() {
            let a = c.recv().await.expect("an answer");
            assert_eq!(a.stream, 10 + i as i16);
            assert_eq!(a.version, 0x84);
            answers.push(a);
        }
        assert_eq!(answers[0].kind(), SCHEMA_CHANGE);
        assert_eq!(answers[1].kind(), SCHEMA_CHANGE);
        assert_eq!(answers[2].kind(), VOID);
        // The INSERT stored nothing: the SELECT finds no row, but describes its columns.
        assert_eq!(
            rows(&answers[3]),
            (Some(vec!["k".to_string(), "v".to_string()]), 2, 0)
        );
        // System tables are real.
        assert_eq!(rows(&answers[4]).2, 1);

        let insert = c.prepare(20, "INSERT INTO ks.t (k, v) VALUES (?, ?)").await;
        let select = c.prepare(21, "SELECT v FROM ks.t WHERE k = ?").await;
        let mut execute = Vec::new();
        short_bytes(&mut execute, &insert);
        params(&mut execute, 0);
        assert_eq!(c.request(22, EXECUTE, &execute).await.kind(), VOID);
        let mut execute = Vec::new();
        short_bytes(&mut execute, &select);
        params(&mut execute, 0x02); // skip metadata
        assert_eq!(rows(&c.request(23, EXECUTE, &execute).await), (None, 1, 0));

        // BATCH (logged) of the prepared INSERT and a query string.
        let mut batch = vec![0u8];
        batch.extend_from_slice(&2u16.to_be_bytes());
        batch.push(1);
        short_bytes(&mut batch, &insert);
        batch.extend_from_slice(&0u16.to_be_bytes());
        batch.push(0);
        long_string(&mut batch, "DELETE FROM ks.t WHERE k = 1");
        batch.extend_from_slice(&0u16.to_be_bytes());
        params(&mut batch, 0);
        assert_eq!(c.request(24, BATCH, &batch).await.kind(), VOID);

        // Unknown ids are UNPREPARED, as from the real server, so drivers re-prepare.
        let mut execute = Vec::new();
        short_bytes(&mut execute, b"no such statement");
        params(&mut execute, 0);
        let answer = c.request(25, EXECUTE, &execute).await;
        assert_eq!((answer.opcode, answer.kind()), (ERROR, UNPREPARED));
    }

    #[tokio::test]
    async fn requests_it_cannot_answer_get_errors_not_hangs() {
        let mut c = connect().await;
        let supported = c.request(1, OPTIONS, &[]).await;
        assert_eq!(supported.opcode, SUPPORTED);
        // Before STARTUP: a protocol error; the connection stays usable.
        let early = c
            .request(2, QUERY, &query_body("SELECT * FROM system.local"))
            .await;
        assert_eq!((early.opcode, early.kind()), (ERROR, PROTOCOL_ERROR));
        c.start().await;
        let mut startup = 1u16.to_be_bytes().to_vec();
        string(&mut startup, "CQL_VERSION");
        string(&mut startup, "3.0.0");
        let again = c.request(3, STARTUP, &startup).await;
        assert_eq!((again.opcode, again.kind()), (ERROR, PROTOCOL_ERROR));
        // A statement the processor refuses: its error.
        let invalid = c
            .request(4, QUERY, &query_body("SELECT * FROM nope.t"))
            .await;
        assert_eq!((invalid.opcode, invalid.kind()), (ERROR, 0x2200));
        // A response opcode sent as a request: a protocol error, then the connection closes.
        let bad = c.request(5, READY, &[]).await;
        assert_eq!((bad.opcode, bad.kind()), (ERROR, PROTOCOL_ERROR));
        assert!(c.recv().await.is_none());
    }

    #[tokio::test]
    async fn an_unsupported_version_is_refused_in_v4_on_its_stream() {
        let mut c = connect().await;
        c.queue(3, 7, OPTIONS, &[]);
        c.flush().await;
        let answer = c.recv().await.expect("an answer");
        assert_eq!(
            (answer.version, answer.stream, answer.opcode, answer.kind()),
            (0x84, 7, ERROR, PROTOCOL_ERROR)
        );
        assert!(c.recv().await.is_none());
    }
}
