//! The selection of a SELECT compiled against its table: the result columns PREPARE reports,
//! and what SELECT DISTINCT may select and restrict.

use cql_syntax::ast::{Operator, Relation, RelationValue, Select};
use schema::{ColumnKind, Schema, TableMetadata};
use types::CqlType;

use crate::bind::column;
use crate::interface::ColumnSpec;
use crate::QueryError;

use super::selector::{self, Selection, SelectionMarker};

/// Result columns and selection bind markers of a SELECT, for PREPARE.
pub(crate) struct SelectionInfo {
    pub columns: Vec<ColumnSpec>,
    pub markers: Vec<SelectionMarker>,
}

pub(super) fn compile_selection(
    schema: &Schema,
    table: &TableMetadata,
    select: &Select,
) -> Result<Selection, QueryError> {
    let types = schema.keyspace(&table.keyspace).map(|k| &k.types);
    selector::compile(table, types, select)
}

pub(crate) fn analyze_selection(
    schema: &Schema,
    table: &TableMetadata,
    select: &Select,
) -> Result<SelectionInfo, QueryError> {
    if select.json {
        return Ok(SelectionInfo {
            columns: vec![ColumnSpec {
                keyspace: table.keyspace.clone(),
                table: table.name.clone(),
                name: "[json]".to_string(),
                ty: CqlType::Text,
            }],
            markers: Vec::new(),
        });
    }
    let selection = compile_selection(schema, table, select)?;
    Ok(SelectionInfo {
        columns: selection.specs.to_vec(),
        markers: selection.markers,
    })
}

/// Cassandra's checks of a SELECT DISTINCT (`validateDistinctSelection`), at PREPARE once the
/// WHERE clause passed `check_where`: no PER PARTITION LIMIT, restrictions and selected
/// columns on the partition key and static columns only, and, when the read is not of given
/// partitions (a key range), every partition key column selected.
pub(crate) fn check_distinct(
    schema: &Schema,
    table: &TableMetadata,
    select: &Select,
) -> Result<(), QueryError> {
    if !select.distinct {
        return Ok(());
    }
    if select.per_partition_limit.is_some() {
        return Err(QueryError::Invalid(
            "PER PARTITION LIMIT is not allowed with SELECT DISTINCT queries".to_string(),
        ));
    }
    let mut keys_given = vec![false; table.partition_key_count];
    for relation in &select.where_clause {
        let names = match relation {
            Relation::Simple { column: c, .. } | Relation::Element { column: c, .. } => {
                std::slice::from_ref(c)
            }
            Relation::MultiColumn { columns, .. } => columns.as_slice(),
            _ => continue,
        };
        for name in names {
            let col = column(table, name)?;
            if !matches!(col.kind, ColumnKind::PartitionKey | ColumnKind::Static) {
                return Err(QueryError::Invalid(DISTINCT_RESTRICTION.to_string()));
            }
        }
        if let Relation::Simple {
            column: c,
            op: Operator::Eq | Operator::In,
            ..
        } = relation
        {
            let col = column(table, c)?;
            if col.kind == ColumnKind::PartitionKey {
                keys_given[col.position.max(0) as usize] = true;
            }
        }
    }
    let selection = compile_selection(schema, table, select)?;
    let mut read = selection.columns_read();
    // Ordering rows of several partitions after reading them needs the ORDER BY columns in
    // the selection: Cassandra adds them, so DISTINCT refuses them too.
    let key_in = select.where_clause.iter().any(|r| {
        matches!(r, Relation::Simple { column: c, op: Operator::In, value }
            if column(table, c).is_ok_and(|col| col.kind == ColumnKind::PartitionKey)
                && !matches!(value, RelationValue::List(items) if items.len() <= 1))
    });
    if key_in {
        for ordering in &select.order_by {
            if let Ok(col) = column(table, &ordering.column) {
                read.extend(table.column_index(&col.name));
            }
        }
    }
    for &i in &read {
        let col = &table.columns[i];
        if !matches!(col.kind, ColumnKind::PartitionKey | ColumnKind::Static) {
            return Err(QueryError::Invalid(format!(
                "SELECT DISTINCT queries must only request partition key columns and/or static columns (not {})",
                col.name
            )));
        }
    }
    if keys_given.iter().all(|given| *given) {
        return Ok(());
    }
    if let Some(missing) = (0..table.partition_key_count).find(|i| !read.contains(i)) {
        return Err(QueryError::Invalid(format!(
            "SELECT DISTINCT queries must request all the partition key columns (missing {})",
            table.columns[missing].name
        )));
    }
    Ok(())
}

pub(super) const DISTINCT_RESTRICTION: &str =
    "SELECT DISTINCT with WHERE clause only supports restriction by partition key and/or static columns.";
