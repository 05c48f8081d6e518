//! Arithmetic in selections, as Cassandra 5.0's `OperationFcts` computes it: `+ - * / %` between
//! any two numeric types (the result type is the wider of the two, floating point if either is),
//! `+`/`-` of a duration to a timestamp or date, `+` of two strings, and unary `-` of numbers.
//!
//! Integer results wrap like Java's fixed-size arithmetic; integer division by zero is an error;
//! floating-point results follow IEEE 754; decimal results use `java.math.BigDecimal`'s rules
//! (exact sums and products, quotients to at least 32 decimal places, rounded half-up, with
//! trailing zeros stripped).

use cql_syntax::ast::BinaryOp;
use num_bigint::{BigInt, Sign};
use types::temporal::{civil_from_days, days_from_civil, days_in_month, MILLIS_PER_DAY};
use types::{CqlType, Value};

use super::numbers::{self, Decimal};
use crate::QueryError;

/// Decimal quotients keep at least this many decimal places (`DecimalType.MIN_SCALE`), and the
/// quotient this many significant digits (`MIN_SIGNIFICANT_DIGITS`).
const DECIMAL_DIVISION_MIN_SCALE: i64 = 32;
/// The largest scale a decimal quotient gets (`DecimalType.MAX_SCALE`).
const DECIMAL_DIVISION_MAX_SCALE: i64 = 1000;

/// An arithmetic operation between two operand types, and its result type.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Operation {
    pub(super) op: BinaryOp,
    pub(super) left: CqlType,
    pub(super) right: CqlType,
    pub(super) result: CqlType,
}

pub(crate) fn symbol(op: BinaryOp) -> char {
    match op {
        BinaryOp::Add => '+',
        BinaryOp::Sub => '-',
        BinaryOp::Mul => '*',
        BinaryOp::Div => '/',
        BinaryOp::Mod => '%',
    }
}

/// Cassandra's name of the function behind an operator.
pub(super) fn function_name(op: BinaryOp) -> &'static str {
    match op {
        BinaryOp::Add => "_add",
        BinaryOp::Sub => "_substract",
        BinaryOp::Mul => "_multiply",
        BinaryOp::Div => "_divide",
        BinaryOp::Mod => "_modulo",
    }
}

pub(super) const NUMERIC: [CqlType; 9] = [
    CqlType::Tinyint,
    CqlType::Smallint,
    CqlType::Int,
    CqlType::Bigint,
    CqlType::Float,
    CqlType::Double,
    CqlType::Decimal,
    CqlType::Varint,
    CqlType::Counter,
];

/// Bytes of a fixed-size number (`OperationFcts.size`); `None` for decimal and varint.
fn size(t: &CqlType) -> Option<u32> {
    match t {
        CqlType::Tinyint => Some(1),
        CqlType::Smallint => Some(2),
        CqlType::Int | CqlType::Float => Some(4),
        CqlType::Bigint | CqlType::Double | CqlType::Counter => Some(8),
        _ => None,
    }
}

fn is_floating_point(t: &CqlType) -> bool {
    matches!(t, CqlType::Float | CqlType::Double | CqlType::Decimal)
}

/// `OperationFcts.returnType`: the wider size, floating point if either operand is.
pub(super) fn result_type(left: &CqlType, right: &CqlType) -> CqlType {
    let size = match (size(left), size(right)) {
        (Some(a), Some(b)) => Some(a.max(b)),
        _ => None,
    };
    let floating = is_floating_point(left) || is_floating_point(right);
    match (floating, size) {
        (true, Some(4)) => CqlType::Float,
        (true, Some(8)) => CqlType::Double,
        (true, _) => CqlType::Decimal,
        (false, Some(1)) => CqlType::Tinyint,
        (false, Some(2)) => CqlType::Smallint,
        (false, Some(4)) => CqlType::Int,
        (false, Some(8)) => CqlType::Bigint,
        (false, _) => CqlType::Varint,
    }
}

/// What a failed operation says, as Cassandra's `OperationExecutionException` does: a
/// FUNCTION_FAILURE naming the operator's function (`system._divide(int, int)`).
fn failed(op: &Operation, why: &str) -> QueryError {
    QueryError::function_failure(
        function_name(op.op),
        &[op.left.clone(), op.right.clone()],
        format!(
            "the operation '{} {} {}' failed: {why}",
            op.left,
            symbol(op.op),
            op.right
        ),
    )
}

fn encode(v: Value) -> Vec<u8> {
    let mut out = Vec::new();
    v.encode(&mut out);
    out
}

