//! The selection of a SELECT compiled against its table: the result columns PREPARE reports.

use cql_syntax::ast::Select;
use schema::{Schema, TableMetadata};
use types::CqlType;

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
