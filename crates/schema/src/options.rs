//! Keyspace replication and table options, with Cassandra 5.0's defaults.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::SchemaError;

/// A keyspace's replication settings exactly as `system_schema.keyspaces.replication` reports
/// them: the strategy's full class name under `class`, then its options.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replication(pub BTreeMap<String, String>);

const SIMPLE: &str = "org.apache.cassandra.locator.SimpleStrategy";
/// The compaction strategies Cassandra 5.0 has (a table names one; RocksDB compacts them all
/// alike), in `COMPACTION_PACKAGE`.
const COMPACTION_PACKAGE: &str = "org.apache.cassandra.db.compaction";
const COMPACTION_STRATEGIES: [&str; 4] = [
    "SizeTieredCompactionStrategy",
    "LeveledCompactionStrategy",
    "TimeWindowCompactionStrategy",
    "UnifiedCompactionStrategy",
];
/// Cassandra 5.0's compressors, in `COMPRESSION_PACKAGE`.
const COMPRESSION_PACKAGE: &str = "org.apache.cassandra.io.compress";
const COMPRESSORS: [&str; 5] = [
    "LZ4Compressor",
    "SnappyCompressor",
    "DeflateCompressor",
    "ZstdCompressor",
    "NoopCompressor",
];
/// Whether `class` is `package.name` for one of `names`.
fn in_package(class: &str, package: &str, names: &[&str]) -> bool {
    class
        .strip_prefix(package)
        .and_then(|rest| rest.strip_prefix('.'))
        .is_some_and(|name| names.contains(&name))
}

/// The replication factor a strategy gets when none is given (Cassandra 5.0's
/// `default_keyspace_rf`, 1 by default).
const DEFAULT_KEYSPACE_RF: &str = "1";
const NETWORK_TOPOLOGY: &str = "org.apache.cassandra.locator.NetworkTopologyStrategy";
const LOCAL: &str = "org.apache.cassandra.locator.LocalStrategy";

impl Replication {
    /// Validates `WITH replication = {...}` of keyspace `keyspace` as Cassandra does and
    /// normalises the class name. `default_dc` expands NetworkTopologyStrategy's
    /// `replication_factor` shorthand; `previous` is the keyspace's replication before an
    /// ALTER (Cassandra's `NetworkTopologyStrategy.prepareOptions` keeps its data centres).
    pub fn from_options(
        options: &BTreeMap<String, String>,
        default_dc: &str,
        keyspace: &str,
        previous: Option<&Replication>,
    ) -> Result<Replication, SchemaError> {
        let class = options
            .get("class")
            .ok_or_else(|| SchemaError::Config("Missing replication strategy class".to_string()))?;
        let short = class.rsplit('.').next().unwrap_or(class);
        let mut out = BTreeMap::new();
        match short {
            "SimpleStrategy" => {
                out.insert("class".to_string(), SIMPLE.to_string());
                for (k, v) in options {
                    match k.as_str() {
                        "class" => {}
                        "replication_factor" => {
                            parse_replication_factor(v)?;
                            out.insert(k.clone(), v.clone());
                        }
                        other => {
                            return Err(SchemaError::Config(format!(
                                "Unrecognized strategy option {{{other}}} passed to SimpleStrategy for keyspace {keyspace}"
                            )))
                        }
                    }
                }
                // Cassandra 5.0 fills in its `default_keyspace_rf` (1 by default).
                out.entry("replication_factor".to_string())
                    .or_insert_with(|| DEFAULT_KEYSPACE_RF.to_string());
            }
            "NetworkTopologyStrategy" => {
                out.insert("class".to_string(), NETWORK_TOPOLOGY.to_string());
                let previous = previous.map(|r| &r.0);
                let previous_dcs = || {
                    previous.into_iter().flatten().filter(|(k, _)| {
                        k.as_str() != "class" && k.as_str() != "replication_factor"
                    })
                };
                let shorthand = options.get("replication_factor");
                for (k, v) in options {
                    match k.as_str() {
                        "class" => {}
                        "replication_factor" => {
                            parse_replication_factor(v)?;
                        }
                        dc => {
                            parse_replication_factor(v)?;
                            out.insert(dc.to_string(), v.clone());
                        }
                    }
                }
                if let Some(rf) = shorthand {
                    // An ALTER keeps the data centres it does not name.
                    for (dc, rf) in previous_dcs() {
                        out.entry(dc.clone()).or_insert_with(|| rf.clone());
                    }
                    out.entry(default_dc.to_string())
                        .or_insert_with(|| rf.clone());
                } else if out.len() == 1 {
                    // No data centre named: an ALTER from SimpleStrategy takes its factor, an
                    // ALTER from NetworkTopologyStrategy keeps its data centres, and a CREATE
                    // gets the local one at `default_keyspace_rf`.
                    match previous.and_then(|p| p.get("replication_factor")) {
                        Some(rf) => {
                            out.insert(default_dc.to_string(), rf.clone());
                        }
                        None if previous_dcs().next().is_some() => {
                            out.extend(previous_dcs().map(|(k, v)| (k.clone(), v.clone())));
                        }
                        None => {
                            out.insert(default_dc.to_string(), DEFAULT_KEYSPACE_RF.to_string());
                        }
                    }
                }
                // Cassandra drops the data centres given 0 replicas.
                out.retain(|k, v| k == "class" || v.as_str() != "0");
            }
            other => {
                return Err(SchemaError::Config(format!(
                "Unable to find replication strategy class 'org.apache.cassandra.locator.{other}'"
            )))
            }
        }
        Ok(Replication(out))
    }

