//! The native aggregate functions of Cassandra 5.0 (`AggregateFcts`): `count`, `min`, `max`,
//! `sum` and `avg`, computed exactly as Cassandra computes them — sums keep the argument type
//! and wrap like Java's fixed-size arithmetic, integer averages divide a 64-bit sum (falling back
//! to a big integer on overflow), floating-point sums use Kahan summation, decimal averages are
//! a running mean rounded half-even at each step.

use std::cmp::Ordering;

use num_bigint::BigInt;
use types::{CqlType, Value};

use super::numbers::{self, Decimal};
use crate::QueryError;

/// Which aggregate a selector computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AggregateFunction {
    /// `count(*)`, `count(1)`.
    CountRows,
    /// `count(x)`: rows where `x` is not null.
    Count,
    Min,
    Max,
    Sum,
    Avg,
}

impl AggregateFunction {
    pub fn from_name(name: &str) -> Option<AggregateFunction> {
        Some(match name {
            "count" => AggregateFunction::Count,
            "min" => AggregateFunction::Min,
            "max" => AggregateFunction::Max,
            "sum" => AggregateFunction::Sum,
            "avg" => AggregateFunction::Avg,
            _ => return None,
        })
    }
}

/// The types `sum` and `avg` are defined for, in Cassandra's signature order.
pub(crate) const SUMMABLE: &[CqlType] = &[
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

/// Cassandra 5.0 declares min/max of timeuuid with this marshal class as the result type (the
/// native `timeuuid` type maps to it in the aggregate table), and drivers see that custom type.
pub(crate) fn min_max_result_type(arg: &CqlType) -> CqlType {
    if *arg.unfrozen() == CqlType::Timeuuid {
        super::type_match::legacy_timeuuid()
    } else {
        arg.clone()
    }
}

/// The running state of one aggregate over one group.
#[derive(Debug, Clone)]
pub(crate) enum Accumulator {
    Count(i64),
    Min(CqlType, Option<Vec<u8>>),
    Max(CqlType, Option<Vec<u8>>),
    /// tinyint, smallint, int, bigint and counter sums: Java arithmetic of the type's width.
    IntSum(CqlType, i64),
    /// `AvgAggregate`: a long sum that switches to a big integer on overflow.
    IntAvg {
        ty: CqlType,
        sum: i64,
        count: i64,
        overflow: Option<BigInt>,
    },
    /// `FloatSumAggregate`: Kahan summation in doubles.
    FloatSum {
        ty: CqlType,
        sum: f64,
        compensation: f64,
        simple: f64,
    },
    /// `FloatAvgAggregate`: Kahan summation, then a decimal sum once the double overflows.
    FloatAvg {
        ty: CqlType,
        sum: f64,
        compensation: f64,
        simple: f64,
        count: i64,
        overflow: Option<Decimal>,
    },
    DecimalSum(Decimal),
    DecimalAvg {
        avg: Decimal,
        count: i64,
    },
    VarintSum(BigInt),
    VarintAvg {
        sum: BigInt,
        count: i64,
    },
}

impl Accumulator {
    /// A fresh accumulator for `function` over arguments of type `ty` (ignored for counts).
    pub fn new(function: AggregateFunction, ty: &CqlType) -> Accumulator {
        let ty = if super::type_match::same_type(ty, &CqlType::Timeuuid) {
            CqlType::Timeuuid
        } else {
            ty.unfrozen().clone()
        };
        match function {
            AggregateFunction::CountRows | AggregateFunction::Count => Accumulator::Count(0),
            AggregateFunction::Min => Accumulator::Min(ty, None),
            AggregateFunction::Max => Accumulator::Max(ty, None),
            AggregateFunction::Sum => match ty {
                CqlType::Float | CqlType::Double => Accumulator::FloatSum {
                    ty,
                    sum: 0.0,
                    compensation: 0.0,
                    simple: 0.0,
                },
                CqlType::Decimal => Accumulator::DecimalSum(Decimal::zero()),
                CqlType::Varint => Accumulator::VarintSum(BigInt::from(0)),
                _ => Accumulator::IntSum(ty, 0),
            },
            AggregateFunction::Avg => match ty {
                CqlType::Float | CqlType::Double => Accumulator::FloatAvg {
                    ty,
                    sum: 0.0,
                    compensation: 0.0,
                    simple: 0.0,
                    count: 0,
                    overflow: None,
                },
                CqlType::Decimal => Accumulator::DecimalAvg {
                    avg: Decimal::zero(),
                    count: 0,
                },
                CqlType::Varint => Accumulator::VarintAvg {
                    sum: BigInt::from(0),
                    count: 0,
                },
                _ => Accumulator::IntAvg {
                    ty,
                    sum: 0,
                    count: 0,
                    overflow: None,
                },
            },
        }
    }

    /// Adds one row. `value` is the argument's value in that row (`Some` for `count(*)`).
    pub fn add(&mut self, value: Option<&[u8]>) -> Result<(), QueryError> {
        let Some(bytes) = value else {
            return Ok(());
        };
        match self {
            Accumulator::Count(n) => *n += 1,
            Accumulator::Min(ty, best) => keep_if(ty, best, bytes, Ordering::Less),
            Accumulator::Max(ty, best) => keep_if(ty, best, bytes, Ordering::Greater),
            Accumulator::IntSum(ty, sum) => {
                let Some(v) = integer(ty, bytes)? else {
                    return Ok(());
                };
                *sum = wrap(ty, sum.wrapping_add(v));
            }
            Accumulator::IntAvg {
                ty,
                sum,
                count,
                overflow,
            } => {
                let Some(v) = integer(ty, bytes)? else {
                    return Ok(());
                };
                *count += 1;
                match overflow {
                    Some(big) => *big += v,
                    None => match sum.checked_add(v) {
                        Some(s) => *sum = s,
                        None => *overflow = Some(BigInt::from(*sum) + v),
                    },
                }
            }
            Accumulator::FloatSum {
                ty,
                sum,
                compensation,
                simple,
            } => {
                let Some(d) = floating(ty, bytes)? else {
                    return Ok(());
                };
                *simple += d;
                let tmp = d - *compensation;
                let rounded = *sum + tmp;
                *compensation = (rounded - *sum) - tmp;
                *sum = rounded;
            }
            Accumulator::FloatAvg {
                ty,
                sum,
                compensation,
                simple,
                count,
                overflow,
            } => {
                let Some(d) = floating(ty, bytes)? else {
                    return Ok(());
                };
                *count += 1;
                match overflow {
                    Some(big) => *big = big.add(&java_decimal_of(d)?)?,
                    None => {
                        *simple += d;
                        let prev = *sum;
                        let tmp = d - *compensation;
                        let rounded = *sum + tmp;
                        *compensation = (rounded - *sum) - tmp;
                        *sum = rounded;
                        if sum.is_infinite() && !d.is_infinite() {
                            *overflow = Some(java_decimal_of(prev)?.add(&java_decimal_of(d)?)?);
                        }
                    }
                }
            }
            Accumulator::DecimalSum(sum) => {
                if let Some(d) = decimal(bytes)? {
                    *sum = sum.add(&d)?;
                }
            }
            Accumulator::DecimalAvg { avg, count } => {
                if let Some(d) = decimal(bytes)? {
                    *count += 1;
                    // avg = avg + (value - avg) / count, rounded at each step as Cassandra does.
                    let step = d.sub(avg)?.div_half_even(*count);
                    *avg = avg.add(&step)?;
                }
            }
            Accumulator::VarintSum(sum) => {
                if let Value::Varint(v) = Value::decode(&CqlType::Varint, bytes)? {
                    *sum += v;
                }
            }
            Accumulator::VarintAvg { sum, count } => {
                if let Value::Varint(v) = Value::decode(&CqlType::Varint, bytes)? {
                    *sum += v;
                    *count += 1;
                }
            }
        }
        Ok(())
    }

    /// The aggregate's value for the rows added so far.
    pub fn result(&self) -> Option<Vec<u8>> {
        let encode = |v: Value| {
            let mut out = Vec::new();
            v.encode(&mut out);
            Some(out)
        };
        match self {
            Accumulator::Count(n) => encode(Value::Bigint(*n)),
            Accumulator::Min(_, best) | Accumulator::Max(_, best) => best.clone(),
            Accumulator::IntSum(ty, sum) => encode(integer_value(ty, *sum)),
            Accumulator::IntAvg {
                ty,
                sum,
                count,
                overflow,
            } => {
                let avg = match overflow {
                    Some(big) => numbers::low_i64(&(big / BigInt::from(*count))),
                    None if *count == 0 => 0,
                    None => sum / count,
                };
                encode(integer_value(ty, avg))
            }
            Accumulator::FloatSum {
                ty,
                sum,
                compensation,
                simple,
            } => {
                let tmp = sum + compensation;
                let total = if tmp.is_nan() && simple.is_infinite() {
                    *simple
                } else {
                    tmp
                };
                encode(float_value(ty, total))
            }
            Accumulator::FloatAvg {
                ty,
                sum,
                compensation,
                simple,
                count,
                overflow,
            } => {
                let avg = if *count == 0 {
                    0.0
                } else if let Some(big) = overflow {
                    big.div_half_even(*count).to_f64()
                } else {
                    let tmp = sum + compensation;
                    let total = if tmp.is_nan() && simple.is_infinite() {
                        *simple
                    } else {
                        tmp
                    };
                    total / *count as f64
                };
                encode(float_value(ty, avg))
            }
            Accumulator::DecimalSum(sum) => encode(sum.clone().into_value()),
            Accumulator::DecimalAvg { avg, .. } => encode(avg.clone().into_value()),
            Accumulator::VarintSum(sum) => encode(Value::Varint(sum.clone())),
            Accumulator::VarintAvg { sum, count } => {
                let avg = if *count == 0 {
                    BigInt::from(0)
                } else {
                    sum / BigInt::from(*count)
                };
                encode(Value::Varint(avg))
            }
        }
    }
}

/// Keeps `bytes` as the best value so far when it compares as `wanted` to the current best.
fn keep_if(ty: &CqlType, best: &mut Option<Vec<u8>>, bytes: &[u8], wanted: Ordering) {
    if best
        .as_deref()
        .is_none_or(|b| types::compare(ty, bytes, b) == wanted)
    {
        *best = Some(bytes.to_vec());
    }
}

/// `BigDecimal.valueOf(double)`: the decimal of Java's text for the double.
fn java_decimal_of(d: f64) -> Result<Decimal, QueryError> {
    Decimal::parse(&numbers::java_double_text(d))
        .ok_or_else(|| QueryError::Invalid(format!("Cannot average the non-finite value {d}")))
}

/// An integer argument's value; `None` for the empty value, which functions see as null.
fn integer(ty: &CqlType, bytes: &[u8]) -> Result<Option<i64>, QueryError> {
    Ok(match Value::decode(ty, bytes)? {
        Value::Tinyint(v) => Some(i64::from(v)),
        Value::Smallint(v) => Some(i64::from(v)),
        Value::Int(v) => Some(i64::from(v)),
        Value::Bigint(v) | Value::Counter(v) => Some(v),
        _ => None,
    })
}

fn floating(ty: &CqlType, bytes: &[u8]) -> Result<Option<f64>, QueryError> {
    Ok(match Value::decode(ty, bytes)? {
        Value::Float(v) => Some(f64::from(v)),
        Value::Double(v) => Some(v),
        _ => None,
    })
}

fn decimal(bytes: &[u8]) -> Result<Option<Decimal>, QueryError> {
    Ok(match Value::decode(&CqlType::Decimal, bytes)? {
        Value::Decimal { unscaled, scale } => Some(Decimal::new(unscaled, scale)),
        _ => None,
    })
}

/// Narrows a sum to the width of its type, as Java's `byte`/`short`/`int` arithmetic does.
fn wrap(ty: &CqlType, v: i64) -> i64 {
    match ty {
        CqlType::Tinyint => i64::from(v as i8),
        CqlType::Smallint => i64::from(v as i16),
        CqlType::Int => i64::from(v as i32),
        _ => v,
    }
}

fn integer_value(ty: &CqlType, v: i64) -> Value {
    match ty {
        CqlType::Tinyint => Value::Tinyint(v as i8),
        CqlType::Smallint => Value::Smallint(v as i16),
        CqlType::Int => Value::Int(v as i32),
        CqlType::Counter => Value::Counter(v),
        _ => Value::Bigint(v),
    }
}

fn float_value(ty: &CqlType, v: f64) -> Value {
    if *ty == CqlType::Float {
        Value::Float(v as f32)
    } else {
        Value::Double(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(function: AggregateFunction, ty: CqlType, values: &[Value]) -> Option<Value> {
        let mut acc = Accumulator::new(function, &ty);
        for v in values {
            let mut b = Vec::new();
            v.encode(&mut b);
            acc.add(Some(&b)).expect("adds");
        }
        acc.result()
            .map(|b| Value::decode(&ty, &b).expect("decodes"))
    }

    #[test]
    fn integer_sums_wrap_and_averages_do_not_overflow() {
        let ints = [Value::Int(i32::MAX), Value::Int(1)];
        assert_eq!(
            run(AggregateFunction::Sum, CqlType::Int, &ints),
            Some(Value::Int(i32::MIN))
        );
        assert_eq!(
            run(AggregateFunction::Avg, CqlType::Int, &ints),
            Some(Value::Int(1_073_741_824))
        );
        let longs = [Value::Bigint(i64::MAX), Value::Bigint(i64::MAX)];
        assert_eq!(
            run(AggregateFunction::Avg, CqlType::Bigint, &longs),
            Some(Value::Bigint(i64::MAX))
        );
        assert_eq!(
            run(
                AggregateFunction::Avg,
                CqlType::Int,
                &[Value::Int(1), Value::Int(2), Value::Int(4)]
            ),
            Some(Value::Int(2))
        );
        assert_eq!(
            run(
                AggregateFunction::Avg,
                CqlType::Int,
                &[Value::Int(-7), Value::Int(0)]
            ),
            Some(Value::Int(-3))
        );
        assert_eq!(
            run(AggregateFunction::Sum, CqlType::Int, &[]),
            Some(Value::Int(0))
        );
        assert_eq!(run(AggregateFunction::Max, CqlType::Int, &[]), None);
    }

    #[test]
    fn decimal_average_is_a_rounded_running_mean() {
        let d = |s: &str| Decimal::parse(s).expect("decimal").into_value();
        assert_eq!(
            run(
                AggregateFunction::Avg,
                CqlType::Decimal,
                &[d("1.1"), d("2.2")]
            ),
            Some(d("1.7"))
        );
        assert_eq!(
            run(
                AggregateFunction::Sum,
                CqlType::Decimal,
                &[d("1.1"), d("2.2")]
            ),
            Some(d("3.3"))
        );
        assert_eq!(
            run(AggregateFunction::Avg, CqlType::Decimal, &[]),
            Some(d("0"))
        );
    }

    #[test]
    fn float_sums_are_compensated() {
        let tenths: Vec<Value> = (0..10).map(|_| Value::Double(0.1)).collect();
        assert_eq!(
            run(AggregateFunction::Sum, CqlType::Double, &tenths),
            Some(Value::Double(1.0))
        );
        let huge = [Value::Double(f64::MAX), Value::Double(f64::MAX)];
        assert_eq!(
            run(AggregateFunction::Avg, CqlType::Double, &huge),
            Some(Value::Double(f64::MAX))
        );
        let inf = [Value::Double(f64::INFINITY), Value::Double(f64::INFINITY)];
        assert_eq!(
            run(AggregateFunction::Sum, CqlType::Double, &inf),
            Some(Value::Double(f64::INFINITY))
        );
    }
}
