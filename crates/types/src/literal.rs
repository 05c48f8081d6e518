//! CQL constants (as the parser produces them) and their conversion to values of a type.
//!
//! Which constant kinds a type accepts follows Cassandra 5.0's `Constants.Literal
//! .testAssignment`:
//! - string: ascii, text, inet, date, time, timestamp (not uuid, not duration, not blob);
//! - integer: tinyint, smallint, int, bigint, counter, varint, decimal, float, double, date,
//!   time, timestamp, duration (the last is accepted by kind but no bare number is a duration);
//! - float (and `NaN`, `Infinity`): decimal, float, double (`NaN`/`Infinity` only float/double);
//! - boolean: boolean; uuid: uuid, timeuuid; hex: blob; duration: duration.
//!
//! Strings for timestamps are read in UTC when they carry no offset (Cassandra uses the server's
//! default time zone, which is UTC on every sane deployment).

use std::net::IpAddr;

use num_bigint::BigInt;

use crate::error::TypeError;
use crate::temporal::{
    days_from_civil, days_in_month, MILLIS_PER_DAY, NANOS_PER_DAY, NANOS_PER_SECOND,
};
use crate::value::DATE_EPOCH;
use crate::{CqlType, Value};

/// A constant as written in a CQL statement. Numbers keep their text (sign included) so that
/// the receiving type decides how to read them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Literal {
    String(String),
    Integer(String),
    Float(String),
    Boolean(bool),
    Uuid(String),
    /// Hex digits of a blob constant, without the `0x`.
    Hex(String),
    Duration(String),
    NaN,
    Infinity,
    NegInfinity,
}

fn invalid(message: impl Into<String>) -> TypeError {
    TypeError::InvalidLiteral(message.into())
}

fn integer<T: std::str::FromStr>(text: &str, type_name: &str) -> Result<T, TypeError> {
    text.parse()
        .map_err(|_| invalid(format!("Unable to make {type_name} from '{text}'")))
}

/// An address as Java's `InetAddress.getByName` reads a literal: IPv6, or IPv4 in one to four
/// decimal parts where the last part fills the remaining bytes (`12` is 0.0.0.12, `1.5` is
/// 1.0.0.5, `1.2.3` is 1.2.0.3; leading zeros are decimal). Host names are not looked up.
fn parse_inet(s: &str) -> Option<IpAddr> {
    if let Ok(a) = s.parse::<IpAddr>() {
        return Some(a);
    }
    let parts: Vec<&str> = s.split('.').collect();
    if parts.len() > 4 || s.len() > 15 {
        return None;
    }
    let mut value: u64 = 0;
    for (i, part) in parts.iter().enumerate() {
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let n: u64 = part.parse().ok()?;
        let last = i + 1 == parts.len();
        // The last part holds the bytes the earlier parts leave; each earlier part one byte.
        let bytes_left = 4 - i as u32;
        if (last && n >= 1u64 << (8 * bytes_left)) || (!last && n > 0xff) {
            return None;
        }
        value = if last {
            (value << (8 * bytes_left)) | n
        } else {
            (value << 8) | n
        };
    }
    Some(IpAddr::V4(std::net::Ipv4Addr::from(value as u32)))
}

