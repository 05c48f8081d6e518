//! Decoded CQL values and their native-protocol serialisation (v4/v5), which is also the form
//! in which values are stored.
//!
//! Byte layouts (the `[bytes]` body without its `[int]` length prefix):
//! - `boolean` 1 byte (0 = false, anything else true); `tinyint` 1, `smallint` 2, `int` 4,
//!   `bigint`/`counter`/`timestamp`/`time` 8 bytes, big-endian two's complement;
//!   `float`/`double` IEEE 754 big-endian; `date` 4 bytes unsigned, 2^31 = 1970-01-01;
//!   `timestamp` ms since the epoch; `time` ns since midnight.
//! - `varint` minimal big-endian two's complement; `decimal` `[int scale][varint unscaled]`.
//! - `ascii`/`text`/`blob` the raw bytes; `uuid`/`timeuuid` 16 bytes; `inet` 4 or 16 bytes.
//! - `duration` three signed vints (zigzag, see `vint`): months, days, nanoseconds.
//! - `list`/`set` `[int n]` then n × (`[int len][bytes]`); `map` `[int n]` then n × (key, value)
//!   each as `[int len][bytes]`.
//! - `tuple`/UDT: each field `[int len][bytes]`, len -1 = null; trailing fields may be absent
//!   (they read as null, which is how Cassandra handles fields added by ALTER TYPE).
//! - `vector<e, n>`: n elements back to back; if `e` has a fixed size (boolean, int, bigint,
//!   float, double, timestamp, uuid, timeuuid, or a vector of those) without lengths, otherwise
//!   each as `[unsigned vint len][bytes]` (Cassandra 5.0 `VectorType`).
//!
//! A zero-length buffer is a valid value (decoded as [`Value::Empty`]) for exactly the types
//! whose Cassandra validator allows it: boolean, int, bigint, counter, float, double, varint,
//! decimal, uuid, timeuuid, timestamp, inet, tuples and UDTs. For ascii, text and blob it is
//! simply the empty string, decoded as such. tinyint, smallint, date, time, duration,
//! collections and vectors reject it, as in Cassandra.
//!
//! Decoding never trusts a count: every element needs at least its length prefix, so counts are
//! checked against the remaining bytes before anything is allocated, and recursion follows the
//! type tree (bounded by [`MAX_TYPE_DEPTH`](crate::MAX_TYPE_DEPTH)), never the bytes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use num_bigint::BigInt;
use uuid::Uuid;

use crate::error::{marshal, TypeError};
use crate::layout::{split_collection, split_fields, split_vector, MAX_TYPE_DEPTH};
use crate::{vint, CqlType};

/// A decoded CQL value. `Udt` fields are in the type's declaration order; `Tuple`/`Udt` fields
/// are `None` when null (or absent from the bytes).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Boolean(bool),
    Tinyint(i8),
    Smallint(i16),
    Int(i32),
    Bigint(i64),
    Counter(i64),
    Float(f32),
    Double(f64),
    Varint(BigInt),
    Decimal {
        unscaled: BigInt,
        scale: i32,
    },
    Ascii(String),
    Text(String),
    Blob(Vec<u8>),
    Uuid(Uuid),
    Timeuuid(Uuid),
    /// Milliseconds since 1970-01-01T00:00:00Z.
    Timestamp(i64),
    /// Days, with 2^31 = 1970-01-01 (Cassandra's unsigned encoding, so byte order is date order).
    Date(u32),
    /// Nanoseconds since midnight.
    Time(i64),
    Inet(IpAddr),
    Duration {
        months: i32,
        days: i32,
        nanoseconds: i64,
    },
    List(Vec<Value>),
    Set(Vec<Value>),
    Map(Vec<(Value, Value)>),
    Tuple(Vec<Option<Value>>),
    Udt(Vec<Option<Value>>),
    Vector(Vec<Value>),
    /// A zero-length buffer, which Cassandra accepts for most fixed-size native types.
    Empty,
}