impl Operation {
    /// The operation on two non-null values; an empty value gives null, as in Cassandra.
    pub fn execute(&self, left: &[u8], right: &[u8]) -> Result<Option<Vec<u8>>, QueryError> {
        if left.is_empty() || right.is_empty() {
            return Ok(None);
        }
        let l = Value::decode(&self.left, left)?;
        let r = Value::decode(&self.right, right)?;
        let value = match &self.result {
            CqlType::Text | CqlType::Ascii => {
                let mut s = left.to_vec();
                s.extend_from_slice(right);
                return Ok(Some(s));
            }
            CqlType::Timestamp | CqlType::Date => self.temporal(&l, &r)?,
            CqlType::Tinyint
            | CqlType::Smallint
            | CqlType::Int
            | CqlType::Bigint
            | CqlType::Counter => {
                let (a, b) = (integer(&l), integer(&r));
                let v = match self.op {
                    BinaryOp::Add => a.wrapping_add(b),
                    BinaryOp::Sub => a.wrapping_sub(b),
                    BinaryOp::Mul => a.wrapping_mul(b),
                    BinaryOp::Div | BinaryOp::Mod if b == 0 => {
                        return Err(failed(self, "/ by zero"))
                    }
                    BinaryOp::Div => a.wrapping_div(b),
                    BinaryOp::Mod => a.wrapping_rem(b),
                };
                match self.result {
                    CqlType::Tinyint => Value::Tinyint(v as i8),
                    CqlType::Smallint => Value::Smallint(v as i16),
                    CqlType::Int => Value::Int(v as i32),
                    CqlType::Counter => Value::Counter(v),
                    _ => Value::Bigint(v),
                }
            }
            CqlType::Varint => {
                let (a, b) = (big_integer(&l), big_integer(&r));
                Value::Varint(match self.op {
                    BinaryOp::Add => a + b,
                    BinaryOp::Sub => a - b,
                    BinaryOp::Mul => a * b,
                    BinaryOp::Div | BinaryOp::Mod if b.sign() == Sign::NoSign => {
                        return Err(failed(self, "BigInteger divide by zero"))
                    }
                    BinaryOp::Div => a / b,
                    BinaryOp::Mod => a % b,
                })
            }
            CqlType::Float => {
                let (a, b) = (float(&l), float(&r));
                Value::Float(match self.op {
                    BinaryOp::Add => a + b,
                    BinaryOp::Sub => a - b,
                    BinaryOp::Mul => a * b,
                    BinaryOp::Div => a / b,
                    BinaryOp::Mod => a % b,
                })
            }
            CqlType::Double => {
                let (a, b) = (double(&l), double(&r));
                Value::Double(match self.op {
                    BinaryOp::Add => a + b,
                    BinaryOp::Sub => a - b,
                    BinaryOp::Mul => a * b,
                    BinaryOp::Div => a / b,
                    BinaryOp::Mod => a % b,
                })
            }
            CqlType::Decimal => {
                let a = decimal(&l).map_err(|e| failed(self, &e))?;
                let b = decimal(&r).map_err(|e| failed(self, &e))?;
                let zero = b.unscaled.sign() == Sign::NoSign;
                let result = match self.op {
                    BinaryOp::Add => a.add(&b),
                    BinaryOp::Sub => a.sub(&b),
                    BinaryOp::Mul => a.mul(&b),
                    BinaryOp::Div if zero => return Err(failed(self, "BigInteger divide by zero")),
                    BinaryOp::Div => divide(&a, &b),
                    BinaryOp::Mod if zero => return Err(failed(self, "Division by zero")),
                    BinaryOp::Mod => a.rem(&b),
                };
                // A scale beyond what a decimal can hold fails inside the operation.
                result
                    .map_err(|e| failed(self, &e.to_string()))?
                    .into_value()
            }
            other => {
                return Err(QueryError::Server(format!(
                    "no arithmetic results in {other}"
                )))
            }
        };
        Ok(Some(encode(value)))
    }

