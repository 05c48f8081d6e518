//! The native-protocol layout of composite values (collections, tuples and UDTs, vectors), read
//! without decoding them: each splits a value's bytes into its elements' bodies. Decoding
//! (`value`), ordering (`compare`) and the byte-comparable key form (`byte_comparable`) all walk
//! composite values through these, so the three agree on what a well-formed value is.
//!
//! Never trusts a count: every element needs at least its length prefix, so counts are checked
//! against the remaining bytes before anything is allocated.

use crate::error::{marshal, TypeError};
use crate::{vint, CqlType};

/// Deepest type tree accepted. Schema types are far shallower; the bound only matters for types
/// that arrive from the wire (e.g. a hostile `custom`/nested type option) so that recursion over
/// the type cannot exhaust the stack.
pub const MAX_TYPE_DEPTH: usize = 64;

/// The serialised size of a type whose values all have the same size (Cassandra's
/// `valueLengthIfFixed`), `None` for variable-size types.
pub(crate) fn fixed_size(ty: &CqlType) -> Option<usize> {
    fixed_size_at(ty, 0)
}

fn fixed_size_at(ty: &CqlType, depth: usize) -> Option<usize> {
    if depth > MAX_TYPE_DEPTH {
        return None;
    }
    match ty.unfrozen() {
        CqlType::Boolean => Some(1),
        CqlType::Int | CqlType::Float => Some(4),
        CqlType::Bigint | CqlType::Double | CqlType::Timestamp => Some(8),
        CqlType::Uuid | CqlType::Timeuuid => Some(16),
        CqlType::Vector(e, n) => fixed_size_at(e, depth + 1)?.checked_mul(*n as usize),
        _ => None,
    }
}

/// Splits a v3+ collection (`[int n]` then n × `per_element` length-prefixed values) into its
/// element bodies. Rejects negative counts, null elements, truncation and trailing bytes.
pub(crate) fn split_collection<'a>(
    bytes: &'a [u8],
    per_element: usize,
    kind: &str,
) -> Result<Vec<&'a [u8]>, TypeError> {
    let not_enough = || marshal(format!("Not enough bytes to read a {kind}"));
    let Some((count, mut rest)) = bytes.split_first_chunk::<4>() else {
        return Err(not_enough());
    };
    let count = i32::from_be_bytes(*count);
    let Ok(count) = usize::try_from(count) else {
        return Err(marshal(format!(
            "The data cannot be deserialized as a {kind}"
        )));
    };
    let values = count.saturating_mul(per_element);
    // Each element needs at least its 4-byte length: never allocate for a count the remaining
    // bytes cannot hold.
    if values > rest.len() / 4 {
        return Err(not_enough());
    }
    let mut out = Vec::with_capacity(values);
    for _ in 0..values {
        let Some((len, after)) = rest.split_first_chunk::<4>() else {
            return Err(not_enough());
        };
        let len = i32::from_be_bytes(*len);
        let Ok(len) = usize::try_from(len) else {
            return Err(marshal("Null value read when not allowed"));
        };
        if after.len() < len {
            return Err(not_enough());
        }
        out.push(&after[..len]);
        rest = &after[len..];
    }
    if !rest.is_empty() {
        return Err(marshal(format!(
            "Unexpected extraneous bytes after {kind} value"
        )));
    }
    Ok(out)
}

/// Splits tuple/UDT bytes into at most `count` fields (`None` = null). Missing trailing fields
/// are not added here.
pub(crate) fn split_fields(
    bytes: &[u8],
    count: usize,
    is_udt: bool,
) -> Result<Vec<Option<&[u8]>>, TypeError> {
    let mut rest = bytes;
    let mut out = Vec::new();
    while !rest.is_empty() {
        let i = out.len();
        if i >= count {
            return Err(marshal(if is_udt {
                "Invalid remaining data after end of UDT value"
            } else {
                "Invalid remaining data after end of tuple value"
            }));
        }
        let Some((len, after)) = rest.split_first_chunk::<4>() else {
            return Err(marshal(format!(
                "Not enough bytes to read size of {i}th component"
            )));
        };
        let len = i32::from_be_bytes(*len);
        match usize::try_from(len) {
            Err(_) => {
                out.push(None);
                rest = after;
            }
            Ok(len) if after.len() < len => {
                return Err(marshal(format!("Not enough bytes to read {i}th component")))
            }
            Ok(len) => {
                out.push(Some(&after[..len]));
                rest = &after[len..];
            }
        }
    }
    Ok(out)
}

/// Splits a vector's bytes into its `dimension` element bodies.
pub(crate) fn split_vector<'a>(
    ty: &CqlType,
    elem: &CqlType,
    dimension: u32,
    bytes: &'a [u8],
) -> Result<Vec<&'a [u8]>, TypeError> {
    let dimension = dimension as usize;
    if bytes.is_empty() {
        return Err(marshal(format!("Invalid empty vector value for {ty}")));
    }
    if let Some(size) = fixed_size(elem) {
        let expected = size.saturating_mul(dimension);
        if bytes.len() < expected {
            return Err(marshal(format!("Not enough bytes to read a {ty}")));
        }
        if bytes.len() > expected {
            return Err(marshal(format!(
                "Unexpected {} extraneous bytes after {ty} value",
                bytes.len() - expected
            )));
        }
        if size == 0 {
            // Only a zero-dimension vector has zero-size values, and its (empty) bytes were
            // rejected above; `chunks_exact(0)` would panic.
            return Ok(Vec::new());
        }
        return Ok(bytes.chunks_exact(size).collect());
    }
    // Every variable-size element needs at least a 1-byte length.
    if dimension > bytes.len() {
        return Err(marshal(format!("Not enough bytes to read a {ty}")));
    }
    let mut rest = bytes;
    let mut out = Vec::with_capacity(dimension);
    for _ in 0..dimension {
        let len = vint::read_unsigned(&mut rest)
            .and_then(|l| usize::try_from(l).ok())
            .filter(|&l| l <= rest.len())
            .ok_or_else(|| marshal(format!("Not enough bytes to read a {ty}")))?;
        out.push(&rest[..len]);
        rest = &rest[len..];
    }
    if !rest.is_empty() {
        return Err(marshal(format!(
            "Unexpected {} extraneous bytes after {ty} value",
            rest.len()
        )));
    }
    Ok(out)
}
