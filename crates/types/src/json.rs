//! JSON forms of values, as Cassandra 5.0 reads and writes them (`INSERT JSON`, `fromJson`,
//! `SELECT JSON`, `toJson`): each type's `fromJSONObject` / `toJSONString`.
//!
//! Reading: a JSON value of the kind the type expects (numbers for numeric types, strings for
//! text, dates, times, UUIDs, inets, durations and `0x` blobs, booleans), and for most scalar
//! types also a string holding the value's text; collections, tuples and UDTs also accept a
//! string holding their JSON. Map keys are strings: text keys as they are, other keys parsed as
//! JSON first. UDT field names follow CQL identifier rules: lowercased unless double-quoted.
//!
//! Writing: Java's text forms where Cassandra uses them (`2.25E10` for a double, uncompressed
//! IPv6), timestamps as `"yyyy-mm-dd hh:mm:ss.fffZ"`, blobs as `"0x.."`, map keys as strings.

use std::fmt::Write;
use std::net::IpAddr;

use num_bigint::{BigInt, Sign};
use serde_json::Value as Json;

use crate::error::TypeError;
use crate::format::duration_text;
use crate::hex::hex;
use crate::temporal::{civil_from_days, MILLIS_PER_DAY, NANOS_PER_SECOND};
use crate::value::DATE_EPOCH;
use crate::{CqlType, Literal, Value};

fn invalid(message: impl Into<String>) -> TypeError {
    TypeError::InvalidLiteral(message.into())
}

/// A JSON number as Jackson reads it for Cassandra: an `Integer` when it is an integer that
/// fits 32 bits, a `Long` for 64 bits, a `BigInteger` beyond, and a `Double` when it has a
/// fraction or an exponent.
enum JavaNumber {
    Integer(i64),
    Long(i64),
    BigInteger(String),
    Double(f64),
}

fn java_number(n: &serde_json::Number) -> JavaNumber {
    let text = n.to_string();
    if is_integer_text(&text) {
        match text.parse::<i64>() {
            Ok(v) if i32::try_from(v).is_ok() => JavaNumber::Integer(v),
            Ok(v) => JavaNumber::Long(v),
            Err(_) => JavaNumber::BigInteger(text),
        }
    } else {
        JavaNumber::Double(text.parse().unwrap_or(f64::NAN))
    }
}

/// How Java names the JSON value's class in Cassandra's messages ("but got a Integer: 5").
fn kind(json: &Json) -> &'static str {
    match json {
        Json::Null => "null",
        Json::Bool(_) => "Boolean",
        Json::Number(n) => match java_number(n) {
            JavaNumber::Integer(_) => "Integer",
            JavaNumber::Long(_) => "Long",
            JavaNumber::BigInteger(_) => "BigInteger",
            JavaNumber::Double(_) => "Double",
        },
        Json::String(_) => "String",
        Json::Array(_) => "ArrayList",
        Json::Object(_) => "LinkedHashMap",
    }
}

/// A JSON value as Java prints the object Jackson made of it (`1e3` is the double `1000.0`).
fn java_text(json: &Json) -> String {
    match json {
        Json::Number(n) => match java_number(n) {
            JavaNumber::Integer(v) | JavaNumber::Long(v) => v.to_string(),
            JavaNumber::BigInteger(t) => t,
            JavaNumber::Double(v) => java_double_text(v),
        },
        other => other.to_string(),
    }
}

