//! SELECT: restrictions become partition reads or a token-range scan plus a clustering slice;
//! every restriction the read does not enforce exactly (`enforced_by_read`) is also applied as
//! a filter to the rows read, so for those the storage reads only need to return a superset of
//! the answer.

use std::cmp::Ordering;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use coordinator::{ReadCommand, ReadResponse};
use cql_syntax::ast::{
    Identifier, Operator, Order, Relation, RelationValue, Select, SelectorExpr, Term,
};
use mutation::{Cell, CellValue, ColumnData, DeletionTime, RangeTombstone, Row};
use schema::{ClusteringOrder, ColumnKind, Schema, TableMetadata};
use storage::{ClusteringSlice, PartitionData, PartitionKey, ScanStart};
use types::CqlType;
use uuid::Uuid;

use crate::bind::{column, resolve_table, Bound};
use crate::eval::{evaluate, TermValue};
use crate::limits::{InSelectGuardrails, KeyKind, Pacer, RequestStart};
use crate::processor::{ColumnSpec, QueryOptions, QueryProcessor, QueryResult, ResultSet};
use crate::slices::{ClusteringRange, TupleBound};
use crate::write::{clustering_key, partition_key, split_elements};
use crate::{system_tables, warnings, QueryError};

/// Page size used internally when the client asked for no paging (or for aggregates): bounds
/// the rows held per storage read, not the result.
const INTERNAL_PAGE_ROWS: usize = 5_000;

mod aggregates;
mod collection_functions;
mod floor;
pub(crate) mod functions;
mod masking;
mod math;
mod numbers;
mod operations;
mod selector;
pub(crate) mod term_functions;
mod vector_functions;

use selector::{GroupState, Selection, SelectionMarker};

/// Result columns and selection bind markers of a SELECT, for PREPARE.
pub(crate) struct SelectionInfo {
    pub columns: Vec<ColumnSpec>,
    pub markers: Vec<SelectionMarker>,
}

fn compile_selection(
    schema: &Schema,
    table: &TableMetadata,
    select: &Select,
) -> Result<Selection, QueryError> {
    let types = schema.keyspace(&table.keyspace).map(|k| &k.types);
    selector::compile(table, types, select)
}

/// A prepared SELECT's compiled (unbound) selection, kept with the schema version it was
/// compiled against, so an EXECUTE shares it instead of compiling it again (and copies it only
/// to bind terms into it). A statement's selection depends only on its text, its keyspace and
/// the schema, and every schema change gets a new version.
#[derive(Debug, Default)]
pub(crate) struct SelectionCache {
    compiled: Mutex<Option<(Uuid, Arc<Selection>)>>,
}

impl SelectionCache {
    fn get_or_compile(
        &self,
        schema: &Schema,
        table: &TableMetadata,
        select: &Select,
    ) -> Result<Arc<Selection>, QueryError> {
        let mut compiled = self
            .compiled
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((version, selection)) = compiled.as_ref() {
            if *version == schema.version {
                return Ok(selection.clone());
            }
        }
        let selection = Arc::new(compile_selection(schema, table, select)?);
        *compiled = Some((schema.version, selection.clone()));
        Ok(selection)
    }
}

/// A SELECT to execute and, when it was prepared, its statement's compiled selection.
#[derive(Clone, Copy)]
pub(crate) struct SelectStatement<'a> {
    pub select: &'a Select,
    pub cache: Option<&'a SelectionCache>,
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

/// A materialised row: every column's value, with write times and TTLs of simple cells.
#[derive(Debug, Clone, Default)]
struct RowValues {
    values: Vec<Option<Vec<u8>>>,
    /// Per column; empty unless the selection reads write times or TTLs of single-cell
    /// columns (`Selection::needs_column_times`).
    writetimes: Vec<Option<i64>>,
    ttls: Vec<Option<i32>>,
    /// For multi-cell columns, each live cell in the order of the column's value; filled only
    /// when the selection asks for write times or TTLs of multi-cell columns (else empty).
    cells: Vec<Option<Vec<CellTime>>>,
    token: i64,
}

/// One live cell of a multi-cell column: its path (map key, set element, list timeuuid or
/// UDT field number), write time and remaining TTL.
#[derive(Debug, Clone)]
struct CellTime {
    path: Vec<u8>,
    timestamp: i64,
    ttl: Option<i32>,
}

/// One WHERE relation as a row predicate.
enum Filter {
    Compare {
        column: usize,
        op: Operator,
        values: Vec<Vec<u8>>,
    },
    MultiColumn {
        columns: Vec<usize>,
        op: Operator,
        tuples: Vec<Vec<Vec<u8>>>,
    },
    Token {
        op: Operator,
        value: i64,
    },
    IsNotNull(usize),
    /// `m[key] = value` on a non-frozen map column.
    MapEntry {
        column: usize,
        key: Vec<u8>,
        value: Vec<u8>,
    },
}

struct Plan {
    table: Arc<TableMetadata>,
    selection: Arc<Selection>,
    /// Every restriction, as written (the tombstone warning prints them).
    filters: Vec<Filter>,
    /// The filters the read itself enforces exactly, as a mask over `filters`
    /// (`enforced_by_read`): rows read from storage are checked against the others only.
    /// Virtual tables check all.
    enforced: u64,
    /// Whether a row needs its partition key values: the selection or a row filter reads
    /// them, or rows are grouped (otherwise each row would copy them for nothing).
    needs_partition_key: bool,
    /// Partitions to read, when the partition key is fully restricted by = or IN.
    partitions: Option<PartitionList>,
    slice: ClusteringSlice,
    /// When the clustering restrictions select several ranges of keys (an IN on a clustering
    /// column, a slice over columns of mixed order: `clustering_read`): the ranges, in
    /// clustering order. Each partition is then read as one slice per range (in read order),
    /// as Cassandra reads its `Slices`, not from the lowest key to the highest: rows and
    /// tombstones between the ranges are not read. `slice` then only gives the direction.
    slices: Option<Vec<ClusteringRange>>,
    limit: Option<usize>,
    per_partition_limit: Option<usize>,
    distinct: bool,
    /// An aggregate selection without GROUP BY: one result row over every row read.
    aggregate: bool,
    /// GROUP BY: how many clustering columns (after the whole partition key) make a group.
    group_by: Option<usize>,
    token_start: Option<i64>,
    token_end: Option<i64>,
    /// Whether a partition with only a live static row shows up as a row (no clustering
    /// restriction), as Cassandra does.
    static_only_rows: bool,
    /// ORDER BY with an IN on the partition key: each partition is read in the asked order,
    /// then the rows of all of them are sorted on these columns (index, descending), as
    /// Cassandra's post-query ordering does. The selection carries them as hidden outputs
    /// after its visible ones.
    post_ordering: Option<Vec<(usize, bool)>>,
    /// Some partition key column is restricted (`=`, `IN`, or filtering on part of it) or the
    /// token is: Cassandra's `hasPartitionKeyRestrictions`, which decides its warning for
    /// aggregates and GROUP BY.
    partition_key_restricted: bool,
    /// An IN of several values on the partition key.
    partition_key_in: bool,
    /// The read fetches the table's static columns (Cassandra's column filter: `*`, a
    /// selection naming one, or naming key columns only).
    fetches_static: bool,
    /// `=` or IN restricts every clustering column (and no slice any).
    clustering_names: bool,
}

impl Plan {
    /// Whether Cassandra knows the read selects nothing before it reads (`ReadQuery.empty`):
    /// no partition (an empty IN), or no clustering key (an empty IN, bounds that cross),
    /// except when `=`/IN restrict every clustering column (Cassandra's names filter) and a
    /// static column is fetched: it then still reads the partitions for their static rows.
    fn selects_nothing(&self) -> bool {
        self.partitions.as_ref().is_some_and(|keys| keys.len() == 0)
            || (self.slices.as_ref().is_some_and(Vec::is_empty)
                && !(self.clustering_names && self.fetches_static))
    }
}

/// Cassandra's refusal to page a query whose rows must be sorted after they are read.
const POST_ORDERING_PAGING: &str = "Cannot page queries with both ORDER BY and a IN restriction on the partition key; you must either remove the ORDER BY or the IN and sort client side, or disable paging for this query";

fn op_matches(op: &Operator, ord: Ordering) -> bool {
    match op {
        Operator::Eq | Operator::In => ord == Ordering::Equal,
        Operator::Lt => ord == Ordering::Less,
        Operator::Lte => ord != Ordering::Greater,
        Operator::Gt => ord == Ordering::Greater,
        Operator::Gte => ord != Ordering::Less,
        Operator::Neq => ord != Ordering::Equal,
        _ => false,
    }
}

/// Whether a term is a call of `token(...)`.
pub(crate) fn is_token_call(t: &Term) -> bool {
    matches!(t, Term::FunctionCall { keyspace, name, .. }
        if keyspace.as_ref().is_none_or(|k| k.as_str() == "system")
            && name.as_str().eq_ignore_ascii_case("token"))
}

/// `token(v1, ...)` on the right of a token relation (`token(k) > token(1)`): the token of the
/// partition key those values make; `None` when the term is not a `token()` call.
fn token_of_values(
    table: &TableMetadata,
    t: &Term,
    values: &[Bound],
) -> Result<Option<i64>, QueryError> {
    let Term::FunctionCall { args, .. } = t else {
        return Ok(None);
    };
    if !is_token_call(t) {
        return Ok(None);
    }
    let key_columns = table.partition_key();
    if args.len() != key_columns.len() {
        return Err(QueryError::Invalid(format!(
            "Invalid number of arguments in call to function system.token: {} required but {} provided",
            key_columns.len(),
            args.len()
        )));
    }
    let mut parts = Vec::with_capacity(args.len());
    for (i, (arg, col)) in args.iter().zip(key_columns).enumerate() {
        parts.push(evaluate_value(
            arg,
            &col.ty,
            &format!("arg{i}(system.token)"),
            values,
        )?);
    }
    let key = match &parts[..] {
        [one] => one.clone(),
        _ => {
            let slices: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
            partitioner::compose_partition_key(&slices)
        }
    };
    Ok(Some(partitioner::murmur3_token(&key)))
}

fn evaluate_value(
    t: &Term,
    ty: &CqlType,
    name: &str,
    values: &[Bound],
) -> Result<Vec<u8>, QueryError> {
    evaluate_value_or(t, ty, name, values, false)
}

/// Cassandra's refusal of a null in a restriction, and, on a non-key column, its other words.
fn invalid_null(name: &str) -> QueryError {
    QueryError::Invalid(format!("Invalid null value in condition for column {name}"))
}

fn unsupported_null(name: &str) -> QueryError {
    QueryError::Invalid(format!("Unsupported null value for column {name}"))
}

/// `evaluate_value`, refusing a null or unset value in Cassandra's words for a key column or,
/// if `non_key`, for a regular or static one.
fn evaluate_value_or(
    t: &Term,
    ty: &CqlType,
    name: &str,
    values: &[Bound],
    non_key: bool,
) -> Result<Vec<u8>, QueryError> {
    match evaluate(t, ty, name, values)? {
        TermValue::Value(b) => Ok(b),
        TermValue::Null if non_key => Err(unsupported_null(name)),
        TermValue::Null => Err(invalid_null(name)),
        TermValue::Unset => Err(QueryError::Invalid(format!(
            "{} unset value for column {name}",
            if non_key { "Unsupported" } else { "Invalid" }
        ))),
    }
}

fn in_values(
    value: &RelationValue,
    ty: &CqlType,
    name: &str,
    values: &[Bound],
) -> Result<Vec<Vec<u8>>, QueryError> {
    in_values_or(value, ty, name, values, false)
}

/// `in_values`, refusing a null or unset value as `evaluate_value_or` does.
fn in_values_or(
    value: &RelationValue,
    ty: &CqlType,
    name: &str,
    values: &[Bound],
    non_key: bool,
) -> Result<Vec<Vec<u8>>, QueryError> {
    Ok(match value {
        RelationValue::Single(t) => vec![evaluate_value_or(t, ty, name, values, non_key)?],
        RelationValue::List(items) => {
            let mut out = Vec::with_capacity(items.len());
            for t in items {
                out.push(evaluate_value_or(t, ty, name, values, non_key)?);
            }
            out
        }
        RelationValue::Marker(m) => {
            let list = CqlType::List(Box::new(ty.clone()));
            let marker = Term::BindMarker(m.clone());
            let bytes = evaluate_value_or(&marker, &list, name, values, non_key)?;
            split_elements(&bytes, 1)?
                .into_iter()
                .map(|g| g[0].to_vec())
                .collect()
        }
        RelationValue::Between(..) => {
            return Err(QueryError::Invalid(format!(
                "BETWEEN is not supported for column {name}"
            )))
        }
    })
}

