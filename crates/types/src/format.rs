//! CQL literal text for values: what DESCRIBE, error messages and tools print, and text that
//! the CQL parser reads back as the same value.

use std::fmt::Write;

use num_bigint::{BigInt, Sign};

use crate::hex::hex;
use crate::temporal::{civil_from_days, MILLIS_PER_DAY, NANOS_PER_DAY, NANOS_PER_SECOND};
use crate::value::DATE_EPOCH;
use crate::{CqlType, Value};

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// A field name as CQL writes it: bare if it is a lowercase identifier, else double-quoted.
fn identifier(name: &str) -> String {
    let bare = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if bare {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

fn float_text(v: f64, shortest: String) -> String {
    if v.is_nan() {
        "NaN".to_string()
    } else if v.is_infinite() {
        if v > 0.0 { "Infinity" } else { "-Infinity" }.to_string()
    } else {
        shortest
    }
}

/// `BigDecimal`-like plain text: the unscaled digits with a decimal point `scale` digits from
/// the right, or `<unscaled>E<exponent>` for a negative scale.
pub(crate) fn decimal_text(unscaled: &BigInt, scale: i32) -> String {
    let digits = unscaled.magnitude().to_string();
    let sign = if unscaled.sign() == Sign::Minus {
        "-"
    } else {
        ""
    };
    if scale <= 0 {
        return if scale == 0 {
            format!("{sign}{digits}")
        } else {
            format!("{sign}{digits}E{}", -i64::from(scale))
        };
    }
    let scale = scale as usize;
    if scale > 1000 {
        // Avoid printing thousands of zeros; the exponent form is equally valid CQL.
        return format!("{sign}{digits}E-{scale}");
    }
    if digits.len() > scale {
        let (int, frac) = digits.split_at(digits.len() - scale);
        format!("{sign}{int}.{frac}")
    } else {
        format!("{sign}0.{}{digits}", "0".repeat(scale - digits.len()))
    }
}

/// `'yyyy-mm-ddThh:mm:ss.fffZ'`, or the bare millisecond count outside years 0..=9999 (which
/// the timestamp literal syntax cannot express but an integer literal can).
pub(crate) fn timestamp_text(ms: i64) -> String {
    let days = ms.div_euclid(MILLIS_PER_DAY);
    let ms_of_day = ms.rem_euclid(MILLIS_PER_DAY);
    let (y, m, d) = civil_from_days(days);
    if !(0..=9999).contains(&y) {
        return ms.to_string();
    }
    let (h, rest) = (ms_of_day / 3_600_000, ms_of_day % 3_600_000);
    let (min, rest) = (rest / 60_000, rest % 60_000);
    format!(
        "'{y:04}-{m:02}-{d:02}T{h:02}:{min:02}:{:02}.{:03}Z'",
        rest / 1000,
        rest % 1000
    )
}

fn date_text(days: u32) -> String {
    let (y, m, d) = civil_from_days(i64::from(days) - i64::from(DATE_EPOCH));
    if !(0..=9999).contains(&y) {
        return days.to_string();
    }
    format!("'{y:04}-{m:02}-{d:02}'")
}

fn time_text(ns: i64) -> String {
    if !(0..NANOS_PER_DAY).contains(&ns) {
        return ns.to_string();
    }
    let secs = ns / NANOS_PER_SECOND;
    format!(
        "'{:02}:{:02}:{:02}.{:09}'",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        ns % NANOS_PER_SECOND
    )
}

/// Cassandra's `Duration.toString`: `-`? then y, mo, d, h, m, s, ms, us, ns, each only if
/// non-zero; a zero duration prints as `0s` so that the text is still a duration literal.
pub(crate) fn duration_text(months: i32, days: i32, nanoseconds: i64) -> String {
    let mut s = String::new();
    if months < 0 || days < 0 || nanoseconds < 0 {
        s.push('-');
    }
    let mut part = |value: u64, divisor: u64, unit: &str| -> u64 {
        if value == 0 || value < divisor {
            return value;
        }
        let _ = write!(s, "{}{unit}", value / divisor);
        value % divisor
    };
    let rest = part(u64::from(months.unsigned_abs()), 12, "y");
    part(rest, 1, "mo");
    part(u64::from(days.unsigned_abs()), 1, "d");
    let mut rest = nanoseconds.unsigned_abs();
    for (divisor, unit) in [
        (3_600_000_000_000, "h"),
        (60_000_000_000, "m"),
        (1_000_000_000, "s"),
        (1_000_000, "ms"),
        (1_000, "us"),
        (1, "ns"),
    ] {
        rest = part(rest, divisor, unit);
    }
    if s.is_empty() || s == "-" {
        return "0s".to_string();
    }
    s
}

impl Value {
    /// The value as a CQL literal. A UDT printed without its type has no field names, so it
    /// prints as a tuple; use [`Value::to_cql_literal_typed`] for `{field: value}`. An empty
    /// value (no CQL literal exists) prints as the empty blob `0x`.
    pub fn to_cql_literal(&self) -> String {
        self.literal(None)
    }

    /// Like [`Value::to_cql_literal`], using `ty` for UDT field names and to print empty values
    /// as `blobAs<type>(0x)`, a term Cassandra evaluates back to the empty value.
    pub fn to_cql_literal_typed(&self, ty: &CqlType) -> String {
        self.literal(Some(ty.unfrozen()))
    }

    fn literal(&self, ty: Option<&CqlType>) -> String {
        let join = |items: &mut dyn Iterator<Item = String>| items.collect::<Vec<_>>().join(", ");
        let elem = |i: usize| -> Option<&CqlType> {
            match ty? {
                CqlType::List(e) | CqlType::Set(e) | CqlType::Vector(e, _) => Some(e.unfrozen()),
                CqlType::Map(k, v) => Some(if i == 0 { k.unfrozen() } else { v.unfrozen() }),
                _ => None,
            }
        };
        match self {
            Value::Empty => match ty.and_then(CqlType::native_name) {
                Some(name) => format!("blobAs{name}(0x)"),
                None => "0x".to_string(),
            },
            Value::Boolean(b) => b.to_string(),
            Value::Tinyint(v) => v.to_string(),
            Value::Smallint(v) => v.to_string(),
            Value::Int(v) => v.to_string(),
            Value::Bigint(v) | Value::Counter(v) => v.to_string(),
            Value::Float(v) => float_text(f64::from(*v), format!("{v:?}")),
            Value::Double(v) => float_text(*v, format!("{v:?}")),
            Value::Varint(v) => v.to_string(),
            Value::Decimal { unscaled, scale } => decimal_text(unscaled, *scale),
            Value::Ascii(s) | Value::Text(s) => quote(s),
            Value::Blob(b) => hex(b),
            Value::Uuid(u) | Value::Timeuuid(u) => u.hyphenated().to_string(),
            Value::Timestamp(ms) => timestamp_text(*ms),
            Value::Date(d) => date_text(*d),
            Value::Time(ns) => time_text(*ns),
            Value::Inet(a) => quote(&a.to_string()),
            Value::Duration {
                months,
                days,
                nanoseconds,
            } => duration_text(*months, *days, *nanoseconds),
            Value::List(items) | Value::Vector(items) => {
                format!("[{}]", join(&mut items.iter().map(|v| v.literal(elem(0)))))
            }
            Value::Set(items) => format!(
                "{{{}}}",
                join(&mut items.iter().map(|v| v.literal(elem(0))))
            ),
            Value::Map(entries) => format!(
                "{{{}}}",
                join(&mut entries.iter().map(|(k, v)| format!(
                    "{}: {}",
                    k.literal(elem(0)),
                    v.literal(elem(1))
                )))
            ),
            Value::Tuple(fields) => {
                let types = match ty {
                    Some(CqlType::Tuple(t)) => Some(t),
                    _ => None,
                };
                let field = |(i, f): (usize, &Option<Value>)| match f {
                    Some(v) => v.literal(types.and_then(|t| t.get(i)).map(CqlType::unfrozen)),
                    None => "null".to_string(),
                };
                format!("({})", join(&mut fields.iter().enumerate().map(field)))
            }
            Value::Udt(fields) => match ty {
                Some(CqlType::Udt(udt)) => format!(
                    "{{{}}}",
                    join(&mut fields.iter().zip(&udt.fields).map(|(f, (name, fty))| {
                        let v = match f {
                            Some(v) => v.literal(Some(fty.unfrozen())),
                            None => "null".to_string(),
                        };
                        format!("{}: {v}", identifier(name))
                    }))
                ),
                _ => Value::Tuple(fields.clone()).literal(None),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::UdtType;

    #[test]
    fn literals() {
        assert_eq!(Value::Text("it's".into()).to_cql_literal(), "'it''s'");
        assert_eq!(Value::Blob(vec![0xca, 0xfe]).to_cql_literal(), "0xcafe");
        assert_eq!(Value::Float(f32::NAN).to_cql_literal(), "NaN");
        assert_eq!(
            Value::Double(f64::NEG_INFINITY).to_cql_literal(),
            "-Infinity"
        );
        assert_eq!(Value::Double(1.5).to_cql_literal(), "1.5");
        assert_eq!(
            Value::Timestamp(1_296_705_900_000).to_cql_literal(),
            "'2011-02-03T04:05:00.000Z'"
        );
        assert_eq!(
            Value::Timestamp(-1).to_cql_literal(),
            "'1969-12-31T23:59:59.999Z'"
        );
        assert_eq!(
            Value::Date(DATE_EPOCH + 15_008).to_cql_literal(),
            "'2011-02-03'"
        );
        assert_eq!(Value::Date(0).to_cql_literal(), "0");
        assert_eq!(
            Value::Time(14_706_123_456_789).to_cql_literal(),
            "'04:05:06.123456789'"
        );
        assert_eq!(
            Value::Inet("10.0.0.1".parse().unwrap()).to_cql_literal(),
            "'10.0.0.1'"
        );
        let d = |m, d, n| {
            Value::Duration {
                months: m,
                days: d,
                nanoseconds: n,
            }
            .to_cql_literal()
        };
        assert_eq!(d(14, 2, 3 * 3_600_000_000_000 + 1), "1y2mo2d3h1ns");
        assert_eq!(d(0, -1, 0), "-1d");
        assert_eq!(d(0, 0, 0), "0s");
        let dec = |u: i64, s| {
            Value::Decimal {
                unscaled: BigInt::from(u),
                scale: s,
            }
            .to_cql_literal()
        };
        assert_eq!(dec(-12345, 2), "-123.45");
        assert_eq!(dec(5, 3), "0.005");
        assert_eq!(dec(5, -2), "5E2");
        let list = Value::List(vec![Value::Int(1), Value::Int(2)]);
        assert_eq!(list.to_cql_literal(), "[1, 2]");
        let map = Value::Map(vec![(
            Value::Text("a".into()),
            Value::Set(vec![Value::Int(1)]),
        )]);
        assert_eq!(map.to_cql_literal(), "{'a': {1}}");
        assert_eq!(
            Value::Tuple(vec![Some(Value::Int(1)), None]).to_cql_literal(),
            "(1, null)"
        );
        let udt = CqlType::Udt(UdtType {
            keyspace: "ks".into(),
            name: "u".into(),
            fields: vec![("a".into(), CqlType::Int), ("B".into(), CqlType::Text)],
        });
        let v = Value::Udt(vec![Some(Value::Int(1)), None]);
        assert_eq!(v.to_cql_literal_typed(&udt), "{a: 1, \"B\": null}");
        assert_eq!(
            Value::Empty.to_cql_literal_typed(&CqlType::Int),
            "blobAsint(0x)"
        );
    }
}
