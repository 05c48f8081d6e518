//! A read as a replica executes it and what it answers: one partition's clustering slice, or a
//! token-ordered scan, each a page at a time with an opaque resume token. Storage executes
//! them; the coordinator sends them to replicas; their binary encoding is in `wire`.

use crate::{ClusteringSlice, PartitionData, PartitionKey, TableId};

/// Where a `scan` starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanStart {
    Beginning,
    /// Partitions with token >= this.
    Token(i64),
    /// Opaque, from a previous `ScanPage::resume`.
    Resume(Vec<u8>),
    /// Just after a position in the data, named by the data rather than by a replica's
    /// opaque token, so that any replica can continue from it: where a coordinator that
    /// reconciled several replicas' pages cut its page. `clustering: None` is after the whole
    /// partition `key`; `Some(c)` is after its row `c`, the partition going on: its header and
    /// static row are returned again, then its rows after `c` (none: the partition is not
    /// returned again).
    After {
        key: PartitionKey,
        clustering: Option<Vec<u8>>,
    },
}

/// A page of a token-ordered scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanPage {
    pub partitions: Vec<PartitionData>,
    /// Pass back as `ScanStart::Resume` for the next page; `None` = the scan is complete.
    pub resume: Option<Vec<u8>>,
    /// The page ended inside its last partition: the next page starts with the rest of its
    /// rows. (Otherwise the last partition is whole, and one with no live rows can be shown
    /// as its static row.)
    pub last_partition_continues: bool,
}

/// A page of one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionPage {
    pub data: PartitionData,
    /// Pass back as `resume` (with the same slice) for the next page; `None` = complete.
    pub resume: Option<Vec<u8>>,
}

/// A read as a replica executes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadCommand {
    /// One partition, a clustering slice of it, resumable.
    Partition {
        table: TableId,
        key: PartitionKey,
        slice: ClusteringSlice,
        max_rows: usize,
        resume: Option<Vec<u8>>,
    },
    /// Partitions in token order from `start` up to `end_token` (inclusive).
    Range {
        table: TableId,
        start: ScanStart,
        end_token: Option<i64>,
        max_rows: usize,
    },
}

/// A replica's answer to a `ReadCommand` of the same kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadResponse {
    Partition(PartitionPage),
    Range(ScanPage),
}
