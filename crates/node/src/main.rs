//! The `helenus` binary.
//!
//! Owns: the command line, configuration loading, and the order in which a node starts
//! (config → storage → node identity and tokens (locator) → schema → the cluster: messaging,
//! gossip, the metadata log (`internode`) → coordinator → query processor → CQL server)
//! and stops (stop accepting → drain requests → leave the cluster → sync the commit log and
//! flush memtables).
//!
//! Also the operator endpoint (`admin`), which only calls the schema and the storage engine.
//!
//! Must not contain: CQL request handling or storage logic; it wires crates together.

mod admin;
mod admin_cluster;
mod alloc;
mod cassandra_keys;
mod cluster;
mod config;
mod config_cluster;
mod descriptors;
mod identity;
mod internode;
mod internode_faults;
mod schema_catch_up;

/// mimalloc instead of glibc's malloc: with a request's allocations spread over runtime and
/// blocking-pool threads, glibc's per-thread arenas and consolidation took about 20% of the
/// CPU in the mixed benchmark (perf), and the process grew to 700 MiB. In front of it, a
/// per-thread cache that reuses small blocks last-in, first-out (`alloc.rs`).
///
/// mimalloc also replaces `malloc` for the C++ side (the crate's `override` feature), so
/// RocksDB's memtables live in mimalloc's arenas, which it backs with transparent huge pages.
/// A memtable insert walks a skiplist whose nodes lie on scattered pages, and between a node's
/// writes at moderate rates the TLB forgets them: on this KVM guest (two-level page walks) the
/// walk, `InlineSkipList::FindSpliceForLevel`, was 14% of a 3-node cluster's CPU at 1,150
/// writes/s with glibc's 4 KiB pages, 5-9% in mimalloc's arenas, and 2% with the memtable on
/// reserved 2 MiB pages (`bench/cluster-cpu-per-write BIN 1150 20 --perf`).
#[global_allocator]
static GLOBAL: alloc::Allocator = alloc::Allocator;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use config::{CommitLogSync, Config, DiskFailurePolicy};
use coordinator::Coordinator;
use query::{NodeInfo, QueryProcessor};
use replica::LocalReplica;
use schema_service::SchemaService;
use storage::{Durability, RocksConfig, RocksEngine, StorageEngine};

/// What `release_version` reports. Drivers switch features on the Cassandra version (the
/// Python driver reads `system_virtual_schema` only from 4.0), so Helenus reports the Cassandra
/// release whose behaviour it follows.
pub(crate) const RELEASE_VERSION: &str = "5.0.2";

const USAGE: &str = "usage: helenus server [--config FILE] [--ignore-commitlog-replay-errors]
       helenus admin [--host ADDRESS] [--port PORT] flush|compact|stats [KEYSPACE[.TABLE]] | metrics | status [KEYSPACE] | describecluster | tpstats | hints | proxystats
       helenus admin [--host ADDRESS] [--port PORT] fault [--to ADDRESS [--verb VERB] cut|delay MS|drop P|clear] (fault_injection only)
       helenus cluster start|stop|status|kill|restart ... (helenus cluster help)
       helenus --version";

fn main() {
    without_error_backtraces();
    if let Err(e) = run() {
        eprintln!("helenus: {e:#}");
        std::process::exit(1);
    }
}

/// Errors carry no backtrace unless `RUST_LIB_BACKTRACE` asks for one; panics keep theirs
/// (`RUST_BACKTRACE`). With `RUST_BACKTRACE=1` alone, as developer shells and CI often set it,
/// every `anyhow` error a library makes captures a backtrace, and logging it resolves the
/// symbols on the thread that logs: the first time, parsing the binary's debug information
/// held that runtime thread for over 2 s, so that writes on its shard timed out (chitchat logs
/// each failed gossip send with its backtrace; tests/e2e/test_cluster_faults.py's partition
/// test found it). Runs first in `main`, before any other thread exists to read the variable.
fn without_error_backtraces() {
    if std::env::var_os("RUST_LIB_BACKTRACE").is_none() {
        std::env::set_var("RUST_LIB_BACKTRACE", "0");
    }
}