impl Value {
    /// Converts a constant to a value of `ty` (frozen wrappers are ignored), with Cassandra's
    /// compatibility rules and range checks. Collections, tuples and UDTs have no constants and
    /// return [`TypeError::IncompatibleLiteral`].
    pub fn from_literal(ty: &CqlType, lit: &Literal) -> Result<Value, TypeError> {
        use CqlType as T;
        use Literal as L;
        let ty = ty.unfrozen();
        Ok(match (lit, ty) {
            (L::String(s), T::Ascii) => {
                if let Some(c) = s.chars().find(|c| !c.is_ascii()) {
                    return Err(invalid(format!(
                        "Invalid ASCII character in string literal: {c}"
                    )));
                }
                Value::Ascii(s.clone())
            }
            (L::String(s), T::Text) => Value::Text(s.clone()),
            (L::String(s), T::Inet) => Value::Inet(
                // Java's parser takes no surrounding spaces.
                parse_inet(s)
                    .ok_or_else(|| invalid(format!("Unable to make inet address from '{s}'")))?,
            ),
            (L::String(s), T::Date) => Value::Date(parse_date(s)?),
            (L::String(s), T::Time) => Value::Time(parse_time(s)?),
            (L::String(s), T::Timestamp) => Value::Timestamp(parse_timestamp(s)?),

            (L::Integer(s), T::Tinyint) => Value::Tinyint(integer(s, "tinyint")?),
            (L::Integer(s), T::Smallint) => Value::Smallint(integer(s, "smallint")?),
            (L::Integer(s), T::Int) => Value::Int(integer(s, "int")?),
            (L::Integer(s), T::Bigint) => Value::Bigint(integer(s, "long")?),
            (L::Integer(s), T::Counter) => Value::Counter(integer(s, "long")?),
            (L::Integer(s), T::Varint) => Value::Varint(integer::<BigInt>(s, "int")?),
            (L::Integer(s) | L::Float(s), T::Decimal) => {
                let (unscaled, scale) = parse_decimal(s)
                    .ok_or_else(|| invalid(format!("Unable to make BigDecimal from '{s}'")))?;
                Value::Decimal { unscaled, scale }
            }
            (L::Integer(s) | L::Float(s), T::Float) => Value::Float(
                s.parse()
                    .map_err(|_| invalid(format!("Unable to make float from '{s}'")))?,
            ),
            (L::Integer(s) | L::Float(s), T::Double) => Value::Double(
                s.parse()
                    .map_err(|_| invalid(format!("Unable to make double from '{s}'")))?,
            ),
            // Cassandra's `TimestampSerializer` words it with a colon.
            (L::Integer(s), T::Timestamp) => Value::Timestamp(
                s.parse::<i64>()
                    .map_err(|_| invalid(format!("Unable to make long (for date) from: '{s}'")))?,
            ),
            (L::Integer(s), T::Date) => Value::Date(date_from_integer(s)?),
            (L::Integer(s), T::Time) => Value::Time(time_from_integer(s)?),
            (L::Integer(s), T::Duration) => {
                return Err(invalid(format!("Unable to convert '{s}' to a duration")))
            }

            (L::NaN, T::Float) => Value::Float(f32::NAN),
            (L::NaN, T::Double) => Value::Double(f64::NAN),
            (L::Infinity, T::Float) => Value::Float(f32::INFINITY),
            (L::Infinity, T::Double) => Value::Double(f64::INFINITY),
            (L::NegInfinity, T::Float) => Value::Float(f32::NEG_INFINITY),
            (L::NegInfinity, T::Double) => Value::Double(f64::NEG_INFINITY),
            (L::NaN | L::Infinity | L::NegInfinity, T::Decimal) => {
                return Err(invalid("Unable to make BigDecimal from a non-finite value"))
            }

            (L::Boolean(b), T::Boolean) => Value::Boolean(*b),
            (L::Uuid(s), T::Uuid) => Value::Uuid(parse_uuid(s)?),
            (L::Uuid(s), T::Timeuuid) => {
                let u = parse_uuid(s)?;
                if u.get_version_num() != 1 {
                    return Err(invalid(format!(
                        "Invalid UUID version {} for timeuuid",
                        u.get_version_num()
                    )));
                }
                Value::Timeuuid(u)
            }
            (L::Hex(h), T::Blob) => Value::Blob(parse_hex(h)?),
            (L::Duration(s), T::Duration) => {
                let (months, days, nanoseconds) = parse_duration(s)?;
                Value::Duration {
                    months,
                    days,
                    nanoseconds,
                }
            }
            _ => return Err(TypeError::IncompatibleLiteral),
        })
    }
}

fn parse_uuid(s: &str) -> Result<uuid::Uuid, TypeError> {
    uuid::Uuid::try_parse(s).map_err(|_| invalid(format!("Unable to make UUID from '{s}'")))
}

fn parse_hex(h: &str) -> Result<Vec<u8>, TypeError> {
    let bad = || invalid(format!("cannot parse '0x{h}' as hex bytes"));
    if !h.len().is_multiple_of(2) {
        return Err(bad());
    }
    h.as_bytes()
        .chunks_exact(2)
        .map(|pair| {
            let digits = std::str::from_utf8(pair).map_err(|_| bad())?;
            u8::from_str_radix(digits, 16).map_err(|_| bad())
        })
        .collect()
}

