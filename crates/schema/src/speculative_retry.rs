//! The `speculative_retry` table option as a typed policy (Cassandra 5.0's
//! `SpeculativeRetryPolicy`), parsed once when a table is created, altered or loaded, so the
//! coordinator's read path never parses text.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::SchemaError;

/// When a read's coordinator sends the read to one more replica than its consistency level
/// needs, because those it asked have not answered yet (Cassandra's `SpeculativeRetryPolicy`).
///
/// Invariants: a percentile is in (0, 100) exclusive; `Min`/`Max` hold one percentile and one
/// fixed time. Printed (and persisted) exactly as Cassandra prints it: `99p`, `50ms`,
/// `ALWAYS`, `NEVER`, `MIN(99p,50ms)`, `MAX(99p,50ms)`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum SpeculativeRetry {
    /// `NEVER` (or `NONE`): never send to an extra replica.
    Never,
    /// `ALWAYS`: send to one extra replica at once, with the others.
    Always,
    /// `Xp` / `XPERCENTILE`: after the table's coordinator read latency at that percentile.
    Percentile(f64),
    /// `Xms`: after a fixed time, in whole milliseconds.
    Fixed { ms: u64 },
    /// `MIN(Xp,Yms)`: the shorter of the two.
    Min { percentile: f64, ms: u64 },
    /// `MAX(Xp,Yms)`: the longer of the two.
    Max { percentile: f64, ms: u64 },
}

impl Default for SpeculativeRetry {
    /// Cassandra's default, `99p`.
    fn default() -> SpeculativeRetry {
        SpeculativeRetry::Percentile(99.0)
    }
}

impl SpeculativeRetry {
    /// Parses a policy as Cassandra 5.0's `SpeculativeRetryPolicy.fromString` does, case
    /// insensitively, refusing what it refuses with its words (which name
    /// `speculative_retry` for `additional_write_policy` too).
    pub fn parse(value: &str) -> Result<SpeculativeRetry, SchemaError> {
        let invalid = || invalid_retry(value);
        let upper = value.trim().to_ascii_uppercase();
        match upper.as_str() {
            "ALWAYS" => return Ok(SpeculativeRetry::Always),
            "NEVER" | "NONE" => return Ok(SpeculativeRetry::Never),
            _ => {}
        }
        for function in ["MIN", "MAX"] {
            if let Some(args) = upper
                .strip_prefix(function)
                .and_then(|rest| rest.trim_start().strip_prefix('('))
                .and_then(|rest| rest.strip_suffix(')'))
            {
                let (a, b) = args.split_once(',').ok_or_else(invalid)?;
                let (percentile, ms) = match (
                    simple_retry(a.trim(), value)?,
                    simple_retry(b.trim(), value)?,
                ) {
                    (SpeculativeRetry::Percentile(p), SpeculativeRetry::Fixed { ms })
                    | (SpeculativeRetry::Fixed { ms }, SpeculativeRetry::Percentile(p)) => (p, ms),
                    _ => return Err(invalid()),
                };
                return Ok(if function == "MIN" {
                    SpeculativeRetry::Min { percentile, ms }
                } else {
                    SpeculativeRetry::Max { percentile, ms }
                });
            }
        }
        simple_retry(&upper, value)
    }

    /// The time after which a read speculates, as Cassandra's `calculateThreshold`:
    /// `percentile_latency` is the table's coordinator read latency at a percentile (`None`
    /// while nothing was measured, when a percentile policy keeps `previous`). `None` for
    /// `NEVER` and `ALWAYS`, which need no threshold.
    pub fn threshold(
        self,
        percentile_latency: impl Fn(f64) -> Option<Duration>,
        previous: Duration,
    ) -> Option<Duration> {
        let fixed = |ms: u64| Duration::from_millis(ms);
        match self {
            SpeculativeRetry::Never | SpeculativeRetry::Always => None,
            SpeculativeRetry::Fixed { ms } => Some(fixed(ms)),
            SpeculativeRetry::Percentile(p) => Some(percentile_latency(p).unwrap_or(previous)),
            SpeculativeRetry::Min { percentile, ms } => {
                Some(percentile_latency(percentile).map_or(previous, |l| l.min(fixed(ms))))
            }
            SpeculativeRetry::Max { percentile, ms } => {
                Some(percentile_latency(percentile).map_or(previous, |l| l.max(fixed(ms))))
            }
        }
    }

    /// The percentile of the read latency this policy reads, if any.
    pub fn percentile(self) -> Option<f64> {
        match self {
            SpeculativeRetry::Percentile(p)
            | SpeculativeRetry::Min { percentile: p, .. }
            | SpeculativeRetry::Max { percentile: p, .. } => Some(p),
            _ => None,
        }
    }
}

/// Cassandra's refusal of a retry policy it cannot parse (for either option).
fn invalid_retry(value: &str) -> SchemaError {
    SchemaError::Config(format!(
        "Invalid value {value} for option 'speculative_retry'"
    ))
}

