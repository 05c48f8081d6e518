//! Client warnings: the texts Cassandra 5.0 sends with a result (the native protocol's WARNING
//! flag) for the statements Helenus runs, and the batch checks that produce them.
//!
//! Batch sizes are Cassandra's `IMutation.dataSize`, computed from the `PartitionUpdate`s a
//! batch makes, so the numbers in the warning match what Cassandra would print for the same
//! batch (byte for byte when clustering values and cell paths are the ones Cassandra stores).

use std::collections::BTreeSet;

use cql_syntax::ast::Identifier;
use mutation::PartitionUpdate;
use mutation::{ClusteringBound, ColumnData, LivenessInfo, Row};
use schema::{ClusteringOrder, Replication, Schema, TableMetadata};

use crate::QueryError;

/// SELECT with an aggregate or GROUP BY and no restriction on the partition key.
pub(crate) const AGGREGATION_WITHOUT_PARTITION_KEY: &str =
    "Aggregation query used without partition key";
/// SELECT with an aggregate or GROUP BY and an IN of several values on the partition key.
pub(crate) const AGGREGATION_ON_MULTIPLE_PARTITION_KEYS: &str =
    "Aggregation query used on multiple partition keys (IN restriction)";

/// ALTER KEYSPACE that raises the replication factor (`AlterKeyspaceStatement`).
pub(crate) const REPLICATION_FACTOR_INCREASED: &str =
    "When increasing replication factor you need to run a full (-full) repair to distribute the data.";

/// Cassandra's `tombstone_warn_threshold` default: a read command that meets more tombstones
/// gets a warning.
pub const DEFAULT_TOMBSTONE_WARN_THRESHOLD: u64 = 1000;

/// Cassandra's warning (`ReadCommand`'s metrics recording) for a read that met more tombstones
/// than `tombstone_warn_threshold`: `query` is the read command as CQL, cut at 512 characters
/// as Cassandra's `%1.512s` does; `token` is the last partition's.
pub(crate) fn tombstone_warning(
    live_rows: u64,
    tombstones: u64,
    query: &str,
    token: i64,
) -> String {
    let query: String = query.chars().take(512).collect();
    format!(
        "Read {live_rows} live rows and {tombstones} tombstone cells for query {query}; token \
         {token} (see tombstone_warn_threshold)"
    )
}

/// The batch size and partition limits of `cassandra.yaml` that [`check_batch`] applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchThresholds {
    /// `batch_size_warn_threshold`: a batch spanning several partitions whose data is larger
    /// gets a warning.
    pub size_warn_bytes: u64,
    /// `batch_size_fail_threshold`: such a batch is refused.
    pub size_fail_bytes: u64,
    /// `unlogged_batch_across_partitions_warn_threshold`: an unlogged batch over more
    /// partitions gets a warning.
    pub unlogged_partitions_warn: u64,
}

impl Default for BatchThresholds {
    /// Cassandra 5.0's defaults: 5 KiB, 50 KiB, 10 partitions.
    fn default() -> Self {
        BatchThresholds {
            size_warn_bytes: 5 * 1024,
            size_fail_bytes: 50 * 1024,
            unlogged_partitions_warn: 10,
        }
    }
}

/// What a batch's mutations look like to Cassandra's checks (`BatchStatement.verifyBatchSize`,
/// `verifyBatchType` and the gc_grace_seconds = 0 check of `getMutations`), and the warnings
/// they give, in Cassandra's order. `logged` is false for UNLOGGED batches. An error is
/// Cassandra's refusal of a batch over the size fail threshold. `mutations`: the batch's
/// partition updates, one per table and partition key, each with its keyspace.
pub(crate) fn check_batch<'a>(
    schema: &Schema,
    thresholds: &BatchThresholds,
    logged: bool,
    mutations: impl Iterator<Item = &'a (String, PartitionUpdate)> + Clone,
) -> Result<Vec<String>, QueryError> {
    let mut warnings = Vec::new();
    if logged {
        let zero_gc_grace: BTreeSet<String> = mutations
            .clone()
            .filter_map(|(_, update)| schema.table_by_id(update.table))
            .filter(|t| t.options.gc_grace_seconds == 0)
            .map(|t| table_name(t))
            .collect();
        if !zero_gc_grace.is_empty() {
            warnings.push(format!(
                "Executing a LOGGED BATCH on table{} {}, configured with a gc_grace_seconds of 0. \
                 The gc_grace_seconds is used to TTL batchlog entries, so setting \
                 gc_grace_seconds too low on tables involved in an atomic batch might cause \
                 batchlog entries to expire before being replayed.",
                plural(zero_gc_grace.len()),
                java_set(&zero_gc_grace)
            ));
        }
    }
    // Cassandra makes one mutation per keyspace and partition key, with one partition update
    // per table in it; the size and type checks only look at batches of several mutations.
    let mut keyspace_keys = BTreeSet::new();
    let mut keys = BTreeSet::new();
    let mut tables = BTreeSet::new();
    let mut size_bytes = 0u64;
    for (keyspace, update) in mutations {
        let (table_id, key) = (&update.table, &update.key.key);
        keyspace_keys.insert((keyspace.as_str(), key.as_slice()));
        keys.insert(key.as_slice());
        if let Some(table) = schema.table_by_id(*table_id) {
            tables.insert(table_name(table));
            size_bytes += data_size(table, update);
        }
    }
    if keyspace_keys.len() <= 1 {
        return Ok(warnings);
    }
    let warn_bytes = thresholds.size_warn_bytes;
    if size_bytes > warn_bytes {
        if size_bytes > thresholds.size_fail_bytes {
            return Err(QueryError::Invalid("Batch too large".to_string()));
        }
        warnings.push(format!(
            "Batch for {} is of size {size_bytes}, exceeding specified threshold of \
             {warn_bytes} by {}.",
            java_set(&tables),
            size_bytes - warn_bytes
        ));
    }
    if !logged && keys.len() as u64 > thresholds.unlogged_partitions_warn {
        warnings.push(format!(
            "Unlogged batch covering {} partitions detected against table{} {}. You should use \
             a logged batch for atomicity, or asynchronous writes for performance.",
            keys.len(),
            plural(tables.len()),
            java_set(&tables)
        ));
    }
    Ok(warnings)
}