    pub fn local() -> Replication {
        Replication(BTreeMap::from([("class".to_string(), LOCAL.to_string())]))
    }

    /// Whether the replication factor is above 0, without summing every data centre's (the
    /// write path asks on every request).
    pub fn has_replicas(&self) -> bool {
        let class = self.0.get("class").map(String::as_str).unwrap_or("");
        class == LOCAL
            || self
                .0
                .iter()
                .filter(|(k, _)| k.as_str() != "class")
                .any(|(_, v)| parse_replication_factor(v).is_ok_and(|rf| rf > 0))
    }

    /// How many replicas the strategy asks for in total (over all data centres).
    pub fn replication_factor(&self) -> usize {
        let class = self.0.get("class").map(String::as_str).unwrap_or("");
        if class == LOCAL {
            return 1;
        }
        self.0
            .iter()
            .filter(|(k, _)| k.as_str() != "class")
            .filter_map(|(_, v)| parse_replication_factor(v).ok())
            .sum()
    }
}

/// Parses `'3'` or the transient form `'3/1'` (full/transient); returns the full count. The
/// errors are Cassandra's (the first is Java's `NumberFormatException` text).
fn parse_replication_factor(v: &str) -> Result<usize, SchemaError> {
    let full = v.split('/').next().unwrap_or(v);
    match full.parse::<i64>() {
        Ok(n) if n < 0 => Err(SchemaError::Config(format!(
            "Replication factor must be non-negative, found {n}"
        ))),
        Ok(n) => Ok(n as usize),
        Err(_) => Err(SchemaError::Config(format!("For input string: \"{full}\""))),
    }
}

/// The longest TTL Cassandra allows, 20 years (`Attributes.MAX_TTL`).
pub const MAX_TTL_SECONDS: i32 = 20 * 365 * 24 * 60 * 60;

/// Table options as `system_schema.tables` reports them. Options that affect behaviour today
/// (`default_time_to_live`, `gc_grace_seconds`) are typed; the rest are stored and reported back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableOptions {
    pub allow_auto_snapshot: bool,
    pub bloom_filter_fp_chance: f64,
    pub caching: BTreeMap<String, String>,
    pub cdc: bool,
    pub comment: String,
    pub compaction: BTreeMap<String, String>,
    pub compression: BTreeMap<String, String>,
    pub memtable: String,
    pub crc_check_chance: f64,
    pub default_time_to_live: i32,
    pub extensions: BTreeMap<String, Vec<u8>>,
    pub gc_grace_seconds: i32,
    pub incremental_backups: bool,
    pub max_index_interval: i32,
    pub memtable_flush_period_in_ms: i32,
    pub min_index_interval: i32,
    pub speculative_retry: String,
    pub additional_write_policy: String,
    pub read_repair: String,
}