fn is_integer_text(s: &str) -> bool {
    let digits = s.strip_prefix('-').unwrap_or(s);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

fn expected(what: &str, json: &Json) -> TypeError {
    invalid(format!(
        "Expected {what}, but got a {}: {}",
        kind(json),
        java_text(json)
    ))
}

/// Types whose `fromString("")` is the empty value (a zero-length buffer) rather than an error,
/// so that `fromJson('""')` and an INSERT JSON `""` give it.
fn empty_string_is_empty_value(ty: &CqlType) -> bool {
    matches!(
        ty,
        CqlType::Bigint
            | CqlType::Decimal
            | CqlType::Double
            | CqlType::Float
            | CqlType::Inet
            | CqlType::Int
            | CqlType::Timestamp
            | CqlType::Timeuuid
            | CqlType::Uuid
    )
}

/// The CQL name a JSON object key stands for: the text inside double quotes as it is (with
/// `""` unescaped), otherwise lowercased.
pub fn json_key_to_name(key: &str) -> String {
    match key
        .strip_prefix('"')
        .and_then(|k| k.strip_suffix('"'))
        .filter(|_| key.len() >= 2)
    {
        Some(inner) => inner.replace("\"\"", "\""),
        None => key.to_lowercase(),
    }
}

/// A column or field name as a JSON object key: double-quoted when CQL would need quotes, then
/// JSON-escaped (`"\"Cap\""`).
pub fn name_to_json_key(name: &str) -> String {
    let bare = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    let cql = if bare {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    };
    json_string(&cql)
}

fn json_string(s: &str) -> String {
    Json::String(s.to_string()).to_string()
}

/// A string that may hold JSON for a collection, tuple or UDT: parsed, or an error.
fn nested(json: &Json) -> Result<Option<Json>, TypeError> {
    match json {
        Json::String(s) => serde_json::from_str(s)
            .map(Some)
            .map_err(|e| invalid(format!("Could not decode JSON string '{s}': {e}"))),
        _ => Ok(None),
    }
}

impl Value {
    /// Reads a JSON value as a value of `ty`; `None` for JSON `null`.
    pub fn from_json(ty: &CqlType, json: &Json) -> Result<Option<Value>, TypeError> {
        use CqlType as T;
        if json.is_null() {
            return Ok(None);
        }
        let ty = ty.unfrozen();
        if json.as_str() == Some("") && empty_string_is_empty_value(ty) {
            return Ok(Some(Value::Empty));
        }
        let scalar = |lit: Literal| Value::from_literal(ty, &lit).map(Some);
        match ty {
            T::Ascii | T::Text => match json {
                Json::String(s) => scalar(Literal::String(s.clone())),
                _ => Err(expected(
                    if matches!(ty, T::Ascii) {
                        "an ascii string"
                    } else {
                        "a UTF-8 string"
                    },
                    json,
                )),
            },
            T::Tinyint | T::Smallint | T::Int | T::Bigint | T::Counter | T::Varint => {
                let name = ty.native_name().unwrap_or("integer");
                let article = if name == "int" { "an" } else { "a" };
                match json {
                    // Java's parsers take no surrounding spaces.
                    Json::String(s) if s.trim() != s => {
                        Err(invalid(format!("Unable to make {name} from '{s}'")))
                    }
                    Json::Number(n) if is_integer_text(&n.to_string()) => {
                        // `int` takes a JSON Integer only and `bigint` no BigInteger; the
                        // others read the number's text, so its range decides.
                        match (ty, java_number(n)) {
                            (T::Int, JavaNumber::Long(_) | JavaNumber::BigInteger(_))
                            | (T::Bigint | T::Counter, JavaNumber::BigInteger(_)) => {
                                Err(expected(&format!("{article} {name} value"), json))
                            }
                            _ => scalar(Literal::Integer(n.to_string())),
                        }
                    }
                    Json::String(s) => scalar(Literal::Integer(s.clone())),
                    _ => Err(expected(&format!("{article} {name} value"), json)),
                }
            }
            T::Float | T::Double | T::Decimal => match json {
                // Cassandra's JSON parser reads a fractional number as a Java double, so a
                // decimal gets that double's text (`1.5e3` -> `1500.0`), not the digits given.
                Json::Number(n) if matches!(ty, T::Decimal) && !is_integer_text(&n.to_string()) => {
                    let v: f64 = n
                        .to_string()
                        .parse()
                        .map_err(|_| invalid(format!("Unable to make BigDecimal from '{n}'")))?;
                    scalar(Literal::Float(java_double_text(v)))
                }
                // A JSON integer is a Java Integer, Long or BigInteger: `-0` is plain 0.
                Json::Number(n) if is_integer_text(&n.to_string()) => {
                    let text = n.to_string();
                    let zero = text.trim_start_matches('-').bytes().all(|b| b == b'0');
                    scalar(Literal::Float(if zero { "0".to_string() } else { text }))
                }
                Json::Number(n) => scalar(Literal::Float(n.to_string())),
                // BigDecimal's parser takes no surrounding spaces (Double's does).
                Json::String(s) if matches!(ty, T::Decimal) && s.trim() != s => Err(invalid(
                    format!("Value '{s}' is not a valid representation of a decimal value"),
                )),
                Json::String(s) => scalar(match s.trim() {
                    "NaN" => Literal::NaN,
                    "Infinity" => Literal::Infinity,
                    "-Infinity" => Literal::NegInfinity,
                    t => Literal::Float(t.to_string()),
                }),
                _ => Err(expected(
                    &format!("a {} value", ty.native_name().unwrap_or("number")),
                    json,
                )),
            },
            T::Boolean => match json {
                Json::Bool(b) => Ok(Some(Value::Boolean(*b))),
                // `BooleanType.fromString` reads the empty string as false.
                Json::String(s) if s.is_empty() => Ok(Some(Value::Boolean(false))),
                Json::String(s) if s.eq_ignore_ascii_case("true") => Ok(Some(Value::Boolean(true))),
                Json::String(s) if s.eq_ignore_ascii_case("false") => {
                    Ok(Some(Value::Boolean(false)))
                }
                _ => Err(expected("a boolean value", json)),
            },
            T::Blob => match json {
                Json::String(s) => match s.strip_prefix("0x") {
                    Some(h) => scalar(Literal::Hex(h.to_string())),
                    None => Err(invalid(format!(
                        "Value '{s}' is not a valid blob representation: String representation of blob is missing 0x prefix: {s}"
                    ))),
                },
                _ => Err(expected("a hex string representing bytes", json)),
            },
            T::Uuid | T::Timeuuid => match json {
                Json::String(s) => {
                    let u = uuid::Uuid::try_parse(s.trim())
                        .map_err(|_| invalid(format!("Unable to make UUID from '{s}'")))?;
                    if matches!(ty, T::Timeuuid) && u.get_version_num() != 1 {
                        return Err(invalid("TimeUUID supports only version 1 UUIDs"));
                    }
                    scalar(Literal::Uuid(s.trim().to_string()))
                }
                _ => Err(expected("a string representation of a uuid", json)),
            },
            T::Timestamp => match json {
                // Only a Java Long is taken: an integer that fits 32 bits is an Integer to
                // Jackson, and Cassandra rejects it (`fromJson('12')`), as it does a BigInteger.
                Json::Number(n) if matches!(java_number(n), JavaNumber::Long(_)) => {
                    scalar(Literal::Integer(n.to_string()))
                }
                Json::String(s) => scalar(Literal::String(s.clone())),
                _ => Err(expected(
                    "a long or a datestring representation of a timestamp value",
                    json,
                )),
            },
            T::Date | T::Time | T::Inet | T::Duration => {
                let what = match ty {
                    T::Date => "a string representation of a date value",
                    T::Time => "a string representation of a time value",
                    T::Inet => "a string representation of an inet value",
                    _ => "a string representation of a duration",
                };
                match json {
                    Json::String(s) if matches!(ty, T::Duration) => {
                        scalar(Literal::Duration(s.clone()))
                    }
                    Json::String(s) => scalar(Literal::String(s.clone())),
                    _ => Err(expected(what, json)),
                }
            }
            T::List(e) | T::Set(e) | T::Vector(e, _) => {
                if let Some(parsed) = nested(json)? {
                    return Value::from_json(ty, &parsed);
                }
                let Json::Array(items) = json else {
                    return Err(expected(
                        match ty {
                            T::Set(_) => "a list (representing a set)",
                            T::Vector(..) => "a list (representing a vector)",
                            _ => "a list",
                        },
                        json,
                    ));
                };
                if let T::Vector(_, n) = ty {
                    if items.len() != *n as usize {
                        return Err(invalid(format!(
                            "List had incorrect size: expected {n} but given {}; {json}",
                            items.len()
                        )));
                    }
                }
                let mut values = Vec::with_capacity(items.len());
                for item in items {
                    match Value::from_json(e, item)? {
                        Some(v) => values.push(v),
                        None => {
                            return Err(invalid(match ty {
                                T::Set(_) => "Invalid null element in set",
                                T::Vector(..) => "Invalid null element in vector",
                                _ => "Invalid null element in list",
                            }))
                        }
                    }
                }
                Ok(Some(match ty {
                    T::Set(_) => Value::Set(values),
                    T::Vector(..) => Value::Vector(values),
                    _ => Value::List(values),
                }))
            }
            T::Map(k, v) => {
                if let Some(parsed) = nested(json)? {
                    return Value::from_json(ty, &parsed);
                }
                let Json::Object(entries) = json else {
                    return Err(expected("a map", json));
                };
                let mut out = Vec::with_capacity(entries.len());
                for (key, value) in entries {
                    let key_json = match k.unfrozen() {
                        T::Ascii | T::Text => Json::String(key.clone()),
                        // Other keys are written as JSON inside the string; a bare word is
                        // read as a string, so the key type reports it.
                        _ => serde_json::from_str(key).unwrap_or_else(|_| Json::String(key.clone())),
                    };
                    let key = Value::from_json(k, &key_json)?
                        .ok_or_else(|| invalid("Invalid null key in map"))?;
                    let value = Value::from_json(v, value)?
                        .ok_or_else(|| invalid("Invalid null value in map"))?;
                    out.push((key, value));
                }
                Ok(Some(Value::Map(out)))
            }
            T::Tuple(types) => {
                if let Some(parsed) = nested(json)? {
                    return Value::from_json(ty, &parsed);
                }
                let Json::Array(items) = json else {
                    return Err(expected("a list representation of a tuple", json));
                };
                if items.len() > types.len() {
                    return Err(invalid(format!(
                        "Tuple contains extra items (expected {}): {json}",
                        types.len()
                    )));
                }
                if items.len() < types.len() {
                    return Err(invalid(format!(
                        "Tuple is missing items (expected {}): {json}",
                        types.len()
                    )));
                }
                let values = types
                    .iter()
                    .zip(items)
                    .map(|(t, item)| Value::from_json(t, item))
                    .collect::<Result<_, _>>()?;
                Ok(Some(Value::Tuple(values)))
            }
            T::Udt(udt) => {
                if let Some(parsed) = nested(json)? {
                    return Value::from_json(ty, &parsed);
                }
                let Json::Object(entries) = json else {
                    return Err(expected("a map", json));
                };
                let mut values: Vec<Option<Value>> = vec![None; udt.fields.len()];
                for (key, value) in entries {
                    let name = json_key_to_name(key);
                    let i = udt
                        .fields
                        .iter()
                        .position(|(f, _)| *f == name)
                        .ok_or_else(|| {
                            invalid(format!(
                                "Unknown field '{name}' in value of user defined type {}",
                                udt.name
                            ))
                        })?;
                    values[i] = Value::from_json(&udt.fields[i].1, value)?;
                }
                Ok(Some(Value::Udt(values)))
            }
            T::Custom(class) => Err(invalid(format!(
                "JSON is not supported for custom type '{class}'"
            ))),
            T::Frozen(_) => unreachable!("unfrozen above"),
        }
    }

    /// The value as Cassandra's `toJson` writes it (`ty` gives element and field types).
    pub fn to_json(&self, ty: &CqlType) -> String {
        let ty = ty.unfrozen();
        let elem = |i: usize| -> &CqlType {
            match ty {
                CqlType::List(e) | CqlType::Set(e) | CqlType::Vector(e, _) => e,
                CqlType::Map(k, v) => {
                    if i == 0 {
                        k
                    } else {
                        v
                    }
                }
                _ => ty,
            }
        };
        match self {
            Value::Empty => "null".to_string(),
            Value::Boolean(b) => b.to_string(),
            Value::Tinyint(v) => v.to_string(),
            Value::Smallint(v) => v.to_string(),
            Value::Int(v) => v.to_string(),
            Value::Bigint(v) | Value::Counter(v) => v.to_string(),
            Value::Varint(v) => v.to_string(),
            // Jackson writes no NaN or infinities: Cassandra's toJson gives null for them,
            // in collections, tuples and UDTs too (and, as a map key, the string "null").
            Value::Float(v) if !v.is_finite() => "null".to_string(),
            Value::Double(v) if !v.is_finite() => "null".to_string(),
            Value::Float(v) => java_float_text(*v),
            Value::Double(v) => java_double_text(*v),
            Value::Decimal { unscaled, scale } => java_decimal_text(unscaled, *scale),
            Value::Ascii(s) | Value::Text(s) => json_string(s),
            Value::Blob(b) => format!("\"{}\"", hex(b)),
            Value::Uuid(u) | Value::Timeuuid(u) => format!("\"{}\"", u.hyphenated()),
            Value::Timestamp(ms) => format!("\"{}\"", json_timestamp(*ms)),
            Value::Date(d) => format!("\"{}\"", json_date(*d)),
            Value::Time(ns) => format!("\"{}\"", json_time(*ns)),
            Value::Inet(a) => format!("\"{}\"", java_inet_text(a)),
            Value::Duration {
                months,
                days,
                nanoseconds,
            } => {
                // Cassandra's `Duration.toString` writes nothing for a zero duration (the CQL
                // literal form needs `0s`).
                if (*months, *days, *nanoseconds) == (0, 0, 0) {
                    "\"\"".to_string()
                } else {
                    format!("\"{}\"", duration_text(*months, *days, *nanoseconds))
                }
            }
            Value::List(items) | Value::Set(items) | Value::Vector(items) => {
                let e = elem(0);
                let parts: Vec<String> = items.iter().map(|v| v.to_json(e)).collect();
                format!("[{}]", parts.join(", "))
            }
            Value::Map(entries) => {
                let (k, v) = (elem(0), elem(1));
                let parts: Vec<String> = entries
                    .iter()
                    .map(|(key, value)| {
                        let key = match key {
                            Value::Ascii(s) | Value::Text(s) => json_string(s),
                            other => json_string(&other.to_json(k)),
                        };
                        format!("{key}: {}", value.to_json(v))
                    })
                    .collect();
                format!("{{{}}}", parts.join(", "))
            }
            Value::Tuple(items) => {
                let types: &[CqlType] = match ty {
                    CqlType::Tuple(t) => t,
                    _ => &[],
                };
                let parts: Vec<String> = items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| match v {
                        Some(v) => v.to_json(types.get(i).unwrap_or(ty)),
                        None => "null".to_string(),
                    })
                    .collect();
                format!("[{}]", parts.join(", "))
            }
            Value::Udt(fields) => {
                let CqlType::Udt(udt) = ty else {
                    return "null".to_string();
                };
                let parts: Vec<String> = udt
                    .fields
                    .iter()
                    .enumerate()
                    .map(|(i, (name, t))| {
                        let value = fields
                            .get(i)
                            .and_then(Option::as_ref)
                            .map_or_else(|| "null".to_string(), |v| v.to_json(t));
                        format!("{}: {value}", name_to_json_key(name))
                    })
                    .collect();
                format!("{{{}}}", parts.join(", "))
            }
        }
    }
}

