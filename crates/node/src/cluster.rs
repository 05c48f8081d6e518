//! `helenus cluster`: a local cluster of `helenus server` processes for development and tests,
//! as `ccm` runs Cassandra's: node K listens on 127.0.0.K with the same ports as every other
//! node, and has its own directory under the cluster's:
//!
//! ```text
//! DIR/nodeK/helenus.yaml   its configuration (seeds: 127.0.0.1)
//! DIR/nodeK/data/          data_file_directories
//! DIR/nodeK/commitlog/     commitlog_directory
//! DIR/nodeK/helenus.log    its output, appended to on every start
//! DIR/nodeK/helenus.pid    the process id while it runs
//! ```
//!
//! A pid file is trusted only while `/proc/PID/cmdline` is a `helenus server` of that node's
//! configuration, so a stale file never gets another process signalled.
//!
//! The nodes share the machine: each gets small caches and `shards: cores / nodes` (at least
//! one), as scylla-ccm runs each node with `--smp 1`.

use std::fs;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use crate::config::Config;

pub const USAGE: &str = "helenus cluster start [--nodes N] [--dir DIR] [--cluster-name NAME] [--cql-port PORT] [--storage-port PORT] [--admin-port PORT]
       helenus cluster stop|status [--dir DIR]
       helenus cluster kill|restart NODE [--dir DIR]";

/// Where the cluster lives unless `--dir` says.
const DEFAULT_DIR: &str = "./helenus-cluster";
/// The most nodes: one loopback address each, 127.0.0.1 to 127.0.0.254.
const MAX_NODES: usize = 254;
/// How long a node may take to answer CQL after it is started (storage open, commit log
/// replay), and to exit after SIGTERM (draining requests, flushing memtables).
const START_TIMEOUT: Duration = Duration::from_secs(60);
const STOP_TIMEOUT: Duration = Duration::from_secs(60);
/// How often a wait looks again.
const POLL_INTERVAL: Duration = Duration::from_millis(100);
/// Log lines shown when a node fails to start.
const LOG_TAIL_LINES: usize = 30;

/// What `start` writes into each node's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Layout {
    cluster_name: String,
    cql_port: u16,
    storage_port: u16,
    admin_port: u16,
}

impl Default for Layout {
    fn default() -> Self {
        Layout {
            cluster_name: "Test Cluster".to_string(),
            cql_port: 9042,
            storage_port: crate::config::DEFAULT_STORAGE_PORT,
            admin_port: 7199,
        }
    }
}

/// Runs `helenus cluster ARGS...`.
pub fn run(args: &[String]) -> Result<()> {
    let (command, rest) = args
        .split_first()
        .ok_or_else(|| anyhow!("cluster needs a command\nusage: {USAGE}"))?;
    let mut dir = PathBuf::from(DEFAULT_DIR);
    let mut nodes: Option<usize> = None;
    let mut node: Option<usize> = None;
    let mut layout = Layout::default();
    let mut rest = rest.iter();
    while let Some(arg) = rest.next() {
        let mut value = |name: &str| {
            rest.next()
                .cloned()
                .ok_or_else(|| anyhow!("{name} needs a value"))
        };
        match arg.as_str() {
            "--dir" | "-d" => dir = PathBuf::from(value("--dir")?),
            "--nodes" | "-n" => nodes = Some(parse_count(&value("--nodes")?)?),
            "--cluster-name" => layout.cluster_name = value("--cluster-name")?,
            "--cql-port" => layout.cql_port = parse_port("--cql-port", &value("--cql-port")?)?,
            "--storage-port" => {
                layout.storage_port = parse_port("--storage-port", &value("--storage-port")?)?
            }
            "--admin-port" => {
                layout.admin_port = parse_port("--admin-port", &value("--admin-port")?)?
            }
            other if node.is_none() && other.parse::<usize>().is_ok() => {
                node = Some(parse_count(other)?)
            }
            other => bail!("unknown argument '{other}'\nusage: {USAGE}"),
        }
    }
    let needs_node =
        || node.ok_or_else(|| anyhow!("{command} needs a node number\nusage: {USAGE}"));
    if !matches!(
        command.as_str(),
        "start" | "stop" | "status" | "kill" | "restart"
    ) {
        bail!("unknown cluster command '{command}'\nusage: {USAGE}");
    }
    if matches!(command.as_str(), "kill" | "restart") {
        needs_node()?;
    }
    // Absolute, so that the configuration paths a node runs with (and that identify its
    // process) are the same whatever directory a later command runs in.
    if command == "start" {
        fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let dir = dir.canonicalize().map_err(|_| {
        anyhow!(
            "no cluster in {} (create one with helenus cluster start --nodes N --dir {0})",
            dir.display()
        )
    })?;
    let dir = dir.as_path();
    match command.as_str() {
        "start" => start(dir, nodes, &layout),
        "stop" => stop(dir),
        "status" => status(dir),
        "kill" => kill(dir, needs_node()?),
        "restart" => restart(dir, needs_node()?),
        other => bail!("unknown cluster command '{other}'\nusage: {USAGE}"),
    }
}

fn parse_count(text: &str) -> Result<usize> {
    text.parse::<usize>()
        .ok()
        .filter(|n| (1..=MAX_NODES).contains(n))
        .ok_or_else(|| anyhow!("invalid node count or number '{text}' (1 to {MAX_NODES})"))
}

fn parse_port(name: &str, text: &str) -> Result<u16> {
    text.parse::<u16>()
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| anyhow!("invalid {name} '{text}'"))
}