/// The epoch in [`Value::Date`]'s encoding.
pub const DATE_EPOCH: u32 = 1 << 31;

impl Value {
    /// Appends the native-protocol serialisation of the value (without a length prefix).
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Value::Empty => {}
            Value::Boolean(b) => out.push(u8::from(*b)),
            Value::Tinyint(v) => out.extend_from_slice(&v.to_be_bytes()),
            Value::Smallint(v) => out.extend_from_slice(&v.to_be_bytes()),
            Value::Int(v) => out.extend_from_slice(&v.to_be_bytes()),
            Value::Bigint(v) | Value::Counter(v) | Value::Timestamp(v) | Value::Time(v) => {
                out.extend_from_slice(&v.to_be_bytes())
            }
            Value::Float(v) => out.extend_from_slice(&v.to_be_bytes()),
            Value::Double(v) => out.extend_from_slice(&v.to_be_bytes()),
            Value::Varint(v) => out.extend_from_slice(&v.to_signed_bytes_be()),
            Value::Decimal { unscaled, scale } => {
                out.extend_from_slice(&scale.to_be_bytes());
                out.extend_from_slice(&unscaled.to_signed_bytes_be());
            }
            Value::Ascii(s) | Value::Text(s) => out.extend_from_slice(s.as_bytes()),
            Value::Blob(b) => out.extend_from_slice(b),
            Value::Uuid(u) | Value::Timeuuid(u) => out.extend_from_slice(u.as_bytes()),
            Value::Date(d) => out.extend_from_slice(&d.to_be_bytes()),
            Value::Inet(IpAddr::V4(a)) => out.extend_from_slice(&a.octets()),
            Value::Inet(IpAddr::V6(a)) => out.extend_from_slice(&a.octets()),
            Value::Duration {
                months,
                days,
                nanoseconds,
            } => {
                vint::write_signed(i64::from(*months), out);
                vint::write_signed(i64::from(*days), out);
                vint::write_signed(*nanoseconds, out);
            }
            Value::List(items) | Value::Set(items) => {
                write_count(items.len(), out);
                for item in items {
                    write_with_length(item, out);
                }
            }
            Value::Map(entries) => {
                write_count(entries.len(), out);
                for (k, v) in entries {
                    write_with_length(k, out);
                    write_with_length(v, out);
                }
            }
            Value::Tuple(fields) | Value::Udt(fields) => {
                for field in fields {
                    match field {
                        Some(v) => write_with_length(v, out),
                        None => out.extend_from_slice(&(-1i32).to_be_bytes()),
                    }
                }
            }
            Value::Vector(items) => {
                let fixed = items.first().is_some_and(Value::has_fixed_size);
                for item in items {
                    if fixed {
                        item.encode(out);
                    } else {
                        let mut body = Vec::new();
                        item.encode(&mut body);
                        vint::write_unsigned(body.len() as u64, out);
                        out.extend_from_slice(&body);
                    }
                }
            }
        }
    }

    /// Whether the value's type is one Cassandra serialises with a fixed length (which decides
    /// the vector layout).
    pub fn has_fixed_size(&self) -> bool {
        match self {
            Value::Boolean(_)
            | Value::Int(_)
            | Value::Bigint(_)
            | Value::Float(_)
            | Value::Double(_)
            | Value::Timestamp(_)
            | Value::Uuid(_)
            | Value::Timeuuid(_) => true,
            Value::Vector(items) => items.first().is_some_and(Value::has_fixed_size),
            _ => false,
        }
    }

    /// Decodes and validates a serialised value of type `ty`, rejecting exactly what
    /// Cassandra's validators reject (see the module documentation for the known exception).
    pub fn decode(ty: &CqlType, bytes: &[u8]) -> Result<Value, TypeError> {
        decode_at(ty, bytes, 0)
    }
}