/// What Cassandra refuses in a WHERE clause whatever the values bound (and ALLOW FILTERING)
/// say, checked at PREPARE as Cassandra does (`bind::analyze`, for every SELECT prepared or
/// queried): each relation's own validity, its merge with those before, DISTINCT's columns.
pub(crate) fn check_where(table: &TableMetadata, select: &Select) -> Result<(), QueryError> {
    let mut columns = vec![ColumnRestrictions::default(); table.columns.len()];
    let mut token = (false, false);
    let mut merging = true;
    for relation in &select.where_clause {
        check_relation(table, relation)?;
        if merging && select.where_clause.len() > 1 {
            merging = merge_relation(table, &mut columns, &mut token, relation)?;
        }
    }
    Ok(())
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

/// Cassandra's refusal of `!=`, quoting the relation.
fn unsupported_neq(column: &str, value: &RelationValue) -> QueryError {
    let value = match value {
        RelationValue::Single(t) => t.to_string(),
        _ => "?".to_string(),
    };
    QueryError::Invalid(format!("Unsupported \"!=\" relation: {column} != {value}"))
}

const DISTINCT_RESTRICTION: &str =
    "SELECT DISTINCT with WHERE clause only supports restriction by partition key and/or static columns.";

/// One relation's own validity, before it is merged with the others: a multi-column
/// relation's columns (`check_multi_column`), a token's arguments, and `!=`, which Cassandra
/// refuses on every column.
fn check_relation(table: &TableMetadata, relation: &Relation) -> Result<(), QueryError> {
    check_not_equal(table, relation)?;
    match relation {
        Relation::MultiColumn { columns, op, value } => {
            check_multi_column(table, columns, op, value)
        }
        Relation::Simple { column: c, op, .. } | Relation::Element { column: c, op, .. }
            if is_slice(op) && column(table, c)?.ty.references_duration() =>
        {
            Err(duration_slice_refused(&column(table, c)?.ty))
        }
        Relation::Simple { column: c, op, .. } => {
            // A whole non-frozen collection is not compared, only searched.
            let col = column(table, c)?;
            let searched = matches!(op, Operator::Contains | Operator::ContainsKey);
            if col.ty.is_multi_cell() && col.ty.is_collection() && !searched {
                return Err(QueryError::Invalid(format!(
                    "Collection column '{}' ({}) cannot be restricted by a '{}' relation",
                    col.name,
                    col.ty,
                    crate::write::op_name(op)
                )));
            }
            Ok(())
        }
        Relation::Token { columns, .. } => check_token_columns(table, columns),
        _ => Ok(()),
    }
}

/// Cassandra's checks of `token(...)`'s arguments: the partition key's columns, each once,
/// in order (also for UPDATE and DELETE, which then refuse the token function itself).
pub(crate) fn check_token_columns(
    table: &TableMetadata,
    columns: &[Identifier],
) -> Result<(), QueryError> {
    let mut given = Vec::with_capacity(columns.len());
    for c in columns {
        given.push(column(table, c)?.name.as_str());
    }
    let pk: Vec<&str> = table
        .partition_key()
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    let message = if !pk.iter().all(|p| given.contains(p)) {
        "The token() function must be applied to all partition key components or none of them"
            .to_string()
    } else if given.iter().any(|g| !pk.contains(g)) {
        "The token() function must contains only partition key components".to_string()
    } else if given.len() != pk.len() {
        "The token() function contains duplicate partition key components".to_string()
    } else if given != pk {
        format!(
            "The token function arguments must be in the partition key order: {}",
            pk.join(", ")
        )
    } else {
        return Ok(());
    };
    Err(QueryError::Invalid(message))
}

/// Cassandra's refusal of `!=` in any relation (`Relation.toRestriction`), quoting it.
pub(crate) fn check_not_equal(
    table: &TableMetadata,
    relation: &Relation,
) -> Result<(), QueryError> {
    match relation {
        Relation::MultiColumn {
            columns,
            op: op @ Operator::Neq,
            value,
        } => Err(QueryError::Invalid(format!(
            "Unsupported \"!=\" relation: {}",
            multi_column_text(columns, op, value)
        ))),
        Relation::Token {
            columns,
            op: Operator::Neq,
            value,
        } => {
            let names: Vec<String> = columns.iter().map(Identifier::to_cql).collect();
            Err(unsupported_neq(
                &format!("token({})", names.join(", ")),
                value,
            ))
        }
        Relation::Simple {
            column: c,
            op: Operator::Neq,
            value,
        } => Err(unsupported_neq(&column(table, c)?.name, value)),
        _ => Ok(()),
    }
}

fn is_slice(op: &Operator) -> bool {
    matches!(
        op,
        Operator::Lt | Operator::Lte | Operator::Gt | Operator::Gte
    )
}

/// Cassandra's refusal of a slice on values holding durations, which have no order
/// (`SingleColumnRelation.newSliceRestriction`).
fn duration_slice_refused(ty: &CqlType) -> QueryError {
    let holder = match ty.unfrozen() {
        CqlType::List(_) | CqlType::Set(_) | CqlType::Map(..) => "collections containing durations",
        CqlType::Tuple(_) => "tuples containing durations",
        CqlType::Udt(_) => "UDTs containing durations",
        _ => "duration columns",
    };
    QueryError::Invalid(format!("Slice restrictions are not supported on {holder}"))
}

/// One column's restrictions so far, for `merge_relation`.
#[derive(Clone, Copy, Default)]
struct ColumnRestrictions {
    eq: bool,
    in_list: bool,
    /// Slice bounds by a single-column relation; a multi-column one sets `tuple_slice`.
    start: bool,
    end: bool,
    tuple_start: bool,
    tuple_end: bool,
    /// The column is the first of a multi-column slice.
    tuple_first: bool,
}

/// A multi-column relation as Cassandra prints it in its messages: `(d, c) > (0, 0)`.
fn multi_column_text(columns: &[Identifier], op: &Operator, value: &RelationValue) -> String {
    let names: Vec<String> = columns.iter().map(Identifier::to_cql).collect();
    let value = match value {
        RelationValue::Single(t) => t.to_string(),
        RelationValue::List(items) => {
            let items: Vec<String> = items.iter().map(Term::to_string).collect();
            format!("({})", items.join(", "))
        }
        RelationValue::Marker(_) => "?".to_string(),
        RelationValue::Between(low, high) => format!("{low} AND {high}"),
    };
    format!(
        "({}) {} {value}",
        names.join(", "),
        crate::write::op_name(op)
    )
}

/// Cassandra's checks of a multi-column relation's columns, in its order for each column: a
/// clustering column, named once, each the one after the previous in the PRIMARY KEY.
fn check_multi_column(
    table: &TableMetadata,
    columns: &[Identifier],
    op: &Operator,
    value: &RelationValue,
) -> Result<(), QueryError> {
    let mut resolved = Vec::with_capacity(columns.len());
    for c in columns {
        resolved.push(column(table, c)?);
    }
    let mut previous: Option<i32> = None;
    for (i, col) in resolved.iter().enumerate() {
        if col.kind != ColumnKind::Clustering {
            return Err(QueryError::Invalid(format!(
                "Multi-column relations can only be applied to clustering columns but was applied to: {}",
                col.name
            )));
        }
        if resolved[i + 1..].iter().any(|other| other.name == col.name) {
            return Err(QueryError::Invalid(format!(
                "Column \"{}\" appeared twice in a relation: {}",
                col.name,
                multi_column_text(columns, op, value)
            )));
        }
        if previous.is_some_and(|p| col.position != p + 1) {
            return Err(QueryError::Invalid(format!(
                "Clustering columns must appear in the PRIMARY KEY order in multi-column relations: {}",
                multi_column_text(columns, op, value)
            )));
        }
        previous = Some(col.position);
    }
    Ok(())
}

/// Adds one relation to the restrictions so far, refusing, as Cassandra does whatever ALLOW
/// FILTERING says, a column restricted twice in ways that do not combine: anything after an
/// `=` or an `IN`, an `=` or `IN` after a slice, or a second bound on the same side of a slice
/// (and of the token, whose start and end bounds `token` tracks). `false` at a relation it does
/// not model (`!=`, `LIKE`, a map element...): the relations after it are not merged (the plan
/// gives their errors, if any).
fn merge_relation(
    table: &TableMetadata,
    columns: &mut [ColumnRestrictions],
    token: &mut (bool, bool),
    relation: &Relation,
) -> Result<bool, QueryError> {
    let invalid = |message: String| Err(QueryError::Invalid(message));
    let (names, op, tuple) = match relation {
        Relation::Simple { column: c, op, .. } => (std::slice::from_ref(c), op, false),
        Relation::MultiColumn {
            columns: cs, op, ..
        } => (cs.as_slice(), op, true),
        Relation::Token { op, .. } => {
            let (start, end) = match op {
                Operator::Gt | Operator::Gte => (true, false),
                Operator::Lt | Operator::Lte => (false, true),
                _ => return Ok(false),
            };
            if (start && token.0) || (end && token.1) {
                let names: Vec<&str> = table
                    .partition_key()
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect();
                return invalid(format!(
                    "More than one restriction was found for the {} bound on {}",
                    if start { "start" } else { "end" },
                    names.join(", ")
                ));
            }
            token.0 |= start;
            token.1 |= end;
            return Ok(true);
        }
        Relation::IsNotNull(_) => return Ok(true),
        Relation::Element { .. } | Relation::CustomIndex { .. } => return Ok(false),
    };
    let (eq, in_list, start, end) = match op {
        Operator::Eq => (true, false, false, false),
        Operator::In => (false, true, false, false),
        Operator::Gt | Operator::Gte => (false, false, true, false),
        Operator::Lt | Operator::Lte => (false, false, false, true),
        Operator::Contains | Operator::ContainsKey => return Ok(true),
        _ => return Ok(false),
    };
    for (position, name) in names.iter().enumerate() {
        let col = column(table, name)?;
        let index = table.column_index(&col.name).unwrap_or(0);
        let before = columns[index];
        if before.eq {
            return invalid(format!(
                "{} cannot be restricted by more than one relation if it includes an Equal",
                col.name
            ));
        }
        if before.in_list {
            return invalid(format!(
                "{} cannot be restricted by more than one relation if it includes a IN",
                col.name
            ));
        }
        let in_tuple_slice = before.tuple_start || before.tuple_end;
        let sliced = before.start || before.end || in_tuple_slice;
        if sliced && (eq || in_list) {
            return invalid(format!(
                "Column \"{}\" cannot be restricted by both an equality and an inequality relation",
                col.name
            ));
        }
        let side = if start { "start" } else { "end" };
        if !tuple && (start || end) && in_tuple_slice && !before.tuple_first {
            return invalid(format!(
                "Column \"{}\" cannot be restricted by two inequalities not starting with the same column",
                col.name
            ));
        }
        // Two bounds on one side, one of them single-column: named by that column.
        let single = (start && before.start) || (end && before.end);
        let by_tuple = (start && before.tuple_start) || (end && before.tuple_end);
        if single || (!tuple && by_tuple) {
            return invalid(format!(
                "More than one restriction was found for the {side} bound on {}",
                col.name
            ));
        }
        if by_tuple {
            // Two tuple bounds on one side: named by the columns they share (Cassandra
            // lists them from a hash set, joined by " ,"; here in PRIMARY KEY order).
            let mut shared = Vec::new();
            for n in &names[position..] {
                let c = column(table, n)?;
                let r = columns[table.column_index(&c.name).unwrap_or(0)];
                if (start && r.tuple_start) || (end && r.tuple_end) {
                    shared.push(c.name.as_str());
                }
            }
            return invalid(format!(
                "More than one restriction was found for the {side} bound on {}",
                shared.join(" ,")
            ));
        }
        let now = &mut columns[index];
        now.eq = eq;
        now.in_list = in_list;
        if tuple {
            now.tuple_start |= start;
            now.tuple_end |= end;
            now.tuple_first |= (start || end) && position == 0;
        } else {
            now.start |= start;
            now.end |= end;
        }
    }
    Ok(true)
}

/// Why Cassandra refuses, without ALLOW FILTERING, the restrictions on clustering columns that
/// a read cannot apply as one slice; its message takes precedence over the plain request for
/// ALLOW FILTERING. As Cassandra's `ClusteringColumnRestrictions`, restrictions are taken in
/// the order written: one on a column after a slice's column is refused, as is a slice before
/// a restricted column; then the first restricted column after an unrestricted one is named.
fn clustering_restriction_error(
    table: &TableMetadata,
    select: &Select,
) -> Result<Option<String>, QueryError> {
    let clustering = table.clustering();
    let name = |position: usize| clustering[position].name.as_str();
    // Per clustering column restricted so far: the first column of its restriction, and
    // whether that restriction is a slice.
    let mut restrictions: Vec<Option<(usize, bool)>> = vec![None; clustering.len()];
    for relation in &select.where_clause {
        let (positions, op) = match relation {
            Relation::Simple { column: c, op, .. } => {
                let col = column(table, c)?;
                if col.kind != ColumnKind::Clustering {
                    continue;
                }
                (vec![col.position as usize], op)
            }
            Relation::MultiColumn { columns, op, .. } => {
                let mut positions = Vec::with_capacity(columns.len());
                for c in columns {
                    positions.push(column(table, c)?.position as usize);
                }
                (positions, op)
            }
            _ => continue,
        };
        let Some(&first) = positions.first() else {
            continue;
        };
        let slice = matches!(
            op,
            Operator::Gt | Operator::Gte | Operator::Lt | Operator::Lte
        );
        // The restriction on the last restricted column (Cassandra's `lastRestriction`).
        if let Some((last_first, last_slice)) = restrictions.iter().rev().find_map(|r| *r) {
            if last_slice && first > last_first {
                return Ok(Some(format!(
                    "Clustering column \"{}\" cannot be restricted (preceding column \"{}\" is restricted by a non-EQ relation)",
                    name(first),
                    name(last_first)
                )));
            }
            if slice && first < last_first {
                let next = (first + 1..clustering.len())
                    .find(|p| restrictions[*p].is_some())
                    .unwrap_or(first);
                return Ok(Some(format!(
                    "PRIMARY KEY column \"{}\" cannot be restricted (preceding column \"{}\" is restricted by a non-EQ relation)",
                    name(next),
                    name(first)
                )));
            }
        }
        for p in positions {
            let merged_slice = slice || restrictions[p].is_some_and(|(_, s)| s);
            restrictions[p] = Some((first, merged_slice));
        }
    }
    let gap = restrictions
        .iter()
        .enumerate()
        .filter(|(_, r)| r.is_some())
        .enumerate()
        .find(|(i, (position, _))| i != position);
    Ok(gap.map(|(i, (position, _))| {
        format!(
            "PRIMARY KEY column \"{}\" cannot be restricted as preceding column \"{}\" is not restricted",
            name(position),
            name(i)
        )
    }))
}

/// The operators of the multi-column relations a read could not apply as its slice, only as
/// filters: those with a clustering column before their first that nothing restricts, or that
/// a slice restricts (Cassandra's `ClusteringColumnRestrictions`).
fn multi_column_filters(
    table: &TableMetadata,
    select: &Select,
) -> Result<Vec<Operator>, QueryError> {
    let clustering_position = |name: &Identifier| -> Result<Option<usize>, QueryError> {
        let col = column(table, name)?;
        Ok((col.kind == ColumnKind::Clustering).then_some(col.position as usize))
    };
    let is_slice = |op: &Operator| {
        matches!(
            op,
            Operator::Gt | Operator::Gte | Operator::Lt | Operator::Lte
        )
    };
    // Per clustering column: restricted at all, and by a slice.
    let mut restricted = vec![false; table.clustering_count];
    let mut sliced = vec![false; table.clustering_count];
    for relation in &select.where_clause {
        let (names, op) = match relation {
            Relation::Simple { column: c, op, .. } => (std::slice::from_ref(c), op),
            Relation::MultiColumn { columns, op, .. } => (columns.as_slice(), op),
            _ => continue,
        };
        for name in names {
            if let Some(p) = clustering_position(name)? {
                restricted[p] = true;
                sliced[p] |= is_slice(op);
            }
        }
    }
    let mut filters = Vec::new();
    for relation in &select.where_clause {
        let Relation::MultiColumn { columns, op, .. } = relation else {
            continue;
        };
        let Some(first) = columns.first() else {
            continue;
        };
        let Some(first) = clustering_position(first)? else {
            continue;
        };
        if (0..first).any(|p| !restricted[p] || sliced[p]) {
            filters.push(*op);
        }
    }
    Ok(filters)
}

/// The values of `filters[i]`, a key column's `=`, `IN` or slice (`Filter::Compare`).
fn restricted(filters: &[Filter], i: usize) -> &[Vec<u8>] {
    match &filters[i] {
        Filter::Compare { values, .. } => values,
        _ => &[],
    }
}

fn filtering_error() -> QueryError {
    QueryError::Invalid(
        "Cannot execute this query as it might involve data filtering and thus may have unpredictable performance. If you want to execute this query despite the performance unpredictability, use ALLOW FILTERING".to_string(),
    )
}

fn limit_value(
    t: &Option<Term>,
    name: &str,
    values: &[Bound],
) -> Result<Option<usize>, QueryError> {
    let Some(t) = t else { return Ok(None) };
    match evaluate(t, &CqlType::Int, name, values)? {
        TermValue::Value(b) if b.len() == 4 => {
            let v = i32::from_be_bytes([b[0], b[1], b[2], b[3]]);
            if v <= 0 {
                return Err(QueryError::Invalid(
                    "LIMIT must be strictly positive".to_string(),
                ));
            }
            Ok(Some(v as usize))
        }
        TermValue::Unset => Ok(None),
        _ => Err(QueryError::Invalid(
            "Invalid null value of limit".to_string(),
        )),
    }
}

/// The number of combinations of lists of these lengths, saturated (it is checked against a
/// guardrail before any combination is built).
fn product_len(lengths: impl Iterator<Item = usize>) -> u64 {
    lengths.fold(1u64, |product, len| product.saturating_mul(len as u64))
}

/// The partitions a SELECT names by `=`/`IN` restrictions on its whole partition key.
enum PartitionList {
    /// Keys made up front (one key of a one-column key: a point read).
    Keys(Vec<PartitionKey>),
    /// Every combination of each key column's values, made when it is read: a list of them all
    /// would take time and memory in the product of the IN lists' lengths before the first
    /// read (6,250,000 keys took 11 s of one shard), and the request's deadline is checked
    /// only between reads.
    Product(KeyProduct),
}

struct KeyProduct {
    /// Each key column's values, sorted in Cassandra's order and distinct, so the
    /// combinations (the last column turning fastest) come out in Cassandra's read order and
    /// distinct (a composite key holds each component with its length, so different
    /// combinations are different keys).
    columns: Vec<Vec<Vec<u8>>>,
    len: usize,
    /// `token()` relations beside the key (`op`, token): keys outside them are left out, as in
    /// Cassandra (rows are checked against them too).
    tokens: Vec<(Operator, i64)>,
}

impl PartitionList {
    /// The combinations of `columns` (each key column's values, in key order), with the
    /// `token()` restrictions in `filters`. Every key is checked as the read would check it
    /// (empty or over `MAX_PARTITION_KEY_BYTES`) before any is read.
    fn product(
        table: &TableMetadata,
        columns: &[&[Vec<u8>]],
        filters: &[Filter],
    ) -> Result<PartitionList, QueryError> {
        let mut sorted: Vec<Vec<Vec<u8>>> = Vec::with_capacity(columns.len());
        for (values, column) in columns.iter().zip(table.partition_key()) {
            let mut values: Vec<&Vec<u8>> = values.iter().collect();
            // Stable, then of values that compare equal (a decimal's 1.0 and 1) only the first
            // written is kept, as Cassandra reads them (in key order, each value once).
            values.sort_by(|a, b| types::compare(&column.ty, a, b));
            values.dedup_by(|later, earlier| types::compare(&column.ty, later, earlier).is_eq());
            sorted.push(values.into_iter().cloned().collect());
        }
        let len = usize::try_from(product_len(sorted.iter().map(Vec::len))).unwrap_or(usize::MAX);
        if len > 0 {
            // The shortest and the longest key: if both are valid (not empty, not too long),
            // all are.
            let shortest: Vec<Vec<u8>> = sorted
                .iter()
                .filter_map(|values| values.iter().min_by_key(|v| v.len()).cloned())
                .collect();
            let longest: Vec<Vec<u8>> = sorted
                .iter()
                .filter_map(|values| values.iter().max_by_key(|v| v.len()).cloned())
                .collect();
            partition_key(table, &shortest)?;
            partition_key(table, &longest)?;
        }
        let tokens = filters
            .iter()
            .filter_map(|f| match f {
                Filter::Token { op, value } => Some((*op, *value)),
                _ => None,
            })
            .collect();
        Ok(PartitionList::Product(KeyProduct {
            columns: sorted,
            len,
            tokens,
        }))
    }

    fn len(&self) -> usize {
        match self {
            PartitionList::Keys(keys) => keys.len(),
            PartitionList::Product(product) => product.len,
        }
    }

    /// Key `i` (below `len`) in read order.
    fn key(
        &self,
        table: &TableMetadata,
        i: usize,
    ) -> Result<std::borrow::Cow<'_, PartitionKey>, QueryError> {
        match self {
            PartitionList::Keys(keys) => Ok(std::borrow::Cow::Borrowed(&keys[i])),
            PartitionList::Product(product) => {
                let mut parts = vec![Vec::new(); product.columns.len()];
                let mut rest = i;
                for (part, values) in parts.iter_mut().zip(&product.columns).rev() {
                    *part = values[rest % values.len()].clone();
                    rest /= values.len();
                }
                partition_key(table, &parts).map(std::borrow::Cow::Owned)
            }
        }
    }

    /// Whether a key of the list is read: the `token()` restrictions beside the key admit it.
    fn admits(&self, key: &PartitionKey) -> bool {
        match self {
            PartitionList::Keys(_) => true,
            PartitionList::Product(product) => product
                .tokens
                .iter()
                .all(|(op, token)| op_matches(op, key.token.cmp(token))),
        }
    }

    /// Whether the key of these values (one per key column) is in the list.
    fn contains(&self, table: &TableMetadata, parts: &[Vec<u8>]) -> bool {
        match self {
            PartitionList::Keys(keys) => {
                partition_key(table, parts).is_ok_and(|key| keys.iter().any(|k| k.key == key.key))
            }
            PartitionList::Product(product) => {
                parts.len() == product.columns.len()
                    && parts
                        .iter()
                        .zip(&product.columns)
                        .all(|(part, values)| values.contains(part))
                    && partition_key(table, parts).is_ok_and(|key| self.admits(&key))
            }
        }
    }
}

