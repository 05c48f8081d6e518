//! Keyspace replication and table options, with Cassandra 5.0's defaults.

use locator::ReplicationStrategy;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::{SchemaError, SpeculativeRetry};

/// A keyspace's replication: its options exactly as `system_schema.keyspaces.replication`
/// reports them (the strategy's full class name under `class`, then its options), which
/// DESCRIBE and the persisted schema keep, and the typed strategy parsed from them once, when
/// the keyspace is created, altered or loaded, which placement and consistency levels use.
/// Persisted as the options alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    try_from = "BTreeMap<String, String>",
    into = "BTreeMap<String, String>"
)]
pub struct Replication {
    options: BTreeMap<String, String>,
    strategy: ReplicationStrategy,
}

const SIMPLE: &str = "org.apache.cassandra.locator.SimpleStrategy";
/// The replication factor a strategy gets when none is given (Cassandra 5.0's
/// `default_keyspace_rf`, 1 by default).
const DEFAULT_KEYSPACE_RF: &str = "1";
const NETWORK_TOPOLOGY: &str = "org.apache.cassandra.locator.NetworkTopologyStrategy";
const LOCAL: &str = "org.apache.cassandra.locator.LocalStrategy";

impl Replication {
    /// Validates `WITH replication = {...}` of keyspace `keyspace` as Cassandra 5.0 does
    /// (`ReplicationParams`, the strategy's `prepareOptions`, constructor and
    /// `validateExpectedOptions`, in that order) and normalises the class name. `local_dc` is
    /// this node's data centre, the only one the ring knows; `previous` is the keyspace's
    /// replication before an ALTER.
    pub fn from_options(
        options: &BTreeMap<String, String>,
        local_dc: &str,
        keyspace: &str,
        previous: Option<&Replication>,
    ) -> Result<Replication, SchemaError> {
        let class = options
            .get("class")
            .ok_or_else(|| SchemaError::Config("Missing replication strategy class".to_string()))?;
        // `AbstractReplicationStrategy.getClass`: a name without a dot is in Cassandra's
        // `locator` package.
        let full = if class.contains('.') {
            class.clone()
        } else {
            format!("{LOCATOR_PACKAGE}.{class}")
        };
        let strategy_options: BTreeMap<String, String> = options
            .iter()
            .filter(|(k, _)| k.as_str() != "class")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let previous: BTreeMap<String, String> = previous
            .map(|p| {
                p.options
                    .iter()
                    .filter(|(k, _)| k.as_str() != "class")
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default();
        let mut out = match full.as_str() {
            SIMPLE => simple_strategy(strategy_options, &previous, keyspace)?,
            NETWORK_TOPOLOGY => {
                network_topology_strategy(strategy_options, &previous, local_dc, keyspace)?
            }
            LOCAL => return Err(SchemaError::Invalid(
                "Unable to use given strategy class: LocalStrategy is reserved for internal use."
                    .to_string(),
            )),
            _ => {
                return Err(SchemaError::Config(format!(
                    "Unable to find replication strategy class '{full}'"
                )))
            }
        };
        out.insert("class".to_string(), full);
        Replication::from_stored(out)
    }

    /// The replication of options validated before (a persisted schema): the typed strategy
    /// is parsed from them again; options no strategy takes are an error.
    pub fn from_stored(options: BTreeMap<String, String>) -> Result<Replication, SchemaError> {
        let class = options.get("class").map(String::as_str).unwrap_or("");
        let factors = || {
            options
                .iter()
                .filter(|(k, _)| k.as_str() != "class")
                .map(|(k, v)| Ok((k.clone(), stored_full_replicas(v)?)))
                .collect::<Result<Vec<(String, u32)>, SchemaError>>()
        };
        let strategy = match class {
            LOCAL => ReplicationStrategy::Local,
            SIMPLE => {
                let rf = options.get(REPLICATION_FACTOR).ok_or_else(|| {
                    SchemaError::Corrupt("SimpleStrategy without replication_factor".to_string())
                })?;
                ReplicationStrategy::Simple {
                    replication_factor: stored_full_replicas(rf)?,
                }
            }
            NETWORK_TOPOLOGY => ReplicationStrategy::network_topology(factors()?),
            other => {
                return Err(SchemaError::Corrupt(format!(
                    "unknown replication strategy class '{other}'"
                )))
            }
        };
        Ok(Replication { options, strategy })
    }

    pub fn local() -> Replication {
        Replication {
            options: BTreeMap::from([("class".to_string(), LOCAL.to_string())]),
            strategy: ReplicationStrategy::Local,
        }
    }

    /// The options as `system_schema.keyspaces.replication` and DESCRIBE show them.
    pub fn options(&self) -> &BTreeMap<String, String> {
        &self.options
    }

    /// The strategy placement and consistency levels use.
    pub fn strategy(&self) -> &ReplicationStrategy {
        &self.strategy
    }

    /// Whether the replication factor is above 0.
    pub fn has_replicas(&self) -> bool {
        self.strategy.has_replicas()
    }

    /// How many replicas the strategy asks for in total (over all data centres).
    pub fn replication_factor(&self) -> usize {
        self.strategy.replication_factor()
    }
}

impl TryFrom<BTreeMap<String, String>> for Replication {
    type Error = SchemaError;

    fn try_from(options: BTreeMap<String, String>) -> Result<Replication, SchemaError> {
        Replication::from_stored(options)
    }
}

impl From<Replication> for BTreeMap<String, String> {
    fn from(replication: Replication) -> BTreeMap<String, String> {
        replication.options
    }
}

/// Cassandra's replication strategies are named in this package.
const LOCATOR_PACKAGE: &str = "org.apache.cassandra.locator";
const REPLICATION_FACTOR: &str = "replication_factor";

/// SimpleStrategy's options: `prepareOptions` fills in the factor (the previous one, else
/// `default_keyspace_rf`), the constructor parses it, and any other option is refused.
fn simple_strategy(
    mut options: BTreeMap<String, String>,
    previous: &BTreeMap<String, String>,
    keyspace: &str,
) -> Result<BTreeMap<String, String>, SchemaError> {
    let rf = previous
        .get(REPLICATION_FACTOR)
        .cloned()
        .unwrap_or_else(|| DEFAULT_KEYSPACE_RF.to_string());
    let rf = options.entry(REPLICATION_FACTOR.to_string()).or_insert(rf);
    ReplicationFactor::parse(rf)?;
    if let Some(other) = crate::java::hash_order(options.keys()).find(|k| *k != REPLICATION_FACTOR)
    {
        return Err(SchemaError::Config(format!(
            "Unrecognized strategy option {{{other}}} passed to SimpleStrategy for keyspace {keyspace}"
        )));
    }
    Ok(options)
}

/// NetworkTopologyStrategy's options, as Cassandra 5.0 prepares and checks them: the
/// `replication_factor` shorthand expands to every known data centre (an ALTER keeps the data
/// centres it does not name), data centres at `"0"` are dropped, and then every remaining
/// option must be a known data centre with a valid factor.
fn network_topology_strategy(
    mut options: BTreeMap<String, String>,
    previous: &BTreeMap<String, String>,
    local_dc: &str,
    keyspace: &str,
) -> Result<BTreeMap<String, String>, SchemaError> {
    prepare_network_topology(&mut options, previous, local_dc);
    for (dc, value) in &options {
        // The shorthand in any other spelling survives `prepareOptions`, to be refused here.
        if dc.eq_ignore_ascii_case(REPLICATION_FACTOR) {
            return Err(SchemaError::Config(
                "replication_factor should not appear as an option at construction time for NetworkTopologyStrategy"
                    .to_string(),
            ));
        }
        ReplicationFactor::parse(value)?;
    }
    if options.is_empty() {
        return Err(SchemaError::Config(
            "Configuration for at least one datacenter must be present".to_string(),
        ));
    }
    if let Some(unknown) = crate::java::hash_order(options.keys()).find(|dc| *dc != local_dc) {
        return Err(SchemaError::Config(format!(
            "Unrecognized strategy option {{{unknown}}} passed to NetworkTopologyStrategy for keyspace {keyspace}"
        )));
    }
    Ok(options)
}

/// `NetworkTopologyStrategy.prepareOptions`. Cassandra calls it by reflection and ignores
/// what it throws, so a shorthand it cannot parse leaves the options as they stand then.
fn prepare_network_topology(
    options: &mut BTreeMap<String, String>,
    previous: &BTreeMap<String, String>,
    local_dc: &str,
) {
    if options.is_empty() {
        let rf = previous
            .get(REPLICATION_FACTOR)
            .cloned()
            .unwrap_or_else(|| DEFAULT_KEYSPACE_RF.to_string());
        options.insert(REPLICATION_FACTOR.to_string(), rf);
    }
    let mut replication = options.remove(REPLICATION_FACTOR);
    if replication.is_none() && options.is_empty() {
        // An ALTER from SimpleStrategy takes its factor.
        replication = previous.get(REPLICATION_FACTOR).cloned();
    } else if replication.is_some() {
        for (dc, rf) in previous {
            if dc != REPLICATION_FACTOR {
                options.entry(dc.clone()).or_insert_with(|| rf.clone());
            }
        }
    }
    if let Some(replication) = replication {
        let Ok(rf) = ReplicationFactor::parse(&replication) else {
            return;
        };
        options
            .entry(local_dc.to_string())
            .or_insert_with(|| rf.to_parseable_string());
    }
    options.retain(|_, v| v != "0");
}

/// A replication factor as Cassandra's `ReplicationFactor.fromString` reads it: `full` or
/// `full/transient`, each a Java int. Transient replicas are refused, as on a node without
/// `transient_replication_enabled` (Cassandra's default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicationFactor {
    pub full: u32,
}

impl ReplicationFactor {
    pub fn parse(text: &str) -> Result<ReplicationFactor, SchemaError> {
        let config = |m: String| SchemaError::Config(m);
        let (all, transient) = if text.contains('/') {
            // Java's `split("/")`, which drops trailing empty parts.
            let mut parts: Vec<&str> = text.split('/').collect();
            while parts.last() == Some(&"") {
                parts.pop();
            }
            if parts.len() != 2 {
                return Err(config(
                    "Replication factor format is <replicas> or <replicas>/<transient>".to_string(),
                ));
            }
            (java_parse_int(parts[0])?, java_parse_int(parts[1])?)
        } else {
            (java_parse_int(text)?, 0)
        };
        if transient != 0 {
            return Err(config(
                "Transient replication is not enabled on this node".to_string(),
            ));
        }
        let Ok(full) = u32::try_from(all) else {
            return Err(config(format!(
                "Replication factor must be non-negative, found {all}"
            )));
        };
        Ok(ReplicationFactor { full })
    }