/// `BigDecimal.toString()`: plain when the scale is not negative and the adjusted exponent is
/// at least -6, else scientific with a signed exponent (`1E+3`, `-1.5E-7`).
pub fn java_decimal_text(unscaled: &BigInt, scale: i32) -> String {
    let digits = unscaled.magnitude().to_string();
    let sign = if unscaled.sign() == Sign::Minus {
        "-"
    } else {
        ""
    };
    let adjusted = -i64::from(scale) + (digits.len() as i64 - 1);
    if scale >= 0 && adjusted >= -6 {
        let scale = scale as usize;
        if scale == 0 {
            format!("{sign}{digits}")
        } else if digits.len() > scale {
            let (int, frac) = digits.split_at(digits.len() - scale);
            format!("{sign}{int}.{frac}")
        } else {
            format!("{sign}0.{}{digits}", "0".repeat(scale - digits.len()))
        }
    } else {
        let (first, rest) = digits.split_at(1);
        let point = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let exp_sign = if adjusted >= 0 { "+" } else { "" };
        format!("{sign}{first}{point}E{exp_sign}{adjusted}")
    }
}

/// Java's `Double.toString`: plain for 1e-3 <= |v| < 1e7, otherwise `d.dddE±n`; always a
/// fractional part; `NaN`, `Infinity`. The text Cassandra gives a double (JSON, casts).
pub fn java_double_text(v: f64) -> String {
    java_floating_text(v, false)
}

