//! Node configuration: a YAML file with Cassandra's key names where one exists, and embedded
//! defaults so that no file is needed for a single local node.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use serde_yaml::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitLogSync {
    /// Acknowledge after the write reaches the commit log buffer; fsync on a timer.
    Periodic,
    /// Acknowledge only after the commit log is fsynced (concurrent writes share a sync).
    Batch,
}

/// Cassandra's `disk_failure_policy`: what a corrupt data file means for the node. Cassandra
/// stops its client transports or exits only under `stop_paranoid` and `die` when an SSTable is
/// corrupt; under the others the read or compaction that met it fails, and the node goes on
/// (Helenus then stops that table's compactions, see `storage`). Cassandra's other uses of the
/// policy (unreadable or unwritable data directories) have no counterpart yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskFailurePolicy {
    /// Exit the process at once (exit code 100, as Cassandra's JVM killer).
    Die,
    /// Stop serving CQL clients; the node stays up for `helenus admin` until SIGTERM.
    StopParanoid,
    /// Cassandra's default.
    Stop,
    BestEffort,
    Ignore,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub cluster_name: String,
    pub listen_address: IpAddr,
    pub rpc_address: IpAddr,
    pub native_transport_port: u16,
    /// Helenus's own: where `helenus admin` reaches the node (on `listen_address`). Cassandra's
    /// nodetool uses JMX on 7199; so does this by default.
    pub admin_port: u16,
    pub data_file_directories: Vec<PathBuf>,
    pub commitlog_directory: PathBuf,
    pub commitlog_sync: CommitLogSync,
    pub commitlog_sync_period_ms: u64,
    /// `commitlog_total_space`: past it, the tables holding the oldest commit log file are
    /// flushed so that it can be deleted.
    pub commitlog_total_space_bytes: u64,
    pub num_tokens: usize,
    pub endpoint_snitch: String,
    pub dc: String,
    pub rack: String,
    pub native_transport_max_frame_size_bytes: usize,
    /// Requests one connection may have in flight before the server stops reading from it.
    pub native_transport_max_requests_per_connection: usize,
    pub block_cache_size_bytes: usize,
    /// Helenus's partition cache (whole small partitions in front of the LSM); 0 = off.
    pub partition_cache_size_bytes: usize,
    /// `batch_size_warn_threshold`, `batch_size_fail_threshold` and
    /// `unlogged_batch_across_partitions_warn_threshold`.
    pub batch_thresholds: query::BatchThresholds,
    /// `tombstone_warn_threshold`: reads meeting more tombstones get a client warning.
    pub tombstone_warn_threshold: u64,
    /// `disk_failure_policy`.
    pub disk_failure_policy: DiskFailurePolicy,
    /// `native_transport_max_concurrent_connections`: `None` (Cassandra's -1, its default: no
    /// cap) takes the node's share of file descriptors for connections (see `descriptors`).
    pub native_transport_max_concurrent_connections: Option<usize>,
    /// `native_transport_max_concurrent_connections_per_ip`: `None` (-1, the default, or 0)
    /// for no cap, as in Cassandra.
    pub native_transport_max_concurrent_connections_per_ip: Option<usize>,
    /// Helenus's `commitlog_ignore_replay_errors` (Cassandra's system property
    /// `cassandra.commitlog.ignorereplayerrors`; also `helenus server
    /// --ignore-commitlog-replay-errors`): start even if the commit log is damaged where it holds
    /// writes, replaying every intact record and losing the damaged ones.
    pub commitlog_ignore_replay_errors: bool,
}

