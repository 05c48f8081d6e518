//! Java's number arithmetic and text where Cassandra's results depend on them: `BigDecimal`
//! (sum and average of decimals, casts to decimal), `Double.toString`/`Float.toString` and
//! `BigDecimal.toString` (casts to text), and the narrowing of `Number.longValue()`.

use num_bigint::{BigInt, Sign};
use types::Value;

use crate::QueryError;

/// Largest difference of scales two decimals may have when added: aligning them multiplies by
/// 10^difference, so this bounds the digits (and memory) one addition can create. Java would
/// try and run out of memory; Helenus answers with an error instead.
const MAX_SCALE_ALIGNMENT: i64 = 100_000;

/// A `java.math.BigDecimal`: `unscaled × 10^-scale`, scale kept as Java keeps it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Decimal {
    pub unscaled: BigInt,
    pub scale: i32,
}

impl Decimal {
    pub fn new(unscaled: BigInt, scale: i32) -> Decimal {
        Decimal { unscaled, scale }
    }

    pub fn zero() -> Decimal {
        Decimal::new(BigInt::from(0), 0)
    }

    pub fn into_value(self) -> Value {
        Value::Decimal {
            unscaled: self.unscaled,
            scale: self.scale,
        }
    }

    /// `new BigDecimal(text)` for the text Java prints for doubles and floats
    /// (`-?digits[.digits][E[-]digits]`); `None` for NaN and infinities.
    pub fn parse(text: &str) -> Option<Decimal> {
        let (mantissa, exponent) = match text.split_once(['E', 'e']) {
            Some((m, e)) => (m, e.parse::<i64>().ok()?),
            None => (text, 0),
        };
        let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let digits = format!("{int}{frac}");
        let unscaled: BigInt = digits.parse().ok()?;
        let scale = i32::try_from(frac.len() as i64 - exponent).ok()?;
        Some(Decimal::new(unscaled, scale))
    }

    fn aligned(&self, other: &Decimal) -> Result<(BigInt, BigInt, i32), QueryError> {
        let scale = self.scale.max(other.scale);
        let rescale = |d: &Decimal| -> Result<BigInt, QueryError> {
            let by = i64::from(scale) - i64::from(d.scale);
            if by > MAX_SCALE_ALIGNMENT {
                return Err(QueryError::Invalid(format!(
                    "Decimal values whose scales differ by more than {MAX_SCALE_ALIGNMENT} cannot be added"
                )));
            }
            Ok(&d.unscaled * BigInt::from(10).pow(by as u32))
        };
        Ok((rescale(self)?, rescale(other)?, scale))
    }

    /// `BigDecimal.add`: the scale is the larger of the two.
    pub fn add(&self, other: &Decimal) -> Result<Decimal, QueryError> {
        let (a, b, scale) = self.aligned(other)?;
        Ok(Decimal::new(a + b, scale))
    }

    /// `BigDecimal.subtract`.
    pub fn sub(&self, other: &Decimal) -> Result<Decimal, QueryError> {
        let (a, b, scale) = self.aligned(other)?;
        Ok(Decimal::new(a - b, scale))
    }

    /// `divide(BigDecimal.valueOf(n), RoundingMode.HALF_EVEN)`: the quotient at this scale.
    pub fn div_half_even(&self, n: i64) -> Decimal {
        let n = BigInt::from(n);
        let q = &self.unscaled / &n;
        let r = &self.unscaled - &q * &n;
        let twice = (r.magnitude() * 2u32).cmp(n.magnitude());
        let away = match twice {
            std::cmp::Ordering::Greater => true,
            std::cmp::Ordering::Equal => q.magnitude() % 2u32 == 1u32.into(),
            std::cmp::Ordering::Less => false,
        };
        // `n` is a positive count, so the remainder has the quotient's sign.
        let q = match r.sign() {
            Sign::Minus if away => q - 1,
            Sign::Plus if away => q + 1,
            _ => q,
        };
        Decimal::new(q, self.scale)
    }

