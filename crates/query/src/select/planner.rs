//! Planning a SELECT: its restrictions become the partitions to read (or a token range to
//! scan), the clustering slices of each, the row filters the read does not enforce, and the
//! limits, grouping and ordering the rows read go through.

use std::sync::Arc;

use cql_syntax::ast::{
    Identifier, Operator, Order, Relation, RelationValue, Select, SelectorExpr, Term,
};
use mutation::ClusteringSlice;
use schema::{ClusteringOrder, ColumnKind, ColumnMetadata, Schema, TableMetadata};
use types::CqlType;

use crate::bind::{column, Bound};
use crate::elements::split_elements;
use crate::eval::{evaluate, TermValue};
use crate::interface::PlanCache;
use crate::keys::{exact_key_type, partition_key};
use crate::limits::{InSelectGuardrails, KeyKind};
use crate::slices::{ClusteringRange, TupleBound};
use crate::QueryError;

use super::filter::{enforced_bit, Filter};
use super::partitions::{product_len, PartitionList};
use super::plan::Plan;
use super::restrictions::{
    clustering_restriction_error, filtering_error, is_token_call, multi_column_filters, restricted,
    unsupported_neq,
};
use super::selection::compile_selection;
use super::selector::{self, Selection};

/// `token(v1, ...)` on the right of a token relation (`token(k) > token(1)`): the token of the
/// partition key those values make; `None` when the term is not a `token()` call.
pub(super) fn token_of_values(
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

pub(super) fn evaluate_value(
    t: &Term,
    ty: &CqlType,
    name: &str,
    values: &[Bound],
) -> Result<Vec<u8>, QueryError> {
    evaluate_value_or(t, ty, name, values, false)
}

/// Cassandra's refusal of a null in a restriction, and, on a non-key column, its other words.
pub(super) fn invalid_null(name: &str) -> QueryError {
    QueryError::Invalid(format!("Invalid null value in condition for column {name}"))
}

pub(super) fn unsupported_null(name: &str) -> QueryError {
    QueryError::Invalid(format!("Unsupported null value for column {name}"))
}

/// `evaluate_value`, refusing a null or unset value in Cassandra's words for a key column or,
/// if `non_key`, for a regular or static one.
pub(super) fn evaluate_value_or(
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

pub(super) fn in_values(
    value: &RelationValue,
    ty: &CqlType,
    name: &str,
    values: &[Bound],
) -> Result<Vec<Vec<u8>>, QueryError> {
    in_values_or(value, ty, name, values, false)
}

/// `in_values`, refusing a null or unset value as `evaluate_value_or` does.
pub(super) fn in_values_or(
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

pub(super) fn limit_value(
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

pub(super) fn build_plan(
    schema: &Schema,
    table: &Arc<TableMetadata>,
    select: &Select,
    values: &[Bound],
    cache: Option<&PlanCache>,
    guardrails: &InSelectGuardrails,
    warnings: &mut Vec<String>,
) -> Result<Plan, QueryError> {
    let mut selection = bound_selection(schema, table, select, values, cache)?;
    // `analyze::analyze` ran `check_where` on the WHERE clause: at PREPARE for a prepared
    // statement (and ALTER and DROP TABLE forget prepared statements), else for this QUERY.
    let pk_count = table.partition_key_count;
    let ck_count = table.clustering_count;
    let mut r = Restrictions::read(table, select, values)?;
    let pk_restricted = r.pk_values.iter().filter(|v| v.is_some()).count();
    let partitions = partition_list(table, &r, guardrails, warnings)?;
    if partitions.is_none() && (pk_restricted > 0 || r.has_clustering_restriction) {
        r.needs_filtering = true;
    }
    let shape = clustering_shape(&r, ck_count, guardrails, warnings)?;
    if shape.needs_filtering {
        r.needs_filtering = true;
    }
    check_filtering(table, select, r.needs_filtering)?;

    // The clustering ranges the read covers (a superset of the rows selected: every row is
    // still checked against the restrictions the read does not enforce, `enforced_by_read`).
    let read = clustering_read(table, &r.filters, &r.ck_eq, &r.ck_slices, &r.ck_multi);
    let (start, end, slices) = match read.ranges {
        None => (None, None, None),
        Some(mut one) if one.len() == 1 => {
            let (start, end) = one.remove(0);
            (start, end, None)
        }
        Some(several) => (None, None, Some(several)),
    };
    check_static_selection(table, select, &selection, r.has_clustering_restriction)?;
    let (reversed, post_ordering) = ordering(
        table,
        select,
        &mut selection,
        partitions.is_some(),
        r.partition_key_in,
        &shape.eq_like,
    )?;
    let fetches_static = fetches_static(table, select, &selection);
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
    let eq_prefix = shape.prefix_len.min(read.prefix_columns);
    let enforced = enforced_by_read(
        table,
        &r.filters,
        partitions.is_some(),
        eq_prefix,
        if read.sliced && read.prefix_columns == shape.prefix_len {
            r.ck_slices.len()
        } else {
            usize::MAX
        },
        shape.in_on_clustering,
    );
    let needs_partition_key = group_by.is_some()
        || select.distinct
        || selection.reads_column_below(pk_count)
        || r.filters.iter().enumerate().any(|(i, f)| match f {
            _ if enforced_bit(enforced, i) => false,
            Filter::Compare { column, .. } | Filter::IsNotNull(column) => *column < pk_count,
            Filter::MultiColumn { .. } | Filter::Token { .. } | Filter::MapEntry { .. } => false,
        });
    let clustering_names = ck_count > 0
        && shape.eq_like.iter().all(Option::is_some)
        && r.ck_slices.is_empty()
        && r.ck_multi
            .iter()
            .all(|(_, op, _)| matches!(op, Operator::Eq | Operator::In));
    Ok(Plan {
        table: table.clone(),
        selection,
        filters: r.filters,
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
        token_start: r.token_start,
        token_end: r.token_end,
        static_only_rows: !r.has_clustering_restriction,
        post_ordering,
        partition_key_restricted: pk_restricted > 0 || r.has_token,
        partition_key_in: r.partition_key_in,
        fetches_static,
        clustering_names,
    })
}

/// The statement's selection, compiled (or shared from its prepared statement's cache) and
/// with its bind markers bound.
fn bound_selection(
    schema: &Schema,
    table: &Arc<TableMetadata>,
    select: &Select,
    values: &[Bound],
    cache: Option<&PlanCache>,
) -> Result<Arc<Selection>, QueryError> {
    let mut selection = match cache {
        Some(cache) => {
            cache.get_or_compile(schema.version, || compile_selection(schema, table, select))?
        }
        None => Arc::new(compile_selection(schema, table, select)?),
    };
    // A prepared statement's selection is shared; it is copied only to bind terms into it.
    if selection.needs_binding() {
        Arc::make_mut(&mut selection).bind(values)?;
    }
    Ok(selection)
}

/// The WHERE clause read relation by relation: each relation as a row filter, and what it
/// restricts of the primary key and the token.
struct Restrictions {
    filters: Vec<Filter>,
    // Restrictions on key columns, as indexes into `filters` (whose values they read through
    // `restricted`), not copies of their values.
    pk_values: Vec<Option<usize>>,
    ck_eq: Vec<Option<usize>>,
    ck_slices: Vec<(usize, Operator, usize)>,
    /// Multi-column relations on clustering columns: (first column's position, operator,
    /// index into `filters`).
    ck_multi: Vec<(usize, Operator, usize)>,
    /// Filters (by index) of an `IN ?` on clustering columns: an IN whatever its bound values,
    /// as Cassandra decides at PREPARE (`IN (x)` is an `=`).
    in_markers: Vec<usize>,
    needs_filtering: bool,
    token_start: Option<i64>,
    token_end: Option<i64>,
    has_token: bool,
    has_clustering_restriction: bool,
    /// An IN of more than one value (or a marker) on the partition key; `IN (x)` is an `=`.
    partition_key_in: bool,
}

impl Restrictions {
    fn read(
        table: &TableMetadata,
        select: &Select,
        values: &[Bound],
    ) -> Result<Restrictions, QueryError> {
        let mut r = Restrictions {
            filters: Vec::with_capacity(select.where_clause.len()),
            pk_values: vec![None; table.partition_key_count],
            ck_eq: vec![None; table.clustering_count],
            ck_slices: Vec::new(),
            ck_multi: Vec::new(),
            in_markers: Vec::new(),
            needs_filtering: false,
            token_start: None,
            token_end: None,
            has_token: false,
            has_clustering_restriction: false,
            partition_key_in: false,
        };
        for rel in &select.where_clause {
            match rel {
                Relation::Simple {
                    column: c,
                    op,
                    value,
                } => r.simple(table, c, op, value, values)?,
                Relation::MultiColumn { columns, op, value } => {
                    r.multi_column(table, columns, op, value, values)?
                }
                // `check_where` refused every argument list but the partition key in order.
                Relation::Token { op, value, .. } => r.token(table, op, value, values)?,
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
                } => r.map_entry(table, c, key, op, value, values)?,
                Relation::IsNotNull(c) => {
                    let col = column(table, c)?;
                    r.filters.push(Filter::IsNotNull(
                        table.column_index(&col.name).unwrap_or(0),
                    ));
                }
            }
        }
        Ok(r)
    }

    /// `c op value`.
    fn simple(
        &mut self,
        table: &TableMetadata,
        c: &Identifier,
        op: &Operator,
        value: &RelationValue,
        values: &[Bound],
    ) -> Result<(), QueryError> {
        let col = column(table, c)?;
        let idx = table.column_index(&col.name).unwrap_or(0);
        match op {
            Operator::Contains | Operator::ContainsKey => {
                return self.contains(col, idx, op, value, values);
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
        let v = simple_values(col, op, value, values)?;
        match col.kind {
            ColumnKind::PartitionKey if matches!(op, Operator::Eq | Operator::In) => {
                // `IN (x)` is an `=`; `IN ()` is an IN, as in Cassandra.
                if *op == Operator::In
                    && !matches!(value, RelationValue::List(items) if items.len() == 1)
                {
                    self.partition_key_in = true;
                }
                self.pk_values[col.position as usize] = Some(self.filters.len());
            }
            // A slice on a partition key column filters a scan, as Cassandra does with
            // ALLOW FILTERING (comparing values, not tokens).
            ColumnKind::PartitionKey
                if matches!(
                    op,
                    Operator::Gt | Operator::Gte | Operator::Lt | Operator::Lte
                ) =>
            {
                self.needs_filtering = true;
            }
            ColumnKind::PartitionKey => {
                return Err(QueryError::Invalid(
                    "Only EQ and IN relation are supported on the partition key (unless you use the token() function)".to_string(),
                ));
            }
            ColumnKind::Clustering => {
                self.has_clustering_restriction = true;
                if matches!(op, Operator::Eq | Operator::In) {
                    if matches!(value, RelationValue::Marker(_)) {
                        self.in_markers.push(self.filters.len());
                    }
                    self.ck_eq[col.position as usize] = Some(self.filters.len());
                } else if !v.is_empty() {
                    self.ck_slices
                        .push((col.position as usize, *op, self.filters.len()));
                }
            }
            _ => self.needs_filtering = true,
        }
        self.filters.push(Filter::Compare {
            column: idx,
            op: *op,
            values: v,
        });
        Ok(())
    }

    /// `c CONTAINS value`, `c CONTAINS KEY value`: a filter on a collection column.
    fn contains(
        &mut self,
        col: &ColumnMetadata,
        idx: usize,
        op: &Operator,
        value: &RelationValue,
        values: &[Bound],
    ) -> Result<(), QueryError> {
        let elem = match (op, col.ty.unfrozen()) {
            (Operator::ContainsKey, CqlType::Map(k, _)) => (**k).clone(),
            (Operator::Contains, CqlType::Map(_, v)) => (**v).clone(),
            (Operator::Contains, CqlType::List(e) | CqlType::Set(e)) => (**e).clone(),
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
        self.needs_filtering = true;
        self.filters.push(Filter::Compare {
            column: idx,
            op: *op,
            values: v,
        });
        Ok(())
    }

    /// `(a, b) op value`.
    fn multi_column(
        &mut self,
        table: &TableMetadata,
        columns: &[Identifier],
        op: &Operator,
        value: &RelationValue,
        values: &[Bound],
    ) -> Result<(), QueryError> {
        let mut idxs = Vec::new();
        let mut types = Vec::new();
        for (i, c) in columns.iter().enumerate() {
            let col = column(table, c)?;
            idxs.push(table.column_index(&col.name).unwrap_or(0));
            types.push(col.ty.clone());
            // `check_where` made them consecutive clustering columns.
            if i == 0 && col.kind == ColumnKind::Clustering {
                self.ck_multi
                    .push((col.position as usize, *op, self.filters.len()));
            }
        }
        self.has_clustering_restriction = true;
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
            self.in_markers.push(self.filters.len());
        }
        self.filters.push(Filter::MultiColumn {
            columns: idxs,
            op: *op,
            tuples,
        });
        Ok(())
    }

    /// `token(...) op value`.
    fn token(
        &mut self,
        table: &TableMetadata,
        op: &Operator,
        value: &RelationValue,
        values: &[Bound],
    ) -> Result<(), QueryError> {
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
        self.has_token = true;
        match op {
            Operator::Gt | Operator::Gte => {
                self.token_start = Some(self.token_start.map_or(v, |s: i64| s.max(v)))
            }
            Operator::Lt | Operator::Lte => {
                self.token_end = Some(self.token_end.map_or(v, |e: i64| e.min(v)))
            }
            Operator::Eq => {
                self.token_start = Some(v);
                self.token_end = Some(v);
            }
            _ => {
                return Err(QueryError::Invalid(
                    "Unsupported operator on token()".to_string(),
                ))
            }
        }
        self.filters.push(Filter::Token { op: *op, value: v });
        Ok(())
    }

    /// `m[key] = value` on a map column.
    fn map_entry(
        &mut self,
        table: &TableMetadata,
        c: &Identifier,
        key: &Term,
        op: &Operator,
        value: &Term,
        values: &[Bound],
    ) -> Result<(), QueryError> {
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
            _ => return Err(QueryError::Invalid(
                "Restrictions on elements of sets and user types are not supported yet by Helenus"
                    .to_string(),
            )),
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
        self.needs_filtering = true;
        self.filters.push(Filter::MapEntry {
            column: table.column_index(&col.name).unwrap_or(0),
            key,
            value,
        });
        Ok(())
    }
}

/// The values of `c op value` (not CONTAINS), with Cassandra's words for a null or unset one.
fn simple_values(
    col: &ColumnMetadata,
    op: &Operator,
    value: &RelationValue,
    values: &[Bound],
) -> Result<Vec<Vec<u8>>, QueryError> {
    Ok(match (col.kind, op, value) {
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
    })
}

/// The partitions the read names when `=`/IN restricts every partition key column (`None`
/// otherwise: the read scans a token range), under the guardrails on IN restrictions.
fn partition_list(
    table: &TableMetadata,
    r: &Restrictions,
    guardrails: &InSelectGuardrails,
    warnings: &mut Vec<String>,
) -> Result<Option<PartitionList>, QueryError> {
    let (filters, pk_values) = (&r.filters, &r.pk_values);
    let pk_restricted = pk_values.iter().filter(|v| v.is_some()).count();
    let single_key = match pk_values.as_slice() {
        [Some(i)] if !r.has_token => match restricted(filters, *i) {
            [only] => Some(only),
            _ => None,
        },
        _ => None,
    };
    if let Some(only) = single_key {
        // One partition of a one-column key (a point read): no combinations to make or sort.
        return Ok(Some(PartitionList::Keys(vec![partition_key(
            table,
            std::slice::from_ref(only),
        )?])));
    }
    if pk_restricted != table.partition_key_count {
        return Ok(None);
    }
    let columns: Vec<&[Vec<u8>]> = pk_values
        .iter()
        .flatten()
        .map(|i| restricted(filters, *i))
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
    let keys = PartitionList::product(table, &columns, filters)?;
    if has_in {
        // The distinct keys (Cassandra counts them after a token() restriction beside
        // them left some out; Helenus leaves them out as it reads).
        guardrails.check_partition_keys(&table.name, keys.len() as u64, warnings)?;
    }
    Ok(Some(keys))
}

/// How `=`/IN restrictions cover the clustering columns.
struct ClusteringShape {
    /// Per clustering column, whether `=` or IN restricts it, by a single- or a multi-column
    /// relation, and to one value (`Some(true)`).
    eq_like: Vec<Option<bool>>,
    /// The leading clustering columns restricted to one value each.
    prefix_len: usize,
    /// An IN among the leading `=`/`IN` columns.
    in_on_clustering: bool,
    /// The clustering restrictions need filtering: not a prefix of `=` then at most one slice.
    needs_filtering: bool,
}

/// Clustering: a prefix of = restrictions, then at most one slice, reads a slice; anything
/// else is filtered (and needs ALLOW FILTERING). The combinations of an IN are checked
/// against the guardrails.
fn clustering_shape(
    r: &Restrictions,
    ck_count: usize,
    guardrails: &InSelectGuardrails,
    warnings: &mut Vec<String>,
) -> Result<ClusteringShape, QueryError> {
    let (filters, ck_eq, ck_slices, ck_multi, in_markers) = (
        &r.filters,
        &r.ck_eq,
        &r.ck_slices,
        &r.ck_multi,
        &r.in_markers,
    );
    let mut needs_filtering = false;
    let mut ck_eq_like: Vec<Option<bool>> = ck_eq
        .iter()
        .map(|v| v.map(|i| restricted(filters, i).len() == 1 && !in_markers.contains(&i)))
        .collect();
    for (first, op, i) in ck_multi {
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
            .map(|i| restricted(filters, *i).len())
            .collect();
        for (first, op, i) in ck_multi {
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
    Ok(ClusteringShape {
        eq_like: ck_eq_like,
        prefix_len,
        in_on_clustering,
        needs_filtering,
    })
}

/// Refuses, in Cassandra's words, restrictions that would filter without ALLOW FILTERING and
/// multi-column restrictions that could only filter.
fn check_filtering(
    table: &TableMetadata,
    select: &Select,
    needs_filtering: bool,
) -> Result<(), QueryError> {
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
    Ok(())
}

/// Cassandra's `StatementRestrictions`: a selection of static (and partition key) columns
/// only reads no clustering row, so it cannot restrict one.
fn check_static_selection(
    table: &TableMetadata,
    select: &Select,
    selection: &Selection,
    has_clustering_restriction: bool,
) -> Result<(), QueryError> {
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
    Ok(())
}

/// The columns rows are sorted on after they are read: (index, descending).
type PostOrdering = Vec<(usize, bool)>;

/// ORDER BY: only on clustering columns, in their declared order or its exact reverse.
/// Returns whether the read is reversed, and the columns of a post-query ordering (ORDER BY
/// with an IN on the partition key), which the selection then carries as hidden outputs.
fn ordering(
    table: &TableMetadata,
    select: &Select,
    selection: &mut Arc<Selection>,
    partitions_named: bool,
    partition_key_in: bool,
    ck_eq_like: &[Option<bool>],
) -> Result<(bool, Option<PostOrdering>), QueryError> {
    let mut reversed = false;
    let mut post_ordering = None;
    if !select.order_by.is_empty() {
        if !partitions_named {
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
            Arc::make_mut(selection).add_hidden_columns(columns.iter().map(|(index, _)| *index));
            post_ordering = Some(columns);
        }
    }
    Ok((reversed, post_ordering))
}

/// Cassandra's column filter fetches a table's static columns for `*`, for a selection of
/// one, and for a selection of key columns only (it then fetches every column).
fn fetches_static(table: &TableMetadata, select: &Select, selection: &Selection) -> bool {
    table.columns.iter().any(|c| c.kind == ColumnKind::Static)
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
        }
}

/// What a partition read covers of the clustering keys (`clustering_read`).
pub(super) struct ClusteringRead {
    /// The ranges, in clustering order; `None` when nothing bounds the read (the whole
    /// partition).
    pub(super) ranges: Option<Vec<ClusteringRange>>,
    /// How many leading clustering columns the ranges fix by `=` or `IN`.
    pub(super) prefix_columns: usize,
    /// Every slice restriction on the column after them bounds the ranges.
    pub(super) sliced: bool,
}

/// The ranges of clustering keys a partition read covers, in clustering order, as Cassandra's
/// `ClusteringColumnRestrictions` builds its `Slices`: every combination of the values of the
/// leading clustering columns restricted by `=` or `IN` (single- or multi-column relations),
/// each followed by the slice the single- and multi-column bounds on the next column make
/// (`slices::ranges`: values compare in their own order, so columns of mixed clustering order
/// make several ranges). Relations after a gap or after the slice only filter: the ranges hold
/// a superset of the rows (every row read is still checked against the restrictions the read
/// does not enforce). An empty IN makes no range.
pub(super) fn clustering_read(
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
pub(super) fn enforced_by_read(
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

/// Validates GROUP BY as Cassandra does and returns how many clustering columns a group key
/// has. GROUP BY names primary key columns in order; a column restricted by `=` may be left out;
/// the partition key must be whole; the last element may be a function of its clustering
/// column (`functions`, compiled with the selection, has one entry per element).
pub(super) fn group_by_prefix(
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
