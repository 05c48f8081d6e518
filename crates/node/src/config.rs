//! Node configuration: a YAML file with Cassandra's key names where one exists, and embedded
//! defaults so that no file is needed for a single local node.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use serde_yaml::Value;

use crate::cassandra_keys::CASSANDRA_KEYS;
use crate::config_cluster;

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
    /// The address internode messaging binds (never a wildcard).
    pub listen_address: IpAddr,
    /// `broadcast_address`: the address other nodes reach this one on (the ring's, and
    /// `system.peers.peer` on the others); `listen_address` unless set.
    pub broadcast_address: IpAddr,
    /// The address the CQL server binds (may be a wildcard if `broadcast_rpc_address` is set).
    pub rpc_address: IpAddr,
    /// `broadcast_rpc_address`: the address clients are told to reach this node on
    /// (`system.local.rpc_address`, `system.peers(_v2)` on the others); `rpc_address` unless
    /// set.
    pub broadcast_rpc_address: IpAddr,
    pub native_transport_port: u16,
    /// `storage_port`: internode messaging (Cassandra's default 7000); also the port of seeds
    /// that name none.
    pub storage_port: u16,
    /// `seed_provider`'s seeds (`SimpleSeedProvider`), every address resolved, with
    /// `storage_port` where a seed names no port. Default: 127.0.0.1 (Cassandra's default
    /// `cassandra.yaml`).
    pub seeds: Vec<SocketAddr>,
    /// `phi_convict_threshold`: how sure the failure detector must be that a silent peer is
    /// down before it is marked DOWN (Cassandra's phi, 5 to 16, default 8).
    pub phi_convict_threshold: f64,
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
    /// `initial_token`: the tokens this node takes at its first start (`num_tokens` of them),
    /// instead of random ones; ignored once the node has tokens. Empty when not set.
    pub initial_tokens: Vec<locator::Token>,
    /// `allocate_tokens_for_local_replication_factor`: accepted, but Helenus has no token
    /// allocator yet, so a first start without `initial_token` takes random tokens and says so.
    pub allocate_tokens_for_local_replication_factor: Option<u32>,
    /// `endpoint_snitch` as written.
    pub endpoint_snitch: String,
    /// The snitch it names, with this node's data centre and rack (for
    /// `GossipingPropertyFileSnitch`, from `cassandra-rackdc.properties` beside the config
    /// file, or Helenus's own `dc` and `rack` keys).
    pub snitch: locator::Snitch,
    pub native_transport_max_frame_size_bytes: usize,
    /// Requests one connection may have in flight before the server stops reading from it.
    pub native_transport_max_requests_per_connection: usize,
    pub block_cache_size_bytes: usize,
    /// Helenus's `shards`: the threads that serve CQL connections and internode lanes, each
    /// with its own event loop (ScyllaDB's `--smp`). `None`: one per core the process may run
    /// on.
    pub shards: Option<usize>,
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
    /// Helenus's `fault_injection`, for tests only (off by default): internode messaging
    /// goes through a fault injector that `helenus admin fault` sets (cut, delay or drop
    /// messages to a given node). Also switched on by `HELENUS_FAULT_INJECTION=true` in the
    /// node's environment (`admin_messaging::fault_injection_enabled`).
    pub fault_injection: bool,
    /// `read_request_timeout`, `range_request_timeout`, `write_request_timeout`,
    /// `truncate_request_timeout`.
    pub request_timeouts: query::RequestTimeouts,
    /// `partition_keys_in_select_*_threshold`, `in_select_cartesian_product_*_threshold`.
    pub in_select_guardrails: query::InSelectGuardrails,
    /// `prepared_statements_cache_size`: the prepared statement cache's bound, and the largest
    /// statement PREPARE accepts.
    pub prepared_statements_cache_size_bytes: u64,
    /// `native_transport_max_request_data_in_flight`: bytes of requests being received or
    /// run, node-wide; past it connections stop reading.
    pub native_transport_max_request_data_in_flight_bytes: u64,
    /// `native_transport_max_request_data_in_flight_per_ip`: the same per client address.
    pub native_transport_max_request_data_in_flight_per_ip_bytes: u64,
    /// Hinted handoff's keys (`hinted_handoff_enabled`, `max_hint_window`, ...).
    pub hints: HintsSettings,
    /// `batchlog_replay_throttle` / `batchlog_replay_throttle_in_kb`: bytes per second the
    /// batch log replay sends, for the whole cluster (each node takes its share); 0 for no
    /// throttle. Cassandra's default, 1024 KiB.
    pub batchlog_replay_throttle_bytes_per_second: u64,
}

/// Hinted handoff's configuration, with Cassandra's key names and defaults (see the `hints`
/// crate for what each does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HintsSettings {
    /// `hinted_handoff_enabled`.
    pub enabled: bool,
    /// `max_hint_window` / `max_hint_window_in_ms`.
    pub max_hint_window: std::time::Duration,
    /// `max_hints_file_size` / `max_hints_file_size_in_mb`.
    pub max_file_size_bytes: u64,
    /// `hinted_handoff_throttle` / `hinted_handoff_throttle_in_kb`: bytes per second; 0 for
    /// no throttle.
    pub throttle_bytes_per_second: u64,
    /// `hints_directory`; `None` for `hints` in the data directory.
    pub directory: Option<PathBuf>,
    /// `hints_flush_period` / `hints_flush_period_in_ms`.
    pub flush_period: std::time::Duration,
    /// `max_hints_size_per_host` (a data size; `0MiB`, the default, for no limit).
    pub max_size_per_host_bytes: u64,
    /// `hinted_handoff_disabled_datacenters` (a list of data centre names).
    pub disabled_datacenters: std::collections::BTreeSet<String>,
}

impl Default for HintsSettings {
    fn default() -> Self {
        HintsSettings {
            enabled: true,
            max_hint_window: hints::DEFAULT_MAX_HINT_WINDOW,
            max_file_size_bytes: hints::DEFAULT_MAX_HINTS_FILE_SIZE_BYTES,
            throttle_bytes_per_second: hints::DEFAULT_THROTTLE_BYTES_PER_SECOND,
            directory: None,
            flush_period: hints::DEFAULT_FLUSH_PERIOD,
            max_size_per_host_bytes: 0,
            disabled_datacenters: std::collections::BTreeSet::new(),
        }
    }
}

impl Config {
    /// Where hints are kept: `hints_directory`, else `hints` in the (first) data directory,
    /// beside the metadata log's `metadata`.
    pub fn hints_directory(&self) -> PathBuf {
        self.hints
            .directory
            .clone()
            .unwrap_or_else(|| self.data_file_directories[0].join("hints"))
    }
}

