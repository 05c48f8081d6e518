//! Cassandra 5.0's `floor` functions (`TimeFcts`), which round a time down to a multiple of a
//! duration counted from a starting time (the Unix epoch unless given): of a timestamp (or a
//! timeuuid's time, giving a timestamp), of a date, and of a time of day. They are what
//! `GROUP BY pk, floor(ts, 1h)` groups by.
//!
//! Durations without months are plain arithmetic on milliseconds; with months the steps follow
//! the calendar in UTC, as `Duration.floorTimestamp` computes them with `java.util.Calendar`.

use types::temporal::{civil_from_days, days_from_civil, days_in_month, MILLIS_PER_DAY};
use types::{CqlType, Value, DATE_EPOCH};

use crate::QueryError;

const NANOS_PER_MILLI: i64 = 1_000_000;
const MONTHS_PER_YEAR: i64 = 12;
/// The most calendar steps `floor` takes back when a duration's days overshoot (Cassandra steps
/// one at a time; only absurd durations and times need more than a few thousand).
const MAX_FLOOR_STEPS: u32 = 1_000_000;

/// `floor`'s signatures, in the order Cassandra lists them: (value, duration) and, except for
/// times, (value, duration, start).
pub(crate) fn signatures() -> Vec<(Vec<CqlType>, CqlType)> {
    use CqlType::*;
    vec![
        (vec![Timestamp, Duration], Timestamp),
        (vec![Timeuuid, Duration, Timestamp], Timestamp),
        (vec![Timeuuid, Duration], Timestamp),
        (vec![Date, Duration], Date),
        (vec![Date, Duration, Date], Date),
        (vec![Timestamp, Duration, Timestamp], Timestamp),
        (vec![Time, Duration], Time),
    ]
}

fn invalid(message: String) -> QueryError {
    QueryError::Invalid(message)
}

fn encode(v: Value) -> Vec<u8> {
    let mut out = Vec::new();
    v.encode(&mut out);
    out
}

/// `floor(value, duration[, start])` of non-null arguments of types `types`.
pub(crate) fn call(
    types: &[CqlType],
    args: &[Option<Vec<u8>>],
) -> Result<Option<Vec<u8>>, QueryError> {
    let (Some(Some(value)), Some(Some(duration))) = (args.first(), args.get(1)) else {
        return Ok(None);
    };
    let Value::Duration {
        months,
        days,
        nanoseconds,
    } = Value::decode(&CqlType::Duration, duration)?
    else {
        return Ok(None);
    };
    let duration = Duration {
        months,
        days,
        nanoseconds,
    };
    let start = match args.get(2) {
        Some(Some(start)) => Some(Value::decode(&types[2], start)?),
        Some(None) => return Ok(None),
        None => None,
    };
    let value = Value::decode(&types[0], value)?;
    Ok(Some(encode(match value {
        Value::Empty => return Ok(None),
        Value::Timestamp(ms) => {
            Value::Timestamp(floor_timestamp_checked(ms, &duration, start_millis(start))?)
        }
        Value::Timeuuid(u) => {
            let ms = timeuuid_millis(&u);
            Value::Timestamp(floor_timestamp_checked(ms, &duration, start_millis(start))?)
        }
        Value::Date(d) => {
            if duration.nanoseconds != 0 {
                return Err(invalid(format!(
                    "The floor on date values cannot be computed for the {} duration as precision is below 1 day",
                    duration.text()
                )));
            }
            let ms = date_millis(d);
            let start = match start {
                Some(Value::Date(s)) => date_millis(s),
                _ => 0,
            };
            let floor = floor_timestamp(ms, &duration, start)?;
            Value::Date((floor.div_euclid(MILLIS_PER_DAY) + i64::from(DATE_EPOCH)) as u32)
        }
        Value::Time(ns) => {
            if duration.months != 0 || duration.days != 0 {
                return Err(invalid(
                    "For time values, the floor can only be computed for durations smaller that a day"
                        .to_string(),
                ));
            }
            if duration.nanoseconds < 0 {
                return Err(negative());
            }
            Value::Time(if duration.nanoseconds == 0 {
                ns
            } else {
                ns - ns % duration.nanoseconds
            })
        }
        other => return Err(QueryError::Server(format!("floor of {other:?}"))),
    })))
}