    /// The integer part, truncated toward zero (`BigDecimal.toBigInteger`). Only its low 64
    /// bits are ever used, so a huge negative scale (all those bits zero) gives zero.
    pub fn integer_part(&self) -> BigInt {
        let scale = i64::from(self.scale);
        if scale <= 0 {
            if -scale > 64 {
                // 10^65 = 2^65 × 5^65: every bit below the 66th is zero.
                return BigInt::from(0);
            }
            &self.unscaled * BigInt::from(10).pow((-scale) as u32)
        } else {
            // A divisor with more digits than the dividend leaves zero.
            let digits = self.unscaled.bits().saturating_mul(31) / 100 + 2; // ≥ log10(2) × bits
            if scale as u64 > digits {
                return BigInt::from(0);
            }
            &self.unscaled / BigInt::from(10).pow(scale as u32)
        }
    }

    /// `BigDecimal.multiply`: exact, the scales add up.
    pub fn mul(&self, other: &Decimal) -> Result<Decimal, QueryError> {
        let scale = i32::try_from(i64::from(self.scale) + i64::from(other.scale))
            .map_err(|_| QueryError::Invalid("Decimal scale overflow".to_string()))?;
        Ok(Decimal::new(&self.unscaled * &other.unscaled, scale))
    }

    /// `BigDecimal.remainder` (the divisor is not zero): the sign of the dividend, the larger
    /// scale.
    pub fn rem(&self, other: &Decimal) -> Result<Decimal, QueryError> {
        let (a, b, scale) = self.aligned(other)?;
        Ok(Decimal::new(a % b, scale))
    }

    /// `divide(other, scale, RoundingMode.HALF_UP)` (the divisor is not zero).
    pub fn div_half_up(&self, other: &Decimal, scale: i64) -> Result<Decimal, QueryError> {
        let shift = scale - i64::from(self.scale) + i64::from(other.scale);
        if shift.abs() > MAX_SCALE_ALIGNMENT {
            return Err(QueryError::Invalid(format!(
                "Decimal division needs more than {MAX_SCALE_ALIGNMENT} digits"
            )));
        }
        let ten_pow = BigInt::from(10).pow(shift.unsigned_abs() as u32);
        let (num, den) = if shift >= 0 {
            (&self.unscaled * ten_pow, other.unscaled.clone())
        } else {
            (self.unscaled.clone(), &other.unscaled * ten_pow)
        };
        let q = &num / &den;
        let r = &num - &q * &den;
        let round_up = (r.magnitude() * 2u32) >= *den.magnitude() && r.sign() != Sign::NoSign;
        let negative = (num.sign() == Sign::Minus) != (den.sign() == Sign::Minus);
        let q = match (round_up, negative) {
            (true, true) => q - 1,
            (true, false) => q + 1,
            (false, _) => q,
        };
        let scale = i32::try_from(scale)
            .map_err(|_| QueryError::Invalid("Decimal scale overflow".to_string()))?;
        Ok(Decimal::new(q, scale))
    }

    /// `BigDecimal.stripTrailingZeros`: zero is `0` (scale 0).
    pub fn strip_trailing_zeros(mut self) -> Decimal {
        if self.unscaled.sign() == Sign::NoSign {
            return Decimal::zero();
        }
        let ten = BigInt::from(10);
        loop {
            let q = &self.unscaled / &ten;
            if &q * &ten != self.unscaled || self.scale == i32::MIN {
                return self;
            }
            self.unscaled = q;
            self.scale -= 1;
        }
    }

    fn text_for_parse(&self) -> String {
        format!("{}e{}", self.unscaled, -i64::from(self.scale))
    }

    /// `BigDecimal.doubleValue()`: the nearest double.
    pub fn to_f64(&self) -> f64 {
        self.text_for_parse().parse().unwrap_or(f64::NAN)
    }

    /// `BigDecimal.floatValue()`: the nearest float.
    pub fn to_f32(&self) -> f32 {
        self.text_for_parse().parse().unwrap_or(f32::NAN)
    }
}

