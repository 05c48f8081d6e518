//! INSERT, UPDATE, DELETE and BATCH: statements become partition updates (blind writes; nothing
//! is read before writing).

use std::collections::BTreeMap;
use std::sync::Arc;

use coordinator::{ConsistencyLevel, Coordinator};
use cql_syntax::ast::{
    Assignment, Delete, DeleteSelector, Insert, InsertValues, Operator, Relation, RelationValue,
    Statement, Term, Update, Using,
};
use mutation::{
    Cell, CellValue, ClusteringBound, ColumnData, DeletionTime, Expiry, LivenessInfo,
    PartitionHeader, RangeTombstone, Row,
};
use mutation::{PartitionKey, PartitionUpdate};
use schema::{ColumnKind, ColumnMetadata, Schema, TableMetadata};
use types::CqlType;

use crate::bind::{column, resolve_table, Bound};
use crate::elements::{read_optional, split_elements};
use crate::eval::{evaluate, TermValue};
use crate::interface::PlanCache;
use crate::keys::{
    clustering_forms, clustering_key, partition_key, row_clustering_key, CLUSTERING_FORMS_COLUMN,
};
use crate::limits::{InSelectGuardrails, KeyKind};
use crate::select::term_text::op_name;
use crate::slices::TupleBound;
use crate::QueryError;

/// Cassandra's limit on TTLs: 20 years.
pub(crate) const MAX_TTL_SECONDS: i64 = schema::MAX_TTL_SECONDS as i64;
pub(crate) struct WriteContext<'a> {
    pub schema: &'a Schema,
    pub keyspace: Option<&'a str>,
    pub values: &'a [Bound],
    pub default_timestamp: i64,
    pub now_seconds: mutation::LocalTime,
    pub in_batch: bool,
    /// The current contents of the lists that operations by index or value need (`l[i] = v`,
    /// `DELETE l[i]`, `l = l - [..]`): `None` on the first pass, which records the reads in
    /// `MutationSet::list_reads`; the caller reads them and runs the statement again with them.
    pub lists: Option<&'a ListState>,
    /// A prepared INSERT's plan, kept between executions; `None` for a statement that was not
    /// prepared (and for the statements inside a BATCH statement's text).
    pub insert_cache: Option<&'a PlanCache>,
    /// The guardrail on the products of IN restrictions, which Cassandra applies to the keys of
    /// UPDATE and DELETE too.
    pub in_select_guardrails: &'a InSelectGuardrails,
}

/// What an `INSERT` resolves by name, once: its table, and where each column it lists sits in
/// the table's columns. A prepared INSERT keeps its plan (in its `PlanCache`) for the schema
/// version it was made against, so an execution does not look the table and its columns up
/// again (a linear search by name per column).
#[derive(Debug)]
pub(crate) struct InsertPlan {
    table: Arc<TableMetadata>,
    /// For `INSERT ... VALUES`, the index in `table.columns` of each listed column, in the
    /// statement's order; empty for `INSERT ... JSON`, whose columns come with each value.
    indexes: Vec<usize>,
}

fn plan_insert(s: &Insert, ctx: &WriteContext<'_>) -> Result<InsertPlan, QueryError> {
    let table = writable_table(ctx, s.table.keyspace.as_ref(), &s.table.name)?;
    if s.if_not_exists {
        return Err(QueryError::Invalid(
            "Lightweight transactions (INSERT ... IF NOT EXISTS) are not supported yet by Helenus"
                .to_string(),
        ));
    }
    let mut indexes = Vec::new();
    if let InsertValues::Values { columns, values } = &s.values {
        if columns.len() != values.len() {
            return Err(QueryError::Invalid(
                "Unmatched column names/values".to_string(),
            ));
        }
        indexes.reserve_exact(columns.len());
        for name in columns {
            let col = column(table, name)?;
            let idx = table.column_index(&col.name).unwrap_or(0);
            if indexes.contains(&idx) {
                return Err(QueryError::Invalid(
                    "The column names contains duplicates".to_string(),
                ));
            }
            indexes.push(idx);
        }
    }
    Ok(InsertPlan {
        table: table.clone(),
        indexes,
    })
}

/// Which list a read-before-write needs: table, partition, row (`None`: the static row) and
/// column.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct ListRead {
    pub keyspace: String,
    pub table: uuid::Uuid,
    pub token: i64,
    pub partition_key: Vec<u8>,
    pub clustering: Option<Vec<u8>>,
    pub column: u32,
}

/// A list's live elements in list order, as (cell path, value).
type ListElements = Vec<(Vec<u8>, Vec<u8>)>;

/// Lists read for `ListRead`s.
#[derive(Default)]
pub(crate) struct ListState {
    pub lists: BTreeMap<ListRead, ListElements>,
}

/// An operation on a list that needs its current contents.
enum ListOp {
    SetIndex(i32, TermValue),
    DeleteIndex(i32),
    Remove(Vec<Vec<u8>>),
}

/// Updates grouped by table and partition, so a batch touching one partition twice produces one
/// partition update.
#[derive(Default)]
pub(crate) struct MutationSet {
    pub partitions: BTreeMap<(uuid::Uuid, Vec<u8>), (String, PartitionUpdate)>,
    /// Lists to read before the statements can be applied (see `WriteContext::lists`).
    pub list_reads: std::collections::BTreeSet<ListRead>,
    /// Client warnings of the guardrails (`in_select_cartesian_product_warn_threshold`).
    pub warnings: Vec<String>,
}

impl MutationSet {
    fn partition(&mut self, table: &TableMetadata, key: PartitionKey) -> &mut PartitionUpdate {
        let entry = self
            .partitions
            .entry((table.id, key.key.clone()))
            .or_insert_with(|| {
                (
                    table.keyspace.clone(),
                    PartitionUpdate {
                        table: table.id,
                        key,
                        header: None,
                        static_row: None,
                        rows: Vec::new(),
                    },
                )
            });
        &mut entry.1
    }
}

pub(crate) fn collect_mutations(
    statement: &Statement,
    ctx: &WriteContext<'_>,
    out: &mut MutationSet,
) -> Result<(), QueryError> {
    match statement {
        Statement::Insert(s) => insert(s, ctx, out),
        Statement::Update(s) => update(s, ctx, out),
        Statement::Delete(s) => delete(s, ctx, out),
        Statement::Batch(b) => {
            if ctx.in_batch {
                return Err(QueryError::Syntax("Batches cannot be nested".to_string()));
            }
            // Its kind was checked by `analyze::analyze`, which runs for every statement.
            let timestamp = match &b.using.timestamp {
                Some(t) => eval_timestamp(t, ctx)?,
                None => ctx.default_timestamp,
            };
            if b.using.ttl.is_some() {
                return Err(QueryError::Invalid(
                    "Global TTL on the BATCH statement is not supported.".to_string(),
                ));
            }
            if b.using.timestamp.is_some() && b.statements.iter().any(has_own_timestamp) {
                return Err(QueryError::Invalid(
                    "Timestamp must be set either on BATCH or individual statements".to_string(),
                ));
            }
            let inner = WriteContext {
                schema: ctx.schema,
                keyspace: ctx.keyspace,
                values: ctx.values,
                default_timestamp: timestamp,
                now_seconds: ctx.now_seconds,
                in_batch: true,
                lists: ctx.lists,
                insert_cache: None,
                in_select_guardrails: ctx.in_select_guardrails,
            };
            for s in &b.statements {
                collect_mutations(s, &inner, out)?;
            }
            Ok(())
        }
        _ => Err(QueryError::Invalid(
            "Only INSERT, UPDATE and DELETE statements are allowed in a batch".to_string(),
        )),
    }
}

fn has_own_timestamp(statement: &Statement) -> bool {
    match statement {
        Statement::Insert(s) => s.using.timestamp.is_some(),
        Statement::Update(s) => s.using.timestamp.is_some(),
        Statement::Delete(s) => s.using.timestamp.is_some(),
        _ => false,
    }
}

/// Sends collected mutations to the coordinator, one write per keyspace (each replica applies
/// it with its own commit log mode and the keyspace's `durable_writes`); a LOGGED batch
/// (`WriteType::Batch`) as one write through the batch log, whatever keyspaces it spans.
pub(crate) async fn send_mutations(
    coordinator: &Coordinator,
    schema: &Schema,
    set: MutationSet,
    consistency: ConsistencyLevel,
    write_type: coordinator::WriteType,
    deadline: coordinator::Deadline,
) -> Result<(), QueryError> {
    let mut by_keyspace: Vec<(String, Vec<PartitionUpdate>)> = Vec::with_capacity(1);
    for (_, (ks, update)) in set.partitions {
        // Usually one keyspace (always for a single statement): a scan beats a map.
        match by_keyspace.iter_mut().find(|(k, _)| *k == ks) {
            Some((_, updates)) => updates.push(update),
            None => by_keyspace.push((ks, vec![update])),
        }
    }
    let mut writes = Vec::with_capacity(by_keyspace.len());
    for (ks, updates) in by_keyspace {
        let keyspace = schema
            .keyspace(&ks)
            .ok_or_else(|| QueryError::Invalid(format!("keyspace {ks} does not exist")))?;
        writes.push((keyspace.as_ref(), updates));
    }
    if write_type == coordinator::WriteType::Batch {
        coordinator
            .write_logged_batch(writes, consistency, deadline)
            .await?;
        return Ok(());
    }
    for (keyspace, updates) in writes {
        coordinator
            .write(keyspace, updates, consistency, write_type, deadline)
            .await?;
    }
    Ok(())
}

fn writable_table<'a>(
    ctx: &WriteContext<'a>,
    ks: Option<&cql_syntax::ast::Identifier>,
    name: &cql_syntax::ast::Identifier,
) -> Result<&'a Arc<TableMetadata>, QueryError> {
    let table = resolve_table(ctx.schema, ks, ctx.keyspace, name)?;
    if table.virtual_table {
        return Err(QueryError::Invalid(format!(
            "Modification is not supported on table {}.{} of a system keyspace",
            table.keyspace, table.name
        )));
    }
    if table.is_counter_table() {
        return Err(QueryError::Invalid(
            "Counter tables are not supported yet by Helenus".to_string(),
        ));
    }
    Ok(table)
}

fn eval_timestamp(t: &Term, ctx: &WriteContext<'_>) -> Result<i64, QueryError> {
    match evaluate(t, &CqlType::Bigint, "[timestamp]", ctx.values)? {
        TermValue::Value(b) if b.len() == 8 => {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b);
            let ts = i64::from_be_bytes(a);
            if ts == i64::MIN {
                return Err(QueryError::Invalid(format!(
                    "The timestamp must not be equal to {}",
                    i64::MIN
                )));
            }
            Ok(ts)
        }
        TermValue::Unset => Ok(ctx.default_timestamp),
        _ => Err(QueryError::Invalid(
            "Invalid null value of timestamp".to_string(),
        )),
    }
}

struct WriteAttributes {
    timestamp: i64,
    expiry: Option<Expiry>,
}

