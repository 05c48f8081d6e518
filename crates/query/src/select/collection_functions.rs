//! Cassandra 5.0's collection functions (`CollectionFcts`): `map_keys`, `map_values`,
//! `collection_count`, and `collection_min`/`max`/`sum`/`avg`, which run the aggregate of the
//! same name over the elements of a set or list, so they compute exactly as the aggregates do
//! (sums wrap, averages of integers truncate, an empty frozen collection sums to 0 and has no
//! minimum).

use cql_syntax::ast::Term;
use types::{CqlType, Value};

use super::aggregates::{Accumulator, AggregateFunction, SUMMABLE};
use super::arguments::{preferred_type, ArgKind};
use crate::QueryError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CollectionFunction {
    MapKeys,
    MapValues,
    Count,
    Min,
    Max,
    Sum,
    Avg,
}

impl CollectionFunction {
    pub fn from_name(name: &str) -> Option<CollectionFunction> {
        Some(match name {
            "map_keys" => CollectionFunction::MapKeys,
            "map_values" => CollectionFunction::MapValues,
            "collection_count" => CollectionFunction::Count,
            "collection_min" => CollectionFunction::Min,
            "collection_max" => CollectionFunction::Max,
            "collection_sum" => CollectionFunction::Sum,
            "collection_avg" => CollectionFunction::Avg,
            _ => return None,
        })
    }

    /// What Cassandra names the argument kind in "Cannot infer type" errors.
    pub fn argument_kind(self) -> &'static str {
        match self {
            CollectionFunction::MapKeys | CollectionFunction::MapValues => "map",
            CollectionFunction::Count => "collection",
            _ => "numeric_set_or_list",
        }
    }

    /// Gives a collection function's list and set literal arguments (`terms`, with `kinds`
    /// from them) the type `literal_argument_type` infers. In a term (a WHERE value, an
    /// INSERT value) Cassandra 5.0.9 infers a set literal's type but not a list literal's:
    /// `lists` is false there.
    pub fn infer_literal_arguments<'a>(
        name: &str,
        kinds: &mut [ArgKind],
        terms: impl IntoIterator<Item = Option<&'a Term>>,
        lists: bool,
    ) {
        if Self::from_name(name).is_none() {
            return;
        }
        for (kind, term) in kinds.iter_mut().zip(terms) {
            let Some(term) = term.filter(|t| lists || !matches!(t, Term::List(_))) else {
                continue;
            };
            if let (ArgKind::Collection(_), Some(ty)) = (&kind, Self::literal_argument_type(term)) {
                *kind = ArgKind::Typed(ty);
            }
        }
    }

    /// The type Cassandra infers for a literal argument (`collection_count([1, 2])`): a list
    /// or set literal whose elements all have one preferred type (ASCII and other strings
    /// together are text), or are such literals themselves; `None` for an empty literal, a
    /// null or marker element, mixed types, or a map literal (it could be a UDT's).
    fn literal_argument_type(term: &Term) -> Option<CqlType> {
        let (items, list) = match term {
            Term::List(items) => (items, true),
            Term::Set(items) => (items, false),
            _ => return None,
        };
        let mut element: Option<CqlType> = None;
        for item in items {
            let ty = match item {
                Term::Constant(c) => preferred_type(c),
                nested => CqlType::Frozen(Box::new(Self::literal_argument_type(nested)?)),
            };
            element = Some(match (element, ty) {
                (None, ty) => ty,
                (Some(e), ty) if e == ty => e,
                (Some(CqlType::Ascii | CqlType::Text), CqlType::Ascii | CqlType::Text) => {
                    CqlType::Text
                }
                _ => return None,
            });
        }
        let element = Box::new(element?);
        Some(if list {
            CqlType::List(element)
        } else {
            CqlType::Set(element)
        })
    }

    /// The result type for an argument of type `arg`, or Cassandra's message when the
    /// argument does not fit (`text` is the argument as written).
    pub fn result_type(self, name: &str, arg: &CqlType, text: &str) -> Result<CqlType, QueryError> {
        let element = match arg.unfrozen() {
            CqlType::List(e) | CqlType::Set(e) => Some((**e).clone()),
            _ => None,
        };
        let wrong = |what: &str| {
            QueryError::Invalid(format!(
                "Function system.{name} requires {what} argument, but found argument {text} of type {}",
                arg
            ))
        };
        Ok(match self {
            CollectionFunction::MapKeys | CollectionFunction::MapValues => {
                let CqlType::Map(k, v) = arg.unfrozen() else {
                    return Err(wrong("a map"));
                };
                if self == CollectionFunction::MapKeys {
                    CqlType::Set(k.clone())
                } else {
                    CqlType::List(v.clone())
                }
            }
            CollectionFunction::Count => match arg.unfrozen() {
                CqlType::List(_) | CqlType::Set(_) | CqlType::Map(..) => CqlType::Int,
                _ => return Err(wrong("a collection")),
            },
            CollectionFunction::Min | CollectionFunction::Max => {
                element.ok_or_else(|| wrong("a set or list"))?
            }
            CollectionFunction::Sum | CollectionFunction::Avg => match element {
                Some(e) if SUMMABLE.contains(e.unfrozen()) => e,
                _ => return Err(wrong("a numeric set/list")),
            },
        })
    }
}

