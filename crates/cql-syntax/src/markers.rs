//! Finding the bind markers of a parsed statement.
//!
//! The parser numbers markers in order of appearance; this walk collects them back from the
//! tree so that the AST needs no side table. It must visit every place a `Term` can occur:
//! `tests.rs` checks it against the parser's own count for every statement of its table.

use crate::ast::*;

/// All bind markers of `statement`, ordered by index (so `result[i].index == i`).
/// Their names give the prepared statement's variable names (`None` for `?`).
pub fn bind_markers(statement: &Statement) -> Vec<BindMarker> {
    let mut markers = Vec::new();
    statement_markers(statement, &mut markers);
    markers.sort_by_key(|m| m.index);
    markers
}

/// Number of bind markers in `statement`.
pub fn bind_marker_count(statement: &Statement) -> usize {
    bind_markers(statement).len()
}

fn statement_markers(statement: &Statement, out: &mut Vec<BindMarker>) {
    match statement {
        Statement::Select(s) => {
            if let Selection::Columns(selectors) = &s.selection {
                for selector in selectors {
                    selector_markers(&selector.expr, out);
                }
            }
            relations_markers(&s.where_clause, out);
            for g in &s.group_by {
                selector_markers(g, out);
            }
            for o in &s.order_by {
                opt_term(&o.ann_of, out);
            }
            opt_term(&s.per_partition_limit, out);
            opt_term(&s.limit, out);
            opt_term(&s.timeout, out);
        }
        Statement::Insert(i) => {
            match &i.values {
                InsertValues::Values { values, .. } => values.iter().for_each(|t| term(t, out)),
                InsertValues::Json { value, .. } => term(value, out),
            }
            using_markers(&i.using, out);
        }
        Statement::Update(u) => {
            using_markers(&u.using, out);
            for a in &u.assignments {
                match a {
                    Assignment::Set { value, .. }
                    | Assignment::SetField { value, .. }
                    | Assignment::Add { value, .. }
                    | Assignment::Subtract { value, .. }
                    | Assignment::Prepend { value, .. } => term(value, out),
                    Assignment::SetElement { key, value, .. } => {
                        term(key, out);
                        term(value, out);
                    }
                }
            }
            relations_markers(&u.where_clause, out);
            conditions_markers(&u.conditions, out);
        }
        Statement::Delete(d) => {
            for c in &d.columns {
                if let DeleteSelector::Element { key, .. } = c {
                    term(key, out);
                }
            }
            using_markers(&d.using, out);
            relations_markers(&d.where_clause, out);
            conditions_markers(&d.conditions, out);
        }
        Statement::Batch(b) => {
            using_markers(&b.using, out);
            for s in &b.statements {
                statement_markers(s, out);
            }
        }
        // DDL and the rest take no bind markers.
        _ => {}
    }
}

fn opt_term(t: &Option<Term>, out: &mut Vec<BindMarker>) {
    if let Some(t) = t {
        term(t, out);
    }
}

fn using_markers(using: &Using, out: &mut Vec<BindMarker>) {
    opt_term(&using.timestamp, out);
    opt_term(&using.ttl, out);
    opt_term(&using.timeout, out);
}

fn value_markers(value: &RelationValue, out: &mut Vec<BindMarker>) {
    match value {
        RelationValue::Single(t) => term(t, out),
        RelationValue::List(ts) => ts.iter().for_each(|t| term(t, out)),
        RelationValue::Marker(m) => out.push(m.clone()),
        RelationValue::Between(a, b) => {
            term(a, out);
            term(b, out);
        }
    }
}

fn relations_markers(relations: &[Relation], out: &mut Vec<BindMarker>) {
    for r in relations {
        match r {
            Relation::Simple { value, .. }
            | Relation::MultiColumn { value, .. }
            | Relation::Token { value, .. } => value_markers(value, out),
            Relation::Element { key, value, .. } => {
                term(key, out);
                term(value, out);
            }
            Relation::IsNotNull(_) => {}
            Relation::CustomIndex { value, .. } => term(value, out),
        }
    }
}

fn conditions_markers(conditions: &Option<Conditions>, out: &mut Vec<BindMarker>) {
    let Some(Conditions::Columns(conditions)) = conditions else {
        return;
    };
    for c in conditions {
        match c {
            Condition::Simple { value, .. } | Condition::Field { value, .. } => {
                value_markers(value, out)
            }
            Condition::Element { key, value, .. } => {
                term(key, out);
                value_markers(value, out);
            }
        }
    }
}

fn term(t: &Term, out: &mut Vec<BindMarker>) {
    match t {
        Term::Constant(_) | Term::Null => {}
        Term::BindMarker(m) => out.push(m.clone()),
        Term::List(ts) | Term::Set(ts) | Term::Tuple(ts) => ts.iter().for_each(|t| term(t, out)),
        Term::FunctionCall { args, .. } => args.iter().for_each(|t| term(t, out)),
        Term::Map(entries) => {
            for (k, v) in entries {
                term(k, out);
                term(v, out);
            }
        }
        Term::UserType(fields) => fields.iter().for_each(|(_, t)| term(t, out)),
        Term::TypeHint { term: t, .. } | Term::Cast { term: t, .. } | Term::Negate(t) => {
            term(t, out)
        }
        Term::Binary { lhs, rhs, .. } => {
            term(lhs, out);
            term(rhs, out);
        }
    }
}

fn selector_markers(s: &SelectorExpr, out: &mut Vec<BindMarker>) {
    match s {
        SelectorExpr::Column(_) | SelectorExpr::CountRows => {}
        SelectorExpr::Term(t) => term(t, out),
        SelectorExpr::WriteTime(e)
        | SelectorExpr::MaxWriteTime(e)
        | SelectorExpr::Ttl(e)
        | SelectorExpr::Cast(e, _)
        | SelectorExpr::TypeHint(_, e)
        | SelectorExpr::FieldAccess(e, _)
        | SelectorExpr::Negate(e) => selector_markers(e, out),
        SelectorExpr::ElementAccess(e, t) => {
            selector_markers(e, out);
            term(t, out);
        }
        SelectorExpr::Slice { expr, from, to } => {
            selector_markers(expr, out);
            opt_term(from, out);
            opt_term(to, out);
        }
        SelectorExpr::Binary { lhs, rhs, .. } => {
            selector_markers(lhs, out);
            selector_markers(rhs, out);
        }
        SelectorExpr::FunctionCall { args, .. }
        | SelectorExpr::Tuple(args)
        | SelectorExpr::List(args)
        | SelectorExpr::Set(args) => args.iter().for_each(|a| selector_markers(a, out)),
        SelectorExpr::Map(entries) => {
            for (k, v) in entries {
                selector_markers(k, out);
                selector_markers(v, out);
            }
        }
    }
}
