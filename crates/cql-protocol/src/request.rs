//! Request bodies (spec section 4.1), decoded from a frame body with zero-copy values.
//!
//! v4 and v5 differ in: `<flags>` of QUERY/EXECUTE/BATCH parameters (a `[byte]` in v4, an
//! `[int]` in v5, which adds 0x80 keyspace and 0x100 now_in_seconds); PREPARE (v5 adds
//! `[int] flags` and, with flag 0x01, a `[string]` keyspace); EXECUTE (v5 adds the
//! `[short bytes]` result metadata id after the statement id).

use bytes::Bytes;

use crate::consistency::Consistency;
use crate::error::ProtocolError;
use crate::header::{opcode, Version};
use crate::wire::{RawValue, Reader};

/// A decoded request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// STARTUP's `[string map]` of options, in wire order.
    Startup(Vec<(String, String)>),
    Options,
    Query {
        query: String,
        params: QueryParameters,
    },
    Prepare {
        query: String,
        /// v5 only (PREPARE flag 0x01).
        keyspace: Option<String>,
    },
    Execute {
        id: Bytes,
        /// v5 only.
        result_metadata_id: Option<Bytes>,
        params: QueryParameters,
    },
    Batch(Batch),
    /// The event types, upper-cased, each one of `EVENT_TYPES`.
    Register {
        events: Vec<String>,
    },
    /// The SASL token; `None` when the client sent a null `[bytes]`.
    AuthResponse(Option<Bytes>),
}

/// `<query_parameters>` of QUERY and EXECUTE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryParameters {
    pub consistency: Consistency,
    pub values: Values,
    pub skip_metadata: bool,
    pub page_size: Option<i32>,
    pub paging_state: Option<Bytes>,
    pub serial_consistency: Option<Consistency>,
    pub default_timestamp: Option<i64>,
    /// v5 only.
    pub keyspace: Option<String>,
    /// v5 only.
    pub now_in_seconds: Option<i32>,
}