fn encode(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    v.encode(&mut out);
    out
}

/// Runs `function` on a non-null collection of type `ty`.
pub(crate) fn call(
    function: CollectionFunction,
    ty: &CqlType,
    bytes: &[u8],
) -> Result<Option<Vec<u8>>, QueryError> {
    let value = Value::decode(ty, bytes)?;
    let elements: Vec<Value> = match value {
        Value::List(items) | Value::Set(items) => items,
        Value::Map(entries) => match function {
            CollectionFunction::MapKeys => {
                return Ok(Some(encode(&Value::Set(
                    entries.into_iter().map(|(k, _)| k).collect(),
                ))))
            }
            CollectionFunction::MapValues => {
                return Ok(Some(encode(&Value::List(
                    entries.into_iter().map(|(_, v)| v).collect(),
                ))))
            }
            _ => entries.into_iter().map(|(k, _)| k).collect(),
        },
        _ => return Ok(None),
    };
    let aggregate = match function {
        CollectionFunction::Count => {
            return Ok(Some(encode(&Value::Int(elements.len() as i32))));
        }
        CollectionFunction::Min => AggregateFunction::Min,
        CollectionFunction::Max => AggregateFunction::Max,
        CollectionFunction::Sum => AggregateFunction::Sum,
        CollectionFunction::Avg => AggregateFunction::Avg,
        CollectionFunction::MapKeys | CollectionFunction::MapValues => {
            return Err(QueryError::Server(format!(
                "{function:?} of a value that is not a map"
            )))
        }
    };
    let element_type = match ty.unfrozen() {
        CqlType::List(e) | CqlType::Set(e) => (**e).clone(),
        other => other.clone(),
    };
    let mut accumulator = Accumulator::new(aggregate, &element_type);
    for element in &elements {
        accumulator.add(Some(&encode(element)))?;
    }
    Ok(accumulator.result())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(values: &[i32]) -> Vec<u8> {
        encode(&Value::List(
            values.iter().map(|v| Value::Int(*v)).collect(),
        ))
    }

    #[test]
    fn aggregates_over_elements() {
        let ty = CqlType::List(Box::new(CqlType::Int));
        let run = |f, values: &[i32]| call(f, &ty, &list(values)).expect("runs");
        let int = |v: i32| Some(v.to_be_bytes().to_vec());
        assert_eq!(run(CollectionFunction::Sum, &[10, 20, 30]), int(60));
        assert_eq!(run(CollectionFunction::Avg, &[10, 20, 5]), int(11));
        assert_eq!(run(CollectionFunction::Min, &[10, 20, 5]), int(5));
        assert_eq!(run(CollectionFunction::Count, &[10, 20, 5]), int(3));
        // An empty (frozen) list: sum and average 0, no minimum.
        assert_eq!(run(CollectionFunction::Sum, &[]), int(0));
        assert_eq!(run(CollectionFunction::Avg, &[]), int(0));
        assert_eq!(run(CollectionFunction::Max, &[]), None);
    }

    #[test]
    fn argument_types_are_checked() {
        let map = CqlType::Map(Box::new(CqlType::Text), Box::new(CqlType::Int));
        let err = CollectionFunction::Min
            .result_type("collection_min", &map, "m")
            .expect_err("a map has no minimum");
        assert_eq!(
            err.to_string(),
            "Function system.collection_min requires a set or list argument, but found argument m of type map<text, int>"
        );
        assert_eq!(
            CollectionFunction::MapKeys
                .result_type("map_keys", &map, "m")
                .expect("a map"),
            CqlType::Set(Box::new(CqlType::Text))
        );
    }
}