/// Java's `Float.toString`, by the same rules with a float's shortest digits.
pub fn java_float_text(v: f32) -> String {
    java_floating_text(f64::from(v), true)
}

fn java_floating_text(v: f64, single: bool) -> String {
    if v.is_nan() {
        return "NaN".to_string();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity" } else { "-Infinity" }.to_string();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0.0" } else { "0.0" }.to_string();
    }
    // The shortest digits that read back as the same value (f32 for floats).
    let sci = if single {
        format!("{:e}", v as f32)
    } else {
        format!("{v:e}")
    };
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if (-3..7).contains(&exponent) {
        // Plain: place the decimal point.
        let point = exponent + 1;
        let (int, frac) = if point <= 0 {
            (
                "0".to_string(),
                format!("{}{digits}", "0".repeat((-point) as usize)),
            )
        } else if point as usize >= digits.len() {
            (
                format!("{digits}{}", "0".repeat(point as usize - digits.len())),
                String::new(),
            )
        } else {
            (
                digits[..point as usize].to_string(),
                digits[point as usize..].to_string(),
            )
        };
        let frac = if frac.is_empty() {
            "0".to_string()
        } else {
            frac
        };
        format!("{sign}{int}.{frac}")
    } else {
        let (first, rest) = digits.split_at(1);
        let rest = if rest.is_empty() { "0" } else { rest };
        format!("{sign}{first}.{rest}E{exponent}")
    }
}

