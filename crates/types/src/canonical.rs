//! The canonical form of collection values: sets sorted and de-duplicated, maps sorted by key,
//! at every nesting level.

use crate::{CqlType, TypeError, Value};

/// The canonical serialisation of a value of type `ty`: sets sorted by element and maps by key,
/// without duplicates (the last entry for a key wins), at every nesting level. Cassandra keeps
/// collections in this form, and a client may bind them in any order (a Python `dict` keeps
/// insertion order). `None` when the bytes are already canonical or `ty` has no set or map.
pub fn canonicalize(ty: &CqlType, bytes: &[u8]) -> Result<Option<Vec<u8>>, TypeError> {
    if !has_unordered_collection(ty) {
        return Ok(None);
    }
    let value = canonical_value(ty, Value::decode(ty, bytes)?);
    let mut out = Vec::with_capacity(bytes.len());
    value.encode(&mut out);
    Ok((out != bytes).then_some(out))
}

fn has_unordered_collection(ty: &CqlType) -> bool {
    match ty {
        CqlType::Set(_) | CqlType::Map(_, _) => true,
        CqlType::Frozen(inner) | CqlType::List(inner) | CqlType::Vector(inner, _) => {
            has_unordered_collection(inner)
        }
        CqlType::Tuple(fields) => fields.iter().any(has_unordered_collection),
        CqlType::Udt(udt) => udt.fields.iter().any(|(_, t)| has_unordered_collection(t)),
        _ => false,
    }
}

fn canonical_value(ty: &CqlType, value: Value) -> Value {
    let encoded = |v: &Value| {
        let mut out = Vec::new();
        v.encode(&mut out);
        out
    };
    match (ty, value) {
        (CqlType::Frozen(inner), v) => canonical_value(inner, v),
        (CqlType::List(elem), Value::List(items)) => Value::List(
            items
                .into_iter()
                .map(|v| canonical_value(elem, v))
                .collect(),
        ),
        (CqlType::Vector(elem, _), Value::Vector(items)) => Value::Vector(
            items
                .into_iter()
                .map(|v| canonical_value(elem, v))
                .collect(),
        ),
        (CqlType::Set(elem), Value::Set(items)) => {
            let mut keyed: Vec<(Vec<u8>, Value)> = items
                .into_iter()
                .map(|v| {
                    let v = canonical_value(elem, v);
                    (encoded(&v), v)
                })
                .collect();
            keyed.sort_by(|a, b| crate::compare(elem, &a.0, &b.0));
            keyed.dedup_by(|a, b| crate::compare(elem, &a.0, &b.0).is_eq());
            Value::Set(keyed.into_iter().map(|(_, v)| v).collect())
        }
        (CqlType::Map(key_ty, value_ty), Value::Map(pairs)) => {
            let mut keyed: Vec<(Vec<u8>, (Value, Value))> = pairs
                .into_iter()
                .map(|(k, v)| {
                    let k = canonical_value(key_ty, k);
                    (encoded(&k), (k, canonical_value(value_ty, v)))
                })
                .collect();
            // Stable, so equal keys keep their order and the last one can win.
            keyed.sort_by(|a, b| crate::compare(key_ty, &a.0, &b.0));
            let mut out: Vec<(Vec<u8>, (Value, Value))> = Vec::with_capacity(keyed.len());
            for entry in keyed {
                match out.last_mut() {
                    Some(last) if crate::compare(key_ty, &last.0, &entry.0).is_eq() => {
                        *last = entry
                    }
                    _ => out.push(entry),
                }
            }
            Value::Map(out.into_iter().map(|(_, kv)| kv).collect())
        }
        (CqlType::Tuple(types), Value::Tuple(fields)) => Value::Tuple(
            fields
                .into_iter()
                .zip(types)
                .map(|(f, t)| f.map(|v| canonical_value(t, v)))
                .collect(),
        ),
        (CqlType::Udt(udt), Value::Udt(fields)) => Value::Udt(
            fields
                .into_iter()
                .zip(&udt.fields)
                .map(|(f, (_, t))| f.map(|v| canonical_value(t, v)))
                .collect(),
        ),
        (_, v) => v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonicalize_sorts_sets_and_maps_at_every_level() {
        let enc = |v: &Value| {
            let mut out = Vec::new();
            v.encode(&mut out);
            out
        };
        let text = |s: &str| Value::Text(s.to_string());
        let map_ty = CqlType::Map(Box::new(CqlType::Text), Box::new(CqlType::Int));
        let unordered = Value::Map(vec![
            (text("z"), Value::Int(1)),
            (text("a"), Value::Int(2)),
            (text("z"), Value::Int(3)),
        ]);
        let sorted = Value::Map(vec![(text("a"), Value::Int(2)), (text("z"), Value::Int(3))]);
        assert_eq!(
            canonicalize(&map_ty, &enc(&unordered)).unwrap(),
            Some(enc(&sorted))
        );
        assert_eq!(canonicalize(&map_ty, &enc(&sorted)).unwrap(), None);

        let nested = CqlType::List(Box::new(CqlType::Frozen(Box::new(CqlType::Set(Box::new(
            CqlType::Int,
        ))))));
        let value = Value::List(vec![Value::Set(vec![
            Value::Int(3),
            Value::Int(-1),
            Value::Int(3),
        ])]);
        let expected = Value::List(vec![Value::Set(vec![Value::Int(-1), Value::Int(3)])]);
        assert_eq!(
            canonicalize(&nested, &enc(&value)).unwrap(),
            Some(enc(&expected))
        );

        assert_eq!(canonicalize(&CqlType::Int, &[0, 0, 0, 1]).unwrap(), None);
        assert!(canonicalize(&map_ty, &[0, 0, 0, 1]).is_err());
    }
}
