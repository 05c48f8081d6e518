//! `helenus admin`: operator commands (flush, compact, per-table statistics), Helenus's
//! counterpart of Cassandra's `nodetool`.
//!
//! The node listens on `admin_address` (see `main.rs`: `listen_address` when that is a loopback
//! address, else 127.0.0.1, so the unauthenticated endpoint stays local as Cassandra's JMX does
//! by default) and `admin_port` (default 7199, Cassandra's JMX port) for a line protocol: the client sends one command line, the node answers with zero or more result
//! lines and a last line that is `OK` or `ERROR: <message>`, then closes the connection.
//!
//!     flush   [keyspace[.table]]    memtables to data files (all tables, one keyspace, one table)
//!     compact [keyspace[.table]]    a full compaction
//!     stats   [keyspace[.table]]    one line per table: ks.table key=value ...
//!     metrics                       node-wide storage counters, one name=value per line
//!     status  [keyspace]            the cluster as `nodetool status` shows it (`admin_cluster`)
//!     describecluster               name, snitch, partitioner, schema versions and their nodes
//!     tpstats                       dropped messages by verb (`internode_faults`)
//!     fault ...                     test-only fault injection on internode links (`internode_faults`)
//!     hints                         per node this node keeps hints for: pending, delivered, dropped
//!     proxystats                    the coordinator's timeouts, unavailables, speculative retries
//!
//! Names are matched as stored (lower case unless created quoted); virtual tables have no storage
//! and are skipped.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use mutation::TableId;

use crate::admin_cluster::AdminCluster;
use schema_service::SchemaService;
use storage::StorageEngine;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader as AsyncBufReader};
use tokio::net::{TcpListener, TcpStream as AsyncTcpStream};

/// Admin connections served at once; more are closed as soon as they are accepted. Each holds
/// a file descriptor (and a blocking thread while its command runs); the node budgets
/// descriptors for a few (`descriptors`), and an operator runs one command at a time.
const MAX_ADMIN_CONNECTIONS: usize = 16;
/// A command line longer than this is refused (names are at most 48 characters each).
const MAX_COMMAND_BYTES: u64 = 1024;
/// How long a connection may take to send its command line.
const COMMAND_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the CLI waits for a flush or compaction before giving up on the answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(600);

/// Serves admin connections until the task is dropped (the node aborts it at shutdown).
pub async fn serve(
    listener: TcpListener,
    engine: Arc<dyn StorageEngine>,
    schema: Arc<SchemaService>,
    cluster: AdminCluster,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_ADMIN_CONNECTIONS));
    loop {
        let (socket, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!(error = %e, "admin accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::warn!(%peer, "{MAX_ADMIN_CONNECTIONS} admin connections open; closed");
            continue; // the socket is dropped: closed
        };
        let engine = engine.clone();
        let schema = schema.clone();
        let cluster = cluster.clone();
        tokio::spawn(async move {
            let _slot = slot;
            if let Err(e) = handle(socket, engine, schema, cluster).await {
                tracing::debug!(%peer, error = %e, "admin connection failed");
            }
        });
    }
}

async fn handle(
    socket: AsyncTcpStream,
    engine: Arc<dyn StorageEngine>,
    schema: Arc<SchemaService>,
    cluster: AdminCluster,
) -> Result<()> {
    let (read, mut write) = socket.into_split();
    let mut line = String::new();
    let mut reader = AsyncBufReader::new(tokio::io::AsyncReadExt::take(read, MAX_COMMAND_BYTES));
    tokio::time::timeout(COMMAND_READ_TIMEOUT, reader.read_line(&mut line))
        .await
        .context("no command within the time limit")??;
    let command = line.trim().to_string();
    tracing::info!(%command, "admin command");
    let reply =
        tokio::task::spawn_blocking(move || execute(&command, engine.as_ref(), &schema, &cluster))
            .await
            .context("admin command panicked")?;
    let mut out = String::new();
    match reply {
        Ok(lines) => {
            for l in lines {
                out.push_str(&l);
                out.push('\n');
            }
            out.push_str("OK\n");
        }
        Err(e) => out.push_str(&format!("ERROR: {e:#}\n")),
    }
    write.write_all(out.as_bytes()).await?;
    write.shutdown().await?;
    Ok(())
}

