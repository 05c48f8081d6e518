//! Statement execution: from CQL text to results.
//!
//! Owns: parsing (through `cql-syntax`), binding values to bind markers, validating statements
//! against the schema, turning writes into `mutation::PartitionUpdate`s and reads into
//! coordinator read commands, filtering and projecting rows, paging state, request deadlines
//! and the guardrails on IN restrictions, the prepared statement cache, deciding schema changes
//! (DDL: validation, the new schema, Cassandra's refusals; `schema-service` applies, persists
//! and announces them), and the node-served system tables (`system.local`, `system_schema.*`,
//! `system_virtual_schema.*`).
//!
//! Must not depend on: the protocol frame codec, sockets, or the storage engine: every read,
//! write and TRUNCATE goes through the coordinator, every schema change through the schema
//! service. Results are returned as plain column specs and serialised cell values; the server
//! crate encodes them.

mod analyze;
mod bind;
mod ddl;
mod describe;
mod elements;
mod error;
mod eval;
mod interface;
mod keys;
mod limits;
mod prepared;
mod processor;
mod select;
mod slices;
mod system_tables;
mod timeuuid;
mod warnings;
mod write;

pub use coordinator::ConsistencyLevel;
pub use error::QueryError;
pub use interface::{
    BatchItem, BatchKind, BatchlogView, BoundValue, BoundValues, ColumnSpec, NodeInfo, Outcome,
    PeerDetails, PeerDetailsMap, PreparedInfo, QueryOptions, QueryResult, ResultSet, Session,
    StatementKind,
};
pub use limits::{
    InSelectGuardrails, RequestTimeouts, DEFAULT_IN_SELECT_CARTESIAN_PRODUCT_FAIL_THRESHOLD,
};
pub use prepared::DEFAULT_PREPARED_STATEMENTS_CACHE_BYTES;
pub use processor::QueryProcessor;
/// The schema change events moved to the schema service; re-exported for the crates that still
/// name them through `query`.
pub use schema_service::{SchemaChangeEvent, SchemaChangeKind, SchemaChangeTarget};
pub use system_tables::system_keyspaces;
pub use warnings::{BatchThresholds, DEFAULT_TOMBSTONE_WARN_THRESHOLD};

/// The stack a thread that runs statements must have (`cql_server`'s shards do). Analysing and
/// executing a statement recurses once per level of its trees, which the parser bounds to
/// `cql_syntax::MAX_NESTING_DEPTH`; the deepest statements it accepts need up to 1.1 MiB in
/// a debug build (a 63-operand selector sum; terms and types about 0.6 MiB), much less in a
/// release build. 8 MiB (Linux's default for a main thread) leaves a margin of seven; only
/// the pages a thread touches take memory. `tests/depth.rs` runs the deepest statements
/// within a quarter of it.
pub const STATEMENT_STACK_SIZE_BYTES: usize = 8 * 1024 * 1024;
