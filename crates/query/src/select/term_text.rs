//! The text Cassandra shows for a term, a type or an operator as the statement wrote it (result
//! column names, error messages).

use cql_syntax::ast::{Constant, Operator, Term, TypeExpr};

use super::operations;

/// A constant as CQL text, for error messages and generated column names.
pub(crate) fn constant_text(c: &Constant) -> String {
    match c {
        Constant::String(s) => format!("'{}'", s.replace('\'', "''")),
        Constant::Integer(s) | Constant::Float(s) | Constant::Uuid(s) | Constant::Duration(s) => {
            s.clone()
        }
        Constant::Hex(s) => format!("0x{s}"),
        Constant::Boolean(b) => b.to_string(),
        Constant::NaN => "NaN".to_string(),
        Constant::Infinity => "Infinity".to_string(),
        Constant::NegInfinity => "-Infinity".to_string(),
    }
}

/// The text Cassandra shows for a term (`Term.Raw.getText()`), used in result column names.
pub(crate) fn term_text(t: &Term) -> String {
    let mut out = String::new();
    write_term_text(t, &mut out);
    out
}

/// `term_text` into `out`: one buffer for the whole tree, so the text of a term costs time
/// linear in its size (formatting each level's own string copied every level below it).
pub(crate) fn write_term_text(t: &Term, out: &mut String) {
    fn join<T>(out: &mut String, items: &[T], mut one: impl FnMut(&mut String, &T)) {
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            one(out, item);
        }
    }
    let terms =
        |out: &mut String, items: &[Term]| join(out, items, |out, t| write_term_text(t, out));
    match t {
        Term::Constant(c) => out.push_str(&constant_text(c)),
        Term::Null => out.push_str("NULL"),
        Term::BindMarker(_) => out.push('?'),
        Term::List(items) => {
            out.push('[');
            terms(out, items);
            out.push(']');
        }
        Term::Set(items) => {
            out.push('{');
            terms(out, items);
            out.push('}');
        }
        Term::Tuple(items) => {
            out.push('(');
            terms(out, items);
            out.push(')');
        }
        Term::Map(entries) => {
            out.push('{');
            join(out, entries, |out, (k, v)| {
                write_term_text(k, out);
                out.push_str(": ");
                write_term_text(v, out);
            });
            out.push('}');
        }
        Term::UserType(fields) => {
            out.push('{');
            join(out, fields, |out, (k, v)| {
                out.push_str(&k.to_string());
                out.push_str(": ");
                write_term_text(v, out);
            });
            out.push('}');
        }
        Term::FunctionCall {
            keyspace,
            name,
            args,
        } => {
            if let Some(k) = keyspace {
                out.push_str(k.as_str());
                out.push('.');
            }
            out.push_str(name.as_str());
            out.push('(');
            terms(out, args);
            out.push(')');
        }
        Term::TypeHint { ty, term } => {
            out.push('(');
            out.push_str(&type_text(ty));
            out.push(')');
            write_term_text(term, out);
        }
        Term::Cast { term, ty } => {
            out.push_str("cast(");
            write_term_text(term, out);
            out.push_str(" as ");
            out.push_str(&type_text(ty));
            out.push(')');
        }
        Term::Binary { op, lhs, rhs } => {
            write_term_text(lhs, out);
            out.push(' ');
            out.push(operations::symbol(*op));
            out.push(' ');
            write_term_text(rhs, out);
        }
        Term::Negate(t) => {
            out.push('-');
            write_term_text(t, out);
        }
    }
}

/// A type as written in a type hint or cast (`list<int>`, `map<text, int>`).
pub(crate) fn type_text(t: &TypeExpr) -> String {
    match t {
        TypeExpr::Native(n) => n.clone(),
        TypeExpr::List(e) => format!("list<{}>", type_text(e)),
        TypeExpr::Set(e) => format!("set<{}>", type_text(e)),
        TypeExpr::Map(k, v) => format!("map<{}, {}>", type_text(k), type_text(v)),
        TypeExpr::Tuple(items) => format!(
            "tuple<{}>",
            items.iter().map(type_text).collect::<Vec<_>>().join(", ")
        ),
        TypeExpr::Frozen(inner) => format!("frozen<{}>", type_text(inner)),
        TypeExpr::UserType(q) => match &q.keyspace {
            Some(ks) => format!("{ks}.{}", q.name),
            None => q.name.to_string(),
        },
        TypeExpr::Vector(e, n) => format!("vector<{}, {n}>", type_text(e)),
        TypeExpr::Custom(c) => format!("'{c}'"),
    }
}

pub(crate) fn op_name(op: &Operator) -> &'static str {
    match op {
        Operator::Eq => "=",
        Operator::Lt => "<",
        Operator::Lte => "<=",
        Operator::Gt => ">",
        Operator::Gte => ">=",
        Operator::Neq => "!=",
        Operator::In => "IN",
        Operator::NotIn => "NOT IN",
        Operator::Contains => "CONTAINS",
        Operator::NotContains => "NOT CONTAINS",
        Operator::ContainsKey => "CONTAINS KEY",
        Operator::NotContainsKey => "NOT CONTAINS KEY",
        Operator::Like => "LIKE",
        Operator::Between => "BETWEEN",
    }
}