/// `yyyy-mm-dd hh:mm:ss.fffZ`, Cassandra's JSON timestamp format.
fn json_timestamp(ms: i64) -> String {
    let days = ms.div_euclid(MILLIS_PER_DAY);
    let ms_of_day = ms.rem_euclid(MILLIS_PER_DAY);
    let (y, m, d) = civil_from_days(days);
    let (h, rest) = (ms_of_day / 3_600_000, ms_of_day % 3_600_000);
    let (min, rest) = (rest / 60_000, rest % 60_000);
    format!(
        "{y:04}-{m:02}-{d:02} {h:02}:{min:02}:{:02}.{:03}Z",
        rest / 1000,
        rest % 1000
    )
}

fn json_date(days: u32) -> String {
    let (y, m, d) = civil_from_days(i64::from(days) - i64::from(DATE_EPOCH));
    format!("{y:04}-{m:02}-{d:02}")
}

fn json_time(ns: i64) -> String {
    let secs = ns / NANOS_PER_SECOND;
    format!(
        "{:02}:{:02}:{:02}.{:09}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        ns % NANOS_PER_SECOND
    )
}

/// Java's `InetAddress.getHostAddress`: IPv6 as eight hex groups without zero compression.
fn java_inet_text(a: &IpAddr) -> String {
    match a {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => {
            let mut s = String::new();
            for (i, g) in v6.segments().iter().enumerate() {
                if i > 0 {
                    s.push(':');
                }
                let _ = write!(s, "{g:x}");
            }
            s
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(ty: &CqlType, json: &str) -> String {
        let parsed: Json = serde_json::from_str(json).expect("json");
        Value::from_json(ty, &parsed)
            .expect("valid")
            .expect("not null")
            .to_json(ty)
    }

    #[test]
    fn doubles_print_like_java() {
        assert_eq!(java_double_text(2.25e10), "2.25E10");
        assert_eq!(java_double_text(1.5), "1.5");
        assert_eq!(java_double_text(-1.0), "-1.0");
        assert_eq!(java_double_text(0.001), "0.001");
        assert_eq!(java_double_text(0.0001), "1.0E-4");
        assert_eq!(java_double_text(1234567.0), "1234567.0");
        assert_eq!(java_double_text(12345678.0), "1.2345678E7");
        assert_eq!(java_float_text(0.1f32), "0.1");
        assert_eq!(java_double_text(f64::NAN), "NaN");
    }

    #[test]
    fn a_zero_duration_is_the_empty_string() {
        let zero = Value::Duration {
            months: 0,
            days: 0,
            nanoseconds: 0,
        };
        assert_eq!(zero.to_json(&CqlType::Duration), "\"\"");
        let day = Value::Duration {
            months: 0,
            days: 1,
            nanoseconds: 0,
        };
        assert_eq!(day.to_json(&CqlType::Duration), "\"1d\"");
    }

    #[test]
    fn decimals_print_like_java_big_decimal() {
        let text = |unscaled: i64, scale: i32| java_decimal_text(&BigInt::from(unscaled), scale);
        assert_eq!(text(1, -3), "1E+3");
        assert_eq!(text(12, -3), "1.2E+4");
        assert_eq!(text(1000, 0), "1000");
        assert_eq!(text(1, 7), "1E-7");
        assert_eq!(text(1, 6), "0.000001");
        assert_eq!(text(0, -3), "0E+3");
        assert_eq!(text(0, 9), "0E-9");
        assert_eq!(text(-15, -9), "-1.5E+10");
        assert_eq!(text(123456, 3), "123.456");
        assert_eq!(text(0, 2), "0.00");
    }

    #[test]
    fn nan_and_infinities_are_null_at_every_depth() {
        let json = |ty: &CqlType, v: Value| v.to_json(ty);
        assert_eq!(json(&CqlType::Double, Value::Double(f64::NAN)), "null");
        assert_eq!(
            json(&CqlType::Double, Value::Double(f64::NEG_INFINITY)),
            "null"
        );
        assert_eq!(json(&CqlType::Float, Value::Float(f32::INFINITY)), "null");
        let list = CqlType::List(Box::new(CqlType::Double));
        let items = vec![Value::Double(f64::NAN), Value::Double(1.5)];
        assert_eq!(json(&list, Value::List(items)), "[null, 1.5]");
        let map = CqlType::Map(Box::new(CqlType::Float), Box::new(CqlType::Double));
        let entries = vec![
            (Value::Float(1.0), Value::Double(f64::INFINITY)),
            (Value::Float(f32::NAN), Value::Double(2.0)),
        ];
        assert_eq!(
            json(&map, Value::Map(entries)),
            r#"{"1.0": null, "null": 2.0}"#
        );
        let tuple = CqlType::Tuple(vec![CqlType::Double, CqlType::Float]);
        let fields = vec![Some(Value::Double(f64::NAN)), Some(Value::Float(0.5))];
        assert_eq!(json(&tuple, Value::Tuple(fields)), "[null, 0.5]");
    }

    #[test]
    fn values_round_trip_in_cassandras_text() {
        assert_eq!(round_trip(&CqlType::Double, "22500000000"), "2.25E10");
        assert_eq!(round_trip(&CqlType::Bigint, "\"77\""), "77");
        assert_eq!(
            round_trip(&CqlType::Varint, "123456789012345678901234567890"),
            "123456789012345678901234567890"
        );
        assert_eq!(round_trip(&CqlType::Decimal, "\"12.340\""), "12.340");
        assert_eq!(round_trip(&CqlType::Decimal, "1.5e3"), "1500.0");
        assert_eq!(round_trip(&CqlType::Inet, "\"::1\""), "\"0:0:0:0:0:0:0:1\"");
        assert_eq!(
            round_trip(&CqlType::Timestamp, "1700000000000"),
            "\"2023-11-14 22:13:20.000Z\""
        );
        assert_eq!(
            round_trip(&CqlType::Time, "\"08:00:00\""),
            "\"08:00:00.000000000\""
        );
        let map = CqlType::Map(Box::new(CqlType::Int), Box::new(CqlType::Text));
        assert_eq!(
            round_trip(&map, r#"{"1": "a", "2": "b"}"#),
            r#"{"1": "a", "2": "b"}"#
        );
        assert_eq!(round_trip(&map, r#""{\"3\": \"c\"}""#), r#"{"3": "c"}"#);
    }

    #[test]
    fn wrong_kinds_are_errors() {
        let parse = |ty: &CqlType, json: &str| {
            Value::from_json(ty, &serde_json::from_str(json).expect("json"))
        };
        assert!(parse(&CqlType::Bigint, "1.5").is_err());
        assert!(parse(&CqlType::Boolean, "1").is_err());
        assert!(parse(&CqlType::Blob, "\"ff\"").is_err());
        assert!(parse(&CqlType::Date, "18000").is_err());
        assert!(parse(&CqlType::Smallint, "70000").is_err());
        let list = CqlType::List(Box::new(CqlType::Int));
        assert!(parse(&list, "[1, null]").is_err());
        let tuple = CqlType::Tuple(vec![CqlType::Int, CqlType::Text]);
        assert!(parse(&tuple, "[1]").is_err());
        assert!(parse(&tuple, r#"[1, "a", 3]"#).is_err());
        assert_eq!(parse(&CqlType::Int, "null").expect("null"), None);
    }

    #[test]
    fn java_parsing_rules() {
        let parse = |ty: &CqlType, json: &str| {
            Value::from_json(ty, &serde_json::from_str(json).expect("json"))
        };
        // Jackson's number classes decide what int and timestamp take.
        assert!(parse(&CqlType::Int, "3000000000").is_err());
        assert!(parse(&CqlType::Timestamp, "12").is_err());
        assert_eq!(
            parse(&CqlType::Timestamp, "3000000000").expect("a Long"),
            Some(Value::Timestamp(3_000_000_000))
        );
        // The empty string: the empty value, false, or an error, as `fromString` has it.
        assert_eq!(
            parse(&CqlType::Int, r#""""#).expect("empty"),
            Some(Value::Empty)
        );
        assert_eq!(
            parse(&CqlType::Boolean, r#""""#).expect("false"),
            Some(Value::Boolean(false))
        );
        assert!(parse(&CqlType::Smallint, r#""""#).is_err());
        // No surrounding spaces for integers and decimals; -0 is the integer 0.
        assert!(parse(&CqlType::Int, r#"" 12 ""#).is_err());
        assert!(parse(&CqlType::Decimal, r#"" 1 ""#).is_err());
        let Some(Value::Double(zero)) = parse(&CqlType::Double, "-0").expect("zero") else {
            panic!("a double")
        };
        assert_eq!(zero.to_bits(), 0.0f64.to_bits());
        let err = parse(&CqlType::Int, "1e3").expect_err("a double");
        assert_eq!(
            err.to_string(),
            "Expected an int value, but got a Double: 1000.0"
        );
    }

    #[test]
    fn json_keys_follow_identifier_rules() {
        assert_eq!(json_key_to_name("Cap"), "cap");
        assert_eq!(json_key_to_name("\"Cap\""), "Cap");
        assert_eq!(name_to_json_key("Cap"), r#""\"Cap\"""#);
        assert_eq!(name_to_json_key("k"), r#""k""#);
    }
}