/// Validates a serialised value of type `ty` without keeping the decoded value.
pub fn validate(ty: &CqlType, bytes: &[u8]) -> Result<(), TypeError> {
    // Blobs and text, the bulk of what is written, are checked in place: decoding them only
    // to drop the copy was a tenth of a write's allocations.
    match ty.unfrozen() {
        CqlType::Blob | CqlType::Custom(_) => Ok(()),
        CqlType::Text => utf8(bytes).map(|_| ()),
        _ => decode_at(ty, bytes, 0).map(|_| ()),
    }
}

/// A text value: valid UTF-8, as `decode_at` and `validate` require.
fn utf8(bytes: &[u8]) -> Result<&str, TypeError> {
    std::str::from_utf8(bytes).map_err(|_| marshal("String didn't validate."))
}

fn write_count(n: usize, out: &mut Vec<u8>) {
    // A collection with more than i32::MAX elements cannot exist in a frame or cell (both are
    // bounded far below 2 GiB), so saturating is unreachable in practice.
    out.extend_from_slice(&i32::try_from(n).unwrap_or(i32::MAX).to_be_bytes());
}

fn write_with_length(v: &Value, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    v.encode(out);
    let len = i32::try_from(out.len() - start - 4).unwrap_or(i32::MAX);
    out[start..start + 4].copy_from_slice(&len.to_be_bytes());
}

fn exact<const N: usize>(bytes: &[u8]) -> Option<[u8; N]> {
    bytes.try_into().ok()
}

