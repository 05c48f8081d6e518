//! Cassandra 5.0's masking functions (`MaskingFcts`, for dynamic data masking, callable in any
//! selection): `mask_null`, `mask_default` (a fixed value of the argument's type), `mask_replace`,
//! `mask_inner`/`mask_outer` (text with characters replaced by a padding character) and
//! `mask_hash` (a digest of the serialised value).
//!
//! A null argument gives null, except for `mask_default`, which masks a null too.

use std::net::{IpAddr, Ipv4Addr};

use num_bigint::BigInt;
use sha2::Digest;
use types::{CqlType, Value, DATE_EPOCH};

use crate::QueryError;

/// What `mask_default` and `mask_inner`/`mask_outer` put in place of text.
const MASKED_TEXT: &str = "****";
/// `mask_inner`/`mask_outer`'s default padding character.
const DEFAULT_PADDING: u16 = b'*' as u16;
/// `mask_hash`'s algorithm when none is given.
const DEFAULT_HASH_ALGORITHM: &str = "SHA-256";
/// `mask_default` of a timeuuid: the smallest timeuuid of the Unix epoch, as Cassandra gives.
const DEFAULT_TIMEUUID: uuid::Uuid =
    uuid::Uuid::from_u128(0x1381_4000_1dd2_11b2_8080_8080_8080_8080);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MaskFunction {
    Null,
    Default,
    Replace,
    Inner,
    Outer,
    Hash,
}

impl MaskFunction {
    pub fn from_name(name: &str) -> Option<MaskFunction> {
        Some(match name {
            "mask_null" => MaskFunction::Null,
            "mask_default" => MaskFunction::Default,
            "mask_replace" => MaskFunction::Replace,
            "mask_inner" => MaskFunction::Inner,
            "mask_outer" => MaskFunction::Outer,
            "mask_hash" => MaskFunction::Hash,
            _ => return None,
        })
    }

    /// Whether the result has the (first) argument's type.
    pub fn returns_argument_type(self) -> bool {
        !matches!(self, MaskFunction::Hash)
    }

    /// Argument kinds as Cassandra lists them in "Cannot infer type" errors.
    pub fn argument_kinds(self) -> &'static str {
        match self {
            MaskFunction::Replace => "any, any",
            _ => "any",
        }
    }

    /// The parameter and result types for a first argument of type `arg` and `arity`
    /// arguments, or Cassandra's message when the first argument does not fit.
    pub fn signature(
        self,
        name: &str,
        arg: &CqlType,
        arity: usize,
        text: &str,
    ) -> Result<(Vec<CqlType>, CqlType), QueryError> {
        Ok(match self {
            MaskFunction::Null => (vec![arg.clone()], arg.clone()),
            MaskFunction::Default => {
                let ret = if *arg.unfrozen() == CqlType::Timeuuid {
                    super::type_match::legacy_timeuuid()
                } else {
                    arg.clone()
                };
                (vec![arg.clone()], ret)
            }
            MaskFunction::Replace => (vec![arg.clone(), arg.clone()], arg.clone()),
            MaskFunction::Inner | MaskFunction::Outer => {
                if !matches!(arg.unfrozen(), CqlType::Text | CqlType::Ascii) {
                    return Err(QueryError::Invalid(format!(
                        "Function system.{name} requires an argument of type [text|varchar|ascii], but found argument {text} of type {arg}"
                    )));
                }
                let mut params = vec![arg.clone(), CqlType::Int, CqlType::Int];
                if arity == 4 {
                    params.push(CqlType::Text);
                }
                (params, arg.clone())
            }
            MaskFunction::Hash => {
                let mut params = vec![arg.clone()];
                if arity == 2 {
                    params.push(CqlType::Text);
                }
                (params, CqlType::Blob)
            }
        })
    }
}

fn encode(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    v.encode(&mut out);
    out
}

/// Runs `function` (its name `name`) on arguments of types `types`.
pub(crate) fn call(
    function: MaskFunction,
    name: &str,
    types: &[CqlType],
    args: &[Option<Vec<u8>>],
) -> Result<Option<Vec<u8>>, QueryError> {
    let first = args.first().cloned().flatten();
    Ok(match function {
        MaskFunction::Null => None,
        MaskFunction::Default => Some(default_bytes(name, &types[0])?),
        MaskFunction::Replace => args.get(1).cloned().flatten(),
        MaskFunction::Inner | MaskFunction::Outer => {
            let Some(bytes) = first else {
                return Ok(None);
            };
            let int = |i: usize| -> i32 {
                match args.get(i) {
                    Some(Some(b)) if b.len() == 4 => i32::from_be_bytes([b[0], b[1], b[2], b[3]]),
                    _ => 0,
                }
            };
            let padding = match args.get(3) {
                Some(Some(p)) => {
                    let p = String::from_utf8_lossy(p);
                    let units: Vec<u16> = p.encode_utf16().collect();
                    if units.len() != 1 {
                        return Err(QueryError::Invalid(format!(
                            "The padding argument for function system.{name} should be single-character, but '{p}' has {} characters.",
                            units.len()
                        )));
                    }
                    units[0]
                }
                _ => DEFAULT_PADDING,
            };
            let text = String::from_utf8_lossy(&bytes);
            let masked = mask_text(
                &text,
                int(1).max(0) as usize,
                int(2).max(0) as usize,
                padding,
                function == MaskFunction::Inner,
            );
            Some(masked.into_bytes())
        }
        MaskFunction::Hash => {
            let Some(bytes) = first else {
                return Ok(None);
            };
            let algorithm = match args.get(1) {
                Some(Some(a)) => String::from_utf8_lossy(a).into_owned(),
                _ => DEFAULT_HASH_ALGORITHM.to_string(),
            };
            Some(hash(&algorithm, &bytes)?)
        }
    })
}