/// Node `k`'s address: 127.0.0.k.
fn address(k: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(
        127,
        0,
        0,
        u8::try_from(k).expect("at most 254 nodes"),
    ))
}

fn node_dir(dir: &Path, k: usize) -> PathBuf {
    dir.join(format!("node{k}"))
}

fn config_path(dir: &Path, k: usize) -> PathBuf {
    node_dir(dir, k).join("helenus.yaml")
}

fn pid_path(dir: &Path, k: usize) -> PathBuf {
    node_dir(dir, k).join("helenus.pid")
}

fn log_path(dir: &Path, k: usize) -> PathBuf {
    node_dir(dir, k).join("helenus.log")
}

/// How many nodes the cluster in `dir` has: node1, node2, ... each with a configuration.
fn existing_nodes(dir: &Path) -> usize {
    (1..=MAX_NODES)
        .take_while(|k| config_path(dir, *k).is_file())
        .count()
}

/// The nodes of the cluster in `dir`, which must exist.
fn nodes_of(dir: &Path) -> Result<usize> {
    match existing_nodes(dir) {
        0 => bail!(
            "no cluster in {} (create one with helenus cluster start --nodes N --dir {0})",
            dir.display()
        ),
        n => Ok(n),
    }
}

/// Each node's `shards`: the machine's cores shared out between the nodes, at least one.
/// Shards of several nodes on too few cores each wake for a share of the requests and run
/// cold: 3 nodes with 2 shards each on 2 cores spent 300 us of CPU per replicated write at
/// 1,150 writes/s where 1 shard each spent 214 (`bench/cluster-cpu-per-write`).
fn shards_per_node(nodes: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cores / nodes.max(1)).max(1)
}

/// Node `k`'s configuration file.
fn node_config(dir: &Path, k: usize, nodes: usize, layout: &Layout) -> String {
    let node = node_dir(dir, k);
    let seed = SocketAddr::new(address(1), layout.storage_port);
    // YAML's single-quoted scalar: a quote is doubled.
    let quoted = |s: &str| format!("'{}'", s.replace('\'', "''"));
    format!(
        "# Node {k} of {nodes} of a local cluster, written by `helenus cluster start`.\n\
         cluster_name: {cluster}\n\
         listen_address: {address}\n\
         rpc_address: {address}\n\
         native_transport_port: {cql}\n\
         storage_port: {storage}\n\
         admin_port: {admin}\n\
         seed_provider:\n\
         \x20 - class_name: org.apache.cassandra.locator.SimpleSeedProvider\n\
         \x20   parameters:\n\
         \x20     - seeds: \"{seed}\"\n\
         num_tokens: 16\n\
         endpoint_snitch: SimpleSnitch\n\
         data_file_directories:\n\
         \x20 - {data}\n\
         commitlog_directory: {commitlog}\n\
         # Several nodes share the machine: small caches (a node's default is a share of the\n\
         # machine's memory), and the cores divided between them (a node's default is a\n\
         # shard per core; scylla-ccm runs each node with --smp 1 for the same reason).\n\
         block_cache_size_in_mb: 64\n\
         partition_cache_size_in_mb: 32\n\
         shards: {shards}\n",
        cluster = quoted(&layout.cluster_name),
        address = address(k),
        cql = layout.cql_port,
        storage = layout.storage_port,
        admin = layout.admin_port,
        data = quoted(&node.join("data").display().to_string()),
        commitlog = quoted(&node.join("commitlog").display().to_string()),
        shards = shards_per_node(nodes),
    )
}