fn decode_at(ty: &CqlType, bytes: &[u8], depth: usize) -> Result<Value, TypeError> {
    if depth > MAX_TYPE_DEPTH {
        return Err(TypeError::TooDeep {
            max_depth: MAX_TYPE_DEPTH,
        });
    }
    let n = bytes.len();
    let ty = ty.unfrozen();
    // Types whose validator accepts a zero-length buffer.
    if n == 0
        && matches!(
            ty,
            CqlType::Boolean
                | CqlType::Int
                | CqlType::Bigint
                | CqlType::Counter
                | CqlType::Float
                | CqlType::Double
                | CqlType::Varint
                | CqlType::Decimal
                | CqlType::Uuid
                | CqlType::Timeuuid
                | CqlType::Timestamp
                | CqlType::Inet
                | CqlType::Tuple(_)
                | CqlType::Udt(_)
        )
    {
        return Ok(Value::Empty);
    }
    Ok(match ty {
        CqlType::Boolean => match bytes {
            [b] => Value::Boolean(*b != 0),
            _ => return Err(marshal(format!("Expected 1 or 0 byte value ({n})"))),
        },
        CqlType::Tinyint => match bytes {
            [b] => Value::Tinyint(*b as i8),
            _ => return Err(marshal(format!("Expected 1 byte for a tinyint ({n})"))),
        },
        CqlType::Smallint => match exact::<2>(bytes) {
            Some(b) => Value::Smallint(i16::from_be_bytes(b)),
            None => return Err(marshal(format!("Expected 2 bytes for a smallint ({n})"))),
        },
        CqlType::Int => match exact::<4>(bytes) {
            Some(b) => Value::Int(i32::from_be_bytes(b)),
            None => return Err(marshal(format!("Expected 4 or 0 byte int ({n})"))),
        },
        CqlType::Bigint | CqlType::Counter => match exact::<8>(bytes) {
            Some(b) if matches!(ty, CqlType::Counter) => Value::Counter(i64::from_be_bytes(b)),
            Some(b) => Value::Bigint(i64::from_be_bytes(b)),
            None => return Err(marshal(format!("Expected 8 or 0 byte long ({n})"))),
        },
        CqlType::Float => match exact::<4>(bytes) {
            Some(b) => Value::Float(f32::from_be_bytes(b)),
            None => {
                return Err(marshal(format!(
                    "Expected 4 or 0 byte value for a float ({n})"
                )))
            }
        },
        CqlType::Double => match exact::<8>(bytes) {
            Some(b) => Value::Double(f64::from_be_bytes(b)),
            None => {
                return Err(marshal(format!(
                    "Expected 8 or 0 byte value for a double ({n})"
                )))
            }
        },
        CqlType::Timestamp => match exact::<8>(bytes) {
            Some(b) => Value::Timestamp(i64::from_be_bytes(b)),
            None => return Err(marshal(format!("Expected 8 or 0 byte long for date ({n})"))),
        },
        CqlType::Date => match exact::<4>(bytes) {
            Some(b) => Value::Date(u32::from_be_bytes(b)),
            None => return Err(marshal(format!("Expected 4 byte long for date ({n})"))),
        },
        CqlType::Time => match exact::<8>(bytes) {
            Some(b) => Value::Time(i64::from_be_bytes(b)),
            None => return Err(marshal(format!("Expected 8 byte long for time ({n})"))),
        },
        CqlType::Varint => Value::Varint(BigInt::from_signed_bytes_be(bytes)),
        CqlType::Decimal => {
            let Some((scale, unscaled)) = bytes.split_first_chunk::<4>() else {
                return Err(marshal(format!("Expected 0 or at least 4 bytes ({n})")));
            };
            Value::Decimal {
                unscaled: BigInt::from_signed_bytes_be(unscaled),
                scale: i32::from_be_bytes(*scale),
            }
        }
        CqlType::Uuid => match exact::<16>(bytes) {
            Some(b) => Value::Uuid(Uuid::from_bytes(b)),
            None => return Err(marshal(format!("UUID should be 16 or 0 bytes ({n})"))),
        },
        CqlType::Timeuuid => match exact::<16>(bytes) {
            Some(b) if b[6] >> 4 == 1 => Value::Timeuuid(Uuid::from_bytes(b)),
            Some(b) => {
                return Err(marshal(format!(
                    "Invalid version for TimeUUID type: 0x{:x}",
                    b[6] >> 4
                )))
            }
            None => return Err(marshal(format!("UUID should be 16 or 0 bytes ({n})"))),
        },
        CqlType::Inet => {
            if let Some(b) = exact::<4>(bytes) {
                Value::Inet(IpAddr::V4(Ipv4Addr::from(b)))
            } else if let Some(b) = exact::<16>(bytes) {
                Value::Inet(IpAddr::V6(Ipv6Addr::from(b)))
            } else {
                return Err(marshal(format!(
                    "Expected 4 or 16 byte inetaddress; got {}",
                    crate::hex::hex(bytes)
                )));
            }
        }
        CqlType::Ascii => {
            if let Some(&b) = bytes.iter().find(|&&b| b >= 0x80) {
                // Cassandra prints the byte as a signed Java byte.
                return Err(marshal(format!("Invalid byte for ascii: {}", b as i8)));
            }
            // All bytes are < 0x80, which is valid UTF-8.
            Value::Ascii(String::from_utf8_lossy(bytes).into_owned())
        }
        // Cassandra's own validator also accepts a few sequences that are not UTF-8 (CESU
        // surrogates, C0 80); a Rust `String` cannot hold them, so they are rejected here.
        CqlType::Text => Value::Text(utf8(bytes)?.to_string()),
        CqlType::Blob | CqlType::Custom(_) => Value::Blob(bytes.to_vec()),
        CqlType::Duration => decode_duration(bytes)?,
        CqlType::List(e) => Value::List(decode_elements(e, bytes, depth, "list")?),
        CqlType::Set(e) => Value::Set(decode_elements(e, bytes, depth, "set")?),
        CqlType::Map(k, v) => {
            let parts = split_collection(bytes, 2, "map")?;
            let mut entries = Vec::with_capacity(parts.len() / 2);
            for pair in parts.chunks_exact(2) {
                entries.push((
                    decode_at(k, pair[0], depth + 1)?,
                    decode_at(v, pair[1], depth + 1)?,
                ));
            }
            Value::Map(entries)
        }
        CqlType::Tuple(types) => Value::Tuple(decode_fields(
            types.iter().map(|t| ("", t)),
            bytes,
            depth,
            false,
        )?),
        CqlType::Udt(udt) => Value::Udt(decode_fields(
            udt.fields.iter().map(|(name, t)| (name.as_str(), t)),
            bytes,
            depth,
            true,
        )?),
        CqlType::Vector(e, dimension) => {
            Value::Vector(decode_vector(ty, e, *dimension, bytes, depth)?)
        }
        CqlType::Frozen(_) => unreachable!("unfrozen() removed every frozen<> wrapper"),
    })
}