fn attributes(
    u: &Using,
    table: &TableMetadata,
    ctx: &WriteContext<'_>,
) -> Result<WriteAttributes, QueryError> {
    let timestamp = match &u.timestamp {
        Some(t) => eval_timestamp(t, ctx)?,
        None => ctx.default_timestamp,
    };
    let ttl: i64 = match &u.ttl {
        Some(t) => match evaluate(t, &CqlType::Int, "[ttl]", ctx.values)? {
            TermValue::Value(b) if b.len() == 4 => {
                i32::from_be_bytes([b[0], b[1], b[2], b[3]]) as i64
            }
            TermValue::Unset => table.options.default_time_to_live as i64,
            // A null TTL means none, even where the table has a default (Cassandra's
            // `Attributes.getTimeToLive`).
            TermValue::Null => 0,
            TermValue::Value(_) => {
                return Err(QueryError::Invalid("Invalid TTL value".to_string()))
            }
        },
        None => table.options.default_time_to_live as i64,
    };
    if ttl < 0 {
        return Err(QueryError::Invalid(format!(
            "A TTL must be greater or equal to 0, but was {ttl}"
        )));
    }
    if ttl > MAX_TTL_SECONDS {
        return Err(QueryError::Invalid(format!(
            "ttl is too large. requested ({ttl}) maximum ({MAX_TTL_SECONDS})"
        )));
    }
    let expiry = (ttl > 0).then(|| Expiry {
        ttl_seconds: ttl as i32,
        local_expiration_time: ctx.now_seconds.saturating_add(ttl as u32),
    });
    Ok(WriteAttributes { timestamp, expiry })
}

/// Adds the `CLUSTERING_FORMS_COLUMN` cell to a row written with live data, if its clustering
/// values need it; `row`'s columns are sorted, and stay so.
fn add_clustering_forms(
    table: &TableMetadata,
    values: &[Vec<u8>],
    attrs: &WriteAttributes,
    row: &mut Row,
) {
    let live = row.liveness.is_some()
        || row.columns.iter().any(|c| match c {
            ColumnData::Simple { cell, .. } => matches!(cell.value, CellValue::Live { .. }),
            ColumnData::Complex { cells, .. } => cells
                .iter()
                .any(|(_, cell)| matches!(cell.value, CellValue::Live { .. })),
        });
    if !live {
        return;
    }
    if let Some(forms) = clustering_forms(table, values) {
        row.columns.push(ColumnData::Simple {
            id: CLUSTERING_FORMS_COLUMN,
            cell: cell(attrs, forms),
        });
    }
}

fn key_value(col: &ColumnMetadata, v: TermValue) -> Result<Vec<u8>, QueryError> {
    match v {
        TermValue::Value(b) => Ok(b),
        TermValue::Null => Err(QueryError::Invalid(format!(
            "Invalid null value in condition for column {}",
            col.name
        ))),
        TermValue::Unset => Err(QueryError::Invalid(format!(
            "Invalid unset value for column {}",
            col.name
        ))),
    }
}

fn cell(attrs: &WriteAttributes, value: Vec<u8>) -> Cell {
    Cell {
        timestamp: attrs.timestamp,
        value: CellValue::Live {
            value,
            expiry: attrs.expiry,
        },
    }
}

fn tombstone(timestamp: i64, now: mutation::LocalTime) -> Cell {
    Cell {
        timestamp,
        value: CellValue::Tombstone {
            local_deletion_time: now,
        },
    }
}

/// Column data for setting `col` to `value` (a whole value): a simple cell, or for a multi-cell
/// column a tombstone for the previous contents plus one cell per element.
fn set_column(
    col: &ColumnMetadata,
    value: TermValue,
    attrs: &WriteAttributes,
    now: mutation::LocalTime,
) -> Result<Option<ColumnData>, QueryError> {
    if !col.ty.is_multi_cell() {
        return Ok(match value {
            TermValue::Unset => None,
            TermValue::Null => Some(ColumnData::Simple {
                id: col.id,
                cell: tombstone(attrs.timestamp, now),
            }),
            TermValue::Value(b) => {
                if b.len() > i32::MAX as usize {
                    return Err(QueryError::Invalid("Value too large".to_string()));
                }
                Some(ColumnData::Simple {
                    id: col.id,
                    cell: cell(attrs, b),
                })
            }
        });
    }
    // Overwriting a collection deletes what was there just before this write (timestamp - 1,
    // as Cassandra does, so the new elements written at `timestamp` survive).
    let deletion = Some(DeletionTime {
        marked_for_delete_at: attrs.timestamp - 1,
        local_deletion_time: now,
    });
    let bytes = match value {
        TermValue::Unset => return Ok(None),
        TermValue::Null => {
            return Ok(Some(ColumnData::Complex {
                id: col.id,
                deletion,
                cells: Vec::new(),
            }))
        }
        TermValue::Value(b) => b,
    };
    let cells = multi_cell_elements(&col.ty, &bytes, attrs)?;
    Ok(Some(ColumnData::Complex {
        id: col.id,
        deletion,
        cells,
    }))
}

/// One element (map entry, set element) or UDT field of a multi-cell column: a cell at `path`,
/// a tombstone for null, nothing for unset.
fn element_data(
    col: &ColumnMetadata,
    path: Vec<u8>,
    value: TermValue,
    attrs: &WriteAttributes,
    now: mutation::LocalTime,
) -> Option<ColumnData> {
    let cell = match value {
        TermValue::Unset => return None,
        TermValue::Null => tombstone(attrs.timestamp, now),
        TermValue::Value(v) => cell(attrs, v),
    };
    Some(ColumnData::Complex {
        id: col.id,
        deletion: None,
        cells: vec![(path, cell)],
    })
}

/// The index and type of field `name` of the non-frozen UDT column `col`; `tail` is what
/// Cassandra's error text quotes after the field (`= 5` for a SET, ` ?` for a DELETE).
fn udt_field(col: &ColumnMetadata, name: &str, tail: &str) -> Result<(usize, CqlType), QueryError> {
    match &col.ty {
        CqlType::Udt(u) => u
            .fields
            .iter()
            .position(|(n, _)| n == name)
            .map(|i| (i, u.fields[i].1.clone()))
            .ok_or_else(|| {
                QueryError::Invalid(format!(
                    "UDT column {} does not have a field named {name}",
                    col.name
                ))
            }),
        CqlType::Frozen(inner) if matches!(**inner, CqlType::Udt(_)) => {
            Err(QueryError::Invalid(format!(
                "Invalid operation ({}.{name} {tail}) for frozen UDT column {}",
                col.name, col.name
            )))
        }
        _ => Err(QueryError::Invalid(format!(
            "Invalid operation ({}.{name} {tail}) for non-UDT column {}",
            col.name, col.name
        ))),
    }
}

fn push_by_kind(
    col: &ColumnMetadata,
    data: Option<ColumnData>,
    regular: &mut Row,
    static_row: &mut Row,
) {
    if let Some(data) = data {
        if col.kind == ColumnKind::Static {
            static_row.columns.push(data);
        } else {
            regular.columns.push(data);
        }
    }
}

/// Cells for `[..] + list`: timeuuid paths that sort before every element already in the list
/// and before those of earlier prepends, in the order given (Cassandra's `Lists.Prepender`).
fn prepended_list_elements(
    bytes: &[u8],
    attrs: &WriteAttributes,
) -> Result<Vec<(Vec<u8>, Cell)>, QueryError> {
    let elements = split_elements(bytes, 1)?;
    let paths = crate::timeuuid::prepend_timeuuids(elements.len());
    let mut cells: Vec<_> = paths
        .into_iter()
        .zip(elements)
        .map(|(path, e)| (path.as_bytes().to_vec(), cell(attrs, e[0].to_vec())))
        .collect();
    cells.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(cells)
}

/// Splits a serialised collection or UDT into (cell path, cell) pairs sorted by path.
fn multi_cell_elements(
    ty: &CqlType,
    bytes: &[u8],
    attrs: &WriteAttributes,
) -> Result<Vec<(Vec<u8>, Cell)>, QueryError> {
    let mut cells = Vec::new();
    match ty {
        CqlType::List(_) => {
            for element in split_elements(bytes, 1)? {
                let path = crate::timeuuid::new_timeuuid().as_bytes().to_vec();
                cells.push((path, cell(attrs, element[0].to_vec())));
            }
        }
        CqlType::Set(_) => {
            for element in split_elements(bytes, 1)? {
                cells.push((element[0].to_vec(), cell(attrs, Vec::new())));
            }
        }
        CqlType::Map(_, _) => {
            for pair in split_elements(bytes, 2)? {
                cells.push((pair[0].to_vec(), cell(attrs, pair[1].to_vec())));
            }
        }
        CqlType::Udt(udt) => {
            let mut rest = bytes;
            for i in 0..udt.fields.len() {
                if rest.is_empty() {
                    break;
                }
                let (value, tail) = read_optional(rest)?;
                rest = tail;
                if let Some(v) = value {
                    cells.push(((i as u16).to_be_bytes().to_vec(), cell(attrs, v.to_vec())));
                }
            }
        }
        _ => {}
    }
    // List paths are timeuuids made in order, sets/maps were sorted by their type's order;
    // storage wants them sorted by path bytes.
    cells.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(cells)
}

/// `INSERT ... JSON '{..}'`: one value per column, from the JSON object's entries (keys are
/// column names, lowercased unless double-quoted); columns it does not name are null (DEFAULT
/// NULL, the default) or left untouched (DEFAULT UNSET).
fn json_values(
    table: &TableMetadata,
    value: &Term,
    default: &cql_syntax::ast::JsonDefault,
    ctx: &WriteContext<'_>,
) -> Result<Vec<Option<TermValue>>, QueryError> {
    let text = match evaluate(value, &CqlType::Text, "[json]", ctx.values)? {
        TermValue::Value(b) => String::from_utf8(b)
            .map_err(|_| QueryError::Invalid("JSON value is not valid UTF-8".to_string()))?,
        TermValue::Null | TermValue::Unset => {
            return Err(QueryError::Invalid(
                "Got null for INSERT JSON values".to_string(),
            ))
        }
    };
    let object = match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(serde_json::Value::Object(object)) => object,
        Ok(other) => {
            return Err(QueryError::Invalid(format!(
                "Could not decode JSON string as a map: {other} is not a JSON object"
            )))
        }
        Err(e) => {
            return Err(QueryError::Invalid(format!(
                "Could not decode JSON string as a map: {e}"
            )))
        }
    };
    let missing = match default {
        cql_syntax::ast::JsonDefault::Unset => None,
        cql_syntax::ast::JsonDefault::Null => Some(TermValue::Null),
    };
    let mut given: Vec<Option<TermValue>> = vec![missing; table.columns.len()];
    // A JSON insert names every primary key column: one it leaves out is unset under DEFAULT
    // UNSET (Cassandra: "Invalid unset value for column c"), not missing.
    let key_count = table.partition_key_count + table.clustering_count;
    for v in given.iter_mut().take(key_count) {
        v.get_or_insert(TermValue::Unset);
    }
    for (key, json) in &object {
        let name = types::json_key_to_name(key);
        let idx = table.column_index(&name).ok_or_else(|| {
            QueryError::Invalid(format!(
                "JSON values map contains unrecognized column: {name}"
            ))
        })?;
        let col = &table.columns[idx];
        let decode_error = |e: &dyn std::fmt::Display| {
            QueryError::Invalid(format!("Error decoding JSON value for {name}: {e}"))
        };
        given[idx] = Some(
            match types::Value::from_json(&col.ty, json).map_err(|e| decode_error(&e))? {
                None => TermValue::Null,
                Some(v) => {
                    let mut bytes = Vec::new();
                    v.encode(&mut bytes);
                    match types::canonicalize(&col.ty, &bytes).map_err(|e| decode_error(&e))? {
                        Some(canonical) => TermValue::Value(canonical),
                        None => TermValue::Value(bytes),
                    }
                }
            },
        );
    }
    Ok(given)
}

