//! The server side of Cassandra's CQL native protocol, versions 4 and 5: framing, compression,
//! request decoding and response encoding. Pure and synchronous (no I/O, no tokio), so every
//! decoder of client bytes can be fuzzed (`fuzz/`). It must never depend on the query,
//! storage or server crates; it knows CQL types only through the `types` crate.
//!
//! # Framing
//!
//! Every message is a *frame*: a 9-byte header (version, flags, stream, opcode, body length;
//! see [`frame`]) and a body. A connection starts in *legacy framing*, frames written straight
//! onto the stream:
//!
//! - **v4** stays there for its whole life. After STARTUP negotiates `lz4` or `snappy`, a body
//!   may be compressed (header flag 0x01): LZ4 as a 4-byte big-endian uncompressed length and
//!   an LZ4 block, Snappy in its raw format.
//! - **v5** uses legacy framing only for OPTIONS/STARTUP and the READY answer. After READY both
//!   directions switch to *segments* ([`segment`]): a CRC24-protected header, a payload of at
//!   most 128 KiB - 1 and a CRC32. A self-contained segment carries one or more whole frames; a
//!   larger frame spans several non-self-contained segments. LZ4, if negotiated, compresses
//!   segment payloads; frame bodies are never compressed in v5.
//!
//! [`FrameCodec`] does both framings in both directions; [`Request::decode`] turns a frame body
//! into a [`Request`]; [`Response`] bodies are encoded by [`FrameCodec::encode`].
//!
//! Decoding is zero-copy: a frame is split off the read buffer and frozen, and bodies and bound
//! values are [`bytes::Bytes`] slices of it (except for compressed input, decompressed once).
//! Client bytes never cause a panic; every violation is a [`ProtocolError`].

#![forbid(unsafe_code)]

mod consistency;
mod error;
pub mod frame;
mod header;
mod request;
mod response;
pub mod segment;
mod type_option;
mod wire;

#[cfg(test)]
mod tests;

pub use consistency::Consistency;
pub use error::ProtocolError;
pub use frame::{Compression, Frame, FrameCodec, Version};
pub use request::{
    Batch, BatchKind, BatchStatement, BatchStatementKind, QueryParameters, Request, Values,
    EVENT_TYPES,
};
pub use response::{
    encode_column_specs, ColumnSpec, EncodedColumnSpecs, ErrorBody, ErrorCode, ErrorExtra, Event,
    PreparedResult, Response, ResultBody, Rows, RowsMetadata, RowsWriter, SchemaChange,
    SchemaChangeTarget, SchemaChangeType,
};
pub use type_option::marshal_class_name;
pub use wire::RawValue;
