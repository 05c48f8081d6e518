//! Byte-comparable encoding of clustering key components: `memcmp` order of encodings equals
//! [`crate::compare`] order of the values (reversed for DESC columns), encodings are prefix-free
//! (so a clustering key is simply the concatenation of its components' encodings and compares
//! component by component), and they decode back to the serialised value.
//!
//! # Layout of one component (ascending)
//!
//! A header byte, then a type-specific body:
//!
//! | header | meaning |
//! |---|---|
//! | `0x00` | never a header: ends a collection/tuple inside a body |
//! | `0x01` | null tuple/UDT field (only inside a body) |
//! | `0x02` | the empty value (zero bytes); no body |
//! | `0x03` | a value; body below |
//! | `0x04` | bytes that are not a valid value of the type, kept verbatim (escaped as for blob) so that nothing is lost; sorts after every valid value |
//! | `0xFF` | never used: see [`PREFIX_END`] |
//!
//! Bodies after `0x03`:
//! - boolean: `0x00`/`0x01` (any non-zero byte is true, as in Cassandra; decodes as `0x01`);
//! - tinyint/smallint/int/bigint/counter/timestamp/time: the big-endian bytes with the sign bit
//!   flipped; date: its 4 bytes (already unsigned-ordered);
//! - float/double: IEEE bits, NaN canonicalised, negatives inverted, positives with the sign bit
//!   set (Java's `Float.compare` order; every NaN decodes to the canonical NaN);
//! - uuid: version nibble byte, then the most significant half (timestamp-reordered for
//!   version 1), then the least significant half: 17 bytes;
//!   timeuuid: reordered timestamp with sign bit flipped, then the least significant half with
//!   every byte's top bit flipped (signed-byte order): 16 bytes;
//! - varint: `0xC0` for ≥ 0 or `0x40` for < 0, the byte length of the minimal two's
//!   complement (u32 BE, inverted for negatives), then those bytes (decodes minimal);
//! - decimal: `0x80` for zero; else `0xC0` (positive) / `0x40` (negative), the exponent `e`
//!   (i64 BE, sign bit flipped) and the significant decimal digits as ASCII (trailing zeros
//!   removed) with a `0x00` terminator, where the value is `0.digits × 10^e`; for negatives the
//!   exponent, digits and terminator bytes are inverted. Equal decimals (1.0, 1.00) encode
//!   equally, so decoding yields the normalised scale;
//! - ascii/text/blob/inet/duration/custom: the bytes with every `0x00` written `0x00 0xFF`,
//!   then the terminator `0x00 0x00`;
//! - list/set: each element encoded as a component, then `0x00`; map: key, value, key, …, `0x00`;
//! - tuple/UDT: each field as a component or `0x01` for null, trailing nulls omitted (Cassandra
//!   treats absent trailing fields as null), then `0x00`;
//! - vector: its `dimension` elements as components, no terminator.
//!
//! A descending component is the ascending encoding with every byte inverted; that reverses
//! `memcmp` order because encodings are prefix-free. Headers then become `0xFB..=0xFE`, so in
//! both directions no component starts with `0xFF`.
//!
//! # Prefix bounds
//!
//! For an encoded clustering prefix `P` (whole components), every key starting with `P` is
//! `>= P` and `< P + [PREFIX_END]` ([`prefix_end`]), because the next byte after `P` in any
//! longer key is a component header, never `0xFF`.

use crate::compare::{
    decimal_key, double_key, float_key, timeuuid_key, unreorder_timestamp, uuid_key,
};
use crate::error::TypeError;
use crate::layout::{fixed_size, split_collection, split_fields, split_vector, MAX_TYPE_DEPTH};
use crate::{vint, CqlType};
use num_bigint::BigInt;
use std::cmp::Ordering;

/// Appended to an encoded clustering prefix, gives the smallest key greater than every key
/// that starts with the prefix (no component encoding starts with this byte).
pub const PREFIX_END: u8 = 0xFF;

const END: u8 = 0x00;
const NULL: u8 = 0x01;
const EMPTY: u8 = 0x02;
const VALUE: u8 = 0x03;
const INVALID: u8 = 0x04;