/// `mask_inner` keeps `begin` leading and `end` trailing characters and pads the rest;
/// `mask_outer` pads those and keeps the rest. Characters are Java's (UTF-16 code units).
fn mask_text(text: &str, begin: usize, end: usize, padding: u16, inner: bool) -> String {
    let units: Vec<u16> = text.encode_utf16().collect();
    let len = units.len();
    let begin = begin.min(len);
    let end = end.min(len);
    let masked: Vec<u16> = units
        .iter()
        .enumerate()
        .map(|(i, u)| {
            let outer_part = i < begin || i >= len - end;
            if outer_part != inner {
                padding
            } else {
                *u
            }
        })
        .collect();
    String::from_utf16_lossy(&masked)
}

/// The digest Java's `MessageDigest.getInstance(algorithm)` computes.
fn hash(algorithm: &str, bytes: &[u8]) -> Result<Vec<u8>, QueryError> {
    Ok(match algorithm.to_ascii_uppercase().as_str() {
        "MD5" => md5::Md5::digest(bytes).to_vec(),
        "SHA-1" | "SHA1" | "SHA" => sha1::Sha1::digest(bytes).to_vec(),
        "SHA-224" => sha2::Sha224::digest(bytes).to_vec(),
        "SHA-256" => sha2::Sha256::digest(bytes).to_vec(),
        "SHA-384" => sha2::Sha384::digest(bytes).to_vec(),
        "SHA-512" => sha2::Sha512::digest(bytes).to_vec(),
        "SHA-512/224" => sha2::Sha512_224::digest(bytes).to_vec(),
        "SHA-512/256" => sha2::Sha512_256::digest(bytes).to_vec(),
        "MD2" | "SHA3-224" | "SHA3-256" | "SHA3-384" | "SHA3-512" => {
            return Err(QueryError::Invalid(format!(
                "Hash algorithm {algorithm} is not supported yet by Helenus"
            )))
        }
        _ => {
            return Err(QueryError::Invalid(format!(
                "Hash algorithm not found: {algorithm}"
            )))
        }
    })
}

/// The largest value `mask_default` builds: a vector's default has as many elements as its
/// dimension, which may be up to 2^31 - 1, so a null `vector<float, 2147483647>` would make
/// 8 GiB. No frame of Cassandra's default size (16 MiB, `native_transport_max_frame_size`)
/// could carry more, so more is refused as the function's failure (Cassandra fails with a
/// server error past 2 GiB) rather than built.
const MAX_MASKED_DEFAULT_BYTES: u64 = 16 * 1024 * 1024;

/// `mask_default`'s value for `ty`, serialised; refused past `MAX_MASKED_DEFAULT_BYTES`.
fn default_bytes(name: &str, ty: &CqlType) -> Result<Vec<u8>, QueryError> {
    let size = default_size(ty);
    if size > MAX_MASKED_DEFAULT_BYTES {
        return Err(QueryError::function_failure(
            name,
            std::slice::from_ref(ty),
            format!(
                "the default value of {ty} would take {size} bytes, more than the {MAX_MASKED_DEFAULT_BYTES} a value may"
            ),
        ));
    }
    Ok(encode(&default_value(ty)))
}

/// How many bytes `default_value(ty)` serialises to, saturating (computed without building
/// it).
fn default_size(ty: &CqlType) -> u64 {
    use CqlType as T;
    let one = |t: &CqlType| {
        let mut out = Vec::new();
        match t.unfrozen() {
            T::Vector(..) | T::Tuple(_) | T::Udt(_) => default_size(t),
            _ => {
                default_value(t).encode(&mut out);
                out.len() as u64
            }
        }
    };
    match ty.unfrozen() {
        // Each component or field: a 4-byte length, then its value.
        T::Tuple(items) => items
            .iter()
            .map(|t| 4u64.saturating_add(one(t)))
            .fold(0, u64::saturating_add),
        T::Udt(udt) => udt
            .fields
            .iter()
            .map(|(_, t)| 4u64.saturating_add(one(t)))
            .fold(0, u64::saturating_add),
        // Elements of a fixed size follow each other; others each after a vint length (at
        // most 9 bytes, counted as such).
        T::Vector(element, n) => {
            let each = one(element);
            let framing = if default_value_has_fixed_size(element) {
                0
            } else {
                9
            };
            u64::from(*n).saturating_mul(each.saturating_add(framing))
        }
        t => one(t),
    }
}