/// The number of decimal digits of an integer's magnitude (`BigDecimal.precision`; 1 for 0).
pub(crate) fn precision(v: &BigInt) -> u64 {
    v.magnitude().to_string().len() as u64
}

/// The low 64 bits of a two's complement integer (Java's `BigInteger.longValue()`).
pub(crate) fn low_i64(v: &BigInt) -> i64 {
    let bytes = v.to_signed_bytes_le();
    let mut buf = [if v.sign() == Sign::Minus { 0xff } else { 0 }; 8];
    let n = bytes.len().min(8);
    buf[..n].copy_from_slice(&bytes[..n]);
    i64::from_le_bytes(buf)
}

pub(crate) fn bigint_to_f64(v: &BigInt) -> f64 {
    v.to_string().parse().unwrap_or(f64::NAN)
}

pub(crate) fn bigint_to_f32(v: &BigInt) -> f32 {
    v.to_string().parse().unwrap_or(f32::NAN)
}

pub(crate) use types::{java_decimal_text, java_double_text, java_float_text};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_number_text() {
        assert_eq!(java_double_text(1e10), "1.0E10");
        assert_eq!(java_double_text(1e7), "1.0E7");
        assert_eq!(java_double_text(9_999_999.0), "9999999.0");
        assert_eq!(java_double_text(0.0001), "1.0E-4");
        assert_eq!(java_double_text(0.001), "0.001");
        assert_eq!(java_double_text(100.0), "100.0");
        assert_eq!(java_double_text(-0.0), "-0.0");
        assert_eq!(java_double_text(123_456_789.123), "1.23456789123E8");
        assert_eq!(java_double_text(2.5), "2.5");
        assert_eq!(java_float_text(0.1), "0.1");
        assert_eq!(java_float_text(3.402_823_5e38), "3.4028235E38");
        // (JDK 17's `Float.toString(Float.MIN_NORMAL)` prints one digit more than the shortest,
        // "1.17549435E-38"; Helenus prints the shortest digits, as JDK 19 and later do.)
        let dec = |u: i64, s| java_decimal_text(&BigInt::from(u), s);
        assert_eq!(dec(1, -3), "1E+3");
        assert_eq!(dec(-15, 8), "-1.5E-7");
        assert_eq!(dec(1, 5), "0.00001");
        assert_eq!(dec(1, 7), "1E-7");
        assert_eq!(dec(10000, 2), "100.00");
        assert_eq!(dec(0, 0), "0");
    }

    #[test]
    fn decimal_arithmetic_matches_big_decimal() {
        let d = |s: &str| Decimal::parse(s).expect("decimal");
        assert_eq!(d("1.0E10"), Decimal::new(BigInt::from(10), -9));
        // Cassandra's running average of 1.1 and 2.2: 1.1 + (2.2 - 1.1) / 2 = 1.1 + 0.6.
        let step = d("2.2").sub(&d("1.1")).expect("sub").div_half_even(2);
        assert_eq!(step, d("0.6"));
        assert_eq!(d("0.25").div_half_even(2), d("0.12"));
        assert_eq!(d("0.35").div_half_even(2), d("0.18"));
        assert_eq!(d("-0.35").div_half_even(2), d("-0.18"));
        assert_eq!(d("-0.7").div_half_even(3), d("-0.2"));
        assert_eq!(d("1.99").integer_part(), BigInt::from(1));
        assert_eq!(d("-1.99").integer_part(), BigInt::from(-1));
        assert_eq!(
            Decimal::new(BigInt::from(5), i32::MAX).integer_part(),
            BigInt::from(0)
        );
        assert_eq!(
            Decimal::new(BigInt::from(5), i32::MIN).integer_part(),
            BigInt::from(0)
        );
        assert_eq!(
            Decimal::new(BigInt::from(12345), 2).integer_part(),
            BigInt::from(123)
        );
        assert_eq!(low_i64(&(BigInt::from(1) << 64u32)), 0);
        assert_eq!(low_i64(&BigInt::from(-5)), -5);
    }
}
