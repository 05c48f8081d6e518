//! Cassandra 5.0's math functions (`MathFcts`): `abs`, `exp`, `log`, `log10` and `round`, one
//! overload per numeric type, each returning its argument's type.
//!
//! Fixed-size types compute in Java's `double` and narrow the result as Java's casts do
//! (saturating to `int`/`long`, NaN to 0, then wrapping to `short`/`byte`); `abs` wraps at the
//! minimum value like `Math.abs`; `round` is `Math.round` for floating point and half-up to
//! scale 0 for decimals. Decimals (and varints, through decimals, truncated back) use
//! `BigDecimalMath` to `max(precision, 32)` significant digits, with its exact cases (`exp(0)`
//! is 1, `log(1)` 0, `log10(10^n)` n); a decimal or varint at or below zero has no logarithm,
//! which Cassandra answers with a server error (arguably a bug; Helenus matches it).
//!
//! Unlike Cassandra, which computes until the client gives up, Helenus refuses a decimal
//! computation or an integer result needing more than `MAX_WORKING_DIGITS` digits
//! (`exp((varint)123456789)` has 53 million) with an `Invalid` error.

use num_bigint::{BigInt, Sign};
use types::{CqlType, Value};

use super::numbers::{self, Decimal};
use crate::QueryError;

/// Decimal results keep at least this many significant digits (`DecimalType`'s
/// `MIN_SIGNIFICANT_DIGITS`).
const MIN_SIGNIFICANT_DIGITS: u64 = 32;
/// Extra digits the fixed-point computations carry beyond the ones returned.
const GUARD_DIGITS: u64 = 20;
/// The most digits a decimal computation may use: bounds time and memory for inputs with a huge
/// precision or scale (Java would try; Helenus answers with an error).
const MAX_WORKING_DIGITS: u64 = 5_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MathFunction {
    Abs,
    Exp,
    Log,
    Log10,
    Round,
}

impl MathFunction {
    pub fn from_name(name: &str) -> Option<MathFunction> {
        Some(match name {
            "abs" => MathFunction::Abs,
            "exp" => MathFunction::Exp,
            "log" => MathFunction::Log,
            "log10" => MathFunction::Log10,
            "round" => MathFunction::Round,
            _ => return None,
        })
    }
}

/// The types every math function has an overload for (`NumberType`s).
pub(crate) const NUMERIC_TYPES: &[CqlType] = super::aggregates::SUMMABLE;

fn encode(v: Value) -> Vec<u8> {
    let mut out = Vec::new();
    v.encode(&mut out);
    out
}

/// Java's `(long) d`: saturating, NaN to 0 (Rust's `as` does the same).
fn java_long(d: f64) -> i64 {
    d as i64
}

/// Java's `(int) d`.
fn java_int(d: f64) -> i32 {
    d as i32
}

fn apply_f64(function: MathFunction, x: f64) -> f64 {
    match function {
        MathFunction::Abs => x.abs(),
        MathFunction::Exp => x.exp(),
        MathFunction::Log => x.ln(),
        MathFunction::Log10 => x.log10(),
        // `Math.round(double)`: floor(x + 1/2) as a long, computed exactly.
        MathFunction::Round => java_round(x) as f64,
    }
}

/// `Math.round(double)`.
fn java_round(x: f64) -> i64 {
    if x.is_nan() {
        return 0;
    }
    let floor = x.floor();
    let rounded = if x - floor >= 0.5 { floor + 1.0 } else { floor };
    java_long(rounded)
}

/// `Math.round(float)`: an int.
fn java_round_float(x: f32) -> i32 {
    if x.is_nan() {
        return 0;
    }
    let floor = x.floor();
    let rounded = if x - floor >= 0.5 { floor + 1.0 } else { floor };
    rounded as i32
}