impl Default for TableOptions {
    fn default() -> Self {
        let map = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>()
        };
        TableOptions {
            allow_auto_snapshot: true,
            bloom_filter_fp_chance: 0.01,
            caching: map(&[("keys", "ALL"), ("rows_per_partition", "NONE")]),
            cdc: false,
            comment: String::new(),
            compaction: map(&[
                (
                    "class",
                    "org.apache.cassandra.db.compaction.SizeTieredCompactionStrategy",
                ),
                ("max_threshold", "32"),
                ("min_threshold", "4"),
            ]),
            compression: map(&[
                ("chunk_length_in_kb", "16"),
                ("class", "org.apache.cassandra.io.compress.LZ4Compressor"),
            ]),
            memtable: "default".to_string(),
            crc_check_chance: 1.0,
            default_time_to_live: 0,
            extensions: BTreeMap::new(),
            gc_grace_seconds: 864_000,
            incremental_backups: true,
            max_index_interval: 2048,
            memtable_flush_period_in_ms: 0,
            min_index_interval: 128,
            speculative_retry: "99p".to_string(),
            additional_write_policy: "99p".to_string(),
            read_repair: "BLOCKING".to_string(),
        }
    }
}

/// A `caching` map as Cassandra 5.0 validates and stores it (`CachingParams`): `keys` ALL or
/// NONE, `rows_per_partition` ALL, NONE or a count (0 is NONE), each NONE when missing.
fn caching(m: BTreeMap<String, String>) -> Result<BTreeMap<String, String>, SchemaError> {
    let unknown: Vec<&str> = m
        .keys()
        .map(String::as_str)
        .filter(|k| *k != "keys" && *k != "rows_per_partition")
        .collect();
    if !unknown.is_empty() {
        return Err(SchemaError::Config(format!(
            "Invalid caching sub-options [{}]: only 'keys' and 'rows_per_partition' are allowed",
            unknown.join(", ")
        )));
    }
    let keys = match m.get("keys").map(|v| (v, v.to_ascii_uppercase())) {
        None => "NONE".to_string(),
        Some((_, upper)) if upper == "ALL" || upper == "NONE" => upper,
        Some((v, _)) => {
            return Err(SchemaError::Config(format!(
            "Invalid value '{v}' for caching sub-option 'keys': only 'ALL' and 'NONE' are allowed"
        )))
        }
    };
    let rows = match m.get("rows_per_partition") {
        None => "NONE".to_string(),
        Some(v) => match (v.to_ascii_uppercase(), v.parse::<i32>()) {
            (upper, _) if upper == "ALL" || upper == "NONE" => upper,
            (_, Ok(0)) => "NONE".to_string(),
            (_, Ok(n)) if n > 0 => n.to_string(),
            _ => {
                return Err(SchemaError::Config(format!(
                    "Invalid value '{v}' for caching sub-option 'rows_per_partition': only 'ALL', 'NONE', and integer values are allowed"
                )))
            }
        },
    };
    Ok(BTreeMap::from([
        ("keys".to_string(), keys),
        ("rows_per_partition".to_string(), rows),
    ]))
}

/// A `speculative_retry` or `additional_write_policy` value as Cassandra 5.0 parses and
/// prints it (`SpeculativeRetryPolicy`): `99p` or `99PERCENTILE`, `50ms` (whole
/// milliseconds), ALWAYS, NEVER (or NONE), and `MIN(..)`/`MAX(..)` of a percentile and a
/// time. Cassandra names `speculative_retry` in the errors of either option.
fn retry_policy(value: &str) -> Result<String, SchemaError> {
    let invalid = || invalid_retry(value);
    let upper = value.trim().to_ascii_uppercase();
    match upper.as_str() {
        "ALWAYS" => return Ok("ALWAYS".to_string()),
        "NEVER" | "NONE" => return Ok("NEVER".to_string()),
        _ => {}
    }
    for function in ["MIN", "MAX"] {
        if let Some(args) = upper
            .strip_prefix(function)
            .and_then(|rest| rest.trim_start().strip_prefix('('))
            .and_then(|rest| rest.strip_suffix(')'))
        {
            let (a, b) = args.split_once(',').ok_or_else(invalid)?;
            let (a, b) = (
                simple_retry(a.trim(), value)?,
                simple_retry(b.trim(), value)?,
            );
            return match (a, b) {
                (Retry::Percentile(p), Retry::Fixed(f))
                | (Retry::Fixed(f), Retry::Percentile(p)) => Ok(format!("{function}({p},{f})")),
                _ => Err(invalid()),
            };
        }
    }
    match simple_retry(&upper, value)? {
        Retry::Percentile(s) | Retry::Fixed(s) => Ok(s),
    }
}