fn build_plan(
    schema: &Schema,
    table: &Arc<TableMetadata>,
    select: &Select,
    values: &[Bound],
    cache: Option<&SelectionCache>,
    guardrails: &InSelectGuardrails,
    warnings: &mut Vec<String>,
) -> Result<Plan, QueryError> {
    let mut selection = match cache {
        Some(cache) => cache.get_or_compile(schema, table, select)?,
        None => Arc::new(compile_selection(schema, table, select)?),
    };
    // A prepared statement's selection is shared; it is copied only to bind terms into it.
    if selection.needs_binding() {
        Arc::make_mut(&mut selection).bind(values)?;
    }
    // `bind::analyze` ran `check_where` on the WHERE clause: at PREPARE for a prepared
    // statement (and ALTER and DROP TABLE forget prepared statements), else for this QUERY.
    let pk_count = table.partition_key_count;
    let ck_count = table.clustering_count;
    let mut filters = Vec::with_capacity(select.where_clause.len());
    // Restrictions on key columns, as indexes into `filters` (whose values they read through
    // `restricted`), not copies of their values.
    let mut pk_values: Vec<Option<usize>> = vec![None; pk_count];
    let mut ck_eq: Vec<Option<usize>> = vec![None; ck_count];
    let mut ck_slices: Vec<(usize, Operator, usize)> = Vec::new();
    // Multi-column relations on clustering columns: (first column's position, operator,
    // index into `filters`).
    let mut ck_multi: Vec<(usize, Operator, usize)> = Vec::new();
    // Filters (by index) of an `IN ?` on clustering columns: an IN whatever its bound values,
    // as Cassandra decides at PREPARE (`IN (x)` is an `=`).
    let mut in_markers: Vec<usize> = Vec::new();
    let mut needs_filtering = false;
    let mut token_start = None;
    let mut token_end = None;
    let mut has_token = false;
    let mut has_clustering_restriction = false;
    // An IN of more than one value (or a marker) on the partition key; `IN (x)` is an `=`.
    let mut partition_key_in = false;

    for rel in &select.where_clause {
        match rel {
            Relation::Simple {
                column: c,
                op,
                value,
            } => {
                let col = column(table, c)?;
                let idx = table.column_index(&col.name).unwrap_or(0);
                match op {
                    Operator::Contains | Operator::ContainsKey => {
                        let elem = match (op, col.ty.unfrozen()) {
                            (Operator::ContainsKey, CqlType::Map(k, _)) => (**k).clone(),
                            (Operator::Contains, CqlType::Map(_, v)) => (**v).clone(),
                            (Operator::Contains, CqlType::List(e) | CqlType::Set(e)) => {
                                (**e).clone()
                            }
                            (Operator::ContainsKey, _) => {
                                return Err(QueryError::Invalid(format!(
                                    "Cannot use CONTAINS KEY on non-map column {}",
                                    col.name
                                )))
                            }
                            _ => {
                                return Err(QueryError::Invalid(format!(
                                    "Cannot use CONTAINS on non-collection column {}",
                                    col.name
                                )))
                            }
                        };
                        // Cassandra words a null or unset searched value as for a non-key
                        // column (collections never are key columns).
                        let v = in_values_or(value, &elem, &col.name, values, true)?;
                        needs_filtering = true;
                        filters.push(Filter::Compare {
                            column: idx,
                            op: *op,
                            values: v,
                        });
                        continue;
                    }
                    Operator::Like => {
                        // Cassandra's words: LIKE needs an index (SASI or SAI), which neither
                        // this table nor Helenus has.
                        let RelationValue::Single(term) = value else {
                            return Err(QueryError::Invalid(
                                "LIKE takes a single pattern".to_string(),
                            ));
                        };
                        return Err(QueryError::Invalid(format!(
                            "LIKE restriction is only supported on properly indexed columns. {} LIKE {term} is not valid.",
                            col.name
                        )));
                    }
                    Operator::NotIn
                    | Operator::NotContains
                    | Operator::NotContainsKey
                    | Operator::Between => {
                        return Err(QueryError::Invalid(format!(
                            "Operator {op:?} is not supported yet by Helenus"
                        )))
                    }
                    _ => {}
                }
                if matches!(op, Operator::Neq) {
                    return Err(unsupported_neq(&col.name, value));
                }
                let v = match (col.kind, op, value) {
                    (
                        ColumnKind::Clustering,
                        Operator::Gt | Operator::Gte | Operator::Lt | Operator::Lte,
                        RelationValue::Single(t),
                    ) => match evaluate(t, &col.ty, &col.name, values)? {
                        TermValue::Value(b) => vec![b],
                        // Cassandra bounds a clustering slice at null with the empty value,
                        // which sorts before every other: `c > null` is every row, `c < null`
                        // none. (On a descending column it reads the bound in stored order,
                        // which a row filter would not: refused there.)
                        TermValue::Null if col.order != ClusteringOrder::Desc => vec![Vec::new()],
                        TermValue::Null => return Err(invalid_null(&col.name)),
                        TermValue::Unset => {
                            return Err(QueryError::Invalid(format!(
                                "Invalid unset value for column {}",
                                col.name
                            )))
                        }
                    },
                    // Cassandra words a null compared with a non-key column so.
                    (ColumnKind::Regular | ColumnKind::Static, _, _) => {
                        in_values_or(value, &col.ty, &col.name, values, true)?
                    }
                    _ => in_values(value, &col.ty, &col.name, values)?,
                };
                match col.kind {
                    ColumnKind::PartitionKey if matches!(op, Operator::Eq | Operator::In) => {
                        // `IN (x)` is an `=`; `IN ()` is an IN, as in Cassandra.
                        if *op == Operator::In
                            && !matches!(value, RelationValue::List(items) if items.len() == 1)
                        {
                            partition_key_in = true;
                        }
                        pk_values[col.position as usize] = Some(filters.len());
                    }
                    // A slice on a partition key column filters a scan, as Cassandra does with
                    // ALLOW FILTERING (comparing values, not tokens).
                    ColumnKind::PartitionKey
                        if matches!(
                            op,
                            Operator::Gt | Operator::Gte | Operator::Lt | Operator::Lte
                        ) =>
                    {
                        needs_filtering = true;
                    }
                    ColumnKind::PartitionKey => {
                        return Err(QueryError::Invalid(
                            "Only EQ and IN relation are supported on the partition key (unless you use the token() function)".to_string(),
                        ));
                    }
                    ColumnKind::Clustering => {
                        has_clustering_restriction = true;
                        if matches!(op, Operator::Eq | Operator::In) {
                            if matches!(value, RelationValue::Marker(_)) {
                                in_markers.push(filters.len());
                            }
                            ck_eq[col.position as usize] = Some(filters.len());
                        } else if !v.is_empty() {
                            ck_slices.push((col.position as usize, *op, filters.len()));
                        }
                    }
                    _ => needs_filtering = true,
                }
                filters.push(Filter::Compare {
                    column: idx,
                    op: *op,
                    values: v,
                });
            }
            Relation::MultiColumn { columns, op, value } => {
                let mut idxs = Vec::new();
                let mut types = Vec::new();
                for (i, c) in columns.iter().enumerate() {
                    let col = column(table, c)?;
                    idxs.push(table.column_index(&col.name).unwrap_or(0));
                    types.push(col.ty.clone());
                    // `check_where` made them consecutive clustering columns.
                    if i == 0 && col.kind == ColumnKind::Clustering {
                        ck_multi.push((col.position as usize, *op, filters.len()));
                    }
                }
                has_clustering_restriction = true;
                let tuple = CqlType::Tuple(types.clone());
                let raw = in_values(value, &tuple, "tuple", values)?;
                let mut tuples = Vec::new();
                for t in raw {
                    let mut parts = Vec::new();
                    let mut rest = t.as_slice();
                    for &idx in &idxs {
                        if rest.len() < 4 {
                            return Err(QueryError::Invalid("Invalid tuple value".to_string()));
                        }
                        let len = i32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
                        rest = &rest[4..];
                        if len < 0 {
                            return Err(invalid_null(&table.columns[idx].name));
                        }
                        if rest.len() < len as usize {
                            return Err(QueryError::Invalid("Invalid tuple value".to_string()));
                        }
                        parts.push(rest[..len as usize].to_vec());
                        rest = &rest[len as usize..];
                    }
                    tuples.push(parts);
                }
                if *op == Operator::In && matches!(value, RelationValue::Marker(_)) {
                    in_markers.push(filters.len());
                }
                filters.push(Filter::MultiColumn {
                    columns: idxs,
                    op: *op,
                    tuples,
                });
            }
            // `check_where` refused every argument list but the partition key in order.
            Relation::Token { op, value, .. } => {
                let RelationValue::Single(t) = value else {
                    return Err(QueryError::Invalid(
                        "IN is not supported on token()".to_string(),
                    ));
                };
                let v = match token_of_values(table, t, values)? {
                    Some(v) => v,
                    None => {
                        let b = evaluate_value(t, &CqlType::Bigint, "partition key token", values)?;
                        let mut a = [0u8; 8];
                        if b.len() != 8 {
                            return Err(QueryError::Invalid("Invalid token value".to_string()));
                        }
                        a.copy_from_slice(&b);
                        i64::from_be_bytes(a)
                    }
                };
                has_token = true;
                match op {
                    Operator::Gt | Operator::Gte => {
                        token_start = Some(token_start.map_or(v, |s: i64| s.max(v)))
                    }
                    Operator::Lt | Operator::Lte => {
                        token_end = Some(token_end.map_or(v, |e: i64| e.min(v)))
                    }
                    Operator::Eq => {
                        token_start = Some(v);
                        token_end = Some(v);
                    }
                    _ => {
                        return Err(QueryError::Invalid(
                            "Unsupported operator on token()".to_string(),
                        ))
                    }
                }
                filters.push(Filter::Token { op: *op, value: v });
            }
            Relation::CustomIndex { .. } => {
                return Err(QueryError::Invalid(
                    "Custom index expressions are not supported yet by Helenus".to_string(),
                ))
            }
            Relation::Element {
                column: c,
                key,
                op,
                value,
            } => {
                let col = column(table, c)?;
                let (key_type, value_type) = match &col.ty {
                    CqlType::Map(k, v) => (&**k, &**v),
                    CqlType::Frozen(inner) if matches!(**inner, CqlType::Map(..)) => {
                        return Err(QueryError::Invalid(format!(
                            "Map-entry equality predicates on frozen map column {} are not supported",
                            col.name
                        )))
                    }
                    ty if matches!(ty.unfrozen(), CqlType::List(_)) => {
                        return Err(QueryError::Invalid(format!(
                            "Indexes on list entries ({}[index] = value) are not currently supported.",
                            col.name
                        )))
                    }
                    _ => {
                        return Err(QueryError::Invalid(
                            "Restrictions on elements of sets and user types are not supported yet by Helenus"
                                .to_string(),
                        ))
                    }
                };
                if *op != Operator::Eq {
                    return Err(QueryError::Invalid(
                        "Only EQ relations are supported on map entries".to_string(),
                    ));
                }
                let entry = |term: &Term, ty: &CqlType, part: &str| match evaluate(
                    term,
                    ty,
                    &format!("{part}({})", col.name),
                    values,
                )? {
                    TermValue::Value(b) => Ok(b),
                    _ => Err(QueryError::Invalid(format!(
                        "Unsupported null map {part} for column {}",
                        col.name
                    ))),
                };
                let key = entry(key, key_type, "key")?;
                let value = entry(value, value_type, "value")?;
                needs_filtering = true;
                filters.push(Filter::MapEntry {
                    column: table.column_index(&col.name).unwrap_or(0),
                    key,
                    value,
                });
            }
            Relation::IsNotNull(c) => {
                let col = column(table, c)?;
                filters.push(Filter::IsNotNull(
                    table.column_index(&col.name).unwrap_or(0),
                ));
            }
        }
    }

    let pk_restricted = pk_values.iter().filter(|v| v.is_some()).count();
    let single_key = match pk_values.as_slice() {
        [Some(i)] if !has_token => match restricted(&filters, *i) {
            [only] => Some(only),
            _ => None,
        },
        _ => None,
    };
    let partitions = if let Some(only) = single_key {
        // One partition of a one-column key (a point read): no combinations to make or sort.
        Some(PartitionList::Keys(vec![partition_key(
            table,
            std::slice::from_ref(only),
        )?]))
    } else if pk_restricted == pk_count {
        let columns: Vec<&[Vec<u8>]> = pk_values
            .iter()
            .flatten()
            .map(|i| restricted(&filters, *i))
            .collect();
        let has_in = pk_values.iter().flatten().any(|i| {
            matches!(
                filters[*i],
                Filter::Compare {
                    op: Operator::In,
                    ..
                }
            )
        });
        if has_in {
            guardrails.check_cartesian_product(
                KeyKind::Partition,
                product_len(columns.iter().map(|c| c.len())),
                warnings,
            )?;
        }
        let keys = PartitionList::product(table, &columns, &filters)?;
        if has_in {
            // The distinct keys (Cassandra counts them after a token() restriction beside
            // them left some out; Helenus leaves them out as it reads).
            guardrails.check_partition_keys(&table.name, keys.len() as u64, warnings)?;
        }
        Some(keys)
    } else {
        if pk_restricted > 0 {
            needs_filtering = true;
        }
        if has_clustering_restriction {
            needs_filtering = true;
        }
        None
    };

    // Clustering: a prefix of = restrictions, then at most one slice, reads a slice; anything
    // else is filtered (and needs ALLOW FILTERING). Per clustering column, whether `=` or IN
    // restricts it, by a single- or a multi-column relation, and to one value (`Some(true)`).
    let mut ck_eq_like: Vec<Option<bool>> = ck_eq
        .iter()
        .map(|v| v.map(|i| restricted(&filters, i).len() == 1 && !in_markers.contains(&i)))
        .collect();
    for (first, op, i) in &ck_multi {
        if let (
            Operator::Eq | Operator::In,
            Filter::MultiColumn {
                columns, tuples, ..
            },
        ) = (op, &filters[*i])
        {
            for slot in ck_eq_like.iter_mut().skip(*first).take(columns.len()) {
                *slot = Some(tuples.len() == 1 && !in_markers.contains(i));
            }
        }
    }
    let mut prefix_len = 0;
    let mut in_on_clustering = false;
    for v in ck_eq_like.iter() {
        match v {
            Some(true) if !in_on_clustering => prefix_len += 1,
            Some(_) => in_on_clustering = true,
            None => break,
        }
    }
    let restricted_ck = ck_eq_like.iter().filter(|v| v.is_some()).count();
    let slice_on_next = ck_slices.iter().all(|(p, _, _)| *p == prefix_len);
    // With an IN among the leading `=`/`IN` columns, a slice on the column after them is as
    // Cassandra allows it without filtering (`a IN (1, 2) AND b > 3`); the read then has no
    // clustering bounds and every row is checked.
    let eq_in_len = ck_eq_like.iter().take_while(|v| v.is_some()).count();
    if in_on_clustering {
        // The clustering values the leading `=`/`IN` columns combine into: the clusterings
        // Cassandra builds (it checks them when every clustering column is restricted so; the
        // reads of a shorter prefix are as many, one slice each, so Helenus checks them too).
        // A multi-column `=`/`IN` counts once, by its tuples.
        let mut lengths: Vec<usize> = ck_eq[..eq_in_len]
            .iter()
            .flatten()
            .map(|i| restricted(&filters, *i).len())
            .collect();
        for (first, op, i) in &ck_multi {
            if let (Operator::Eq | Operator::In, Filter::MultiColumn { tuples, .. }) =
                (op, &filters[*i])
            {
                if *first < eq_in_len {
                    lengths.push(tuples.len());
                }
            }
        }
        guardrails.check_cartesian_product(
            KeyKind::Clustering,
            product_len(lengths.into_iter()),
            warnings,
        )?;
    }
    let slice_after_in = in_on_clustering && ck_slices.iter().all(|(p, _, _)| *p == eq_in_len);
    if restricted_ck > prefix_len && !in_on_clustering {
        needs_filtering = true;
    }
    if !slice_on_next && !slice_after_in {
        needs_filtering = true;
    }
    if in_on_clustering && ck_eq_like.iter().skip(prefix_len).any(|v| v.is_none()) {
        // IN on a clustering column followed by unrestricted ones is fine; a gap is not.
        let first_gap = ck_eq_like
            .iter()
            .position(|v| v.is_none())
            .unwrap_or(ck_count);
        if ck_eq_like.iter().skip(first_gap).any(|v| v.is_some()) {
            needs_filtering = true;
        }
    }
    // A multi-column relation the read cannot serve as a slice (after a gap or a slice) could
    // only filter: without ALLOW FILTERING Cassandra names the clustering column as for any
    // such restriction, and with it still refuses a multi-column slice or IN (an `=` filters).
    let has_multi = select
        .where_clause
        .iter()
        .any(|r| matches!(r, Relation::MultiColumn { .. }));
    if has_multi && !table.virtual_table && !select.allow_filtering {
        // Any clustering restriction out of place (a gap, a slice before or after another)
        // is refused with it, as without a multi-column relation when it needs filtering.
        if let Some(message) = clustering_restriction_error(table, select)? {
            return Err(QueryError::Invalid(message));
        }
    }
    let multi_filters = if has_multi && !table.virtual_table {
        multi_column_filters(table, select)?
    } else {
        Vec::new()
    };
    if !multi_filters.is_empty() {
        let slice = |op: &Operator| {
            matches!(
                op,
                Operator::Gt | Operator::Gte | Operator::Lt | Operator::Lte
            )
        };
        if multi_filters.iter().any(slice) {
            return Err(QueryError::Invalid(
                "Multi-column slice restrictions cannot be used for filtering.".to_string(),
            ));
        }
        if multi_filters.contains(&Operator::In) {
            return Err(QueryError::Invalid(
                "Multicolumn IN filters are not supported".to_string(),
            ));
        }
    }
    if needs_filtering && !select.allow_filtering {
        if table.virtual_table {
            // Node-local tables are small; Cassandra's virtual tables also filter freely.
        } else if let Some(message) = clustering_restriction_error(table, select)? {
            return Err(QueryError::Invalid(message));
        } else {
            return Err(filtering_error());
        }
    }

    // The clustering ranges the read covers (a superset of the rows selected: every row is
    // still checked against the restrictions the read does not enforce, `enforced_by_read`).
    let read = clustering_read(table, &filters, &ck_eq, &ck_slices, &ck_multi);
    let (start, end, slices) = match read.ranges {
        None => (None, None, None),
        Some(mut one) if one.len() == 1 => {
            let (start, end) = one.remove(0);
            (start, end, None)
        }
        Some(several) => (None, None, Some(several)),
    };

    // Cassandra's `StatementRestrictions`: a selection of static (and partition key) columns
    // only reads no clustering row, so it cannot restrict one.
    if has_clustering_restriction
        && !matches!(select.selection, cql_syntax::ast::Selection::Wildcard)
    {
        let read = selection.columns_read();
        let kind = |i: &usize| table.columns[*i].kind;
        if read.iter().any(|i| kind(i) == ColumnKind::Static)
            && read
                .iter()
                .all(|i| matches!(kind(i), ColumnKind::Static | ColumnKind::PartitionKey))
        {
            return Err(QueryError::Invalid(
                "Cannot restrict clustering columns when selecting only static columns".to_string(),
            ));
        }
    }
    // ORDER BY: only on clustering columns, in their declared order or its exact reverse.
    let mut reversed = false;
    let mut post_ordering = None;
    if !select.order_by.is_empty() {
        if partitions.is_none() {
            return Err(QueryError::Invalid(
                "ORDER BY is only supported when the partition key is restricted by an EQ or an IN.".to_string(),
            ));
        }
        let mut first: Option<bool> = None;
        let mut next_position = 0;
        for ordering in &select.order_by {
            if ordering.ann_of.is_some() {
                return Err(QueryError::Invalid(
                    "ORDER BY ... ANN OF (vector search) is not supported yet by Helenus"
                        .to_string(),
                ));
            }
            let order = &ordering.order;
            let col = column(table, &ordering.column)?;
            if col.kind != ColumnKind::Clustering {
                return Err(QueryError::Invalid(format!(
                    "Order by is currently only supported on the clustered columns of the PRIMARY KEY, got {}",
                    col.name
                )));
            }
            // Clustering columns restricted to a single value may be left out.
            let position = col.position as usize;
            while next_position < position && ck_eq_like[next_position] == Some(true) {
                next_position += 1;
            }
            if position != next_position {
                return Err(QueryError::Invalid(
                    "Order by currently only supports the ordering of columns following their declared order in the PRIMARY KEY".to_string(),
                ));
            }
            next_position += 1;
            let declared_desc = col.order == ClusteringOrder::Desc;
            let asked_desc = matches!(order, Order::Desc);
            let rev = declared_desc != asked_desc;
            if first.is_some_and(|f| f != rev) {
                return Err(QueryError::Invalid(
                    "Unsupported order by relation".to_string(),
                ));
            }
            first = Some(rev);
        }
        reversed = first.unwrap_or(false);
        if partition_key_in {
            let mut columns = Vec::with_capacity(select.order_by.len());
            for ordering in &select.order_by {
                let col = column(table, &ordering.column)?;
                let index = table.column_index(&col.name).unwrap_or(0);
                columns.push((index, matches!(ordering.order, Order::Desc)));
            }
            if table.virtual_table {
                return Err(QueryError::Invalid(
                    "ORDER BY with an IN restriction on the partition key of a virtual table is not supported yet by Helenus".to_string(),
                ));
            }
            Arc::make_mut(&mut selection)
                .add_hidden_columns(columns.iter().map(|(index, _)| *index));
            post_ordering = Some(columns);
        }
    }
    // Cassandra's column filter fetches a table's static columns for `*`, for a selection of
    // one, and for a selection of key columns only (it then fetches every column).
    let fetches_static = table.columns.iter().any(|c| c.kind == ColumnKind::Static)
        && match select.selection {
            cql_syntax::ast::Selection::Wildcard => true,
            cql_syntax::ast::Selection::Columns(_) => {
                let read = selection.columns_read();
                let kind = |i: &usize| table.columns[*i].kind;
                read.iter().any(|i| kind(i) == ColumnKind::Static)
                    || read.iter().all(|i| {
                        matches!(kind(i), ColumnKind::PartitionKey | ColumnKind::Clustering)
                    })
            }
        };
    let group_by = group_by_prefix(table, select, &selection.group_by_functions)?;
    let aggregate = selection.is_aggregate() && group_by.is_none();
    if aggregate && select.per_partition_limit.is_some() {
        return Err(QueryError::Invalid(
            "PER PARTITION LIMIT is not allowed with aggregate queries.".to_string(),
        ));
    }
    // `check_distinct` refused what SELECT DISTINCT may not read or restrict, at PREPARE.
    // The read enforces the `=` prefix it is bounded by, and a slice right after it if the
    // slice bounds it.
    let eq_prefix = prefix_len.min(read.prefix_columns);
    let enforced = enforced_by_read(
        table,
        &filters,
        partitions.is_some(),
        eq_prefix,
        if read.sliced && read.prefix_columns == prefix_len {
            ck_slices.len()
        } else {
            usize::MAX
        },
        in_on_clustering,
    );
    let needs_partition_key = group_by.is_some()
        || select.distinct
        || selection.reads_column_below(pk_count)
        || filters.iter().enumerate().any(|(i, f)| match f {
            _ if enforced_bit(enforced, i) => false,
            Filter::Compare { column, .. } | Filter::IsNotNull(column) => *column < pk_count,
            Filter::MultiColumn { .. } | Filter::Token { .. } | Filter::MapEntry { .. } => false,
        });
    Ok(Plan {
        table: table.clone(),
        selection,
        filters,
        enforced,
        needs_partition_key,
        partitions,
        slice: ClusteringSlice {
            start,
            end,
            reversed,
        },
        slices,
        limit: limit_value(&select.limit, "[limit]", values)?,
        per_partition_limit: limit_value(
            &select.per_partition_limit,
            "[per_partition_limit]",
            values,
        )?,
        distinct: select.distinct,
        aggregate,
        group_by,
        token_start,
        token_end,
        static_only_rows: !has_clustering_restriction,
        post_ordering,
        partition_key_restricted: pk_restricted > 0 || has_token,
        partition_key_in,
        fetches_static,
        clustering_names: ck_count > 0
            && ck_eq_like.iter().all(Option::is_some)
            && ck_slices.is_empty()
            && ck_multi
                .iter()
                .all(|(_, op, _)| matches!(op, Operator::Eq | Operator::In)),
    })
}