/// `prefix` followed by [`PREFIX_END`]: the exclusive upper bound of all keys starting with the
/// (whole-component) encoded `prefix`.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(prefix.len() + 1);
    out.extend_from_slice(prefix);
    out.push(PREFIX_END);
    out
}

/// Appends the byte-comparable encoding of the serialised `value` of type `ty` to `out`.
/// `value` should have passed [`crate::validate`]; bytes that do not parse as the type are
/// still encoded (header `0x04`), reversibly and prefix-free, but their order is unspecified.
pub fn encode(ty: &CqlType, value: &[u8], descending: bool, out: &mut Vec<u8>) {
    let start = out.len();
    encode_component(ty, value, out, 0);
    if descending {
        for b in &mut out[start..] {
            *b = !*b;
        }
    }
}

fn encode_component(ty: &CqlType, value: &[u8], out: &mut Vec<u8>, depth: usize) {
    if value.is_empty() {
        out.push(EMPTY);
        return;
    }
    let start = out.len();
    out.push(VALUE);
    if depth > MAX_TYPE_DEPTH || encode_body(ty.unfrozen(), value, out, depth).is_none() {
        out.truncate(start);
        out.push(INVALID);
        escape(value, out);
    }
}

fn escape(value: &[u8], out: &mut Vec<u8>) {
    for &b in value {
        out.push(b);
        if b == 0 {
            out.push(0xff);
        }
    }
    out.extend_from_slice(&[0, 0]);
}

fn flip_sign<const N: usize>(value: &[u8], out: &mut Vec<u8>) -> Option<()> {
    let mut b: [u8; N] = value.try_into().ok()?;
    b[0] ^= 0x80;
    out.extend_from_slice(&b);
    Some(())
}

fn encode_body(ty: &CqlType, v: &[u8], out: &mut Vec<u8>, depth: usize) -> Option<()> {
    match ty {
        CqlType::Boolean => match v {
            [b] => out.push(u8::from(*b != 0)),
            _ => return None,
        },
        CqlType::Tinyint => flip_sign::<1>(v, out)?,
        CqlType::Smallint => flip_sign::<2>(v, out)?,
        CqlType::Int => flip_sign::<4>(v, out)?,
        CqlType::Bigint | CqlType::Counter | CqlType::Timestamp | CqlType::Time => {
            flip_sign::<8>(v, out)?
        }
        CqlType::Date => out.extend_from_slice(&<[u8; 4]>::try_from(v).ok()?),
        CqlType::Float => {
            let bits = u32::from_be_bytes(v.try_into().ok()?);
            out.extend_from_slice(&float_key(bits).to_be_bytes());
        }
        CqlType::Double => {
            let bits = u64::from_be_bytes(v.try_into().ok()?);
            out.extend_from_slice(&double_key(bits).to_be_bytes());
        }
        CqlType::Uuid => out.extend_from_slice(&uuid_key(&v.try_into().ok()?)),
        CqlType::Timeuuid => out.extend_from_slice(&timeuuid_key(&v.try_into().ok()?)),
        CqlType::Varint => {
            let minimal = BigInt::from_signed_bytes_be(v).to_signed_bytes_be();
            let len = u32::try_from(minimal.len()).ok()?;
            if minimal[0] & 0x80 != 0 {
                out.push(0x40);
                out.extend_from_slice(&(!len).to_be_bytes());
            } else {
                out.push(0xc0);
                out.extend_from_slice(&len.to_be_bytes());
            }
            out.extend_from_slice(&minimal);
        }
        CqlType::Decimal => {
            let (sign, exponent, digits) = decimal_key(v)?;
            let exponent = (exponent ^ i64::MIN) as u64;
            match sign {
                Ordering::Equal => out.push(0x80),
                Ordering::Greater => {
                    out.push(0xc0);
                    out.extend_from_slice(&exponent.to_be_bytes());
                    out.extend_from_slice(&digits);
                    out.push(0x00);
                }
                Ordering::Less => {
                    out.push(0x40);
                    out.extend_from_slice(&(!exponent).to_be_bytes());
                    out.extend(digits.iter().map(|d| !d));
                    out.push(0xff);
                }
            }
        }
        CqlType::Ascii
        | CqlType::Text
        | CqlType::Blob
        | CqlType::Inet
        | CqlType::Duration
        | CqlType::Custom(_) => escape(v, out),
        CqlType::List(e) | CqlType::Set(e) => {
            for element in split_collection(v, 1, "list").ok()? {
                encode_component(e, element, out, depth + 1);
            }
            out.push(END);
        }
        CqlType::Map(k, val) => {
            for (i, part) in split_collection(v, 2, "map").ok()?.into_iter().enumerate() {
                encode_component(if i % 2 == 0 { k } else { val }, part, out, depth + 1);
            }
            out.push(END);
        }
        CqlType::Tuple(types) => encode_fields(types.iter(), v, out, depth)?,
        CqlType::Udt(udt) => encode_fields(udt.fields.iter().map(|(_, t)| t), v, out, depth)?,
        CqlType::Vector(e, n) => {
            for element in split_vector(ty, e, *n, v).ok()? {
                encode_component(e, element, out, depth + 1);
            }
        }
        CqlType::Frozen(_) => unreachable!("callers pass unfrozen types"),
    }
    Some(())
}