/// Bound values: positional, or named (query flag 0x40).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Values {
    Positional(Vec<RawValue>),
    Named(Vec<(String, RawValue)>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    pub kind: BatchKind,
    pub statements: Vec<BatchStatement>,
    pub consistency: Consistency,
    pub serial_consistency: Option<Consistency>,
    pub default_timestamp: Option<i64>,
    /// v5 only.
    pub keyspace: Option<String>,
    /// v5 only.
    pub now_in_seconds: Option<i32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchKind {
    Logged,
    Unlogged,
    Counter,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchStatement {
    pub kind: BatchStatementKind,
    /// Always positional: named values in batches cannot work (CASSANDRA-10246).
    pub values: Values,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchStatementKind {
    Query(String),
    Prepared(Bytes),
}

/// Query parameter flags (spec 4.1.4), as bits of the v5 `[int]`; v4 uses the low byte.
pub(crate) mod query_flags {
    pub const VALUES: u32 = 0x01;
    pub const SKIP_METADATA: u32 = 0x02;
    pub const PAGE_SIZE: u32 = 0x04;
    pub const PAGING_STATE: u32 = 0x08;
    pub const SERIAL_CONSISTENCY: u32 = 0x10;
    pub const DEFAULT_TIMESTAMP: u32 = 0x20;
    pub const NAMES_FOR_VALUES: u32 = 0x40;
    pub const KEYSPACE: u32 = 0x80;
    pub const NOW_IN_SECONDS: u32 = 0x100;
}

/// The v5 PREPARE flag carrying a keyspace.
pub(crate) const PREPARE_WITH_KEYSPACE: u32 = 0x01;

impl Request {
    /// The opcode of the message (`frame::opcode`).
    pub fn opcode(&self) -> u8 {
        match self {
            Request::Startup(_) => opcode::STARTUP,
            Request::Options => opcode::OPTIONS,
            Request::Query { .. } => opcode::QUERY,
            Request::Prepare { .. } => opcode::PREPARE,
            Request::Execute { .. } => opcode::EXECUTE,
            Request::Batch(_) => opcode::BATCH,
            Request::Register { .. } => opcode::REGISTER,
            Request::AuthResponse(_) => opcode::AUTH_RESPONSE,
        }
    }

    /// Decodes the body of a request frame. Response-only and unknown opcodes are errors.
    /// Bytes left after the message are ignored, as the spec allows for future extensions.
    pub fn decode(version: Version, opcode: u8, body: Bytes) -> Result<Request, ProtocolError> {
        let mut r = Reader::new(body);
        Ok(match opcode {
            opcode::STARTUP => Request::Startup(r.string_map()?),
            opcode::OPTIONS => Request::Options,
            opcode::QUERY => {
                let query = r.long_string()?;
                let params = query_parameters(version, &mut r)?;
                Request::Query { query, params }
            }
            opcode::PREPARE => {
                let query = r.long_string()?;
                let mut keyspace = None;
                if version == Version::V5 {
                    let flags = r.i32()? as u32;
                    if flags & PREPARE_WITH_KEYSPACE != 0 {
                        keyspace = Some(r.string()?);
                    }
                }
                Request::Prepare { query, keyspace }
            }
            opcode::EXECUTE => {
                let id = r.short_bytes()?;
                let result_metadata_id = match version {
                    Version::V5 => Some(r.short_bytes()?),
                    Version::V4 => None,
                };
                let params = query_parameters(version, &mut r)?;
                Request::Execute {
                    id,
                    result_metadata_id,
                    params,
                }
            }
            opcode::BATCH => Request::Batch(batch(version, &mut r)?),
            opcode::REGISTER => Request::Register {
                events: event_types(r.string_list()?)?,
            },
            opcode::AUTH_RESPONSE => Request::AuthResponse(r.bytes()?),
            opcode::ERROR
            | opcode::READY
            | opcode::AUTHENTICATE
            | opcode::SUPPORTED
            | opcode::RESULT
            | opcode::EVENT
            | opcode::AUTH_CHALLENGE
            | opcode::AUTH_SUCCESS => {
                return Err(ProtocolError::malformed(format!(
                    "Wrong protocol direction (expected RESPONSE, got REQUEST) for opcode {opcode} ({})",
                    opcode::name(opcode)
                )))
            }
            other => return Err(ProtocolError::malformed(format!("Unknown opcode {other}"))),
        })
    }
}

fn flags(version: Version, r: &mut Reader) -> Result<u32, ProtocolError> {
    Ok(match version {
        Version::V4 => u32::from(r.u8()?),
        Version::V5 => r.i32()? as u32,
    })
}

fn read_consistency(r: &mut Reader) -> Result<Consistency, ProtocolError> {
    Consistency::from_code(r.u16()?)
}

/// `<consistency><flags>[<n>[name_1]<value_1>...][<page_size>][<paging_state>]
/// [<serial_consistency>][<timestamp>][<keyspace>][<now_in_seconds>]`
fn query_parameters(version: Version, r: &mut Reader) -> Result<QueryParameters, ProtocolError> {
    use query_flags::*;
    let consistency = read_consistency(r)?;
    let flags = flags(version, r)?;
    let values = if flags & VALUES != 0 {
        let n = usize::from(r.u16()?);
        if flags & NAMES_FOR_VALUES != 0 {
            // Each named value takes at least 6 bytes; bound the allocation by the body.
            let mut named = Vec::with_capacity(n.min(r.remaining() / 6));
            for _ in 0..n {
                let name = r.string()?;
                named.push((name, r.value()?));
            }
            Values::Named(named)
        } else {
            Values::Positional(positional(n, r)?)
        }
    } else {
        Values::Positional(Vec::new())
    };
    let page_size = if flags & PAGE_SIZE != 0 {
        Some(r.i32()?)
    } else {
        None
    };
    let paging_state = if flags & PAGING_STATE != 0 {
        r.bytes()?
    } else {
        None
    };
    let serial_consistency = if flags & SERIAL_CONSISTENCY != 0 {
        Some(read_consistency(r)?)
    } else {
        None
    };
    let default_timestamp = if flags & DEFAULT_TIMESTAMP != 0 {
        Some(timestamp(r)?)
    } else {
        None
    };
    let (keyspace, now_in_seconds) = tail(flags, r)?;
    Ok(QueryParameters {
        consistency,
        values,
        skip_metadata: flags & SKIP_METADATA != 0,
        page_size,
        paging_state,
        serial_consistency,
        default_timestamp,
        keyspace,
        now_in_seconds,
    })
}

fn positional(n: usize, r: &mut Reader) -> Result<Vec<RawValue>, ProtocolError> {
    // Each value takes at least 4 bytes; bound the allocation by the body.
    let mut values = Vec::with_capacity(n.min(r.remaining() / 4));
    for _ in 0..n {
        values.push(r.value()?);
    }
    Ok(values)
}

/// The default timestamp of query and batch parameters. `i64::MIN` is refused as Cassandra
/// refuses it: it stands for "no timestamp" inside Cassandra (and for the tombstone of nothing),
/// so a write with it would be lost.
fn timestamp(r: &mut Reader) -> Result<i64, ProtocolError> {
    let timestamp = r.i64()?;
    if timestamp == i64::MIN {
        return Err(ProtocolError::malformed(format!(
            "Out of bound timestamp, must be in [{}, {}] (got {timestamp})",
            i64::MIN + 1,
            i64::MAX
        )));
    }
    Ok(timestamp)
}

/// The keyspace (flag 0x80) and now_in_seconds (0x100) at the end of query and batch
/// parameters. Both are v5 additions, but Cassandra 5.0 reads the keyspace whenever its flag
/// is set, in v4 too (whose flags are a byte, so 0x100 cannot be set there); so does Helenus,
/// so a v4 client that sets it gets the same statement, and one that sets it without the
/// keyspace the same protocol error.
fn tail(flags: u32, r: &mut Reader) -> Result<(Option<String>, Option<i32>), ProtocolError> {
    let keyspace = if flags & query_flags::KEYSPACE != 0 {
        Some(r.string()?)
    } else {
        None
    };
    let now_in_seconds = if flags & query_flags::NOW_IN_SECONDS != 0 {
        Some(r.i32()?)
    } else {
        None
    };
    Ok((keyspace, now_in_seconds))
}

/// The event types REGISTER may name (Cassandra's `Event.Type`).
pub const EVENT_TYPES: &[&str] = &[
    "TOPOLOGY_CHANGE",
    "STATUS_CHANGE",
    "SCHEMA_CHANGE",
    "TRACE_COMPLETE",
];

/// REGISTER's event types, upper-cased: Cassandra reads them case-insensitively and refuses an
/// unknown one with a protocol error, naming it.
fn event_types(names: Vec<String>) -> Result<Vec<String>, ProtocolError> {
    names
        .into_iter()
        .map(|name| {
            let upper = name.to_uppercase();
            if EVENT_TYPES.contains(&upper.as_str()) {
                Ok(upper)
            } else {
                Err(ProtocolError::malformed(format!(
                    "Invalid value '{name}' for Type"
                )))
            }
        })
        .collect()
}

/// `<type><n><query_1>...<query_n><consistency><flags>[<serial_consistency>][<timestamp>]
/// [<keyspace>][<now_in_seconds>]`, each query `<kind><string_or_id><n><value_1>...<value_n>`.
fn batch(version: Version, r: &mut Reader) -> Result<Batch, ProtocolError> {
    let kind = match r.u8()? {
        0 => BatchKind::Logged,
        1 => BatchKind::Unlogged,
        2 => BatchKind::Counter,
        other => {
            return Err(ProtocolError::malformed(format!(
                "Invalid BATCH message type {other}"
            )))
        }
    };
    let n = usize::from(r.u16()?);
    // Each statement takes at least 7 bytes; bound the allocation by the body.
    let mut statements = Vec::with_capacity(n.min(r.remaining() / 7));
    for _ in 0..n {
        let statement_kind = match r.u8()? {
            0 => BatchStatementKind::Query(r.long_string()?),
            1 => BatchStatementKind::Prepared(r.short_bytes()?),
            other => {
                return Err(ProtocolError::malformed(format!(
                    "Invalid query kind in BATCH messages. Must be 0 or 1 but got {other}"
                )))
            }
        };
        let count = usize::from(r.u16()?);
        statements.push(BatchStatement {
            kind: statement_kind,
            values: Values::Positional(positional(count, r)?),
        });
    }
    let consistency = read_consistency(r)?;
    let flags = flags(version, r)?;
    if flags & query_flags::NAMES_FOR_VALUES != 0 {
        // The values were read before the flags, so names cannot have been sent in a form the
        // server could read; Cassandra rejects this too.
        return Err(ProtocolError::malformed(
            "Named values are not supported in BATCH messages (CASSANDRA-10246)",
        ));
    }
    let serial_consistency = if flags & query_flags::SERIAL_CONSISTENCY != 0 {
        Some(read_consistency(r)?)
    } else {
        None
    };
    let default_timestamp = if flags & query_flags::DEFAULT_TIMESTAMP != 0 {
        Some(timestamp(r)?)
    } else {
        None
    };
    let (keyspace, now_in_seconds) = tail(flags, r)?;
    Ok(Batch {
        kind,
        statements,
        consistency,
        serial_consistency,
        default_timestamp,
        keyspace,
        now_in_seconds,
    })
}