    /// `toParseableString`: how an expanded shorthand is stored.
    pub fn to_parseable_string(self) -> String {
        self.full.to_string()
    }
}

/// The full replicas of a stored factor, `full` or `full/transient` (validation refuses
/// transient replicas, but the count of full ones is all placement needs either way).
fn stored_full_replicas(value: &str) -> Result<u32, SchemaError> {
    let full = value.split('/').next().unwrap_or(value);
    u32::try_from(java_parse_int(full)?)
        .map_err(|_| SchemaError::Corrupt(format!("negative replication factor {value}")))
}

/// Java's `Integer.parseInt`, refused with its `NumberFormatException` message.
fn java_parse_int(text: &str) -> Result<i32, SchemaError> {
    crate::java::parse_int(text)
        .ok_or_else(|| SchemaError::Config(format!("For input string: \"{text}\"")))
}

/// The smallest false-positive chance a bloom filter can be built for (Cassandra's
/// `BloomCalculations.minSupportedBloomFilterFpChance`, 20 hashes per key); a table must ask
/// for more.
const MIN_BLOOM_FILTER_FP_CHANCE: f64 = 6.71e-5;

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
    /// Parsed once, when the table is created, altered or loaded (the read path uses it).
    pub speculative_retry: SpeculativeRetry,
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
            speculative_retry: SpeculativeRetry::default(),
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

/// A boolean property (`durable_writes`, `cdc`, ...) as Cassandra's
/// `PropertyDefinitions.parseBoolean` reads it, case-insensitively, in its words.
pub fn parse_boolean_property(name: &str, value: &str) -> Result<bool, SchemaError> {
    match value.to_lowercase().as_str() {
        "1" | "true" | "yes" => Ok(true),
        "0" | "false" | "no" => Ok(false),
        _ => Err(SchemaError::Syntax(format!(
            "Invalid boolean value {value} for '{name}'. Positive values can be '1', 'true' or 'yes'. Negative values can be '0', 'false' or 'no'."
        ))),
    }
}

/// The value of one `WITH name = value` table property, as the query layer hands it over.
#[derive(Debug, Clone)]
pub enum OptionValue {
    Text(String),
    Map(BTreeMap<String, String>),
}

impl TableOptions {
    /// Cassandra's `TableParams.validate`, run once every property of a CREATE or ALTER TABLE
    /// is read (the ones `set` refuses alone are refused first): the compaction strategy's
    /// options, then each option's range, in Cassandra's order.
    pub fn validate(&self) -> Result<(), SchemaError> {
        let fail = |m: String| Err(SchemaError::Config(m));
        crate::compaction::validate(&self.compaction)?;
        let fp = self.bloom_filter_fp_chance;
        if fp <= MIN_BLOOM_FILTER_FP_CHANCE || fp > 1.0 {
            return fail(format!(
                "bloom_filter_fp_chance must be larger than {} and less than or equal to 1.0 (got {})",
                crate::java::double_to_string(MIN_BLOOM_FILTER_FP_CHANCE),
                crate::java::double_to_string(fp)
            ));
        }
        let crc = self.crc_check_chance;
        if !(0.0..=1.0).contains(&crc) {
            return fail(format!(
                "crc_check_chance must be larger than or equal to 0 and smaller than or equal to 1.0 (got {})",
                crate::java::double_to_string(crc)
            ));
        }
        let ttl = self.default_time_to_live;
        if ttl < 0 {
            return fail(format!(
                "default_time_to_live must be greater than or equal to 0 (got {ttl})"
            ));
        }
        if ttl > MAX_TTL_SECONDS {
            return fail(format!(
                "default_time_to_live must be less than or equal to {MAX_TTL_SECONDS} (got {ttl})"
            ));
        }
        if self.gc_grace_seconds < 0 {
            return fail(format!(
                "gc_grace_seconds must be greater than or equal to 0 (got {})",
                self.gc_grace_seconds
            ));
        }
        if self.min_index_interval < 1 {
            return fail(format!(
                "min_index_interval must be greater than or equal to 1 (got {})",
                self.min_index_interval
            ));
        }
        if self.max_index_interval < self.min_index_interval {
            return fail(format!(
                "max_index_interval must be greater than or equal to min_index_interval ({}) (got {})",
                self.min_index_interval, self.max_index_interval
            ));
        }
        if self.memtable_flush_period_in_ms < 0 {
            return fail(format!(
                "memtable_flush_period_in_ms must be greater than or equal to 0 (got {})",
                self.memtable_flush_period_in_ms
            ));
        }
        Ok(())
    }

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
            parse_boolean_property(name, &text(name, v)?)
        }
        match name {
            "allow_auto_snapshot" => self.allow_auto_snapshot = boolean(name, value)?,
            "bloom_filter_fp_chance" => self.bloom_filter_fp_chance = double(name, value)?,
            "caching" => self.caching = caching(map(name, value)?)?,
            "cdc" => self.cdc = boolean(name, value)?,
            "comment" => self.comment = text(name, value)?,
            "compaction" => self.compaction = crate::compaction::from_map(map(name, value)?)?,
            "compression" => self.compression = crate::compression::from_map(map(name, value)?)?,
            "memtable" => {
                let v = text(name, value)?;
                // Cassandra 5.0 knows the memtable configurations of its `cassandra.yaml`:
                // `default` alone unless more are configured.
                if v != "default" {
                    return Err(SchemaError::Config(format!(
                        "Memtable configuration \"{v}\" not found."
                    )));
                }
                self.memtable = v;
            }
            "crc_check_chance" => self.crc_check_chance = double(name, value)?,
            "default_time_to_live" => self.default_time_to_live = int(name, value)?,
            "gc_grace_seconds" => self.gc_grace_seconds = int(name, value)?,
            "incremental_backups" => self.incremental_backups = boolean(name, value)?,
            "max_index_interval" => self.max_index_interval = int(name, value)?,
            "memtable_flush_period_in_ms" => self.memtable_flush_period_in_ms = int(name, value)?,
            "min_index_interval" => self.min_index_interval = int(name, value)?,
            "speculative_retry" => {
                self.speculative_retry = SpeculativeRetry::parse(&text(name, value)?)?
            }
            "additional_write_policy" => {
                self.additional_write_policy =
                    SpeculativeRetry::parse(&text(name, value)?)?.to_string()
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