/// A percentile or a fixed time (upper case), alone.
fn simple_retry(upper: &str, value: &str) -> Result<SpeculativeRetry, SchemaError> {
    let invalid = || invalid_retry(value);
    let number = |digits: &str| digits.trim().parse::<f64>().ok().filter(|n| n.is_finite());
    if let Some(digits) = upper.strip_suffix("MS") {
        let ms = number(digits).filter(|n| *n >= 0.0).ok_or_else(invalid)?;
        // Whole milliseconds, as Cassandra's `(int)` cast.
        return Ok(SpeculativeRetry::Fixed { ms: ms as u64 });
    }
    if let Some(digits) = upper
        .strip_suffix("PERCENTILE")
        .or_else(|| upper.strip_suffix('P'))
    {
        let p = number(digits).ok_or_else(invalid)?;
        if p <= 0.0 || p >= 100.0 {
            return Err(SchemaError::Config(format!(
                "Invalid value {value} for PERCENTILE option 'speculative_retry': must be between (0.0 and 100.0)"
            )));
        }
        return Ok(SpeculativeRetry::Percentile(p));
    }
    Err(invalid())
}

/// A percentile as Cassandra prints it: Java's `DecimalFormat("#.####")`, then `p`.
fn percentile_text(p: f64) -> String {
    let text = format!("{p:.4}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text}p")
}

impl fmt::Display for SpeculativeRetry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            SpeculativeRetry::Never => f.write_str("NEVER"),
            SpeculativeRetry::Always => f.write_str("ALWAYS"),
            SpeculativeRetry::Percentile(p) => f.write_str(&percentile_text(p)),
            SpeculativeRetry::Fixed { ms } => write!(f, "{ms}ms"),
            SpeculativeRetry::Min { percentile, ms } => {
                write!(f, "MIN({},{ms}ms)", percentile_text(percentile))
            }
            SpeculativeRetry::Max { percentile, ms } => {
                write!(f, "MAX({},{ms}ms)", percentile_text(percentile))
            }
        }
    }
}

impl From<SpeculativeRetry> for String {
    fn from(policy: SpeculativeRetry) -> String {
        policy.to_string()
    }
}

impl TryFrom<String> for SpeculativeRetry {
    type Error = SchemaError;

    fn try_from(text: String) -> Result<SpeculativeRetry, SchemaError> {
        SpeculativeRetry::parse(&text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_as_cassandra() {
        for (input, printed) in [
            ("99p", "99p"),
            ("99PERCENTILE", "99p"),
            ("99.5p", "99.5p"),
            ("12.345678p", "12.3457p"),
            ("50ms", "50ms"),
            ("50.9MS", "50ms"),
            ("always", "ALWAYS"),
            ("none", "NEVER"),
            ("NEVER", "NEVER"),
            ("min(99p, 50ms)", "MIN(99p,50ms)"),
            ("MAX(10ms,95p)", "MAX(95p,10ms)"),
        ] {
            let policy = SpeculativeRetry::parse(input).expect(input);
            assert_eq!(policy.to_string(), printed, "{input}");
            // Printing is stable: what was printed parses back to the same text.
            let again = SpeculativeRetry::parse(printed).expect(printed);
            assert_eq!(again.to_string(), printed);
        }
    }

    #[test]
    fn refuses_what_cassandra_refuses() {
        for bad in [
            "",
            "fast",
            "100p",
            "0p",
            "-5ms",
            "MIN(99p,95p)",
            "MIN(10ms)",
            "MAX(1ms,2ms)",
        ] {
            let e = SpeculativeRetry::parse(bad).expect_err(bad);
            assert!(e.to_string().contains("'speculative_retry'"), "{bad}: {e}");
        }
        assert_eq!(
            SpeculativeRetry::parse("100p").unwrap_err().to_string(),
            SchemaError::Config(
                "Invalid value 100p for PERCENTILE option 'speculative_retry': must be between (0.0 and 100.0)"
                    .to_string()
            )
            .to_string()
        );
    }

    #[test]
    fn thresholds_follow_cassandra() {
        let ms = Duration::from_millis;
        let measured = |p: f64| Some(ms(p as u64));
        let unmeasured = |_: f64| None;
        let previous = ms(2_500);
        assert_eq!(SpeculativeRetry::Never.threshold(measured, previous), None);
        assert_eq!(SpeculativeRetry::Always.threshold(measured, previous), None);
        let fixed = SpeculativeRetry::Fixed { ms: 7 };
        assert_eq!(fixed.threshold(unmeasured, previous), Some(ms(7)));
        let p99 = SpeculativeRetry::Percentile(99.0);
        assert_eq!(p99.threshold(measured, previous), Some(ms(99)));
        assert_eq!(p99.threshold(unmeasured, previous), Some(previous));
        let min = SpeculativeRetry::Min {
            percentile: 99.0,
            ms: 10,
        };
        assert_eq!(min.threshold(measured, previous), Some(ms(10)));
        assert_eq!(min.threshold(unmeasured, previous), Some(previous));
        let max = SpeculativeRetry::Max {
            percentile: 99.0,
            ms: 10,
        };
        assert_eq!(max.threshold(measured, previous), Some(ms(99)));
    }

    #[test]
    fn persists_as_its_text() {
        let policy = SpeculativeRetry::Min {
            percentile: 99.0,
            ms: 50,
        };
        let json = serde_json::to_string(&policy).expect("serialises");
        assert_eq!(json, "\"MIN(99p,50ms)\"");
        let back: SpeculativeRetry = serde_json::from_str(&json).expect("deserialises");
        assert_eq!(back, policy);
        assert!(serde_json::from_str::<SpeculativeRetry>("\"soon\"").is_err());
    }
}
