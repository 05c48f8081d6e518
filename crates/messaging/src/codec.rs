//! The payloads of the built-in verbs and of every response.
//!
//! Requests (the frame's verb says which):
//!
//! ```text
//! PING:      empty
//! MUTATION:  u8 flags (bit 0 = durable_writes; other bits must be 0),
//!            then `mutation::encode_mutation` (its own version byte first)
//! READ:      `mutation::encode_read_command`
//! DIGEST:    `mutation::encode_read_command`
//! TRUNCATE:  16 bytes table id (UUID bytes)
//! BATCH_STORE:  16 bytes batch id (a time UUID), then the batch's body
//!               (`coordinator::Batch::body`: its own version byte first; refused unless
//!               every mutation in it decodes)
//! BATCH_REMOVE: 16 bytes batch id
//! extension: opaque, the registered handler's
//! ```
//!
//! A response (to any verb) starts with a status byte:
//!
//! ```text
//! u8 0x00 success, then the verb's answer:
//!      PING, MUTATION, TRUNCATE, BATCH_STORE, BATCH_REMOVE: empty
//!      READ:    `mutation::encode_read_response`
//!      DIGEST:  16 bytes, the MD5 `coordinator::ReadDigest`
//!      extension: opaque, the handler's
//! u8 0x01 failure, then u8 kind:
//!      0x00 ReplicaError::DeadlinePassed
//!      0x01 ReplicaError::UnknownTable, 16 bytes table id
//!      0x02 ReplicaError::Storage, <string>
//!      0x03 ReplicaError::Internal, <string>
//!      0x10 the verb has no handler on the responder
//!      0x11 the responder could not decode the request, <string>
//!      0x12 an extension handler failed, <string>
//! <string>: u32 length (at most MAX_ERROR_MESSAGE_BYTES), UTF-8 bytes
//! ```
//!
//! Nothing may follow the last field. Decoders check every length against the bytes present.

use bytes::{BufMut, Bytes, BytesMut};
use coordinator::{Batch, BatchError, BatchId, Mutation, ReadDigest, ReplicaError};
use mutation::{MutationError, ReadCommand, ReadResponse, TableId};

/// The longest error message a response carries; longer ones are cut (at a character
/// boundary) so a runaway storage message cannot make a large response.
pub const MAX_ERROR_MESSAGE_BYTES: usize = 4096;

const MUTATION_DURABLE_WRITES: u8 = 0x01;
const STATUS_OK: u8 = 0x00;
const STATUS_ERROR: u8 = 0x01;

const ERROR_DEADLINE_PASSED: u8 = 0x00;
const ERROR_UNKNOWN_TABLE: u8 = 0x01;
const ERROR_STORAGE: u8 = 0x02;
const ERROR_INTERNAL: u8 = 0x03;
const ERROR_UNKNOWN_VERB: u8 = 0x10;
const ERROR_BAD_REQUEST: u8 = 0x11;
const ERROR_HANDLER: u8 = 0x12;

/// Why a peer did not do what it was asked, as its response says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RemoteError {
    /// The replica verb failed on the peer; the coordinator gets this error as if a local
    /// replica had answered it.
    #[error(transparent)]
    Replica(#[from] ReplicaError),
    /// The peer serves no handler for the verb (an extension not registered there, or a verb
    /// from a newer node).
    #[error("the peer has no handler for this verb")]
    UnknownVerb,
    /// The peer could not decode the request's payload.
    #[error("the peer could not decode the request: {0}")]
    BadRequest(String),
    /// An extension verb's handler failed.
    #[error("{0}")]
    Handler(String),
}

