//! Row filtering: a row read is checked against every restriction the read did not enforce.

use std::cmp::Ordering;

use cql_syntax::ast::Operator;
use schema::TableMetadata;
use types::CqlType;

use crate::elements::split_elements;

use super::row::RowValues;

pub(super) fn op_matches(op: &Operator, ord: Ordering) -> bool {
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

/// Whether filter `i` is in a mask of `enforced_by_read`.
pub(super) fn enforced_bit(mask: u64, i: usize) -> bool {
    i < 64 && mask & (1 << i) != 0
}

pub(super) fn filter_passes(table: &TableMetadata, f: &Filter, row: &RowValues) -> bool {
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

pub(super) fn contains(ty: &CqlType, collection: &[u8], needle: &[u8], key: bool) -> bool {
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

/// One WHERE relation as a row predicate.
pub(super) enum Filter {
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