fn run() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("server") => {
            let mut config_path: Option<PathBuf> = None;
            let mut ignore_replay_errors = false;
            let mut rest = args[1..].iter();
            while let Some(arg) = rest.next() {
                match arg.as_str() {
                    "--config" | "-c" => {
                        let path = rest.next().context("--config needs a file name")?;
                        config_path = Some(PathBuf::from(path));
                    }
                    // A one-off override for one start, as Cassandra's system property is
                    // usually given.
                    "--ignore-commitlog-replay-errors" => ignore_replay_errors = true,
                    other => bail!("unknown argument '{other}'\n{USAGE}"),
                }
            }
            server(config_path, ignore_replay_errors)
        }
        Some("admin") => {
            let mut host = std::net::IpAddr::from([127, 0, 0, 1]);
            let mut port: u16 = 7199;
            let mut command = Vec::new();
            let mut rest = args[1..].iter();
            while let Some(arg) = rest.next() {
                match arg.as_str() {
                    "--host" | "-h" => {
                        let h = rest.next().context("--host needs an address")?;
                        host = h.parse().with_context(|| format!("invalid --host '{h}'"))?;
                    }
                    "--port" | "-p" => {
                        let p = rest.next().context("--port needs a port")?;
                        port = p.parse().with_context(|| format!("invalid --port '{p}'"))?;
                    }
                    other => command.push(other.to_string()),
                }
            }
            if command.is_empty() {
                bail!("admin needs a command\n{USAGE}");
            }
            admin::run_client(SocketAddr::new(host, port), &command.join(" "))
        }
        Some("cluster") => {
            if matches!(
                args.get(1).map(String::as_str),
                Some("help" | "--help" | "-h")
            ) {
                println!("usage: {}", cluster::USAGE);
                return Ok(());
            }
            cluster::run(&args[1..])
        }
        Some("--version") | Some("version") => {
            println!(
                "helenus {} (CQL {RELEASE_VERSION})",
                env!("CARGO_PKG_VERSION")
            );
            Ok(())
        }
        _ => bail!("{USAGE}"),
    }
}

/// Info from our crates; the consensus and gossip libraries log every election and round at
/// info, so only their warnings.
const DEFAULT_LOG_FILTER: &str = "info,openraft=warn,chitchat=warn";

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("HELENUS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal, not in log files.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        // A log line that cannot be written (the log's disk is full) is lost, not reported with
        // `eprintln!`, which panics when stderr fails: inside a RocksDB callback that aborted
        // the process.
        .log_internal_errors(false)
        .init();
}

/// Where this node's tokens live in storage's meta space (identity keeps the host id beside
/// them, see `identity`).
const TOKENS_KEY: &[u8] = b"local/tokens";

/// Storage's node metadata, for `identity`.
struct StorageMeta<'a>(&'a dyn StorageEngine);

impl identity::MetaStore for StorageMeta<'_> {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.0.get_meta(key)?)
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.0.put_meta(key, value)?)
    }
}

/// This node's tokens in storage's meta space (the locator mints them and says how they are
/// stored).
struct StoredTokens<'a>(&'a dyn StorageEngine);

impl locator::TokenStore for StoredTokens<'_> {
    fn load(&self) -> Result<Option<Vec<u8>>, String> {
        self.0.get_meta(TOKENS_KEY).map_err(|e| e.to_string())
    }
    fn save(&self, bytes: &[u8]) -> Result<(), String> {
        self.0
            .put_meta(TOKENS_KEY, bytes)
            .map_err(|e| e.to_string())
    }
}

