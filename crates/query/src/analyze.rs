//! A statement's analysis for PREPARE (and for QUERY and BATCH before they bind): the specs of
//! its bind markers, the indexes of the partition key markers that token-aware drivers route
//! by, its result columns, and the checks Cassandra makes of a statement when it prepares it.

use cql_syntax::ast::{
    Assignment, DeleteSelector, InsertValues, Operator, Relation, RelationValue, Statement, Term,
};
use schema::{ColumnKind, Schema, TableMetadata};
use types::CqlType;

use crate::bind::{column, element_marker_name, resolve_table, spec, term, using, Specs};
use crate::interface::ColumnSpec;
use crate::{select, QueryError};

pub(crate) struct BindInfo {
    pub specs: Vec<ColumnSpec>,
    pub pk_indexes: Vec<u16>,
    pub result_columns: Vec<ColumnSpec>,
}

fn relations(
    specs: &mut Specs,
    table: &TableMetadata,
    rels: &[Relation],
) -> Result<(), QueryError> {
    for rel in rels {
        match rel {
            Relation::Simple {
                column: c,
                op,
                value,
            } => {
                let col = column(table, c)?;
                // Cassandra's bind variable names: `value(l)` for CONTAINS, `key(m)` for
                // CONTAINS KEY, the column's own name otherwise.
                let name = match op {
                    Operator::Contains => format!("value({})", col.name),
                    Operator::ContainsKey => format!("key({})", col.name),
                    _ => col.name.clone(),
                };
                let name = name.as_str();
                let ty = match op {
                    Operator::Contains => match col.ty.unfrozen() {
                        CqlType::List(e) | CqlType::Set(e) => (**e).clone(),
                        CqlType::Map(_, v) => (**v).clone(),
                        other => other.clone(),
                    },
                    Operator::ContainsKey => match col.ty.unfrozen() {
                        CqlType::Map(k, _) => (**k).clone(),
                        other => other.clone(),
                    },
                    _ => col.ty.clone(),
                };
                match value {
                    RelationValue::Single(t) => term(specs, table, name, &ty, t),
                    RelationValue::List(items) => {
                        for t in items {
                            term(specs, table, name, &ty, t);
                        }
                    }
                    RelationValue::Marker(m) => specs.marker(
                        m,
                        spec(table, &format!("in({name})"), CqlType::List(Box::new(ty))),
                    ),
                    RelationValue::Between(a, b) => {
                        term(specs, table, name, &ty, a);
                        term(specs, table, name, &ty, b);
                    }
                }
            }
            Relation::MultiColumn { columns, value, .. } => {
                let mut types = Vec::new();
                let mut names = Vec::new();
                for c in columns {
                    let col = column(table, c)?;
                    types.push(col.ty.clone());
                    names.push(col.name.clone());
                }
                let tuple = CqlType::Tuple(types.clone());
                let name = format!("({})", names.join(","));
                // A tuple literal's markers bind its columns, named after them; a marker for a
                // whole tuple takes the columns' list (Cassandra's names).
                let tuple_term = |specs: &mut Specs, t: &Term| match t {
                    Term::Tuple(items) if items.len() == names.len() => {
                        for ((item, n), ty) in items.iter().zip(&names).zip(&types) {
                            term(specs, table, n, ty, item);
                        }
                    }
                    _ => term(specs, table, &name, &tuple, t),
                };
                match value {
                    RelationValue::Single(t) => tuple_term(specs, t),
                    RelationValue::List(items) => {
                        for t in items {
                            tuple_term(specs, t);
                        }
                    }
                    RelationValue::Marker(m) => specs.marker(
                        m,
                        spec(
                            table,
                            &format!("in({})", names.join(",")),
                            CqlType::List(Box::new(tuple.clone())),
                        ),
                    ),
                    RelationValue::Between(a, b) => {
                        tuple_term(specs, a);
                        tuple_term(specs, b);
                    }
                }
            }
            Relation::Token { value, .. } => {
                if let RelationValue::Single(t) = value {
                    match t {
                        // token(v1, ...): the values are the partition key's.
                        Term::FunctionCall { args, .. }
                            if select::restrictions::is_token_call(t) =>
                        {
                            for (i, (arg, col)) in
                                args.iter().zip(table.partition_key()).enumerate()
                            {
                                let arg_name = format!("arg{i}(system.token)");
                                term(specs, table, &arg_name, &col.ty, arg);
                            }
                        }
                        _ => term(specs, table, "partition key token", &CqlType::Bigint, t),
                    }
                }
            }
            Relation::Element {
                column: c,
                key,
                value,
                ..
            } => {
                let col = column(table, c)?;
                let (kt, vt) = match col.ty.unfrozen() {
                    CqlType::Map(k, v) => ((**k).clone(), (**v).clone()),
                    CqlType::List(v) => (CqlType::Int, (**v).clone()),
                    other => (other.clone(), other.clone()),
                };
                term(specs, table, &format!("key({})", col.name), &kt, key);
                term(specs, table, &format!("value({})", col.name), &vt, value);
            }
            Relation::IsNotNull(_) | Relation::CustomIndex { .. } => {}
        }
    }
    Ok(())
}

