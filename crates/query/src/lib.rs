//! Statement execution: from CQL text to results.
//!
//! Owns: parsing (through `cql-syntax`), binding values to bind markers, validating statements
//! against the schema, turning writes into `storage::PartitionUpdate`s and reads into
//! coordinator read commands, filtering and projecting rows, paging state, the prepared
//! statement cache, schema changes (DDL) and their persistence, and the node-served system
//! tables (`system.local`, `system_schema.*`, `system_virtual_schema.*`).
//!
//! Must not depend on: the protocol frame codec, sockets, or RocksDB. Results are returned as
//! plain column specs and serialised cell values; the server crate encodes them.

mod bind;
mod ddl;
mod describe;
mod error;
mod eval;
mod prepared;
mod processor;
mod select;
mod slices;
mod system_tables;
mod warnings;
mod write;

pub use coordinator::ConsistencyLevel;
pub use error::QueryError;
pub use processor::{
    BatchItem, BatchKind, BoundValue, BoundValues, ColumnSpec, NodeInfo, Outcome, PreparedInfo,
    QueryOptions, QueryProcessor, QueryResult, ResultSet, SchemaChangeEvent, SchemaChangeKind,
    SchemaChangeTarget, Session, StatementKind,
};
pub use warnings::{BatchThresholds, DEFAULT_TOMBSTONE_WARN_THRESHOLD};