/// The ring as this node starts with it: itself, placed by its snitch, owning its tokens
/// (taken at its first start, from `initial_token` or at random, the same ever after).
fn token_metadata(
    engine: &dyn StorageEngine,
    config: &Config,
    host_id: uuid::Uuid,
) -> Result<locator::TokenMetadata> {
    let host_id = locator::HostId(host_id);
    let seed = host_id.0.as_u64_pair().0;
    let (tokens, origin) = match locator::tokens::load_or_assign(
        &StoredTokens(engine),
        host_id,
        config.num_tokens,
        &config.initial_tokens,
        seed,
    ) {
        Err(e @ locator::LocatorError::TokenCountChanged { stored, .. }) => bail!(
            "{e}\nA node keeps the tokens it took at its first start (num_tokens: {stored} for \
             this data directory)."
        ),
        tokens => tokens.context("cannot load this node's tokens")?,
    };
    match origin {
        locator::tokens::TokenOrigin::Minted => {
            if let Some(rf) = config.allocate_tokens_for_local_replication_factor {
                tracing::warn!(
                    "allocate_tokens_for_local_replication_factor: {rf} is not implemented yet: \
                     this node took {} random tokens, so its share of the ring may be uneven \
                     (set initial_token for chosen tokens)",
                    tokens.len()
                );
            }
            tracing::info!(num_tokens = tokens.len(), "this node took random tokens");
        }
        locator::tokens::TokenOrigin::Initial => {
            tracing::info!(
                num_tokens = tokens.len(),
                "this node took its initial_token"
            );
        }
        locator::tokens::TokenOrigin::Stored => {
            let mut initial = config.initial_tokens.clone();
            initial.sort_unstable();
            if !initial.is_empty() && initial != tokens {
                tracing::warn!(
                    "initial_token is not this node's tokens; it is used at a node's first \
                     start only, and this node keeps the tokens it took then"
                );
            }
        }
    }
    let local = locator::Endpoint {
        host_id,
        broadcast_address: config.broadcast_address,
        native_address: config.broadcast_rpc_address,
        native_port: config.native_transport_port,
        location: config.snitch.local_location(),
        state: locator::NodeState::Normal,
    };
    Ok(locator::TokenMetadata::new(local, tokens)?)
}

fn server(config_path: Option<PathBuf>, ignore_replay_errors: bool) -> Result<()> {
    init_logging();
    let mut config = match &config_path {
        Some(p) => {
            let (config, warnings) = Config::load(p)?;
            for w in warnings {
                tracing::warn!("{w}");
            }
            config
        }
        None => Config::default(),
    };
    config.commitlog_ignore_replay_errors |= ignore_replay_errors;
    let budget = descriptor_budget()?;
    // The CQL connections run on the server's shards (a thread and runtime per core, see
    // `cql_server`); this runtime only opens storage, accepts connections, serves the admin
    // endpoint and syncs the commit log, so one thread drives it.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(MAIN_BLOCKING_THREADS)
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(serve(config, budget))
}

/// Raises the open file limit and shares it out (see `descriptors`), logging what it did.
fn descriptor_budget() -> Result<descriptors::Budget> {
    let raised = descriptors::raise_open_file_limit()
        .context("cannot read or raise the open file limit (RLIMIT_NOFILE)")?;
    let budget = descriptors::Budget::new(raised.now).map_err(anyhow::Error::msg)?;
    tracing::info!(
        open_files = raised.now,
        raised_from = raised.before,
        connections = budget.connections,
        data_files = budget.data_files,
        "open file limit"
    );
    if raised.now < descriptors::RECOMMENDED_OPEN_FILES {
        tracing::warn!(
            open_files = raised.now,
            "Minimum value for max open files should be >= {}: the node serves at most {} \
             CQL connections and keeps {} data files open (raise it with ulimit -n or \
             LimitNOFILE)",
            descriptors::RECOMMENDED_OPEN_FILES,
            budget.connections,
            budget.data_files
        );
    }
    Ok(budget)
}

/// `native_transport_max_concurrent_connections`, within the connections' share of file
/// descriptors: past it, connections would take the descriptors storage needs.
fn max_concurrent_connections(config: &Config, budget: descriptors::Budget) -> usize {
    match config.native_transport_max_concurrent_connections {
        None => budget.connections,
        Some(configured) if configured > budget.connections => {
            tracing::warn!(
                configured,
                open_files = budget.open_files,
                "native_transport_max_concurrent_connections is more than half the open file \
                 limit; using {} so that storage keeps the descriptors it needs",
                budget.connections
            );
            budget.connections
        }
        Some(configured) => configured,
    }
}

/// How long a start waits to join the cluster's metadata log through its seeds (they may be
/// starting too).
const CLUSTER_JOIN_TIMEOUT: Duration = Duration::from_secs(120);