/// The table whose partition key the markers may bind, and (column name, marker index) pairs.
type PkCandidates = (std::sync::Arc<TableMetadata>, Vec<(String, usize)>);

fn walk(
    statement: &Statement,
    schema: &Schema,
    keyspace: Option<&str>,
    specs: &mut Specs,
    pk_candidates: &mut Option<PkCandidates>,
    result_columns: &mut Vec<ColumnSpec>,
) -> Result<(), QueryError> {
    match statement {
        Statement::Select(s) => {
            let table = resolve_table(schema, s.table.keyspace.as_ref(), keyspace, &s.table.name)?;
            let selection = select::selection::analyze_selection(schema, table, s)?;
            *result_columns = selection.columns;
            for m in selection.markers {
                specs.marker(&m.marker, spec(table, &m.name, m.ty));
            }
            relations(specs, table, &s.where_clause)?;
            select::restrictions::check_where(table, s)?;
            select::selection::check_distinct(schema, table, s)?;
            if let Some(Term::BindMarker(m)) = &s.per_partition_limit {
                specs.marker(m, spec(table, "[per_partition_limit]", CqlType::Int));
            }
            if let Some(Term::BindMarker(m)) = &s.limit {
                specs.marker(m, spec(table, "[limit]", CqlType::Int));
            }
            *pk_candidates = Some((table.clone(), Vec::new()));
        }
        Statement::Insert(s) => {
            let table = resolve_table(schema, s.table.keyspace.as_ref(), keyspace, &s.table.name)?;
            match &s.values {
                InsertValues::Json { value, .. } => {
                    term(specs, table, "[json]", &CqlType::Text, value)
                }
                InsertValues::Values { columns, values } => {
                    for (c, v) in columns.iter().zip(values) {
                        let col = column(table, c)?;
                        term(specs, table, &col.name, &col.ty, v);
                    }
                }
            }
            using(specs, table, &s.using);
            *pk_candidates = Some((table.clone(), Vec::new()));
        }
        Statement::Update(s) => {
            let table = resolve_table(schema, s.table.keyspace.as_ref(), keyspace, &s.table.name)?;
            crate::write::check_assignments(table, &s.assignments)?;
            using(specs, table, &s.using);
            for a in &s.assignments {
                match a {
                    Assignment::Set {
                        column: c,
                        value: t,
                    } => {
                        let col = column(table, c)?;
                        term(specs, table, &col.name, &col.ty, t);
                    }
                    Assignment::Add {
                        column: c,
                        value: t,
                    }
                    | Assignment::Subtract {
                        column: c,
                        value: t,
                    }
                    | Assignment::Prepend {
                        column: c,
                        value: t,
                    } => {
                        let col = column(table, c)?;
                        // `s = s + {..}` / `m = m - {k}`: the operand of a set/list is a
                        // collection of the column's type; of a map removal, a set of keys.
                        let ty = match (a, col.ty.unfrozen()) {
                            (Assignment::Subtract { .. }, CqlType::Map(k, _)) => {
                                CqlType::Set(k.clone())
                            }
                            _ => col.ty.clone(),
                        };
                        term(specs, table, &col.name, &ty, t);
                    }
                    Assignment::SetElement {
                        column: c,
                        key: k,
                        value: v,
                    } => {
                        let col = column(table, c)?;
                        let (kt, vt) = match col.ty.unfrozen() {
                            CqlType::Map(k, v) => ((**k).clone(), (**v).clone()),
                            CqlType::List(v) => (CqlType::Int, (**v).clone()),
                            other => (other.clone(), other.clone()),
                        };
                        term(specs, table, &element_marker_name(col), &kt, k);
                        term(specs, table, &format!("value({})", col.name), &vt, v);
                    }
                    Assignment::SetField {
                        column: c,
                        field: f,
                        value: v,
                    } => {
                        let col = column(table, c)?;
                        if let CqlType::Udt(u) = col.ty.unfrozen() {
                            if let Some((_, fty)) = u.fields.iter().find(|(n, _)| n == f.as_str()) {
                                term(specs, table, f.as_str(), fty, v);
                            }
                        }
                    }
                }
            }
            relations(specs, table, &s.where_clause)?;
            let only_static = crate::write::assigns_only_static(table, &s.assignments)?;
            crate::write::check_modification_where(table, &s.where_clause, "UPDATE", only_static)?;
            *pk_candidates = Some((table.clone(), Vec::new()));
        }
        Statement::Delete(s) => {
            let table = resolve_table(schema, s.table.keyspace.as_ref(), keyspace, &s.table.name)?;
            for sel in &s.columns {
                if let DeleteSelector::Element { column: c, key: k } = sel {
                    let col = column(table, c)?;
                    let kt = match col.ty.unfrozen() {
                        CqlType::Map(k, _) => (**k).clone(),
                        CqlType::List(_) => CqlType::Int,
                        CqlType::Set(e) => (**e).clone(),
                        other => other.clone(),
                    };
                    term(specs, table, &element_marker_name(col), &kt, k);
                }
            }
            using(specs, table, &s.using);
            relations(specs, table, &s.where_clause)?;
            let only_static = crate::write::deletes_only_static(table, &s.columns)?;
            crate::write::check_modification_where(table, &s.where_clause, "DELETE", only_static)?;
            *pk_candidates = Some((table.clone(), Vec::new()));
        }
        Statement::Batch(b) => {
            crate::write::check_batch_kind(
                b.kind == cql_syntax::ast::BatchKind::Counter,
                b.statements.len(),
            )?;
            for inner in &b.statements {
                let mut ignored = None;
                let mut no_result = Vec::new();
                walk(inner, schema, keyspace, specs, &mut ignored, &mut no_result)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Analyses a statement for PREPARE (and for QUERY, to know how to bind named values).
pub(crate) fn analyze(
    statement: &Statement,
    schema: &Schema,
    keyspace: Option<&str>,
) -> Result<BindInfo, QueryError> {
    let mut specs = Specs::default();
    let mut table = None;
    let mut result_columns = Vec::new();
    walk(
        statement,
        schema,
        keyspace,
        &mut specs,
        &mut table,
        &mut result_columns,
    )?;
    let receivers = std::mem::take(&mut specs.receivers);
    let specs = specs.finish(cql_syntax::bind_marker_count(statement))?;
    // Partition-key indexes: for each partition key column (in key order), the first bind
    // variable that binds the column directly (whatever the marker's own name). Only when all
    // are bound.
    let mut pk_indexes = Vec::new();
    if let Some((table, _)) = table {
        for pk in table
            .columns
            .iter()
            .filter(|c| c.kind == ColumnKind::PartitionKey)
        {
            match specs.iter().zip(&receivers).position(|(s, r)| {
                r.as_deref() == Some(pk.name.as_str()) && s.table == table.name && s.ty == pk.ty
            }) {
                Some(i) => pk_indexes.push(i as u16),
                None => {
                    pk_indexes.clear();
                    break;
                }
            }
        }
    }
    Ok(BindInfo {
        specs,
        pk_indexes,
        result_columns,
    })
}