/// Cassandra's warnings (`maybeWarnOnOptions` of the replication strategies) for a keyspace
/// created or altered with more replicas than there are nodes: in total for SimpleStrategy, per
/// data centre for NetworkTopologyStrategy. `nodes_in` counts the ring's nodes of a data centre.
pub(crate) fn replication_warnings(
    keyspace: &str,
    replication: &Replication,
    nodes_in: impl Fn(&str) -> usize,
    total_nodes: usize,
) -> Vec<String> {
    let class = replication
        .options()
        .get("class")
        .map(String::as_str)
        .unwrap_or("");
    let factor = |v: &str| {
        v.split('/')
            .next()
            .and_then(|full| full.trim().parse::<usize>().ok())
            .unwrap_or(0)
    };
    if class.ends_with(".SimpleStrategy") {
        let rf = replication
            .options()
            .get("replication_factor")
            .map_or(0, |v| factor(v));
        if rf > total_nodes {
            return vec![format!(
                "Your replication factor {rf} for keyspace {keyspace} is higher than the number \
                 of nodes {total_nodes}"
            )];
        }
    } else if class.ends_with(".NetworkTopologyStrategy") {
        return replication
            .options()
            .iter()
            .filter(|(dc, _)| dc.as_str() != "class")
            .filter_map(|(dc, v)| {
                let (rf, nodes) = (factor(v), nodes_in(dc));
                (rf > nodes).then(|| {
                    format!(
                        "Your replication factor {rf} for keyspace {keyspace} is higher than the \
                         number of nodes {nodes} for datacenter {dc}"
                    )
                })
            })
            .collect();
    }
    Vec::new()
}