fn default_value_has_fixed_size(ty: &CqlType) -> bool {
    match ty.unfrozen() {
        CqlType::Vector(element, _) => default_value_has_fixed_size(element),
        CqlType::Tuple(_) | CqlType::Udt(_) => false,
        t => default_value(t).has_fixed_size(),
    }
}

/// The value `mask_default` gives for a type: zero, empty, the epoch, `****`, or such values
/// field by field.
fn default_value(ty: &CqlType) -> Value {
    use CqlType as T;
    match ty.unfrozen() {
        T::Ascii => Value::Ascii(MASKED_TEXT.to_string()),
        T::Text => Value::Text(MASKED_TEXT.to_string()),
        T::Tinyint => Value::Tinyint(0),
        T::Smallint => Value::Smallint(0),
        T::Int => Value::Int(0),
        T::Bigint => Value::Bigint(0),
        T::Counter => Value::Counter(0),
        T::Varint => Value::Varint(BigInt::from(0)),
        T::Decimal => Value::Decimal {
            unscaled: BigInt::from(0),
            scale: 0,
        },
        T::Float => Value::Float(0.0),
        T::Double => Value::Double(0.0),
        T::Boolean => Value::Boolean(false),
        T::Blob => Value::Blob(Vec::new()),
        T::Date => Value::Date(DATE_EPOCH),
        T::Time => Value::Time(0),
        T::Timestamp => Value::Timestamp(0),
        T::Duration => Value::Duration {
            months: 0,
            days: 0,
            nanoseconds: 0,
        },
        T::Inet => Value::Inet(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
        T::Uuid => Value::Uuid(uuid::Uuid::nil()),
        T::List(_) => Value::List(Vec::new()),
        T::Set(_) => Value::Set(Vec::new()),
        T::Map(..) => Value::Map(Vec::new()),
        T::Tuple(items) => Value::Tuple(items.iter().map(|t| Some(default_value(t))).collect()),
        T::Udt(udt) => Value::Udt(
            udt.fields
                .iter()
                .map(|(_, t)| Some(default_value(t)))
                .collect(),
        ),
        T::Vector(element, n) => Value::Vector((0..*n).map(|_| default_value(element)).collect()),
        // Cassandra's legacy timeuuid marshal class is a timeuuid to functions.
        T::Custom(_) if super::type_match::same_type(ty, &T::Timeuuid) => {
            Value::Timeuuid(DEFAULT_TIMEUUID)
        }
        T::Custom(_) => Value::Blob(Vec::new()),
        T::Timeuuid => Value::Timeuuid(DEFAULT_TIMEUUID),
        T::Frozen(_) => unreachable!("unfrozen above"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_default_value_past_the_bound_is_refused_not_built() {
        let vector = |element: CqlType, n: u32| CqlType::Vector(Box::new(element), n);
        assert_eq!(
            default_bytes("mask_default", &vector(CqlType::Float, 3)).unwrap(),
            vec![0; 12]
        );
        assert_eq!(default_size(&vector(CqlType::Text, 2)), 2 * (4 + 9));
        assert!(default_bytes("mask_default", &vector(CqlType::Float, i32::MAX as u32)).is_err());
        let nested = CqlType::Tuple(vec![vector(vector(CqlType::Int, 65_536), 65_536)]);
        assert!(matches!(
            default_bytes("mask_default", &nested),
            Err(QueryError::FunctionFailure { .. })
        ));
    }

    #[test]
    fn inner_and_outer_masks() {
        let star = DEFAULT_PADDING;
        assert_eq!(mask_text("héllo wörld", 1, 2, star, true), "h********ld");
        assert_eq!(mask_text("héllo wörld", 1, 2, star, false), "*éllo wör**");
        assert_eq!(mask_text("héllo wörld", 100, 1, star, true), "héllo wörld");
        assert_eq!(mask_text("héllo wörld", 3, 100, star, false), "***********");
        assert_eq!(mask_text("abcdef", 1, 1, u16::from(b'#'), false), "#bcde#");
    }

    #[test]
    fn hashes_and_defaults() {
        let digest = hash("sha-256", b"txt").expect("known");
        assert_eq!(digest[..4], [0x48, 0x6b, 0x9a, 0x6f]);
        assert!(hash("NOPE", b"").is_err());
        assert_eq!(
            default_value(&CqlType::Tuple(vec![CqlType::Int, CqlType::Text])),
            Value::Tuple(vec![
                Some(Value::Int(0)),
                Some(Value::Text(MASKED_TEXT.to_string()))
            ])
        );
    }
}
