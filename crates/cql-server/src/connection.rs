//! One client connection: a reader that decodes requests and spawns their execution, and a
//! writer that encodes responses in completion order (out of order by stream id).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use cql_protocol as wire;
use query::{
    BatchItem, BatchKind, BoundValue, BoundValues, ColumnSpec, Outcome, QueryError, QueryOptions,
    QueryProcessor, QueryResult, SchemaChangeEvent, SchemaChangeKind, SchemaChangeTarget, Session,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch, Semaphore};

use crate::errors::{consistency_from_wire, error_body};
use crate::ServerConfig;

/// What the writer task is asked to send.
enum Outgoing {
    Response {
        version: wire::Version,
        stream: i16,
        response: wire::Response,
        /// Client warnings sent with the response (frame flag WARNING); usually empty.
        warnings: Vec<String>,
    },
    /// READY to STARTUP; after writing it the writer switches to the negotiated framing.
    Ready {
        version: wire::Version,
        stream: i16,
        compression: Option<wire::Compression>,
    },
    /// Send this (an error) and then close the connection.
    Fatal {
        version: wire::Version,
        stream: i16,
        response: wire::Response,
    },
}

/// Bound on responses waiting for the writer; with the in-flight bound it limits memory per
/// connection (a slow reader of responses stops the server reading its requests).
const WRITE_QUEUE: usize = 1024;
/// Bytes read from the socket per read call.
const READ_CHUNK_BYTES: usize = 64 * 1024;

struct Shared {
    processor: Arc<QueryProcessor>,
    session: Mutex<Session>,
    version: wire::Version,
}