struct Duration {
    months: i32,
    days: i32,
    nanoseconds: i64,
}

impl Duration {
    fn text(&self) -> String {
        Value::Duration {
            months: self.months,
            days: self.days,
            nanoseconds: self.nanoseconds,
        }
        .to_cql_literal()
    }

    fn is_negative(&self) -> bool {
        self.months < 0 || self.days < 0 || self.nanoseconds < 0
    }

    /// `getDurationMilliseconds`: the days and nanoseconds, without the months.
    fn millis(&self) -> i64 {
        MILLIS_PER_DAY * i64::from(self.days) + self.nanoseconds / NANOS_PER_MILLI
    }
}

fn negative() -> QueryError {
    invalid("Negative durations are not supported by the floor function".to_string())
}

fn start_millis(start: Option<Value>) -> i64 {
    match start {
        Some(Value::Timestamp(ms)) => ms,
        _ => 0,
    }
}

fn date_millis(days: u32) -> i64 {
    (i64::from(days) - i64::from(DATE_EPOCH)) * MILLIS_PER_DAY
}

fn timeuuid_millis(u: &uuid::Uuid) -> i64 {
    /// Offset between the UUID epoch (1582-10-15) and the Unix epoch, in 100 ns units.
    const UUID_EPOCH_OFFSET_100NS: i64 = 0x01B2_1DD2_1381_4000;
    let msb = u.as_u64_pair().0;
    let ticks = ((msb & 0x0FFF) << 48) | (((msb >> 16) & 0xFFFF) << 32) | (msb >> 32);
    (ticks as i64 - UUID_EPOCH_OFFSET_100NS).div_euclid(10_000)
}

/// Timestamps floor only to whole milliseconds.
fn floor_timestamp_checked(
    time_ms: i64,
    duration: &Duration,
    start_ms: i64,
) -> Result<i64, QueryError> {
    if duration.nanoseconds % NANOS_PER_MILLI != 0 {
        return Err(invalid(format!(
            "The floor cannot be computed for the {} duration as precision is below 1 millisecond",
            duration.text()
        )));
    }
    floor_timestamp(time_ms, duration, start_ms)
}

/// A UTC calendar position, as `java.util.Calendar` keeps it: adding months keeps the day of
/// the month (clamped to the month's length) and the time of day.
#[derive(Clone, Copy)]
struct Calendar {
    year: i64,
    month: u32,
    day: u32,
    millis_of_day: i64,
}

impl Calendar {
    fn at(ms: i64) -> Calendar {
        let (year, month, day) = civil_from_days(ms.div_euclid(MILLIS_PER_DAY));
        Calendar {
            year,
            month,
            day,
            millis_of_day: ms.rem_euclid(MILLIS_PER_DAY),
        }
    }

    fn add_months(&mut self, months: i64) -> Result<(), QueryError> {
        let total = self
            .year
            .checked_mul(MONTHS_PER_YEAR)
            .and_then(|m| m.checked_add(i64::from(self.month) - 1 + months))
            .ok_or_else(out_of_range)?;
        self.year = total.div_euclid(MONTHS_PER_YEAR);
        self.month = (total.rem_euclid(MONTHS_PER_YEAR) + 1) as u32;
        self.day = self.day.min(days_in_month(self.year, self.month));
        Ok(())
    }

    fn millis(&self) -> Result<i64, QueryError> {
        days_from_civil(self.year, self.month, self.day)
            .checked_mul(MILLIS_PER_DAY)
            .and_then(|ms| ms.checked_add(self.millis_of_day))
            .ok_or_else(out_of_range)
    }
}

