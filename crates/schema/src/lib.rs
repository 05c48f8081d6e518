//! Schema metadata: keyspaces, tables, columns and user-defined types.
//!
//! Owns: the in-memory model of the schema ([`Schema`]), its validation rules for DDL (which
//! options a keyspace or table takes, what a primary key may contain), its stable column ids,
//! and its serialised form for persistence (JSON, one document per node, written by the query
//! layer through the storage meta API).
//!
//! Must not depend on: storage, the protocol, the CQL parser, or any I/O. It depends on
//! `locator` (pure) for the typed replication strategy a keyspace holds. A `Schema` is an
//! immutable value; a change produces a new `Schema` that is swapped in atomically.

mod compaction;
mod compression;
mod java;
mod model;
mod options;
mod speculative_retry;

pub use model::{
    ClusteringOrder, ColumnKind, ColumnMetadata, DroppedColumn, KeyspaceMetadata, Schema,
    SchemaError, TableMetadata, UserType, SYSTEM_KEYSPACES,
};
pub use options::{
    parse_boolean_property, OptionValue, Replication, ReplicationFactor, TableOptions,
    MAX_TTL_SECONDS,
};
pub use speculative_retry::SpeculativeRetry;