/// What a partition read covers of the clustering keys (`clustering_read`).
struct ClusteringRead {
    /// The ranges, in clustering order; `None` when nothing bounds the read (the whole
    /// partition).
    ranges: Option<Vec<ClusteringRange>>,
    /// How many leading clustering columns the ranges fix by `=` or `IN`.
    prefix_columns: usize,
    /// Every slice restriction on the column after them bounds the ranges.
    sliced: bool,
}

/// The ranges of clustering keys a partition read covers, in clustering order, as Cassandra's
/// `ClusteringColumnRestrictions` builds its `Slices`: every combination of the values of the
/// leading clustering columns restricted by `=` or `IN` (single- or multi-column relations),
/// each followed by the slice the single- and multi-column bounds on the next column make
/// (`slices::ranges`: values compare in their own order, so columns of mixed clustering order
/// make several ranges). Relations after a gap or after the slice only filter: the ranges hold
/// a superset of the rows (every row read is still checked against the restrictions the read
/// does not enforce). An empty IN makes no range.
fn clustering_read(
    table: &TableMetadata,
    filters: &[Filter],
    ck_eq: &[Option<usize>],
    ck_slices: &[(usize, Operator, usize)],
    ck_multi: &[(usize, Operator, usize)],
) -> ClusteringRead {
    let clustering = table.clustering();
    let encode = |position: usize, value: &[u8], out: &mut Vec<u8>| {
        let col = &clustering[position];
        types::byte_comparable::encode(&col.ty, value, col.order == ClusteringOrder::Desc, out);
    };
    let multi_tuples = |i: usize| match &filters[i] {
        Filter::MultiColumn { tuples, .. } => tuples.as_slice(),
        _ => &[],
    };
    let multi_width = |i: usize| match &filters[i] {
        Filter::MultiColumn { columns, .. } => columns.len(),
        _ => 0,
    };
    // The leading `=`/`IN` columns: every combination of their values, encoded.
    let mut prefixes: Vec<Vec<u8>> = vec![Vec::new()];
    let mut position = 0;
    while position < clustering.len() {
        let multi = ck_multi
            .iter()
            .find(|(p, op, _)| *p == position && matches!(op, Operator::Eq | Operator::In));
        let (width, values): (usize, Vec<&[Vec<u8>]>) = match (ck_eq[position], multi) {
            (Some(i), _) => (
                1,
                restricted(filters, i)
                    .iter()
                    .map(std::slice::from_ref)
                    .collect(),
            ),
            (None, Some((_, _, i))) => (
                multi_width(*i),
                multi_tuples(*i).iter().map(Vec::as_slice).collect(),
            ),
            (None, None) => break,
        };
        if width == 0 || position + width > clustering.len() {
            break;
        }
        let mut next = Vec::with_capacity(prefixes.len() * values.len());
        for prefix in &prefixes {
            for tuple in &values {
                let mut p = prefix.clone();
                for (j, v) in tuple.iter().enumerate() {
                    encode(position + j, v, &mut p);
                }
                next.push(p);
            }
        }
        prefixes = next;
        position += width;
    }
    // The slice on the column after them: at most one bound on each side (`check_where`
    // refuses two); a side given twice anyway is left to the filters.
    let mut lower: Vec<TupleBound> = Vec::new();
    let mut upper: Vec<TupleBound> = Vec::new();
    let single = ck_slices
        .iter()
        .filter(|(p, _, _)| *p == position)
        .map(|(_, op, i)| (*op, vec![restricted(filters, *i)[0].clone()]));
    let multi = ck_multi
        .iter()
        .filter(|(p, op, _)| *p == position && !matches!(op, Operator::Eq | Operator::In))
        .filter_map(|(_, op, i)| multi_tuples(*i).first().map(|t| (*op, t.clone())));
    for (op, values) in single.chain(multi) {
        let bound = TupleBound {
            values,
            inclusive: matches!(op, Operator::Gte | Operator::Lte),
        };
        match op {
            Operator::Gt | Operator::Gte => lower.push(bound),
            Operator::Lt | Operator::Lte => upper.push(bound),
            _ => {}
        }
    }
    let sliced = lower.len() <= 1 && upper.len() <= 1;
    let one = |bounds: &[TupleBound]| match bounds {
        [only] => Some(only.clone()),
        _ => None,
    };
    let (lower, upper) = (one(&lower), one(&upper));
    if position == 0 && lower.is_none() && upper.is_none() {
        return ClusteringRead {
            ranges: None,
            prefix_columns: 0,
            sliced,
        };
    }
    if prefixes.len() > 1 {
        prefixes.sort();
        prefixes.dedup();
    }
    let ranges = if lower.is_none() && upper.is_none() {
        // No slice: each prefix whole (a point read allocates no more than this).
        prefixes
            .into_iter()
            .map(|prefix| {
                let bound = mutation::ClusteringBound {
                    prefix,
                    inclusive: true,
                };
                (Some(bound.clone()), Some(bound))
            })
            .collect()
    } else {
        let rest: Vec<&schema::ColumnMetadata> = clustering[position..].iter().collect();
        let mut ranges = Vec::new();
        for prefix in &prefixes {
            ranges.extend(crate::slices::ranges(
                &rest,
                prefix,
                lower.as_ref(),
                upper.as_ref(),
            ));
        }
        ranges
    };
    ClusteringRead {
        ranges: Some(ranges),
        prefix_columns: position,
        sliced,
    }
}