fn insert(s: &Insert, ctx: &WriteContext<'_>, out: &mut MutationSet) -> Result<(), QueryError> {
    let plan = match ctx.insert_cache {
        Some(cache) => cache.get_or_compile(ctx.schema.version, || plan_insert(s, ctx))?,
        None => Arc::new(plan_insert(s, ctx)?),
    };
    let table = &*plan.table;
    let attrs = attributes(&s.using, table, ctx)?;
    let mut given: Vec<Option<TermValue>> = match &s.values {
        InsertValues::Json { value, default } => json_values(table, value, default, ctx)?,
        InsertValues::Values { values, .. } => {
            let mut given: Vec<Option<TermValue>> = vec![None; table.columns.len()];
            for (&idx, term) in plan.indexes.iter().zip(values) {
                let col = &table.columns[idx];
                given[idx] = Some(evaluate(term, &col.ty, &col.name, ctx.values)?);
            }
            given
        }
    };
    let mut pk = Vec::new();
    let mut missing = Vec::new();
    for (i, col) in table.partition_key().iter().enumerate() {
        match given[i].take() {
            Some(v) => pk.push(key_value(col, v)?),
            None => missing.push(col.name.clone()),
        }
    }
    if !missing.is_empty() {
        return Err(QueryError::Invalid(format!(
            "Some partition key parts are missing: {}",
            missing.join(", ")
        )));
    }
    let mut ck = Vec::new();
    for (i, col) in table.clustering().iter().enumerate() {
        match given[table.partition_key_count + i].take() {
            Some(v) => ck.push(key_value(col, v)?),
            None => missing.push(col.name.clone()),
        }
    }
    // Cassandra's `appliesOnlyToStaticColumns`: at least one static column, and no regular one.
    let mut sets_static = false;
    let mut sets_regular = false;
    for (i, c) in table.non_key_columns().iter().enumerate() {
        if given[table.partition_key_count + table.clustering_count + i].is_some() {
            sets_static |= c.kind == ColumnKind::Static;
            sets_regular |= c.kind != ColumnKind::Static;
        }
    }
    let static_only = sets_static && !sets_regular;
    if !(missing.is_empty() || (ck.is_empty() && static_only)) {
        return Err(QueryError::Invalid(format!(
            "Some clustering keys are missing: {}",
            missing.join(", ")
        )));
    }
    let key = partition_key(table, &pk)?;
    let mut regular = Row::default();
    let mut static_row = Row::default();
    for (i, col) in table.non_key_columns().iter().enumerate() {
        let Some(v) = given[table.partition_key_count + table.clustering_count + i].take() else {
            continue;
        };
        if let Some(data) = set_column(col, v, &attrs, ctx.now_seconds)? {
            if col.kind == ColumnKind::Static {
                static_row.columns.push(data);
            } else {
                regular.columns.push(data);
            }
        }
    }
    sort_columns(&mut regular);
    sort_columns(&mut static_row);
    let partition = out.partition(table, key);
    if !ck.is_empty() || table.clustering_count == 0 {
        // The row marker: keeps the row alive even if every regular column is null.
        regular.liveness = Some(LivenessInfo {
            timestamp: attrs.timestamp,
            expiry: attrs.expiry,
        });
        add_clustering_forms(table, &ck, &attrs, &mut regular);
        push_row(partition, row_clustering_key(table, &ck)?, regular);
    }
    if !static_row.columns.is_empty() {
        merge_static(partition, static_row);
    }
    Ok(())
}

fn sort_columns(row: &mut Row) {
    row.columns.sort_by_key(|c| match c {
        ColumnData::Simple { id, .. } | ColumnData::Complex { id, .. } => *id,
    });
}

fn push_row(partition: &mut PartitionUpdate, clustering: Vec<u8>, row: Row) {
    if let Some(existing) = partition.rows.iter_mut().find(|(c, _)| *c == clustering) {
        let merged = std::mem::take(&mut existing.1).merge(row);
        existing.1 = merged;
    } else {
        partition.rows.push((clustering, row));
        partition.rows.sort_by(|a, b| a.0.cmp(&b.0));
    }
}

fn merge_static(partition: &mut PartitionUpdate, row: Row) {
    partition.static_row = Some(match partition.static_row.take() {
        Some(existing) => existing.merge(row),
        None => row,
    });
}

fn merge_header(partition: &mut PartitionUpdate, header: PartitionHeader) {
    partition.header = Some(match partition.header.take() {
        Some(existing) => existing.merge(header),
        None => header,
    });
}

/// `(c1, c2) IN ((..), (..))`: the index of its first column, its width (columns), and its
/// tuples, each one value per column (none for an empty IN).
type MultiColumnIn = (usize, usize, Vec<Vec<Vec<u8>>>);

/// The primary-key restrictions of an UPDATE or DELETE: every combination of partition key
/// values (IN gives several), and the clustering restriction.
struct KeyRestrictions {
    partitions: Vec<Vec<Vec<u8>>>,
    /// Values for a prefix of the clustering columns; each entry one combination (none for an
    /// empty IN).
    clustering_prefixes: Vec<Vec<Vec<u8>>>,
    /// How many clustering columns the prefix restricts.
    prefix_len: usize,
    /// A slice on the clustering columns after the prefix (DELETE only): its lower and upper
    /// bounds, compared in the values' order whatever the clustering order (`c > v` is a
    /// lower bound on a DESC column too).
    slice: Option<(Option<TupleBound>, Option<TupleBound>)>,
}

impl KeyRestrictions {
    /// Whether the statement writes nothing, as Cassandra's `ModificationStatement` returns
    /// without a mutation: an empty IN on the partition key (no partition) or on a clustering
    /// column (no clustering; the statement's static columns are not written either).
    fn selects_nothing(&self) -> bool {
        self.partitions.is_empty() || (self.prefix_len > 0 && self.clustering_prefixes.is_empty())
    }
}

/// Cassandra's refusal of a DELETE of named columns over a range of rows.
const RANGE_DELETION_OF_COLUMNS: &str = "Range deletions are not supported for specific columns";

/// Cassandra's refusals of one relation of an UPDATE's or DELETE's WHERE clause by itself,
/// raised in the order the relations are written, before any is merged with another
/// (`StatementRestrictions`): CONTAINS, `!=`, `IS NOT NULL`, and token()'s arguments.
fn check_modification_relation(
    table: &TableMetadata,
    relation: &Relation,
    statement: &str,
) -> Result<(), QueryError> {
    match relation {
        Relation::Simple {
            op: op @ (Operator::Contains | Operator::ContainsKey),
            ..
        } => Err(QueryError::Invalid(format!(
            "Cannot use {statement} with {}",
            op_name(op)
        ))),
        Relation::IsNotNull(c) => Err(QueryError::Invalid(format!(
            "Unsupported restriction: {} IS NOT NULL",
            column(table, c)?.name
        ))),
        Relation::Token { columns, .. } => {
            crate::select::restrictions::check_not_equal(table, relation)?;
            crate::select::restrictions::check_token_columns(table, columns)
        }
        _ => crate::select::restrictions::check_not_equal(table, relation),
    }
}

/// What Cassandra refuses of an UPDATE's or DELETE's WHERE clause at PREPARE, whatever values
/// are bound (`analyze::analyze` runs it for every such statement; `key_restrictions` checks
/// the same again with the values): each relation by itself, token() without the whole
/// partition key, and clustering restrictions when only static columns are written.
/// `only_static`: the statement writes static columns only.
pub(crate) fn check_modification_where(
    table: &TableMetadata,
    relations: &[Relation],
    statement: &str,
    only_static: bool,
) -> Result<(), QueryError> {
    for rel in relations {
        check_modification_relation(table, rel, statement)?;
    }
    // Merging token bounds refuses a second of a kind whatever their values.
    let mut tokens = TokenBounds::default();
    for rel in relations {
        if let Relation::Token { op, .. } = rel {
            tokens.add(table, op, 0)?;
        }
    }
    let mut key_given = vec![false; table.partition_key_count];
    let mut clustering_restricted = false;
    for rel in relations {
        match rel {
            Relation::Simple {
                column: c,
                op: Operator::Eq | Operator::In,
                ..
            } => {
                let col = column(table, c)?;
                match col.kind {
                    ColumnKind::PartitionKey => key_given[col.position.max(0) as usize] = true,
                    ColumnKind::Clustering => clustering_restricted = true,
                    _ => {}
                }
            }
            Relation::Simple { column: c, op, .. } => {
                let col = column(table, c)?;
                if col.kind == ColumnKind::PartitionKey
                    && matches!(
                        op,
                        Operator::Lt | Operator::Lte | Operator::Gt | Operator::Gte
                    )
                {
                    return Err(QueryError::Invalid(format!(
                        "Only EQ and IN relation are supported on the partition key (unless you use the token() function) for {statement} statements"
                    )));
                }
                clustering_restricted |= col.kind == ColumnKind::Clustering;
            }
            Relation::MultiColumn { .. } => clustering_restricted = true,
            _ => {}
        }
    }
    let token = relations
        .iter()
        .any(|r| matches!(r, Relation::Token { .. }));
    if token && !key_given.iter().all(|given| *given) {
        return Err(QueryError::Invalid(format!(
            "The token function cannot be used in WHERE clauses for {statement} statements"
        )));
    }
    let missing: Vec<&str> = table
        .partition_key()
        .iter()
        .zip(&key_given)
        .filter(|(_, given)| !**given)
        .map(|(c, _)| c.name.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(QueryError::Invalid(format!(
            "Some partition key parts are missing: {}",
            missing.join(", ")
        )));
    }
    if only_static && clustering_restricted {
        return Err(QueryError::Invalid(format!(
            "Invalid restrictions on clustering columns since the {statement} statement modifies only static columns"
        )));
    }
    let mut non_key = Vec::new();
    for rel in relations {
        if let Relation::Simple { column: c, .. } | Relation::Element { column: c, .. } = rel {
            let col = column(table, c)?;
            if matches!(col.kind, ColumnKind::Regular | ColumnKind::Static) {
                non_key.push(col.name.as_str());
            }
        }
    }
    if !non_key.is_empty() {
        return Err(QueryError::Invalid(format!(
            "Non PRIMARY KEY columns found in where clause: {} ",
            non_key.join(", ")
        )));
    }
    Ok(())
}

