//! Cassandra's ordering of serialised values (`AbstractType.compare`), used to sort set
//! elements and map keys, evaluate slice restrictions and order results.
//!
//! Per type: an empty value sorts before every non-empty one; integers, varint, decimal,
//! timestamp and time numerically (signed); float/double like Java's `Float.compare`
//! (-0.0 < 0.0, every NaN equal and above +Infinity); date by unsigned bytes (its encoding is
//! offset so that this is date order); ascii, text, blob, inet, duration and unknown custom
//! types by unsigned bytes; boolean false < true; uuid as `UUIDType` (version first, then the
//! timestamp for version 1, else the unsigned most significant half, then the unsigned least
//! significant half); timeuuid as `TimeUUIDType` (timestamp, then the clock-sequence/node bytes
//! compared as *signed* bytes, a legacy quirk); collections, tuples, UDTs and vectors
//! element by element (shorter collection first; absent trailing tuple fields equal null; null
//! before any value).
//!
//! Bytes that are not a valid value of the type (the caller should have validated them) are
//! compared as unsigned bytes rather than panicking.

use std::cmp::Ordering;

use num_bigint::BigInt;

use crate::layout::{split_collection, split_fields, split_vector, MAX_TYPE_DEPTH};
use crate::CqlType;

/// Compares two serialised values of type `ty` as Cassandra does.
pub fn compare(ty: &CqlType, a: &[u8], b: &[u8]) -> Ordering {
    compare_at(ty, a, b, 0)
}

fn signed<const N: usize>(a: &[u8], b: &[u8]) -> Ordering {
    match (<[u8; N]>::try_from(a), <[u8; N]>::try_from(b)) {
        // Flipping the sign bit turns two's complement order into unsigned byte order.
        (Ok(mut x), Ok(mut y)) => {
            x[0] ^= 0x80;
            y[0] ^= 0x80;
            x.cmp(&y)
        }
        _ => a.cmp(b),
    }
}

/// `Float.compare` order as an unsigned integer key: NaN canonicalised, negatives inverted.
pub(crate) fn float_key(bits: u32) -> u32 {
    let bits = if f32::from_bits(bits).is_nan() {
        0x7fc0_0000
    } else {
        bits
    };
    if bits >> 31 == 1 {
        !bits
    } else {
        bits | 0x8000_0000
    }
}

/// `Double.compare` order as an unsigned integer key.
pub(crate) fn double_key(bits: u64) -> u64 {
    let bits = if f64::from_bits(bits).is_nan() {
        0x7ff8_0000_0000_0000
    } else {
        bits
    };
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | 0x8000_0000_0000_0000
    }
}

/// `TimeUUIDType.reorderTimestampBytes`: time_hi_and_version, time_mid, time_low.
pub(crate) fn reorder_timestamp(msb: u64) -> u64 {
    (msb << 48) | ((msb << 16) & 0xffff_0000_0000) | (msb >> 32)
}

pub(crate) fn unreorder_timestamp(r: u64) -> u64 {
    (r << 32) | ((r >> 16) & 0xffff_0000) | (r >> 48)
}

/// A 17-byte key whose unsigned byte order is `UUIDType`'s order.
pub(crate) fn uuid_key(u: &[u8; 16]) -> [u8; 17] {
    let msb = u64::from_be_bytes(u[..8].try_into().expect("8 of 16 bytes"));
    let version = ((msb >> 12) & 0xf) as u8;
    // For version 1 Cassandra compares the reordered timestamp as a signed long; its top
    // nibble is the version (1), so signed and unsigned order agree.
    let ordered = if version == 1 {
        reorder_timestamp(msb)
    } else {
        msb
    };
    let mut key = [0; 17];
    key[0] = version;
    key[1..9].copy_from_slice(&ordered.to_be_bytes());
    key[9..].copy_from_slice(&u[8..]);
    key
}

/// A 16-byte key whose unsigned byte order is `TimeUUIDType`'s order.
pub(crate) fn timeuuid_key(u: &[u8; 16]) -> [u8; 16] {
    let msb = u64::from_be_bytes(u[..8].try_into().expect("8 of 16 bytes"));
    let mut key = [0; 16];
    key[..8].copy_from_slice(&(reorder_timestamp(msb) ^ (1 << 63)).to_be_bytes());
    for (k, b) in key[8..].iter_mut().zip(&u[8..]) {
        *k = b ^ 0x80;
    }
    key
}

/// A decimal as (sign, exponent, significant digits): the value is
/// `sign × 0.d₁d₂… × 10^exponent` with no trailing zero digit, so numerically equal decimals
/// with different scales (1.0, 1.00) get the same key. `None` if shorter than the 4-byte scale.
pub(crate) fn decimal_key(bytes: &[u8]) -> Option<(Ordering, i64, Vec<u8>)> {
    let (scale, unscaled) = bytes.split_first_chunk::<4>()?;
    let unscaled = BigInt::from_signed_bytes_be(unscaled);
    let sign = unscaled.sign();
    if sign == num_bigint::Sign::NoSign {
        return Some((Ordering::Equal, 0, Vec::new()));
    }
    let mut digits = unscaled.magnitude().to_string().into_bytes();
    let exponent = digits.len() as i64 - i64::from(i32::from_be_bytes(*scale));
    while digits.last() == Some(&b'0') {
        digits.pop();
    }
    let sign = if sign == num_bigint::Sign::Minus {
        Ordering::Less
    } else {
        Ordering::Greater
    };
    Some((sign, exponent, digits))
}