/// The least time a metadata change (a DDL statement) may take to commit and apply here: Raft
/// needs an election's time when a leader fails, and applying includes the storage actions
/// (dropping a keyspace of a thousand tables took over 10 s under load), so it is not shortened
/// below this by a short `write_request_timeout`. Past it the statement fails with the log's
/// error (`no quorum: ...` when a majority is down) instead of waiting on.
const METADATA_TIMEOUT: Duration = Duration::from_secs(60);

/// The main runtime's blocking pool: opening storage, the periodic commit log sync, admin
/// commands (a compaction holds one for its whole run), the final flush.
const MAIN_BLOCKING_THREADS: usize = 8;

/// The cores this process may run on: one shard each unless `shards` says.
fn cores() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// Threads for a shard's storage calls: eight per core, at least 16 in all. Tokio's default
/// of 512 threads let every in-flight request take its own thread: on two cores the mixed
/// benchmark spent a fifth of its CPU waking and switching between them. A few per core keep
/// disk reads overlapping without the churn.
fn blocking_threads_per_shard(shards: usize) -> usize {
    let total = (cores() * 8).max(16);
    total.div_ceil(shards.max(1))
}

async fn serve(config: Config, budget: descriptors::Budget) -> Result<()> {
    let data_dir = config.data_file_directories[0].clone();
    let directories = identity::Directories {
        data: data_dir.clone(),
        commit_log: config.commitlog_directory.clone(),
    };
    // Before storage opens, so that no other node's commit log is replayed into this data.
    let recorded = identity::check_directories(&directories, &config.cluster_name)?;
    let durability = match config.commitlog_sync {
        CommitLogSync::Periodic => Durability::Periodic,
        CommitLogSync::Batch => Durability::Batch,
    };
    let engine_config = RocksConfig {
        data_dir: data_dir.clone(),
        commit_log_dir: Some(config.commitlog_directory.clone()),
        block_cache_bytes: config.block_cache_size_bytes,
        partition_cache_bytes: config.partition_cache_size_bytes,
        commit_log_total_bytes: config.commitlog_total_space_bytes,
        commit_log_sync: durability,
        ignore_commit_log_replay_errors: config.commitlog_ignore_replay_errors,
        max_open_data_files: budget.data_files,
    };
    let opened = tokio::task::spawn_blocking(move || RocksEngine::open(engine_config)).await?;
    let engine: Arc<dyn StorageEngine> = Arc::new(match opened {
        Err(e @ storage::StorageError::CommitLogDamaged { .. }) => bail!(
            "{e}\nThe node does not start, so that no acknowledged write is dropped silently. To \
             start anyway, replaying every intact record and losing the damaged ones, start \
             with --ignore-commitlog-replay-errors or set commitlog_ignore_replay_errors: true \
             (Cassandra's -Dcassandra.commitlog.ignorereplayerrors=true)."
        ),
        opened => {
            opened.with_context(|| format!("cannot open storage in {}", data_dir.display()))?
        }
    });
    let now_seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    let identity = identity::establish(
        &StorageMeta(engine.as_ref()),
        &directories,
        &config.cluster_name,
        recorded.as_ref(),
        now_seconds,
    )?;
    let alone = token_metadata(engine.as_ref(), &config, identity.host_id)?;
    let local_replica: Arc<LocalReplica> = Arc::new(LocalReplica::new(engine.clone(), durability));
    let schema = Arc::new(
        SchemaService::open_replicated(engine.clone(), query::system_keyspaces()?)
            .context("cannot load the schema")?,
    );
    let cluster_events = cql_server::ClusterEvents::new();
    // The CQL server's shards, started before the cluster: internode messaging runs a lane on
    // each, and stops using them only when the cluster has shut down (below).
    let shard_count = config.shards.unwrap_or_else(cores);
    let shards = Arc::new(
        cql_server::Shards::start(shard_count, blocking_threads_per_shard(shard_count))
            .context("cannot start the shards")?,
    );
    let cluster = internode::start(
        internode::ClusterSettings {
            cluster_name: config.cluster_name.clone(),
            listen_address: config.listen_address,
            broadcast_address: config.broadcast_address,
            storage_port: config.storage_port,
            seeds: config.seeds.clone(),
            phi_convict_threshold: config.phi_convict_threshold,
            generation: u64::try_from(identity.gossip_generation).unwrap_or(0),
            join_timeout: CLUSTER_JOIN_TIMEOUT,
            metadata_timeout: config.request_timeouts.write.max(METADATA_TIMEOUT),
            fault_injection: internode_faults::fault_injection_enabled(config.fault_injection),
            hints: hints::HintsConfig {
                local: locator::HostId(identity.host_id),
                enabled: config.hints.enabled,
                directory: config.hints_directory(),
                max_hint_window: config.hints.max_hint_window,
                max_file_size_bytes: config.hints.max_file_size_bytes,
                throttle_bytes_per_second: config.hints.throttle_bytes_per_second,
                flush_period: config.hints.flush_period,
                // A hint travels as a write does (Cassandra's HINT_REQ has the write timeout).
                delivery_timeout: config.request_timeouts.write,
                file_io: hints::FileIo::BlockingPool,
                max_hints_size_per_host_bytes: config.hints.max_size_per_host_bytes,
                disabled_datacenters: config.hints.disabled_datacenters.clone(),
            },
            shards: shards.handles(),
        },
        &data_dir,
        alone.local_endpoint().clone(),
        alone.local_tokens().to_vec(),
        local_replica.clone(),
        schema.clone(),
        cluster_events.clone(),
    )
    .await?;
    let coordinator = Arc::new(
        Coordinator::for_cluster(cluster.ring.clone(), cluster.endpoints.clone())
            .with_read_request_timeout(config.request_timeouts.read)
            .with_hinted_handoff(cluster.hints.store().clone()),
    );
    // The batch log replay (Cassandra's `BatchlogManager`): owned here, stopped once the CQL
    // server has drained and before the cluster leaves.
    let (stop_batchlog, batchlog_stopped) = tokio::sync::watch::channel(false);
    let batchlog_replay = {
        let mut replay_config =
            coordinator::BatchlogReplayConfig::new(config.request_timeouts.write);
        replay_config.throttle_bytes_per_second = config.batchlog_replay_throttle_bytes_per_second;
        let schema = schema.clone();
        let replay = coordinator::BatchlogReplay::new(
            coordinator.clone(),
            local_replica.batchlog(),
            Arc::new(move || schema.snapshot()),
            replay_config,
        );
        tokio::spawn(replay.run(batchlog_stopped))
    };
    internode::forget_dropped_tables(schema.clone(), coordinator.stats().clone());
    let mut node = NodeInfo::new(
        config.cluster_name.clone(),
        RELEASE_VERSION,
        cluster.ring.load_full(),
    );
    node.token_metadata = cluster.ring.clone();
    node.peer_details = cluster.peer_details.clone();
    node.batchlog = Some(query::BatchlogView(local_replica.batchlog()));
    node.listen_address = config.listen_address;
    node.storage_port = config.storage_port;
    node.gossip_generation = identity.gossip_generation;
    let processor = Arc::new(
        QueryProcessor::open(node, schema.clone(), coordinator.clone())
            .with_batch_thresholds(config.batch_thresholds)
            .with_tombstone_warn_threshold(config.tombstone_warn_threshold)
            .with_request_timeouts(config.request_timeouts)
            .with_in_select_guardrails(config.in_select_guardrails)
            .with_prepared_statements_cache_size(config.prepared_statements_cache_size_bytes),
    );

    // Periodic commit log sync: the only thing between an acknowledged write and the disk in
    // periodic mode. Owned here; stopped after the server has drained.
    let (stop_timers, timers_stopped) = tokio::sync::watch::channel(false);
    let sync_task = (config.commitlog_sync == CommitLogSync::Periodic).then(|| {
        every(
            Duration::from_millis(config.commitlog_sync_period_ms),
            timers_stopped.clone(),
            engine.clone(),
            "commit log sync",
            |engine| engine.sync_commit_log(),
        )
    });
    // Commit log housekeeping, in either mode: the engine keeps its log within
    // `commitlog_total_space` after writes stop (`StorageEngine::maintain_commit_log`).
    let maintain_task = every(
        Duration::from_secs(1),
        timers_stopped.clone(),
        engine.clone(),
        "commit log maintenance",
        |engine| engine.maintain_commit_log(),
    );
    // A background error RocksDB never recovers from (out of file descriptors while switching
    // commit log files) stopped writes until a restart; the engine reopens itself instead.
    let recover_task = every(
        Duration::from_secs(1),
        timers_stopped.clone(),
        engine.clone(),
        "storage recovery",
        |engine| engine.recover(),
    );
    // Corrupt data files storage met, and `disk_failure_policy`'s answer to them.
    let (stop_transports, transports_stopped) = tokio::sync::watch::channel(false);
    let faults_task = watch_faults(
        engine.clone(),
        config.disk_failure_policy,
        timers_stopped,
        stop_transports,
    );

    // Unauthenticated, so local only: a loopback listen_address (127.0.0.x, one per node of a
    // local cluster) or else 127.0.0.1.
    let admin_ip = if config.listen_address.is_loopback() {
        config.listen_address
    } else {
        std::net::IpAddr::from([127, 0, 0, 1])
    };
    let admin_addr = SocketAddr::new(admin_ip, config.admin_port);
    let admin_listener = tokio::net::TcpListener::bind(admin_addr)
        .await
        .with_context(|| {
            format!("cannot listen for admin commands on {admin_addr} (admin_port)")
        })?;
    let admin_cluster = admin_cluster::AdminCluster {
        cluster_name: config.cluster_name.clone(),
        snitch: config.endpoint_snitch.clone(),
        ring: cluster.ring.clone(),
        view: cluster.membership.watch_view(),
        internode: internode_faults::AdminInternode {
            messaging: cluster.messaging.clone(),
            faults: cluster.faults.clone(),
        },
        hints: Some(cluster.hints.store().clone()),
        coordinator: Some(coordinator.stats().clone()),
    };
    let admin_task = tokio::spawn(admin::serve(
        admin_listener,
        engine.clone(),
        schema.clone(),
        admin_cluster,
    ));
    // This node's load, for peers' `helenus admin status` (Cassandra's `LoadBroadcaster`).
    let load_engine = engine.clone();
    let load_schema = schema.clone();
    internode::publish_load(&cluster.membership, move || {
        admin::local_load(load_engine.as_ref(), &load_schema)
    });

    let started_waiting = std::time::Instant::now();
    let down = cluster
        .wait_for_peers(internode::BLOCK_FOR_PEERS_TIMEOUT)
        .await;
    if down.is_empty() {
        tracing::info!(
            "every peer of this data centre is up ({:?})",
            started_waiting.elapsed()
        );
    } else {
        tracing::warn!(
            ?down,
            "serving CQL with peers of this data centre not seen up after {:?}",
            internode::BLOCK_FOR_PEERS_TIMEOUT
        );
    }

    let addr = SocketAddr::new(config.rpc_address, config.native_transport_port);
    let server = cql_server::Server::bind_on_shards(
        addr,
        processor.clone(),
        cql_server::EventSources {
            schema,
            cluster: cluster_events,
        },
        cql_server::ServerConfig {
            max_frame_size_bytes: config.native_transport_max_frame_size_bytes,
            max_requests_per_connection: config.native_transport_max_requests_per_connection,
            shards: shard_count,
            max_blocking_threads_per_shard: blocking_threads_per_shard(shard_count),
            max_request_data_in_flight_bytes: config
                .native_transport_max_request_data_in_flight_bytes,
            max_request_data_in_flight_per_ip_bytes: config
                .native_transport_max_request_data_in_flight_per_ip_bytes,
            max_concurrent_connections: max_concurrent_connections(&config, budget),
            max_concurrent_connections_per_ip: config
                .native_transport_max_concurrent_connections_per_ip,
        },
        shards.clone(),
    )
    .await
    .with_context(|| format!("cannot listen on {addr}"))?;
    tracing::info!(
        address = %server.local_addr(),
        cluster = %config.cluster_name,
        commitlog_sync = ?config.commitlog_sync,
        shards = server.shard_count(),
        "Starting listening for CQL clients"
    );
    let mut policy_stop = transports_stopped.clone();
    server
        .run(async move {
            tokio::select! {
                _ = shutdown_signal() => {}
                // Only a stop the policy sent (not the fault task ending) stops the server.
                Ok(_) = policy_stop.wait_for(|stopped| *stopped) => {}
            }
        })
        .await;
    if *transports_stopped.borrow() {
        tracing::error!(
            "CQL clients are no longer served (disk_failure_policy: stop_paranoid); the node \
             stays up for helenus admin until SIGTERM"
        );
        shutdown_signal().await;
    }
    tracing::info!("CQL server stopped; leaving the cluster, then flushing");
    admin_task.abort();
    let _ = stop_batchlog.send(true);
    let _ = batchlog_replay.await;
    coordinator.wait_for_late_acks().await;
    cluster.shutdown().await;
    // Messaging's lanes are done with the shards; joining their threads blocks.
    if let Ok(shards) = Arc::try_unwrap(shards) {
        tokio::task::spawn_blocking(move || shards.stop()).await?;
    }

    let _ = stop_timers.send(true);
    if let Some(task) = sync_task {
        let _ = task.await;
    }
    let _ = maintain_task.await;
    let _ = recover_task.await;
    let _ = faults_task.await;
    let flush_engine = engine.clone();
    tokio::task::spawn_blocking(move || -> Result<()> {
        flush_engine.sync_commit_log()?;
        // Flushing only spares the next start the commit log replay: a flush that fails (a
        // full disk) loses nothing, and the node still stops cleanly.
        if let Err(e) = flush_engine.flush(None) {
            tracing::warn!(
                error = %e,
                "memtables not flushed; the commit log holds them and the next start replays it"
            );
        }
        Ok(())
    })
    .await??;
    tracing::info!("shutdown complete");
    Ok(())
}