/// The restrictions a storage read of `Plan::partitions` enforces exactly, so its rows need no
/// check against them, as a mask of indices into `filters` (bit `i` for filter `i`; filters
/// past the 64th are always checked): `=`/`IN` on the partition key (the read is of exactly
/// those keys), and on clustering columns the `=` prefix and the slice after it that became the
/// read's bounds. Only where the byte-comparable encoding of a value is equal exactly when the
/// values compare equal (`exact_key_type`), and only a column with one restriction (a second
/// one on the same column is still checked, as is anything on a virtual table, whose rows are
/// never read by key). Allocates nothing: it runs on every execution.
fn enforced_by_read(
    table: &TableMetadata,
    filters: &[Filter],
    partition_read: bool,
    eq_prefix: usize,
    slice_restrictions: usize,
    in_on_clustering: bool,
) -> u64 {
    if !partition_read || table.virtual_table {
        return 0;
    }
    let pk_count = table.partition_key_count;
    let key_columns = pk_count + table.clustering_count;
    // Restrictions on `column`: (lower bounds, upper bounds, any other).
    let on = |column: usize| {
        let (mut lower, mut upper, mut other) = (0, 0, 0);
        for f in filters {
            match f {
                Filter::Compare { column: c, op, .. } if *c == column => match op {
                    Operator::Gt | Operator::Gte => lower += 1,
                    Operator::Lt | Operator::Lte => upper += 1,
                    _ => other += 1,
                },
                Filter::IsNotNull(c) if *c == column => other += 1,
                _ => {}
            }
        }
        (lower, upper, other)
    };
    let mut mask = 0u64;
    for (i, f) in filters.iter().enumerate().take(64) {
        let Filter::Compare { column, op, .. } = f else {
            continue;
        };
        let column = *column;
        if column >= key_columns {
            continue;
        }
        let enforced = if column < pk_count {
            // Only `=` and `IN` are accepted on a partition key column.
            matches!(op, Operator::Eq | Operator::In) && on(column) == (0, 0, 1)
        } else {
            let position = column - pk_count;
            let exact = exact_key_type(&table.columns[column].ty) && !in_on_clustering;
            match op {
                Operator::Eq | Operator::In => {
                    exact && position < eq_prefix && on(column) == (0, 0, 1)
                }
                // The slice's restrictions all on this column (the one after the `=` prefix),
                // one bound on each side at most: a second bound on a side replaces the first
                // in the read.
                Operator::Gt | Operator::Gte | Operator::Lt | Operator::Lte => {
                    let (lower, upper, other) = on(column);
                    exact
                        && position == eq_prefix
                        && other == 0
                        && lower <= 1
                        && upper <= 1
                        && lower + upper == slice_restrictions
                }
                _ => false,
            }
        };
        if enforced {
            mask |= 1 << i;
        }
    }
    mask
}

/// Types whose values compare equal exactly when their serialisations are equal, so a key
/// bound encoded from a value selects exactly the rows a comparison would. Not boolean (any
/// non-zero byte is true), decimal (1.0 and 1.00), varint (leading zero bytes), floating point,
/// durations, or anything composite.
pub(crate) fn exact_key_type(ty: &CqlType) -> bool {
    matches!(
        ty,
        CqlType::Ascii
            | CqlType::Bigint
            | CqlType::Blob
            | CqlType::Date
            | CqlType::Int
            | CqlType::Smallint
            | CqlType::Text
            | CqlType::Time
            | CqlType::Timestamp
            | CqlType::Timeuuid
            | CqlType::Tinyint
            | CqlType::Uuid
    )
}

/// Validates GROUP BY as Cassandra does and returns how many clustering columns a group key
/// has. GROUP BY names primary key columns in order; a column restricted by `=` may be left out;
/// the partition key must be whole; the last element may be a function of its clustering
/// column (`functions`, compiled with the selection, has one entry per element).
fn group_by_prefix(
    table: &TableMetadata,
    select: &Select,
    functions: &[Option<selector::GroupFunction>],
) -> Result<Option<usize>, QueryError> {
    if select.group_by.is_empty() {
        return Ok(None);
    }
    let restricted_by_eq = |name: &str| {
        select.where_clause.iter().any(|r| match r {
            Relation::Simple {
                column,
                op: Operator::Eq,
                ..
            } => column.as_str() == name,
            Relation::MultiColumn {
                columns,
                op: Operator::Eq,
                ..
            } => columns.iter().any(|c| c.as_str() == name),
            _ => false,
        })
    };
    let order_error = || {
        QueryError::Invalid(
            "Group by currently only support groups of columns following their declared order in the PRIMARY KEY".to_string(),
        )
    };
    let key_columns: Vec<&schema::ColumnMetadata> = table
        .partition_key()
        .iter()
        .chain(table.clustering().iter())
        .collect();
    let mut next = 0;
    let mut clustering_prefix = 0;
    let mut function_seen = false;
    for (expr, function) in select.group_by.iter().zip(functions) {
        let col = match (expr, function) {
            (_, Some(f)) => {
                function_seen = true;
                &table.columns[f.column]
            }
            (SelectorExpr::Column(name), None) => {
                let col = column(table, name)?;
                if !matches!(col.kind, ColumnKind::PartitionKey | ColumnKind::Clustering) {
                    return Err(QueryError::Invalid(format!(
                        "Group by is currently only supported on the columns of the PRIMARY KEY, got {}",
                        col.name
                    )));
                }
                if function_seen {
                    return Err(QueryError::Invalid(
                        "Functions are only supported on the last element of the GROUP BY clause"
                            .to_string(),
                    ));
                }
                col
            }
            (_, None) => {
                return Err(QueryError::Server(
                    "a GROUP BY element is neither a column nor a function".to_string(),
                ))
            }
        };
        loop {
            let Some(key_column) = key_columns.get(next) else {
                return Err(order_error());
            };
            next += 1;
            if key_column.kind == ColumnKind::Clustering {
                clustering_prefix += 1;
            }
            if key_column.name == col.name {
                break;
            }
            if !restricted_by_eq(&key_column.name) {
                return Err(order_error());
            }
        }
    }
    if key_columns
        .get(next)
        .is_some_and(|c| c.kind == ColumnKind::PartitionKey)
    {
        return Err(QueryError::Invalid(
            "Group by is not supported on only a part of the partition key".to_string(),
        ));
    }
    if clustering_prefix > 0 && select.distinct {
        return Err(QueryError::Invalid(
            "Grouping on clustering columns is not allowed for SELECT DISTINCT queries".to_string(),
        ));
    }
    Ok(Some(clustering_prefix))
}

/// How many reads a partition of `plan.partitions` takes: one per range of `Plan::slices`
/// (none for an empty IN), else one.
fn reads_per_partition(plan: &Plan) -> usize {
    plan.slices.as_ref().map_or(1, Vec::len)
}