/// Whether an UPDATE's assignments write static columns only (and at least one).
pub(crate) fn assigns_only_static(
    table: &TableMetadata,
    assignments: &[Assignment],
) -> Result<bool, QueryError> {
    let mut only_static = !assignments.is_empty();
    for a in assignments {
        only_static &= column(table, assigned(a))?.kind == ColumnKind::Static;
    }
    Ok(only_static)
}

/// Whether a DELETE names static columns only (and at least one).
pub(crate) fn deletes_only_static(
    table: &TableMetadata,
    selectors: &[DeleteSelector],
) -> Result<bool, QueryError> {
    let mut only_static = !selectors.is_empty();
    for sel in selectors {
        let c = match sel {
            DeleteSelector::Column(c)
            | DeleteSelector::Element { column: c, .. }
            | DeleteSelector::Field { column: c, .. } => c,
        };
        only_static &= column(table, c)?.kind == ColumnKind::Static;
    }
    Ok(only_static)
}

/// The token bounds of an UPDATE's or DELETE's WHERE clause. Cassandra refuses the token
/// function there unless the whole partition key is also given, and then keeps only the
/// partitions whose token is within the bounds.
#[derive(Default)]
struct TokenBounds {
    eq: Option<i64>,
    start: Option<(i64, bool)>,
    end: Option<(i64, bool)>,
}

impl TokenBounds {
    fn is_empty(&self) -> bool {
        self.eq.is_none() && self.start.is_none() && self.end.is_none()
    }

    /// Adds `token(...) op value`, refused as Cassandra refuses a second bound of a kind.
    fn add(&mut self, table: &TableMetadata, op: &Operator, token: i64) -> Result<(), QueryError> {
        let names: Vec<&str> = table
            .partition_key()
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        let names = names.join(", ");
        if self.eq.is_some() || (matches!(op, Operator::Eq) && !self.is_empty()) {
            return Err(QueryError::Invalid(format!(
                "{names} cannot be restricted by more than one relation if it includes an Equal"
            )));
        }
        let (side, bound) = match op {
            Operator::Eq => {
                self.eq = Some(token);
                return Ok(());
            }
            Operator::Gt | Operator::Gte => ("start", &mut self.start),
            Operator::Lt | Operator::Lte => ("end", &mut self.end),
            _ => {
                return Err(QueryError::Invalid(format!(
                    "Invalid operator {} for token() in a modification statement",
                    op_name(op)
                )))
            }
        };
        if bound.is_some() {
            return Err(QueryError::Invalid(format!(
                "More than one restriction was found for the {side} bound on {names}"
            )));
        }
        *bound = Some((token, matches!(op, Operator::Gte | Operator::Lte)));
        Ok(())
    }

    fn admits(&self, token: i64) -> bool {
        self.eq.is_none_or(|t| t == token)
            && self
                .start
                .is_none_or(|(t, inclusive)| token > t || (inclusive && token == t))
            && self
                .end
                .is_none_or(|(t, inclusive)| token < t || (inclusive && token == t))
    }
}

/// What a modification statement's WHERE clause restricts. `statement` names it in errors
/// (`UPDATE`, `DELETE`); `allow_slice`: a clustering slice is accepted (a DELETE of whole
/// rows); `only_static`: the statement writes static columns only, so (as Cassandra) any
/// restriction of the clustering columns is refused.
fn key_restrictions(
    table: &TableMetadata,
    relations: &[Relation],
    ctx: &WriteContext<'_>,
    statement: &str,
    allow_slice: bool,
    warnings: &mut Vec<String>,
    only_static: bool,
) -> Result<KeyRestrictions, QueryError> {
    for rel in relations {
        check_modification_relation(table, rel, statement)?;
    }
    let mut keys = KeyRelations {
        table,
        ctx,
        statement,
        allow_slice,
        only_static,
        tokens: TokenBounds::default(),
        refused_slice: None,
        eq: BTreeMap::new(),
        slice_col: None,
        lower: None,
        upper: None,
        multi_in: None,
        multi_slice_start: None,
        in_columns: Vec::new(),
        non_key: Vec::new(),
    };
    for rel in relations {
        match rel {
            Relation::Simple {
                column: c,
                op,
                value,
            } => keys.simple(c, op, value)?,
            Relation::MultiColumn { columns, op, value } => {
                keys.multi_column(columns, op, value)?
            }
            Relation::Token {
                op,
                value: RelationValue::Single(t),
                ..
            } => {
                let token = match evaluate(t, &CqlType::Bigint, "partition key token", ctx.values)? {
                    TermValue::Value(b) if b.len() == 8 => {
                        i64::from_be_bytes(b.as_slice().try_into().unwrap_or([0; 8]))
                    }
                    _ => {
                        return Err(QueryError::Invalid(
                            "Invalid null value for partition key token".to_string(),
                        ))
                    }
                };
                keys.tokens.add(table, op, token)?;
            }
            Relation::Element { column: c, .. } => {
                // A map element is a regular column's: refused with the others below.
                keys.non_key.push(column(table, c)?.name.clone());
            }
            Relation::Token { .. } | Relation::IsNotNull(_) | Relation::CustomIndex { .. } => {
                return Err(QueryError::Invalid(
                    "This kind of relation is not supported in a modification statement by Helenus yet"
                        .to_string(),
                ))
            }
        }
    }
    keys.check_key_columns()?;
    keys.check_guardrails(warnings)?;
    let mut partitions = keys.partitions()?;
    let (mut prefixes, prefix_len) = keys.clustering_prefixes()?;
    let key_types: Vec<&CqlType> = table.partition_key().iter().map(|c| &c.ty).collect();
    sort_distinct(&mut partitions, &key_types);
    let prefix_types: Vec<&CqlType> = table.clustering()[..prefix_len]
        .iter()
        .map(|c| &c.ty)
        .collect();
    sort_distinct(&mut prefixes, &prefix_types);
    Ok(KeyRestrictions {
        partitions,
        clustering_prefixes: prefixes,
        prefix_len,
        slice: keys
            .slice_col
            .or(keys.multi_slice_start)
            .map(|_| (keys.lower, keys.upper)),
    })
}

/// One value per column of a key or a prefix of it.
type KeyValues = Vec<Vec<u8>>;

/// An UPDATE's or DELETE's WHERE clause read relation by relation: the values of the key
/// columns `=` and IN restrict, the clustering slice, the token bounds, and what is refused.
struct KeyRelations<'a> {
    table: &'a TableMetadata,
    ctx: &'a WriteContext<'a>,
    /// `UPDATE` or `DELETE`, for errors.
    statement: &'a str,
    /// A clustering slice is accepted (a DELETE of whole rows).
    allow_slice: bool,
    /// The statement writes static columns only, so (as Cassandra) any restriction of the
    /// clustering columns is refused.
    only_static: bool,
    tokens: TokenBounds,
    /// A clustering column restricted by a slice the statement cannot take, left for the
    /// static-only refusal to name (Cassandra checks that first).
    refused_slice: Option<QueryError>,
    eq: BTreeMap<usize, Vec<Vec<u8>>>,
    slice_col: Option<usize>,
    lower: Option<TupleBound>,
    upper: Option<TupleBound>,
    multi_in: Option<MultiColumnIn>,
    /// The clustering index a multi-column slice starts at.
    multi_slice_start: Option<usize>,
    /// Columns a single-column IN restricts, for the refusal of a second relation on a column
    /// that an `=` or IN restricts, in Cassandra's words: the earlier relation names its kind.
    /// (A relation the multi-column IN's tuples cover was silently dropped before.)
    in_columns: Vec<usize>,
    non_key: Vec<String>,
}

/// Cassandra's refusal of a second relation on a column an `=` (or an IN, `by_in`) restricts.
fn restricted_twice(name: &str, by_in: bool) -> QueryError {
    QueryError::Invalid(format!(
        "{name} cannot be restricted by more than one relation if it includes {}",
        if by_in { "a IN" } else { "an Equal" }
    ))
}