/// Cassandra's refusal of a retry policy it cannot parse (for either option).
fn invalid_retry(value: &str) -> SchemaError {
    SchemaError::Config(format!(
        "Invalid value {value} for option 'speculative_retry'"
    ))
}

/// A percentile or a fixed time of a retry policy, printed as Cassandra prints it.
enum Retry {
    Percentile(String),
    Fixed(String),
}

fn simple_retry(upper: &str, value: &str) -> Result<Retry, SchemaError> {
    let invalid = || invalid_retry(value);
    let number = |digits: &str| digits.trim().parse::<f64>().ok().filter(|n| n.is_finite());
    if let Some(digits) = upper.strip_suffix("MS") {
        let ms = number(digits).filter(|n| *n >= 0.0).ok_or_else(invalid)?;
        return Ok(Retry::Fixed(format!("{}ms", ms as i64)));
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
        // Java's DecimalFormat("#.####").
        let text = format!("{p:.4}");
        let text = text.trim_end_matches('0').trim_end_matches('.');
        return Ok(Retry::Percentile(format!("{text}p")));
    }
    Err(invalid())
}

/// The value of one `WITH name = value` table property, as the query layer hands it over.
#[derive(Debug, Clone)]
pub enum OptionValue {
    Text(String),
    Map(BTreeMap<String, String>),
}