/// Creates the cluster if `dir` (absolute, existing) holds none (`nodes` is then needed), and
/// starts every node not running, in order, each waited for until it answers CQL.
fn start(dir: &Path, nodes: Option<usize>, layout: &Layout) -> Result<()> {
    let existing = existing_nodes(dir);
    let nodes = match (existing, nodes) {
        (0, None) => bail!(
            "no cluster in {}: give --nodes N to create one",
            dir.display()
        ),
        (0, Some(n)) => {
            for k in 1..=n {
                fs::create_dir_all(node_dir(dir, k))?;
                fs::write(config_path(dir, k), node_config(dir, k, n, layout))
                    .with_context(|| format!("cannot write {}", config_path(dir, k).display()))?;
            }
            n
        }
        (existing, Some(n)) if n != existing => bail!(
            "{} already holds a cluster of {existing} nodes, not {n}",
            dir.display()
        ),
        (existing, _) => existing,
    };
    let mut starting = Vec::new();
    for k in 1..=nodes {
        if let Some(pid) = running_pid(dir, k)? {
            println!("node{k} is already running (pid {pid})");
            continue;
        }
        let node = spawn_node(dir, k)?;
        if existing == 0 {
            // A new cluster: each node joins through the ones before it, one at a time.
            node.await_cql()?;
        } else {
            // A stopped cluster: every node at once, as each waits for its peers to be up
            // before serving CQL (`Cluster::wait_for_peers`).
            starting.push(node);
        }
    }
    for node in starting {
        node.await_cql()?;
    }
    Ok(())
}

/// Starts node `k` and waits until it answers CQL.
fn start_node(dir: &Path, k: usize) -> Result<()> {
    spawn_node(dir, k)?.await_cql()
}

/// A node process started, not yet answering CQL.
struct StartingNode {
    k: usize,
    child: std::process::Child,
    cql: SocketAddr,
    log_path: PathBuf,
    pid_path: PathBuf,
}

/// Starts node `k`'s server process and writes its pid file.
fn spawn_node(dir: &Path, k: usize) -> Result<StartingNode> {
    let config_path = config_path(dir, k);
    let (config, _) = Config::load(&config_path)?;
    let cql = SocketAddr::new(config.rpc_address, config.native_transport_port);
    let log_path = log_path(dir, k);
    let log = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .with_context(|| format!("cannot open {}", log_path.display()))?;
    let binary = std::env::current_exe().context("cannot find the helenus binary")?;
    let child = Command::new(binary)
        .arg("server")
        .arg("--config")
        .arg(&config_path)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        // Its own process group: a Ctrl-C meant for this command does not reach the nodes.
        .process_group(0)
        .spawn()
        .with_context(|| format!("cannot start node{k}"))?;
    let pid = child.id();
    fs::write(pid_path(dir, k), format!("{pid}\n"))?;
    Ok(StartingNode {
        k,
        child,
        cql,
        log_path,
        pid_path: pid_path(dir, k),
    })
}

impl StartingNode {
    /// Waits until the node answers CQL; fails if it exits first or takes too long.
    fn await_cql(self) -> Result<()> {
        let StartingNode {
            k,
            mut child,
            cql,
            log_path,
            pid_path,
        } = self;
        let pid = child.id();
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if cql_ready(cql) {
                println!("node{k} is up on {cql} (pid {pid})");
                return Ok(());
            }
            if let Some(status) = child.try_wait()? {
                let _ = fs::remove_file(&pid_path);
                bail!(
                    "node{k} exited while starting ({status})\n--- last lines of {} ---\n{}",
                    log_path.display(),
                    log_tail(&log_path)
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "node{k} (pid {pid}) did not answer CQL on {cql} within {} s; it is left \
                     running (helenus cluster kill {k})\n--- last lines of {} ---\n{}",
                    START_TIMEOUT.as_secs(),
                    log_path.display(),
                    log_tail(&log_path)
                );
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }
}

/// True if a server at `address` answers a protocol v4 OPTIONS frame with SUPPORTED: an open
/// port alone does not mean the node serves requests.
fn cql_ready(address: SocketAddr) -> bool {
    // Version 4, no flags, stream 0, opcode OPTIONS (0x05), no body.
    const OPTIONS_V4: [u8; 9] = [0x04, 0, 0, 0, 0x05, 0, 0, 0, 0];
    const SUPPORTED: u8 = 0x06;
    let probe = || -> std::io::Result<bool> {
        let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(1))?;
        stream.set_read_timeout(Some(Duration::from_secs(1)))?;
        stream.write_all(&OPTIONS_V4)?;
        let mut header = [0u8; 9];
        stream.read_exact(&mut header)?;
        Ok(header[4] == SUPPORTED)
    };
    probe().unwrap_or(false)
}