impl Default for Config {
    fn default() -> Self {
        let data = PathBuf::from("./helenus-data");
        Config {
            cluster_name: "Test Cluster".to_string(),
            listen_address: IpAddr::from([127, 0, 0, 1]),
            rpc_address: IpAddr::from([127, 0, 0, 1]),
            native_transport_port: 9042,
            admin_port: 7199,
            data_file_directories: vec![data.join("data")],
            commitlog_directory: data.join("commitlog"),
            commitlog_sync: CommitLogSync::Periodic,
            commitlog_sync_period_ms: 10_000,
            commitlog_total_space_bytes: storage::DEFAULT_COMMIT_LOG_TOTAL_BYTES,
            num_tokens: 16,
            endpoint_snitch: "SimpleSnitch".to_string(),
            dc: "datacenter1".to_string(),
            rack: "rack1".to_string(),
            native_transport_max_frame_size_bytes: 16 * 1024 * 1024,
            native_transport_max_requests_per_connection: 1024,
            block_cache_size_bytes: default_block_cache_bytes(),
            partition_cache_size_bytes: default_block_cache_bytes() / 2,
            batch_thresholds: query::BatchThresholds::default(),
            tombstone_warn_threshold: query::DEFAULT_TOMBSTONE_WARN_THRESHOLD,
            disk_failure_policy: DiskFailurePolicy::Stop,
            commitlog_ignore_replay_errors: false,
            native_transport_max_concurrent_connections: None,
            native_transport_max_concurrent_connections_per_ip: None,
        }
    }
}

/// A sixteenth of the machine's memory, between 64 MiB and 2 GiB: the engine's own cache
/// replaces the kernel's page cache for reads (direct I/O), so it must not be tiny.
fn default_block_cache_bytes() -> usize {
    const MIB: usize = 1024 * 1024;
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<usize>().ok())
        })
        .map(|kb| kb * 1024)
        .unwrap_or(1024 * MIB);
    (total / 16).clamp(64 * MIB, 2048 * MIB)
}

/// The smallest `commitlog_total_space` accepted.
const MIN_COMMITLOG_TOTAL_SPACE_BYTES: u64 = 1 << 20;

/// Keys Cassandra's cassandra.yaml has that Helenus accepts without acting on them, so a
/// Cassandra config file loads with a warning rather than an error.
const IGNORED_CASSANDRA_KEYS: &[&str] = &[
    "seed_provider",
    "hints_directory",
    "saved_caches_directory",
    "partitioner",
    "authenticator",
    "authorizer",
    "role_manager",
    "storage_port",
    "ssl_storage_port",
    "start_native_transport",
    "concurrent_reads",
    "concurrent_writes",
];

fn as_str<'a>(key: &str, v: &'a Value) -> Result<&'a str> {
    v.as_str()
        .ok_or_else(|| anyhow!("invalid value for '{key}': expected a string, got {v:?}"))
}

fn as_i64(key: &str, v: &Value) -> Result<i64> {
    match v {
        Value::Number(n) => n
            .as_i64()
            .ok_or_else(|| anyhow!("invalid value for '{key}': expected an integer, got {n}")),
        Value::String(s) => s
            .trim()
            .parse::<i64>()
            .map_err(|_| anyhow!("invalid value for '{key}': expected an integer, got '{s}'")),
        other => bail!("invalid value for '{key}': expected an integer, got {other:?}"),
    }
}

fn as_bool(key: &str, v: &Value) -> Result<bool> {
    match v {
        Value::Bool(b) => Ok(*b),
        Value::String(s) if s == "true" || s == "false" => Ok(s == "true"),
        other => bail!("invalid value for '{key}': expected true or false, got {other:?}"),
    }
}

fn as_port(key: &str, v: &Value) -> Result<u16> {
    let p = as_u64(key, v)?;
    u16::try_from(p)
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| anyhow!("invalid value for '{key}': {p} is not a TCP port"))
}

fn as_u64(key: &str, v: &Value) -> Result<u64> {
    match v {
        Value::Number(n) => n.as_u64().ok_or_else(|| {
            anyhow!("invalid value for '{key}': expected a non-negative integer, got {n}")
        }),
        Value::String(s) => s.trim().parse::<u64>().map_err(|_| {
            anyhow!("invalid value for '{key}': expected a non-negative integer, got '{s}'")
        }),
        other => bail!("invalid value for '{key}': expected a non-negative integer, got {other:?}"),
    }
}