/// Runs `work` on the blocking pool every `period` until `stopped` changes; a failure is
/// logged as `what` and the next tick tries again.
fn every(
    period: Duration,
    mut stopped: tokio::sync::watch::Receiver<bool>,
    engine: Arc<dyn StorageEngine>,
    what: &'static str,
    work: fn(&dyn StorageEngine) -> Result<(), storage::StorageError>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticker.tick() => {}
                _ = stopped.changed() => break,
            }
            let engine = engine.clone();
            match tokio::task::spawn_blocking(move || work(engine.as_ref())).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::error!(error = %e, "{what} failed"),
                Err(e) => tracing::error!(error = %e, "{what} task failed"),
            }
        }
    })
}

/// The exit code under `disk_failure_policy: die`: Cassandra's (its JVM killer exits with 100).
const DIE_EXIT_CODE: i32 = 100;

/// Every second until `stopped` changes, takes the faults storage found (corrupt data files, see
/// `StorageEngine::take_faults`), logs each and applies `policy`: `die` exits the process,
/// `stop_paranoid` sends `stop_transports`; the others leave the node serving, as Cassandra does
/// for a corrupt SSTable (the read or compaction that met it failed).
fn watch_faults(
    engine: Arc<dyn StorageEngine>,
    policy: DiskFailurePolicy,
    mut stopped: tokio::sync::watch::Receiver<bool>,
    stop_transports: tokio::sync::watch::Sender<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(Duration::from_secs(1));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticker.tick() => {}
                _ = stopped.changed() => break,
            }
            let engine = engine.clone();
            let Ok(faults) = tokio::task::spawn_blocking(move || engine.take_faults()).await else {
                tracing::error!("checking storage for faults failed");
                continue;
            };
            for fault in faults {
                tracing::error!(
                    table = ?fault.table,
                    disk_failure_policy = ?policy,
                    "corrupt data: {}",
                    fault.detail
                );
                match policy {
                    DiskFailurePolicy::Die => {
                        tracing::error!("exiting: disk_failure_policy is die");
                        // At once, without the exit handlers: RocksDB's static objects must
                        // not be torn down under its running threads (Cassandra's JVM killer
                        // also skips its shutdown hook). The commit log's writes are already
                        // the OS's.
                        // SAFETY: _exit ends the process; nothing runs after it.
                        unsafe { libc::_exit(DIE_EXIT_CODE) };
                    }
                    DiskFailurePolicy::StopParanoid => {
                        let _ = stop_transports.send(true);
                    }
                    DiskFailurePolicy::Stop
                    | DiskFailurePolicy::BestEffort
                    | DiskFailurePolicy::Ignore => {}
                }
            }
        }
    })
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "cannot install the SIGTERM handler");
            std::future::pending::<()>().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM received"),
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT received"),
    }
}