    /// `timestamp ± duration`, `date ± duration` (`Duration.addTo`: months on the calendar,
    /// clamped to the month's last day, then days, then nanoseconds as whole milliseconds).
    fn temporal(&self, left: &Value, right: &Value) -> Result<Value, QueryError> {
        let Value::Duration {
            months,
            days,
            nanoseconds,
        } = right
        else {
            return Err(QueryError::Server(
                "a duration operand expected".to_string(),
            ));
        };
        let sign = if self.op == BinaryOp::Sub { -1 } else { 1 };
        let (months, days, nanoseconds) = (
            i64::from(*months) * sign,
            i64::from(*days) * sign,
            nanoseconds * sign,
        );
        let millis = match left {
            Value::Timestamp(ms) => *ms,
            Value::Date(d) => {
                if nanoseconds != 0 {
                    return Err(failed(
                        self,
                        &format!(
                            "The duration must have a day precision. Was: {}",
                            right.to_cql_literal()
                        ),
                    ));
                }
                (i64::from(*d) - i64::from(types::DATE_EPOCH)) * MILLIS_PER_DAY
            }
            _ => {
                return Err(QueryError::Server(
                    "a temporal operand expected".to_string(),
                ))
            }
        };
        let shifted = add_duration(millis, months, days, nanoseconds)
            .ok_or_else(|| failed(self, "long overflow"))?;
        Ok(match left {
            Value::Date(_) => Value::Date(
                (shifted.div_euclid(MILLIS_PER_DAY) + i64::from(types::DATE_EPOCH)) as u32,
            ),
            _ => Value::Timestamp(shifted),
        })
    }
}

/// `millis` plus a duration, as `java.util.Calendar` adds months and days in UTC.
fn add_duration(millis: i64, months: i64, days: i64, nanoseconds: i64) -> Option<i64> {
    if months == 0 {
        return millis
            .checked_add(days.checked_mul(MILLIS_PER_DAY)?)?
            .checked_add(nanoseconds / 1_000_000);
    }
    let day = millis.div_euclid(MILLIS_PER_DAY);
    let of_day = millis.rem_euclid(MILLIS_PER_DAY);
    let (y, m, d) = civil_from_days(day);
    let total = y.checked_mul(12)? + i64::from(m) - 1 + months;
    let (y, m) = (total.div_euclid(12), (total.rem_euclid(12) + 1) as u32);
    let d = d.min(days_in_month(y, m));
    let day = days_from_civil(y, m, d).checked_add(days)?;
    day.checked_mul(MILLIS_PER_DAY)?
        .checked_add(of_day)?
        .checked_add(nanoseconds / 1_000_000)
}

fn integer(v: &Value) -> i64 {
    match v {
        Value::Tinyint(x) => i64::from(*x),
        Value::Smallint(x) => i64::from(*x),
        Value::Int(x) => i64::from(*x),
        Value::Bigint(x) | Value::Counter(x) => *x,
        _ => 0,
    }
}

fn big_integer(v: &Value) -> BigInt {
    match v {
        Value::Varint(x) => x.clone(),
        other => BigInt::from(integer(other)),
    }
}

fn float(v: &Value) -> f32 {
    match v {
        Value::Float(x) => *x,
        other => integer(other) as f32,
    }
}

fn double(v: &Value) -> f64 {
    match v {
        Value::Float(x) => f64::from(*x),
        Value::Double(x) => *x,
        other => integer(other) as f64,
    }
}

/// `NumberType.toBigDecimal`: decimals and varints exactly, every other number through its
/// double value (`BigDecimal.valueOf(double)`), so an int 7 is 7.0.
fn decimal(v: &Value) -> Result<Decimal, String> {
    match v {
        Value::Decimal { unscaled, scale } => Ok(Decimal::new(unscaled.clone(), *scale)),
        Value::Varint(x) => Ok(Decimal::new(x.clone(), 0)),
        other => {
            let d = double(other);
            if d.is_nan() {
                return Err("A NaN cannot be converted into a decimal".to_string());
            }
            if d.is_infinite() {
                return Err("An infinite number cannot be converted into a decimal".to_string());
            }
            Decimal::parse(&numbers::java_double_text(d))
                .ok_or_else(|| "not a decimal number".to_string())
        }
    }
}

/// `DecimalType.divide`: the quotient at a scale of at least 32 (more when the operands have
/// more, or to keep 32 significant digits), rounded half-up, trailing zeros stripped.
fn divide(a: &Decimal, b: &Decimal) -> Result<Decimal, QueryError> {
    let first_digit = |d: &Decimal| numbers::precision(&d.unscaled) as i64 - i64::from(d.scale);
    let position = first_digit(a) - first_digit(b);
    let scale = (DECIMAL_DIVISION_MIN_SCALE - position)
        .max(i64::from(a.scale))
        .max(i64::from(b.scale))
        .clamp(DECIMAL_DIVISION_MIN_SCALE, DECIMAL_DIVISION_MAX_SCALE);
    Ok(a.div_half_up(b, scale)?.strip_trailing_zeros())
}

