//! A serialised collection's elements, as the native protocol lays them out: a 4-byte count,
//! then each element (a map entry as two) as a 4-byte length and its bytes.

use crate::QueryError;

pub(crate) fn read_optional(bytes: &[u8]) -> Result<(Option<&[u8]>, &[u8]), QueryError> {
    let malformed = || QueryError::Invalid("Malformed collection value".to_string());
    if bytes.len() < 4 {
        return Err(malformed());
    }
    let len = i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    let rest = &bytes[4..];
    if len < 0 {
        return Ok((None, rest));
    }
    let len = len as usize;
    if rest.len() < len {
        return Err(malformed());
    }
    Ok((Some(&rest[..len]), &rest[len..]))
}

/// Splits a v3+ collection ([int] n, then n groups of `width` [bytes]).
pub(crate) fn split_elements(bytes: &[u8], width: usize) -> Result<Vec<Vec<&[u8]>>, QueryError> {
    let malformed = || QueryError::Invalid("Malformed collection value".to_string());
    if bytes.len() < 4 {
        return Err(malformed());
    }
    let n = i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    if n < 0 || (n as usize).saturating_mul(4 * width) > bytes.len() {
        return Err(malformed());
    }
    let mut rest = &bytes[4..];
    let mut out = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let mut group = Vec::with_capacity(width);
        for _ in 0..width {
            let (v, tail) = read_optional(rest)?;
            group.push(v.ok_or_else(|| {
                QueryError::Invalid("null is not supported inside collections".to_string())
            })?);
            rest = tail;
        }
        out.push(group);
    }
    Ok(out)
}