pub(crate) async fn run(
    socket: TcpStream,
    peer: SocketAddr,
    processor: Arc<QueryProcessor>,
    config: Arc<ServerConfig>,
    mut stop: watch::Receiver<bool>,
) {
    tracing::debug!(%peer, "connection opened");
    let (mut reader, mut writer) = socket.into_split();
    let (out_tx, mut out_rx) = mpsc::channel::<Outgoing>(WRITE_QUEUE);
    let in_flight = Arc::new(Semaphore::new(config.max_requests_per_connection));
    let mut decoder = wire::FrameCodec::new(config.max_frame_size_bytes);

    // The writer: encodes in arrival order, batching whatever is queued into one write.
    let writer_task = tokio::spawn(async move {
        let mut encoder = wire::FrameCodec::new(usize::MAX);
        let mut buf = BytesMut::with_capacity(64 * 1024);
        while let Some(first) = out_rx.recv().await {
            let mut next = Some(first);
            let mut close = false;
            let mut yielded = false;
            while let Some(msg) = next.take() {
                match msg {
                    Outgoing::Response {
                        version,
                        stream,
                        response,
                        warnings,
                    } => {
                        encoder
                            .encode_with_warnings(version, stream, &response, &warnings, &mut buf);
                    }
                    Outgoing::Ready {
                        version,
                        stream,
                        compression,
                    } => {
                        encoder.encode(version, stream, &wire::Response::Ready, &mut buf);
                        // Everything after READY uses the negotiated compression, and v5
                        // switches to segment framing.
                        if let Some(c) = compression {
                            encoder.set_compression(c);
                        }
                        if version == wire::Version::V5 {
                            if writer.write_all(&buf).await.is_err() {
                                return;
                            }
                            buf.clear();
                            encoder.switch_to_v5_segments();
                        }
                    }
                    Outgoing::Fatal {
                        version,
                        stream,
                        response,
                    } => {
                        encoder.encode(version, stream, &response, &mut buf);
                        close = true;
                    }
                }
                if !close && buf.len() < 256 * 1024 {
                    next = out_rx.try_recv().ok();
                    if next.is_none() && !yielded {
                        // Let the requests that are ready finish first, so their responses
                        // share this write: on loopback a send costs more CPU than a point
                        // read, and the receiver's wake-up too. When nothing else is ready
                        // the yield returns at once.
                        yielded = true;
                        tokio::task::yield_now().await;
                        next = out_rx.try_recv().ok();
                    }
                }
            }
            if writer.write_all(&buf).await.is_err() {
                return;
            }
            buf.clear();
            if close {
                let _ = writer.shutdown().await;
                return;
            }
        }
    });

    let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let mut shared: Option<Arc<Shared>> = None;
    let mut events_task: Option<tokio::task::JoinHandle<()>> = None;
    'read: loop {
        // Decode every complete frame already buffered before reading more.
        loop {
            let frame = match decoder.decode(&mut buf) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(e) => {
                    let (stream, version, message, code) = protocol_error_details(&e);
                    tracing::debug!(%peer, error = %e, "protocol error; closing");
                    let response = wire::Response::Error(wire::ErrorBody {
                        code,
                        message,
                        extra: wire::ErrorExtra::None,
                    });
                    let _ = out_tx
                        .send(Outgoing::Fatal {
                            version,
                            stream,
                            response,
                        })
                        .await;
                    break 'read;
                }
            };
            let version = frame.version;
            let stream = frame.stream;
            let request = match wire::Request::decode(version, frame.opcode, frame.body) {
                Ok(r) => r,
                Err(e) => {
                    let response = wire::Response::Error(wire::ErrorBody {
                        code: wire::ErrorCode::ProtocolError,
                        message: e.to_string(),
                        extra: wire::ErrorExtra::None,
                    });
                    let _ = out_tx
                        .send(Outgoing::Fatal {
                            version,
                            stream,
                            response,
                        })
                        .await;
                    break 'read;
                }
            };
            match request {
                wire::Request::Options => {
                    let response = supported();
                    if out_tx
                        .send(Outgoing::Response {
                            version,
                            stream,
                            response,
                            warnings: Vec::new(),
                        })
                        .await
                        .is_err()
                    {
                        break 'read;
                    }
                }
                wire::Request::Startup(options) => {
                    let compression = match startup_compression(&options, version) {
                        Ok(c) => c,
                        Err(message) => {
                            let response = wire::Response::Error(wire::ErrorBody {
                                code: wire::ErrorCode::ProtocolError,
                                message,
                                extra: wire::ErrorExtra::None,
                            });
                            let _ = out_tx
                                .send(Outgoing::Response {
                                    version,
                                    stream,
                                    response,
                                    warnings: Vec::new(),
                                })
                                .await;
                            continue;
                        }
                    };
                    if shared.is_some() {
                        let response = wire::Response::Error(wire::ErrorBody {
                            code: wire::ErrorCode::ProtocolError,
                            message:
                                "Unexpected message STARTUP, the connection is already started"
                                    .to_string(),
                            extra: wire::ErrorExtra::None,
                        });
                        let _ = out_tx
                            .send(Outgoing::Response {
                                version,
                                stream,
                                response,
                                warnings: Vec::new(),
                            })
                            .await;
                        continue;
                    }
                    shared = Some(Arc::new(Shared {
                        processor: processor.clone(),
                        session: Mutex::new(Session::default()),
                        version,
                    }));
                    if out_tx
                        .send(Outgoing::Ready {
                            version,
                            stream,
                            compression,
                        })
                        .await
                        .is_err()
                    {
                        break 'read;
                    }
                    if let Some(c) = compression {
                        decoder.set_compression(c);
                    }
                    if version == wire::Version::V5 {
                        decoder.switch_to_v5_segments();
                    }
                }
                other => {
                    let Some(shared) = shared.clone() else {
                        let response = wire::Response::Error(wire::ErrorBody {
                            code: wire::ErrorCode::ProtocolError,
                            message: "Unexpected message, expecting STARTUP or OPTIONS".to_string(),
                            extra: wire::ErrorExtra::None,
                        });
                        let _ = out_tx
                            .send(Outgoing::Response {
                                version,
                                stream,
                                response,
                                warnings: Vec::new(),
                            })
                            .await;
                        continue;
                    };
                    if let wire::Request::Register { events } = &other {
                        if events.iter().any(|e| e == "SCHEMA_CHANGE") && events_task.is_none() {
                            events_task =
                                Some(spawn_events(&processor, shared.version, out_tx.clone()));
                        }
                        let response = wire::Response::Ready;
                        if out_tx
                            .send(Outgoing::Response {
                                version,
                                stream,
                                response,
                                warnings: Vec::new(),
                            })
                            .await
                            .is_err()
                        {
                            break 'read;
                        }
                        continue;
                    }
                    // Backpressure: wait for a free in-flight slot before reading on.
                    let Ok(permit) = in_flight.clone().acquire_owned().await else {
                        break 'read;
                    };
                    let out = out_tx.clone();
                    tokio::spawn(async move {
                        let Answer { response, warnings } = handle(&shared, other).await;
                        let _ = out
                            .send(Outgoing::Response {
                                version,
                                stream,
                                response,
                                warnings,
                            })
                            .await;
                        drop(permit);
                    });
                }
            }
        }
        buf.reserve(READ_CHUNK_BYTES);
        tokio::select! {
            read = reader.read_buf(&mut buf) => match read {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            },
            _ = stop.changed() => break,
        }
    }
    // Drain: wait for this connection's in-flight requests, then let the writer finish.
    let _ = in_flight
        .acquire_many(config.max_requests_per_connection as u32)
        .await;
    if let Some(t) = events_task {
        t.abort();
    }
    drop(out_tx);
    let _ = writer_task.await;
    tracing::debug!(%peer, "connection closed");
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