/// Unary minus.
pub(crate) fn negate(ty: &CqlType, bytes: &[u8]) -> Result<Option<Vec<u8>>, QueryError> {
    if bytes.is_empty() {
        return Ok(None);
    }
    let v = match Value::decode(ty, bytes)? {
        Value::Tinyint(x) => Value::Tinyint(x.wrapping_neg()),
        Value::Smallint(x) => Value::Smallint(x.wrapping_neg()),
        Value::Int(x) => Value::Int(x.wrapping_neg()),
        Value::Bigint(x) => Value::Bigint(x.wrapping_neg()),
        Value::Counter(x) => Value::Counter(x.wrapping_neg()),
        Value::Float(x) => Value::Float(-x),
        Value::Double(x) => Value::Double(-x),
        Value::Decimal { unscaled, scale } => Value::Decimal {
            unscaled: -unscaled,
            scale,
        },
        Value::Varint(x) => Value::Varint(-x),
        _ => return Ok(None),
    };
    Ok(Some(encode(v)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(o: BinaryOp, l: CqlType, r: CqlType) -> Operation {
        Operation {
            op: o,
            result: result_type(&l, &r),
            left: l,
            right: r,
        }
    }

    fn run(o: &Operation, a: Value, b: Value) -> Value {
        let out = o
            .execute(&encode(a), &encode(b))
            .expect("runs")
            .expect("a value");
        Value::decode(&o.result, &out).expect("decodes")
    }

    #[test]
    fn result_types_follow_cassandra() {
        use CqlType::*;
        assert_eq!(result_type(&Tinyint, &Tinyint), Tinyint);
        assert_eq!(result_type(&Tinyint, &Smallint), Smallint);
        assert_eq!(result_type(&Int, &Bigint), Bigint);
        assert_eq!(result_type(&Int, &Float), Float);
        assert_eq!(result_type(&Bigint, &Float), Double);
        assert_eq!(result_type(&Varint, &Double), Decimal);
        assert_eq!(result_type(&Varint, &Int), Varint);
        assert_eq!(result_type(&Counter, &Int), Bigint);
    }

    #[test]
    fn integer_arithmetic_wraps_like_java() {
        let add = op(BinaryOp::Add, CqlType::Int, CqlType::Int);
        assert_eq!(
            run(&add, Value::Int(i32::MAX), Value::Int(2)),
            Value::Int(-2_147_483_647)
        );
        let div = op(BinaryOp::Div, CqlType::Bigint, CqlType::Int);
        assert_eq!(
            run(&div, Value::Bigint(i64::MIN), Value::Int(-1)),
            Value::Bigint(i64::MIN)
        );
        let rem = op(BinaryOp::Mod, CqlType::Int, CqlType::Int);
        assert_eq!(run(&rem, Value::Int(-7), Value::Int(2)), Value::Int(-1));
        let tiny = op(BinaryOp::Add, CqlType::Tinyint, CqlType::Tinyint);
        assert_eq!(
            run(&tiny, Value::Tinyint(100), Value::Tinyint(100)),
            Value::Tinyint(-56)
        );
        assert!(div
            .execute(&encode(Value::Bigint(1)), &encode(Value::Int(0)))
            .is_err());
    }

    #[test]
    fn decimal_arithmetic_follows_big_decimal() {
        let d = |s: &str| Decimal::parse(s).expect("decimal").into_value();
        let div = op(BinaryOp::Div, CqlType::Decimal, CqlType::Decimal);
        assert_eq!(
            run(&div, d("1.10"), d("3")),
            d("0.36666666666666666666666666666667")
        );
        assert_eq!(run(&div, d("1.10"), d("1.10")), d("1"));
        assert_eq!(run(&div, d("1.10"), d("4")), d("0.275"));
        assert_eq!(
            run(&div, d("12345678901234567890"), d("0.1")),
            d("1.234567890123456789E+20")
        );
        let mul = op(BinaryOp::Mul, CqlType::Int, CqlType::Decimal);
        assert_eq!(run(&mul, Value::Int(-7), d("1.10")), d("-7.700"));
        let rem = op(BinaryOp::Mod, CqlType::Decimal, CqlType::Decimal);
        assert_eq!(run(&rem, d("5"), d("0.3")), d("0.2"));
        assert_eq!(run(&rem, d("-5.5"), d("2")), d("-1.5"));
    }

    #[test]
    fn durations_move_timestamps_on_the_calendar() {
        // 2020-01-31 + 1 month is 2020-02-29 (clamped), at the same time of day.
        let jan31 = 1_580_428_800_000 + 3_600_000;
        assert_eq!(
            add_duration(jan31, 1, 0, 0),
            Some(1_582_934_400_000 + 3_600_000)
        );
        assert_eq!(add_duration(0, 0, 1, 1_500_000), Some(MILLIS_PER_DAY + 1));
        assert_eq!(add_duration(0, -1, 0, 0), Some(-31 * MILLIS_PER_DAY));
    }
}
