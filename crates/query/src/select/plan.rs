//! A SELECT's plan, as `planner.rs` makes it from the statement: the partitions to read (or
//! the token range to scan), the clustering slices of each, the row filters the read does not
//! enforce, and the limits, grouping and ordering the rows read go through.

use std::sync::Arc;

use mutation::ClusteringSlice;
use schema::TableMetadata;

use crate::slices::ClusteringRange;

use super::filter::{enforced_bit, filter_passes, Filter};
use super::partitions::PartitionList;
use super::row::RowValues;
use super::selector::Selection;

pub(super) struct Plan {
    pub(super) table: Arc<TableMetadata>,
    pub(super) selection: Arc<Selection>,
    /// Every restriction, as written (the tombstone warning prints them).
    pub(super) filters: Vec<Filter>,
    /// The filters the read itself enforces exactly, as a mask over `filters`
    /// (`enforced_by_read`): rows read from storage are checked against the others only.
    /// Virtual tables check all.
    pub(super) enforced: u64,
    /// Whether a row needs its partition key values: the selection or a row filter reads
    /// them, or rows are grouped (otherwise each row would copy them for nothing).
    pub(super) needs_partition_key: bool,
    /// Partitions to read, when the partition key is fully restricted by = or IN.
    pub(super) partitions: Option<PartitionList>,
    pub(super) slice: ClusteringSlice,
    /// When the clustering restrictions select several ranges of keys (an IN on a clustering
    /// column, a slice over columns of mixed order: `clustering_read`): the ranges, in
    /// clustering order. Each partition is then read as one slice per range (in read order),
    /// as Cassandra reads its `Slices`, not from the lowest key to the highest: rows and
    /// tombstones between the ranges are not read. `slice` then only gives the direction.
    pub(super) slices: Option<Vec<ClusteringRange>>,
    pub(super) limit: Option<usize>,
    pub(super) per_partition_limit: Option<usize>,
    pub(super) distinct: bool,
    /// An aggregate selection without GROUP BY: one result row over every row read.
    pub(super) aggregate: bool,
    /// GROUP BY: how many clustering columns (after the whole partition key) make a group.
    pub(super) group_by: Option<usize>,
    pub(super) token_start: Option<i64>,
    pub(super) token_end: Option<i64>,
    /// Whether a partition with only a live static row shows up as a row (no clustering
    /// restriction), as Cassandra does.
    pub(super) static_only_rows: bool,
    /// ORDER BY with an IN on the partition key: each partition is read in the asked order,
    /// then the rows of all of them are sorted on these columns (index, descending), as
    /// Cassandra's post-query ordering does. The selection carries them as hidden outputs
    /// after its visible ones.
    pub(super) post_ordering: Option<Vec<(usize, bool)>>,
    /// Some partition key column is restricted (`=`, `IN`, or filtering on part of it) or the
    /// token is: Cassandra's `hasPartitionKeyRestrictions`, which decides its warning for
    /// aggregates and GROUP BY.
    pub(super) partition_key_restricted: bool,
    /// An IN of several values on the partition key.
    pub(super) partition_key_in: bool,
    /// The read fetches the table's static columns (Cassandra's column filter: `*`, a
    /// selection naming one, or naming key columns only).
    pub(super) fetches_static: bool,
    /// `=` or IN restricts every clustering column (and no slice any).
    pub(super) clustering_names: bool,
}

impl Plan {
    /// Whether Cassandra knows the read selects nothing before it reads (`ReadQuery.empty`):
    /// no partition (an empty IN), or no clustering key (an empty IN, bounds that cross),
    /// except when `=`/IN restrict every clustering column (Cassandra's names filter) and a
    /// static column is fetched: it then still reads the partitions for their static rows.
    pub(super) fn selects_nothing(&self) -> bool {
        self.partitions.as_ref().is_some_and(|keys| keys.len() == 0)
            || (self.slices.as_ref().is_some_and(Vec::is_empty)
                && !(self.clustering_names && self.fetches_static))
    }
}

/// How many reads a partition of `plan.partitions` takes: one per range of `Plan::slices`
/// (none for an empty IN), else one.
pub(super) fn reads_per_partition(plan: &Plan) -> usize {
    plan.slices.as_ref().map_or(1, Vec::len)
}

/// The slice of a partition's read number `i` (of `reads_per_partition`): its ranges in read
/// order (the last first when the read is reversed), else the plan's slice.
pub(super) fn read_slice(plan: &Plan, i: usize) -> ClusteringSlice {
    match &plan.slices {
        Some(ranges) => {
            let (start, end) = if plan.slice.reversed {
                &ranges[ranges.len() - 1 - i]
            } else {
                &ranges[i]
            };
            ClusteringSlice {
                start: start.clone(),
                end: end.clone(),
                reversed: plan.slice.reversed,
            }
        }
        None => plan.slice.clone(),
    }
}

/// Whether a row read from storage passes the restrictions its read did not enforce.
pub(super) fn passes(plan: &Plan, row: &RowValues) -> bool {
    plan.filters
        .iter()
        .enumerate()
        .all(|(i, f)| enforced_bit(plan.enforced, i) || filter_passes(&plan.table, f, row))
}
