//! A table's `compaction` option as Cassandra 5.0 reads, stores and validates it
//! (`CompactionParams.fromMap` and `validate`, and the `validateOptions` of
//! `AbstractCompactionStrategy` and of each strategy). RocksDB compacts every table alike; the
//! option is kept, and refused, as Cassandra would, so that schemas move between the two.

use std::collections::BTreeMap;

use crate::java;
use crate::SchemaError;

/// The compaction strategies Cassandra 5.0 has, in `COMPACTION_PACKAGE`.
const COMPACTION_PACKAGE: &str = "org.apache.cassandra.db.compaction";
const STCS: &str = "SizeTieredCompactionStrategy";
const LCS: &str = "LeveledCompactionStrategy";
const TWCS: &str = "TimeWindowCompactionStrategy";
const UCS: &str = "UnifiedCompactionStrategy";
const STRATEGIES: [&str; 4] = [STCS, LCS, TWCS, UCS];

/// Thresholds every strategy but UCS stores, with Cassandra's defaults.
const MIN_THRESHOLD: &str = "min_threshold";
const MAX_THRESHOLD: &str = "max_threshold";
const DEFAULT_MIN_THRESHOLD: i32 = 4;
const DEFAULT_MAX_THRESHOLD: i32 = 32;

/// The options UCS understands beyond the common ones (its `Controller`): any other is
/// refused.
const UCS_OPTIONS: [&str; 10] = [
    "scaling_parameters",
    "base_shard_count",
    "target_sstable_size",
    "flush_size_override",
    "max_sstables_to_compact",
    "expired_sstable_check_frequency_seconds",
    "unsafe_aggressive_sstable_expiration",
    "overlap_inclusion_method",
    "min_sstable_size",
    "sstable_growth",
];

fn config(message: String) -> SchemaError {
    SchemaError::Config(message)
}

/// `CompactionParams.fromMap` and `create`: the class resolved to its full name, the
/// thresholds filled in for the strategies that take them. What is checked here is refused
/// while the statement's properties are read; the rest by [`validate`].
pub(crate) fn from_map(
    mut options: BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, SchemaError> {
    let class = options.remove("class").ok_or_else(|| {
        config("Missing sub-option 'class' for the 'compaction' option".to_string())
    })?;
    let full = if class.contains('.') {
        class
    } else {
        format!("{COMPACTION_PACKAGE}.{class}")
    };
    if strategy(&full).is_none() {
        return Err(config(format!(
            "Unable to find compaction strategy class '{full}'"
        )));
    }
    if let Some(v) = options.get("provide_overlapping_tombstones") {
        let upper = v.to_uppercase();
        if !matches!(upper.as_str(), "NONE" | "ROW" | "CELL") {
            return Err(config(format!(
                "Invalid value {upper} for 'provide_overlapping_tombstones' compaction sub-option - must be one of the following [NONE, ROW, CELL]."
            )));
        }
    }
    if strategy(&full) != Some(UCS) {
        options
            .entry(MIN_THRESHOLD.to_string())
            .or_insert_with(|| DEFAULT_MIN_THRESHOLD.to_string());
        options
            .entry(MAX_THRESHOLD.to_string())
            .or_insert_with(|| DEFAULT_MAX_THRESHOLD.to_string());
    }
    options.insert("class".to_string(), full);
    Ok(options)
}

/// The strategy a full class name names, by its simple name.
fn strategy(full: &str) -> Option<&'static str> {
    let name = full.strip_prefix(COMPACTION_PACKAGE)?.strip_prefix('.')?;
    STRATEGIES.into_iter().find(|s| *s == name)
}

/// `CompactionParams.validate`: the strategy's options, then the thresholds.
pub(crate) fn validate(stored: &BTreeMap<String, String>) -> Result<(), SchemaError> {
    let Some(strategy) = stored.get("class").and_then(|c| strategy(c)) else {
        // A stored map always names one of the strategies (`from_map`).
        return Ok(());
    };
    let mut options = stored.clone();
    options.remove("class");
    let unchecked = match strategy {
        STCS => {
            let mut unchecked = common(&options)?;
            size_tiered(&options, &mut unchecked)?;
            remove_thresholds(&mut unchecked);
            unchecked
        }
        LCS => leveled(&options)?,
        TWCS => time_window(&options)?,
        _ => unified(&options)?,
    };
    if !unchecked.is_empty() {
        let keys: Vec<&str> = java::hash_order(unchecked.keys()).collect();
        return Err(config(format!(
            "Properties specified [{}] are not understood by {strategy}",
            keys.join(", ")
        )));
    }
    thresholds(&options)
}