fn decode_duration(bytes: &[u8]) -> Result<Value, TypeError> {
    if bytes.len() < 3 {
        return Err(marshal(format!(
            "Expected at least 3 bytes for a duration ({})",
            bytes.len()
        )));
    }
    let mut input = bytes;
    let truncated = || marshal("Not enough bytes to read a duration");
    let months = vint::read_signed(&mut input).ok_or_else(truncated)?;
    let days = vint::read_signed(&mut input).ok_or_else(truncated)?;
    let nanoseconds = vint::read_signed(&mut input).ok_or_else(truncated)?;
    let months = i32::try_from(months).map_err(|_| {
        marshal(format!(
            "The duration months must be a 32 bits integer but was: {months}"
        ))
    })?;
    let days = i32::try_from(days).map_err(|_| {
        marshal(format!(
            "The duration days must be a 32 bits integer but was: {days}"
        ))
    })?;
    let all_non_negative = months >= 0 && days >= 0 && nanoseconds >= 0;
    let all_non_positive = months <= 0 && days <= 0 && nanoseconds <= 0;
    if !all_non_negative && !all_non_positive {
        return Err(marshal(format!(
            "The duration months, days and nanoseconds must be all of the same sign ({months}, {days}, {nanoseconds})"
        )));
    }
    Ok(Value::Duration {
        months,
        days,
        nanoseconds,
    })
}

fn decode_elements(
    elem: &CqlType,
    bytes: &[u8],
    depth: usize,
    kind: &str,
) -> Result<Vec<Value>, TypeError> {
    split_collection(bytes, 1, kind)?
        .into_iter()
        .map(|b| decode_at(elem, b, depth + 1))
        .collect()
}

fn decode_fields<'t>(
    types: impl ExactSizeIterator<Item = (&'t str, &'t CqlType)>,
    bytes: &[u8],
    depth: usize,
    is_udt: bool,
) -> Result<Vec<Option<Value>>, TypeError> {
    let count = types.len();
    let parts = split_fields(bytes, count, is_udt)?;
    let mut out = Vec::with_capacity(count);
    for (i, (name, ty)) in types.enumerate() {
        match parts.get(i).copied().flatten() {
            None => out.push(None),
            Some(b) => out.push(Some(decode_at(ty, b, depth + 1).map_err(|e| {
                if is_udt {
                    marshal(format!("Failure validating the {i}th field {name}; {e}"))
                } else {
                    e
                }
            })?)),
        }
    }
    Ok(out)
}

