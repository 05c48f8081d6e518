//! Cassandra 5.0's vector similarity functions (`VectorFcts`): `similarity_cosine`,
//! `similarity_euclidean` and `similarity_dot_product` of two `vector<float, n>` of the same
//! dimension, each a float in [0, 1] (higher is more similar), computed in single precision as
//! the vector search library Cassandra uses computes them.

use types::{CqlType, Value};

use crate::QueryError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Similarity {
    Cosine,
    Euclidean,
    DotProduct,
}

impl Similarity {
    pub fn from_name(name: &str) -> Option<Similarity> {
        Some(match name {
            "similarity_cosine" => Similarity::Cosine,
            "similarity_euclidean" => Similarity::Euclidean,
            "similarity_dot_product" => Similarity::DotProduct,
            _ => return None,
        })
    }

    /// The parameter type for an argument of type `arg`, or Cassandra's message when it is
    /// not a float vector.
    pub fn parameter(name: &str, arg: &CqlType, text: &str) -> Result<CqlType, QueryError> {
        match arg.unfrozen() {
            CqlType::Vector(element, _) if **element == CqlType::Float => Ok(arg.clone()),
            _ => Err(QueryError::Invalid(format!(
                "Function system.{name} requires a float vector argument, but found argument {text} of type {arg}"
            ))),
        }
    }
}

fn floats(ty: &CqlType, bytes: &[u8]) -> Result<Vec<f32>, QueryError> {
    match Value::decode(ty, bytes)? {
        Value::Vector(items) => Ok(items
            .into_iter()
            .map(|v| match v {
                Value::Float(f) => f,
                _ => f32::NAN,
            })
            .collect()),
        _ => Err(QueryError::Server("a float vector expected".to_string())),
    }
}

/// The similarity of two non-null vectors of type `ty`.
pub(crate) fn call(
    function: Similarity,
    name: &str,
    ty: &CqlType,
    left: &[u8],
    right: &[u8],
) -> Result<Option<Vec<u8>>, QueryError> {
    let (a, b) = (floats(ty, left)?, floats(ty, right)?);
    if a.len() != b.len() {
        return Err(QueryError::Invalid(
            "All arguments must have the same vector dimensions".to_string(),
        ));
    }
    let dot: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
    let similarity = match function {
        Similarity::Cosine => {
            let norm_a: f32 = a.iter().map(|x| x * x).sum();
            let norm_b: f32 = b.iter().map(|x| x * x).sum();
            if norm_a == 0.0 || norm_b == 0.0 {
                return Err(QueryError::Invalid(format!(
                    "Function system.{name} doesn't support all-zero vectors."
                )));
            }
            let cosine = dot / (f64::from(norm_a * norm_b).sqrt() as f32);
            (1.0 + cosine) / 2.0
        }
        Similarity::Euclidean => {
            let distance: f32 = a.iter().zip(&b).map(|(x, y)| (x - y) * (x - y)).sum();
            1.0 / (1.0 + distance)
        }
        Similarity::DotProduct => (1.0 + dot) / 2.0,
    };
    Ok(Some(similarity.to_be_bytes().to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vector(values: &[f32]) -> Vec<u8> {
        let mut out = Vec::new();
        Value::Vector(values.iter().map(|v| Value::Float(*v)).collect()).encode(&mut out);
        out
    }

    #[test]
    fn similarities() {
        let ty = CqlType::Vector(Box::new(CqlType::Float), 2);
        let run = |f, a: &[f32], b: &[f32]| {
            let out = call(f, "f", &ty, &vector(a), &vector(b))
                .expect("computes")
                .expect("a value");
            f32::from_be_bytes(out.try_into().expect("4 bytes"))
        };
        assert_eq!(run(Similarity::Cosine, &[3.0, 4.0], &[1.0, 0.0]), 0.8);
        assert_eq!(run(Similarity::Euclidean, &[3.0, 4.0], &[3.0, 5.0]), 0.5);
        assert_eq!(
            run(Similarity::DotProduct, &[3.0, 4.0], &[100.0, 100.0]),
            350.5
        );
        assert!(call(
            Similarity::Cosine,
            "f",
            &ty,
            &vector(&[0.0, 0.0]),
            &vector(&[1.0, 0.0])
        )
        .is_err());
    }
}