/// Cassandra's bound on `max_hints_file_size` (it must stay below 2 GiB).
const MAX_HINTS_FILE_SIZE_BYTES: u64 = (2048 << 20) - 1;

impl Default for Config {
    fn default() -> Self {
        let data = PathBuf::from("./helenus-data");
        Config {
            cluster_name: "Test Cluster".to_string(),
            listen_address: IpAddr::from([127, 0, 0, 1]),
            broadcast_address: IpAddr::from([127, 0, 0, 1]),
            rpc_address: IpAddr::from([127, 0, 0, 1]),
            broadcast_rpc_address: IpAddr::from([127, 0, 0, 1]),
            native_transport_port: 9042,
            storage_port: DEFAULT_STORAGE_PORT,
            seeds: vec![SocketAddr::new(
                IpAddr::from([127, 0, 0, 1]),
                DEFAULT_STORAGE_PORT,
            )],
            phi_convict_threshold: 8.0,
            admin_port: 7199,
            data_file_directories: vec![data.join("data")],
            commitlog_directory: data.join("commitlog"),
            commitlog_sync: CommitLogSync::Periodic,
            commitlog_sync_period_ms: 10_000,
            commitlog_total_space_bytes: storage::DEFAULT_COMMIT_LOG_TOTAL_BYTES,
            num_tokens: 16,
            initial_tokens: Vec::new(),
            allocate_tokens_for_local_replication_factor: None,
            endpoint_snitch: "SimpleSnitch".to_string(),
            snitch: locator::Snitch::Simple,
            native_transport_max_frame_size_bytes: 16 * 1024 * 1024,
            native_transport_max_requests_per_connection: 1024,
            block_cache_size_bytes: default_block_cache_bytes(),
            partition_cache_size_bytes: default_block_cache_bytes() / 2,
            shards: None,
            batch_thresholds: query::BatchThresholds::default(),
            tombstone_warn_threshold: query::DEFAULT_TOMBSTONE_WARN_THRESHOLD,
            disk_failure_policy: DiskFailurePolicy::Stop,
            commitlog_ignore_replay_errors: false,
            fault_injection: false,
            request_timeouts: query::RequestTimeouts::default(),
            in_select_guardrails: query::InSelectGuardrails::default(),
            prepared_statements_cache_size_bytes: query::DEFAULT_PREPARED_STATEMENTS_CACHE_BYTES,
            native_transport_max_request_data_in_flight_bytes: cassandra_heap_bytes() / 10,
            native_transport_max_request_data_in_flight_per_ip_bytes: cassandra_heap_bytes() / 40,
            native_transport_max_concurrent_connections: None,
            native_transport_max_concurrent_connections_per_ip: None,
            hints: HintsSettings::default(),
            batchlog_replay_throttle_bytes_per_second: 1024 << 10,
        }
    }
}

/// The machine's memory in bytes (1 GiB if it cannot be read).
fn memory_bytes() -> usize {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<usize>().ok())
        })
        .map_or(1 << 30, |kb| kb * 1024)
}

/// A sixteenth of the machine's memory, between 64 MiB and 2 GiB: the engine's own cache
/// replaces the kernel's page cache for reads (direct I/O), so it must not be tiny.
fn default_block_cache_bytes() -> usize {
    const MIB: usize = 1024 * 1024;
    (memory_bytes() / 16).clamp(64 * MIB, 2048 * MIB)
}

/// The heap Cassandra would give itself on this machine (`cassandra-env.sh`:
/// max(min(memory/2, 1 GiB), min(memory/4, 8 GiB))), which its defaults for the bytes of
/// requests in flight are fractions of (a tenth node-wide, a fortieth per client address):
/// Helenus has no heap, and takes the same share of the machine.
fn cassandra_heap_bytes() -> u64 {
    let memory = memory_bytes() as u64;
    (memory / 2).min(1 << 30).max((memory / 4).min(8 << 30))
}

/// Cassandra's default `storage_port`.
pub const DEFAULT_STORAGE_PORT: u16 = 7000;

/// The smallest `commitlog_total_space` accepted.
const MIN_COMMITLOG_TOTAL_SPACE_BYTES: u64 = 1 << 20;

/// The smallest `prepared_statements_cache_size` accepted: Cassandra's unit, and room for
/// hundreds of statements (one takes about 1.5 KiB).
const MIN_PREPARED_STATEMENTS_CACHE_BYTES: u64 = 1 << 20;

/// The smallest bytes-in-flight limits accepted: below a frame of a few requests, clients
/// would wait for each other's requests all the time.
const MIN_REQUEST_DATA_IN_FLIGHT_BYTES: u64 = 1 << 20;

/// Settings whose effect is security (authentication, authorization, encryption, auditing),
/// with the values that ask for none of it, which Helenus accepts: `(key, what it turns on,
/// accepted class)`. Any other class stops the node at start, never serving clients without
/// what the operator asked for (see `security_refusal`).
const SECURITY_CLASSES: &[(&str, &str, &str)] = &[
    (
        "authenticator",
        "client authentication",
        "AllowAllAuthenticator",
    ),
    (
        "authorizer",
        "authorization of clients' requests",
        "AllowAllAuthorizer",
    ),
    // Cassandra's default: with AllowAllAuthenticator no client logs in, so it grants nothing.
    (
        "role_manager",
        "roles managed outside Cassandra's tables",
        "CassandraRoleManager",
    ),
    (
        "network_authorizer",
        "authorization of clients by data centre",
        "AllowAllNetworkAuthorizer",
    ),
    (
        "cidr_authorizer",
        "authorization of clients by address",
        "AllowAllCIDRAuthorizer",
    ),
    (
        "internode_authenticator",
        "authentication of other nodes",
        "AllowAllInternodeAuthenticator",
    ),
];

/// The security settings that are options blocks: `(key, what it turns on)`; see
/// `security_refusal` for the values that turn it on.
const SECURITY_OPTIONS: &[(&str, &str)] = &[
    ("client_encryption_options", "TLS for client connections"),
    ("server_encryption_options", "TLS between nodes"),
    (
        "transparent_data_encryption_options",
        "encryption of data files",
    ),
    ("audit_logging_options", "audit logging"),
];