/// The slice of a partition's read number `i` (of `reads_per_partition`): its ranges in read
/// order (the last first when the read is reversed), else the plan's slice.
fn read_slice(plan: &Plan, i: usize) -> ClusteringSlice {
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

/// Paging state (opaque to clients; byte layout, big-endian):
/// `version u8 (1, or 2 with a group) | partition_index u32 | returned u32 |
///  partition_returned u32 | resume_len u32 | resume bytes | last_partition_len u32 |
///  last_partition bytes` and, in version 2, `group_partition_len u32 | group_partition bytes |
///  group_token i64 | group_clustering_len u32 | group_clustering bytes | partition_groups u32`.
/// A length of `u32::MAX` stands for an absent part.
/// `partition_index` counts reads of an IN list already finished (partitions, or each
/// partition's ranges, `Plan::slices`); `returned` is rows (with
/// GROUP BY: groups) returned so far (for LIMIT); `partition_returned` rows of the current
/// partition (for PER PARTITION LIMIT); `resume` is the storage position to continue from.
#[derive(Debug, Default, Clone, PartialEq)]
struct PagingState {
    partition_index: u32,
    returned: u32,
    partition_returned: u32,
    resume: Option<Vec<u8>>,
    /// The partition the resume position belongs to (so a per-partition count continues).
    last_partition: Option<Vec<u8>>,
    /// GROUP BY: the last group returned. `resume` is then a position at or before the next
    /// group's first row, and rows up to the end of this group are skipped.
    group: Option<GroupResume>,
}

/// Where a GROUP BY page ended: the last group returned and its ordinal in its partition.
#[derive(Debug, Clone, PartialEq)]
struct GroupResume {
    key: GroupKey,
    partition_groups: u32,
}

/// What identifies a group: the partition and the group's clustering prefix, encoded
/// byte-comparably (empty when the group is a whole partition or a static-only row).
#[derive(Debug, Clone, PartialEq)]
struct GroupKey {
    partition: Vec<u8>,
    token: i64,
    clustering: Vec<u8>,
}

fn put_part(out: &mut Vec<u8>, part: Option<&[u8]>) {
    match part {
        Some(r) => {
            out.extend_from_slice(&(r.len() as u32).to_be_bytes());
            out.extend_from_slice(r);
        }
        None => out.extend_from_slice(&u32::MAX.to_be_bytes()),
    }
}

impl PagingState {
    fn encode(&self) -> Vec<u8> {
        let mut out = vec![if self.group.is_some() { 2u8 } else { 1u8 }];
        out.extend_from_slice(&self.partition_index.to_be_bytes());
        out.extend_from_slice(&self.returned.to_be_bytes());
        out.extend_from_slice(&self.partition_returned.to_be_bytes());
        put_part(&mut out, self.resume.as_deref());
        put_part(&mut out, self.last_partition.as_deref());
        if let Some(g) = &self.group {
            put_part(&mut out, Some(&g.key.partition));
            out.extend_from_slice(&g.key.token.to_be_bytes());
            put_part(&mut out, Some(&g.key.clustering));
            out.extend_from_slice(&g.partition_groups.to_be_bytes());
        }
        out
    }

    fn decode(bytes: &[u8]) -> Result<PagingState, QueryError> {
        let bad = || QueryError::Invalid("Invalid value for the paging state".to_string());
        let mut rest = bytes;
        let take = |rest: &mut &[u8], n: usize| -> Result<Vec<u8>, QueryError> {
            if rest.len() < n {
                return Err(bad());
            }
            let (head, tail) = rest.split_at(n);
            *rest = tail;
            Ok(head.to_vec())
        };
        let u32_at = |rest: &mut &[u8]| -> Result<u32, QueryError> {
            let b = take(rest, 4)?;
            Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        };
        let part = |rest: &mut &[u8]| -> Result<Option<Vec<u8>>, QueryError> {
            let len = u32_at(rest)?;
            if len == u32::MAX {
                return Ok(None);
            }
            take(rest, len as usize).map(Some)
        };
        let version = match rest.first() {
            Some(v @ (1 | 2)) => *v,
            _ => return Err(bad()),
        };
        rest = &rest[1..];
        let partition_index = u32_at(&mut rest)?;
        let returned = u32_at(&mut rest)?;
        let partition_returned = u32_at(&mut rest)?;
        let resume = part(&mut rest)?;
        let last_partition = part(&mut rest)?;
        let group = if version == 2 {
            let partition = part(&mut rest)?.ok_or_else(bad)?;
            let t = take(&mut rest, 8)?;
            let token = i64::from_be_bytes(t.try_into().map_err(|_| bad())?);
            let clustering = part(&mut rest)?.ok_or_else(bad)?;
            let partition_groups = u32_at(&mut rest)?;
            Some(GroupResume {
                key: GroupKey {
                    partition,
                    token,
                    clustering,
                },
                partition_groups,
            })
        } else {
            None
        };
        if !rest.is_empty() {
            return Err(bad());
        }
        Ok(PagingState {
            partition_index,
            returned,
            partition_returned,
            resume,
            last_partition,
            group,
        })
    }
}

/// Where the rows read go: result rows, one aggregate over everything, or groups.
enum Sink {
    Rows(Rows),
    Aggregate(Box<GroupState>),
    Grouped(Grouper),
}

/// What a grouped read does after a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Continue,
    /// The page is full; the row was not consumed and starts a later page.
    PageFull,
    /// LIMIT groups were returned.
    Done,
}

impl Sink {
    /// Rows to ask storage for next.
    fn wanted(&self) -> usize {
        match self {
            Sink::Rows(out) => out.wanted(),
            Sink::Aggregate(_) => INTERNAL_PAGE_ROWS,
            Sink::Grouped(g) => g.wanted(),
        }
    }

    fn limit_reached(&self) -> bool {
        match self {
            Sink::Rows(out) => out.limit_reached(),
            Sink::Aggregate(_) => false,
            Sink::Grouped(g) => g.done,
        }
    }
}

#[allow(clippy::too_many_arguments)] // the request's parts
pub(crate) async fn execute(
    processor: &QueryProcessor,
    schema: &Schema,
    statement: SelectStatement<'_>,
    keyspace: Option<&str>,
    values: &[Bound],
    options: &QueryOptions,
    start: RequestStart,
    warnings: &mut Vec<String>,
) -> Result<QueryResult, QueryError> {
    let select = statement.select;
    if !select.json {
        return execute_rows(
            processor, schema, statement, keyspace, values, options, start, warnings,
        )
        .await;
    }
    // SELECT JSON: the same query, each result row turned into one JSON object.
    let plain = Select {
        json: false,
        ..select.clone()
    };
    match execute_rows(
        processor,
        schema,
        SelectStatement {
            select: &plain,
            ..statement
        },
        keyspace,
        values,
        options,
        start,
        warnings,
    )
    .await?
    {
        QueryResult::Rows(rs) => Ok(QueryResult::Rows(rows_to_json(rs)?)),
        other => Ok(other),
    }
}

/// One `[json]` text column per row: `{"column": value, ...}` in the selection's order, with
/// Cassandra's key rule (a name with capitals is double-quoted) and `toJson` values.
fn rows_to_json(rs: ResultSet) -> Result<ResultSet, QueryError> {
    let keys: Vec<String> = rs
        .columns
        .iter()
        .map(|c| {
            let name = if c.name == c.name.to_lowercase() {
                c.name.clone()
            } else {
                format!("\"{}\"", c.name)
            };
            serde_json::Value::String(name).to_string()
        })
        .collect();
    let mut rows = Vec::with_capacity(rs.rows.len());
    for row in &rs.rows {
        let mut text = String::from("{");
        for (i, (cell, spec)) in row.iter().zip(rs.columns.iter()).enumerate() {
            if i > 0 {
                text.push_str(", ");
            }
            text.push_str(&keys[i]);
            text.push_str(": ");
            match cell {
                None => text.push_str("null"),
                Some(bytes) => {
                    let value = types::Value::decode(&spec.ty, bytes).map_err(|e| {
                        QueryError::Server(format!("cannot decode {}: {e}", spec.name))
                    })?;
                    text.push_str(&value.to_json(&spec.ty));
                }
            }
        }
        text.push('}');
        rows.push(vec![Some(Bytes::from(text))]);
    }
    let json_spec = |c: &ColumnSpec| ColumnSpec {
        keyspace: c.keyspace.clone(),
        table: c.table.clone(),
        name: "[json]".to_string(),
        ty: CqlType::Text,
    };
    let columns = match rs.columns.first() {
        Some(c) => vec![json_spec(c)],
        None => Vec::new(),
    };
    Ok(ResultSet {
        columns: columns.into(),
        rows,
        paging_state: rs.paging_state,
        skip_metadata: rs.skip_metadata,
    })
}

#[allow(clippy::too_many_arguments)] // the request's parts
async fn execute_rows(
    processor: &QueryProcessor,
    schema: &Schema,
    statement: SelectStatement<'_>,
    keyspace: Option<&str>,
    values: &[Bound],
    options: &QueryOptions,
    start: RequestStart,
    warnings: &mut Vec<String>,
) -> Result<QueryResult, QueryError> {
    let select = statement.select;
    let table = resolve_table(
        schema,
        select.table.keyspace.as_ref(),
        keyspace,
        &select.table.name,
    )?;
    let mut plan = build_plan(
        schema,
        table,
        select,
        values,
        statement.cache,
        &processor.in_select_guardrails,
        warnings,
    )?;
    // Cassandra warns of aggregates and GROUP BY over many partitions (SelectStatement).
    if plan.aggregate || plan.group_by.is_some() {
        if !plan.partition_key_restricted {
            warnings.push(warnings::AGGREGATION_WITHOUT_PARTITION_KEY.to_string());
        } else if plan.partition_key_in {
            warnings.push(warnings::AGGREGATION_ON_MULTIPLE_PARTITION_KEYS.to_string());
        }
    }
    // Rows sorted after they are read are all read first: no paging, and LIMIT after the sort.
    // Cassandra answers a read that selects nothing by construction (an empty IN, crossed
    // clustering bounds) before it would page, except an aggregate or GROUP BY, which it always
    // pages.
    let answered_unpaged = !plan.aggregate && plan.group_by.is_none() && plan.selects_nothing();
    let post_limit = match plan.post_ordering {
        Some(_) if options.page_size.is_some_and(|n| n > 0) && !answered_unpaged => {
            return Err(QueryError::Invalid(POST_ORDERING_PAGING.to_string()))
        }
        Some(_) => plan.limit.take(),
        None => None,
    };
    let now = QueryProcessor::now_seconds(options);
    // An aggregate without GROUP BY is one row computed over every page read internally.
    let page_size = match options.page_size {
        Some(n) if n > 0 && !plan.aggregate => Some(n as usize),
        _ => None,
    };
    let state = match &options.paging_state {
        Some(b) if !plan.aggregate => PagingState::decode(b)?,
        _ => PagingState::default(),
    };

    if table.virtual_table {
        let rows = system_tables::rows(processor, schema, table)?;
        return Ok(QueryResult::Rows(finish_virtual(
            &plan, rows, page_size, state, now,
        )?));
    }

    let keyspace_meta = schema.keyspace(&table.keyspace).ok_or_else(|| {
        QueryError::Invalid(format!("keyspace {} does not exist", table.keyspace))
    })?;
    // Reads of named partitions run under `read_request_timeout`, scans under
    // `range_request_timeout`, as Cassandra's single-partition and range commands.
    let timeout = match plan.partitions {
        Some(_) => processor.timeouts.read,
        None => processor.timeouts.range,
    };
    let block_for = options.consistency.block_for(
        keyspace_meta,
        coordinator::ReadOrWrite::Read,
        processor.node.data_center(),
    )?;
    let mut pacer = Pacer::new(
        start.deadline(timeout),
        options.consistency,
        i32::try_from(block_for).unwrap_or(i32::MAX),
    );
    let mut sink = match plan.group_by {
        _ if plan.aggregate => Sink::Aggregate(Box::new(plan.selection.new_group())),
        Some(prefix) => Sink::Grouped(Grouper::new(&plan, prefix, page_size, &state)),
        None => Sink::Rows(Rows::new(&plan, page_size, state.returned as usize)),
    };
    let mut state = PagingState {
        group: None,
        ..state
    };
    let grouped = plan.group_by.is_some();
    let mut group_paging_state = None;
    // Tombstones met, counted per read command as Cassandra does for its tombstone warning.
    let command_limit = match (options.page_size.filter(|n| *n > 0), plan.limit) {
        (Some(n), Some(limit)) if !plan.aggregate => Some((n as usize).min(limit)),
        (Some(n), _) => Some(n as usize),
        (None, limit) => limit,
    };
    let threshold = processor.tombstone_warn_threshold;
    let mut tally = TombstoneTally::default();
    loop {
        if let Some(keys) = &plan.partitions {
            if state.partition_index as usize
                >= keys.len().saturating_mul(reads_per_partition(&plan))
            {
                break;
            }
        }
        // Every storage read: the deadline, and a yield of the shard now and then (a read of
        // many partitions, or a scan that filters out most rows, may take seconds).
        pacer.pace().await?;
        let want = sink.wanted().clamp(1, INTERNAL_PAGE_ROWS);
        let page_start = state.clone();
        let (mut pages, next): (Vec<PartitionData>, Option<PagingState>) = match &plan.partitions {
            Some(keys) => {
                // With several ranges, the index runs over each partition's ranges in turn.
                let idx = state.partition_index as usize;
                let slices = reads_per_partition(&plan);
                let reads = keys.len().saturating_mul(slices);
                if idx >= reads {
                    break;
                }
                let key = keys.key(table, idx / slices)?;
                let key = key.as_ref();
                let page = if keys.admits(key) {
                    let response = processor
                        .coordinator
                        .read(
                            keyspace_meta,
                            ReadCommand::Partition {
                                table: table.id,
                                key: key.clone(),
                                slice: read_slice(&plan, idx % slices),
                                max_rows: if plan.distinct { 1 } else { want },
                                resume: state.resume.clone(),
                            },
                            options.consistency,
                            pacer.deadline(),
                        )
                        .await?;
                    let ReadResponse::Partition(page) = response else {
                        return Err(QueryError::Server("unexpected read response".to_string()));
                    };
                    page
                } else {
                    // A token() restriction beside the key leaves this one out.
                    storage::PartitionPage {
                        data: PartitionData {
                            key: key.clone(),
                            header: Default::default(),
                            static_row: None,
                            rows: Vec::new(),
                        },
                        resume: None,
                    }
                };
                let next = match (page.resume, plan.distinct) {
                    (Some(r), false) => PagingState {
                        partition_index: state.partition_index,
                        resume: Some(r),
                        last_partition: Some(key.key.clone()),
                        ..Default::default()
                    },
                    _ => PagingState {
                        partition_index: state.partition_index + 1,
                        // The partition's next slice continues its rows (PER PARTITION LIMIT).
                        last_partition: (!(idx + 1).is_multiple_of(slices))
                            .then(|| key.key.clone()),
                        ..Default::default()
                    },
                };
                let more = (next.partition_index as usize) < reads || next.resume.is_some();
                (vec![page.data], more.then_some(next))
            }
            None => {
                let start = match (&state.resume, plan.token_start) {
                    (Some(r), _) => ScanStart::Resume(r.clone()),
                    (None, Some(t)) => ScanStart::Token(t),
                    (None, None) => ScanStart::Beginning,
                };
                let response = processor
                    .coordinator
                    .read(
                        keyspace_meta,
                        ReadCommand::Range {
                            table: table.id,
                            start,
                            end_token: plan.token_end,
                            max_rows: want,
                        },
                        options.consistency,
                        pacer.deadline(),
                    )
                    .await?;
                let ReadResponse::Range(page) = response else {
                    return Err(QueryError::Server("unexpected read response".to_string()));
                };
                // A partition the page ended inside goes on in the next page; one it ended
                // after is complete (a partition with only a static row shows it now).
                let last = page
                    .partitions
                    .last()
                    .filter(|_| page.last_partition_continues)
                    .map(|p| p.key.key.clone());
                let next = page.resume.map(|r| PagingState {
                    resume: Some(r),
                    last_partition: last,
                    ..Default::default()
                });
                (page.partitions, next)
            }
        };
        let partition = plan
            .partitions
            .is_some()
            .then(|| page_start.partition_index as usize / reads_per_partition(&plan).max(1));
        // A partition read returns only rows in the slice; a scan returns whole partitions.
        let slice_to_check = plan.partitions.is_none().then_some(&plan.slice);
        for data in &pages {
            if let Some(closed) = tally.add(partition, data, slice_to_check, now) {
                warnings.extend(closed.warning(&plan, command_limit, threshold));
            }
        }
        let mut flow = Flow::Continue;
        'partitions: for data in &mut pages {
            let continuing = state.last_partition.as_deref() == Some(data.key.key.as_slice());
            let mut partition_returned = if continuing {
                state.partition_returned as usize
            } else {
                0
            };
            // Whether the partition ends in this storage page (it goes on when the page stopped
            // inside it), and whether earlier pages returned rows of it.
            let complete = !next.as_ref().is_some_and(|n| {
                n.resume.is_some() && n.last_partition.as_deref() == Some(data.key.key.as_slice())
            });
            let resumed = state.resume.is_some() && continuing;
            let rows = partition_rows(
                &plan,
                data,
                now,
                PartitionPosition {
                    rows_before: resumed && partition_returned > 0,
                    complete,
                },
            );
            for row in rows {
                pacer.pace_row().await?;
                if plan.distinct && partition_returned > 0 {
                    break;
                }
                // With GROUP BY, PER PARTITION LIMIT counts groups (the grouper applies it).
                if !grouped
                    && plan
                        .per_partition_limit
                        .is_some_and(|l| partition_returned >= l)
                {
                    break;
                }
                if !passes(&plan, &row) {
                    continue;
                }
                partition_returned += 1;
                match &mut sink {
                    Sink::Rows(out) => out.push(&plan, row)?,
                    Sink::Aggregate(group) => plan.selection.add_row(group, &row)?,
                    Sink::Grouped(g) => {
                        flow = g.accept(&plan, &data.key, &row)?;
                        if flow != Flow::Continue {
                            break 'partitions;
                        }
                    }
                }
            }
            state.last_partition = Some(data.key.key.clone());
            state.partition_returned = partition_returned as u32;
        }
        match flow {
            Flow::Continue => {}
            Flow::Done => break,
            Flow::PageFull => {
                // The next page re-reads this storage page and skips the groups returned.
                if let Sink::Grouped(g) = &sink {
                    group_paging_state = Some(PagingState {
                        returned: g.returned as u32,
                        group: g.resume(),
                        ..page_start
                    });
                }
                break;
            }
        }
        match next {
            Some(n) => {
                let carried = n.last_partition.clone();
                let same = carried.is_some() && carried == state.last_partition;
                state.partition_index = n.partition_index;
                state.resume = n.resume;
                if !same {
                    state.partition_returned = 0;
                    state.last_partition = carried;
                }
            }
            None => {
                state.resume = None;
                state.partition_index = u32::MAX;
                break;
            }
        }
        if sink.limit_reached() {
            break;
        }
        if let Sink::Rows(out) = &mut sink {
            if out.page_full() {
                out.paging_state = Some(PagingState {
                    returned: out.total_returned as u32,
                    ..state.clone()
                });
                break;
            }
        }
    }
    warnings.extend(tally.warning(&plan, command_limit, threshold));
    let (rows, paging_state) = match sink {
        Sink::Rows(out) => (out.rows, out.paging_state.map(|s| s.encode())),
        Sink::Aggregate(group) => (vec![plan.selection.finish(&group)?], None),
        Sink::Grouped(mut g) => {
            if group_paging_state.is_none() {
                g.flush(&plan)?;
            }
            (g.rows, group_paging_state.map(|s| s.encode()))
        }
    };
    let rows = match &plan.post_ordering {
        Some(columns) => post_order(&plan, rows, columns, post_limit),
        None => rows,
    };
    Ok(QueryResult::Rows(ResultSet {
        columns: plan.selection.specs.clone(),
        rows,
        paging_state,
        skip_metadata: false,
    }))
}