impl KeyRelations<'_> {
    /// Whether the multi-column IN covers column `idx`, and if so whether it counts as an IN
    /// (Cassandra takes an IN of one tuple for an `=`).
    fn in_multi_in(&self, idx: usize) -> Option<bool> {
        self.multi_in.as_ref().and_then(|(start, width, tuples)| {
            (*start..*start + *width)
                .contains(&idx)
                .then_some(tuples.len() != 1)
        })
    }

    /// `c op value`.
    fn simple(
        &mut self,
        c: &cql_syntax::ast::Identifier,
        op: &Operator,
        value: &RelationValue,
    ) -> Result<(), QueryError> {
        let (table, ctx, statement) = (self.table, self.ctx, self.statement);
        let col = column(table, c)?;
        let idx = table.column_index(&col.name).unwrap_or(0);
        if idx >= table.partition_key_count + table.clustering_count {
            self.non_key.push(col.name.clone());
            return Ok(());
        }
        let values = match (op, value) {
            (Operator::Eq, RelationValue::Single(t)) => {
                vec![key_value(
                    col,
                    evaluate(t, &col.ty, &col.name, ctx.values)?,
                )?]
            }
            (Operator::In, RelationValue::List(items)) => {
                let mut vs = Vec::new();
                for t in items {
                    vs.push(key_value(
                        col,
                        evaluate(t, &col.ty, &col.name, ctx.values)?,
                    )?);
                }
                vs
            }
            (Operator::In, RelationValue::Marker(m)) => {
                let list = CqlType::List(Box::new(col.ty.clone()));
                let bytes = key_value(
                    col,
                    evaluate(&Term::BindMarker(m.clone()), &list, &col.name, ctx.values)?,
                )?;
                split_elements(&bytes, 1)?
                    .into_iter()
                    .map(|g| g[0].to_vec())
                    .collect()
            }
            (
                Operator::Lt | Operator::Lte | Operator::Gt | Operator::Gte,
                RelationValue::Single(t),
            ) if self.allow_slice && col.kind == ColumnKind::Clustering => {
                let v = key_value(col, evaluate(t, &col.ty, &col.name, ctx.values)?)?;
                if self
                    .slice_col
                    .or(self.multi_slice_start)
                    .is_some_and(|s| s != idx)
                {
                    return Err(QueryError::Invalid(
                        "Only one clustering column may be restricted by a slice in a DELETE"
                            .to_string(),
                    ));
                }
                self.slice_col = Some(idx);
                let bound = TupleBound {
                    values: vec![v],
                    inclusive: matches!(op, Operator::Gte | Operator::Lte),
                };
                return set_slice_bound(&mut self.lower, &mut self.upper, op, bound, &col.name);
            }
            (Operator::Lt | Operator::Lte | Operator::Gt | Operator::Gte, _) => {
                // Cassandra's words for each kind of refused slice.
                let refusal = QueryError::Invalid(match col.kind {
                    ColumnKind::PartitionKey => format!(
                        "Only EQ and IN relation are supported on the partition key (unless you use the token() function) for {statement} statements"
                    ),
                    _ if statement == "UPDATE" => {
                        "Slice restrictions are not supported on the clustering columns in UPDATE statements".to_string()
                    }
                    _ => RANGE_DELETION_OF_COLUMNS.to_string(),
                });
                if col.kind == ColumnKind::PartitionKey || !self.only_static {
                    return Err(refusal);
                }
                self.refused_slice.get_or_insert(refusal);
                return Ok(());
            }
            _ => {
                return Err(QueryError::Invalid(format!(
                    "Invalid operator {} for PRIMARY KEY part {} in a modification statement",
                    op_name(op),
                    col.name
                )))
            }
        };
        if let Some(by_in) = self.in_multi_in(idx) {
            return Err(restricted_twice(&col.name, by_in));
        }
        if self.eq.contains_key(&idx) {
            return Err(restricted_twice(&col.name, self.in_columns.contains(&idx)));
        }
        if matches!(op, Operator::In) {
            self.in_columns.push(idx);
        }
        if self.eq.insert(idx, values).is_some() {
            return Err(QueryError::Invalid(format!(
                "{} cannot be restricted by more than one relation if it includes an Equal",
                col.name
            )));
        }
        Ok(())
    }

    /// `(c1, c2) op value`.
    fn multi_column(
        &mut self,
        columns: &[cql_syntax::ast::Identifier],
        op: &Operator,
        value: &RelationValue,
    ) -> Result<(), QueryError> {
        let table = self.table;
        let mut cols = Vec::with_capacity(columns.len());
        for c in columns {
            let col = column(table, c)?;
            if col.kind != ColumnKind::Clustering {
                return Err(QueryError::Invalid(format!(
                    "Multi-column relations can only be applied to clustering columns but was applied to: {}",
                    col.name
                )));
            }
            cols.push(col);
        }
        let first = table.column_index(&cols[0].name).unwrap_or(0);
        for (i, col) in cols.iter().enumerate() {
            if table.column_index(&col.name) != Some(first + i) {
                return Err(QueryError::Invalid(format!(
                    "Clustering columns must appear in the PRIMARY KEY order in multi-column relations: {}",
                    relation_columns(&cols)
                )));
            }
        }
        let tuples = multi_column_values(&cols, value, self.ctx)?;
        match op {
            Operator::Eq | Operator::In => {
                // Against an earlier multi-column IN, Cassandra names every column
                // the two share.
                let shared: Vec<&str> = (0..cols.len())
                    .filter(|i| self.in_multi_in(first + i).is_some())
                    .map(|i| cols[i].name.as_str())
                    .collect();
                if let Some(by_in) = (0..cols.len()).find_map(|i| self.in_multi_in(first + i)) {
                    return Err(restricted_twice(&shared.join(" ,"), by_in));
                }
                for (i, col) in cols.iter().enumerate() {
                    if self.eq.contains_key(&(first + i)) {
                        let by_in = self.in_columns.contains(&(first + i));
                        return Err(restricted_twice(&col.name, by_in));
                    }
                }
                if matches!(op, Operator::Eq) && tuples.len() == 1 {
                    for (i, v) in tuples[0].iter().enumerate() {
                        if self.eq.insert(first + i, vec![v.clone()]).is_some() {
                            return Err(QueryError::Invalid(format!(
                                "{} cannot be restricted by more than one relation if it includes an Equal",
                                cols[i].name
                            )));
                        }
                    }
                } else if self.multi_in.replace((first, cols.len(), tuples)).is_some() {
                    return Err(QueryError::Invalid(
                        "Only one multi-column IN relation is allowed".to_string(),
                    ));
                }
            }
            Operator::Lt | Operator::Lte | Operator::Gt | Operator::Gte if self.allow_slice => {
                // A single-column bound may share the slice's first column
                // (`c > 1 AND (c, d) < (3, 0)`), as in Cassandra 5.0.
                if self
                    .slice_col
                    .or(self.multi_slice_start)
                    .is_some_and(|s| s != first)
                {
                    return Err(QueryError::Invalid(
                        "Mixing single column relations and multi column relations on clustering columns is not allowed".to_string(),
                    ));
                }
                self.multi_slice_start = Some(first);
                let bound = TupleBound {
                    values: tuples.into_iter().next().unwrap_or_default(),
                    inclusive: matches!(op, Operator::Gte | Operator::Lte),
                };
                set_slice_bound(&mut self.lower, &mut self.upper, op, bound, &cols[0].name)?;
            }
            _ => {
                return Err(QueryError::Invalid(format!(
                "Invalid operator {} for multi-column relation on {} in a modification statement",
                op_name(op),
                relation_columns(&cols)
            )))
            }
        }
        Ok(())
    }

    /// Refuses non-key columns, a partition key not given whole (with token() or without),
    /// and clustering restrictions of a statement that writes static columns only.
    fn check_key_columns(&self) -> Result<(), QueryError> {
        let (table, statement) = (self.table, self.statement);
        if !self.non_key.is_empty() {
            return Err(QueryError::Invalid(format!(
                "Non PRIMARY KEY columns found in where clause: {} ",
                self.non_key.join(", ")
            )));
        }
        let missing: Vec<String> = table
            .partition_key()
            .iter()
            .enumerate()
            .filter(|(i, _)| !self.eq.contains_key(i))
            .map(|(_, c)| c.name.clone())
            .collect();
        if !missing.is_empty() && !self.tokens.is_empty() {
            return Err(QueryError::Invalid(format!(
                "The token function cannot be used in WHERE clauses for {statement} statements"
            )));
        }
        if !missing.is_empty() {
            return Err(QueryError::Invalid(format!(
                "Some partition key parts are missing: {}",
                missing.join(", ")
            )));
        }
        let clustering_restricted = self.refused_slice.is_some()
            || self.multi_in.is_some()
            || self.multi_slice_start.is_some()
            || self.slice_col.is_some()
            || self.eq.keys().any(|i| *i >= table.partition_key_count);
        if self.only_static && clustering_restricted {
            return Err(QueryError::Invalid(format!(
                "Invalid restrictions on clustering columns since the {statement} statement modifies only static columns"
            )));
        }
        Ok(())
    }

    /// The guardrails on the products of IN restrictions, checked before any combination is
    /// built, as Cassandra's.
    fn check_guardrails(&self, warnings: &mut Vec<String>) -> Result<(), QueryError> {
        let (table, eq) = (self.table, &self.eq);
        let partition_product = (0..table.partition_key_count).fold(1u64, |product, i| {
            product.saturating_mul(eq[&i].len() as u64)
        });
        self.ctx.in_select_guardrails.check_cartesian_product(
            KeyKind::Partition,
            partition_product,
            warnings,
        )?;
        let clustering_product = (0..table.clustering_count)
            .map(|i| match &self.multi_in {
                Some((start, _, tuples)) if *start == table.partition_key_count + i => tuples.len(),
                _ => eq.get(&(table.partition_key_count + i)).map_or(1, Vec::len),
            })
            .fold(1u64, |product, n| product.saturating_mul(n as u64));
        self.ctx.in_select_guardrails.check_cartesian_product(
            KeyKind::Clustering,
            clustering_product,
            warnings,
        )
    }

    /// Every combination of the partition key values, less those a token() restriction
    /// leaves out.
    fn partitions(&self) -> Result<Vec<KeyValues>, QueryError> {
        let table = self.table;
        let mut partitions: Vec<Vec<Vec<u8>>> = vec![Vec::new()];
        for i in 0..table.partition_key_count {
            partitions = cartesian(partitions, &self.eq[&i]);
        }
        if !self.tokens.is_empty() {
            // With the whole key given, Cassandra takes token() as a filter on its partitions.
            let mut kept = Vec::with_capacity(partitions.len());
            for pk in partitions {
                if self.tokens.admits(partition_key(table, &pk)?.token) {
                    kept.push(pk);
                }
            }
            partitions = kept;
        }
        Ok(partitions)
    }

    /// Every combination of the values of the restricted prefix of clustering columns, and
    /// the prefix's length; refuses a restriction after an unrestricted column.
    fn clustering_prefixes(&self) -> Result<(Vec<KeyValues>, usize), QueryError> {
        let table = self.table;
        let mut prefixes: Vec<Vec<Vec<u8>>> = vec![Vec::new()];
        let mut prefix_len = 0;
        for i in 0..table.clustering_count {
            if let Some((start, width, tuples)) = &self.multi_in {
                if *start == table.partition_key_count + i {
                    if prefix_len != i {
                        return Err(QueryError::Invalid(format!(
                            "PRIMARY KEY column \"{}\" cannot be restricted as preceding column \"{}\" is not restricted",
                            table.clustering()[i].name,
                            table.clustering()[prefix_len].name
                        )));
                    }
                    let mut next = Vec::with_capacity(prefixes.len() * tuples.len());
                    for p in &prefixes {
                        for t in tuples {
                            let mut q = p.clone();
                            q.extend(t.iter().cloned());
                            next.push(q);
                        }
                    }
                    prefixes = next;
                    prefix_len += *width;
                    continue;
                }
                if *start < table.partition_key_count + i && i < prefix_len {
                    continue; // covered by the tuples
                }
            }
            if i < prefix_len {
                continue;
            }
            if let Some(values) = self.eq.get(&(table.partition_key_count + i)) {
                if prefix_len != i {
                    return Err(QueryError::Invalid(format!(
                        "PRIMARY KEY column \"{}\" cannot be restricted as preceding column \"{}\" is not restricted",
                        table.clustering()[i].name,
                        table.clustering()[prefix_len].name
                    )));
                }
                prefixes = cartesian(prefixes, values);
                prefix_len += 1;
            }
        }
        if let Some(s) = self.slice_col.or(self.multi_slice_start) {
            if s != table.partition_key_count + prefix_len {
                return Err(QueryError::Invalid(format!(
                    "PRIMARY KEY column \"{}\" cannot be restricted as preceding column is not restricted",
                    table.columns[s].name
                )));
            }
        }
        Ok((prefixes, prefix_len))
    }
}

/// Records a slice bound on its side (`>`/`>=` lower, `<`/`<=` upper), refusing a second one
/// on the same side in Cassandra's words.
fn set_slice_bound(
    lower: &mut Option<TupleBound>,
    upper: &mut Option<TupleBound>,
    op: &Operator,
    bound: TupleBound,
    column: &str,
) -> Result<(), QueryError> {
    let (side, name) = match op {
        Operator::Gt | Operator::Gte => (lower, "start"),
        _ => (upper, "end"),
    };
    if side.replace(bound).is_some() {
        return Err(QueryError::Invalid(format!(
            "More than one restriction was found for the {name} bound on {column}"
        )));
    }
    Ok(())
}

fn relation_columns(cols: &[&ColumnMetadata]) -> String {
    let names: Vec<&str> = cols.iter().map(|c| c.name.as_str()).collect();
    format!("({})", names.join(", "))
}

