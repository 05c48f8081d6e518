//! Counting the tombstones a read command meets, for Cassandra's tombstone warning (which
//! prints the command as CQL).

use cql_syntax::ast::Operator;
use mutation::{Cell, ColumnData, DeletionTime, Row};
use mutation::{ClusteringSlice, PartitionData, PartitionKey};
use types::CqlType;

use crate::warnings;

use super::filter::Filter;
use super::partition_rows::{covering_deletion, live_cell, newer};
use super::plan::Plan;

/// What Cassandra's read metrics count in a partition as read (`ReadCommand`'s
/// `MetricRecording`): live rows (static row included), and tombstones: each dead cell (a
/// tombstone or expired, and not shadowed by a newer deletion, which Cassandra's merge drops),
/// each row deletion of a row with no live data and no dead cell, and each range tombstone's two
/// bound markers.
/// Only rows in `slice` count, when one is given: a range scan reads whole partitions, and
/// Cassandra's reads stay in the slice (a partition read returns only rows in it).
pub(super) fn count_tombstones(
    data: &PartitionData,
    slice: Option<&ClusteringSlice>,
    now: mutation::LocalTime,
) -> (u64, u64) {
    let (mut live_rows, mut tombstones) = (0u64, 0u64);
    let mut count_row = |row: &Row, covering: Option<DeletionTime>| {
        let shadowing = newer(covering, row.deletion);
        let shadowed = |timestamp: i64, by: Option<DeletionTime>| {
            by.is_some_and(|d| timestamp <= d.marked_for_delete_at)
        };
        let mut dead_cells = 0u64;
        let mut live_cells = false;
        let mut visit = |cell: &Cell, by: Option<DeletionTime>| {
            if shadowed(cell.timestamp, by) {
                return;
            }
            if live_cell(cell, None, now).is_some() {
                live_cells = true;
            } else {
                dead_cells += 1;
            }
        };
        for column in &row.columns {
            match column {
                // Helenus's own record of the clustering's forms: no data of Cassandra's.
                ColumnData::Simple { id, .. } if *id == crate::keys::CLUSTERING_FORMS_COLUMN => {}
                ColumnData::Simple { cell, .. } => visit(cell, shadowing),
                ColumnData::Complex {
                    deletion, cells, ..
                } => {
                    let by = newer(shadowing, *deletion);
                    for (_, cell) in cells {
                        visit(cell, by);
                    }
                }
            }
        }
        let marker_live = row.liveness.as_ref().is_some_and(|l| {
            !shadowed(l.timestamp, shadowing)
                && l.expiry.is_none_or(|e| e.local_expiration_time > now)
        });
        tombstones += dead_cells;
        if marker_live || live_cells {
            live_rows += 1;
        } else if dead_cells == 0
            && row.deletion.is_some_and(|d| {
                covering.is_none_or(|c| d.marked_for_delete_at > c.marked_for_delete_at)
            })
        {
            tombstones += 1;
        }
    };
    if let Some(row) = &data.static_row {
        count_row(row, data.header.deletion);
    }
    for (clustering, row) in &data.rows {
        let in_slice = slice.is_none_or(|slice| {
            slice
                .start
                .as_ref()
                .is_none_or(|b| b.start_admits(clustering))
                && slice.end.as_ref().is_none_or(|b| b.end_admits(clustering))
        });
        if in_slice {
            count_row(row, covering_deletion(&data.header, clustering));
        }
    }
    tombstones += 2 * data.header.range_tombstones.len() as u64;
    (live_rows, tombstones)
}

/// Live rows and tombstones met by one of Cassandra's read commands: one per partition of a
/// partition-key query (each partition of an IN is its own command), one for a range scan.
/// Nothing is allocated unless a warning is made.
#[derive(Default)]
pub(super) struct TombstoneTally {
    /// The partition's index in `Plan::partitions`, for a partition-key query.
    pub(super) partition: Option<usize>,
    /// The last partition's token.
    pub(super) token: i64,
    pub(super) live_rows: u64,
    pub(super) tombstones: u64,
}

impl TombstoneTally {
    /// Adds a partition (or a page of it) read: partition `partition` of `Plan::partitions`, or
    /// `None` in a range scan. A new partition closes the previous one's command, which is
    /// returned.
    pub(super) fn add(
        &mut self,
        partition: Option<usize>,
        data: &PartitionData,
        slice: Option<&ClusteringSlice>,
        now: mutation::LocalTime,
    ) -> Option<TombstoneTally> {
        let closed = if self.partition.is_some() && self.partition != partition {
            Some(std::mem::take(self))
        } else {
            None
        };
        let (live_rows, tombstones) = count_tombstones(data, slice, now);
        self.partition = partition;
        self.token = data.key.token;
        self.live_rows += live_rows;
        self.tombstones += tombstones;
        closed
    }