/// Runs `function` on a non-empty serialised value of `ty`.
pub(crate) fn call(
    function: MathFunction,
    ty: &CqlType,
    bytes: &[u8],
) -> Result<Option<Vec<u8>>, QueryError> {
    let value = Value::decode(ty, bytes)?;
    let out = match value {
        Value::Empty => return Ok(None),
        Value::Tinyint(v) => Value::Tinyint(match function {
            MathFunction::Abs => v.wrapping_abs(),
            MathFunction::Round => v,
            f => java_int(apply_f64(f, f64::from(v))) as i8,
        }),
        Value::Smallint(v) => Value::Smallint(match function {
            MathFunction::Abs => v.wrapping_abs(),
            MathFunction::Round => v,
            f => java_int(apply_f64(f, f64::from(v))) as i16,
        }),
        Value::Int(v) => Value::Int(match function {
            MathFunction::Abs => v.wrapping_abs(),
            MathFunction::Round => v,
            f => java_int(apply_f64(f, f64::from(v))),
        }),
        Value::Bigint(v) | Value::Counter(v) => {
            let r = match function {
                MathFunction::Abs => v.wrapping_abs(),
                MathFunction::Round => v,
                f => java_long(apply_f64(f, v as f64)),
            };
            if matches!(ty, CqlType::Counter) {
                Value::Counter(r)
            } else {
                Value::Bigint(r)
            }
        }
        Value::Float(v) => Value::Float(match function {
            MathFunction::Abs => v.abs(),
            MathFunction::Round => java_round_float(v) as f32,
            f => apply_f64(f, f64::from(v)) as f32,
        }),
        Value::Double(v) => Value::Double(apply_f64(function, v)),
        Value::Decimal { unscaled, scale } => {
            let d = Decimal::new(unscaled, scale);
            match function {
                MathFunction::Abs => {
                    Decimal::new(BigInt::from(d.unscaled.magnitude().clone()), d.scale)
                }
                MathFunction::Round => round_half_up(&d)?,
                f => {
                    let precision = numbers::precision(&d.unscaled).max(MIN_SIGNIFICANT_DIGITS);
                    transcendental(f, &d, precision)?
                }
            }
            .into_value()
        }
        Value::Varint(v) => Value::Varint(match function {
            MathFunction::Abs => BigInt::from(v.magnitude().clone()),
            MathFunction::Round => v,
            f => {
                let precision = numbers::precision(&v).max(MIN_SIGNIFICANT_DIGITS);
                transcendental(f, &Decimal::new(v, 0), precision)?.integer_part_exact()?
            }
        }),
        other => {
            return Err(QueryError::Server(format!(
                "math function on a non-numeric value {other:?}"
            )))
        }
    };
    Ok(Some(encode(out)))
}

/// `setScale(0, RoundingMode.HALF_UP)`.
fn round_half_up(d: &Decimal) -> Result<Decimal, QueryError> {
    if d.scale <= 0 {
        // 1.2E+4 becomes 12000.
        return Ok(Decimal::new(d.integer_part_exact()?, 0));
    }
    if u64::from(d.scale.unsigned_abs()) > numbers::precision(&d.unscaled) {
        // |d| < 0.1: rounds to 0.
        return Ok(Decimal::zero());
    }
    let ten_pow = BigInt::from(10).pow(d.scale as u32);
    let q = &d.unscaled / &ten_pow;
    let r = &d.unscaled - &q * &ten_pow;
    let away = r.magnitude() * 2u32 >= *ten_pow.magnitude() && r.sign() != Sign::NoSign;
    let q = match (away, d.unscaled.sign() == Sign::Minus) {
        (true, true) => q - 1,
        (true, false) => q + 1,
        (false, _) => q,
    };
    Ok(Decimal::new(q, 0))
}

impl Decimal {
    /// `toBigInteger()` (truncation toward zero), or an error when it would have more than
    /// `MAX_WORKING_DIGITS` digits (`1E+2000000000` would take gigabytes).
    fn integer_part_exact(&self) -> Result<BigInt, QueryError> {
        if self.scale <= 0 {
            let digits = numbers::precision(&self.unscaled) + u64::from(self.scale.unsigned_abs());
            if digits > MAX_WORKING_DIGITS && self.unscaled.sign() != Sign::NoSign {
                return Err(QueryError::Invalid(format!(
                    "A decimal integer of more than {MAX_WORKING_DIGITS} digits is not supported by Helenus"
                )));
            }
            Ok(&self.unscaled * BigInt::from(10).pow(self.scale.unsigned_abs()))
        } else if u64::from(self.scale.unsigned_abs()) > numbers::precision(&self.unscaled) {
            // More decimals than digits: |x| < 1.
            Ok(BigInt::from(0))
        } else {
            Ok(&self.unscaled / BigInt::from(10).pow(self.scale as u32))
        }
    }