/// The tuples of a multi-column relation (`= (..)`, `IN ((..), ..)`, `> (..)`), each split
/// into one value per column; nulls are refused.
fn multi_column_values(
    cols: &[&ColumnMetadata],
    value: &RelationValue,
    ctx: &WriteContext<'_>,
) -> Result<Vec<Vec<Vec<u8>>>, QueryError> {
    let tuple_ty = CqlType::Tuple(cols.iter().map(|c| c.ty.clone()).collect());
    let name = relation_columns(cols);
    let raw: Vec<Vec<u8>> = match value {
        RelationValue::Single(t) => vec![evaluate_tuple(t, &tuple_ty, &name, ctx)?],
        RelationValue::List(items) => items
            .iter()
            .map(|t| evaluate_tuple(t, &tuple_ty, &name, ctx))
            .collect::<Result<_, _>>()?,
        RelationValue::Marker(m) => {
            let list = CqlType::List(Box::new(tuple_ty.clone()));
            let bytes = evaluate_tuple(&Term::BindMarker(m.clone()), &list, &name, ctx)?;
            split_elements(&bytes, 1)?
                .into_iter()
                .map(|g| g[0].to_vec())
                .collect()
        }
        RelationValue::Between(..) => {
            return Err(QueryError::Invalid(format!(
                "BETWEEN is not supported on {name} in a modification statement"
            )))
        }
    };
    raw.iter()
        .map(|t| {
            let mut parts = Vec::with_capacity(cols.len());
            let mut rest = t.as_slice();
            for _ in cols {
                let (v, tail) = read_optional(rest)?;
                let v = v.ok_or_else(|| {
                    QueryError::Invalid(format!("Invalid null value in condition for {name}"))
                })?;
                parts.push(v.to_vec());
                rest = tail;
            }
            Ok(parts)
        })
        .collect()
}

fn evaluate_tuple(
    t: &Term,
    ty: &CqlType,
    name: &str,
    ctx: &WriteContext<'_>,
) -> Result<Vec<u8>, QueryError> {
    match evaluate(t, ty, name, ctx.values)? {
        TermValue::Value(b) => Ok(b),
        TermValue::Null => Err(QueryError::Invalid(format!(
            "Invalid null value in condition for {name}"
        ))),
        TermValue::Unset => Err(QueryError::Invalid(format!(
            "Invalid unset value for {name}"
        ))),
    }
}

/// Sorts combinations of key values (each one value per column of `types`) in the types'
/// order and drops each one equal, by the types' comparison, to one before it, keeping the one
/// written first: Cassandra collects them in a `TreeSet` (`MultiCBuilder`), which keeps the
/// first of equal elements. So `k IN (1.0, 1)` on a decimal key addresses partition `1.0`
/// only (its two values are equal, though their bytes, and so their partitions, differ).
pub(crate) fn sort_distinct(combos: &mut Vec<Vec<Vec<u8>>>, types: &[&CqlType]) {
    let order = |a: &[Vec<u8>], b: &[Vec<u8>]| {
        a.iter()
            .zip(b)
            .zip(types)
            .map(|((x, y), ty)| types::compare(ty, x, y))
            .find(|o| o.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
    };
    // Stable: equal combinations keep the order they were written in.
    combos.sort_by(|a, b| order(a, b));
    combos.dedup_by(|later, earlier| order(later, earlier).is_eq());
}

fn cartesian(prefixes: Vec<Vec<Vec<u8>>>, values: &[Vec<u8>]) -> Vec<Vec<Vec<u8>>> {
    let mut out = Vec::with_capacity(prefixes.len() * values.len());
    for p in &prefixes {
        for v in values {
            let mut next = p.clone();
            next.push(v.clone());
            out.push(next);
        }
    }
    out
}

/// Cassandra's refusal of a COUNTER batch of non-counter statements. Helenus has no counter
/// tables yet, so every statement of a counter batch is one.
pub(crate) fn check_batch_kind(counter: bool, statements: usize) -> Result<(), QueryError> {
    if counter && statements > 0 {
        return Err(QueryError::Invalid(
            "Cannot include non-counter statement in a counter batch".to_string(),
        ));
    }
    Ok(())
}

/// Refuses what Cassandra refuses of a statement's assignments before any value is known: a
/// column set and also assigned otherwise (its parser's error), a PRIMARY KEY column, a field
/// of a column that is not a non-frozen UDT, and an operation the column's type has not
/// (`refusal`). Run by `analyze::analyze`: at PREPARE, and for every unprepared statement.
pub(crate) fn check_assignments(
    table: &TableMetadata,
    assignments: &[Assignment],
) -> Result<(), QueryError> {
    for (i, a) in assignments.iter().enumerate() {
        if let Assignment::Set { column: c, .. } = a {
            let again = assignments
                .iter()
                .enumerate()
                .any(|(j, b)| j != i && assigned(b) == c);
            if again {
                return Err(QueryError::Syntax(format!(
                    "Multiple incompatible setting of column {c}"
                )));
            }
        }
    }
    for a in assignments {
        let col = settable(table, assigned(a))?;
        if let Assignment::SetField { field, value, .. } = a {
            udt_field(col, field.as_str(), &format!("= {value}"))?;
        } else if let Some(e) = refusal(col, a) {
            return Err(e);
        }
    }
    Ok(())
}

/// The column an assignment writes.
fn assigned(a: &Assignment) -> &cql_syntax::ast::Identifier {
    match a {
        Assignment::Set { column, .. }
        | Assignment::SetField { column, .. }
        | Assignment::SetElement { column, .. }
        | Assignment::Add { column, .. }
        | Assignment::Subtract { column, .. }
        | Assignment::Prepend { column, .. } => column,
    }
}

/// Cassandra's refusal of an operation `col`'s type has not, in its words, the operation
/// quoted as it prints it (a prepend as `c = v - c`); `None` if the type has it. A plain
/// `c = v` and a UDT field (`udt_field`) are not judged here.
fn refusal(col: &ColumnMetadata, a: &Assignment) -> Option<QueryError> {
    let name = &col.name;
    let (operation, what) = match a {
        Assignment::Add { value: t, .. } | Assignment::Prepend { value: t, .. } => {
            let prepend = matches!(a, Assignment::Prepend { .. });
            let what = match (&col.ty, col.ty.unfrozen()) {
                (CqlType::List(_), _) => return None,
                (_, CqlType::List(_)) if prepend => "frozen list",
                _ if prepend => "non list",
                (ty, _) if ty.is_collection() && !ty.is_multi_cell() => "frozen collection",
                // Cassandra's UserType is a TupleType: an addition names both so.
                (_, CqlType::Tuple(_) | CqlType::Udt(_)) if !prepend => "tuple",
                (ty, _) if !ty.is_collection() => "non counter",
                _ => return None,
            };
            let operation = if prepend {
                format!("{name} = {t} - {name}")
            } else {
                format!("{name} = {name} + {t}")
            };
            (operation, what)
        }
        Assignment::Subtract { value: t, .. } => {
            let what = match &col.ty {
                CqlType::Set(_) | CqlType::Map(..) | CqlType::List(_) => return None,
                ty if ty.is_collection() => "frozen collection",
                _ => "non counter",
            };
            (format!("{name} = {name} - {t}"), what)
        }
        Assignment::SetElement { key, value, .. } => {
            let what = match &col.ty {
                CqlType::Map(..) | CqlType::List(_) => return None,
                CqlType::Set(_) => "set",
                ty if ty.is_collection() => "frozen collection",
                _ => "non collection",
            };
            (format!("{name}[{key}] = {value}"), what)
        }
        Assignment::Set { .. } | Assignment::SetField { .. } => return None,
    };
    Some(QueryError::Invalid(format!(
        "Invalid operation ({operation}) for {what} column {name}"
    )))
}

/// `refusal`, for a branch that `check_assignments` (at analysis) kept such an assignment from.
fn refused(col: &ColumnMetadata, a: &Assignment) -> QueryError {
    refusal(col, a)
        .unwrap_or_else(|| QueryError::Invalid(format!("Invalid operation on column {}", col.name)))
}

/// Whether a collection literal has a literal null among its elements, keys or values: an
/// addition to or a removal from a map refuses it in its own words.
fn holds_null(t: &Term) -> bool {
    match t {
        Term::Map(entries) => entries
            .iter()
            .any(|(k, v)| matches!(k, Term::Null) || matches!(v, Term::Null)),
        Term::Set(items) | Term::List(items) => items.iter().any(|i| matches!(i, Term::Null)),
        _ => false,
    }
}

/// The column an UPDATE assigns: any but a primary key column.
fn settable<'t>(
    table: &'t TableMetadata,
    name: &cql_syntax::ast::Identifier,
) -> Result<&'t ColumnMetadata, QueryError> {
    let col = column(table, name)?;
    if col.kind == ColumnKind::PartitionKey || col.kind == ColumnKind::Clustering {
        return Err(QueryError::Invalid(format!(
            "PRIMARY KEY part {} found in SET part",
            col.name
        )));
    }
    Ok(col)
}

/// Writes `regular` to every addressed row and `static_row` to every addressed partition,
/// each with its share of `list_ops` resolved against the lists read for it.
#[allow(clippy::too_many_arguments)] // one call site per statement kind; a struct adds nothing
fn write_rows(
    table: &TableMetadata,
    keys: &KeyRestrictions,
    (has_regular, regular): (bool, &Row),
    (has_static, static_row): (bool, &Row),
    list_ops: &[(&ColumnMetadata, ListOp)],
    attrs: &WriteAttributes,
    ctx: &WriteContext<'_>,
    out: &mut MutationSet,
) -> Result<(), QueryError> {
    for pk in &keys.partitions {
        let key = partition_key(table, pk)?;
        let mut static_data = static_row.clone();
        let mut rows = Vec::new();
        for (col, op) in list_ops {
            if col.kind == ColumnKind::Static {
                static_data.columns.extend(resolve_list_op(
                    table, &key, None, col, op, attrs, ctx, out,
                )?);
            }
        }
        if has_regular {
            for prefix in &keys.clustering_prefixes {
                let clustering = row_clustering_key(table, prefix)?;
                let mut row = regular.clone();
                for (col, op) in list_ops {
                    if col.kind != ColumnKind::Static {
                        row.columns.extend(resolve_list_op(
                            table,
                            &key,
                            Some(&clustering),
                            col,
                            op,
                            attrs,
                            ctx,
                            out,
                        )?);
                    }
                }
                sort_columns(&mut row);
                if prefix.len() == table.clustering_count {
                    add_clustering_forms(table, prefix, attrs, &mut row);
                }
                rows.push((clustering, row));
            }
        }
        sort_columns(&mut static_data);
        let partition = out.partition(table, key);
        for (clustering, row) in rows {
            if !row.columns.is_empty() {
                push_row(partition, clustering, row);
            }
        }
        if has_static && !static_data.columns.is_empty() {
            merge_static(partition, static_data);
        }
    }
    Ok(())
}