/// The thresholds' checks (`CompactionParams.validate`): digits only, then in range.
fn thresholds(options: &BTreeMap<String, String>) -> Result<(), SchemaError> {
    for key in [MIN_THRESHOLD, MAX_THRESHOLD] {
        if let Some(v) = options.get(key) {
            // Commons Lang's `StringUtils.isNumeric`: digits, no sign.
            if v.is_empty() || !v.chars().all(|c| c.is_ascii_digit()) {
                return Err(config(format!(
                    "Invalid value {v} for '{key}' compaction sub-option - must be an integer"
                )));
            }
        }
    }
    let threshold = |key: &str, default: i32| -> Result<i32, SchemaError> {
        match options.get(key) {
            None => Ok(default),
            // Digits too many for an int: Cassandra's `Integer.parseInt` fails (a server
            // error there); a configuration error with its words here.
            Some(v) => {
                java::parse_int(v).ok_or_else(|| config(format!("For input string: \"{v}\"")))
            }
        }
    };
    let min = threshold(MIN_THRESHOLD, DEFAULT_MIN_THRESHOLD)?;
    let max = threshold(MAX_THRESHOLD, DEFAULT_MAX_THRESHOLD)?;
    if min <= 0 || max <= 0 {
        return Err(config(
            "Disabling compaction by setting compaction thresholds to 0 has been removed, set the compaction option 'enabled' to false instead."
                .to_string(),
        ));
    }
    if min <= 1 {
        return Err(config(format!(
            "Min compaction threshold cannot be less than 2 (got {min})"
        )));
    }
    if min > max {
        return Err(config(format!(
            "Min compaction threshold (got {min}) cannot be greater than max compaction threshold (got {max})"
        )));
    }
    Ok(())
}

fn remove_thresholds(unchecked: &mut BTreeMap<String, String>) {
    unchecked.remove(MIN_THRESHOLD);
    unchecked.remove(MAX_THRESHOLD);
}

/// `AbstractCompactionStrategy.validateOptions`: the options every strategy takes. Returns
/// the options it does not know.
fn common(options: &BTreeMap<String, String>) -> Result<BTreeMap<String, String>, SchemaError> {
    if let Some(v) = options.get("tombstone_threshold") {
        let t = java::parse_double(v).ok_or_else(|| {
            config(format!(
                "{v} is not a parsable int (base10) for tombstone_threshold"
            ))
        })?;
        // `Float.parseFloat`: the value as a float.
        let t = f64::from(t as f32);
        if t < 0.0 {
            return Err(config(format!(
                "tombstone_threshold must be greater than 0, but was {}",
                java::format_fixed6(t)
            )));
        }
    }
    if let Some(v) = options.get("tombstone_compaction_interval") {
        let t = java::parse_long(v).ok_or_else(|| {
            config(format!(
                "{v} is not a parsable int (base10) for tombstone_compaction_interval"
            ))
        })?;
        if t < 0 {
            return Err(config(format!(
                "tombstone_compaction_interval must be greater than 0, but was {t}"
            )));
        }
    }
    let boolean = |key: &str| options.get(key).filter(|v| !is_true_or_false(v));
    if let Some(v) = boolean("unchecked_tombstone_compaction") {
        return Err(config(format!(
            "'unchecked_tombstone_compaction' should be either 'true' or 'false', not '{v}'"
        )));
    }
    if let Some(v) = boolean("log_all") {
        return Err(config(format!(
            "'log_all' should either be 'true' or 'false', not {v}"
        )));
    }
    if let Some(v) = boolean("enabled") {
        return Err(config(format!(
            "enabled should either be 'true' or 'false', not {v}"
        )));
    }
    let mut unchecked = options.clone();
    for key in [
        "tombstone_threshold",
        "tombstone_compaction_interval",
        "unchecked_tombstone_compaction",
        "log_all",
        "enabled",
        "only_purge_repaired_tombstones",
        "provide_overlapping_tombstones",
    ] {
        unchecked.remove(key);
    }
    Ok(unchecked)
}