    /// The decimal exponent of the leading digit (`1.5E+3` → 3), for a non-zero decimal.
    fn leading_exponent(&self) -> i64 {
        numbers::precision(&self.unscaled) as i64 - 1 - i64::from(self.scale)
    }
}

/// Cassandra's answer to a math function it cannot compute: a server error carrying Java's
/// exception, as Cassandra 5.0 sends it.
fn arithmetic_exception(message: &str) -> QueryError {
    QueryError::Server(format!("java.lang.ArithmeticException: {message}"))
}

/// `exp`, `log` or `log10` of a decimal to `precision` significant digits.
fn transcendental(
    function: MathFunction,
    x: &Decimal,
    precision: u64,
) -> Result<Decimal, QueryError> {
    let sign = x.unscaled.sign();
    match function {
        MathFunction::Exp if sign == Sign::NoSign => return Ok(Decimal::new(BigInt::from(1), 0)),
        MathFunction::Log | MathFunction::Log10 if sign != Sign::Plus => {
            return Err(arithmetic_exception(if function == MathFunction::Log {
                "Natural log of number zero or less"
            } else {
                "Log10 of number zero or less"
            }))
        }
        _ => {}
    }
    let digits = numbers::precision(&x.unscaled);
    // The decimal exponent of x: x = m × 10^exponent with 1 <= m < 10.
    let exponent = digits as i64 - 1 - i64::from(x.scale);
    if function != MathFunction::Exp {
        let stripped = x.clone().strip_trailing_zeros();
        if stripped.unscaled == BigInt::from(1) {
            // log(1) is 0; log10 of 10^n (n >= 1) is exactly n, as BigDecimalMath finds it;
            // log10(1) is 0 / ln(10), a zero whose scale is minus ln(10)'s (precision + 1).
            let n = -i64::from(stripped.scale);
            match (function, n) {
                (MathFunction::Log, 0) => return Ok(Decimal::new(BigInt::from(0), 0)),
                (_, 0) => {
                    let scale = -(i32::try_from(precision).unwrap_or(i32::MAX - 1) + 1);
                    return Ok(Decimal::new(BigInt::from(0), scale));
                }
                (MathFunction::Log10, n) if n > 0 => {
                    return Ok(Decimal::new(BigInt::from(n), 0));
                }
                _ => {}
            }
        }
    }
    // Enough fixed-point digits for `precision` significant ones: a logarithm of a number near
    // 1 is as small as x - 1, which has as many leading zeros as x has decimals; exp(x) needs
    // x's integer digits to place its decimal exponent.
    let extra = match function {
        MathFunction::Exp => exponent.max(0) as u64,
        _ => u64::try_from(x.scale).unwrap_or(0),
    };
    let working = precision + GUARD_DIGITS + extra;
    if working > MAX_WORKING_DIGITS {
        return Err(QueryError::Invalid(format!(
            "{function:?} of a decimal needing more than {MAX_WORKING_DIGITS} digits is not supported by Helenus"
        )));
    }
    let one = BigInt::from(10).pow(working as u32);
    let fixed_x = rescale(&x.unscaled, i64::from(x.scale), working as i64);
    let (value, scale) = match function {
        MathFunction::Exp => {
            // BigDecimalMath raises e to the integer part as an int power: beyond 32 bits it
            // overflows. (10 digits or more is beyond; fewer is cheap to check exactly.)
            let fits = x.leading_exponent() < 10 && i32::try_from(&x.integer_part_exact()?).is_ok();
            if !fits {
                return Err(arithmetic_exception("Overflow"));
            }
            let ln10 = ln10(&one);
            // x = k ln(10) + r, 0 <= r < ln(10): exp(x) = exp(r) × 10^k.
            let k = floor_div(&fixed_x, &ln10);
            let r = &fixed_x - &k * &ln10;
            let k = i64::try_from(&k).map_err(|_| arithmetic_exception("Overflow"))?;
            (exp_fixed(&r, &one), working as i64 - k)
        }
        _ => {
            let ln = ln_fixed(&x.unscaled, i64::from(x.scale), exponent, working, &one);
            let ln = if function == MathFunction::Log10 {
                (ln * &one) / ln10(&one)
            } else {
                ln
            };
            (ln, working as i64)
        }
    };
    round_significant(value, scale, precision)
}