    /// Cassandra's warning for this command if it met more tombstones than `threshold`.
    pub(super) fn warning(
        &self,
        plan: &Plan,
        limit: Option<usize>,
        threshold: u64,
    ) -> Option<String> {
        if self.tombstones <= threshold {
            return None;
        }
        let key = match (self.partition, &plan.partitions) {
            (Some(i), Some(keys)) if i < keys.len() => keys.key(&plan.table, i).ok(),
            _ => None,
        };
        let query = read_command_cql(plan, key.as_deref(), limit);
        Some(warnings::tombstone_warning(
            self.live_rows,
            self.tombstones,
            &query,
            self.token,
        ))
    }
}

/// The read command as Cassandra's `ReadCommand.toCQLString` prints it in its tombstone
/// warning: the non-key columns read (`*` for all of them), the partition key of a partition
/// read, then single-value comparisons on clustering and other columns, the page's limit and
/// `ALLOW FILTERING`. (Cassandra prints IN and multi-column restrictions too; those are left
/// out.)
pub(super) fn read_command_cql(
    plan: &Plan,
    key: Option<&PartitionKey>,
    limit: Option<usize>,
) -> String {
    let table = &plan.table;
    let key_columns = table.partition_key_count + table.clustering_count;
    let mut read: Vec<usize> = plan
        .selection
        .columns_read()
        .into_iter()
        .chain(plan.filters.iter().filter_map(|f| match f {
            Filter::Compare { column, .. }
            | Filter::IsNotNull(column)
            | Filter::MapEntry { column, .. } => Some(*column),
            _ => None,
        }))
        .filter(|i| *i >= key_columns)
        .collect();
    read.sort_unstable();
    read.dedup();
    let columns = if read.is_empty() || read.len() == table.columns.len() - key_columns {
        "*".to_string()
    } else {
        let names: Vec<String> = read
            .iter()
            .map(|i| cql_syntax::ast::Identifier::new(&table.columns[*i].name).to_cql())
            .collect();
        names.join(", ")
    };
    let mut text = format!(
        "SELECT {columns} FROM {}.{}",
        cql_syntax::ast::Identifier::new(&table.keyspace).to_cql(),
        cql_syntax::ast::Identifier::new(&table.name).to_cql()
    );
    let mut where_clause = Vec::new();
    if let Some(key) = key {
        let parts: Vec<Vec<u8>> = if table.partition_key_count == 1 {
            vec![key.key.clone()]
        } else {
            partitioner::decompose_partition_key(&key.key, table.partition_key_count)
                .map(|parts| parts.into_iter().map(<[u8]>::to_vec).collect())
                .unwrap_or_default()
        };
        let conditions: Vec<String> = table
            .partition_key()
            .iter()
            .zip(&parts)
            .map(|(col, bytes)| {
                let value = types::Value::decode(&col.ty, bytes)
                    .map(|v| v.to_cql_literal_typed(&col.ty))
                    .unwrap_or_else(|_| "?".to_string());
                format!(
                    "{} = {value}",
                    cql_syntax::ast::Identifier::new(&col.name).to_cql()
                )
            })
            .collect();
        where_clause.extend(conditions);
    }
    // Clustering columns first, then the others, as Cassandra prints its clustering filter
    // before its row filter.
    let mut compared: Vec<(usize, &str, &[u8])> = plan
        .filters
        .iter()
        .filter_map(|f| match f {
            Filter::Compare { column, op, values }
                if *column >= table.partition_key_count && values.len() == 1 =>
            {
                let op = match op {
                    Operator::Eq => "=",
                    Operator::Lt => "<",
                    Operator::Lte => "<=",
                    Operator::Gt => ">",
                    Operator::Gte => ">=",
                    Operator::Contains => "CONTAINS",
                    Operator::ContainsKey => "CONTAINS KEY",
                    _ => return None,
                };
                Some((*column, op, values[0].as_slice()))
            }
            _ => None,
        })
        .collect();
    compared.sort_by_key(|(column, _, _)| *column >= key_columns);
    for (column, op, bytes) in compared {
        let col = &table.columns[column];
        let ty = match (op, col.ty.unfrozen()) {
            ("CONTAINS", CqlType::List(e) | CqlType::Set(e)) => (**e).clone(),
            ("CONTAINS", CqlType::Map(_, v)) => (**v).clone(),
            ("CONTAINS KEY", CqlType::Map(k, _)) => (**k).clone(),
            _ => col.ty.clone(),
        };
        let value = types::Value::decode(&ty, bytes)
            .map(|v| v.to_cql_literal_typed(&ty))
            .unwrap_or_else(|_| "?".to_string());
        where_clause.push(format!(
            "{} {op} {value}",
            cql_syntax::ast::Identifier::new(&col.name).to_cql()
        ));
    }
    if !where_clause.is_empty() {
        text.push_str(" WHERE ");
        text.push_str(&where_clause.join(" AND "));
    }
    if let Some(limit) = limit {
        text.push_str(&format!(" LIMIT {limit}"));
    }
    text.push_str(" ALLOW FILTERING");
    text
}