/// Java's `equalsIgnoreCase` against `true` and `false`.
fn is_true_or_false(v: &str) -> bool {
    v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("false")
}

/// `SizeTieredCompactionStrategyOptions.validateOptions` (also run by LCS and TWCS).
fn size_tiered(
    options: &BTreeMap<String, String>,
    unchecked: &mut BTreeMap<String, String>,
) -> Result<(), SchemaError> {
    if let Some(v) = options.get("min_sstable_size") {
        let size = java::parse_long(v).ok_or_else(|| {
            config(format!(
                "{v} is not a parsable int (base10) for min_sstable_size"
            ))
        })?;
        if size < 0 {
            return Err(config(format!(
                "min_sstable_size must be non negative: {size}"
            )));
        }
    }
    let double = |key: &str, default: f64| -> Result<f64, SchemaError> {
        match options.get(key) {
            None => Ok(default),
            Some(v) => java::parse_double(v)
                .ok_or_else(|| config(format!("{v} is not a parsable float for {key}"))),
        }
    };
    let low = double("bucket_low", 0.5)?;
    let high = double("bucket_high", 1.5)?;
    // Java's `<=`, false when either is NaN.
    if high <= low {
        return Err(config(format!(
            "bucket_high value ({}) is less than or equal to the bucket_low value ({})",
            java::double_to_string(high),
            java::double_to_string(low)
        )));
    }
    for key in ["min_sstable_size", "bucket_low", "bucket_high"] {
        unchecked.remove(key);
    }
    Ok(())
}

/// The levels LCS sizes (`LeveledGenerations.MAX_LEVEL_COUNT - 1`): the largest level holds
/// `fanout_size^8` SSTables, whose bytes must fit a Java long.
const LCS_TOP_LEVEL: u32 = 8;

/// `LeveledCompactionStrategy.validateOptions`.
fn leveled(options: &BTreeMap<String, String>) -> Result<BTreeMap<String, String>, SchemaError> {
    let mut unchecked = common(options)?;
    let positive_int = |key: &str, default: i32| -> Result<i32, SchemaError> {
        let Some(v) = options.get(key) else {
            return Ok(default);
        };
        let n = java::parse_int(v)
            .ok_or_else(|| config(format!("{v} is not a parsable int (base10) for {key}")))?;
        if n < 1 {
            return Err(config(format!("{key} must be larger than 0, but was {n}")));
        }
        Ok(n)
    };
    // Cassandra sizes the check with 1 MiB when no size is given (not the 160 MiB default).
    let size_mb = positive_int("sstable_size_in_mb", 1)?;
    unchecked.remove("sstable_size_in_mb");
    let fanout = positive_int("fanout_size", 10)?;
    let level_bytes = Natural::from(u64::from(fanout as u32))
        .pow(LCS_TOP_LEVEL)
        .times(u64::from(size_mb as u32) * 1024 * 1024);
    if !level_bytes.fits_i64() {
        return Err(config(format!(
            "At most {} bytes may be in a compaction level; your maxSSTableSize must be absurdly high to compute {}",
            i64::MAX,
            level_bytes
        )));
    }
    for key in ["fanout_size", "single_sstable_uplevel"] {
        unchecked.remove(key);
    }
    remove_thresholds(&mut unchecked);
    size_tiered(options, &mut unchecked)?;
    Ok(unchecked)
}

