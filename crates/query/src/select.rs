//! SELECT: restrictions become partition reads or a token-range scan plus a clustering slice;
//! every restriction is also applied as a filter to the rows read, so the storage reads only
//! need to return a superset of the answer.

use std::cmp::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use coordinator::{ReadCommand, ReadResponse};
use cql_syntax::ast::{
    Operator, Order, Relation, RelationValue, Select, Selection, SelectorExpr, Term,
};
use mutation::{Cell, CellValue, ColumnData, DeletionTime, RangeTombstone, Row};
use schema::{ClusteringOrder, ColumnKind, Schema, TableMetadata};
use storage::{ClusteringSlice, PartitionData, PartitionKey, ScanStart};
use types::CqlType;

use crate::bind::{column, resolve_table, Bound};
use crate::eval::{evaluate, TermValue};
use crate::processor::{ColumnSpec, QueryOptions, QueryProcessor, QueryResult, ResultSet};
use crate::write::{clustering_key, partition_key, split_elements};
use crate::{system_tables, QueryError};

/// Page size used internally when the client asked for no paging (or for aggregates): bounds
/// the rows held per storage read, not the result.
const INTERNAL_PAGE_ROWS: usize = 5_000;

/// What one output column computes.
#[derive(Debug, Clone)]
enum Output {
    Column(usize),
    WriteTime(usize),
    Ttl(usize),
    Token,
    CountRows,
}

fn compile_selection(
    table: &TableMetadata,
    select: &Select,
) -> Result<(Vec<Output>, Vec<ColumnSpec>), QueryError> {
    let spec = |name: &str, ty: CqlType| ColumnSpec {
        keyspace: table.keyspace.clone(),
        table: table.name.clone(),
        name: name.to_string(),
        ty,
    };
    let mut outputs = Vec::new();
    let mut specs = Vec::new();
    match &select.selection {
        Selection::Wildcard => {
            for (i, c) in table.columns.iter().enumerate() {
                outputs.push(Output::Column(i));
                specs.push(spec(&c.name, c.ty.clone()));
            }
        }
        Selection::Columns(selectors) => {
            for s in selectors {
                let (out, default_name, ty) = match &s.expr {
                    SelectorExpr::Column(c) => {
                        let col = column(table, c)?;
                        let i = table.column_index(&col.name).unwrap_or(0);
                        (Output::Column(i), col.name.clone(), col.ty.clone())
                    }
                    SelectorExpr::WriteTime(inner) | SelectorExpr::Ttl(inner) => {
                        let is_ttl = matches!(s.expr, SelectorExpr::Ttl(_));
                        let SelectorExpr::Column(c) = inner.as_ref() else {
                            return Err(QueryError::Invalid(
                                "writetime() and ttl() of collection elements or UDT fields are not supported yet by Helenus".to_string(),
                            ));
                        };
                        let col = column(table, c)?;
                        let what = if is_ttl { "ttl" } else { "writetime" };
                        if matches!(col.kind, ColumnKind::PartitionKey | ColumnKind::Clustering) {
                            return Err(QueryError::Invalid(format!(
                                "Cannot use selection function {what} on PRIMARY KEY part {}",
                                col.name
                            )));
                        }
                        if col.ty.is_multi_cell() {
                            return Err(QueryError::Invalid(format!(
                                "Cannot use selection function {what} on non-frozen collection {} (supported from Cassandra 5.0; not yet by Helenus)",
                                col.name
                            )));
                        }
                        let i = table.column_index(&col.name).unwrap_or(0);
                        if is_ttl {
                            (Output::Ttl(i), format!("ttl({})", col.name), CqlType::Int)
                        } else {
                            (
                                Output::WriteTime(i),
                                format!("writetime({})", col.name),
                                CqlType::Bigint,
                            )
                        }
                    }
                    SelectorExpr::CountRows => {
                        (Output::CountRows, "count".to_string(), CqlType::Bigint)
                    }
                    SelectorExpr::FunctionCall { name, args, .. } => {
                        let fname = name.as_str().to_ascii_lowercase();
                        if fname == "token" {
                            let names: Vec<String> = args
                                .iter()
                                .map(|a| match a {
                                    SelectorExpr::Column(c) => Ok(c.as_str().to_string()),
                                    _ => Err(QueryError::Invalid(
                                        "Invalid arguments to token()".to_string(),
                                    )),
                                })
                                .collect::<Result<_, _>>()?;
                            let pk: Vec<String> = table
                                .partition_key()
                                .iter()
                                .map(|c| c.name.clone())
                                .collect();
                            if names != pk {
                                return Err(QueryError::Invalid(format!(
                                    "Type error: token() requires the partition key columns ({}) in order",
                                    pk.join(", ")
                                )));
                            }
                            (
                                Output::Token,
                                format!("system.token({})", names.join(", ")),
                                CqlType::Bigint,
                            )
                        } else if fname == "count" && args.len() == 1 {
                            (
                                Output::CountRows,
                                format!("system.count({})", selector_text(&args[0])),
                                CqlType::Bigint,
                            )
                        } else {
                            return Err(QueryError::Invalid(format!(
                                "Function {} in a selection is not supported yet by Helenus",
                                name.as_str()
                            )));
                        }
                    }
                    _ => {
                        return Err(QueryError::Invalid(
                            "This kind of selector is not supported yet by Helenus".to_string(),
                        ))
                    }
                };
                let name = s
                    .alias
                    .as_ref()
                    .map(|a| a.as_str().to_string())
                    .unwrap_or(default_name);
                outputs.push(out);
                specs.push(spec(&name, ty));
            }
        }
    }
    let aggregates = outputs
        .iter()
        .filter(|o| matches!(o, Output::CountRows))
        .count();
    if aggregates > 0 && aggregates != outputs.len() {
        return Err(QueryError::Invalid(
            "Mixing aggregates and plain columns without GROUP BY is not supported yet by Helenus"
                .to_string(),
        ));
    }
    Ok((outputs, specs))
}