/// `unscaled × 10^-scale` as a fixed-point integer with `working` decimals (truncated).
fn rescale(unscaled: &BigInt, scale: i64, working: i64) -> BigInt {
    let shift = working - scale;
    if shift >= 0 {
        unscaled * BigInt::from(10).pow(shift as u32)
    } else if (-shift) as u64 > numbers::precision(unscaled) {
        // Below the last working digit (and 10^-shift may be astronomically large).
        BigInt::from(0)
    } else {
        unscaled / BigInt::from(10).pow((-shift) as u32)
    }
}

fn floor_div(a: &BigInt, b: &BigInt) -> BigInt {
    let q = a / b;
    if a.sign() == Sign::Minus && &q * b != *a {
        q - 1
    } else {
        q
    }
}

/// atanh(num/den) in fixed point (|num/den| < 1): z + z³/3 + z⁵/5 + ...
fn atanh_fixed(num: &BigInt, den: &BigInt, one: &BigInt) -> BigInt {
    let z = num * one / den;
    let z2 = &z * &z / one;
    let mut power = z.clone();
    let mut sum = z;
    let mut n = 1u64;
    loop {
        power = &power * &z2 / one;
        n += 2;
        let term = &power / BigInt::from(n);
        if term.sign() == Sign::NoSign {
            return sum;
        }
        sum += term;
    }
}

fn ln2(one: &BigInt) -> BigInt {
    atanh_fixed(&BigInt::from(1), &BigInt::from(3), one) * 2
}

/// ln(10) = 3 ln(2) + ln(5/4), ln(5/4) = 2 atanh(1/9); computed three digits wider, so that
/// multiples of it stay exact to the last digit.
fn ln10(one: &BigInt) -> BigInt {
    let wide_one = one * BigInt::from(1000);
    let wide = ln2(&wide_one) * 3 + atanh_fixed(&BigInt::from(1), &BigInt::from(9), &wide_one) * 2;
    wide / BigInt::from(1000)
}

/// ln(x) for x = unscaled × 10^-scale > 0, whose decimal exponent is `exponent`.
fn ln_fixed(unscaled: &BigInt, scale: i64, exponent: i64, working: u64, one: &BigInt) -> BigInt {
    // m = x / 10^exponent in [1, 10), then halved j times into [0.75, 1.5).
    let m = rescale(unscaled, scale + exponent, working as i64);
    let mut y = m;
    let mut halvings = 0i64;
    let limit = one * BigInt::from(3) / BigInt::from(2);
    while y >= limit {
        y /= 2;
        halvings += 1;
    }
    // ln(y) = 2 atanh((y - 1) / (y + 1)).
    let ln_y = atanh_fixed(&(&y - one), &(&y + one), one) * 2;
    ln_y + ln2(one) * halvings + ln10(one) * exponent
}

/// exp(r) for 0 <= r < ln(10) in fixed point: the Taylor series of r / 2^10, squared 10 times.
fn exp_fixed(r: &BigInt, one: &BigInt) -> BigInt {
    const HALVINGS: u32 = 10;
    let small = r >> HALVINGS;
    let mut term = one.clone();
    let mut sum = one.clone();
    let mut n = 1u64;
    loop {
        term = &term * &small / one / BigInt::from(n);
        if term.sign() == Sign::NoSign {
            break;
        }
        sum += &term;
        n += 1;
    }
    for _ in 0..HALVINGS {
        sum = &sum * &sum / one;
    }
    sum
}

