//! Which WHERE clauses a SELECT (and the keys of UPDATE and DELETE) may have, refused in
//! Cassandra 5.0's words; checked at PREPARE and again when a statement is planned.

use cql_syntax::ast::{Identifier, Operator, Relation, RelationValue, Select, Term};
use schema::{ColumnKind, TableMetadata};
use types::CqlType;

use crate::bind::column;
use crate::QueryError;

use super::filter::Filter;

/// Whether a term is a call of `token(...)`.
pub(crate) fn is_token_call(t: &Term) -> bool {
    matches!(t, Term::FunctionCall { keyspace, name, .. }
        if keyspace.as_ref().is_none_or(|k| k.as_str() == "system")
            && name.as_str().eq_ignore_ascii_case("token"))
}

/// What Cassandra refuses in a WHERE clause whatever the values bound (and ALLOW FILTERING)
/// say, checked at PREPARE as Cassandra does (`analyze::analyze`, for every SELECT prepared or
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

/// Cassandra's refusal of `!=`, quoting the relation.
pub(super) fn unsupported_neq(column: &str, value: &RelationValue) -> QueryError {
    let value = match value {
        RelationValue::Single(t) => t.to_string(),
        _ => "?".to_string(),
    };
    QueryError::Invalid(format!("Unsupported \"!=\" relation: {column} != {value}"))
}

/// One relation's own validity, before it is merged with the others: a multi-column
/// relation's columns (`check_multi_column`), a token's arguments, and `!=`, which Cassandra
/// refuses on every column.
pub(super) fn check_relation(table: &TableMetadata, relation: &Relation) -> Result<(), QueryError> {
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
                    crate::select::term_text::op_name(op)
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

pub(super) fn is_slice(op: &Operator) -> bool {
    matches!(
        op,
        Operator::Lt | Operator::Lte | Operator::Gt | Operator::Gte
    )
}

/// Cassandra's refusal of a slice on values holding durations, which have no order
/// (`SingleColumnRelation.newSliceRestriction`).
pub(super) fn duration_slice_refused(ty: &CqlType) -> QueryError {
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
pub(super) struct ColumnRestrictions {
    pub(super) eq: bool,
    pub(super) in_list: bool,
    /// Slice bounds by a single-column relation; a multi-column one sets `tuple_slice`.
    pub(super) start: bool,
    pub(super) end: bool,
    pub(super) tuple_start: bool,
    pub(super) tuple_end: bool,
    /// The column is the first of a multi-column slice.
    pub(super) tuple_first: bool,
}

/// A multi-column relation as Cassandra prints it in its messages: `(d, c) > (0, 0)`.
pub(super) fn multi_column_text(
    columns: &[Identifier],
    op: &Operator,
    value: &RelationValue,
) -> String {
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
        crate::select::term_text::op_name(op)
    )
}

/// Cassandra's checks of a multi-column relation's columns, in its order for each column: a
/// clustering column, named once, each the one after the previous in the PRIMARY KEY.
pub(super) fn check_multi_column(
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
pub(super) fn merge_relation(
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
pub(super) fn clustering_restriction_error(
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
pub(super) fn multi_column_filters(
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
pub(super) fn restricted(filters: &[Filter], i: usize) -> &[Vec<u8>] {
    match &filters[i] {
        Filter::Compare { values, .. } => values,
        _ => &[],
    }
}

pub(super) fn filtering_error() -> QueryError {
    QueryError::Invalid(
        "Cannot execute this query as it might involve data filtering and thus may have unpredictable performance. If you want to execute this query despite the performance unpredictability, use ALLOW FILTERING".to_string(),
    )
}