fn encode_fields<'t>(
    types: impl ExactSizeIterator<Item = &'t CqlType>,
    v: &[u8],
    out: &mut Vec<u8>,
    depth: usize,
) -> Option<()> {
    let mut fields = split_fields(v, types.len(), false).ok()?;
    while fields.last() == Some(&None) {
        fields.pop();
    }
    for (field, ty) in fields.into_iter().zip(types) {
        match field {
            None => out.push(NULL),
            Some(b) => encode_component(ty, b, out, depth + 1),
        }
    }
    out.push(END);
    Some(())
}

/// Reads bytes of one encoded key, undoing the inversion of descending components.
struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    mask: u8,
}

fn corrupt(what: &str) -> TypeError {
    TypeError::Marshal(format!("Invalid byte-comparable key: {what}"))
}

impl Reader<'_> {
    fn peek(&self) -> Result<u8, TypeError> {
        self.data
            .get(self.pos)
            .map(|b| b ^ self.mask)
            .ok_or_else(|| corrupt("truncated"))
    }

    fn byte(&mut self) -> Result<u8, TypeError> {
        let b = self.peek()?;
        self.pos += 1;
        Ok(b)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], TypeError> {
        let bytes = self
            .data
            .get(self.pos..self.pos + N)
            .ok_or_else(|| corrupt("truncated"))?;
        let mut a = [0; N];
        for (slot, b) in a.iter_mut().zip(bytes) {
            *slot = b ^ self.mask;
        }
        self.pos += N;
        Ok(a)
    }

    fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    /// Reads an escaped byte string up to and including its `0x00 0x00` terminator.
    fn unescape(&mut self, out: &mut Vec<u8>) -> Result<(), TypeError> {
        loop {
            let b = self.byte()?;
            if b != 0 {
                out.push(b);
                continue;
            }
            match self.byte()? {
                0x00 => return Ok(()),
                0xff => out.push(0),
                _ => return Err(corrupt("bad escape")),
            }
        }
    }
}

/// Consumes one component (encoded with the same `ty` and `descending`) from the front of
/// `input` and returns the serialised value. Values that Cassandra considers equal but that
/// have several serialisations come back in a canonical form (see the module documentation).
pub fn decode(ty: &CqlType, input: &mut &[u8], descending: bool) -> Result<Vec<u8>, TypeError> {
    let mut reader = Reader {
        data: input,
        pos: 0,
        mask: if descending { 0xff } else { 0 },
    };
    let mut out = Vec::with_capacity(fixed_size(ty).unwrap_or(0));
    decode_component(ty, &mut reader, &mut out, 0)?;
    *input = &input[reader.pos..];
    Ok(out)
}