/// Why the node must not start with `key: v`, if the setting asks for a security feature
/// Helenus does not have yet; `None` for a setting that asks for none (the permissive values
/// of Cassandra's defaults) or is not a security setting.
fn security_refusal(key: &str, v: &Value) -> Option<String> {
    let refuse = |shown: String, what: &str, instead: &str| {
        Some(format!(
            "'{key}: {shown}' asks for {what}, which Helenus does not support yet; the node does not start rather than serve clients without it ({instead})"
        ))
    };
    if let Some((_, what, accepted)) = SECURITY_CLASSES.iter().find(|(k, _, _)| *k == key) {
        // A class name, short or qualified, or Cassandra 5.0's `{class_name: ..., parameters}`.
        let class = match v {
            Value::String(s) => Some(s.as_str()),
            Value::Mapping(m) => m.get("class_name").and_then(Value::as_str),
            _ => None,
        };
        let short = class.map(|c| c.rsplit('.').next().unwrap_or(c));
        if short == Some(*accepted) {
            return None;
        }
        return refuse(
            class.unwrap_or("?").to_string(),
            what,
            &format!("remove the key or set it to {accepted}"),
        );
    }
    if key == "native_transport_port_ssl" {
        return refuse(yaml_text(v), "a TLS port for clients", "remove the key");
    }
    let (_, what) = SECURITY_OPTIONS.iter().find(|(k, _)| *k == key)?;
    let Value::Mapping(options) = v else {
        return refuse(yaml_text(v), what, "remove the key");
    };
    // Cassandra reads its YAML as YAML 1.1, where `yes`, `on` and `y` are true too: any value
    // but an absent one or a spelling of false counts as on, so that a setting written in a
    // form Helenus does not expect stops the node rather than leaving security off.
    let flag = |name: &str| match options.get(name) {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => !matches!(
            s.to_ascii_lowercase().as_str(),
            "false" | "no" | "off" | "n"
        ),
        Some(_) => true,
    };
    let mut on: Vec<String> = ["enabled", "optional"]
        .into_iter()
        .filter(|name| flag(name))
        .map(|name| format!("{name}: true"))
        .collect();
    if key == "server_encryption_options" {
        match options.get("internode_encryption").and_then(Value::as_str) {
            None | Some("none") => {}
            Some(mode) => on.push(format!("internode_encryption: {mode}")),
        }
    }
    if on.is_empty() {
        return None;
    }
    refuse(
        format!("{{{}}}", on.join(", ")),
        what,
        "remove the key or turn it off",
    )
}

fn is_security_key(key: &str) -> bool {
    SECURITY_CLASSES.iter().any(|(k, _, _)| *k == key)
        || SECURITY_OPTIONS.iter().any(|(k, _)| *k == key)
        || key == "native_transport_port_ssl"
}

/// A scalar YAML value as written; other values as `...` (options may hold passwords).
fn yaml_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        _ => "...".to_string(),
    }
}

/// The one start-up warning about keys Helenus does not act on: Cassandra's keys it accepts
/// for compatibility, then keys neither knows (misspelt, perhaps); `None` if there are none.
fn ignored_keys_warning(no_effect: &[String], unknown: &[String]) -> Option<String> {
    let mut parts = Vec::new();
    if !no_effect.is_empty() {
        parts.push(format!(
            "Cassandra config keys Helenus accepts but does not act on: {}",
            no_effect.join(", ")
        ));
    }
    if !unknown.is_empty() {
        parts.push(format!("unknown config keys: {}", unknown.join(", ")));
    }
    (!parts.is_empty()).then(|| format!("{} (ignored)", parts.join("; ")))
}

/// A YAML list of names (Cassandra's `Set<String>` keys); null or `[]` for none.
fn as_name_set(key: &str, v: &Value) -> Result<std::collections::BTreeSet<String>> {
    if v.is_null() {
        return Ok(Default::default());
    }
    let list = v
        .as_sequence()
        .ok_or_else(|| anyhow!("invalid value for '{key}': expected a list of names"))?;
    list.iter()
        .map(|name| as_str(key, name).map(|n| n.trim().to_string()))
        .collect()
}

/// `hints_compression`: hint files are written uncompressed, so any compressor (Cassandra's
/// form is a list of `class_name: LZ4Compressor` with `parameters`) is refused at start-up
/// rather than ignored; null or an empty list, no compression, is accepted.
fn check_hints_compression(v: &Value) -> Result<()> {
    let empty = v.is_null() || v.as_sequence().is_some_and(|s| s.is_empty());
    if !empty {
        bail!(
            "hints_compression is not supported yet: Helenus writes hint files uncompressed; \
             remove the key (or leave it empty) to start"
        );
    }
    Ok(())
}

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

/// The most `shards` a node may be configured with.
const MAX_SHARDS: u64 = 256;

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

/// A guardrail threshold: a positive count, or -1 (Cassandra's "off").
fn as_threshold(key: &str, v: &Value) -> Result<Option<u64>> {
    let n = match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse::<i64>().ok(),
        _ => None,
    };
    match n {
        Some(-1) => Ok(None),
        Some(n) if n > 0 => Ok(Some(n as u64)),
        _ => bail!("invalid value for '{key}': expected a positive integer or -1 (off), got {v:?}"),
    }
}

/// A request timeout: a positive duration (`5000ms`, `5s`), or for the `_in_ms` names a
/// number of milliseconds.
fn as_timeout(key: &str, v: &Value) -> Result<std::time::Duration> {
    let ms = as_duration_ms(key, v)?;
    if ms == 0 {
        bail!("invalid value for '{key}': a timeout must be positive");
    }
    Ok(std::time::Duration::from_millis(ms))
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
            "d" => 86_400_000,
            other => bail!("invalid duration unit '{other}' for '{key}' (use ms, s, m, h or d)"),
        };
        return n
            .checked_mul(factor)
            .ok_or_else(|| anyhow!("duration for '{key}' is too large: '{s}'"));
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

/// The cluster keys [`Config::parse_with_rackdc`] settles once every key is read: defaults
/// that follow other keys (`broadcast_address` → `listen_address`, seeds' port →
/// `storage_port`) and checks across keys (Cassandra's `applyAddressConfig`,
/// `applyTokensConfig`, `GossipingPropertyFileSnitch`).
#[derive(Default)]
struct ClusterKeys {
    broadcast_address: Option<IpAddr>,
    broadcast_rpc_address: Option<IpAddr>,
    /// Seeds as written.
    seeds: Option<Vec<String>>,
    num_tokens_set: bool,
    /// Helenus's own `dc` and `rack`.
    dc: Option<String>,
    rack: Option<String>,
}