impl TableOptions {
    /// Applies one `WITH` property, validating it as Cassandra does.
    pub fn set(&mut self, name: &str, value: OptionValue) -> Result<(), SchemaError> {
        fn text(name: &str, v: OptionValue) -> Result<String, SchemaError> {
            match v {
                OptionValue::Text(t) => Ok(t),
                OptionValue::Map(_) => Err(SchemaError::Syntax(format!(
                    "Invalid value for property '{name}'. It should be a string"
                ))),
            }
        }
        fn map(name: &str, v: OptionValue) -> Result<BTreeMap<String, String>, SchemaError> {
            match v {
                OptionValue::Map(m) => Ok(m),
                OptionValue::Text(_) => Err(SchemaError::Syntax(format!(
                    "Invalid value for property '{name}'. It should be a map."
                ))),
            }
        }
        fn int(name: &str, v: OptionValue) -> Result<i32, SchemaError> {
            let t = text(name, v)?;
            t.trim()
                .parse::<i32>()
                .map_err(|_| SchemaError::Syntax(format!("Invalid integer value {t} for '{name}'")))
        }
        fn double(name: &str, v: OptionValue) -> Result<f64, SchemaError> {
            let t = text(name, v)?;
            t.trim()
                .parse::<f64>()
                .map_err(|_| SchemaError::Syntax(format!("Invalid double value {t} for '{name}'")))
        }
        fn boolean(name: &str, v: OptionValue) -> Result<bool, SchemaError> {
            let t = text(name, v)?;
            match t.to_ascii_lowercase().as_str() {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err(SchemaError::Syntax(format!(
                    "Invalid boolean value {t} for '{name}'"
                ))),
            }
        }
        match name {
            "allow_auto_snapshot" => self.allow_auto_snapshot = boolean(name, value)?,
            "bloom_filter_fp_chance" => {
                let v = double(name, value)?;
                if v <= 0.0 || v > 1.0 {
                    return Err(SchemaError::Config(format!(
                        "bloom_filter_fp_chance must be larger than 0 and less than or equal to 1.0 (got {v})"
                    )));
                }
                self.bloom_filter_fp_chance = v;
            }
            "caching" => self.caching = caching(map(name, value)?)?,
            "cdc" => self.cdc = boolean(name, value)?,
            "comment" => self.comment = text(name, value)?,
            "compaction" => {
                let mut m = map(name, value)?;
                let class = m.get("class").cloned().ok_or_else(|| {
                    SchemaError::Config(
                        "Missing sub-option 'class' for the 'compaction' option.".to_string(),
                    )
                })?;
                let full = if class.contains('.') {
                    class
                } else {
                    format!("{COMPACTION_PACKAGE}.{class}")
                };
                if !in_package(&full, COMPACTION_PACKAGE, &COMPACTION_STRATEGIES) {
                    return Err(SchemaError::Config(format!(
                        "Unable to find compaction strategy class '{full}'"
                    )));
                }
                // As Cassandra stores them: the thresholds every strategy but UCS takes.
                if !full.ends_with(".UnifiedCompactionStrategy") {
                    m.entry("max_threshold".to_string())
                        .or_insert_with(|| "32".to_string());
                    m.entry("min_threshold".to_string())
                        .or_insert_with(|| "4".to_string());
                }
                m.insert("class".to_string(), full);
                self.compaction = m;
            }
            "compression" => {
                let mut m = map(name, value)?;
                let disabled = m
                    .get("enabled")
                    .is_some_and(|e| e.eq_ignore_ascii_case("false"));
                if !disabled {
                    let class = m.get("class").ok_or_else(|| {
                        SchemaError::Config(
                            "Missing sub-option 'class' for the 'compression' option.".to_string(),
                        )
                    })?;
                    let full = if class.contains('.') {
                        class.clone()
                    } else {
                        format!("{COMPRESSION_PACKAGE}.{class}")
                    };
                    if !in_package(&full, COMPRESSION_PACKAGE, &COMPRESSORS) {
                        return Err(SchemaError::Config(format!(
                            "Could not create Compression for type {full}"
                        )));
                    }
                }
                if let Some(kb) = m.get("chunk_length_in_kb") {
                    if !kb.trim().parse::<u32>().is_ok_and(u32::is_power_of_two) {
                        return Err(SchemaError::Config(
                            "chunk_length_in_kb must be a power of 2".to_string(),
                        ));
                    }
                }
                if !disabled {
                    // As Cassandra stores it: the full class name, the default chunk length,
                    // no `enabled`.
                    let class = &m["class"];
                    if !class.contains('.') {
                        let full = format!("{COMPRESSION_PACKAGE}.{class}");
                        m.insert("class".to_string(), full);
                    }
                    m.entry("chunk_length_in_kb".to_string())
                        .or_insert_with(|| "16".to_string());
                    m.remove("enabled");
                }
                self.compression = m;
            }
            "memtable" => self.memtable = text(name, value)?,
            "crc_check_chance" => self.crc_check_chance = double(name, value)?,
            "default_time_to_live" => {
                let v = int(name, value)?;
                if v < 0 {
                    return Err(SchemaError::Config(format!(
                        "default_time_to_live must be greater than or equal to 0 (got {v})"
                    )));
                }
                if v > MAX_TTL_SECONDS {
                    return Err(SchemaError::Config(format!(
                        "default_time_to_live must be less than or equal to {MAX_TTL_SECONDS} (got {v})"
                    )));
                }
                self.default_time_to_live = v;
            }
            "gc_grace_seconds" => {
                let v = int(name, value)?;
                if v < 0 {
                    return Err(SchemaError::Config(format!(
                        "gc_grace_seconds must be greater than or equal to 0 (got {v})"
                    )));
                }
                self.gc_grace_seconds = v;
            }
            "incremental_backups" => self.incremental_backups = boolean(name, value)?,
            "max_index_interval" => self.max_index_interval = int(name, value)?,
            "memtable_flush_period_in_ms" => self.memtable_flush_period_in_ms = int(name, value)?,
            "min_index_interval" => self.min_index_interval = int(name, value)?,
            "speculative_retry" => self.speculative_retry = retry_policy(&text(name, value)?)?,
            "additional_write_policy" => {
                self.additional_write_policy = retry_policy(&text(name, value)?)?
            }
            "read_repair" => {
                let v = text(name, value)?;
                let upper = v.to_ascii_uppercase();
                if upper != "BLOCKING" && upper != "NONE" {
                    // Cassandra fails with a server error here; a configuration error says why.
                    return Err(SchemaError::Config(format!(
                        "Invalid value {v} for option 'read_repair'"
                    )));
                }
                self.read_repair = upper;
            }
            "id" => {
                return Err(SchemaError::Config("Cannot alter table id.".to_string()));
            }
            other => {
                return Err(SchemaError::Syntax(format!("Unknown property '{other}'")));
            }
        }
        Ok(())
    }
}