fn compare_decimal(a: &[u8], b: &[u8]) -> Ordering {
    let (Some((sa, ea, da)), Some((sb, eb, db))) = (decimal_key(a), decimal_key(b)) else {
        return a.cmp(b);
    };
    sa.cmp(&sb).then_with(|| {
        let magnitude = ea.cmp(&eb).then_with(|| da.cmp(&db));
        if sa == Ordering::Less {
            magnitude.reverse()
        } else {
            magnitude
        }
    })
}

fn compare_sequences(
    a: &[&[u8]],
    b: &[&[u8]],
    mut element: impl FnMut(usize, &[u8], &[u8]) -> Ordering,
) -> Ordering {
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let c = element(i, x, y);
        if c.is_ne() {
            return c;
        }
    }
    a.len().cmp(&b.len())
}

fn compare_at(ty: &CqlType, a: &[u8], b: &[u8], depth: usize) -> Ordering {
    if depth > MAX_TYPE_DEPTH {
        return a.cmp(b);
    }
    if a.is_empty() || b.is_empty() {
        return (!a.is_empty()).cmp(&!b.is_empty());
    }
    let ty = ty.unfrozen();
    match ty {
        CqlType::Boolean => (a[0] != 0).cmp(&(b[0] != 0)),
        CqlType::Tinyint => signed::<1>(a, b),
        CqlType::Smallint => signed::<2>(a, b),
        CqlType::Int => signed::<4>(a, b),
        CqlType::Bigint | CqlType::Counter | CqlType::Timestamp | CqlType::Time => {
            signed::<8>(a, b)
        }
        CqlType::Float => match (<[u8; 4]>::try_from(a), <[u8; 4]>::try_from(b)) {
            (Ok(x), Ok(y)) => {
                float_key(u32::from_be_bytes(x)).cmp(&float_key(u32::from_be_bytes(y)))
            }
            _ => a.cmp(b),
        },
        CqlType::Double => match (<[u8; 8]>::try_from(a), <[u8; 8]>::try_from(b)) {
            (Ok(x), Ok(y)) => {
                double_key(u64::from_be_bytes(x)).cmp(&double_key(u64::from_be_bytes(y)))
            }
            _ => a.cmp(b),
        },
        CqlType::Varint => BigInt::from_signed_bytes_be(a).cmp(&BigInt::from_signed_bytes_be(b)),
        CqlType::Decimal => compare_decimal(a, b),
        CqlType::Uuid => match (<[u8; 16]>::try_from(a), <[u8; 16]>::try_from(b)) {
            (Ok(x), Ok(y)) => uuid_key(&x).cmp(&uuid_key(&y)),
            _ => a.cmp(b),
        },
        CqlType::Timeuuid => match (<[u8; 16]>::try_from(a), <[u8; 16]>::try_from(b)) {
            (Ok(x), Ok(y)) => timeuuid_key(&x).cmp(&timeuuid_key(&y)),
            _ => a.cmp(b),
        },
        CqlType::Date
        | CqlType::Ascii
        | CqlType::Text
        | CqlType::Blob
        | CqlType::Inet
        | CqlType::Duration
        | CqlType::Custom(_) => a.cmp(b),
        CqlType::List(e) | CqlType::Set(e) => {
            match (
                split_collection(a, 1, "list"),
                split_collection(b, 1, "list"),
            ) {
                (Ok(x), Ok(y)) => {
                    compare_sequences(&x, &y, |_, p, q| compare_at(e, p, q, depth + 1))
                }
                _ => a.cmp(b),
            }
        }
        CqlType::Map(k, v) => {
            match (split_collection(a, 2, "map"), split_collection(b, 2, "map")) {
                (Ok(x), Ok(y)) => compare_sequences(&x, &y, |i, p, q| {
                    compare_at(if i % 2 == 0 { k } else { v }, p, q, depth + 1)
                }),
                _ => a.cmp(b),
            }
        }
        CqlType::Tuple(types) => compare_fields(types.iter(), a, b, depth),
        CqlType::Udt(udt) => compare_fields(udt.fields.iter().map(|(_, t)| t), a, b, depth),
        CqlType::Vector(e, n) => match (split_vector(ty, e, *n, a), split_vector(ty, e, *n, b)) {
            (Ok(x), Ok(y)) => compare_sequences(&x, &y, |_, p, q| compare_at(e, p, q, depth + 1)),
            _ => a.cmp(b),
        },
        CqlType::Frozen(_) => unreachable!("unfrozen() removed every frozen<> wrapper"),
    }
}