/// Cassandra's post-query ordering: a stable sort of every result row on the ORDER BY
/// columns (carried as hidden outputs after the visible ones, which are then dropped), then
/// LIMIT. Rows of one partition already come in the asked order, so the sort keeps them so.
fn post_order(
    plan: &Plan,
    mut rows: Vec<Vec<Option<Bytes>>>,
    columns: &[(usize, bool)],
    limit: Option<usize>,
) -> Vec<Vec<Option<Bytes>>> {
    let visible = plan.selection.specs.len();
    rows.sort_by(|a, b| {
        for (j, (index, descending)) in columns.iter().enumerate() {
            let ty = &plan.table.columns[*index].ty;
            let order = match (&a[visible + j], &b[visible + j]) {
                (Some(x), Some(y)) => types::compare(ty, x, y),
                (x, y) => x.is_some().cmp(&y.is_some()),
            };
            let order = if *descending { order.reverse() } else { order };
            if order.is_ne() {
                return order;
            }
        }
        Ordering::Equal
    });
    if let Some(limit) = limit {
        rows.truncate(limit);
    }
    for row in &mut rows {
        row.truncate(visible);
    }
    rows
}

/// Result accumulation with LIMIT and page size.
struct Rows {
    rows: Vec<Vec<Option<Bytes>>>,
    page_size: Option<usize>,
    limit: Option<usize>,
    total_returned: usize,
    paging_state: Option<PagingState>,
}

impl Rows {
    fn new(plan: &Plan, page_size: Option<usize>, already_returned: usize) -> Rows {
        Rows {
            rows: Vec::new(),
            page_size,
            limit: plan.limit,
            total_returned: already_returned,
            paging_state: None,
        }
    }

    fn wanted(&self) -> usize {
        let by_page = self
            .page_size
            .map(|p| p.saturating_sub(self.rows.len()))
            .unwrap_or(usize::MAX);
        let by_limit = self
            .limit
            .map(|l| l.saturating_sub(self.total_returned))
            .unwrap_or(usize::MAX);
        by_page.min(by_limit)
    }

    fn push(&mut self, plan: &Plan, row: RowValues) -> Result<(), QueryError> {
        if self.limit_reached() || self.page_full() {
            return Ok(());
        }
        self.rows.push(plan.selection.project_owned(row)?);
        self.total_returned += 1;
        Ok(())
    }

    fn limit_reached(&self) -> bool {
        self.limit.is_some_and(|l| self.total_returned >= l)
    }

    fn page_full(&self) -> bool {
        self.page_size.is_some_and(|p| self.rows.len() >= p)
    }
}

/// GROUP BY: rows arrive in clustering order, so a group is a run of rows with the same
/// partition and clustering prefix. A page holds whole groups: it ends when a group closes and
/// the page is full, and the next page skips rows up to the end of that group.
struct Grouper {
    /// Clustering columns in the group key.
    prefix: usize,
    page_size: Option<usize>,
    limit: Option<usize>,
    per_partition_limit: Option<usize>,
    reversed: bool,
    /// A token-ordered scan (partitions compare by token), not a list of partitions.
    range_scan: bool,
    /// Groups returned, by earlier pages and this one (for LIMIT).
    returned: usize,
    rows: Vec<Vec<Option<Bytes>>>,
    /// The group being aggregated, with its ordinal among its partition's groups.
    open: Option<(GroupKey, Box<GroupState>, usize)>,
    last_returned: Option<(GroupKey, usize)>,
    /// The partition of the last row accepted, and how many groups of it were opened.
    partition: Option<Vec<u8>>,
    partition_groups: usize,
    /// Rows up to the end of this group were returned by earlier pages.
    skip: Option<GroupResume>,
    done: bool,
}