/// The cells a list operation writes, given the list's current contents; on the first pass
/// (no `ctx.lists`) it records the read it needs and writes nothing.
#[allow(clippy::too_many_arguments)]
fn resolve_list_op(
    table: &TableMetadata,
    key: &PartitionKey,
    clustering: Option<&[u8]>,
    col: &ColumnMetadata,
    op: &ListOp,
    attrs: &WriteAttributes,
    ctx: &WriteContext<'_>,
    out: &mut MutationSet,
) -> Result<Option<ColumnData>, QueryError> {
    let read = ListRead {
        keyspace: table.keyspace.clone(),
        table: table.id,
        token: key.token,
        partition_key: key.key.clone(),
        clustering: clustering.map(<[u8]>::to_vec),
        column: col.id,
    };
    let Some(state) = ctx.lists else {
        out.list_reads.insert(read);
        return Ok(None);
    };
    let empty = Vec::new();
    let current = state.lists.get(&read).unwrap_or(&empty);
    if current.is_empty() {
        match op {
            ListOp::SetIndex(..) => {
                return Err(QueryError::Invalid(
                    "Attempted to set an element on a list which is null".to_string(),
                ))
            }
            ListOp::DeleteIndex(_) => {
                return Err(QueryError::Invalid(
                    "Attempted to delete an element from a list which is null".to_string(),
                ))
            }
            ListOp::Remove(_) => return Ok(None),
        }
    }
    let at = |index: i32| -> Result<&Vec<u8>, QueryError> {
        usize::try_from(index)
            .ok()
            .and_then(|i| current.get(i))
            .map(|(path, _)| path)
            .ok_or_else(|| {
                QueryError::Invalid(format!(
                    "List index {index} out of bound, list has size {}",
                    current.len()
                ))
            })
    };
    let cells = match op {
        ListOp::SetIndex(index, value) => {
            let path = at(*index)?.clone();
            match value {
                TermValue::Unset => return Ok(None),
                TermValue::Null => vec![(path, tombstone(attrs.timestamp, ctx.now_seconds))],
                TermValue::Value(v) => vec![(path, cell(attrs, v.clone()))],
            }
        }
        ListOp::DeleteIndex(index) => {
            vec![(
                at(*index)?.clone(),
                tombstone(attrs.timestamp, ctx.now_seconds),
            )]
        }
        ListOp::Remove(values) => current
            .iter()
            .filter(|(_, v)| values.contains(v))
            .map(|(path, _)| (path.clone(), tombstone(attrs.timestamp, ctx.now_seconds)))
            .collect(),
    };
    if cells.is_empty() {
        return Ok(None);
    }
    let mut cells = cells;
    cells.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(Some(ColumnData::Complex {
        id: col.id,
        deletion: None,
        cells,
    }))
}

/// A list index from a term: an int, never null.
fn list_index(term: &Term, column: &str, ctx: &WriteContext<'_>) -> Result<i32, QueryError> {
    match evaluate(term, &CqlType::Int, column, ctx.values)? {
        TermValue::Value(b) if b.len() == 4 => Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]])),
        TermValue::Value(_) => Err(QueryError::Invalid(format!(
            "Invalid list index for {column}"
        ))),
        TermValue::Null => Err(QueryError::Invalid(
            "Invalid null value for list index".to_string(),
        )),
        TermValue::Unset => Err(QueryError::Invalid(
            "Invalid unset value for list index".to_string(),
        )),
    }
}

/// Collects a statement's (or batch's) mutations with `collect`. Operations on lists by index
/// or value need the list: the first pass names the lists, they are read, and a second pass
/// writes with them.
pub(crate) async fn collect_reading_lists(
    coordinator: &Coordinator,
    schema: &Schema,
    consistency: ConsistencyLevel,
    now: mutation::LocalTime,
    deadline: coordinator::Deadline,
    collect: impl Fn(Option<&ListState>) -> Result<MutationSet, QueryError>,
) -> Result<MutationSet, QueryError> {
    let collected = collect(None)?;
    if collected.list_reads.is_empty() {
        return Ok(collected);
    }
    let lists = read_lists(
        coordinator,
        schema,
        &collected.list_reads,
        consistency,
        now,
        deadline,
    )
    .await?;
    collect(Some(&lists))
}

/// Reads the lists `reads` names at `consistency`: each list's live elements in order, after
/// the row's and partition's deletions.
async fn read_lists(
    coordinator: &Coordinator,
    schema: &Schema,
    reads: &std::collections::BTreeSet<ListRead>,
    consistency: ConsistencyLevel,
    now: mutation::LocalTime,
    deadline: coordinator::Deadline,
) -> Result<ListState, QueryError> {
    use mutation::{ReadCommand, ReadResponse};
    let mut state = ListState::default();
    for read in reads {
        let keyspace = schema.keyspace(&read.keyspace).ok_or_else(|| {
            QueryError::Invalid(format!("keyspace {} does not exist", read.keyspace))
        })?;
        let slice = match &read.clustering {
            Some(ck) => mutation::ClusteringSlice {
                start: Some(ClusteringBound {
                    prefix: ck.clone(),
                    inclusive: true,
                }),
                end: Some(ClusteringBound {
                    prefix: ck.clone(),
                    inclusive: true,
                }),
                reversed: false,
            },
            None => mutation::ClusteringSlice::all(),
        };
        let command = ReadCommand::Partition {
            table: read.table,
            key: PartitionKey {
                token: read.token,
                key: read.partition_key.clone(),
            },
            slice,
            max_rows: 1,
            resume: None,
        };
        let ReadResponse::Partition(page) = coordinator
            .read(keyspace, command, consistency, deadline)
            .await?
        else {
            return Err(QueryError::Server("unexpected read response".to_string()));
        };
        let data = page.data;
        let (row, covering) = match &read.clustering {
            Some(ck) => (
                data.rows
                    .into_iter()
                    .find(|(k, _)| k == ck)
                    .map(|(_, row)| row),
                data.header.covering_deletion(ck),
            ),
            None => (data.static_row, data.header.deletion),
        };
        let Some(mut row) = row else { continue };
        row.apply_deletions(covering);
        let Some(ColumnData::Complex { cells, .. }) = row.column(read.column) else {
            continue;
        };
        let mut live: ListElements = cells
            .iter()
            .filter_map(|(path, c)| c.live_value(now).map(|v| (path.clone(), v.to_vec())))
            .collect();
        live.sort_by(|a, b| types::compare(&CqlType::Timeuuid, &a.0, &b.0));
        state.lists.insert(read.clone(), live);
    }
    Ok(state)
}

fn update(s: &Update, ctx: &WriteContext<'_>, out: &mut MutationSet) -> Result<(), QueryError> {
    let table = writable_table(ctx, s.table.keyspace.as_ref(), &s.table.name)?;
    if s.conditions.is_some() {
        return Err(QueryError::Invalid(
            "Lightweight transactions (UPDATE ... IF) are not supported yet by Helenus".to_string(),
        ));
    }
    // The assignments were checked by `analyze::analyze` (`check_assignments`), at PREPARE or
    // for this QUERY; schema changes forget prepared statements.
    let attrs = attributes(&s.using, table, ctx)?;
    let mut writes = ColumnWrites::default();
    for a in &s.assignments {
        assign(a, table, &attrs, ctx, &mut writes)?;
    }
    let ColumnWrites {
        mut regular,
        mut static_row,
        list_ops,
    } = writes;
    sort_columns(&mut regular);
    sort_columns(&mut static_row);
    let has_regular =
        !regular.columns.is_empty() || list_ops.iter().any(|(c, _)| c.kind != ColumnKind::Static);
    let has_static = !static_row.columns.is_empty()
        || list_ops.iter().any(|(c, _)| c.kind == ColumnKind::Static);
    let keys = key_restrictions(
        table,
        &s.where_clause,
        ctx,
        "UPDATE",
        false,
        &mut out.warnings,
        has_static && !has_regular,
    )?;
    let full_clustering = keys.prefix_len == table.clustering_count;
    if !full_clustering && has_regular {
        let missing: Vec<String> = table
            .clustering()
            .iter()
            .skip(keys.prefix_len)
            .map(|c| c.name.clone())
            .collect();
        return Err(QueryError::Invalid(format!(
            "Some clustering keys are missing: {}",
            missing.join(", ")
        )));
    }
    if keys.selects_nothing() {
        return Ok(());
    }
    write_rows(
        table,
        &keys,
        (has_regular, &regular),
        (has_static, &static_row),
        &list_ops,
        &attrs,
        ctx,
        out,
    )
}

/// What an UPDATE's assignments or a DELETE's columns write: the columns of the regular row
/// and of the static row, and the list operations that need the list's current contents.
#[derive(Default)]
struct ColumnWrites<'t> {
    regular: Row,
    static_row: Row,
    list_ops: Vec<(&'t ColumnMetadata, ListOp)>,
}

/// One assignment of an UPDATE, into `writes`.
fn assign<'t>(
    a: &Assignment,
    table: &'t TableMetadata,
    attrs: &WriteAttributes,
    ctx: &WriteContext<'_>,
    writes: &mut ColumnWrites<'t>,
) -> Result<(), QueryError> {
    let (data, col) = match a {
        Assignment::Set {
            column: c,
            value: t,
        } => {
            let col = settable(table, c)?;
            let v = evaluate(t, &col.ty, &col.name, ctx.values)?;
            (set_column(col, v, attrs, ctx.now_seconds)?, col)
        }
        Assignment::Add {
            column: c,
            value: t,
        }
        | Assignment::Prepend {
            column: c,
            value: t,
        } => {
            let col = settable(table, c)?;
            let prepend = matches!(a, Assignment::Prepend { .. });
            if matches!(col.ty, CqlType::Map(..)) && holds_null(t) {
                return Err(QueryError::Invalid(format!(
                    "Value for a map addition has to be a map, but was: '{t}'"
                )));
            }
            let v = evaluate(t, &col.ty, &col.name, ctx.values)?;
            let data = match v {
                TermValue::Value(b) => Some(ColumnData::Complex {
                    id: col.id,
                    deletion: None,
                    cells: if prepend {
                        prepended_list_elements(&b, attrs)?
                    } else {
                        multi_cell_elements(&col.ty, &b, attrs)?
                    },
                }),
                _ => None,
            };
            (data, col)
        }
        Assignment::Subtract {
            column: c,
            value: t,
        } => {
            let col = settable(table, c)?;
            match subtract(a, col, t, attrs, ctx)? {
                Subtracted::Cells(data) => (data, col),
                Subtracted::FromList(values) => {
                    writes.list_ops.push((col, ListOp::Remove(values)));
                    return Ok(());
                }
            }
        }
        Assignment::SetElement {
            column: c,
            key,
            value,
        } => {
            let col = settable(table, c)?;
            let (key_ty, value_ty) = match &col.ty {
                CqlType::Map(k, v) => ((**k).clone(), (**v).clone()),
                CqlType::List(v) => {
                    let index = list_index(key, &col.name, ctx)?;
                    let value = evaluate(value, v, &col.name, ctx.values)?;
                    writes.list_ops.push((col, ListOp::SetIndex(index, value)));
                    return Ok(());
                }
                _ => return Err(refused(col, a)),
            };
            let path = match evaluate(key, &key_ty, &col.name, ctx.values)? {
                TermValue::Value(b) => b,
                TermValue::Null => {
                    return Err(QueryError::Invalid("Invalid null map key".to_string()))
                }
                TermValue::Unset => {
                    return Err(QueryError::Invalid("Invalid unset map key".to_string()))
                }
            };
            let v = evaluate(value, &value_ty, &col.name, ctx.values)?;
            (element_data(col, path, v, attrs, ctx.now_seconds), col)
        }
        Assignment::SetField {
            column: c,
            field,
            value,
        } => {
            let col = settable(table, c)?;
            let (index, field_ty) = udt_field(col, field.as_str(), &format!("= {value}"))?;
            let v = evaluate(value, &field_ty, field.as_str(), ctx.values)?;
            let path = (index as u16).to_be_bytes().to_vec();
            (element_data(col, path, v, attrs, ctx.now_seconds), col)
        }
    };
    push_by_kind(col, data, &mut writes.regular, &mut writes.static_row);
    Ok(())
}