/// `TimeWindowCompactionStrategyOptions.validateOptions`, then the size-tiered options.
fn time_window(
    options: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, SchemaError> {
    let mut unchecked = common(options)?;
    let unit = |key: &str, valid: &[&str]| -> Result<(), SchemaError> {
        match options.get(key) {
            // `TimeUnit.valueOf`: the constant's exact name.
            Some(v) if !valid.contains(&v.as_str()) => {
                Err(config(format!("{v} is not valid for {key}")))
            }
            _ => Ok(()),
        }
    };
    unit(
        "timestamp_resolution",
        &["SECONDS", "MILLISECONDS", "MICROSECONDS", "NANOSECONDS"],
    )?;
    unit("compaction_window_unit", &["MINUTES", "HOURS", "DAYS"])?;
    if let Some(v) = options.get("compaction_window_size") {
        let size = java::parse_int(v).ok_or_else(|| {
            config(format!(
                "{v} is not a parsable int (base10) for compaction_window_size"
            ))
        })?;
        if size < 1 {
            return Err(config(format!(
                "{size} must be greater than 1 for compaction_window_size"
            )));
        }
    }
    if let Some(v) = options.get("expired_sstable_check_frequency_seconds") {
        let seconds = java::parse_long(v).ok_or_else(|| {
            config(format!(
                "{v} is not a parsable int (base10) for expired_sstable_check_frequency_seconds"
            ))
        })?;
        if seconds < 0 {
            return Err(config(format!(
                "expired_sstable_check_frequency_seconds must not be negative, but was {seconds}"
            )));
        }
    }
    if let Some(v) = options.get("unsafe_aggressive_sstable_expiration") {
        if !is_true_or_false(v) {
            return Err(config(format!(
                "unsafe_aggressive_sstable_expiration is not 'true' or 'false' ({v})"
            )));
        }
        // Cassandra allows it only when started with the system property; Helenus has none.
        if v.eq_ignore_ascii_case("true") {
            return Err(config(
                "unsafe_aggressive_sstable_expiration is requested but not allowed, restart cassandra with -Dcassandra.allow_unsafe_aggressive_sstable_expiration=true to allow it"
                    .to_string(),
            ));
        }
    }
    for key in [
        "compaction_window_size",
        "compaction_window_unit",
        "timestamp_resolution",
        "expired_sstable_check_frequency_seconds",
        "unsafe_aggressive_sstable_expiration",
    ] {
        unchecked.remove(key);
    }
    size_tiered(options, &mut unchecked)?;
    remove_thresholds(&mut unchecked);
    Ok(unchecked)
}

/// UCS's default `target_sstable_size` (1 GiB), which `min_sstable_size` is checked against.
const UCS_DEFAULT_TARGET_SSTABLE_BYTES: i64 = 1 << 30;
/// UCS's smallest `target_sstable_size` and `flush_size_override`.
const UCS_MIN_SIZE_BYTES: f64 = 1_048_576.0;

/// `UnifiedCompactionStrategy.validateOptions` (its `Controller`), option by option in its
/// order.
fn unified(options: &BTreeMap<String, String>) -> Result<BTreeMap<String, String>, SchemaError> {
    let mut unchecked = common(options)?;
    if let Some(v) = options.get("scaling_parameters") {
        for parameter in v.split(',').map(str::trim) {
            scaling_parameter(parameter)?;
        }
    }
    if let Some(v) = options.get("base_shard_count") {
        let n = java::parse_int(v).ok_or_else(|| {
            config(format!(
                "{v} is not a parsable int (base10) for base_shard_count"
            ))
        })?;
        if n <= 0 {
            return Err(config(format!(
                "Invalid configuration, base_shard_count should be positive: {n}"
            )));
        }
    }
    let mut target = UCS_DEFAULT_TARGET_SSTABLE_BYTES;
    if let Some(v) = options.get("target_sstable_size") {
        let size = java::parse_human_readable_bytes(v).map_err(|e| {
            config(format!(
                "target_sstable_size {v} is not a valid size in bytes: {e}"
            ))
        })?;
        if size >= i64::MAX as f64 {
            return Err(config(format!(
                "target_sstable_size {v} is out of range of Long."
            )));
        }
        if size < UCS_MIN_SIZE_BYTES {
            return Err(config(format!(
                "target_sstable_size {v} is not acceptable, size must be at least {}",
                java::pretty_print_memory(UCS_MIN_SIZE_BYTES as i64)
            )));
        }
        target = size.ceil() as i64;
    }
    if let Some(v) = options.get("flush_size_override") {
        let size = java::parse_human_readable_bytes(v).map_err(|e| {
            config(format!(
                "flush_size_override {v} is not a valid size in bytes: {e}"
            ))
        })?;
        if size.ceil() < UCS_MIN_SIZE_BYTES {
            return Err(config(format!(
                "flush_size_override {v} is not acceptable, size must be at least {}",
                java::pretty_print_memory(UCS_MIN_SIZE_BYTES as i64)
            )));
        }
    }
    if let Some(v) = options.get("max_sstables_to_compact") {
        java::parse_int(v).ok_or_else(|| {
            config(format!(
                "{v} is not a parsable int (base10) for max_sstables_to_compact"
            ))
        })?;
    }
    if let Some(v) = options.get("expired_sstable_check_frequency_seconds") {
        let n = java::parse_long(v).ok_or_else(|| {
            config(format!(
                "{v} is not a parsable long (base10) for expired_sstable_check_frequency_seconds"
            ))
        })?;
        if n <= 0 {
            return Err(config(format!(
                "Invalid configuration, expired_sstable_check_frequency_seconds should be positive: {n}"
            )));
        }
    }
    if let Some(v) = options.get("unsafe_aggressive_sstable_expiration") {
        if !is_true_or_false(v) {
            return Err(config(format!(
                "unsafe_aggressive_sstable_expiration should either be 'true' or 'false', not {v}"
            )));
        }
    }
    if let Some(v) = options.get("overlap_inclusion_method") {
        if !matches!(v.to_uppercase().as_str(), "NONE" | "SINGLE" | "TRANSITIVE") {
            return Err(config(format!(
                "Invalid overlap inclusion method {v}. The valid options are [NONE, SINGLE, TRANSITIVE]."
            )));
        }
    }
    if let Some(v) = options.get("min_sstable_size") {
        let size = java::parse_human_readable_bytes(v)
            .map_err(|_| {
                config(format!(
                    "{v} is not a valid size in bytes for min_sstable_size"
                ))
            })?
            .ceil();
        if size < 0.0 {
            return Err(config(
                "Invalid configuration, min_sstable_size should be greater than or equal to 0 (zero)"
                    .to_string(),
            ));
        }
        if size >= (target as f64 * 0.7).ceil() {
            return Err(config(format!(
                "Invalid configuration, min_sstable_size ({}) should be less than 70% of the targetSSTableSize ({})",
                java::pretty_print_memory(size as i64),
                java::pretty_print_memory(target)
            )));
        }
    }
    if let Some(v) = options.get("sstable_growth") {
        let growth = java::parse_percent(v).map_err(|e| {
            config(format!(
                "sstable_growth is not a valid number between 0 and 1: {e}"
            ))
        })?;
        if !(0.0..=1.0).contains(&growth) {
            return Err(config(format!(
                "sstable_growth {v} must be between 0 and 1"
            )));
        }
    }
    for key in UCS_OPTIONS {
        unchecked.remove(key);
    }
    Ok(unchecked)
}

/// One of UCS's scaling parameters: `N`, `L<fan>` or `T<fan>` (a fan factor of at least 2),
/// or a signed number; each a Java int.
fn scaling_parameter(p: &str) -> Result<(), SchemaError> {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let int = |s: &str| {
        java::parse_int(s).ok_or_else(|| {
            config(format!(
                "org.apache.cassandra.db.compaction.UnifiedCompactionStrategy.validateOptions() threw an error: java.lang.NumberFormatException For input string: \"{s}\""
            ))
        })
    };
    if p == "N" {
        return Ok(());
    }
    if let Some(fan) = p.strip_prefix(['L', 'T']).filter(|f| digits(f)) {
        if int(fan)? < 2 {
            return Err(config(format!("Fan factor cannot be lower than 2 in {p}")));
        }
        return Ok(());
    }
    if digits(p.strip_prefix(['+', '-']).unwrap_or(p)) {
        int(p)?;
        return Ok(());
    }
    Err(config(format!(
        "Scaling parameter {p} must match N|L[0-9]+|T[0-9]+|[+-]?[0-9]+"
    )))
}

/// An unsigned integer of any size, in base 10^9 limbs (least significant first): enough
/// arithmetic to print LCS's level size as Java's `BigInteger` does.
struct Natural(Vec<u64>);

const LIMB: u64 = 1_000_000_000;

impl From<u64> for Natural {
    fn from(mut v: u64) -> Natural {
        let mut limbs = Vec::new();
        while v > 0 {
            limbs.push(v % LIMB);
            v /= LIMB;
        }
        Natural(limbs)
    }
}

impl Natural {
    fn times(self, factor: u64) -> Natural {
        let mut carry: u128 = 0;
        let mut limbs = Vec::with_capacity(self.0.len() + 3);
        for limb in self.0 {
            let product = u128::from(limb) * u128::from(factor) + carry;
            limbs.push((product % u128::from(LIMB)) as u64);
            carry = product / u128::from(LIMB);
        }
        while carry > 0 {
            limbs.push((carry % u128::from(LIMB)) as u64);
            carry /= u128::from(LIMB);
        }
        Natural(limbs)
    }

    fn pow(self, exponent: u32) -> Natural {
        let base: u64 = self.0.iter().rev().fold(0, |acc, l| acc * LIMB + l);
        (0..exponent).fold(Natural::from(1), |acc, _| acc.times(base))
    }

    fn fits_i64(&self) -> bool {
        let mut value: u128 = 0;
        for limb in self.0.iter().rev() {
            value = value * u128::from(LIMB) + u128::from(*limb);
            if value > i64::MAX as u128 {
                return false;
            }
        }
        true
    }
}

impl std::fmt::Display for Natural {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Some((top, rest)) = self.0.split_last() else {
            return f.write_str("0");
        };
        write!(f, "{top}")?;
        for limb in rest.iter().rev() {
            write!(f, "{limb:09}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn check(pairs: &[(&str, &str)]) -> Result<(), String> {
        let stored = from_map(options(pairs)).map_err(|e| e.to_string())?;
        validate(&stored).map_err(|e| e.to_string())
    }

    #[test]
    fn leveled_options_are_refused_out_of_range() {
        let lcs = |extra: &[(&str, &str)]| {
            let mut pairs = vec![("class", "LeveledCompactionStrategy")];
            pairs.extend_from_slice(extra);
            check(&pairs)
        };
        assert_eq!(lcs(&[]), Ok(()));
        assert_eq!(
            lcs(&[("sstable_size_in_mb", "0")]),
            Err("sstable_size_in_mb must be larger than 0, but was 0".to_string())
        );
        assert_eq!(
            lcs(&[("fanout_size", "x")]),
            Err("x is not a parsable int (base10) for fanout_size".to_string())
        );
        assert_eq!(
            lcs(&[("fanout_size", "2147483647")]),
            Err("At most 9223372036854775807 bytes may be in a compaction level; your maxSSTableSize must be absurdly high to compute 474284395749200074556195397642531548641018072026842311523745275969571060355956736".to_string())
        );
        assert_eq!(
            lcs(&[("fanout_size", "100"), ("sstable_size_in_mb", "2048")]),
            Err("At most 9223372036854775807 bytes may be in a compaction level; your maxSSTableSize must be absurdly high to compute 21474836480000000000000000".to_string())
        );
        assert_eq!(
            lcs(&[("foo", "1")]),
            Err(
                "Properties specified [foo] are not understood by LeveledCompactionStrategy"
                    .to_string()
            )
        );
    }

    #[test]
    fn common_and_size_tiered_options_are_refused_as_cassandra_words_it() {
        let stcs = |extra: &[(&str, &str)]| {
            let mut pairs = vec![("class", "SizeTieredCompactionStrategy")];
            pairs.extend_from_slice(extra);
            check(&pairs)
        };
        assert_eq!(
            stcs(&[("tombstone_threshold", "-0.25")]),
            Err("tombstone_threshold must be greater than 0, but was -0.250000".to_string())
        );
        assert_eq!(
            stcs(&[("bucket_low", "2")]),
            Err(
                "bucket_high value (1.5) is less than or equal to the bucket_low value (2.0)"
                    .to_string()
            )
        );
        assert_eq!(
            stcs(&[("min_threshold", "-1")]),
            Err(
                "Invalid value -1 for 'min_threshold' compaction sub-option - must be an integer"
                    .to_string()
            )
        );
        assert_eq!(
            stcs(&[("max_threshold", "1")]),
            Err("Min compaction threshold (got 4) cannot be greater than max compaction threshold (got 1)".to_string())
        );
        assert_eq!(
            check(&[("min_threshold", "4")]),
            Err("Missing sub-option 'class' for the 'compaction' option".to_string())
        );
        assert_eq!(
            check(&[("class", "UnifiedCompactionStrategy"), ("min_threshold", "4")]),
            Err("Properties specified [min_threshold] are not understood by UnifiedCompactionStrategy".to_string())
        );
    }

    #[test]
    fn naturals_print_in_full() {
        assert_eq!(Natural::from(0).to_string(), "0");
        assert_eq!(
            Natural::from(10).pow(20).to_string(),
            format!("1{}", "0".repeat(20))
        );
        assert!(Natural::from(i64::MAX as u64).fits_i64());
        assert!(!Natural::from(i64::MAX as u64).times(2).fits_i64());
    }
}