/// `[-+]digits[.digits][(e|E)[-+]digits]` as (unscaled, scale), like `new BigDecimal(text)`.
pub(crate) fn parse_decimal(s: &str) -> Option<(BigInt, i32)> {
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], s[i + 1..].parse::<i64>().ok()?),
        None => (s, 0),
    };
    let (sign, digits) = match mantissa.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", mantissa.strip_prefix('+').unwrap_or(mantissa)),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if int.is_empty() && frac.is_empty()
        || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let unscaled: BigInt = format!("{sign}{int}{frac}").parse().ok()?;
    let scale = i32::try_from(frac.len() as i64 - exponent).ok()?;
    Some((unscaled, scale))
}

fn date_from_integer(s: &str) -> Result<u32, TypeError> {
    // An integer is the raw unsigned day count of the encoding (2^31 = epoch), as in Cassandra.
    s.parse::<u32>().map_err(|_| {
        invalid(format!(
            "Unable to make unsigned int (for date) from: '{s}'"
        ))
    })
}

fn time_from_integer(s: &str) -> Result<i64, TypeError> {
    s.parse::<i64>()
        .ok()
        .filter(|ns| (0..NANOS_PER_DAY).contains(ns))
        .ok_or_else(|| invalid(format!("Unable to make long (for time) from: '{s}'")))
}