fn spawn_events(
    processor: &Arc<QueryProcessor>,
    version: wire::Version,
    out: mpsc::Sender<Outgoing>,
) -> tokio::task::JoinHandle<()> {
    let mut events = processor.subscribe_schema_events();
    tokio::spawn(async move {
        loop {
            match events.recv().await {
                Ok(e) => {
                    let response =
                        wire::Response::Event(wire::Event::SchemaChange(schema_change(&e)));
                    if out
                        .send(Outgoing::Response {
                            version,
                            stream: -1,
                            response,
                            warnings: Vec::new(),
                        })
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(missed = n, "client fell behind on schema events");
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            }
        }
    })
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

fn column_specs(specs: &[ColumnSpec]) -> Vec<wire::ColumnSpec> {
    specs
        .iter()
        .map(|c| wire::ColumnSpec {
            keyspace: c.keyspace.clone(),
            table: c.table.clone(),
            name: c.name.clone(),
            ty: c.ty.clone(),
        })
        .collect()
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
                    bind_columns: column_specs(&prepared.bind_specs),
                    pk_indexes: prepared.pk_indexes.clone(),
                    result_columns: column_specs(&prepared.result_columns),
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
            let mut skip_metadata = params.skip_metadata;
            // v5: when the client's result metadata is stale (the table changed since it
            // prepared), send the full metadata and its new id instead of skipping it.
            let mut new_metadata_id = None;
            if let (Some(client_id), Some(prepared)) =
                (&result_metadata_id, processor.prepared(&id))
            {
                if *client_id != prepared.result_metadata_id {
                    skip_metadata = false;
                    new_metadata_id = Some(prepared.result_metadata_id.clone());
                }
            }
            let mut session = session_snapshot(state);
            let before = session.keyspace.clone();
            let outcome = processor
                .execute(&id, options(params), &mut session)
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
            let bytes = rows
                .rows
                .iter()
                .flatten()
                .map(|cell| 4 + cell.as_ref().map_or(0, |c| c.len()))
                .sum();
            let mut writer = wire::RowsWriter::with_capacity(rows.columns.len(), bytes);
            for row in &rows.rows {
                for cell in row {
                    writer.push_cell(cell.as_deref());
                }
            }
            wire::ResultBody::Rows(writer.finish(wire::RowsMetadata {
                columns: column_specs(&rows.columns),
                paging_state: rows.paging_state.map(Bytes::from),
                no_metadata: skip_metadata,
                new_metadata_id,
            }))
        }
    };
    Answer {
        response: wire::Response::Result(body),
        warnings: outcome.warnings,
    }
}

#[cfg(test)]
mod tests {
    use super::check_cql_version;

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
}