/// Parses Cassandra 4.1+ duration values like `10000ms`, `10s`, `1m`, or a bare number of
/// `default_unit_ms` milliseconds.
fn as_duration_ms(key: &str, v: &Value) -> Result<u64> {
    if let Value::String(s) = v {
        let s = s.trim();
        let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let (num, unit) = s.split_at(split);
        let n: u64 = num
            .parse()
            .map_err(|_| anyhow!("invalid duration for '{key}': '{s}'"))?;
        let factor = match unit.trim() {
            "" | "ms" => 1,
            "s" => 1000,
            "m" => 60_000,
            "h" => 3_600_000,
            other => bail!("invalid duration unit '{other}' for '{key}' (use ms, s, m or h)"),
        };
        return Ok(n * factor);
    }
    as_u64(key, v)
}

/// Parses Cassandra 4.1+ data sizes like `5KiB`, `50KiB`, `1MiB` or `100B` (the units of its
/// `DataStorageSpec`).
fn as_size_bytes(key: &str, v: &Value) -> Result<u64> {
    let s = as_str(key, v)?.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| anyhow!("invalid data size for '{key}': '{s}'"))?;
    let factor: u64 = match unit.trim() {
        "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        other => bail!("invalid data size unit '{other}' for '{key}' (use B, KiB, MiB or GiB)"),
    };
    n.checked_mul(factor)
        .ok_or_else(|| anyhow!("data size for '{key}' is too large: '{s}'"))
}

fn as_ip(key: &str, v: &Value) -> Result<IpAddr> {
    let s = as_str(key, v)?;
    s.parse()
        .map_err(|_| anyhow!("invalid value for '{key}': '{s}' is not an IP address"))
}