/// The last lines of a log file.
fn log_tail(path: &Path) -> String {
    let text = fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
}

/// Node `k`'s process id, if its pid file names a live `helenus server` of its configuration.
fn running_pid(dir: &Path, k: usize) -> Result<Option<i32>> {
    let Ok(text) = fs::read_to_string(pid_path(dir, k)) else {
        return Ok(None);
    };
    let Ok(pid) = text.trim().parse::<i32>() else {
        return Ok(None);
    };
    Ok(is_node_process(pid, &config_path(dir, k)).then_some(pid))
}

/// Whether `pid` is a running `helenus server --config CONFIG` (a zombie's command line is
/// empty, so an exited node is not).
fn is_node_process(pid: i32, config: &Path) -> bool {
    let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    let config = config.as_os_str().as_encoded_bytes();
    args.contains(&b"server".as_slice()) && args.contains(&config)
}

fn signal(pid: i32, signal: i32) -> Result<()> {
    // SAFETY: kill(2) has no memory effects; `pid` was checked to be this node's process.
    if unsafe { libc::kill(pid, signal) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::ESRCH) {
            return Err(e).with_context(|| format!("cannot signal pid {pid}"));
        }
    }
    Ok(())
}

/// Waits until node `k` (`pid`, checked to be the node's process) has exited; false if it
/// is still running at `deadline`. Exited means gone or a zombie, whose files are closed: a
/// dying process's command line is empty as soon as its memory is released, which comes
/// before its files are closed, so a node restarted at that point could find its storage
/// still locked (RocksDB's `LOCK`: "Resource temporarily unavailable").
fn wait_exit(dir: &Path, k: usize, pid: i32, deadline: Instant) -> bool {
    while !has_exited(pid) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(POLL_INTERVAL);
    }
    let _ = fs::remove_file(pid_path(dir, k));
    true
}

/// Whether `pid` is gone or a zombie (`/proc/PID/stat`'s state `Z` or `X`).
fn has_exited(pid: i32) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return true;
    };
    // The state follows the command name, which is in parentheses and may hold any byte.
    let state = stat
        .rfind(')')
        .and_then(|end| stat[end + 1..].split_whitespace().next());
    matches!(state, Some("Z" | "X") | None)
}

/// SIGTERM to every running node (a clean shutdown: drain, sync the commit log, flush), then
/// waits for all; a node still running after `STOP_TIMEOUT` is SIGKILLed and reported.
fn stop(dir: &Path) -> Result<()> {
    let nodes = nodes_of(dir)?;
    let mut running = Vec::new();
    for k in 1..=nodes {
        if let Some(pid) = running_pid(dir, k)? {
            signal(pid, libc::SIGTERM)?;
            running.push((k, pid));
        }
    }
    let deadline = Instant::now() + STOP_TIMEOUT;
    let mut slow = Vec::new();
    for (k, pid) in running {
        if wait_exit(dir, k, pid, deadline) {
            println!("node{k} stopped");
        } else {
            signal(pid, libc::SIGKILL)?;
            wait_exit(dir, k, pid, Instant::now() + STOP_TIMEOUT);
            slow.push(format!("node{k} (pid {pid})"));
        }
    }
    if !slow.is_empty() {
        bail!(
            "{} did not exit within {} s of SIGTERM and were killed",
            slow.join(", "),
            STOP_TIMEOUT.as_secs()
        );
    }
    Ok(())
}

/// SIGKILLs node `k`: a crash.
fn kill(dir: &Path, k: usize) -> Result<()> {
    check_node(dir, k)?;
    let Some(pid) = running_pid(dir, k)? else {
        bail!("node{k} is not running");
    };
    signal(pid, libc::SIGKILL)?;
    if !wait_exit(dir, k, pid, Instant::now() + STOP_TIMEOUT) {
        bail!("node{k} (pid {pid}) is still running after SIGKILL");
    }
    println!("node{k} killed");
    Ok(())
}