/// `ks.table` as Cassandra's `TableMetadata.toString` writes it (names quoted when needed).
fn table_name(table: &TableMetadata) -> String {
    format!(
        "{}.{}",
        Identifier::new(&table.keyspace).to_cql(),
        Identifier::new(&table.name).to_cql()
    )
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// A Java `Set`'s `toString`: `[a, b]`. Cassandra's is a `HashSet`, in hash order; this is
/// sorted, which is one of the orders Cassandra may print.
fn java_set(names: &BTreeSet<String>) -> String {
    let items: Vec<&str> = names.iter().map(String::as_str).collect();
    format!("[{}]", items.join(", "))
}

/// Cassandra's `PartitionUpdate.dataSize`: the partition deletion's timestamp (8 bytes) and
/// range tombstones, the static row (an absent one counts as an empty row) and every row.
fn data_size(table: &TableMetadata, update: &PartitionUpdate) -> u64 {
    let mut size = 8u64;
    if let Some(header) = &update.header {
        if !header.range_tombstones.is_empty() {
            // RangeTombstoneList.dataSize: the count as an int, then per range both bounds'
            // values, the deletion timestamp (long) and local deletion time (int).
            size += 4;
            for rt in &header.range_tombstones {
                size += bound_size(table, rt.start.as_ref()) + bound_size(table, rt.end.as_ref());
                size += 8 + 4;
            }
        }
    }
    size += match &update.static_row {
        Some(row) => row_size(0, row),
        None => EMPTY_ROW_BYTES,
    };
    for (clustering, row) in &update.rows {
        // Cassandra counts the clustering values as written.
        let forms = crate::keys::clustering_forms_cell(row).and_then(|cell| match &cell.value {
            mutation::CellValue::Live { value, .. } => crate::keys::split_clustering_forms(value),
            mutation::CellValue::Tombstone { .. } => None,
        });
        let clustering_bytes = match forms {
            Some(forms) => forms.iter().map(|f| f.len() as u64).sum(),
            None => clustering_size(table, clustering),
        };
        size += row_size(clustering_bytes, row);
    }
    size
}

/// An empty row's `dataSize`: its liveness info's timestamp (8) and its deletion (12 + 1).
const EMPTY_ROW_BYTES: u64 = 8 + ROW_DELETION_BYTES;
/// `Row.Deletion.dataSize`: a `DeletionTime` (12) and the shadowable flag (1), live or not.
const ROW_DELETION_BYTES: u64 = 12 + 1;

/// `BTreeRow.dataSize`: clustering values, liveness info, deletion, then every column.
fn row_size(clustering_bytes: u64, row: &Row) -> u64 {
    let mut size = clustering_bytes + liveness_size(row.liveness.as_ref()) + ROW_DELETION_BYTES;
    for column in &row.columns {
        size += match column {
            // Helenus's own record of the clustering's forms, counted with the clustering.
            ColumnData::Simple { id, .. } if *id == crate::keys::CLUSTERING_FORMS_COLUMN => 0,
            ColumnData::Simple { cell, .. } => cell_size(cell, 0),
            ColumnData::Complex { cells, .. } => {
                // ComplexColumnData: its deletion (12, live or not) and each cell with its path.
                12 + cells
                    .iter()
                    .map(|(path, cell)| cell_size(cell, path.len() as u64))
                    .sum::<u64>()
            }
        };
    }
    size
}

/// `LivenessInfo.dataSize`: the timestamp (also of an absent marker), and for an expiring one
/// its TTL (int) and expiration time (long).
fn liveness_size(liveness: Option<&LivenessInfo>) -> u64 {
    match liveness {
        Some(LivenessInfo {
            expiry: Some(_), ..
        }) => 8 + 4 + 8,
        _ => 8,
    }
}

/// `AbstractCell.dataSize`: timestamp (long), TTL (int), local deletion time (long), the value
/// and the path. Helenus stores a set element's or map key's path as its serialised value and a
/// UDT field's as a 2-byte index, as Cassandra does; a list's is a 16-byte timeuuid in both.
fn cell_size(cell: &mutation::Cell, path_bytes: u64) -> u64 {
    let value_bytes = match &cell.value {
        mutation::CellValue::Live { value, .. } => value.len() as u64,
        mutation::CellValue::Tombstone { .. } => 0,
    };
    8 + 4 + 8 + value_bytes + path_bytes
}

/// The serialised size of the clustering values in a byte-comparable clustering key (or
/// prefix): Cassandra counts the values themselves.
fn clustering_size(table: &TableMetadata, key: &[u8]) -> u64 {
    let mut input = key;
    let mut size = 0u64;
    for column in table.clustering() {
        if input.is_empty() {
            break;
        }
        let descending = column.order == ClusteringOrder::Desc;
        match types::byte_comparable::decode(&column.ty, &mut input, descending) {
            Ok(value) => size += value.len() as u64,
            // Cannot happen for keys the write path encoded; count what is left.
            Err(_) => return size + input.len() as u64,
        }
    }
    size
}

fn bound_size(table: &TableMetadata, bound: Option<&ClusteringBound>) -> u64 {
    bound.map_or(0, |b| clustering_size(table, &b.prefix))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn replication(pairs: &[(&str, &str)]) -> Replication {
        Replication::from_stored(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        )
        .expect("valid")
    }

    #[test]
    fn replication_factors_above_the_node_count_warn() {
        let one_node = |dc: &str| usize::from(dc == "dc1");
        let simple = |rf| {
            replication(&[
                ("class", "org.apache.cassandra.locator.SimpleStrategy"),
                ("replication_factor", rf),
            ])
        };
        assert!(replication_warnings("ks", &simple("1"), one_node, 1).is_empty());
        assert_eq!(
            replication_warnings("ks", &simple("3"), one_node, 1),
            ["Your replication factor 3 for keyspace ks is higher than the number of nodes 1"]
        );
        let nts = replication(&[
            (
                "class",
                "org.apache.cassandra.locator.NetworkTopologyStrategy",
            ),
            ("dc1", "1"),
            ("dc2", "2/1"),
        ]);
        assert_eq!(
            replication_warnings("ks", &nts, one_node, 1),
            ["Your replication factor 2 for keyspace ks is higher than the number of nodes 0 for datacenter dc2"]
        );
    }
}