fn decode_component(
    ty: &CqlType,
    r: &mut Reader<'_>,
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<(), TypeError> {
    if depth > MAX_TYPE_DEPTH {
        return Err(TypeError::TooDeep {
            max_depth: MAX_TYPE_DEPTH,
        });
    }
    match r.byte()? {
        EMPTY => Ok(()),
        INVALID => r.unescape(out),
        VALUE => decode_body(ty.unfrozen(), r, out, depth),
        _ => Err(corrupt("unknown header")),
    }
}

fn unflip<const N: usize>(r: &mut Reader<'_>, out: &mut Vec<u8>) -> Result<(), TypeError> {
    let mut b = r.array::<N>()?;
    b[0] ^= 0x80;
    out.extend_from_slice(&b);
    Ok(())
}

fn decode_body(
    ty: &CqlType,
    r: &mut Reader<'_>,
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<(), TypeError> {
    match ty {
        CqlType::Boolean => out.push(r.byte()?),
        CqlType::Tinyint => unflip::<1>(r, out)?,
        CqlType::Smallint => unflip::<2>(r, out)?,
        CqlType::Int => unflip::<4>(r, out)?,
        CqlType::Bigint | CqlType::Counter | CqlType::Timestamp | CqlType::Time => {
            unflip::<8>(r, out)?
        }
        CqlType::Date => out.extend_from_slice(&r.array::<4>()?),
        CqlType::Float => {
            let key = u32::from_be_bytes(r.array()?);
            let bits = if key >> 31 == 1 {
                key ^ 0x8000_0000
            } else {
                !key
            };
            out.extend_from_slice(&bits.to_be_bytes());
        }
        CqlType::Double => {
            let key = u64::from_be_bytes(r.array()?);
            let bits = if key >> 63 == 1 {
                key ^ (1 << 63)
            } else {
                !key
            };
            out.extend_from_slice(&bits.to_be_bytes());
        }
        CqlType::Uuid => {
            let key = r.array::<17>()?;
            let ordered = u64::from_be_bytes(key[1..9].try_into().expect("8 bytes"));
            let msb = if key[0] == 1 {
                unreorder_timestamp(ordered)
            } else {
                ordered
            };
            out.extend_from_slice(&msb.to_be_bytes());
            out.extend_from_slice(&key[9..]);
        }
        CqlType::Timeuuid => {
            let key = r.array::<16>()?;
            let ordered = u64::from_be_bytes(key[..8].try_into().expect("8 bytes")) ^ (1 << 63);
            out.extend_from_slice(&unreorder_timestamp(ordered).to_be_bytes());
            out.extend(key[8..].iter().map(|b| b ^ 0x80));
        }
        CqlType::Varint => {
            let negative = match r.byte()? {
                0x40 => true,
                0xc0 => false,
                _ => return Err(corrupt("bad varint sign")),
            };
            let len = u32::from_be_bytes(r.array()?);
            let len = if negative { !len } else { len } as usize;
            if len > r.remaining() {
                return Err(corrupt("truncated varint"));
            }
            for _ in 0..len {
                out.push(r.byte()?);
            }
        }
        CqlType::Decimal => decode_decimal(r, out)?,
        CqlType::Ascii
        | CqlType::Text
        | CqlType::Blob
        | CqlType::Inet
        | CqlType::Duration
        | CqlType::Custom(_) => r.unescape(out)?,
        CqlType::List(e) | CqlType::Set(e) => decode_collection(r, out, depth, |_| e, 1)?,
        CqlType::Map(k, v) => {
            decode_collection(r, out, depth, |i| if i % 2 == 0 { k } else { v }, 2)?
        }
        CqlType::Tuple(types) => decode_fields(types.iter(), r, out, depth)?,
        CqlType::Udt(udt) => decode_fields(udt.fields.iter().map(|(_, t)| t), r, out, depth)?,
        CqlType::Vector(e, n) => {
            let fixed = fixed_size(e).is_some();
            for _ in 0..*n {
                if fixed {
                    decode_component(e, r, out, depth + 1)?;
                } else {
                    let mut element = Vec::new();
                    decode_component(e, r, &mut element, depth + 1)?;
                    vint::write_unsigned(element.len() as u64, out);
                    out.extend_from_slice(&element);
                }
            }
        }
        CqlType::Frozen(_) => unreachable!("callers pass unfrozen types"),
    }
    Ok(())
}

fn decode_decimal(r: &mut Reader<'_>, out: &mut Vec<u8>) -> Result<(), TypeError> {
    let negative = match r.byte()? {
        0x80 => {
            out.extend_from_slice(&[0, 0, 0, 0, 0]);
            return Ok(());
        }
        0x40 => true,
        0xc0 => false,
        _ => return Err(corrupt("bad decimal sign")),
    };
    let flip = if negative { 0xff } else { 0 };
    let exponent =
        (u64::from_be_bytes(r.array()?) ^ if negative { u64::MAX } else { 0 }) as i64 ^ i64::MIN;
    let mut digits = String::new();
    loop {
        let d = r.byte()? ^ flip;
        if d == 0 {
            break;
        }
        if !d.is_ascii_digit() {
            return Err(corrupt("bad decimal digit"));
        }
        digits.push(char::from(d));
    }
    if digits.is_empty() {
        return Err(corrupt("decimal without digits"));
    }
    let mut scale = digits.len() as i64 - exponent;
    if scale < i64::from(i32::MIN) {
        // The normalised form needs a scale below i32::MIN: put back enough trailing zeros
        // (the original value had at least that many digits, so this is bounded by its size).
        let zeros = i64::from(i32::MIN) - scale;
        if zeros > 1 << 20 {
            return Err(corrupt("decimal scale out of range"));
        }
        digits.extend(std::iter::repeat_n('0', zeros as usize));
        scale = i64::from(i32::MIN);
    }
    let scale = i32::try_from(scale).map_err(|_| corrupt("decimal scale out of range"))?;
    let mut unscaled: BigInt = digits.parse().map_err(|_| corrupt("bad decimal digits"))?;
    if negative {
        unscaled = -unscaled;
    }
    out.extend_from_slice(&scale.to_be_bytes());
    out.extend_from_slice(&unscaled.to_signed_bytes_be());
    Ok(())
}

fn decode_collection<'t>(
    r: &mut Reader<'_>,
    out: &mut Vec<u8>,
    depth: usize,
    type_of: impl Fn(usize) -> &'t CqlType,
    per_element: usize,
) -> Result<(), TypeError> {
    let count_at = out.len();
    out.extend_from_slice(&[0; 4]);
    let mut values = 0usize;
    while r.peek()? != END {
        let mut element = Vec::new();
        decode_component(type_of(values), r, &mut element, depth + 1)?;
        let len = i32::try_from(element.len()).map_err(|_| corrupt("element too large"))?;
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&element);
        values += 1;
    }
    r.byte()?;
    if !values.is_multiple_of(per_element) {
        return Err(corrupt("map key without value"));
    }
    let count = i32::try_from(values / per_element).map_err(|_| corrupt("too many elements"))?;
    out[count_at..count_at + 4].copy_from_slice(&count.to_be_bytes());
    Ok(())
}

fn decode_fields<'t>(
    mut types: impl Iterator<Item = &'t CqlType>,
    r: &mut Reader<'_>,
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<(), TypeError> {
    let start = out.len();
    loop {
        let header = r.peek()?;
        if header == END {
            r.byte()?;
            break;
        }
        let ty = types
            .next()
            .ok_or_else(|| corrupt("too many tuple fields"))?;
        if header == NULL {
            r.byte()?;
            out.extend_from_slice(&(-1i32).to_be_bytes());
            continue;
        }
        let mut field = Vec::new();
        decode_component(ty, r, &mut field, depth + 1)?;
        let len = i32::try_from(field.len()).map_err(|_| corrupt("field too large"))?;
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&field);
    }
    // All fields null: a non-empty value (zero bytes would be the distinct empty value).
    if out.len() == start {
        out.extend_from_slice(&(-1i32).to_be_bytes());
    }
    Ok(())
}

#[cfg(test)]
mod tests;
