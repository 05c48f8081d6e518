//! GROUP BY: rows of one group (equal partition key and leading clustering values) fold into
//! one result row; a page may end inside a group.

use bytes::Bytes;
use mutation::PartitionKey;
use schema::ClusteringOrder;

use crate::keys::clustering_key;
use crate::QueryError;

use super::paging::{GroupKey, GroupResume, PagingState};
use super::plan::Plan;
use super::row::RowValues;
use super::selector::GroupState;

/// GROUP BY: rows arrive in clustering order, so a group is a run of rows with the same
/// partition and clustering prefix. A page holds whole groups: it ends when a group closes and
/// the page is full, and the next page skips rows up to the end of that group.
pub(super) struct Grouper {
    /// Clustering columns in the group key.
    pub(super) prefix: usize,
    pub(super) page_size: Option<usize>,
    pub(super) limit: Option<usize>,
    pub(super) per_partition_limit: Option<usize>,
    pub(super) reversed: bool,
    /// A token-ordered scan (partitions compare by token), not a list of partitions.
    pub(super) range_scan: bool,
    /// Groups returned, by earlier pages and this one (for LIMIT).
    pub(super) returned: usize,
    pub(super) rows: Vec<Vec<Option<Bytes>>>,
    /// The group being aggregated, with its ordinal among its partition's groups.
    pub(super) open: Option<(GroupKey, Box<GroupState>, usize)>,
    pub(super) last_returned: Option<(GroupKey, usize)>,
    /// The partition of the last row accepted, and how many groups of it were opened.
    pub(super) partition: Option<Vec<u8>>,
    pub(super) partition_groups: usize,
    /// Rows up to the end of this group were returned by earlier pages.
    pub(super) skip: Option<GroupResume>,
    pub(super) done: bool,
}

impl Grouper {
    pub(super) fn new(
        plan: &Plan,
        prefix: usize,
        page_size: Option<usize>,
        state: &PagingState,
    ) -> Grouper {
        Grouper {
            prefix,
            page_size,
            limit: plan.limit,
            per_partition_limit: plan.per_partition_limit,
            reversed: plan.slice.reversed,
            range_scan: plan.partitions.is_none(),
            returned: state.returned as usize,
            rows: Vec::new(),
            open: None,
            last_returned: None,
            partition: None,
            partition_groups: 0,
            skip: state.group.clone(),
            done: false,
        }
    }

    /// Rows to ask storage for: a few per group still wanted, since groups may be small.
    pub(super) fn wanted(&self) -> usize {
        let by_page = self
            .page_size
            .map(|p| p.saturating_sub(self.rows.len()))
            .unwrap_or(usize::MAX);
        let by_limit = self
            .limit
            .map(|l| l.saturating_sub(self.returned))
            .unwrap_or(usize::MAX);
        by_page
            .min(by_limit)
            .saturating_add(1)
            .saturating_mul(4)
            .max(100)
    }

    pub(super) fn key(
        &self,
        plan: &Plan,
        partition: &PartitionKey,
        row: &RowValues,
    ) -> Result<GroupKey, QueryError> {
        let first = plan.table.partition_key_count;
        let function = plan
            .selection
            .group_by_functions
            .last()
            .and_then(Option::as_ref)
            .filter(|_| self.prefix > 0);
        // With a function, the last clustering column of the key is replaced by its value.
        let plain = self.prefix - usize::from(function.is_some());
        let prefix: Option<Vec<Vec<u8>>> =
            row.values[first..first + plain].iter().cloned().collect();
        let mut clustering = prefix
            .map(|p| clustering_key(&plan.table, &p))
            .unwrap_or_default();
        if let Some(f) = function {
            if row.values[first + plain].is_some() {
                // Encoded byte-comparably in the column's order: the function is monotonic,
                // so the keys of consecutive groups still compare in read order.
                let value = plan.selection.group_value(f, row)?.unwrap_or_default();
                let descending = plan.table.columns[f.column].order == ClusteringOrder::Desc;
                types::byte_comparable::encode(&f.ty, &value, descending, &mut clustering);
            }
        }
        Ok(GroupKey {
            partition: partition.key.clone(),
            token: partition.token,
            clustering,
        })
    }

    /// Whether a row of group `key` comes after group `last` in read order.
    pub(super) fn after(&self, key: &GroupKey, last: &GroupKey) -> bool {
        if key.partition != last.partition {
            // Partitions of a scan come in token order. (Two keys with the same token are
            // taken to be in order; a 64-bit token collision is not a practical concern.)
            return !self.range_scan || key.token >= last.token;
        }
        if last.clustering.is_empty() {
            // The whole partition was one group (or a static-only row).
            return false;
        }
        if key.clustering.is_empty() {
            return true;
        }
        if self.reversed {
            key.clustering < last.clustering
        } else {
            key.clustering > last.clustering
        }
    }

    pub(super) fn accept(
        &mut self,
        plan: &Plan,
        partition: &PartitionKey,
        row: &RowValues,
    ) -> Result<Flow, QueryError> {
        let key = self.key(plan, partition, row)?;
        if let Some(skip) = &self.skip {
            if !self.after(&key, &skip.key) {
                return Ok(Flow::Continue);
            }
            if key.partition == skip.key.partition {
                self.partition = Some(key.partition.clone());
                self.partition_groups = skip.partition_groups as usize;
            }
            self.skip = None;
        }
        if self.partition.as_ref() != Some(&key.partition) {
            self.partition = Some(key.partition.clone());
            self.partition_groups = 0;
        }
        if let Some((open_key, group, _)) = &mut self.open {
            if *open_key == key {
                plan.selection.add_row(group, row)?;
                return Ok(Flow::Continue);
            }
            self.close(plan)?;
            if self.limit.is_some_and(|l| self.returned >= l) {
                self.done = true;
                return Ok(Flow::Done);
            }
            if self.page_size.is_some_and(|p| self.rows.len() >= p) {
                return Ok(Flow::PageFull);
            }
        }
        if self
            .per_partition_limit
            .is_some_and(|l| self.partition_groups >= l)
        {
            return Ok(Flow::Continue);
        }
        self.partition_groups += 1;
        let mut group = Box::new(plan.selection.new_group());
        plan.selection.add_row(&mut group, row)?;
        self.open = Some((key, group, self.partition_groups));
        Ok(Flow::Continue)
    }

    pub(super) fn close(&mut self, plan: &Plan) -> Result<(), QueryError> {
        if let Some((key, group, ordinal)) = self.open.take() {
            self.rows.push(plan.selection.finish(&group)?);
            self.returned += 1;
            self.last_returned = Some((key, ordinal));
        }
        Ok(())
    }

    /// The end of the data: the open group is complete.
    pub(super) fn flush(&mut self, plan: &Plan) -> Result<(), QueryError> {
        self.close(plan)
    }

    pub(super) fn resume(&self) -> Option<GroupResume> {
        self.last_returned
            .as_ref()
            .map(|(key, ordinal)| GroupResume {
                key: key.clone(),
                partition_groups: *ordinal as u32,
            })
    }
}

/// What a grouped read does after a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Flow {
    Continue,
    /// The page is full; the row was not consumed and starts a later page.
    PageFull,
    /// LIMIT groups were returned.
    Done,
}