impl ClusterKeys {
    fn apply(
        self,
        config: &mut Config,
        rackdc: Option<&str>,
        warnings: &mut Vec<String>,
        resolve: impl Fn(&str, u16) -> std::io::Result<Vec<SocketAddr>>,
    ) -> Result<()> {
        if config.listen_address.is_unspecified() {
            bail!(
                "listen_address cannot be a wildcard address ({})!",
                config.listen_address
            );
        }
        config.broadcast_address = match self.broadcast_address {
            Some(a) if a.is_unspecified() => {
                bail!("broadcast_address cannot be a wildcard address ({a})!")
            }
            Some(a) => a,
            None => config.listen_address,
        };
        config.broadcast_rpc_address = match self.broadcast_rpc_address {
            Some(a) if a.is_unspecified() => {
                bail!("broadcast_rpc_address cannot be a wildcard address ({a})!")
            }
            Some(a) => a,
            None if config.rpc_address.is_unspecified() => bail!(
                "If rpc_address is set to a wildcard address ({0}), then you must set broadcast_rpc_address to a value other than {0}",
                config.rpc_address
            ),
            None => config.rpc_address,
        };
        if let Some(seeds) = &self.seeds {
            let (seeds, unresolved) =
                config_cluster::resolve_seeds(seeds, config.storage_port, resolve)?;
            config.seeds = seeds;
            warnings.extend(unresolved);
        } else {
            config.seeds = vec![SocketAddr::new(
                IpAddr::from([127, 0, 0, 1]),
                config.storage_port,
            )];
        }
        if !config.initial_tokens.is_empty() {
            let num_tokens = self.num_tokens_set.then_some(config.num_tokens);
            config.num_tokens =
                config_cluster::check_initial_token_count(config.initial_tokens.len(), num_tokens)?;
        }
        config.snitch = self.snitch(&config.endpoint_snitch, rackdc)?;
        Ok(())
    }

    /// The snitch `endpoint_snitch` names. `GossipingPropertyFileSnitch` takes its data centre
    /// and rack from `cassandra-rackdc.properties` (Cassandra's place for them) or from
    /// Helenus's own `dc` and `rack` keys, not both.
    fn snitch(&self, class: &str, rackdc: Option<&str>) -> Result<locator::Snitch> {
        let short = class.rsplit('.').next().unwrap_or(class);
        let (dc, rack) = match (short, rackdc, &self.dc, &self.rack) {
            ("GossipingPropertyFileSnitch", Some(_), Some(_), _)
            | ("GossipingPropertyFileSnitch", Some(_), _, Some(_)) => bail!(
                "GossipingPropertyFileSnitch: the data centre and rack are set both in {} and by the dc/rack keys of the config file; keep one",
                config_cluster::RACKDC_FILE_NAME
            ),
            ("GossipingPropertyFileSnitch", Some(text), None, None) => {
                config_cluster::rackdc_location(&config_cluster::parse_properties(text))?
            }
            ("GossipingPropertyFileSnitch", None, Some(dc), Some(rack)) => (dc.clone(), rack.clone()),
            ("GossipingPropertyFileSnitch", None, _, _) => bail!(
                "DC or rack not found in snitch properties, check your configuration in: {} (beside the config file)",
                config_cluster::RACKDC_FILE_NAME
            ),
            // SimpleSnitch places the node itself; dc and rack have no effect on it.
            _ => (String::new(), String::new()),
        };
        locator::Snitch::from_class_name(class, &dc, &rack).ok_or_else(|| {
            anyhow!("invalid value for 'endpoint_snitch': '{class}' (supported: SimpleSnitch, GossipingPropertyFileSnitch)")
        })
    }
}