impl Config {
    pub fn load(path: &Path) -> Result<(Config, Vec<String>)> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config file {}", path.display()))?;
        Config::parse(&text).with_context(|| format!("invalid config file {}", path.display()))
    }

    /// Parses YAML; returns the config and warnings about keys that were not used.
    pub fn parse(text: &str) -> Result<(Config, Vec<String>)> {
        let mut config = Config::default();
        let mut warnings = Vec::new();
        let doc: Value = serde_yaml::from_str(text).context("not valid YAML")?;
        let map = match doc {
            Value::Mapping(m) => m,
            Value::Null => return Ok((config, warnings)),
            _ => bail!("the top level must be a mapping of key: value"),
        };
        for (k, v) in &map {
            let key = k
                .as_str()
                .ok_or_else(|| anyhow!("config keys must be strings, got {k:?}"))?;
            if v.is_null() {
                continue;
            }
            match key {
                "cluster_name" => config.cluster_name = as_str(key, v)?.to_string(),
                "listen_address" => config.listen_address = as_ip(key, v)?,
                "rpc_address" => config.rpc_address = as_ip(key, v)?,
                "native_transport_port" => config.native_transport_port = as_port(key, v)?,
                "admin_port" => config.admin_port = as_port(key, v)?,
                "data_file_directories" => {
                    let list = v
                        .as_sequence()
                        .ok_or_else(|| anyhow!("invalid value for '{key}': expected a list of directories"))?;
                    let dirs: Vec<PathBuf> = list
                        .iter()
                        .map(|d| as_str(key, d).map(PathBuf::from))
                        .collect::<Result<_>>()?;
                    if dirs.len() != 1 {
                        bail!("'{key}' must name exactly one directory (several data directories are not supported yet)");
                    }
                    config.data_file_directories = dirs;
                }
                "commitlog_directory" => config.commitlog_directory = PathBuf::from(as_str(key, v)?),
                "commitlog_sync" => {
                    config.commitlog_sync = match as_str(key, v)? {
                        "periodic" => CommitLogSync::Periodic,
                        "batch" => CommitLogSync::Batch,
                        "group" => bail!("commitlog_sync 'group' is not supported; use 'batch' (which groups concurrent syncs) or 'periodic'"),
                        other => bail!("invalid value for 'commitlog_sync': '{other}' (expected periodic or batch)"),
                    }
                }
                "commitlog_sync_period_in_ms" | "commitlog_sync_period" => {
                    let ms = as_duration_ms(key, v)?;
                    if ms == 0 && config.commitlog_sync == CommitLogSync::Periodic {
                        bail!("'{key}' must be positive");
                    }
                    config.commitlog_sync_period_ms = ms;
                }
                "commitlog_sync_batch_window_in_ms" | "commitlog_sync_group_window_in_ms" | "commitlog_sync_group_window" => {
                    // Batch mode shares one fsync among concurrent writers without a fixed
                    // window; the value is validated and otherwise unused.
                    as_duration_ms(key, v)?;
                }
                "commitlog_total_space" | "commitlog_total_space_in_mb" => {
                    let bytes = if key == "commitlog_total_space" {
                        as_size_bytes(key, v)?
                    } else {
                        as_u64(key, v)?.saturating_mul(1 << 20)
                    };
                    if bytes < MIN_COMMITLOG_TOTAL_SPACE_BYTES {
                        bail!("invalid value for '{key}': at least 1 MiB");
                    }
                    config.commitlog_total_space_bytes = bytes;
                }
                "num_tokens" => {
                    let n = as_u64(key, v)?;
                    if n == 0 || n > 1536 {
                        bail!("invalid value for 'num_tokens': {n} (expected 1..=1536)");
                    }
                    config.num_tokens = n as usize;
                }
                "endpoint_snitch" => config.endpoint_snitch = as_str(key, v)?.to_string(),
                "dc" => config.dc = as_str(key, v)?.to_string(),
                "rack" => config.rack = as_str(key, v)?.to_string(),
                "native_transport_max_frame_size_in_mb" => {
                    let mb = as_u64(key, v)?;
                    if mb == 0 || mb > 256 {
                        bail!("invalid value for '{key}': {mb} (expected 1..=256)");
                    }
                    config.native_transport_max_frame_size_bytes = (mb as usize) * 1024 * 1024;
                }
                "native_transport_max_requests_per_connection" => {
                    let n = as_u64(key, v)?;
                    if n == 0 || n > 32_768 {
                        bail!("invalid value for '{key}': {n} (expected 1..=32768)");
                    }
                    config.native_transport_max_requests_per_connection = n as usize;
                }
                "block_cache_size_in_mb" => {
                    let mb = as_u64(key, v)?;
                    if mb == 0 {
                        bail!("'{key}' must be positive");
                    }
                    config.block_cache_size_bytes = (mb as usize) * 1024 * 1024;
                }
                "partition_cache_size_in_mb" => {
                    config.partition_cache_size_bytes = (as_u64(key, v)? as usize) * 1024 * 1024;
                }
                "batch_size_warn_threshold" => {
                    config.batch_thresholds.size_warn_bytes = as_size_bytes(key, v)?;
                }
                "batch_size_warn_threshold_in_kb" => {
                    config.batch_thresholds.size_warn_bytes = as_u64(key, v)?.saturating_mul(1024);
                }
                "batch_size_fail_threshold" => {
                    config.batch_thresholds.size_fail_bytes = as_size_bytes(key, v)?;
                }
                "batch_size_fail_threshold_in_kb" => {
                    config.batch_thresholds.size_fail_bytes = as_u64(key, v)?.saturating_mul(1024);
                }
                "tombstone_warn_threshold" => config.tombstone_warn_threshold = as_u64(key, v)?,
                "unlogged_batch_across_partitions_warn_threshold" => {
                    config.batch_thresholds.unlogged_partitions_warn = as_u64(key, v)?;
                }
                "disk_failure_policy" => {
                    config.disk_failure_policy = match as_str(key, v)? {
                        "die" => DiskFailurePolicy::Die,
                        "stop_paranoid" => DiskFailurePolicy::StopParanoid,
                        "stop" => DiskFailurePolicy::Stop,
                        "best_effort" => DiskFailurePolicy::BestEffort,
                        "ignore" => DiskFailurePolicy::Ignore,
                        other => bail!("invalid value for 'disk_failure_policy': '{other}' (expected die, stop_paranoid, stop, best_effort or ignore)"),
                    }
                }
                "native_transport_max_concurrent_connections" => {
                    config.native_transport_max_concurrent_connections = match as_i64(key, v)? {
                        -1 => None,
                        n if n >= 1 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
                        n => bail!("invalid value for '{key}': {n} (expected -1 or at least 1)"),
                    };
                }
                "native_transport_max_concurrent_connections_per_ip" => {
                    config.native_transport_max_concurrent_connections_per_ip =
                        match as_i64(key, v)? {
                            n if n >= 1 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
                            n if n >= -1 => None, // Cassandra: -1 and 0 disable the cap
                            n => bail!("invalid value for '{key}': {n} (expected -1 or at least 1)"),
                        };
                }
                "commitlog_ignore_replay_errors" => {
                    config.commitlog_ignore_replay_errors = as_bool(key, v)?;
                }
                other if IGNORED_CASSANDRA_KEYS.contains(&other) => {
                    warnings.push(format!("config key '{other}' is accepted for Cassandra compatibility but has no effect"));
                }
                other => warnings.push(format!("unknown config key '{other}' ignored")),
            }
        }
        if !config.endpoint_snitch.ends_with("SimpleSnitch")
            && !config
                .endpoint_snitch
                .ends_with("GossipingPropertyFileSnitch")
        {
            bail!(
                "invalid value for 'endpoint_snitch': '{}' (supported: SimpleSnitch, GossipingPropertyFileSnitch)",
                config.endpoint_snitch
            );
        }
        Ok((config, warnings))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_thresholds_in_either_form() {
        let (c, w) = Config::parse("").expect("empty config");
        assert_eq!(c.batch_thresholds, query::BatchThresholds::default());
        assert!(w.is_empty());
        let (c, w) = Config::parse(
            "batch_size_warn_threshold: 1KiB\nbatch_size_fail_threshold_in_kb: 2\nunlogged_batch_across_partitions_warn_threshold: 3\n",
        )
        .expect("config");
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(
            c.batch_thresholds,
            query::BatchThresholds {
                size_warn_bytes: 1024,
                size_fail_bytes: 2048,
                unlogged_partitions_warn: 3,
            }
        );
        assert!(Config::parse("batch_size_warn_threshold: 5KB\n").is_err());
    }

    #[test]
    fn defaults_need_no_file() {
        let (c, w) = Config::parse("").expect("empty config");
        assert_eq!(c.native_transport_port, 9042);
        assert_eq!(c.commitlog_sync, CommitLogSync::Periodic);
        assert_eq!(c.commitlog_sync_period_ms, 10_000);
        assert!(w.is_empty());
    }

    #[test]
    fn commitlog_total_space_in_either_form() {
        let (c, _) = Config::parse("").expect("empty config");
        assert_eq!(c.commitlog_total_space_bytes, 512 << 20);
        let (c, w) = Config::parse("commitlog_total_space: 8192MiB\n").expect("valid");
        assert_eq!(c.commitlog_total_space_bytes, 8 << 30);
        assert!(w.is_empty(), "{w:?}");
        let (c, _) = Config::parse("commitlog_total_space_in_mb: 100\n").expect("valid");
        assert_eq!(c.commitlog_total_space_bytes, 100 << 20);
        for bad in [
            "commitlog_total_space: 0MiB",
            "commitlog_total_space: 8192",
            "commitlog_total_space_in_mb: 0",
        ] {
            assert!(Config::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cassandra_keys_and_units() {
        let (c, w) = Config::parse(
            "cluster_name: 'Prod'\nnative_transport_port: 19042\ncommitlog_sync: batch\ncommitlog_sync_period: 2s\nnum_tokens: 8\nseed_provider: []\nfoo: 1\n",
        )
        .expect("valid");
        assert_eq!(c.cluster_name, "Prod");
        assert_eq!(c.native_transport_port, 19042);
        assert_eq!(c.commitlog_sync, CommitLogSync::Batch);
        assert_eq!(c.commitlog_sync_period_ms, 2000);
        assert_eq!(c.num_tokens, 8);
        assert_eq!(w.len(), 2, "{w:?}");
    }

    #[test]
    fn caches_are_sized_in_mib_and_the_partition_cache_can_be_off() {
        let (c, w) = Config::parse("block_cache_size_in_mb: 100\npartition_cache_size_in_mb: 0\n")
            .expect("valid");
        assert_eq!(c.block_cache_size_bytes, 100 << 20);
        assert_eq!(c.partition_cache_size_bytes, 0);
        assert!(w.is_empty(), "{w:?}");
        let (c, _) = Config::parse("partition_cache_size_in_mb: 64").expect("valid");
        assert_eq!(c.partition_cache_size_bytes, 64 << 20);
        assert!(Config::default().partition_cache_size_bytes > 0);
        assert!(Config::parse("partition_cache_size_in_mb: -1").is_err());
    }

    #[test]
    fn disk_failure_policy_takes_cassandras_values() {
        assert_eq!(
            Config::parse("").expect("empty").0.disk_failure_policy,
            DiskFailurePolicy::Stop
        );
        for (text, policy) in [
            ("die", DiskFailurePolicy::Die),
            ("stop_paranoid", DiskFailurePolicy::StopParanoid),
            ("stop", DiskFailurePolicy::Stop),
            ("best_effort", DiskFailurePolicy::BestEffort),
            ("ignore", DiskFailurePolicy::Ignore),
        ] {
            let (c, w) = Config::parse(&format!("disk_failure_policy: {text}")).expect(text);
            assert_eq!(c.disk_failure_policy, policy);
            assert!(w.is_empty(), "{w:?}");
        }
        assert!(Config::parse("disk_failure_policy: panic").is_err());
    }

    #[test]
    fn connection_caps_take_cassandras_values() {
        let (c, _) = Config::parse("").expect("empty");
        assert_eq!(c.native_transport_max_concurrent_connections, None);
        assert_eq!(c.native_transport_max_concurrent_connections_per_ip, None);
        let (c, w) = Config::parse(
            "native_transport_max_concurrent_connections: 100\nnative_transport_max_concurrent_connections_per_ip: 10",
        )
        .expect("valid");
        assert_eq!(c.native_transport_max_concurrent_connections, Some(100));
        assert_eq!(
            c.native_transport_max_concurrent_connections_per_ip,
            Some(10)
        );
        assert!(w.is_empty(), "{w:?}");
        let (c, _) = Config::parse(
            "native_transport_max_concurrent_connections: -1\nnative_transport_max_concurrent_connections_per_ip: 0",
        )
        .expect("valid");
        assert_eq!(c.native_transport_max_concurrent_connections, None);
        assert_eq!(c.native_transport_max_concurrent_connections_per_ip, None);
        for bad in [
            "native_transport_max_concurrent_connections: 0",
            "native_transport_max_concurrent_connections: -2",
            "native_transport_max_concurrent_connections_per_ip: -5",
            "native_transport_max_concurrent_connections: many",
        ] {
            assert!(Config::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ignoring_commit_log_replay_errors_is_explicit() {
        assert!(
            !Config::parse("")
                .expect("empty")
                .0
                .commitlog_ignore_replay_errors
        );
        let (c, w) = Config::parse("commitlog_ignore_replay_errors: true").expect("valid");
        assert!(c.commitlog_ignore_replay_errors);
        assert!(w.is_empty(), "{w:?}");
        let (c, _) = Config::parse("commitlog_ignore_replay_errors: false").expect("valid");
        assert!(!c.commitlog_ignore_replay_errors);
        assert!(Config::parse("commitlog_ignore_replay_errors: 1").is_err());
        assert!(Config::parse("commitlog_ignore_replay_errors: yes please").is_err());
    }

    #[test]
    fn bad_values_are_refused() {
        for bad in [
            "native_transport_port: 70000",
            "commitlog_sync: sometimes",
            "listen_address: not-an-ip",
            "num_tokens: 0",
            "data_file_directories: /x",
            "- a list",
        ] {
            assert!(Config::parse(bad).is_err(), "{bad} should be refused");
        }
    }
}