/// Runs one command; blocking (storage calls), so it runs on the blocking pool.
fn execute(
    command: &str,
    engine: &dyn StorageEngine,
    schema: &SchemaService,
    cluster: &AdminCluster,
) -> Result<Vec<String>> {
    let words: Vec<&str> = command.split_whitespace().collect();
    if let Some(reply) = crate::internode_faults::execute(&words, &cluster.internode, &cluster.ring)
    {
        return reply;
    }
    let (verb, target) = match words.as_slice() {
        [verb] => (*verb, None),
        [verb, target] => (*verb, Some(*target)),
        _ => bail!(
            "expected '<flush|compact|stats> [keyspace[.table]]', 'status [keyspace]', \
             'describecluster', 'hints' or 'metrics', got '{command}'"
        ),
    };
    match verb {
        "status" => {
            let snapshot = schema.snapshot();
            crate::admin_cluster::status(cluster, &snapshot, target, local_load(engine, schema)?)
        }
        "describecluster" => {
            if target.is_some() {
                bail!("describecluster takes no argument");
            }
            Ok(crate::admin_cluster::describe(cluster))
        }
        "hints" => {
            if target.is_some() {
                bail!("hints takes no argument");
            }
            Ok(crate::admin_cluster::hints(cluster))
        }
        "proxystats" => {
            if target.is_some() {
                bail!("proxystats takes no argument");
            }
            Ok(crate::admin_cluster::proxystats(cluster, &schema.snapshot()))
        }
        "metrics" => {
            if target.is_some() {
                bail!("metrics takes no table: its counters are node-wide");
            }
            Ok(engine
                .metrics()?
                .into_iter()
                .map(|(name, value)| format!("{name}={value}"))
                .collect())
        }
        "flush" | "compact" => {
            let tables = resolve(schema, target)?;
            let run = |table: Option<TableId>| {
                if verb == "flush" {
                    engine.flush(table)
                } else {
                    engine.compact(table)
                }
            };
            if target.is_none() {
                run(None)?; // every table, and the node's own metadata
            } else {
                for (_, id) in &tables {
                    run(Some(*id))?;
                }
            }
            Ok(vec![format!("{verb}ed {} table(s)", tables.len())])
        }
        "stats" => resolve(schema, target)?
            .iter()
            .map(|(name, id)| {
                let s = engine.table_stats(*id)?;
                Ok(format!(
                    "{name} live_files={} live_file_bytes={} file_entries={} memtable_bytes={} memtable_entries={} compactions_suspended={}",
                    s.live_files, s.live_file_bytes, s.file_entries, s.memtable_bytes, s.memtable_entries,
                    u8::from(s.compactions_suspended)
                ))
            })
            .collect(),
        other => {
            bail!(
                "unknown admin command '{other}' (expected flush, compact, stats, metrics, \
                 status, describecluster, tpstats, fault, hints or proxystats)"
            )
        }
    }
}

/// The bytes this node stores: every table's data files and memtables (`nodetool status`'s
/// load). Blocking (storage calls).
pub fn local_load(engine: &dyn StorageEngine, schema: &SchemaService) -> Result<u64> {
    let mut bytes = 0;
    for (_, id) in resolve(schema, None)? {
        let stats = engine.table_stats(id)?;
        bytes += stats.live_file_bytes + stats.memtable_bytes;
    }
    Ok(bytes)
}

/// The stored tables a target names: every table (`None`), a keyspace's, or one.
fn resolve(schema: &SchemaService, target: Option<&str>) -> Result<Vec<(String, TableId)>> {
    let schema = schema.snapshot();
    let stored_in = |ks_name: &str| -> Vec<(String, TableId)> {
        schema
            .keyspace(ks_name)
            .into_iter()
            .flat_map(|ks| ks.tables.values())
            .filter(|t| !t.virtual_table)
            .map(|t| (format!("{ks_name}.{}", t.name), t.id))
            .collect()
    };
    let Some(target) = target else {
        return Ok(schema
            .keyspaces
            .keys()
            .flat_map(|ks| stored_in(ks))
            .collect());
    };
    let (ks_name, table_name) = match target.split_once('.') {
        Some((k, t)) => (k, Some(t)),
        None => (target, None),
    };
    if schema.keyspace(ks_name).is_none() {
        bail!("unknown keyspace '{ks_name}'");
    }
    match table_name {
        None => Ok(stored_in(ks_name)),
        Some(t) => match schema.table(ks_name, t) {
            Some(table) if !table.virtual_table => Ok(vec![(target.to_string(), table.id)]),
            Some(_) => bail!("'{target}' is a virtual table; it has no storage"),
            None => bail!("unknown table '{target}'"),
        },
    }
}

/// The CLI side: sends `command` to the node at `addr`, prints the result lines, and fails with
/// the node's message on `ERROR`.
pub fn run_client(addr: SocketAddr, command: &str) -> Result<()> {
    let mut stream =
        TcpStream::connect_timeout(&addr, Duration::from_secs(5)).with_context(|| {
            format!("cannot reach the node's admin port at {addr} (is it running?)")
        })?;
    stream.set_read_timeout(Some(CLIENT_TIMEOUT))?;
    stream.write_all(format!("{command}\n").as_bytes())?;
    let mut last = None;
    for line in BufReader::new(stream).lines() {
        let line = line.context("reading the node's answer")?;
        if line == "OK" {
            return Ok(());
        }
        if let Some(message) = line.strip_prefix("ERROR: ") {
            bail!("{message}");
        }
        println!("{line}");
        last = Some(line);
    }
    bail!(
        "the node closed the connection without an answer{}",
        last.map(|l| format!(" (last line: {l})"))
            .unwrap_or_default()
    )
}