/// `value × 10^-scale` rounded half-up to `precision` significant digits.
fn round_significant(value: BigInt, scale: i64, precision: u64) -> Result<Decimal, QueryError> {
    let digits = numbers::precision(&value);
    let (mut value, mut scale) = if digits > precision {
        let drop = digits - precision;
        let ten_pow = BigInt::from(10).pow(drop as u32);
        let q = &value / &ten_pow;
        let r = &value - &q * &ten_pow;
        let away = r.magnitude() * 2u32 >= *ten_pow.magnitude() && r.sign() != Sign::NoSign;
        let q = match (away, value.sign() == Sign::Minus) {
            (true, true) => q - 1,
            (true, false) => q + 1,
            (false, _) => q,
        };
        (q, scale - drop as i64)
    } else {
        let pad = precision - digits;
        (value * BigInt::from(10).pow(pad as u32), scale + pad as i64)
    };
    if numbers::precision(&value) > precision {
        // Rounding carried into a new digit (9.99 -> 10.0).
        value /= 10;
        scale -= 1;
    }
    let scale = i32::try_from(scale).map_err(|_| arithmetic_exception("Overflow"))?;
    Ok(Decimal::new(value, scale))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decimal(text: &str) -> Decimal {
        Decimal::parse(text).expect("a decimal")
    }

    fn text(d: &Decimal) -> String {
        numbers::java_decimal_text(&d.unscaled, d.scale)
    }

    fn run(function: MathFunction, x: &str) -> String {
        let x = decimal(x);
        let precision = numbers::precision(&x.unscaled).max(MIN_SIGNIFICANT_DIGITS);
        text(&transcendental(function, &x, precision).expect("computes"))
    }

    #[test]
    fn decimal_functions_match_big_decimal_math() {
        // Values Cassandra 5.0.9 returned.
        assert_eq!(
            run(MathFunction::Exp, "1.1"),
            "3.0041660239464331120584079535887"
        );
        assert_eq!(
            run(MathFunction::Exp, "-2.5"),
            "0.082084998623898795169528674467160"
        );
        assert_eq!(
            run(MathFunction::Exp, "1000"),
            "1.9700711140170469938888793522433E+434"
        );
        assert_eq!(run(MathFunction::Exp, "0"), "1");
        assert_eq!(
            run(MathFunction::Exp, "2147483647"),
            "7.4057787974478016825915850600371E+932640297"
        );
        let huge = decimal("2147483648");
        assert!(transcendental(MathFunction::Exp, &huge, 32).is_err());
        // exp of a varint whose result has 53 million digits is refused at once (Cassandra
        // computes it until the client times out).
        let mut bytes = Vec::new();
        Value::Varint(BigInt::from(123_456_789)).encode(&mut bytes);
        assert!(call(MathFunction::Exp, &CqlType::Varint, &bytes).is_err());
        // Extreme exponents are answered at once.
        assert!(transcendental(MathFunction::Exp, &decimal("1e2000000000"), 32).is_err());
        assert_eq!(
            text(&transcendental(MathFunction::Exp, &decimal("1e-2000000000"), 32).expect("1")),
            "1.0000000000000000000000000000000"
        );
        assert_eq!(
            run(MathFunction::Log, "1.1"),
            "0.095310179804324860043952123280765"
        );
        assert_eq!(
            run(MathFunction::Log, "1E-10"),
            "-23.025850929940456840179914546844"
        );
        assert_eq!(run(MathFunction::Log, "1"), "0");
        assert_eq!(run(MathFunction::Log10, "1.000"), "0E+33");
        assert_eq!(
            run(MathFunction::Log10, "123.456"),
            "2.0915122016277716810693997770679"
        );
        assert_eq!(run(MathFunction::Log10, "100"), "2");
        assert_eq!(
            run(MathFunction::Log10, "0.001"),
            "-3.0000000000000000000000000000000"
        );
        assert_eq!(
            run(
                MathFunction::Log10,
                "123456789012345678901234567890.123456789"
            ),
            "29.0915149772126998957108302782343211744"
        );
    }

    #[test]
    fn fixed_size_results_narrow_like_java() {
        let int = |f: MathFunction, v: i32| {
            let out = call(f, &CqlType::Int, &v.to_be_bytes())
                .expect("ok")
                .expect("value");
            i32::from_be_bytes(out.try_into().expect("4 bytes"))
        };
        assert_eq!(int(MathFunction::Exp, 7), 1096);
        assert_eq!(int(MathFunction::Exp, 100), i32::MAX);
        assert_eq!(int(MathFunction::Log, 0), i32::MIN);
        assert_eq!(int(MathFunction::Log, -1), 0);
        assert_eq!(int(MathFunction::Abs, i32::MIN), i32::MIN);
        let tiny = call(MathFunction::Exp, &CqlType::Tinyint, &[100]).expect("ok");
        assert_eq!(tiny, Some(vec![0xff]));
        assert_eq!(java_round(-2.5), -2);
        assert_eq!(java_round(0.499_999_999_999_999_94), 0);
        assert_eq!(java_round_float(1e20), i32::MAX);
        let round = |x: &str| text(&round_half_up(&decimal(x)).expect("rounds"));
        assert_eq!(round("-0.5"), "-1");
        assert_eq!(round("12e3"), "12000");
        assert_eq!(round("1.5e-5"), "0");
        assert!(round_half_up(&decimal("1e2000000000")).is_err());
    }
}
