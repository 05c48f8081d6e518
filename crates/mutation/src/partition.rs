//! A partition's identity and what travels for one partition: the update a write carries and the
//! data a read returns. Plain values, shared by storage (which stores and reads them) and the
//! coordinator and replicas (which send them); their binary encoding is in `wire`.

use crate::{PartitionHeader, Row};

/// A table's id (`system_schema.tables.id`). RocksDB keeps each table in its own column family
/// named by this id.
pub type TableId = uuid::Uuid;

/// A partition's identity: its Murmur3 token and the serialised partition key (CQL's
/// `serializeValue` for single-column keys, the composite encoding otherwise). Two different
/// keys can share a token; storage orders them by token, then key length, then key bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PartitionKey {
    pub token: i64,
    pub key: Vec<u8>,
}

/// The largest partition key storage accepts, as in Cassandra (the key length is a u16).
pub const MAX_PARTITION_KEY_BYTES: usize = u16::MAX as usize;

/// Everything one statement (or one batch) writes to one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionUpdate {
    pub table: TableId,
    pub key: PartitionKey,
    /// Partition deletion and/or range tombstones.
    pub header: Option<PartitionHeader>,
    pub static_row: Option<Row>,
    /// Clustering rows by byte-comparable clustering key. Order and duplicates do not matter:
    /// storage normalizes each row and merges duplicates.
    pub rows: Vec<(Vec<u8>, Row)>,
}

/// One partition (or a page of it) as stored: fragments merged, nothing filtered for liveness.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionData {
    pub key: PartitionKey,
    /// `PartitionHeader::default()` if none is stored.
    pub header: PartitionHeader,
    pub static_row: Option<Row>,
    /// In clustering order (reverse order if the slice is reversed). Rows that are tombstones
    /// or expired are included: the caller applies deletions and TTL with its `now`.
    pub rows: Vec<(Vec<u8>, Row)>,
}