/// Bytes that are not a well-formed payload of their verb.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    #[error("{0}")]
    Mutation(#[from] MutationError),
    #[error("{0}")]
    Batch(#[from] BatchError),
    #[error("malformed payload: {0}")]
    Malformed(&'static str),
}

pub fn encode_mutation_request(mutation: &Mutation) -> Bytes {
    let mut out = Vec::with_capacity(64);
    out.push(if mutation.durable_writes {
        MUTATION_DURABLE_WRITES
    } else {
        0
    });
    mutation::encode_mutation(&mutation.updates, &mut out);
    Bytes::from(out)
}

pub fn decode_mutation_request(bytes: &[u8]) -> Result<Mutation, PayloadError> {
    let (&flags, rest) = bytes
        .split_first()
        .ok_or(PayloadError::Malformed("empty MUTATION payload"))?;
    if flags & !MUTATION_DURABLE_WRITES != 0 {
        return Err(PayloadError::Malformed("unknown MUTATION flags"));
    }
    Ok(Mutation {
        updates: std::sync::Arc::new(mutation::decode_mutation(rest)?),
        durable_writes: flags & MUTATION_DURABLE_WRITES != 0,
    })
}

pub fn encode_read_request(command: &ReadCommand) -> Bytes {
    let mut out = Vec::with_capacity(64);
    mutation::encode_read_command(command, &mut out);
    Bytes::from(out)
}

pub fn decode_read_request(bytes: &[u8]) -> Result<ReadCommand, PayloadError> {
    Ok(mutation::decode_read_command(bytes)?)
}

pub fn encode_table_id(table: TableId) -> Bytes {
    Bytes::copy_from_slice(table.as_bytes())
}

pub fn decode_table_id(bytes: &[u8]) -> Result<TableId, PayloadError> {
    let bytes: [u8; 16] = bytes
        .try_into()
        .map_err(|_| PayloadError::Malformed("a table id is 16 bytes"))?;
    Ok(TableId::from_bytes(bytes))
}

pub fn encode_batch_store_request(batch: &Batch) -> Bytes {
    let mut out = BytesMut::with_capacity(16 + batch.body().len());
    out.put_slice(&batch.id.0);
    out.put_slice(batch.body());
    out.freeze()
}

pub fn decode_batch_store_request(bytes: &[u8]) -> Result<Batch, PayloadError> {
    let Some((id, body)) = bytes.split_first_chunk::<16>() else {
        return Err(PayloadError::Malformed(
            "a batch starts with its 16-byte id",
        ));
    };
    Ok(Batch::new(BatchId(*id), body)?)
}

pub fn encode_batch_id(id: BatchId) -> Bytes {
    Bytes::copy_from_slice(&id.0)
}

pub fn decode_batch_id(bytes: &[u8]) -> Result<BatchId, PayloadError> {
    let bytes: [u8; 16] = bytes
        .try_into()
        .map_err(|_| PayloadError::Malformed("a batch id is 16 bytes"))?;
    Ok(BatchId(bytes))
}

/// A success response: the status byte and `body`.
pub fn encode_ok(body: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(1 + body.len());
    out.put_u8(STATUS_OK);
    out.put_slice(body);
    out.freeze()
}

/// A success response to READ.
pub fn encode_read_ok(response: &ReadResponse) -> Bytes {
    let mut out = Vec::with_capacity(256);
    out.push(STATUS_OK);
    mutation::encode_read_response(response, &mut out);
    Bytes::from(out)
}

pub fn decode_read_response(bytes: &[u8]) -> Result<ReadResponse, PayloadError> {
    Ok(mutation::decode_read_response(bytes)?)
}

pub fn decode_digest(bytes: &[u8]) -> Result<ReadDigest, PayloadError> {
    let bytes: [u8; 16] = bytes
        .try_into()
        .map_err(|_| PayloadError::Malformed("a digest is 16 bytes"))?;
    Ok(ReadDigest(bytes))
}

pub fn decode_empty(bytes: &[u8]) -> Result<(), PayloadError> {
    if bytes.is_empty() {
        Ok(())
    } else {
        Err(PayloadError::Malformed("bytes after an empty answer"))
    }
}

/// A failure response.
pub fn encode_error(error: &RemoteError) -> Bytes {
    let mut out = BytesMut::with_capacity(32);
    out.put_u8(STATUS_ERROR);
    match error {
        RemoteError::Replica(ReplicaError::DeadlinePassed) => out.put_u8(ERROR_DEADLINE_PASSED),
        RemoteError::Replica(ReplicaError::UnknownTable(table)) => {
            out.put_u8(ERROR_UNKNOWN_TABLE);
            out.put_slice(table.as_bytes());
        }
        RemoteError::Replica(ReplicaError::Storage(message)) => {
            put_string(&mut out, ERROR_STORAGE, message)
        }
        // A replica never answers that it is unreachable (a requester's own conclusion); were
        // one to, it travels as an internal error.
        RemoteError::Replica(
            ReplicaError::Internal(message) | ReplicaError::Unreachable(message),
        ) => put_string(&mut out, ERROR_INTERNAL, message),
        RemoteError::UnknownVerb => out.put_u8(ERROR_UNKNOWN_VERB),
        RemoteError::BadRequest(message) => put_string(&mut out, ERROR_BAD_REQUEST, message),
        RemoteError::Handler(message) => put_string(&mut out, ERROR_HANDLER, message),
    }
    out.freeze()
}

fn put_string(out: &mut BytesMut, kind: u8, message: &str) {
    let mut end = message.len().min(MAX_ERROR_MESSAGE_BYTES);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    out.put_u8(kind);
    out.put_u32(end as u32);
    out.put_slice(&message.as_bytes()[..end]);
}

/// Splits a response into its answer's bytes (success) or the peer's error.
pub fn decode_response(payload: Bytes) -> Result<Result<Bytes, RemoteError>, PayloadError> {
    let (&status, rest) = payload
        .split_first()
        .ok_or(PayloadError::Malformed("empty response"))?;
    match status {
        STATUS_OK => Ok(Ok(payload.slice(1..))),
        STATUS_ERROR => Ok(Err(decode_error(rest)?)),
        _ => Err(PayloadError::Malformed("unknown response status")),
    }
}

fn decode_error(bytes: &[u8]) -> Result<RemoteError, PayloadError> {
    let (&kind, rest) = bytes
        .split_first()
        .ok_or(PayloadError::Malformed("error response without a kind"))?;
    let error = match kind {
        ERROR_DEADLINE_PASSED if rest.is_empty() => ReplicaError::DeadlinePassed.into(),
        ERROR_UNKNOWN_TABLE => ReplicaError::UnknownTable(decode_table_id(rest)?).into(),
        ERROR_STORAGE => ReplicaError::Storage(decode_string(rest)?).into(),
        ERROR_INTERNAL => ReplicaError::Internal(decode_string(rest)?).into(),
        ERROR_UNKNOWN_VERB if rest.is_empty() => RemoteError::UnknownVerb,
        ERROR_BAD_REQUEST => RemoteError::BadRequest(decode_string(rest)?),
        ERROR_HANDLER => RemoteError::Handler(decode_string(rest)?),
        _ => {
            return Err(PayloadError::Malformed(
                "unknown error kind or bytes after it",
            ))
        }
    };
    Ok(error)
}

fn decode_string(bytes: &[u8]) -> Result<String, PayloadError> {
    let Some((length, text)) = bytes.split_first_chunk::<4>() else {
        return Err(PayloadError::Malformed("error message without a length"));
    };
    let length = u32::from_be_bytes(*length) as usize;
    if length > MAX_ERROR_MESSAGE_BYTES || length != text.len() {
        return Err(PayloadError::Malformed("error message length"));
    }
    String::from_utf8(text.to_vec()).map_err(|_| PayloadError::Malformed("error message UTF-8"))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use mutation::{PartitionKey, PartitionUpdate};

    use super::*;

    fn errors() -> Vec<RemoteError> {
        vec![
            ReplicaError::DeadlinePassed.into(),
            ReplicaError::UnknownTable(TableId::from_u128(7)).into(),
            ReplicaError::Storage("disk full".into()).into(),
            ReplicaError::Internal("panicked: é".into()).into(),
            RemoteError::UnknownVerb,
            RemoteError::BadRequest("truncated".into()),
            RemoteError::Handler("raft says no".into()),
        ]
    }

    #[test]
    fn errors_round_trip() {
        for e in errors() {
            assert_eq!(decode_response(encode_error(&e)), Ok(Err(e)));
        }
    }

    #[test]
    fn a_long_message_is_cut_at_a_character_boundary() {
        let long = "é".repeat(MAX_ERROR_MESSAGE_BYTES);
        let decoded = decode_response(encode_error(&RemoteError::Handler(long)));
        let Ok(Err(RemoteError::Handler(message))) = decoded else {
            panic!("{decoded:?}");
        };
        assert_eq!(message.len(), MAX_ERROR_MESSAGE_BYTES);
    }

    #[test]
    fn every_truncation_and_extension_of_an_error_is_refused() {
        for e in errors() {
            let whole = encode_error(&e);
            for cut in 0..whole.len() {
                let partial = whole.slice(..cut);
                assert!(decode_response(partial).is_err(), "{e:?} cut at {cut}");
            }
            let mut longer = BytesMut::from(&whole[..]);
            longer.put_u8(0);
            assert!(decode_response(longer.freeze()).is_err(), "{e:?} extended");
        }
    }

    #[test]
    fn mutation_requests_round_trip_with_their_durability() {
        for durable_writes in [true, false] {
            let mutation = Mutation {
                updates: Arc::new(vec![PartitionUpdate {
                    table: TableId::from_u128(3),
                    key: PartitionKey {
                        token: 42,
                        key: b"k".to_vec(),
                    },
                    header: None,
                    static_row: None,
                    rows: Vec::new(),
                }]),
                durable_writes,
            };
            let decoded = decode_mutation_request(&encode_mutation_request(&mutation)).unwrap();
            assert_eq!(decoded.durable_writes, durable_writes);
            assert_eq!(decoded.updates, mutation.updates);
        }
        assert!(decode_mutation_request(&[]).is_err());
        assert!(decode_mutation_request(&[0x80, 1, 0]).is_err());
    }

    #[test]
    fn batch_store_requests_round_trip_and_malformed_ones_are_refused() {
        let update = PartitionUpdate {
            table: TableId::from_u128(3),
            key: PartitionKey {
                token: 42,
                key: b"k".to_vec(),
            },
            header: None,
            static_row: None,
            rows: Vec::new(),
        };
        let id = BatchId::new(
            1_700_000_000_000_000,
            locator::HostId(TableId::from_u128(8)),
        );
        let batch = Batch::encode(id, &[&[update.clone(), update]]);
        let encoded = encode_batch_store_request(&batch);
        assert_eq!(decode_batch_store_request(&encoded), Ok(batch));
        for cut in 0..encoded.len() {
            assert!(
                decode_batch_store_request(&encoded[..cut]).is_err(),
                "cut at {cut}"
            );
        }
        assert_eq!(decode_batch_id(&encode_batch_id(id)), Ok(id));
        assert!(decode_batch_id(&[0; 15]).is_err());
    }

    #[test]
    fn fixed_size_payloads_check_their_size() {
        let table = TableId::from_u128(9);
        assert_eq!(decode_table_id(&encode_table_id(table)), Ok(table));
        assert!(decode_table_id(&[0; 15]).is_err());
        assert!(decode_table_id(&[0; 17]).is_err());
        assert_eq!(decode_digest(&[1; 16]), Ok(ReadDigest([1; 16])));
        assert!(decode_digest(&[1; 3]).is_err());
        assert!(decode_empty(b"x").is_err());
    }
}