fn decode_vector(
    ty: &CqlType,
    elem: &CqlType,
    dimension: u32,
    bytes: &[u8],
    depth: usize,
) -> Result<Vec<Value>, TypeError> {
    split_vector(ty, elem, dimension, bytes)?
        .into_iter()
        .map(|b| decode_at(elem, b, depth + 1))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::UdtType;

    #[test]
    fn validate_accepts_and_rejects_exactly_what_decode_does() {
        let frozen_text = CqlType::Frozen(Box::new(CqlType::Text));
        let types = [
            CqlType::Blob,
            CqlType::Text,
            frozen_text,
            CqlType::Ascii,
            CqlType::Int,
        ];
        let inputs: [&[u8]; 6] = [
            b"",
            b"plain",
            b"\xc3\xa9t\xc3\xa9",
            b"\xff\xfe",
            b"\xc3",
            b"\0\0\0\x07",
        ];
        for ty in &types {
            for bytes in inputs {
                assert_eq!(
                    validate(ty, bytes),
                    Value::decode(ty, bytes).map(|_| ()),
                    "{ty:?} {bytes:?}"
                );
            }
        }
    }

    fn round_trip(ty: &CqlType, v: Value) {
        let mut out = Vec::new();
        v.encode(&mut out);
        assert_eq!(Value::decode(ty, &out).unwrap(), v, "{ty}");
    }

    #[test]
    fn natives_round_trip() {
        round_trip(&CqlType::Int, Value::Int(-5));
        round_trip(&CqlType::Tinyint, Value::Tinyint(-128));
        round_trip(&CqlType::Smallint, Value::Smallint(300));
        round_trip(&CqlType::Bigint, Value::Bigint(i64::MIN));
        round_trip(&CqlType::Counter, Value::Counter(7));
        round_trip(&CqlType::Double, Value::Double(-0.5));
        round_trip(&CqlType::Varint, Value::Varint(BigInt::from(-129)));
        round_trip(
            &CqlType::Decimal,
            Value::Decimal {
                unscaled: BigInt::from(12345),
                scale: 2,
            },
        );
        round_trip(&CqlType::Text, Value::Text("kremówki".into()));
        round_trip(&CqlType::Inet, Value::Inet("::1".parse().unwrap()));
        round_trip(
            &CqlType::Duration,
            Value::Duration {
                months: -1,
                days: -2,
                nanoseconds: -3,
            },
        );
        round_trip(&CqlType::Int, Value::Empty);
        round_trip(
            &CqlType::Timeuuid,
            Value::Timeuuid("8d8d3f7e-9c9a-11ee-8c90-0242ac120002".parse().unwrap()),
        );
    }

    #[test]
    fn wire_layouts() {
        let mut out = Vec::new();
        Value::Varint(BigInt::from(128)).encode(&mut out);
        assert_eq!(out, [0x00, 0x80]);
        out.clear();
        Value::List(vec![Value::Int(1)]).encode(&mut out);
        assert_eq!(out, [0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 1]);
        out.clear();
        Value::Duration {
            months: 1,
            days: 2,
            nanoseconds: 3,
        }
        .encode(&mut out);
        assert_eq!(out, [2, 4, 6]);
        out.clear();
        Value::Vector(vec![Value::Float(1.0), Value::Float(2.0)]).encode(&mut out);
        assert_eq!(out, [0x3f, 0x80, 0, 0, 0x40, 0, 0, 0]);
        out.clear();
        Value::Vector(vec![Value::Text("ab".into()), Value::Text("".into())]).encode(&mut out);
        assert_eq!(out, [2, b'a', b'b', 0]);
    }

    #[test]
    fn collections_round_trip() {
        let list = CqlType::List(Box::new(CqlType::Text));
        round_trip(
            &list,
            Value::List(vec![Value::Text("a".into()), Value::Text("".into())]),
        );
        let map = CqlType::Frozen(Box::new(CqlType::Map(
            Box::new(CqlType::Int),
            Box::new(CqlType::Set(Box::new(CqlType::Int))),
        )));
        round_trip(
            &map,
            Value::Map(vec![(
                Value::Int(1),
                Value::Set(vec![Value::Int(2), Value::Empty]),
            )]),
        );
        let tuple = CqlType::Tuple(vec![CqlType::Int, CqlType::Text]);
        round_trip(
            &tuple,
            Value::Tuple(vec![None, Some(Value::Text("x".into()))]),
        );
        // Missing trailing fields read as null.
        assert_eq!(
            Value::decode(&tuple, &[0, 0, 0, 4, 0, 0, 0, 9]).unwrap(),
            Value::Tuple(vec![Some(Value::Int(9)), None])
        );
        let vector = CqlType::Vector(Box::new(CqlType::Float), 2);
        round_trip(
            &vector,
            Value::Vector(vec![Value::Float(1.0), Value::Float(f32::INFINITY)]),
        );
        let vector = CqlType::Vector(Box::new(CqlType::Varint), 2);
        round_trip(
            &vector,
            Value::Vector(vec![
                Value::Varint(BigInt::from(1)),
                Value::Varint(BigInt::from(-300)),
            ]),
        );
    }

    #[test]
    fn rejects_what_cassandra_rejects() {
        let err = |ty: &CqlType, b: &[u8]| Value::decode(ty, b).unwrap_err().to_string();
        assert_eq!(
            err(&CqlType::Int, &[1, 2, 3]),
            "Expected 4 or 0 byte int (3)"
        );
        assert_eq!(
            err(&CqlType::Smallint, &[]),
            "Expected 2 bytes for a smallint (0)"
        );
        assert_eq!(
            err(&CqlType::Tinyint, &[]),
            "Expected 1 byte for a tinyint (0)"
        );
        assert_eq!(
            err(&CqlType::Date, &[]),
            "Expected 4 byte long for date (0)"
        );
        assert_eq!(
            err(&CqlType::Time, &[0; 4]),
            "Expected 8 byte long for time (4)"
        );
        assert_eq!(
            err(&CqlType::Ascii, b"a\xc3\xa9"),
            "Invalid byte for ascii: -61"
        );
        assert_eq!(err(&CqlType::Text, b"\xff"), "String didn't validate.");
        assert_eq!(
            err(&CqlType::Inet, &[1, 2, 3]),
            "Expected 4 or 16 byte inetaddress; got 0x010203"
        );
        assert!(err(&CqlType::Timeuuid, &[0; 16]).starts_with("Invalid version for TimeUUID"));
        assert_eq!(
            err(&CqlType::Decimal, &[0; 3]),
            "Expected 0 or at least 4 bytes (3)"
        );
        assert_eq!(
            err(&CqlType::Duration, &[]),
            "Expected at least 3 bytes for a duration (0)"
        );
        assert!(err(&CqlType::Duration, &[2, 3, 6]).contains("same sign"));
        let list = CqlType::List(Box::new(CqlType::Int));
        assert_eq!(err(&list, &[]), "Not enough bytes to read a list");
        // A huge count with no bytes behind it fails before allocating.
        assert_eq!(
            err(&list, &[0x7f, 0xff, 0xff, 0xff]),
            "Not enough bytes to read a list"
        );
        assert_eq!(
            err(&list, &[0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff]),
            "Null value read when not allowed"
        );
        assert_eq!(
            err(&list, &[0, 0, 0, 0, 1]),
            "Unexpected extraneous bytes after list value"
        );
        let tuple = CqlType::Tuple(vec![CqlType::Int]);
        assert_eq!(
            err(&tuple, &[0, 0, 0, 4, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff]),
            "Invalid remaining data after end of tuple value"
        );
        let udt = CqlType::Udt(UdtType {
            keyspace: "ks".into(),
            name: "u".into(),
            fields: vec![("a".into(), CqlType::Int)],
        });
        assert!(err(&udt, &[0, 0, 0, 1, 0]).starts_with("Failure validating the 0th field a"));
        let vector = CqlType::Vector(Box::new(CqlType::Int), 2);
        assert_eq!(
            err(&vector, &[0; 4]),
            "Not enough bytes to read a vector<int, 2>"
        );
        let huge = CqlType::Vector(Box::new(CqlType::Text), u32::MAX);
        assert!(Value::decode(&huge, &[0, 0]).is_err());
        assert!(Value::decode(&CqlType::Vector(Box::new(CqlType::Int), 1), &[]).is_err());
    }

    #[test]
    fn deep_types_are_bounded() {
        let mut ty = CqlType::Int;
        for _ in 0..200 {
            ty = CqlType::List(Box::new(ty));
        }
        let mut bytes = vec![0, 0, 0, 0];
        for _ in 0..199 {
            let mut outer = vec![0, 0, 0, 1];
            outer.extend_from_slice(&(bytes.len() as i32).to_be_bytes());
            outer.extend_from_slice(&bytes);
            bytes = outer;
        }
        assert!(matches!(
            Value::decode(&ty, &bytes),
            Err(TypeError::TooDeep { .. })
        ));
    }
}