impl Grouper {
    fn new(plan: &Plan, prefix: usize, page_size: Option<usize>, state: &PagingState) -> Grouper {
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
    fn wanted(&self) -> usize {
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

    fn key(
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
    fn after(&self, key: &GroupKey, last: &GroupKey) -> bool {
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

    fn accept(
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

    fn close(&mut self, plan: &Plan) -> Result<(), QueryError> {
        if let Some((key, group, ordinal)) = self.open.take() {
            self.rows.push(plan.selection.finish(&group)?);
            self.returned += 1;
            self.last_returned = Some((key, ordinal));
        }
        Ok(())
    }

    /// The end of the data: the open group is complete.
    fn flush(&mut self, plan: &Plan) -> Result<(), QueryError> {
        self.close(plan)
    }

    fn resume(&self) -> Option<GroupResume> {
        self.last_returned
            .as_ref()
            .map(|(key, ordinal)| GroupResume {
                key: key.clone(),
                partition_groups: *ordinal as u32,
            })
    }
}

/// Whether a row read from storage passes the restrictions its read did not enforce.
fn passes(plan: &Plan, row: &RowValues) -> bool {
    plan.filters
        .iter()
        .enumerate()
        .all(|(i, f)| enforced_bit(plan.enforced, i) || filter_passes(plan, f, row))
}

/// Whether filter `i` is in a mask of `enforced_by_read`.
fn enforced_bit(mask: u64, i: usize) -> bool {
    i < 64 && mask & (1 << i) != 0
}

fn filter_passes(plan: &Plan, f: &Filter, row: &RowValues) -> bool {
    let table = &plan.table;
    match f {
        Filter::Compare { column, op, values } => {
            let ty = &table.columns[*column].ty;
            let Some(actual) = row.values[*column].as_deref() else {
                return false;
            };
            match op {
                Operator::In | Operator::Eq => {
                    values.iter().any(|v| types::compare(ty, actual, v).is_eq())
                }
                Operator::Contains | Operator::ContainsKey => contains(
                    ty,
                    actual,
                    values.first().map(Vec::as_slice).unwrap_or(&[]),
                    matches!(op, Operator::ContainsKey),
                ),
                _ => values
                    .first()
                    .is_some_and(|v| op_matches(op, types::compare(ty, actual, v))),
            }
        }
        Filter::MultiColumn {
            columns,
            op,
            tuples,
        } => {
            let ord_with = |tuple: &Vec<Vec<u8>>| -> Option<Ordering> {
                // Compared as tuples in the values' own order, whatever the clustering order
                // (as Cassandra does since CASSANDRA-7281).
                for (c, v) in columns.iter().zip(tuple) {
                    let col = &table.columns[*c];
                    let actual = row.values[*c].as_deref()?;
                    let ord = types::compare(&col.ty, actual, v);
                    if ord != Ordering::Equal {
                        return Some(ord);
                    }
                }
                Some(Ordering::Equal)
            };
            match op {
                Operator::In | Operator::Eq => {
                    tuples.iter().any(|t| ord_with(t) == Some(Ordering::Equal))
                }
                _ => tuples
                    .first()
                    .and_then(ord_with)
                    .is_some_and(|o| op_matches(op, o)),
            }
        }
        Filter::Token { op, value } => op_matches(op, row.token.cmp(value)),
        Filter::IsNotNull(c) => row.values[*c].is_some(),
        Filter::MapEntry { column, key, value } => {
            let CqlType::Map(key_type, value_type) = &table.columns[*column].ty else {
                return false;
            };
            row.values[*column]
                .as_deref()
                .and_then(|map| split_elements(map, 2).ok())
                .is_some_and(|entries| {
                    entries.iter().any(|e| {
                        types::compare(key_type, e[0], key).is_eq()
                            && types::compare(value_type, e[1], value).is_eq()
                    })
                })
        }
    }
}

fn contains(ty: &CqlType, collection: &[u8], needle: &[u8], key: bool) -> bool {
    match ty.unfrozen() {
        CqlType::List(e) | CqlType::Set(e) => split_elements(collection, 1)
            .map(|els| els.iter().any(|g| types::compare(e, g[0], needle).is_eq()))
            .unwrap_or(false),
        CqlType::Map(k, v) => split_elements(collection, 2)
            .map(|els| {
                els.iter().any(|g| {
                    if key {
                        types::compare(k, g[0], needle).is_eq()
                    } else {
                        types::compare(v, g[1], needle).is_eq()
                    }
                })
            })
            .unwrap_or(false),
        _ => false,
    }
}

/// The newest deletion among the partition deletion and range tombstones covering `clustering`.
fn covering_deletion(
    header: &mutation::PartitionHeader,
    clustering: &[u8],
) -> Option<DeletionTime> {
    let mut best = header.deletion;
    for rt in &header.range_tombstones {
        if covers(rt, clustering) {
            best = match best {
                Some(b) if b.marked_for_delete_at >= rt.deletion.marked_for_delete_at => Some(b),
                _ => Some(rt.deletion),
            };
        }
    }
    best
}

fn covers(rt: &RangeTombstone, key: &[u8]) -> bool {
    let after_start = match &rt.start {
        None => true,
        Some(b) if b.inclusive => key >= b.prefix.as_slice(),
        Some(b) => key > b.prefix.as_slice() && !key.starts_with(&b.prefix),
    };
    let before_end = match &rt.end {
        None => true,
        Some(b) if b.inclusive => key.starts_with(&b.prefix) || key < b.prefix.as_slice(),
        Some(b) => key < b.prefix.as_slice(),
    };
    after_start && before_end
}

fn live_cell(
    cell: &Cell,
    covering: Option<DeletionTime>,
    now: mutation::LocalTime,
) -> Option<(&[u8], Option<i32>)> {
    if covering.is_some_and(|d| cell.timestamp <= d.marked_for_delete_at) {
        return None;
    }
    match &cell.value {
        CellValue::Live { value, expiry } => match expiry {
            Some(e) if e.local_expiration_time <= now => None,
            Some(e) => Some((
                value.as_slice(),
                Some((e.local_expiration_time - now) as i32),
            )),
            None => Some((value.as_slice(), None)),
        },
        CellValue::Tombstone { .. } => None,
    }
}

fn newer(a: Option<DeletionTime>, b: Option<DeletionTime>) -> Option<DeletionTime> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if y.marked_for_delete_at > x.marked_for_delete_at {
            y
        } else {
            x
        }),
        (x, None) => x,
        (None, y) => y,
    }
}

/// Fills the non-key column values of `row` into `out`; returns whether any cell is live.
/// Simple cells' values are moved out of `row`, not copied.
fn fill_cells(
    table: &TableMetadata,
    row: &mut Row,
    covering: Option<DeletionTime>,
    now: mutation::LocalTime,
    out: &mut RowValues,
) -> bool {
    let keep_cells = !out.cells.is_empty();
    let covering = newer(covering, row.deletion);
    let mut any_live = false;
    for data in &mut row.columns {
        let (id, idx) = match data {
            ColumnData::Simple { id, .. } | ColumnData::Complex { id, .. } => {
                let Some(idx) = table.columns.iter().position(|c| c.id == *id) else {
                    continue;
                };
                (id, idx)
            }
        };
        let _ = id;
        match data {
            ColumnData::Simple { cell, .. } => {
                if let Some(ttl) = live_cell(cell, covering, now).map(|(_, ttl)| ttl) {
                    if let CellValue::Live { value, .. } = &mut cell.value {
                        out.values[idx] = Some(std::mem::take(value));
                    }
                    if let Some(t) = out.writetimes.get_mut(idx) {
                        *t = Some(cell.timestamp);
                    }
                    if let Some(t) = out.ttls.get_mut(idx) {
                        *t = ttl;
                    }
                    any_live = true;
                }
            }
            ColumnData::Complex {
                deletion, cells, ..
            } => {
                let covering = newer(covering, *deletion);
                let ty = &table.columns[idx].ty;
                let live: Vec<(&[u8], &[u8])> = cells
                    .iter()
                    .filter_map(|(path, cell)| {
                        live_cell(cell, covering, now).map(|(v, _)| (path.as_slice(), v))
                    })
                    .collect();
                if live.is_empty() {
                    continue;
                }
                any_live = true;
                out.values[idx] = Some(assemble_multi_cell(ty, &live));
                if keep_cells {
                    let mut times: Vec<CellTime> = cells
                        .iter()
                        .filter_map(|(path, cell)| {
                            live_cell(cell, covering, now).map(|(_, ttl)| CellTime {
                                path: path.clone(),
                                timestamp: cell.timestamp,
                                ttl,
                            })
                        })
                        .collect();
                    times.sort_by(|a, b| cell_order(ty, &a.path, &b.path));
                    out.cells[idx] = Some(times);
                }
            }
        }
    }
    any_live
}

/// The order of a multi-cell column's cells in its value: UDT fields by number, map and set
/// entries by key, list elements by their timeuuid's time.
fn cell_order(ty: &CqlType, a: &[u8], b: &[u8]) -> Ordering {
    match ty {
        CqlType::Udt(_) => a.cmp(b),
        CqlType::Map(k, _) | CqlType::Set(k) => types::compare(k, a, b),
        _ => types::compare(&CqlType::Timeuuid, a, b),
    }
}

/// Serialises live cells of a multi-cell column back into the collection/UDT value.
fn assemble_multi_cell(ty: &CqlType, cells: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    let put = |out: &mut Vec<u8>, b: &[u8]| {
        out.extend_from_slice(&(b.len() as i32).to_be_bytes());
        out.extend_from_slice(b);
    };
    match ty {
        CqlType::Udt(udt) => {
            for i in 0..udt.fields.len() {
                let path = (i as u16).to_be_bytes();
                match cells.iter().find(|(p, _)| *p == path.as_slice()) {
                    Some((_, v)) => put(&mut out, v),
                    None => out.extend_from_slice(&(-1i32).to_be_bytes()),
                }
            }
        }
        CqlType::Map(k, _) | CqlType::Set(k) => {
            // Paths were sorted by bytes; present them in the key type's order.
            let mut sorted: Vec<&(&[u8], &[u8])> = cells.iter().collect();
            sorted.sort_by(|a, b| types::compare(k, a.0, b.0));
            out.extend_from_slice(&(sorted.len() as i32).to_be_bytes());
            for (p, v) in sorted {
                put(&mut out, p);
                if matches!(ty, CqlType::Map(..)) {
                    put(&mut out, v);
                }
            }
        }
        _ => {
            // List paths are timeuuids: their order is time order, which raw bytes are not
            // (the low time bits come first).
            let mut sorted: Vec<&(&[u8], &[u8])> = cells.iter().collect();
            sorted.sort_by(|a, b| types::compare(&CqlType::Timeuuid, a.0, b.0));
            out.extend_from_slice(&(sorted.len() as i32).to_be_bytes());
            for (_, v) in sorted {
                put(&mut out, v);
            }
        }
    }
    out
}

/// Where a storage page's part of a partition lies within the partition.
#[derive(Debug, Clone, Copy)]
struct PartitionPosition {
    /// Earlier pages returned rows of the partition.
    rows_before: bool,
    /// The partition ends in this page.
    complete: bool,
}

/// Live rows of a partition page, in order, with key columns decoded. Cell values are moved
/// out of `data`'s rows, which are left without them.
fn partition_rows(
    plan: &Plan,
    data: &mut PartitionData,
    now: mutation::LocalTime,
    position: PartitionPosition,
) -> Vec<RowValues> {
    let table = &plan.table;
    let n = table.columns.len();
    // Write times and TTLs only for a selection that reads them (empty otherwise).
    let times = if plan.selection.needs_column_times() {
        n
    } else {
        0
    };
    let mut base = RowValues {
        values: vec![None; n],
        writetimes: vec![None; times],
        ttls: vec![None; times],
        cells: if plan.selection.needs_cell_times() {
            vec![None; n]
        } else {
            Vec::new()
        },
        token: data.key.token,
    };
    let pk_parts: Vec<Vec<u8>> = if !plan.needs_partition_key {
        Vec::new()
    } else if table.partition_key_count == 1 {
        vec![data.key.key.clone()]
    } else {
        partitioner::decompose_partition_key(&data.key.key, table.partition_key_count)
            .map(|parts| parts.into_iter().map(<[u8]>::to_vec).collect())
            .unwrap_or_default()
    };
    for (i, p) in pk_parts.into_iter().enumerate() {
        if i < table.partition_key_count {
            base.values[i] = Some(p);
        }
    }
    let partition_deletion = data.header.deletion;
    let mut static_live = false;
    if let Some(st) = &mut data.static_row {
        static_live = fill_cells(table, st, partition_deletion, now, &mut base);
    }
    // A partition with a live static row but no live clustering rows (none stored, or all
    // deleted or expired) shows up as one row of static values, once, when its last page is read
    // and no page returned a row of it; only without clustering restrictions. DISTINCT shows such
    // a partition too. (Storage already returns reversed slices in order.)
    let static_only_row = static_live
        && ((plan.static_only_rows && position.complete && !position.rows_before) || plan.distinct);
    let mut out = Vec::with_capacity(data.rows.len());
    let last = data.rows.len().saturating_sub(1);
    for (index, (clustering, row)) in data.rows.iter_mut().enumerate() {
        let covering = covering_deletion(&data.header, clustering);
        // The last row takes `base` itself unless a static-only row may still need it.
        let mut values = if index == last && !static_only_row {
            std::mem::take(&mut base)
        } else {
            base.clone()
        };
        let row_deletion = newer(covering, row.deletion);
        let marker_live = row.liveness.as_ref().is_some_and(|l| {
            row_deletion.is_none_or(|d| l.timestamp > d.marked_for_delete_at)
                && l.expiry.is_none_or(|e| e.local_expiration_time > now)
        });
        let cells_live = fill_cells(table, row, covering, now, &mut values);
        if !(marker_live || cells_live) {
            continue;
        }
        // The values as written, where they differ from the key's canonical ones.
        let forms = crate::write::clustering_forms_cell(row)
            .and_then(|cell| live_cell(cell, row_deletion, now))
            .and_then(|(bytes, _)| crate::write::split_clustering_forms(bytes))
            .filter(|forms| forms.len() == table.clustering_count);
        if let Some(forms) = forms {
            for (i, form) in forms.into_iter().enumerate() {
                values.values[table.partition_key_count + i] = Some(form.to_vec());
            }
            out.push(values);
            continue;
        }
        let mut rest = clustering.as_slice();
        for (i, col) in table.clustering().iter().enumerate() {
            match types::byte_comparable::decode(
                &col.ty,
                &mut rest,
                col.order == ClusteringOrder::Desc,
            ) {
                Ok(v) => values.values[table.partition_key_count + i] = Some(v),
                Err(e) => {
                    tracing::error!(table = %table.name, error = %e, "undecodable clustering key in storage");
                    break;
                }
            }
        }
        out.push(values);
    }
    if out.is_empty() && static_only_row {
        out.push(base);
    }
    out
}

/// What Cassandra's read metrics count in a partition as read (`ReadCommand`'s
/// `MetricRecording`): live rows (static row included), and tombstones: each dead cell (a
/// tombstone or expired, and not shadowed by a newer deletion, which Cassandra's merge drops),
/// each row deletion of a row with no live data and no dead cell, and each range tombstone's two
/// bound markers.
/// Only rows in `slice` count, when one is given: a range scan reads whole partitions, and
/// Cassandra's reads stay in the slice (a partition read returns only rows in it).
fn count_tombstones(
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
                ColumnData::Simple { id, .. } if *id == crate::write::CLUSTERING_FORMS_COLUMN => {}
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
struct TombstoneTally {
    /// The partition's index in `Plan::partitions`, for a partition-key query.
    partition: Option<usize>,
    /// The last partition's token.
    token: i64,
    live_rows: u64,
    tombstones: u64,
}

impl TombstoneTally {
    /// Adds a partition (or a page of it) read: partition `partition` of `Plan::partitions`, or
    /// `None` in a range scan. A new partition closes the previous one's command, which is
    /// returned.
    fn add(
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
    fn warning(&self, plan: &Plan, limit: Option<usize>, threshold: u64) -> Option<String> {
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
fn read_command_cql(plan: &Plan, key: Option<&PartitionKey>, limit: Option<usize>) -> String {
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

fn finish_virtual(
    plan: &Plan,
    rows: Vec<Vec<Option<Vec<u8>>>>,
    page_size: Option<usize>,
    state: PagingState,
    _now: mutation::LocalTime,
) -> Result<ResultSet, QueryError> {
    let n = plan.table.columns.len();
    let mut matching = Vec::new();
    let mut per_partition: Option<(Vec<Option<Vec<u8>>>, usize)> = None;
    for values in rows {
        let token = values
            .first()
            .and_then(|v| v.as_ref())
            .map(|k| partitioner::murmur3_token(k))
            .unwrap_or(0);
        let row = RowValues {
            values,
            writetimes: vec![None; n],
            ttls: vec![None; n],
            cells: Vec::new(),
            token,
        };
        if let Some(keys) = &plan.partitions {
            let pk = &row.values[..plan.table.partition_key_count];
            let encoded: Vec<Vec<u8>> = pk.iter().map(|v| v.clone().unwrap_or_default()).collect();
            if !keys.contains(&plan.table, &encoded) {
                continue;
            }
        }
        // A virtual table's plan enforces nothing by its read: every restriction is checked.
        if !passes(plan, &row) {
            continue;
        }
        let pk: Vec<Option<Vec<u8>>> = row.values[..plan.table.partition_key_count].to_vec();
        let count = match &mut per_partition {
            Some((k, c)) if *k == pk => {
                *c += 1;
                *c
            }
            _ => {
                per_partition = Some((pk, 1));
                1
            }
        };
        // With GROUP BY, PER PARTITION LIMIT counts groups (the grouper applies it).
        let over_limit =
            plan.group_by.is_none() && plan.per_partition_limit.is_some_and(|l| count > l);
        if over_limit || (plan.distinct && count > 1) {
            continue;
        }
        matching.push(row);
    }
    if plan.slice.reversed {
        matching.reverse();
    }
    if plan.aggregate {
        let mut group = plan.selection.new_group();
        for row in &matching {
            plan.selection.add_row(&mut group, row)?;
        }
        return Ok(ResultSet {
            columns: plan.selection.specs.clone(),
            rows: vec![plan.selection.finish(&group)?],
            paging_state: None,
            skip_metadata: false,
        });
    }
    // Node-local tables are small: build every result row (or group), then cut the page.
    let grouped: Option<Vec<Vec<Option<Bytes>>>> = match plan.group_by {
        Some(prefix) => {
            let mut grouper = Grouper::new(plan, prefix, None, &PagingState::default());
            grouper.limit = None;
            for row in &matching {
                let pk: Vec<Vec<u8>> = row.values[..plan.table.partition_key_count]
                    .iter()
                    .map(|v| v.clone().unwrap_or_default())
                    .collect();
                let key = partition_key(&plan.table, &pk)?;
                grouper.accept(plan, &key, row)?;
            }
            grouper.flush(plan)?;
            Some(grouper.rows)
        }
        None => None,
    };
    let total = grouped.as_ref().map_or(matching.len(), Vec::len);
    let offset = state.returned as usize;
    let limit = plan.limit.unwrap_or(usize::MAX);
    let end_by_limit = limit.min(total);
    let end = match page_size {
        Some(p) => (offset + p).min(end_by_limit),
        None => end_by_limit,
    };
    let range = offset.min(end)..end;
    let rows = match grouped {
        Some(mut all) => {
            all.truncate(range.end);
            all.drain(..range.start);
            all
        }
        None => matching[range]
            .iter()
            .map(|r| plan.selection.project(r))
            .collect::<Result<_, _>>()?,
    };
    let paging_state = (end < end_by_limit).then(|| {
        PagingState {
            returned: end as u32,
            ..Default::default()
        }
        .encode()
    });
    Ok(ResultSet {
        columns: plan.selection.specs.clone(),
        rows,
        paging_state,
        skip_metadata: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_elements_are_in_time_order_not_byte_order() {
        // Ticks 2^32 - 1 and 2^32: the later one has the smaller first bytes (time_low wraps
        // every ~7 minutes), so byte order would put it first.
        let node = 0x0000_0100_0000_0000;
        let early = crate::eval::timeuuid_from_ticks(0xFFFF_FFFF, node);
        let late = crate::eval::timeuuid_from_ticks(0x1_0000_0000, node);
        assert!(late.as_bytes() < early.as_bytes());
        let cells: Vec<(&[u8], &[u8])> = vec![(late.as_bytes(), b"2"), (early.as_bytes(), b"1")];
        let list = assemble_multi_cell(&CqlType::List(Box::new(CqlType::Text)), &cells);
        let elements = crate::write::split_elements(&list, 1).expect("a list");
        assert_eq!(elements, vec![vec![&b"1"[..]], vec![&b"2"[..]]]);
    }

    #[test]
    fn paging_state_round_trips_and_rejects_garbage() {
        let s = PagingState {
            partition_index: 3,
            returned: 10,
            partition_returned: 2,
            resume: Some(vec![1, 2, 3]),
            last_partition: None,
            group: None,
        };
        assert_eq!(PagingState::decode(&s.encode()).ok(), Some(s));
        assert!(PagingState::decode(&[]).is_err());
        assert!(PagingState::decode(&[1, 0, 0]).is_err());
        assert!(PagingState::decode(&[1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9]).is_err());
    }

    #[test]
    fn range_tombstone_cover() {
        let d = DeletionTime {
            marked_for_delete_at: 1,
            local_deletion_time: 0,
        };
        let rt = RangeTombstone {
            start: Some(mutation::ClusteringBound {
                prefix: vec![5],
                inclusive: true,
            }),
            end: Some(mutation::ClusteringBound {
                prefix: vec![7],
                inclusive: false,
            }),
            deletion: d,
        };
        assert!(covers(&rt, &[5, 1]));
        assert!(covers(&rt, &[6]));
        assert!(!covers(&rt, &[7]));
        assert!(!covers(&rt, &[4, 9]));
        let prefix = RangeTombstone {
            start: Some(mutation::ClusteringBound {
                prefix: vec![5],
                inclusive: true,
            }),
            end: Some(mutation::ClusteringBound {
                prefix: vec![5],
                inclusive: true,
            }),
            deletion: d,
        };
        assert!(covers(&prefix, &[5, 0, 1]));
        assert!(!covers(&prefix, &[6]));
    }
}