/// What `c = c - t` writes: tombstones of a set's elements or a map's keys, or (for a list,
/// whose elements are found by value) the values to remove.
enum Subtracted {
    Cells(Option<ColumnData>),
    FromList(Vec<Vec<u8>>),
}

/// `c = c - t` (the assignment `a`) on column `col`.
fn subtract(
    a: &Assignment,
    col: &ColumnMetadata,
    t: &Term,
    attrs: &WriteAttributes,
    ctx: &WriteContext<'_>,
) -> Result<Subtracted, QueryError> {
    if matches!(col.ty, CqlType::Map(..)) && holds_null(t) {
        // Cassandra's words (and spelling).
        return Err(QueryError::Invalid(format!(
            "Value for a map substraction has to be a set, but was: '{t}'"
        )));
    }
    let elements = match &col.ty {
        CqlType::Set(e) => CqlType::Set(e.clone()),
        CqlType::Map(k, _) => CqlType::Set(k.clone()),
        CqlType::List(_) => {
            return Ok(match evaluate(t, &col.ty, &col.name, ctx.values)? {
                TermValue::Value(b) => Subtracted::FromList(
                    split_elements(&b, 1)?
                        .into_iter()
                        .map(|e| e[0].to_vec())
                        .collect(),
                ),
                // Nothing to remove.
                TermValue::Null | TermValue::Unset => Subtracted::Cells(None),
            });
        }
        _ => return Err(refused(col, a)),
    };
    let data = match evaluate(t, &elements, &col.name, ctx.values)? {
        TermValue::Value(b) => {
            let cells = split_elements(&b, 1)?
                .into_iter()
                .map(|e| (e[0].to_vec(), tombstone(attrs.timestamp, ctx.now_seconds)))
                .collect();
            Some(ColumnData::Complex {
                id: col.id,
                deletion: None,
                cells,
            })
        }
        // `m = m - null` removes nothing, as in Cassandra.
        TermValue::Null | TermValue::Unset => None,
    };
    Ok(Subtracted::Cells(data))
}

fn delete(s: &Delete, ctx: &WriteContext<'_>, out: &mut MutationSet) -> Result<(), QueryError> {
    let table = writable_table(ctx, s.table.keyspace.as_ref(), &s.table.name)?;
    if s.conditions.is_some() {
        return Err(QueryError::Invalid(
            "Lightweight transactions (DELETE ... IF) are not supported yet by Helenus".to_string(),
        ));
    }
    if s.using.ttl.is_some() {
        return Err(QueryError::Invalid(
            "TTL attribute is not allowed for deletes".to_string(),
        ));
    }
    let attrs = attributes(
        &Using {
            timestamp: s.using.timestamp.clone(),
            ttl: None,
            timeout: None,
        },
        table,
        ctx,
    )?;
    let deletion = DeletionTime {
        marked_for_delete_at: attrs.timestamp,
        local_deletion_time: ctx.now_seconds,
    };
    // Whether the DELETE names static columns only (known before its WHERE clause is read,
    // as Cassandra prepares the deleted columns first).
    let only_static = deletes_only_static(table, &s.columns)?;
    let keys = key_restrictions(
        table,
        &s.where_clause,
        ctx,
        "DELETE",
        s.columns.is_empty(),
        &mut out.warnings,
        only_static,
    )?;
    if !s.columns.is_empty() {
        return delete_columns(s, table, &keys, &attrs, deletion, ctx, out);
    }
    if keys.selects_nothing() {
        return Ok(());
    }
    delete_rows(table, &keys, deletion, out)
}

/// A DELETE of named columns (or of their elements or fields) in the rows `keys` select.
fn delete_columns(
    s: &Delete,
    table: &TableMetadata,
    keys: &KeyRestrictions,
    attrs: &WriteAttributes,
    deletion: DeletionTime,
    ctx: &WriteContext<'_>,
    out: &mut MutationSet,
) -> Result<(), QueryError> {
    let prefix_len = keys.prefix_len;
    let mut writes = ColumnWrites::default();
    for sel in &s.columns {
        delete_column(sel, table, attrs, deletion, ctx, &mut writes)?;
    }
    let ColumnWrites {
        mut regular,
        mut static_row,
        list_ops,
    } = writes;
    sort_columns(&mut regular);
    sort_columns(&mut static_row);
    let has_regular =
        !regular.columns.is_empty() || list_ops.iter().any(|(c, _)| c.kind != ColumnKind::Static);
    let has_static = !static_row.columns.is_empty()
        || list_ops.iter().any(|(c, _)| c.kind == ColumnKind::Static);
    if has_regular && prefix_len != table.clustering_count {
        return Err(QueryError::Invalid(RANGE_DELETION_OF_COLUMNS.to_string()));
    }
    if keys.selects_nothing() {
        return Ok(());
    }
    write_rows(
        table,
        keys,
        (has_regular, &regular),
        (has_static, &static_row),
        &list_ops,
        attrs,
        ctx,
        out,
    )
}

/// One column (or element, or field) a DELETE names, into `writes`.
fn delete_column<'t>(
    sel: &DeleteSelector,
    table: &'t TableMetadata,
    attrs: &WriteAttributes,
    deletion: DeletionTime,
    ctx: &WriteContext<'_>,
    writes: &mut ColumnWrites<'t>,
) -> Result<(), QueryError> {
    let (regular, static_row) = (&mut writes.regular, &mut writes.static_row);
    let c = match sel {
        DeleteSelector::Column(c) => c,
        DeleteSelector::Element { column: c, key } => {
            let col = column(table, c)?;
            let key_ty = match &col.ty {
                CqlType::Map(k, _) | CqlType::Set(k) => (**k).clone(),
                CqlType::List(_) => {
                    let index = list_index(key, &col.name, ctx)?;
                    writes.list_ops.push((col, ListOp::DeleteIndex(index)));
                    return Ok(());
                }
                ty if ty.is_collection() => {
                    return Err(QueryError::Invalid(format!(
                        "Invalid deletion operation for frozen collection column {}",
                        col.name
                    )))
                }
                _ => {
                    return Err(QueryError::Invalid(format!(
                        "Invalid deletion operation for non collection column {}",
                        col.name
                    )))
                }
            };
            let path = match evaluate(key, &key_ty, &col.name, ctx.values)? {
                TermValue::Value(b) => b,
                TermValue::Null => {
                    let what = match &col.ty {
                        CqlType::Set(_) => "set element",
                        _ => "map key",
                    };
                    return Err(QueryError::Invalid(format!("Invalid null {what}")));
                }
                TermValue::Unset => {
                    let what = match &col.ty {
                        CqlType::Set(_) => "set element",
                        _ => "map key",
                    };
                    return Err(QueryError::Invalid(format!("Invalid unset {what}")));
                }
            };
            let data = element_data(col, path, TermValue::Null, attrs, ctx.now_seconds);
            push_by_kind(col, data, regular, static_row);
            return Ok(());
        }
        DeleteSelector::Field { column: c, field } => {
            let col = column(table, c)?;
            if matches!(&col.ty, CqlType::Frozen(inner) if matches!(**inner, CqlType::Udt(_))) {
                return Err(QueryError::Invalid(format!(
                    "Frozen UDT column {} does not support field deletions",
                    col.name
                )));
            }
            if !matches!(col.ty, CqlType::Udt(_)) {
                return Err(QueryError::Invalid(format!(
                    "Invalid field deletion operation for non-UDT column {}",
                    col.name
                )));
            }
            let (index, _) = udt_field(col, field.as_str(), " ?")?;
            let path = (index as u16).to_be_bytes().to_vec();
            let data = element_data(col, path, TermValue::Null, attrs, ctx.now_seconds);
            push_by_kind(col, data, regular, static_row);
            return Ok(());
        }
    };
    let col = column(table, c)?;
    if matches!(col.kind, ColumnKind::PartitionKey | ColumnKind::Clustering) {
        return Err(QueryError::Invalid(format!(
            "Invalid identifier {} for deletion (should not be a PRIMARY KEY part)",
            col.name
        )));
    }
    let data = if col.ty.is_multi_cell() {
        ColumnData::Complex {
            id: col.id,
            deletion: Some(deletion),
            cells: Vec::new(),
        }
    } else {
        ColumnData::Simple {
            id: col.id,
            cell: tombstone(attrs.timestamp, ctx.now_seconds),
        }
    };
    if col.kind == ColumnKind::Static {
        static_row.columns.push(data);
    } else {
        regular.columns.push(data);
    }
    Ok(())
}

/// A DELETE of whole rows: the partitions, the rows, or the ranges of rows `keys` select.
fn delete_rows(
    table: &TableMetadata,
    keys: &KeyRestrictions,
    deletion: DeletionTime,
    out: &mut MutationSet,
) -> Result<(), QueryError> {
    let prefix_len = keys.prefix_len;
    if prefix_len == 0 && keys.slice.is_none() {
        for pk in &keys.partitions {
            let partition = out.partition(table, partition_key(table, pk)?);
            merge_header(
                partition,
                PartitionHeader {
                    deletion: Some(deletion),
                    range_tombstones: Vec::new(),
                },
            );
        }
        return Ok(());
    }
    if keys.slice.is_none() && prefix_len == table.clustering_count {
        for pk in &keys.partitions {
            let partition = out.partition(table, partition_key(table, pk)?);
            for prefix in &keys.clustering_prefixes {
                push_row(
                    partition,
                    row_clustering_key(table, prefix)?,
                    Row {
                        liveness: None,
                        deletion: Some(deletion),
                        columns: Vec::new(),
                    },
                );
            }
        }
        return Ok(());
    }
    // Range deletions: each prefix, or each range of keys a slice after it selects (a slice
    // over columns of mixed clustering order selects several, `slices::ranges`).
    let after_prefix: Vec<&ColumnMetadata> = table.clustering()[prefix_len..].iter().collect();
    let mut ranges = Vec::new();
    for prefix in &keys.clustering_prefixes {
        let encoded = clustering_key(table, prefix);
        match &keys.slice {
            None => ranges.push((
                Some(ClusteringBound {
                    prefix: encoded.clone(),
                    inclusive: true,
                }),
                Some(ClusteringBound {
                    prefix: encoded,
                    inclusive: true,
                }),
            )),
            Some((lower, upper)) => ranges.extend(crate::slices::ranges(
                &after_prefix,
                &encoded,
                lower.as_ref(),
                upper.as_ref(),
            )),
        }
    }
    // Bounds that select nothing (`c > 2 AND c < 1`) delete nothing, as Cassandra's empty
    // `Slices`.
    if ranges.is_empty() {
        return Ok(());
    }
    for pk in &keys.partitions {
        let partition = out.partition(table, partition_key(table, pk)?);
        let range_tombstones = ranges
            .iter()
            .map(|(start, end)| RangeTombstone {
                start: start.clone(),
                end: end.clone(),
                deletion,
            })
            .collect();
        merge_header(
            partition,
            PartitionHeader {
                deletion: None,
                range_tombstones,
            },
        );
    }
    Ok(())
}