/// A floor beyond the 64-bit millisecond range (Java's arithmetic would wrap around).
fn out_of_range() -> QueryError {
    invalid("The floor of this time is out of the range of timestamps".to_string())
}

/// `Duration.floorTimestamp`: the largest `start + n × duration` not after `time`.
fn floor_timestamp(time_ms: i64, duration: &Duration, start_ms: i64) -> Result<i64, QueryError> {
    if start_ms > time_ms {
        return Err(invalid(
            "The floor function starting time is greater than the provided time".to_string(),
        ));
    }
    if duration.is_negative() {
        return Err(negative());
    }
    if duration.months == 0 {
        let step = duration.millis();
        if step == 0 {
            return Ok(time_ms);
        }
        let since_start = time_ms.checked_sub(start_ms).ok_or_else(out_of_range)?;
        return Ok(time_ms - since_start % step);
    }
    let time = Calendar::at(time_ms);
    let mut calendar = Calendar::at(start_ms);
    let months_between = (time.year - calendar.year) * MONTHS_PER_YEAR
        + (i64::from(time.month) - i64::from(calendar.month));
    let months = i64::from(duration.months);
    let mut multiplier = months_between / months;
    calendar.add_months(multiplier * months)?;
    if duration.days == 0 && duration.nanoseconds == 0 {
        return calendar.millis();
    }
    let step = duration.millis();
    let floor_at = |calendar: &Calendar, multiplier: i64| -> Result<i64, QueryError> {
        multiplier
            .checked_mul(step)
            .and_then(|days| days.checked_add(calendar.millis().ok()?))
            .ok_or_else(out_of_range)
    };
    let mut floor = floor_at(&calendar, multiplier)?;
    // Adding the days overshoots; step back until the floor is not after the time.
    let mut steps = 0;
    while floor > time_ms {
        steps += 1;
        if steps > MAX_FLOOR_STEPS {
            return Err(invalid(format!(
                "The floor of this time for the {} duration needs more than {MAX_FLOOR_STEPS} calendar steps, which Helenus does not take",
                duration.text()
            )));
        }
        multiplier -= 1;
        calendar.add_months(-months)?;
        floor = floor_at(&calendar, multiplier)?;
    }
    Ok(start_ms.max(floor))
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: i64 = 1_577_837_400_000; // 2020-01-01 00:10:00 UTC

    fn floor(ms: i64, months: i32, days: i32, nanoseconds: i64, start: i64) -> i64 {
        let d = Duration {
            months,
            days,
            nanoseconds,
        };
        floor_timestamp(ms, &d, start).expect("floors")
    }

    #[test]
    fn timestamps_floor_from_the_epoch_or_a_start() {
        let hour = 3_600_000_000_000;
        assert_eq!(floor(T, 0, 0, hour, 0), 1_577_836_800_000); // 00:00
                                                                // 25h steps from the epoch: 2019-12-31 11:00.
        assert_eq!(floor(T, 0, 0, 25 * hour, 0), 1_577_790_000_000);
        // 7 days from a Thursday: 2019-12-26.
        assert_eq!(floor(T, 0, 7, 0, 0), 1_577_318_400_000);
        // One month and a day, stepped on the calendar: 2019-12-02.
        assert_eq!(floor(T, 1, 1, 0, 0), 1_575_244_800_000);
        assert_eq!(floor(T, 12, 0, 0, 0), 1_577_836_800_000);
        // From 2019-12-31 23:30: 23:30.
        assert_eq!(floor(T, 0, 0, hour, T - 40 * 60_000), T - 40 * 60_000);
        assert!(floor_timestamp(
            0,
            &Duration {
                months: 0,
                days: 0,
                nanoseconds: hour
            },
            1
        )
        .is_err());
    }
}