fn selector_text(s: &SelectorExpr) -> String {
    match s {
        SelectorExpr::Column(c) => c.as_str().to_string(),
        SelectorExpr::Term(Term::Constant(_)) => "1".to_string(),
        _ => "*".to_string(),
    }
}

pub(crate) fn result_columns(
    table: &TableMetadata,
    select: &Select,
) -> Result<Vec<ColumnSpec>, QueryError> {
    if select.json {
        return Ok(vec![ColumnSpec {
            keyspace: table.keyspace.clone(),
            table: table.name.clone(),
            name: "[json]".to_string(),
            ty: CqlType::Text,
        }]);
    }
    Ok(compile_selection(table, select)?.1)
}

/// A materialised row: every column's value, with write times and TTLs of simple cells.
struct RowValues {
    values: Vec<Option<Vec<u8>>>,
    writetimes: Vec<Option<i64>>,
    ttls: Vec<Option<i32>>,
    token: i64,
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
}

struct Plan {
    table: Arc<TableMetadata>,
    outputs: Vec<Output>,
    specs: Vec<ColumnSpec>,
    filters: Vec<Filter>,
    /// Partitions to read, when the partition key is fully restricted by = or IN.
    partitions: Option<Vec<PartitionKey>>,
    slice: ClusteringSlice,
    limit: Option<usize>,
    per_partition_limit: Option<usize>,
    distinct: bool,
    aggregate: bool,
    token_start: Option<i64>,
    token_end: Option<i64>,
    /// Whether a partition with only a live static row shows up as a row (no clustering
    /// restriction), as Cassandra does.
    static_only_rows: bool,
}

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

fn evaluate_value(
    t: &Term,
    ty: &CqlType,
    name: &str,
    values: &[Bound],
) -> Result<Vec<u8>, QueryError> {
    match evaluate(t, ty, name, values)? {
        TermValue::Value(b) => Ok(b),
        TermValue::Null => Err(QueryError::Invalid(format!(
            "Invalid null value in condition for column {name}"
        ))),
        TermValue::Unset => Err(QueryError::Invalid(format!(
            "Invalid unset value for column {name}"
        ))),
    }
}