impl Config {
    /// Reads the config file at `path`, and `cassandra-rackdc.properties` beside it if it is
    /// there (see [`Config::parse_with_rackdc`]).
    pub fn load(path: &Path) -> Result<(Config, Vec<String>)> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config file {}", path.display()))?;
        let rackdc_path = path
            .parent()
            .unwrap_or(Path::new("."))
            .join(config_cluster::RACKDC_FILE_NAME);
        let rackdc = match std::fs::read_to_string(&rackdc_path) {
            Ok(text) => Some(text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                return Err(e).with_context(|| format!("cannot read {}", rackdc_path.display()))
            }
        };
        Config::parse_with_rackdc(&text, rackdc.as_deref(), config_cluster::system_resolve)
            .with_context(|| format!("invalid config file {}", path.display()))
    }

    /// Parses YAML; returns the config and warnings about keys that were not used. Seeds are
    /// IP addresses only (a host name fails to resolve).
    #[cfg(test)]
    pub fn parse(text: &str) -> Result<(Config, Vec<String>)> {
        Config::parse_with_rackdc(text, None, |host, _| {
            Err(std::io::Error::other(format!(
                "{host}: no resolver in tests"
            )))
        })
    }

    /// Parses YAML, with the text of `cassandra-rackdc.properties` if there is one, and
    /// `resolve` to look seeds' host names up; returns the config and warnings (keys that were
    /// not used, seeds that did not resolve).
    pub fn parse_with_rackdc(
        text: &str,
        rackdc: Option<&str>,
        resolve: impl Fn(&str, u16) -> std::io::Result<Vec<SocketAddr>>,
    ) -> Result<(Config, Vec<String>)> {
        let mut config = Config::default();
        let mut warnings = Vec::new();
        let mut no_effect: Vec<String> = Vec::new();
        let mut unknown: Vec<String> = Vec::new();
        let doc: Value = serde_yaml::from_str(text).context("not valid YAML")?;
        let map = match doc {
            Value::Mapping(m) => m,
            Value::Null => serde_yaml::Mapping::new(),
            _ => bail!("the top level must be a mapping of key: value"),
        };
        // Keys whose defaults depend on others, or that are checked against others once all
        // are read.
        let mut cluster = ClusterKeys::default();
        for (k, v) in &map {
            let key = k
                .as_str()
                .ok_or_else(|| anyhow!("config keys must be strings, got {k:?}"))?;
            if v.is_null() {
                continue;
            }
            if let Some(reason) = security_refusal(key, v) {
                bail!(reason);
            }
            match key {
                // Security settings that ask for none: what Helenus does.
                _ if is_security_key(key) => {}
                "cluster_name" => config.cluster_name = as_str(key, v)?.to_string(),
                "listen_address" => config.listen_address = as_ip(key, v)?,
                "broadcast_address" => cluster.broadcast_address = Some(as_ip(key, v)?),
                "rpc_address" => config.rpc_address = as_ip(key, v)?,
                "broadcast_rpc_address" => {
                    cluster.broadcast_rpc_address = Some(as_ip(key, v)?);
                }
                // Without them the node would bind 127.0.0.1 where the operator named a network
                // interface.
                "listen_interface" | "rpc_interface" => bail!(
                    "'{key}' is not supported yet; set {} to the interface's address",
                    key.replace("interface", "address")
                ),
                "storage_port" => config.storage_port = as_port(key, v)?,
                "phi_convict_threshold" => {
                    let phi = match v {
                        Value::Number(n) => n.as_f64(),
                        Value::String(s) => s.trim().parse::<f64>().ok(),
                        _ => None,
                    };
                    // Cassandra's bounds and words.
                    config.phi_convict_threshold = phi
                        .filter(|p| (5.0..=16.0).contains(p))
                        .ok_or_else(|| anyhow!("phi_convict_threshold must be between 5 and 16"))?;
                }
                "seed_provider" => cluster.seeds = Some(config_cluster::seed_provider_seeds(v)?),
                "initial_token" => {
                    let text = match v {
                        Value::Number(n) => n.to_string(),
                        other => as_str(key, other)?.to_string(),
                    };
                    config.initial_tokens = config_cluster::initial_tokens(&text)?;
                }
                "allocate_tokens_for_local_replication_factor" => {
                    let rf = as_u64(key, v)?;
                    config.allocate_tokens_for_local_replication_factor = Some(
                        u32::try_from(rf)
                            .ok()
                            .filter(|rf| *rf > 0)
                            .ok_or_else(|| anyhow!("invalid value for '{key}': {rf} (expected a positive replication factor)"))?,
                    );
                }
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
                    cluster.num_tokens_set = true;
                }
                "endpoint_snitch" => config.endpoint_snitch = as_str(key, v)?.to_string(),
                "dc" => cluster.dc = Some(as_str(key, v)?.to_string()),
                "rack" => cluster.rack = Some(as_str(key, v)?.to_string()),
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
                "shards" => {
                    let n = as_u64(key, v)?;
                    if !(1..=MAX_SHARDS).contains(&n) {
                        bail!("'{key}' must be between 1 and {MAX_SHARDS}");
                    }
                    config.shards = Some(n as usize);
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
                "fault_injection" => config.fault_injection = as_bool(key, v)?,
                "commitlog_ignore_replay_errors" => {
                    config.commitlog_ignore_replay_errors = as_bool(key, v)?;
                }
                "read_request_timeout" | "read_request_timeout_in_ms" => {
                    config.request_timeouts.read = as_timeout(key, v)?;
                }
                "range_request_timeout" | "range_request_timeout_in_ms" => {
                    config.request_timeouts.range = as_timeout(key, v)?;
                }
                "write_request_timeout" | "write_request_timeout_in_ms" => {
                    config.request_timeouts.write = as_timeout(key, v)?;
                }
                "truncate_request_timeout" | "truncate_request_timeout_in_ms" => {
                    config.request_timeouts.truncate = as_timeout(key, v)?;
                }
                // Timeouts of requests Helenus does not have (counters, LWT) or that run no
                // long loop (schema changes): checked, otherwise not acted on.
                "request_timeout"
                | "request_timeout_in_ms"
                | "counter_write_request_timeout"
                | "counter_write_request_timeout_in_ms"
                | "cas_contention_timeout"
                | "cas_contention_timeout_in_ms" => {
                    as_timeout(key, v)?;
                    no_effect.push(key.to_string());
                }
                "partition_keys_in_select_warn_threshold" => {
                    config.in_select_guardrails.partition_keys_warn = as_threshold(key, v)?;
                }
                "partition_keys_in_select_fail_threshold" => {
                    config.in_select_guardrails.partition_keys_fail = as_threshold(key, v)?;
                }
                "in_select_cartesian_product_warn_threshold" => {
                    config.in_select_guardrails.cartesian_product_warn = as_threshold(key, v)?;
                }
                "in_select_cartesian_product_fail_threshold" => {
                    config.in_select_guardrails.cartesian_product_fail = as_threshold(key, v)?;
                }
                "prepared_statements_cache_size" | "prepared_statements_cache_size_mb" => {
                    let bytes = if key == "prepared_statements_cache_size" {
                        as_size_bytes(key, v)?
                    } else {
                        as_u64(key, v)?.saturating_mul(1 << 20)
                    };
                    if bytes < MIN_PREPARED_STATEMENTS_CACHE_BYTES {
                        bail!("invalid value for '{key}': at least 1MiB");
                    }
                    config.prepared_statements_cache_size_bytes = bytes;
                }
                "native_transport_max_request_data_in_flight"
                | "native_transport_max_concurrent_requests_in_bytes"
                | "native_transport_max_request_data_in_flight_per_ip"
                | "native_transport_max_concurrent_requests_in_bytes_per_ip" => {
                    let bytes = if key.contains("request_data") {
                        as_size_bytes(key, v)?
                    } else {
                        as_u64(key, v)?
                    };
                    if bytes < MIN_REQUEST_DATA_IN_FLIGHT_BYTES {
                        bail!("invalid value for '{key}': at least 1MiB");
                    }
                    if key.ends_with("per_ip") {
                        config.native_transport_max_request_data_in_flight_per_ip_bytes = bytes;
                    } else {
                        config.native_transport_max_request_data_in_flight_bytes = bytes;
                    }
                }
                "hinted_handoff_enabled" => config.hints.enabled = as_bool(key, v)?,
                "max_hint_window" | "max_hint_window_in_ms" => {
                    config.hints.max_hint_window =
                        std::time::Duration::from_millis(as_duration_ms(key, v)?);
                }
                "max_hints_file_size" | "max_hints_file_size_in_mb" => {
                    let bytes = if key == "max_hints_file_size" {
                        as_size_bytes(key, v)?
                    } else {
                        as_u64(key, v)?.saturating_mul(1 << 20)
                    };
                    if bytes == 0 || bytes > MAX_HINTS_FILE_SIZE_BYTES {
                        bail!("invalid value for '{key}': must be positive and less than 2048 MiB");
                    }
                    config.hints.max_file_size_bytes = bytes;
                }
                "hinted_handoff_throttle" | "hinted_handoff_throttle_in_kb" => {
                    config.hints.throttle_bytes_per_second = if key == "hinted_handoff_throttle" {
                        as_size_bytes(key, v)?
                    } else {
                        as_u64(key, v)?.saturating_mul(1024)
                    };
                }
                "batchlog_replay_throttle" | "batchlog_replay_throttle_in_kb" => {
                    config.batchlog_replay_throttle_bytes_per_second =
                        if key == "batchlog_replay_throttle" {
                            as_size_bytes(key, v)?
                        } else {
                            as_u64(key, v)?.saturating_mul(1024)
                        };
                }
                "hints_directory" => {
                    config.hints.directory = Some(PathBuf::from(as_str(key, v)?));
                }
                "hints_flush_period" | "hints_flush_period_in_ms" => {
                    let ms = as_duration_ms(key, v)?;
                    if ms == 0 {
                        bail!("invalid value for '{key}': must be positive");
                    }
                    config.hints.flush_period = std::time::Duration::from_millis(ms);
                }
                "max_hints_size_per_host" => {
                    config.hints.max_size_per_host_bytes = as_size_bytes(key, v)?;
                }
                "hinted_handoff_disabled_datacenters" => {
                    config.hints.disabled_datacenters = as_name_set(key, v)?;
                }
                "hints_compression" => check_hints_compression(v)?,
                other if CASSANDRA_KEYS.contains(&other) => no_effect.push(other.to_string()),
                other => unknown.push(other.to_string()),
            }
        }
        warnings.extend(ignored_keys_warning(&no_effect, &unknown));
        for (name, warn, fail) in [
            (
                "partition_keys_in_select",
                config.in_select_guardrails.partition_keys_warn,
                config.in_select_guardrails.partition_keys_fail,
            ),
            (
                "in_select_cartesian_product",
                config.in_select_guardrails.cartesian_product_warn,
                config.in_select_guardrails.cartesian_product_fail,
            ),
        ] {
            if let (Some(warn), Some(fail)) = (warn, fail) {
                if warn > fail {
                    bail!("The warn threshold {warn} for {name}_warn_threshold should be lower than the fail threshold {fail}");
                }
            }
        }
        cluster.apply(&mut config, rackdc, &mut warnings, resolve)?;
        Ok((config, warnings))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

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
    fn hints_size_per_host_disabled_datacenters_and_compression() {
        let (c, w) = Config::parse(
            "max_hints_size_per_host: 16MiB\nhinted_handoff_disabled_datacenters:\n  - dc2\n  - dc3\nhints_compression:\n",
        )
        .expect("valid");
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(c.hints.max_size_per_host_bytes, 16 << 20);
        assert_eq!(
            c.hints.disabled_datacenters,
            ["dc2".to_string(), "dc3".to_string()].into()
        );
        let (c, _) =
            Config::parse("hinted_handoff_disabled_datacenters: []\nhints_compression: []\n")
                .expect("valid");
        assert!(c.hints.disabled_datacenters.is_empty());
        assert_eq!(
            c.hints.max_size_per_host_bytes, 0,
            "0: no limit, the default"
        );
        assert!(Config::parse("max_hints_size_per_host: lots\n").is_err());
        assert!(Config::parse("hinted_handoff_disabled_datacenters: dc2\n").is_err());
        let lz4 = "hints_compression:\n  - class_name: LZ4Compressor\n    parameters:\n      -\n";
        let e = Config::parse(lz4).expect_err("refused").to_string();
        assert!(e.contains("hints_compression is not supported yet"), "{e}");
    }

    #[test]
    fn hints_keys_in_either_form() {
        let (c, w) = Config::parse("").expect("empty config");
        assert_eq!(c.hints, HintsSettings::default());
        assert_eq!(c.hints.max_hint_window, Duration::from_secs(3 * 3600));
        assert_eq!(c.hints.max_file_size_bytes, 128 << 20);
        assert_eq!(c.hints.throttle_bytes_per_second, 1024 * 1024);
        assert_eq!(c.hints.flush_period, Duration::from_secs(10));
        assert_eq!(
            c.hints_directory(),
            c.data_file_directories[0].join("hints")
        );
        assert!(w.is_empty());
        let (c, w) = Config::parse(
            "hinted_handoff_enabled: false\nmax_hint_window: 1h\nmax_hints_file_size: 64MiB\nhinted_handoff_throttle: 2048KiB\nhints_directory: /h\nhints_flush_period: 5s\n",
        )
        .expect("valid");
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(
            c.hints,
            HintsSettings {
                enabled: false,
                max_hint_window: Duration::from_secs(3600),
                max_file_size_bytes: 64 << 20,
                throttle_bytes_per_second: 2048 << 10,
                directory: Some(PathBuf::from("/h")),
                flush_period: Duration::from_secs(5),
                max_size_per_host_bytes: 0,
                disabled_datacenters: Default::default(),
            }
        );
        assert_eq!(c.hints_directory(), PathBuf::from("/h"));
        let (c, _) = Config::parse(
            "max_hint_window_in_ms: 60000\nmax_hints_file_size_in_mb: 1\nhinted_handoff_throttle_in_kb: 0\nhints_flush_period_in_ms: 100\n",
        )
        .expect("valid");
        assert_eq!(c.hints.max_hint_window, Duration::from_secs(60));
        assert_eq!(c.hints.max_file_size_bytes, 1 << 20);
        assert_eq!(c.hints.throttle_bytes_per_second, 0);
        assert_eq!(
            Config::parse("batchlog_replay_throttle: 2MiB\n")
                .expect("valid")
                .0
                .batchlog_replay_throttle_bytes_per_second,
            2 << 20
        );
        assert_eq!(
            Config::parse("batchlog_replay_throttle_in_kb: 0\n")
                .expect("valid")
                .0
                .batchlog_replay_throttle_bytes_per_second,
            0
        );
        assert_eq!(
            Config::default().batchlog_replay_throttle_bytes_per_second,
            1 << 20
        );
        assert_eq!(c.hints.flush_period, Duration::from_millis(100));
        for bad in [
            "hinted_handoff_enabled: maybe",
            "max_hints_file_size_in_mb: 0",
            "max_hints_file_size: 2048MiB",
            "hints_flush_period: 0ms",
            "max_hint_window: 3 hours",
        ] {
            assert!(Config::parse(bad).is_err(), "{bad}");
        }
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
            "cluster_name: 'Prod'\nnative_transport_port: 19042\ncommitlog_sync: batch\ncommitlog_sync_period: 2s\nnum_tokens: 8\nssl_storage_port: 7001\nfoo: 1\n",
        )
        .expect("valid");
        assert_eq!(c.cluster_name, "Prod");
        assert_eq!(c.native_transport_port, 19042);
        assert_eq!(c.commitlog_sync, CommitLogSync::Batch);
        assert_eq!(c.commitlog_sync_period_ms, 2000);
        assert_eq!(c.num_tokens, 8);
        // One line for every key not acted on: Cassandra's, then unknown ones.
        assert_eq!(
            w,
            ["Cassandra config keys Helenus accepts but does not act on: ssl_storage_port; unknown config keys: foo (ignored)"]
        );
    }

    #[test]
    fn ignored_keys_make_one_warning_line() {
        let (_, w) = Config::parse(
            "concurrent_writes: 32\nconcurrent_reads: 32\nrequest_timeout: 10s\nfrobnicate: 1\nmystery: 2\n",
        )
        .expect("valid");
        assert_eq!(
            w,
            ["Cassandra config keys Helenus accepts but does not act on: concurrent_writes, concurrent_reads, request_timeout; unknown config keys: frobnicate, mystery (ignored)"]
        );
        let (_, w) = Config::parse("mystery: 2\n").expect("valid");
        assert_eq!(w, ["unknown config keys: mystery (ignored)"]);
    }

    #[test]
    fn security_settings_that_ask_for_security_stop_the_node() {
        for refused in [
            "authenticator: PasswordAuthenticator",
            "authenticator: org.apache.cassandra.auth.PasswordAuthenticator",
            "authenticator:\n  class_name: org.apache.cassandra.auth.MutualTlsAuthenticator\n  parameters:\n    validator_class_name: x",
            "authorizer: CassandraAuthorizer",
            "role_manager: com.example.LdapRoleManager",
            "network_authorizer: CassandraNetworkAuthorizer",
            "cidr_authorizer: CassandraCIDRAuthorizer",
            "internode_authenticator: com.example.Internode",
            "client_encryption_options:\n  enabled: true\n  keystore: conf/.keystore\n  keystore_password: secret",
            "client_encryption_options:\n  enabled: false\n  optional: true",
            // YAML 1.1's spellings of true, which Cassandra reads as true.
            "client_encryption_options:\n  enabled: yes",
            "client_encryption_options:\n  enabled: 'on'",
            "transparent_data_encryption_options:\n  enabled: 1",
            "server_encryption_options:\n  internode_encryption: all",
            "server_encryption_options:\n  internode_encryption: dc",
            "transparent_data_encryption_options:\n  enabled: true",
            "audit_logging_options:\n  enabled: true",
            "native_transport_port_ssl: 9142",
        ] {
            let e = Config::parse(refused).expect_err(refused).to_string();
            assert!(
                e.contains("which Helenus does not support yet; the node does not start"),
                "{refused}: {e}"
            );
            assert!(!e.contains("secret"), "a password was shown: {e}");
        }
        let e = Config::parse("authenticator: PasswordAuthenticator")
            .expect_err("refused")
            .to_string();
        assert_eq!(e, "'authenticator: PasswordAuthenticator' asks for client authentication, which Helenus does not support yet; the node does not start rather than serve clients without it (remove the key or set it to AllowAllAuthenticator)");
        // Cassandra's defaults, which ask for no security, load without a warning about them.
        let (_, w) = Config::parse(
            "authenticator: AllowAllAuthenticator\nauthorizer: org.apache.cassandra.auth.AllowAllAuthorizer\nrole_manager: CassandraRoleManager\nnetwork_authorizer: AllowAllNetworkAuthorizer\ncidr_authorizer:\n  class_name: AllowAllCIDRAuthorizer\nclient_encryption_options:\n  enabled: false\n  keystore: conf/.keystore\nserver_encryption_options:\n  internode_encryption: none\ntransparent_data_encryption_options:\n  enabled: 'no'\naudit_logging_options:\n  enabled: false\n",
        )
        .expect("permissive values");
        assert!(w.is_empty(), "{w:?}");
    }

    #[test]
    fn request_timeouts_in_either_form() {
        let (c, w) = Config::parse("").expect("empty config");
        assert!(w.is_empty());
        assert_eq!(c.request_timeouts, query::RequestTimeouts::default());
        assert_eq!(c.request_timeouts.read, Duration::from_secs(5));
        assert_eq!(c.request_timeouts.range, Duration::from_secs(10));
        assert_eq!(c.request_timeouts.write, Duration::from_secs(2));
        assert_eq!(c.request_timeouts.truncate, Duration::from_secs(60));
        let (c, w) = Config::parse(
            "read_request_timeout: 1500ms\nrange_request_timeout_in_ms: 20000\nwrite_request_timeout: 3s\ntruncate_request_timeout_in_ms: 90000\n",
        )
        .expect("valid");
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(c.request_timeouts.read, Duration::from_millis(1500));
        assert_eq!(c.request_timeouts.range, Duration::from_secs(20));
        assert_eq!(c.request_timeouts.write, Duration::from_secs(3));
        assert_eq!(c.request_timeouts.truncate, Duration::from_secs(90));
        for bad in [
            "read_request_timeout: 0ms",
            "write_request_timeout: 2 fortnights",
            "truncate_request_timeout: x",
        ] {
            assert!(Config::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn guardrails_cache_and_in_flight_limits() {
        let (c, _) = Config::parse("").expect("empty config");
        assert_eq!(
            c.in_select_guardrails.cartesian_product_fail,
            Some(query::DEFAULT_IN_SELECT_CARTESIAN_PRODUCT_FAIL_THRESHOLD)
        );
        assert_eq!(c.prepared_statements_cache_size_bytes, 10 << 20);
        assert!(c.native_transport_max_request_data_in_flight_per_ip_bytes >= 25 << 20);
        assert_eq!(
            c.native_transport_max_request_data_in_flight_bytes / 4,
            c.native_transport_max_request_data_in_flight_per_ip_bytes
        );
        let (c, w) = Config::parse(
            "partition_keys_in_select_warn_threshold: 10\npartition_keys_in_select_fail_threshold: 20\nin_select_cartesian_product_fail_threshold: -1\nprepared_statements_cache_size: 1MiB\nnative_transport_max_request_data_in_flight: 64MiB\nnative_transport_max_concurrent_requests_in_bytes_per_ip: 2097152\n",
        )
        .expect("valid");
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(
            c.in_select_guardrails,
            query::InSelectGuardrails {
                partition_keys_warn: Some(10),
                partition_keys_fail: Some(20),
                cartesian_product_warn: None,
                cartesian_product_fail: None,
            }
        );
        assert_eq!(c.prepared_statements_cache_size_bytes, 1 << 20);
        assert_eq!(
            c.native_transport_max_request_data_in_flight_bytes,
            64 << 20
        );
        assert_eq!(
            c.native_transport_max_request_data_in_flight_per_ip_bytes,
            2 << 20
        );
        let (c, _) = Config::parse("prepared_statements_cache_size_mb: 3").expect("valid");
        assert_eq!(c.prepared_statements_cache_size_bytes, 3 << 20);
        for bad in [
            "partition_keys_in_select_fail_threshold: 0",
            "in_select_cartesian_product_fail_threshold: -2",
            "in_select_cartesian_product_warn_threshold: 10\nin_select_cartesian_product_fail_threshold: 5",
            "prepared_statements_cache_size: 512KiB",
            "native_transport_max_request_data_in_flight_per_ip: 1KiB",
        ] {
            assert!(Config::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn caches_are_sized_in_mib_and_the_partition_cache_can_be_off() {
        let (c, w) = Config::parse("block_cache_size_in_mb: 100\npartition_cache_size_in_mb: 0\n")
            .expect("valid");
        assert_eq!(c.block_cache_size_bytes, 100 << 20);
        assert_eq!(c.partition_cache_size_bytes, 0);
        assert!(w.is_empty(), "{w:?}");
        let (c, _) = Config::parse("shards: 3").expect("valid");
        assert_eq!(c.shards, Some(3));
        assert_eq!(Config::default().shards, None);
        for bad in ["shards: 0", "shards: 257", "shards: two"] {
            assert!(Config::parse(bad).is_err(), "{bad}");
        }
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

    #[test]
    fn addresses_default_and_are_checked_as_cassandra_does() {
        let (c, w) = Config::parse("").expect("empty");
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(c.broadcast_address, c.listen_address);
        assert_eq!(c.broadcast_rpc_address, c.rpc_address);
        assert_eq!(c.storage_port, 7000);
        assert_eq!(c.seeds, [SocketAddr::from(([127, 0, 0, 1], 7000))]);
        let (c, w) = Config::parse(
            "listen_address: 10.0.0.5\nrpc_address: 0.0.0.0\nbroadcast_rpc_address: 192.168.1.5\nstorage_port: 7010\n",
        )
        .expect("valid");
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(c.broadcast_address, IpAddr::from([10, 0, 0, 5]));
        assert_eq!(c.rpc_address, IpAddr::from([0, 0, 0, 0]));
        assert_eq!(c.broadcast_rpc_address, IpAddr::from([192, 168, 1, 5]));
        assert_eq!(c.storage_port, 7010);
        // The default seed takes the storage port too.
        assert_eq!(c.seeds, [SocketAddr::from(([127, 0, 0, 1], 7010))]);
        let (c, _) = Config::parse("listen_address: 10.0.0.5\nbroadcast_address: 203.0.113.5\n")
            .expect("valid");
        assert_eq!(c.broadcast_address, IpAddr::from([203, 0, 113, 5]));
        for (bad, message) in [
            ("listen_address: 0.0.0.0", "listen_address cannot be a wildcard address (0.0.0.0)!"),
            ("listen_address: '::'", "listen_address cannot be a wildcard address (::)!"),
            ("broadcast_address: 0.0.0.0", "broadcast_address cannot be a wildcard address (0.0.0.0)!"),
            ("rpc_address: 0.0.0.0", "If rpc_address is set to a wildcard address (0.0.0.0), then you must set broadcast_rpc_address to a value other than 0.0.0.0"),
            ("rpc_address: 0.0.0.0\nbroadcast_rpc_address: 0.0.0.0", "broadcast_rpc_address cannot be a wildcard address (0.0.0.0)!"),
            ("broadcast_rpc_address: nowhere", "is not an IP address"),
            ("listen_interface: eth0", "'listen_interface' is not supported yet; set listen_address"),
            ("rpc_interface: eth0", "'rpc_interface' is not supported yet; set rpc_address"),
            ("storage_port: 0", "is not a TCP port"),
        ] {
            let e = Config::parse(bad).expect_err(bad).to_string();
            assert!(e.contains(message), "{bad}: {e}");
        }
    }

    #[test]
    fn seeds_in_cassandras_list_form() {
        let (c, w) = Config::parse(
            "storage_port: 7001\nseed_provider:\n  - class_name: org.apache.cassandra.locator.SimpleSeedProvider\n    parameters:\n      - seeds: \"127.0.0.1,127.0.0.2:7002,name.invalid\"\n",
        )
        .expect("valid");
        assert_eq!(
            c.seeds,
            [
                SocketAddr::from(([127, 0, 0, 1], 7001)),
                SocketAddr::from(([127, 0, 0, 2], 7002))
            ]
        );
        assert_eq!(w, ["Seed provider couldn't lookup host name.invalid"]);
        let e = Config::parse("seed_provider:\n  - class_name: org.apache.cassandra.locator.SimpleSeedProvider\n    parameters:\n      - seeds: \"\"\n")
            .expect_err("no seeds");
        assert!(
            format!("{e:#}").contains("The seed provider lists no seeds."),
            "{e:#}"
        );
    }

    #[test]
    fn initial_token_and_num_tokens_agree() {
        let (c, _) = Config::parse("initial_token: -100").expect("one token");
        assert_eq!((c.num_tokens, c.initial_tokens.clone()), (1, vec![-100]));
        let (c, _) = Config::parse("num_tokens: 2\ninitial_token: '5,-5'").expect("two");
        assert_eq!(c.initial_tokens, [5, -5]);
        assert!(Config::parse("")
            .expect("empty")
            .0
            .initial_tokens
            .is_empty());
        for (bad, message) in [
            ("initial_token: '1,2'", "initial_token was set but num_tokens is not!"),
            ("num_tokens: 16\ninitial_token: '1,2'", "The number of initial tokens (by initial_token) specified (2) is different from num_tokens value (16)"),
            ("num_tokens: 1\ninitial_token: abc", "Invalid token for Murmur3Partitioner. Got abc"),
        ] {
            let e = Config::parse(bad).expect_err(bad).to_string();
            assert!(e.contains(message), "{bad}: {e}");
        }
        let (c, w) =
            Config::parse("allocate_tokens_for_local_replication_factor: 3").expect("valid");
        assert_eq!(c.allocate_tokens_for_local_replication_factor, Some(3));
        assert!(w.is_empty(), "{w:?}");
        assert!(Config::parse("allocate_tokens_for_local_replication_factor: 0").is_err());
    }

    #[test]
    fn the_snitch_places_the_node() {
        let gpfs = "endpoint_snitch: org.apache.cassandra.locator.GossipingPropertyFileSnitch\n";
        let location = |c: &Config| c.snitch.local_location();
        let resolve = |_: &str, _: u16| Err(std::io::Error::other("none"));
        let (c, _) = Config::parse_with_rackdc(gpfs, Some("dc=dc-east\nrack=r7\n"), resolve)
            .expect("from the properties file");
        assert_eq!(
            (location(&c).datacenter.as_str(), location(&c).rack.as_str()),
            ("dc-east", "r7")
        );
        let (c, _) = Config::parse(&format!("{gpfs}dc: d2\nrack: r2\n")).expect("from dc and rack");
        assert_eq!(location(&c).datacenter, "d2");
        for (yaml, rackdc, message) in [
            (
                gpfs.to_string(),
                None,
                "DC or rack not found in snitch properties",
            ),
            (
                gpfs.to_string(),
                Some("dc=d1\n"),
                "DC or rack not found in snitch properties",
            ),
            (
                format!("{gpfs}dc: d2\n"),
                Some("dc=d1\nrack=r1\n"),
                "keep one",
            ),
            (
                "endpoint_snitch: Ec2Snitch".to_string(),
                None,
                "supported: SimpleSnitch, GossipingPropertyFileSnitch",
            ),
        ] {
            let e = Config::parse_with_rackdc(&yaml, rackdc, resolve)
                .expect_err(&yaml)
                .to_string();
            assert!(e.contains(message), "{yaml}: {e}");
        }
        // SimpleSnitch ignores both.
        let (c, _) = Config::parse_with_rackdc("dc: x\nrack: y\n", Some("dc=a\nrack=b\n"), resolve)
            .expect("simple");
        assert_eq!(location(&c).datacenter, "datacenter1");
    }
}