fn is_integer_text(s: &str) -> bool {
    let digits = s.strip_prefix('-').unwrap_or(s);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// A fixed-width run of ASCII digits as a number.
fn digits(s: &str) -> Option<u32> {
    if s.is_empty() || s.len() > 9 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// `yyyy-mm-dd` (year optionally signed) as days since the epoch.
fn parse_civil_date(s: &str) -> Option<i64> {
    let (negative, body) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let mut parts = body.splitn(3, '-');
    let year = i64::from(digits(parts.next()?)?);
    let year = if negative { -year } else { year };
    let month = digits(parts.next()?)?;
    let day = digits(parts.next()?)?;
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    Some(days_from_civil(year, month, day))
}

/// A `date` string: `yyyy-mm-dd`, or an integer string (the raw encoded day count).
pub(crate) fn parse_date(s: &str) -> Result<u32, TypeError> {
    if is_integer_text(s) {
        return date_from_integer(s);
    }
    let days = parse_civil_date(s.trim())
        .ok_or_else(|| invalid(format!("Unable to coerce '{s}' to a formatted date (long)")))?;
    u32::try_from(days + i64::from(DATE_EPOCH))
        .map_err(|_| invalid(format!("Input date {s} is out of the supported range")))
}

/// `hh:mm:ss[.fffffffff]` as nanoseconds since midnight, or an integer string (nanoseconds).
pub(crate) fn parse_time(s: &str) -> Result<i64, TypeError> {
    if is_integer_text(s) {
        return time_from_integer(s);
    }
    let t = s.trim();
    let format_error = || invalid("Timestamp format must be hh:mm:ss[.fffffffff]");
    let (hms, fraction) = t.split_once('.').unwrap_or((t, ""));
    let mut parts = hms.split(':');
    let (Some(h), Some(m), Some(sec), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(format_error());
    };
    let (h, m, sec) = (
        digits(h).ok_or_else(format_error)?,
        digits(m).ok_or_else(format_error)?,
        digits(sec).ok_or_else(format_error)?,
    );
    if h > 23 {
        return Err(invalid("Hour out of bounds."));
    }
    if m > 59 {
        return Err(invalid("Minute out of bounds."));
    }
    if sec > 59 {
        return Err(invalid("Second out of bounds."));
    }
    let mut nanos = 0;
    if t.contains('.') {
        if fraction.len() > 9 {
            return Err(format_error());
        }
        nanos = i64::from(digits(fraction).ok_or_else(format_error)?)
            * 10i64.pow(9 - fraction.len() as u32);
    }
    Ok((i64::from(h) * 3600 + i64::from(m) * 60 + i64::from(sec)) * NANOS_PER_SECOND + nanos)
}

/// A zone offset in seconds: `Z`, `+hh`, `+hhmm`, `+hh:mm` (or `-`), or `UTC`/`GMT`.
fn parse_offset(s: &str) -> Option<i64> {
    let s = s.trim_start();
    if s.is_empty() || s.eq_ignore_ascii_case("z") || s == "UTC" || s == "GMT" {
        return Some(0);
    }
    let sign = match s.as_bytes()[0] {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let rest = s[1..].replace(':', "");
    let (h, m) = match rest.len() {
        2 => (digits(&rest)?, 0),
        4 => (digits(&rest[..2])?, digits(&rest[2..])?),
        _ => return None,
    };
    if h > 18 || m > 59 {
        return None;
    }
    Some(sign * (i64::from(h) * 3600 + i64::from(m) * 60))
}

/// A `timestamp` string as milliseconds since the epoch: `yyyy-mm-dd`, optionally followed by
/// `T` or a space and `hh:mm[:ss[.fff]]`, optionally followed by a zone (`Z`, `+hhmm`,
/// `+hh:mm`, `+hh`); or an integer string (milliseconds).
pub(crate) fn parse_timestamp(s: &str) -> Result<i64, TypeError> {
    if is_integer_text(s) {
        return s
            .parse()
            .map_err(|_| invalid(format!("Unable to make long (for date) from: '{s}'")));
    }
    parse_timestamp_text(s.trim())
        .ok_or_else(|| invalid(format!("Unable to coerce '{s}' to a formatted date (long)")))
}

fn parse_timestamp_text(s: &str) -> Option<i64> {
    // The date is the first 10+ characters up to 'T', ' ' or a zone sign after the day.
    let date_end = s
        .char_indices()
        .skip(1)
        .filter(|&(_, c)| c == 'T' || c == ' ' || c == 'Z' || c == '+')
        .map(|(i, _)| i)
        .next()
        .or_else(|| {
            // A negative offset directly after the date: the third '-' after the year.
            let body_start = usize::from(s.starts_with('-'));
            s[body_start..]
                .match_indices('-')
                .nth(2)
                .map(|(i, _)| i + body_start)
        })
        .unwrap_or(s.len());
    let days = parse_civil_date(&s[..date_end])?;
    let mut rest = &s[date_end..];
    let mut ms_of_day = 0i64;
    if let Some(time) = rest.strip_prefix('T').or_else(|| {
        rest.strip_prefix(' ')
            .filter(|r| r.as_bytes().first().is_some_and(u8::is_ascii_digit))
    }) {
        let end = time
            .find(|c: char| !(c.is_ascii_digit() || c == ':' || c == '.'))
            .unwrap_or(time.len());
        let (clock, zone) = time.split_at(end);
        let (hms, fraction) = clock.split_once('.').unwrap_or((clock, ""));
        let mut parts = hms.split(':');
        let h = digits(parts.next()?)?;
        let m = digits(parts.next()?)?;
        let sec = match parts.next() {
            Some(p) => digits(p)?,
            None if clock.contains('.') => return None,
            None => 0,
        };
        if parts.next().is_some() || h > 23 || m > 59 || sec > 59 {
            return None;
        }
        let mut millis = 0;
        if clock.contains('.') {
            // Cassandra's pattern reads milliseconds; extra digits (sub-ms) are dropped.
            let f = fraction.get(..fraction.len().min(3))?;
            if fraction.is_empty() || fraction.len() > 9 {
                return None;
            }
            digits(fraction)?;
            millis = i64::from(digits(f)?) * 10i64.pow(3 - f.len() as u32);
        }
        ms_of_day = (i64::from(h) * 3600 + i64::from(m) * 60 + i64::from(sec)) * 1000 + millis;
        rest = zone;
    }
    let offset_seconds = parse_offset(rest)?;
    days.checked_mul(MILLIS_PER_DAY)?
        .checked_add(ms_of_day)?
        .checked_sub(offset_seconds * 1000)
}

const NANOS_PER_MINUTE: i64 = 60 * NANOS_PER_SECOND;
const NANOS_PER_HOUR: i64 = 60 * NANOS_PER_MINUTE;

/// Accumulates a duration with Cassandra's overflow checks.
#[derive(Default)]
struct DurationBuilder {
    months: i64,
    days: i64,
    nanos: i64,
    /// The last unit added, by its rank in Cassandra's order (`UNITS`), 0 before any.
    unit_rank: usize,
}

/// The units of a duration in the order Cassandra requires them, each at most once
/// (`Duration.Builder.validateOrder`), with the names its messages use.
const UNITS: [(&str, &str); 10] = [
    ("y", "years"),
    ("mo", "months"),
    ("w", "weeks"),
    ("d", "days"),
    ("h", "hours"),
    ("m", "minutes"),
    ("s", "seconds"),
    ("ms", "milliseconds"),
    ("us", "microseconds"),
    ("ns", "nanoseconds"),
];

impl DurationBuilder {
    /// Adds `amount` of `unit`, refused in Cassandra's words if the unit comes again or out of
    /// order, or if a total leaves its range.
    fn add(&mut self, amount: i64, unit: &str) -> Result<(), TypeError> {
        let unit = if unit == "µs" { "us" } else { unit };
        let rank = UNITS
            .iter()
            .position(|(u, _)| *u == unit)
            .map(|i| i + 1)
            .ok_or_else(|| invalid(format!("Unknown duration symbol '{unit}'")))?;
        let name = |rank: usize| UNITS[rank - 1].1;
        if rank == self.unit_rank {
            return Err(invalid(format!(
                "Invalid duration. The {} are specified multiple times",
                name(rank)
            )));
        }
        if rank < self.unit_rank {
            return Err(invalid(format!(
                "Invalid duration. The {} should be after {}",
                name(self.unit_rank),
                name(rank)
            )));
        }
        self.unit_rank = rank;
        // Cassandra's `validate`: a total past its range, worded with Integer.MAX_VALUE
        // whatever the total (its message does so for nanoseconds too).
        let too_many = |total: &str| {
            invalid(format!(
                "Invalid duration. The total number of {total} must be less or equal to {}",
                i32::MAX
            ))
        };
        let within = |amount: i64, room: i64, per: i64| amount <= room / per;
        match unit {
            "y" | "mo" => {
                let per = if unit == "y" { 12 } else { 1 };
                if !within(amount, i64::from(i32::MAX) - self.months, per) {
                    return Err(too_many("months"));
                }
                self.months += amount * per;
            }
            "w" | "d" => {
                let per = if unit == "w" { 7 } else { 1 };
                if !within(amount, i64::from(i32::MAX) - self.days, per) {
                    return Err(too_many("days"));
                }
                self.days += amount * per;
            }
            _ => {
                let per = match unit {
                    "h" => NANOS_PER_HOUR,
                    "m" => NANOS_PER_MINUTE,
                    "s" => NANOS_PER_SECOND,
                    "ms" => 1_000_000,
                    "us" => 1_000,
                    _ => 1,
                };
                if !within(amount, i64::MAX - self.nanos, per) {
                    return Err(too_many("nanoseconds"));
                }
                self.nanos += amount * per;
            }
        }
        Ok(())
    }

    fn build(self, negative: bool) -> (i32, i32, i64) {
        // Both fields were checked against i32::MAX as they grew.
        let months = i32::try_from(self.months).unwrap_or(i32::MAX);
        let days = i32::try_from(self.days).unwrap_or(i32::MAX);
        if negative {
            (-months, -days, -self.nanos)
        } else {
            (months, days, self.nanos)
        }
    }
}

/// A duration constant as (months, days, nanoseconds), in any of Cassandra's three forms:
/// `1y2mo3w4d5h6m7s8ms9us10ns` (units case-insensitive, `µs` = `us`), ISO 8601
/// `P[nY][nM][nW][nD][T[nH][nM][nS]]`, or the alternative `P[YYYY]-[MM]-[DD]T[hh]:[mm]:[ss]`;
/// each optionally preceded by `-`.
pub(crate) fn parse_duration(s: &str) -> Result<(i32, i32, i64), TypeError> {
    let bad = || invalid(format!("Unable to convert '{s}' to a duration"));
    let (negative, body) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let mut b = DurationBuilder::default();
    if let Some(iso) = body.strip_prefix('P') {
        if iso.contains('-') || iso.contains(':') {
            parse_iso_alternative(iso, &mut b).ok_or_else(bad)?;
        } else {
            parse_iso(iso, &mut b).ok_or_else(bad)?;
        }
    } else {
        let lower = body.to_lowercase();
        let mut rest = lower.as_str();
        if rest.is_empty() {
            return Err(bad());
        }
        while !rest.is_empty() {
            let n_end = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
            let amount: i64 = rest[..n_end].parse().map_err(|_| bad())?;
            rest = &rest[n_end..];
            let unit = ["mo", "ms", "us", "µs", "ns", "y", "w", "d", "h", "m", "s"]
                .into_iter()
                .find(|u| rest.starts_with(u))
                .ok_or_else(bad)?;
            b.add(amount, unit)?;
            rest = &rest[unit.len()..];
        }
    }
    Ok(b.build(negative))
}

fn parse_iso(iso: &str, b: &mut DurationBuilder) -> Option<()> {
    let (date, time) = match iso.split_once('T') {
        Some((d, t)) if !t.is_empty() => (d, Some(t)),
        Some(_) => return None,
        None => (iso, None),
    };
    if date.is_empty() && time.is_none() {
        return None;
    }
    let mut fields = |text: &str, units: &[(char, &str)]| -> Option<()> {
        let mut rest = text;
        let mut next_unit = 0;
        while !rest.is_empty() {
            let n_end = rest.find(|c: char| !c.is_ascii_digit())?;
            let amount: i64 = rest[..n_end].parse().ok()?;
            let designator = rest[n_end..].chars().next()?;
            // Designators must appear in order, each at most once.
            let offset = units[next_unit..]
                .iter()
                .position(|(c, _)| *c == designator)?;
            b.add(amount, units[next_unit + offset].1).ok()?;
            next_unit += offset + 1;
            rest = &rest[n_end + designator.len_utf8()..];
        }
        Some(())
    };
    fields(date, &[('Y', "y"), ('M', "mo"), ('W', "w"), ('D', "d")])?;
    if let Some(time) = time {
        fields(time, &[('H', "h"), ('M', "m"), ('S', "s")])?;
    }
    Some(())
}

fn parse_iso_alternative(iso: &str, b: &mut DurationBuilder) -> Option<()> {
    let (date, time) = iso.split_once('T')?;
    let mut d = date.split('-');
    let (years, months, days) = (d.next()?, d.next()?, d.next()?);
    let mut t = time.split(':');
    let (hours, minutes, seconds) = (t.next()?, t.next()?, t.next()?);
    if d.next().is_some() || t.next().is_some() || years.len() != 4 {
        return None;
    }
    for (text, unit) in [
        (years, "y"),
        (months, "mo"),
        (days, "d"),
        (hours, "h"),
        (minutes, "m"),
        (seconds, "s"),
    ] {
        if text.len() != 2 && unit != "y" {
            return None;
        }
        b.add(i64::from(digits(text)?), unit).ok()?;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(ty: CqlType, l: Literal) -> Result<Value, TypeError> {
        Value::from_literal(&ty, &l)
    }
    fn s(text: &str) -> Literal {
        Literal::String(text.to_string())
    }
    fn i(text: &str) -> Literal {
        Literal::Integer(text.to_string())
    }

    #[test]
    fn kinds_follow_cassandra() {
        assert_eq!(lit(CqlType::Int, i("-7")).unwrap(), Value::Int(-7));
        assert_eq!(
            lit(CqlType::Int, s("7")),
            Err(TypeError::IncompatibleLiteral)
        );
        assert_eq!(
            lit(CqlType::Uuid, s("8d8d3f7e-9c9a-11ee-8c90-0242ac120002")),
            Err(TypeError::IncompatibleLiteral)
        );
        assert_eq!(
            lit(CqlType::Blob, s("x")),
            Err(TypeError::IncompatibleLiteral)
        );
        assert_eq!(
            lit(CqlType::Duration, s("1h")),
            Err(TypeError::IncompatibleLiteral)
        );
        assert_eq!(
            lit(CqlType::Text, i("1")),
            Err(TypeError::IncompatibleLiteral)
        );
        assert_eq!(
            lit(CqlType::Int, Literal::Float("1.5".into())),
            Err(TypeError::IncompatibleLiteral)
        );
        assert_eq!(lit(CqlType::Double, i("2")).unwrap(), Value::Double(2.0));
        assert!(
            matches!(lit(CqlType::Float, Literal::NaN).unwrap(), Value::Float(f) if f.is_nan())
        );
        assert!(lit(CqlType::Decimal, Literal::NaN).is_err());
        assert_eq!(
            lit(CqlType::Blob, Literal::Hex("cafe".into())).unwrap(),
            Value::Blob(vec![0xca, 0xfe])
        );
        assert!(lit(CqlType::Blob, Literal::Hex("caf".into())).is_err());
        assert!(lit(CqlType::List(Box::new(CqlType::Int)), i("1")).is_err());
    }

    #[test]
    fn integer_ranges() {
        assert_eq!(
            lit(CqlType::Tinyint, i("-128")).unwrap(),
            Value::Tinyint(-128)
        );
        assert_eq!(
            lit(CqlType::Tinyint, i("128")).unwrap_err().to_string(),
            "Unable to make tinyint from '128'"
        );
        assert!(lit(CqlType::Int, i("2147483648")).is_err());
        assert!(lit(CqlType::Bigint, i("9223372036854775808")).is_err());
        assert_eq!(
            lit(CqlType::Varint, i("-123456789012345678901234567890")).unwrap(),
            Value::Varint("-123456789012345678901234567890".parse().unwrap())
        );
        assert_eq!(
            lit(CqlType::Decimal, Literal::Float("-1.25E-3".into())).unwrap(),
            Value::Decimal {
                unscaled: BigInt::from(-125),
                scale: 5
            }
        );
        assert_eq!(
            lit(CqlType::Decimal, i("100")).unwrap(),
            Value::Decimal {
                unscaled: BigInt::from(100),
                scale: 0
            }
        );
    }

    #[test]
    fn timestamps() {
        let ts = |t: &str| parse_timestamp(t).unwrap();
        let base = 1_296_705_900_000; // 2011-02-03T04:05:00Z
        assert_eq!(ts("2011-02-03 04:05"), base);
        assert_eq!(ts("2011-02-03 04:05:00"), base);
        assert_eq!(ts("2011-02-03T04:05:00"), base);
        assert_eq!(ts("2011-02-03T04:05:00.000+0000"), base);
        assert_eq!(ts("2011-02-03T04:05:00.000Z"), base);
        assert_eq!(ts("2011-02-03 04:05:00+0000"), base);
        assert_eq!(ts("2011-02-03 04:05:00.5"), base + 500);
        assert_eq!(ts("2011-02-03T05:05:00+01:00"), base);
        assert_eq!(ts("2011-02-03T03:05:00-0100"), base);
        assert_eq!(ts("2011-02-03"), base - 4 * 3_600_000 - 5 * 60_000);
        assert_eq!(ts("2011-02-03+0000"), ts("2011-02-03"));
        assert_eq!(ts("2011-02-03-0100"), ts("2011-02-03") + 3_600_000);
        assert_eq!(ts("-5"), -5);
        assert_eq!(ts("1969-12-31T23:59:59.999Z"), -1);
        for bad in [
            "2011-02-30",
            "2011-13-01",
            "2011-02-03 25:00",
            "nope",
            "",
            "2011-02-03T04:05:00.000+99",
        ] {
            assert!(parse_timestamp(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn dates_and_times() {
        assert_eq!(parse_date("2011-02-03").unwrap(), DATE_EPOCH + 15_008);
        assert_eq!(parse_date("1970-01-01").unwrap(), DATE_EPOCH);
        assert!(parse_date("-0001-01-01").unwrap() < DATE_EPOCH);
        assert_eq!(parse_date("2147483648").unwrap(), DATE_EPOCH);
        assert!(parse_date("-1").is_err());
        assert!(parse_date("2011-02-29").is_err());
        assert_eq!(
            parse_time("04:05:06.123456789").unwrap(),
            14_706_123_456_789
        );
        assert_eq!(parse_time("04:05:06.1").unwrap(), 14_706_100_000_000);
        assert_eq!(parse_time("00:00:00").unwrap(), 0);
        assert_eq!(parse_time("123").unwrap(), 123);
        assert_eq!(
            parse_time("24:00:00").unwrap_err().to_string(),
            "Hour out of bounds."
        );
        assert!(parse_time("86400000000000").is_err());
        assert!(parse_time("1:2").is_err());
    }

    #[test]
    fn durations() {
        let d = |t: &str| parse_duration(t).unwrap();
        assert_eq!(
            d("1y2mo3w4d5h6m7s8ms9us10ns"),
            (
                14,
                25,
                5 * NANOS_PER_HOUR + 6 * NANOS_PER_MINUTE + 7 * NANOS_PER_SECOND + 8_009_010
            )
        );
        assert_eq!(d("1h30m"), (0, 0, 90 * NANOS_PER_MINUTE));
        assert_eq!(d("-2d"), (0, -2, 0));
        assert_eq!(d("3µs"), (0, 0, 3000));
        // Each unit once, in Cassandra's order, totals in range, in its words.
        let refused = |t: &str| parse_duration(t).unwrap_err().to_string();
        assert_eq!(
            refused("1h1h"),
            "Invalid duration. The hours are specified multiple times"
        );
        assert_eq!(
            refused("1us1µs"),
            "Invalid duration. The microseconds are specified multiple times"
        );
        assert_eq!(
            refused("1m1h"),
            "Invalid duration. The minutes should be after hours"
        );
        assert_eq!(
            refused("1d1w"),
            "Invalid duration. The days should be after weeks"
        );
        assert_eq!(
            refused("2147483648mo"),
            "Invalid duration. The total number of months must be less or equal to 2147483647"
        );
        assert_eq!(
            refused("2562048h"),
            "Invalid duration. The total number of nanoseconds must be less or equal to 2147483647"
        );
        assert_eq!(d("1w1d"), (0, 8, 0));
        assert_eq!(d("1MO"), (1, 0, 0));
        assert_eq!(d("P1DT2H"), (0, 1, 2 * NANOS_PER_HOUR));
        assert_eq!(
            d("P1Y2M3DT4H5M6S"),
            (
                14,
                3,
                4 * NANOS_PER_HOUR + 5 * NANOS_PER_MINUTE + 6 * NANOS_PER_SECOND
            )
        );
        assert_eq!(d("P2W"), (0, 14, 0));
        assert_eq!(d("-PT1M"), (0, 0, -NANOS_PER_MINUTE));
        assert_eq!(
            d("P0001-02-03T04:05:06"),
            (
                14,
                3,
                4 * NANOS_PER_HOUR + 5 * NANOS_PER_MINUTE + 6 * NANOS_PER_SECOND
            )
        );
        for bad in [
            "",
            "1",
            "1x",
            "P",
            "PT",
            "P1H",
            "P1D1Y",
            "3000000000d",
            "99999999999999999999h",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        // The printer's output reads back.
        let text = crate::format::duration_text(14, 25, 5 * NANOS_PER_HOUR + 1);
        assert_eq!(d(&text), (14, 25, 5 * NANOS_PER_HOUR + 1));
    }

    #[test]
    fn other_strings() {
        assert_eq!(
            lit(CqlType::Inet, s("::1")).unwrap(),
            Value::Inet("::1".parse().unwrap())
        );
        assert!(lit(CqlType::Inet, s("example")).is_err());
        for (text, address) in [
            ("12", "0.0.0.12"),
            ("1.5", "1.0.0.5"),
            ("1.2.3", "1.2.0.3"),
            ("01.2.3.4", "1.2.3.4"),
            ("1.65536", "1.1.0.0"),
            ("4294967295", "255.255.255.255"),
        ] {
            assert_eq!(
                lit(CqlType::Inet, s(text)).unwrap(),
                Value::Inet(address.parse().unwrap()),
                "{text}"
            );
        }
        for bad in ["4294967296", "1.256.0.0", "1..2", "1.2.3.4.5", ""] {
            assert!(lit(CqlType::Inet, s(bad)).is_err(), "{bad}");
        }
        assert!(lit(CqlType::Ascii, s("é")).is_err());
        let v1 = "8d8d3f7e-9c9a-11ee-8c90-0242ac120002";
        assert!(lit(CqlType::Timeuuid, Literal::Uuid(v1.into())).is_ok());
        assert!(lit(
            CqlType::Timeuuid,
            Literal::Uuid("8d8d3f7e-9c9a-41ee-8c90-0242ac120002".into())
        )
        .is_err());
    }
}