fn in_values(
    value: &RelationValue,
    ty: &CqlType,
    name: &str,
    values: &[Bound],
) -> Result<Vec<Vec<u8>>, QueryError> {
    Ok(match value {
        RelationValue::Single(t) => vec![evaluate_value(t, ty, name, values)?],
        RelationValue::List(items) => {
            let mut out = Vec::with_capacity(items.len());
            for t in items {
                out.push(evaluate_value(t, ty, name, values)?);
            }
            out
        }
        RelationValue::Marker(m) => {
            let list = CqlType::List(Box::new(ty.clone()));
            let bytes = evaluate_value(&Term::BindMarker(m.clone()), &list, name, values)?;
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

fn build_plan(
    table: &Arc<TableMetadata>,
    select: &Select,
    values: &[Bound],
) -> Result<Plan, QueryError> {
    let (outputs, specs) = compile_selection(table, select)?;
    let pk_count = table.partition_key_count;
    let ck_count = table.clustering_count;
    let mut filters = Vec::new();
    let mut pk_values: Vec<Option<Vec<Vec<u8>>>> = vec![None; pk_count];
    let mut ck_eq: Vec<Option<Vec<Vec<u8>>>> = vec![None; ck_count];
    let mut ck_slices: Vec<(usize, Operator, Vec<u8>)> = Vec::new();
    let mut needs_filtering = false;
    let mut token_start = None;
    let mut token_end = None;
    let mut has_token = false;
    let mut has_clustering_restriction = false;

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
                            (Operator::Contains, CqlType::List(e) | CqlType::Set(e)) => (**e).clone(),
                            _ => {
                                return Err(QueryError::Invalid(format!(
                                    "Cannot use {} on non-collection column {}",
                                    if matches!(op, Operator::Contains) { "CONTAINS" } else { "CONTAINS KEY" },
                                    col.name
                                )))
                            }
                        };
                        let v = in_values(value, &elem, &col.name, values)?;
                        needs_filtering = true;
                        filters.push(Filter::Compare { column: idx, op: *op, values: v });
                        continue;
                    }
                    Operator::Like => {
                        return Err(QueryError::Invalid(
                            "LIKE restrictions are not supported yet by Helenus (they need a SASI or SAI index)".to_string(),
                        ))
                    }
                    Operator::NotIn | Operator::NotContains | Operator::NotContainsKey | Operator::Between => {
                        return Err(QueryError::Invalid(format!(
                            "Operator {op:?} is not supported yet by Helenus"
                        )))
                    }
                    _ => {}
                }
                if matches!(op, Operator::Neq) {
                    return Err(QueryError::Invalid(format!(
                        "Unsupported \"!=\" relation: {} != <value>",
                        col.name
                    )));
                }
                let v = in_values(value, &col.ty, &col.name, values)?;
                match col.kind {
                    ColumnKind::PartitionKey if matches!(op, Operator::Eq | Operator::In) => {
                        pk_values[col.position as usize] = Some(v.clone());
                    }
                    ColumnKind::PartitionKey => {
                        return Err(QueryError::Invalid(
                            "Only EQ and IN relation are supported on the partition key (unless you use the token() function)".to_string(),
                        ));
                    }
                    ColumnKind::Clustering => {
                        has_clustering_restriction = true;
                        if matches!(op, Operator::Eq | Operator::In) {
                            ck_eq[col.position as usize] = Some(v.clone());
                        } else if let Some(first) = v.first() {
                            ck_slices.push((col.position as usize, *op, first.clone()));
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
                for c in columns {
                    let col = column(table, c)?;
                    if col.kind != ColumnKind::Clustering {
                        return Err(QueryError::Invalid(format!(
                            "Multi-column relations can only be applied to clustering columns but was applied to: {}",
                            col.name
                        )));
                    }
                    idxs.push(table.column_index(&col.name).unwrap_or(0));
                    types.push(col.ty.clone());
                }
                has_clustering_restriction = true;
                let tuple = CqlType::Tuple(types.clone());
                let raw = in_values(value, &tuple, "tuple", values)?;
                let mut tuples = Vec::new();
                for t in raw {
                    let mut parts = Vec::new();
                    let mut rest = t.as_slice();
                    for _ in &types {
                        if rest.len() < 4 {
                            return Err(QueryError::Invalid("Invalid tuple value".to_string()));
                        }
                        let len = i32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
                        rest = &rest[4..];
                        if len < 0 || rest.len() < len as usize {
                            return Err(QueryError::Invalid(
                                "Invalid null value in multi-column relation".to_string(),
                            ));
                        }
                        parts.push(rest[..len as usize].to_vec());
                        rest = &rest[len as usize..];
                    }
                    tuples.push(parts);
                }
                filters.push(Filter::MultiColumn {
                    columns: idxs,
                    op: *op,
                    tuples,
                });
            }
            Relation::Token { columns, op, value } => {
                let pk: Vec<&str> = table
                    .partition_key()
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect();
                let given: Vec<&str> = columns.iter().map(|c| c.as_str()).collect();
                if pk != given {
                    return Err(QueryError::Invalid(format!(
                        "The token function arguments must be in the partition key order: {}",
                        pk.join(", ")
                    )));
                }
                let RelationValue::Single(t) = value else {
                    return Err(QueryError::Invalid(
                        "IN is not supported on token()".to_string(),
                    ));
                };
                let b = evaluate_value(t, &CqlType::Bigint, "partition key token", values)?;
                let mut a = [0u8; 8];
                if b.len() != 8 {
                    return Err(QueryError::Invalid("Invalid token value".to_string()));
                }
                a.copy_from_slice(&b);
                let v = i64::from_be_bytes(a);
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
            Relation::Element { .. } => {
                return Err(QueryError::Invalid(
                    "Restrictions on collection elements are not supported yet by Helenus"
                        .to_string(),
                ))
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
    let partitions = if pk_restricted == pk_count && !has_token {
        let mut combos: Vec<Vec<Vec<u8>>> = vec![Vec::new()];
        for v in pk_values.iter().flatten() {
            let mut next = Vec::new();
            for p in &combos {
                for x in v {
                    let mut q = p.clone();
                    q.push(x.clone());
                    next.push(q);
                }
            }
            combos = next;
        }
        let mut keys = Vec::with_capacity(combos.len());
        for c in combos {
            let key = partition_key(table, &c)?;
            if !keys.iter().any(|k: &PartitionKey| k.key == key.key) {
                keys.push(key);
            }
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
    // else is filtered (and needs ALLOW FILTERING).
    let mut prefix = Vec::new();
    let mut in_on_clustering = false;
    for v in ck_eq.iter() {
        match v {
            Some(vals) if vals.len() == 1 && !in_on_clustering => prefix.push(vals[0].clone()),
            Some(_) => {
                in_on_clustering = true;
            }
            None => break,
        }
    }
    let restricted_ck = ck_eq.iter().filter(|v| v.is_some()).count();
    let prefix_len = prefix.len();
    let slice_on_next = ck_slices.iter().all(|(p, _, _)| *p == prefix_len);
    if restricted_ck > prefix_len && !in_on_clustering {
        needs_filtering = true;
    }
    if !slice_on_next {
        needs_filtering = true;
    }
    if in_on_clustering && ck_eq.iter().skip(prefix_len).any(|v| v.is_none()) {
        // IN on a clustering column followed by unrestricted ones is fine; a gap is not.
        let first_gap = ck_eq.iter().position(|v| v.is_none()).unwrap_or(ck_count);
        if ck_eq.iter().skip(first_gap).any(|v| v.is_some()) {
            needs_filtering = true;
        }
    }
    if needs_filtering && !select.allow_filtering {
        if table.virtual_table {
            // Node-local tables are small; Cassandra's virtual tables also filter freely.
        } else {
            return Err(filtering_error());
        }
    }

    let encoded_prefix = clustering_key(table, &prefix);
    let mut start = (!encoded_prefix.is_empty()).then(|| mutation::ClusteringBound {
        prefix: encoded_prefix.clone(),
        inclusive: true,
    });
    let mut end = start.clone();
    if slice_on_next && !in_on_clustering {
        if let Some(col) = table.clustering().get(prefix_len) {
            let desc = col.order == ClusteringOrder::Desc;
            for (_, op, v) in &ck_slices {
                let mut p = encoded_prefix.clone();
                types::byte_comparable::encode(&col.ty, v, desc, &mut p);
                let inclusive = matches!(op, Operator::Gte | Operator::Lte);
                let lower = matches!(op, Operator::Gt | Operator::Gte) != desc;
                let bound = mutation::ClusteringBound {
                    prefix: p,
                    inclusive,
                };
                if lower {
                    start = Some(bound);
                } else {
                    end = Some(bound);
                }
            }
        }
    }
    if in_on_clustering {
        start = None;
        end = None;
    }

    // ORDER BY: only on clustering columns, in their declared order or its exact reverse.
    let mut reversed = false;
    if !select.order_by.is_empty() {
        if partitions.is_none() {
            return Err(QueryError::Invalid(
                "ORDER BY is only supported when the partition key is restricted by an EQ or an IN.".to_string(),
            ));
        }
        let mut first: Option<bool> = None;
        for (i, ordering) in select.order_by.iter().enumerate() {
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
            if col.position as usize != i {
                return Err(QueryError::Invalid(
                    "Order by currently only supports the ordering of columns following their declared order in the PRIMARY KEY".to_string(),
                ));
            }
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
        if partitions.as_ref().is_some_and(|p| p.len() > 1) {
            return Err(QueryError::Invalid(
                "ORDER BY with an IN restriction on the partition key is not supported yet by Helenus".to_string(),
            ));
        }
    }
    if !select.group_by.is_empty() {
        return Err(QueryError::Invalid(
            "GROUP BY is not supported yet by Helenus".to_string(),
        ));
    }
    if select.json {
        return Err(QueryError::Invalid(
            "SELECT JSON is not supported yet by Helenus".to_string(),
        ));
    }
    let aggregate = outputs.iter().any(|o| matches!(o, Output::CountRows));
    if select.distinct {
        for o in &outputs {
            if let Output::Column(i) = o {
                let kind = table.columns[*i].kind;
                if !matches!(kind, ColumnKind::PartitionKey | ColumnKind::Static) {
                    return Err(QueryError::Invalid(format!(
                        "SELECT DISTINCT queries must only request partition key columns and/or static columns (not {})",
                        table.columns[*i].name
                    )));
                }
            }
        }
        if has_clustering_restriction {
            return Err(QueryError::Invalid(
                "SELECT DISTINCT with WHERE clause only supports restriction by partition key and/or static columns.".to_string(),
            ));
        }
    }
    Ok(Plan {
        table: table.clone(),
        outputs,
        specs,
        filters,
        partitions,
        slice: ClusteringSlice {
            start,
            end,
            reversed,
        },
        limit: limit_value(&select.limit, "[limit]", values)?,
        per_partition_limit: limit_value(
            &select.per_partition_limit,
            "[per_partition_limit]",
            values,
        )?,
        distinct: select.distinct,
        aggregate,
        token_start,
        token_end,
        static_only_rows: !has_clustering_restriction,
    })
}

/// Paging state (opaque to clients; byte layout, big-endian):
/// `version u8 (=1) | partition_index u32 | returned u32 | partition_returned u32 |
///  resume_len u32 | resume bytes`.
/// `partition_index` counts partitions of an IN list already finished; `returned` is rows
/// returned so far (for LIMIT); `partition_returned` rows of the current partition (for PER
/// PARTITION LIMIT); `resume` is the storage position to continue from.
#[derive(Debug, Default, Clone, PartialEq)]
struct PagingState {
    partition_index: u32,
    returned: u32,
    partition_returned: u32,
    resume: Option<Vec<u8>>,
    /// The partition the resume position belongs to (so a per-partition count continues).
    last_partition: Option<Vec<u8>>,
}

impl PagingState {
    fn encode(&self) -> Vec<u8> {
        let mut out = vec![1u8];
        out.extend_from_slice(&self.partition_index.to_be_bytes());
        out.extend_from_slice(&self.returned.to_be_bytes());
        out.extend_from_slice(&self.partition_returned.to_be_bytes());
        for part in [&self.resume, &self.last_partition] {
            match part {
                Some(r) => {
                    out.extend_from_slice(&(r.len() as u32).to_be_bytes());
                    out.extend_from_slice(r);
                }
                None => out.extend_from_slice(&u32::MAX.to_be_bytes()),
            }
        }
        out
    }

    fn decode(bytes: &[u8]) -> Result<PagingState, QueryError> {
        let bad = || QueryError::Invalid("Invalid value for the paging state".to_string());
        let mut rest = bytes;
        let u32_at = |rest: &mut &[u8]| -> Result<u32, QueryError> {
            if rest.len() < 4 {
                return Err(bad());
            }
            let v = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
            *rest = &rest[4..];
            Ok(v)
        };
        if rest.first() != Some(&1) {
            return Err(bad());
        }
        rest = &rest[1..];
        let partition_index = u32_at(&mut rest)?;
        let returned = u32_at(&mut rest)?;
        let partition_returned = u32_at(&mut rest)?;
        let mut parts = [None, None];
        for part in parts.iter_mut() {
            let len = u32_at(&mut rest)?;
            if len != u32::MAX {
                let len = len as usize;
                if rest.len() < len {
                    return Err(bad());
                }
                *part = Some(rest[..len].to_vec());
                rest = &rest[len..];
            }
        }
        if !rest.is_empty() {
            return Err(bad());
        }
        let [resume, last_partition] = parts;
        Ok(PagingState {
            partition_index,
            returned,
            partition_returned,
            resume,
            last_partition,
        })
    }
}

pub(crate) async fn execute(
    processor: &QueryProcessor,
    schema: &Schema,
    select: &Select,
    keyspace: Option<&str>,
    values: &[Bound],
    options: &QueryOptions,
) -> Result<QueryResult, QueryError> {
    let table = resolve_table(
        schema,
        select.table.keyspace.as_ref(),
        keyspace,
        &select.table.name,
    )?;
    let plan = build_plan(table, select, values)?;
    let now = QueryProcessor::now_seconds(options);
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
    let mut out = Rows::new(&plan, page_size, state.returned as usize);
    let mut state = state;
    let mut count: i64 = 0;
    loop {
        let want = out.wanted().clamp(1, INTERNAL_PAGE_ROWS);
        let (pages, next): (Vec<PartitionData>, Option<PagingState>) = match &plan.partitions {
            Some(keys) => {
                let idx = state.partition_index as usize;
                let Some(key) = keys.get(idx) else { break };
                let response = processor
                    .coordinator
                    .read(
                        keyspace_meta,
                        ReadCommand::Partition {
                            table: table.id,
                            key: key.clone(),
                            slice: plan.slice.clone(),
                            max_rows: if plan.distinct { 1 } else { want },
                            resume: state.resume.clone(),
                        },
                        options.consistency,
                    )
                    .await?;
                let ReadResponse::Partition(page) = response else {
                    return Err(QueryError::Server("unexpected read response".to_string()));
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
                        ..Default::default()
                    },
                };
                let more = (next.partition_index as usize) < keys.len() || next.resume.is_some();
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
                    )
                    .await?;
                let ReadResponse::Range(page) = response else {
                    return Err(QueryError::Server("unexpected read response".to_string()));
                };
                let last = page.partitions.last().map(|p| p.key.key.clone());
                let next = page.resume.map(|r| PagingState {
                    resume: Some(r),
                    last_partition: last,
                    ..Default::default()
                });
                (page.partitions, next)
            }
        };
        for data in &pages {
            let continuing = state.last_partition.as_deref() == Some(data.key.key.as_slice());
            let mut partition_returned = if continuing {
                state.partition_returned as usize
            } else {
                0
            };
            let rows = partition_rows(&plan, data, now, state.resume.is_some() && continuing);
            for row in rows {
                if plan.distinct && partition_returned > 0 {
                    break;
                }
                if plan
                    .per_partition_limit
                    .is_some_and(|l| partition_returned >= l)
                {
                    break;
                }
                if !passes(&plan, &row) {
                    continue;
                }
                partition_returned += 1;
                if plan.aggregate {
                    count += 1;
                } else {
                    out.push(&plan, &row);
                }
            }
            state.last_partition = Some(data.key.key.clone());
            state.partition_returned = partition_returned as u32;
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
        if out.limit_reached() {
            break;
        }
        if out.page_full() {
            out.paging_state = Some(PagingState {
                returned: out.total_returned as u32,
                ..state.clone()
            });
            break;
        }
    }
    if plan.aggregate {
        let row: Vec<Option<Bytes>> = plan
            .outputs
            .iter()
            .map(|_| Some(Bytes::copy_from_slice(&count.to_be_bytes())))
            .collect();
        return Ok(QueryResult::Rows(ResultSet {
            columns: plan.specs,
            rows: vec![row],
            paging_state: None,
            skip_metadata: false,
        }));
    }
    Ok(QueryResult::Rows(ResultSet {
        columns: plan.specs,
        rows: out.rows,
        paging_state: out.paging_state.map(|s| s.encode()),
        skip_metadata: false,
    }))
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

    fn push(&mut self, plan: &Plan, row: &RowValues) {
        if self.limit_reached() || self.page_full() {
            return;
        }
        self.rows.push(project(plan, row));
        self.total_returned += 1;
    }

    fn limit_reached(&self) -> bool {
        self.limit.is_some_and(|l| self.total_returned >= l)
    }

    fn page_full(&self) -> bool {
        self.page_size.is_some_and(|p| self.rows.len() >= p)
    }
}

fn project(plan: &Plan, row: &RowValues) -> Vec<Option<Bytes>> {
    plan.outputs
        .iter()
        .map(|o| match o {
            Output::Column(i) => row.values[*i].as_ref().map(|v| Bytes::copy_from_slice(v)),
            Output::WriteTime(i) => {
                row.writetimes[*i].map(|t| Bytes::copy_from_slice(&t.to_be_bytes()))
            }
            Output::Ttl(i) => row.ttls[*i].map(|t| Bytes::copy_from_slice(&t.to_be_bytes())),
            Output::Token => Some(Bytes::copy_from_slice(&row.token.to_be_bytes())),
            Output::CountRows => None,
        })
        .collect()
}

fn passes(plan: &Plan, row: &RowValues) -> bool {
    let table = &plan.table;
    plan.filters.iter().all(|f| match f {
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
                for (c, v) in columns.iter().zip(tuple) {
                    let col = &table.columns[*c];
                    let actual = row.values[*c].as_deref()?;
                    let mut ord = types::compare(&col.ty, actual, v);
                    if col.order == ClusteringOrder::Desc {
                        ord = ord.reverse();
                    }
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
    })
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
    now: i32,
) -> Option<(&[u8], Option<i32>)> {
    if covering.is_some_and(|d| cell.timestamp <= d.marked_for_delete_at) {
        return None;
    }
    match &cell.value {
        CellValue::Live { value, expiry } => match expiry {
            Some(e) if e.local_expiration_time <= now => None,
            Some(e) => Some((value.as_slice(), Some(e.local_expiration_time - now))),
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
fn fill_cells(
    table: &TableMetadata,
    row: &Row,
    covering: Option<DeletionTime>,
    now: i32,
    out: &mut RowValues,
) -> bool {
    let covering = newer(covering, row.deletion);
    let mut any_live = false;
    for data in &row.columns {
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
                if let Some((v, ttl)) = live_cell(cell, covering, now) {
                    out.values[idx] = Some(v.to_vec());
                    out.writetimes[idx] = Some(cell.timestamp);
                    out.ttls[idx] = ttl;
                    any_live = true;
                }
            }
            ColumnData::Complex {
                deletion, cells, ..
            } => {
                let covering = newer(covering, *deletion);
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
                out.values[idx] = Some(assemble_multi_cell(&table.columns[idx].ty, &live));
            }
        }
    }
    any_live
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

/// Live rows of a partition page, in order, with key columns decoded.
fn partition_rows(plan: &Plan, data: &PartitionData, now: i32, continuing: bool) -> Vec<RowValues> {
    let table = &plan.table;
    let n = table.columns.len();
    let blank = || RowValues {
        values: vec![None; n],
        writetimes: vec![None; n],
        ttls: vec![None; n],
        token: data.key.token,
    };
    let mut base = blank();
    let pk_parts: Vec<Vec<u8>> = if table.partition_key_count == 1 {
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
    if let Some(st) = &data.static_row {
        static_live = fill_cells(table, st, partition_deletion, now, &mut base);
    }
    let mut out = Vec::new();
    for (clustering, row) in &data.rows {
        let covering = covering_deletion(&data.header, clustering);
        let mut values = RowValues {
            values: base.values.clone(),
            writetimes: base.writetimes.clone(),
            ttls: base.ttls.clone(),
            token: base.token,
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
    // A partition with a live static row but no live clustering rows shows up as one row of
    // static values (only on its first page, and only without clustering restrictions).
    // DISTINCT shows such a partition too. (Storage already returns reversed slices in order.)
    let static_only_row =
        (plan.static_only_rows && !continuing && data.rows.is_empty()) || plan.distinct;
    if out.is_empty() && static_live && static_only_row {
        out.push(base);
    }
    out
}

fn finish_virtual(
    plan: &Plan,
    rows: Vec<Vec<Option<Vec<u8>>>>,
    page_size: Option<usize>,
    state: PagingState,
    _now: i32,
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
            token,
        };
        if let Some(keys) = &plan.partitions {
            let pk = &row.values[..plan.table.partition_key_count];
            let encoded: Vec<Vec<u8>> = pk.iter().map(|v| v.clone().unwrap_or_default()).collect();
            let Ok(key) = partition_key(&plan.table, &encoded) else {
                continue;
            };
            if !keys.iter().any(|k| k.key == key.key) {
                continue;
            }
        }
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
        if plan.per_partition_limit.is_some_and(|l| count > l) || (plan.distinct && count > 1) {
            continue;
        }
        matching.push(row);
    }
    if plan.slice.reversed {
        matching.reverse();
    }
    if plan.aggregate {
        let count = matching.len() as i64;
        return Ok(ResultSet {
            columns: plan.specs.clone(),
            rows: vec![plan
                .outputs
                .iter()
                .map(|_| Some(Bytes::copy_from_slice(&count.to_be_bytes())))
                .collect()],
            paging_state: None,
            skip_metadata: false,
        });
    }
    let offset = state.returned as usize;
    let limit = plan.limit.unwrap_or(usize::MAX);
    let end_by_limit = limit.min(matching.len());
    let end = match page_size {
        Some(p) => (offset + p).min(end_by_limit),
        None => end_by_limit,
    };
    let rows = matching
        .get(offset.min(end)..end)
        .unwrap_or(&[])
        .iter()
        .map(|r| project(plan, r))
        .collect();
    let paging_state = (end < end_by_limit).then(|| {
        PagingState {
            returned: end as u32,
            ..Default::default()
        }
        .encode()
    });
    Ok(ResultSet {
        columns: plan.specs.clone(),
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