fn compare_fields<'t>(
    types: impl ExactSizeIterator<Item = &'t CqlType>,
    a: &[u8],
    b: &[u8],
    depth: usize,
) -> Ordering {
    let n = types.len();
    let (Ok(x), Ok(y)) = (split_fields(a, n, false), split_fields(b, n, false)) else {
        return a.cmp(b);
    };
    // Absent trailing fields are null; null sorts before any value.
    for (i, ty) in types.enumerate() {
        let c = match (x.get(i).copied().flatten(), y.get(i).copied().flatten()) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
            (Some(p), Some(q)) => compare_at(ty, p, q, depth + 1),
        };
        if c.is_ne() {
            return c;
        }
    }
    Ordering::Equal
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Value;

    fn enc(v: Value) -> Vec<u8> {
        let mut out = Vec::new();
        v.encode(&mut out);
        out
    }

    fn assert_sorted(ty: &CqlType, values: Vec<Value>) {
        let encoded: Vec<Vec<u8>> = values.into_iter().map(enc).collect();
        for (i, a) in encoded.iter().enumerate() {
            for (j, b) in encoded.iter().enumerate() {
                assert_eq!(compare(ty, a, b), i.cmp(&j), "{ty}: {a:02x?} vs {b:02x?}");
            }
        }
    }

    #[test]
    fn numeric_orders() {
        assert_sorted(
            &CqlType::Int,
            vec![
                Value::Empty,
                Value::Int(i32::MIN),
                Value::Int(-1),
                Value::Int(0),
                Value::Int(7),
            ],
        );
        assert_sorted(
            &CqlType::Float,
            vec![
                Value::Float(f32::NEG_INFINITY),
                Value::Float(-1.0),
                Value::Float(-0.0),
                Value::Float(0.0),
                Value::Float(f32::INFINITY),
                Value::Float(f32::NAN),
            ],
        );
        assert_eq!(
            compare(
                &CqlType::Double,
                &enc(Value::Double(f64::NAN)),
                &enc(Value::Double(-f64::NAN))
            ),
            Ordering::Equal
        );
        assert_sorted(
            &CqlType::Varint,
            vec![
                Value::Varint(BigInt::from(-300)),
                Value::Varint(BigInt::from(-1)),
                Value::Varint(BigInt::from(0)),
                Value::Varint(BigInt::from(200)),
            ],
        );
        let dec = |u: i64, s: i32| Value::Decimal {
            unscaled: BigInt::from(u),
            scale: s,
        };
        assert_sorted(
            &CqlType::Decimal,
            vec![
                dec(-15, 0),
                dec(-1, 0),
                dec(-5, 1),
                dec(0, 0),
                dec(5, 2),
                dec(1, 0),
                dec(15, 1),
                dec(2, -3),
            ],
        );
        assert_eq!(
            compare(&CqlType::Decimal, &enc(dec(10, 1)), &enc(dec(100, 2))),
            Ordering::Equal
        );
        assert_eq!(compare(&CqlType::Varint, &[0, 1], &[1]), Ordering::Equal);
    }

    #[test]
    fn uuid_orders() {
        let u = |s: &str| Value::Uuid(s.parse().unwrap());
        // Version first; then for v1 the timestamp (time_hi, time_mid, time_low).
        assert_sorted(
            &CqlType::Uuid,
            vec![
                u("ffffffff-ffff-1000-8000-000000000000"),
                u("00000000-0000-1001-8000-000000000000"),
                u("00000000-0000-4000-8000-000000000000"),
                u("00000000-0000-4000-ffff-000000000000"),
            ],
        );
        let t = |s: &str| Value::Timeuuid(s.parse().unwrap());
        // Least significant half compared as signed bytes: 0x80 < 0x00.
        assert_sorted(
            &CqlType::Timeuuid,
            vec![
                t("00000001-0000-1000-8000-000000000000"),
                t("00000001-0000-1000-0000-000000000000"),
                t("00000000-0001-1000-8000-000000000000"),
            ],
        );
    }

    #[test]
    fn composite_orders() {
        let list = CqlType::List(Box::new(CqlType::Int));
        assert_sorted(
            &list,
            vec![
                Value::List(vec![]),
                Value::List(vec![Value::Int(-1)]),
                Value::List(vec![Value::Int(-1), Value::Int(0)]),
                Value::List(vec![Value::Int(3)]),
            ],
        );
        let tuple = CqlType::Tuple(vec![CqlType::Int, CqlType::Text]);
        assert_sorted(
            &tuple,
            vec![
                Value::Empty,
                Value::Tuple(vec![None, Some(Value::Text("z".into()))]),
                Value::Tuple(vec![Some(Value::Int(1)), None]),
                Value::Tuple(vec![Some(Value::Int(1)), Some(Value::Text("".into()))]),
            ],
        );
        // Absent trailing fields equal null.
        assert_eq!(
            compare(
                &tuple,
                &[0, 0, 0, 4, 0, 0, 0, 1],
                &enc(Value::Tuple(vec![Some(Value::Int(1)), None]))
            ),
            Ordering::Equal
        );
        assert_sorted(
            &CqlType::Boolean,
            vec![Value::Empty, Value::Boolean(false), Value::Boolean(true)],
        );
    }
}
