//! `helenus-ceiling`: the smallest CQL server that answers each request at once without storing
//! anything, so the benchmark harness can measure what the client and the loopback alone cost
//! on a machine (the ceiling no real server can pass).
//!
//! Owns: the command line, and answering the requests a benchmark measures (see
//! `connection.rs`). Everything a driver needs to connect and prepare (system tables, schema,
//! DDL, PREPARE's metadata) is answered by a real `query::QueryProcessor` over the in-memory
//! engine, through the same code the `helenus` server runs (`cql_server::answer`).
//!
//! Must not: store or read user data, or know storage beyond creating the empty
//! `MemoryEngine`.

mod connection;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use coordinator::Coordinator;
use query::{NodeInfo, QueryProcessor};
use replica::LocalReplica;
use schema_service::SchemaService;
use storage::{Durability, MemoryEngine, StorageEngine};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

/// What `release_version` reports; the same as the `helenus` binary's, because drivers switch
/// features on it (see `crates/node/src/main.rs`).
const RELEASE_VERSION: &str = "5.0.2";

const USAGE: &str = "usage: helenus-ceiling [--listen ADDRESS:PORT] [--port PORT] [--threads N]
  --listen   address and port to accept CQL connections on (default 127.0.0.1:9042)
  --port     port only, on the --listen address
  --threads  shards, threads serving connections as the helenus server's do (default: the
             number of CPUs)";

struct Args {
    listen: SocketAddr,
    threads: usize,
}

fn main() {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("helenus-ceiling: {e:#}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(args) {
        eprintln!("helenus-ceiling: {e:#}");
        std::process::exit(1);
    }
}

fn parse_args(args: impl Iterator<Item = String>) -> Result<Args> {
    let mut listen = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 9042);
    let mut port: Option<u16> = None;
    let mut threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut args = args;
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().with_context(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--listen" | "-l" => {
                let v = value("--listen")?;
                listen = v
                    .parse()
                    .with_context(|| format!("invalid --listen '{v}' (want ADDRESS:PORT)"))?;
            }
            "--port" | "-p" => {
                let v = value("--port")?;
                port = Some(v.parse().with_context(|| format!("invalid --port '{v}'"))?);
            }
            "--threads" | "-t" => {
                let v = value("--threads")?;
                threads = v
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .with_context(|| format!("invalid --threads '{v}' (want a number > 0)"))?;
            }
            "--help" | "-h" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => bail!("unknown argument '{other}'\n{USAGE}"),
        }
    }
    if let Some(p) = port {
        listen.set_port(p);
    }
    Ok(Args { listen, threads })
}

fn run(args: Args) -> Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_env("HELENUS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    // Connections run on shards as in the `helenus` server (`cql_server::Shards`), so the
    // ceiling pays no scheduling cost the server does not; this runtime only accepts.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(serve(args))
}

/// A query processor over an empty in-memory engine, describing a one-node cluster at `addr`.
fn processor(addr: SocketAddr) -> Result<Arc<QueryProcessor>> {
    // A wildcard address is no address a driver can connect back to.
    let ip = if addr.ip().is_unspecified() {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    } else {
        addr.ip()
    };
    // One token: the ring only has to exist for drivers' token-aware routing.
    let local = locator::Endpoint {
        host_id: locator::HostId(uuid::Uuid::new_v4()),
        broadcast_address: ip,
        native_address: ip,
        native_port: addr.port(),
        location: locator::Snitch::Simple.local_location(),
        state: locator::NodeState::Normal,
    };
    let token_metadata =
        Arc::new(locator::TokenMetadata::new(local, vec![0]).context("the ring of one token")?);
    let engine: Arc<dyn StorageEngine> = Arc::new(MemoryEngine::new());
    let coordinator = Arc::new(Coordinator::new(
        token_metadata.clone(),
        Arc::new(LocalReplica::new(engine.clone(), Durability::None)),
    ));
    let node = NodeInfo::new("Helenus Ceiling", RELEASE_VERSION, token_metadata);
    let schema = SchemaService::open(engine, query::system_keyspaces()?)
        .context("cannot start the schema service")?;
    let processor = QueryProcessor::open(node, Arc::new(schema), coordinator);
    Ok(Arc::new(processor))
}

async fn serve(args: Args) -> Result<()> {
    let listener = TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let local = listener.local_addr().context("no local address")?;
    let processor = processor(local)?;
    // One blocking thread per shard: only DDL (schema persistence) uses the pool here.
    let shards = cql_server::Shards::start(args.threads, 1).context("cannot start the shards")?;
    tracing::info!(address = %local, shards = shards.count(), "ceiling listening for CQL clients");
    let mut connections = JoinSet::new();
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((socket, peer)) => {
                    let _ = socket.set_nodelay(true);
                    let processor = processor.clone();
                    let placed = shards.spawn(&mut connections, socket, peer, move |socket| {
                        connection::run(socket, peer, processor)
                    });
                    if let Err(e) = placed {
                        tracing::warn!(%peer, error = %e, "cannot hand a connection to a shard");
                    }
                }
                Err(e) => {
                    // Out of file descriptors and the like: back off briefly, keep serving.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            },
            // Reap finished connections so the set does not grow without bound.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    // Nothing is stored, so there is nothing to drain or flush: drop the connections.
    connections.shutdown().await;
    // Joining the shard threads blocks: not on this runtime's thread.
    tokio::task::spawn_blocking(move || shards.stop())
        .await
        .context("stopping the shards")?;
    tracing::info!("ceiling stopped");
    Ok(())
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        tracing::error!("cannot install the SIGTERM handler");
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args> {
        parse_args(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn command_line() {
        let a = parse(&[]).unwrap();
        assert_eq!(a.listen, "127.0.0.1:9042".parse().unwrap());
        assert!(a.threads >= 1);
        let a = parse(&["--listen", "0.0.0.0:19042", "--threads", "3"]).unwrap();
        assert_eq!(a.listen, "0.0.0.0:19042".parse().unwrap());
        assert_eq!(a.threads, 3);
        let a = parse(&["--port", "9999", "--listen", "127.0.0.2:1"]).unwrap();
        assert_eq!(a.listen, "127.0.0.2:9999".parse().unwrap());
        assert!(parse(&["--threads", "0"]).is_err());
        assert!(parse(&["--port"]).is_err());
        assert!(parse(&["--bogus"]).is_err());
    }
}