/// Starts node `k` again, stopping it first (SIGTERM) if it runs.
fn restart(dir: &Path, k: usize) -> Result<()> {
    check_node(dir, k)?;
    if let Some(pid) = running_pid(dir, k)? {
        signal(pid, libc::SIGTERM)?;
        if !wait_exit(dir, k, pid, Instant::now() + STOP_TIMEOUT) {
            bail!(
                "node{k} (pid {pid}) did not exit within {} s of SIGTERM",
                STOP_TIMEOUT.as_secs()
            );
        }
    }
    start_node(dir, k)
}

fn check_node(dir: &Path, k: usize) -> Result<()> {
    let nodes = nodes_of(dir)?;
    if k > nodes {
        bail!("the cluster in {} has nodes 1 to {nodes}", dir.display());
    }
    Ok(())
}

/// One line per node: name, CQL address, pid, and up (answers CQL), starting (running, no
/// answer yet) or down.
fn status(dir: &Path) -> Result<()> {
    let nodes = nodes_of(dir)?;
    println!("{:<8} {:<22} {:>8}  state", "node", "address", "pid");
    for k in 1..=nodes {
        let (config, _) = Config::load(&config_path(dir, k))?;
        let cql = SocketAddr::new(config.rpc_address, config.native_transport_port);
        let pid = running_pid(dir, k)?;
        let state = match pid {
            None => "down",
            Some(_) if cql_ready(cql) => "up",
            Some(_) => "starting",
        };
        let pid = pid.map_or("-".to_string(), |p| p.to_string());
        println!(
            "{:<8} {:<22} {pid:>8}  {state}",
            format!("node{k}"),
            cql.to_string()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_has_exited_once_a_zombie_or_gone_not_before() {
        assert!(!has_exited(std::process::id() as i32), "this process runs");
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        let pid = child.id() as i32;
        assert!(!has_exited(pid));
        child.kill().expect("kill");
        // Not yet waited for: a zombie once the kill has taken effect.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !has_exited(pid) {
            assert!(Instant::now() < deadline, "the killed child never exited");
            std::thread::sleep(Duration::from_millis(10));
        }
        child.wait().expect("reaped");
        assert!(has_exited(pid), "gone");
    }

    #[test]
    fn nodes_share_the_cores_out() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(shards_per_node(1), cores);
        assert_eq!(shards_per_node(cores + 1), 1);
        assert!((1..=cores).contains(&shards_per_node(3)));
    }

    #[test]
    fn each_node_gets_its_own_address_and_directories() {
        let layout = Layout {
            cluster_name: "it's local".to_string(),
            ..Layout::default()
        };
        let dir = Path::new("/tmp/c");
        let text = node_config(dir, 2, 3, &layout);
        let resolve = |_: &str, _: u16| Err(std::io::Error::other("none"));
        let (config, warnings) =
            Config::parse_with_rackdc(&text, None, resolve).expect("a valid config");
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(config.cluster_name, "it's local");
        assert_eq!(config.listen_address, address(2));
        assert_eq!(config.rpc_address, address(2));
        assert_eq!(config.native_transport_port, 9042);
        assert_eq!(config.storage_port, 7000);
        assert_eq!(config.admin_port, 7199);
        assert_eq!(config.seeds, [SocketAddr::from(([127, 0, 0, 1], 7000))]);
        assert_eq!(config.shards, Some(shards_per_node(3)));
        assert_eq!(
            config.data_file_directories,
            [PathBuf::from("/tmp/c/node2/data")]
        );
        assert_eq!(
            config.commitlog_directory,
            PathBuf::from("/tmp/c/node2/commitlog")
        );
    }

    #[test]
    fn arguments_are_checked() {
        assert!(parse_count("0").is_err());
        assert!(parse_count("255").is_err());
        assert_eq!(parse_count("3").expect("valid"), 3);
        assert!(parse_port("--cql-port", "0").is_err());
        for bad in [
            &["frobnicate"][..],
            &["kill"][..],
            &["start", "--nodes"][..],
            &[][..],
        ] {
            let args: Vec<String> = bad.iter().map(|s| s.to_string()).collect();
            assert!(run(&args).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_stale_pid_file_names_no_node() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::create_dir_all(node_dir(dir.path(), 1)).expect("mkdir");
        // This test's own process is not a helenus server of that configuration.
        fs::write(pid_path(dir.path(), 1), format!("{}\n", std::process::id())).expect("write");
        assert_eq!(running_pid(dir.path(), 1).expect("read"), None);
        fs::write(pid_path(dir.path(), 1), "garbage").expect("write");
        assert_eq!(running_pid(dir.path(), 1).expect("read"), None);
    }
}
