//! Driver-matrix client for the Rust `scylla` crate (protocol v4 only).
//!
//! Usage: helenus-driver-check HOST PORT
//!
//! The same steps as every client in tests/drivers (see tests/drivers/README.md): connect with
//! schema metadata on, create a keyspace and a table, check the table in the driver's schema
//! metadata, insert 25 rows with a prepared statement, read them back in pages of 7 and check
//! each row arrives exactly once and in clustering order, drop the keyspace, disconnect.
//! Exit code 0 on success; any failure is an error that names the step.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, ensure, Context, Result};
use scylla::client::execution_profile::ExecutionProfile;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::cluster::Node;
use scylla::policies::load_balancing::{NodeIdentifier, SingleTargetLoadBalancingPolicy};
use scylla::policies::retry::FallthroughRetryPolicy;
use scylla::response::query_result::QueryResult;
use scylla::response::PagingState;
use scylla::statement::prepared::PreparedStatement;
use scylla::statement::Consistency;

/// Rows are (k, c) for k and c in 0..SIDE: SIDE partitions of SIDE rows each.
const SIDE: i32 = 5;
/// Smaller than the 25 rows and not a divisor of SIDE, so pages end in the middle of partitions.
const PAGE_SIZE: i32 = 7;
/// Schema changes on Cassandra on a loaded 2-core machine can take seconds.
const REQUEST_TIMEOUT_S: u64 = 30;
/// The routing check's keys: enough that every node of a 3-node ring (16 vnodes each) owns some.
const ROUTING_KEYS: i32 = 100;
/// How long the driver may take to open a connection to every node.
const CONNECT_WAIT: Duration = Duration::from_secs(20);

#[tokio::main]
async fn main() {
    if let Err(e) = run().await {
        eprintln!("rust-scylla: FAILED: {e:#}");
        std::process::exit(1);
    }
    println!("rust-scylla: OK");
}

async fn run() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, host, port] = args.as_slice() else {
        bail!("usage: {} HOST PORT", args[0]);
    };

    let profile = ExecutionProfile::builder()
        .request_timeout(Some(Duration::from_secs(REQUEST_TIMEOUT_S)))
        .build();
    // Schema metadata fetching is on by default; say so, since checking it is part of the test.
    let session: Session = SessionBuilder::new()
        .known_node(format!("{host}:{port}"))
        .default_execution_profile_handle(profile.into_handle())
        .fetch_schema_metadata(true)
        .connection_timeout(Duration::from_secs(10))
        .build()
        .await
        .context("connect")?;

    let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.subsec_nanos();
    let keyspace = format!("drivers_rust_{}_{nanos}", std::process::id());
    let table = format!("{keyspace}.rows");

    // run-all's DRIVERS_NODES: a local cluster, every node of which the driver must find
    // (system.peers) and hold connected.
    let expected: usize = std::env::var("DRIVERS_NODES")
        .unwrap_or_else(|_| "1".into())
        .parse()
        .context("DRIVERS_NODES")?;
    if expected > 1 {
        check_nodes_up(&session, expected).await?;
    }
    let routing_keyspace = format!("{keyspace}_routing");
    let mut result = exercise(&session, &keyspace, &table).await;
    if result.is_ok() && expected > 1 {
        result = check_routing(&session, &routing_keyspace, expected).await;
    }
    // Drop the keyspaces even when a check failed, so reruns against one server stay clean.
    let mut dropped = session
        .query_unpaged(format!("DROP KEYSPACE IF EXISTS {keyspace}"), &[])
        .await
        .context("drop keyspace")
        .map(|_| ());
    if expected > 1 {
        let routing_dropped = session
            .query_unpaged(format!("DROP KEYSPACE IF EXISTS {routing_keyspace}"), &[])
            .await
            .context("drop the routing keyspace");
        dropped = dropped.and(routing_dropped.map(|_| ()));
    }
    result?;
    dropped?;
    // Dropping the Session closes its connections.
    drop(session);
    Ok(())
}

async fn exercise(session: &Session, keyspace: &str, table: &str) -> Result<()> {
    session
        .query_unpaged(
            format!(
                "CREATE KEYSPACE {keyspace} WITH replication = \
                 {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
            ),
            &[],
        )
        .await
        .context("create keyspace")?;
    session
        .query_unpaged(
            format!("CREATE TABLE {table} (k int, c int, v text, PRIMARY KEY (k, c))"),
            &[],
        )
        .await
        .context("create table")?;

    // The driver reads system_schema.* into its metadata; the new table must be there.
    session
        .refresh_metadata()
        .await
        .context("refresh metadata")?;
    let state = session.get_cluster_state();
    let ks_meta = state
        .get_keyspace(keyspace)
        .with_context(|| format!("keyspace {keyspace} missing from driver metadata"))?;
    let tbl_meta = ks_meta
        .tables
        .get("rows")
        .context("table rows missing from driver metadata")?;
    let columns: BTreeSet<&str> = tbl_meta.columns.keys().map(String::as_str).collect();
    ensure!(
        columns == BTreeSet::from(["c", "k", "v"]),
        "metadata columns {columns:?}"
    );
    ensure!(
        tbl_meta.partition_key == ["k"],
        "partition key {:?}",
        tbl_meta.partition_key
    );
    ensure!(
        tbl_meta.clustering_key == ["c"],
        "clustering key {:?}",
        tbl_meta.clustering_key
    );

    // Insert with bound values through a prepared statement.
    let insert = session
        .prepare(format!("INSERT INTO {table} (k, c, v) VALUES (?, ?, ?)"))
        .await
        .context("prepare insert")?;
    for k in 0..SIDE {
        for c in 0..SIDE {
            session
                .execute_unpaged(&insert, (k, c, format!("v{k}_{c}")))
                .await
                .with_context(|| format!("insert ({k}, {c})"))?;
        }
    }

    // Read back page by page, so the page count and sizes can be checked too.
    let mut select = session
        .prepare(format!("SELECT k, c, v FROM {table}"))
        .await
        .context("prepare select")?;
    select.set_page_size(PAGE_SIZE);
    let mut rows: Vec<(i32, i32, String)> = Vec::new();
    let mut pages = 0;
    let mut paging_state = PagingState::start();
    loop {
        let (result, paging) = session
            .execute_single_page(&select, &[], paging_state)
            .await
            .with_context(|| format!("select page {}", pages + 1))?;
        pages += 1;
        let page: Vec<(i32, i32, String)> = result
            .into_rows_result()?
            .rows::<(i32, i32, String)>()?
            .collect::<Result<_, _>>()?;
        ensure!(
            page.len() <= PAGE_SIZE as usize,
            "page {pages} has {} rows",
            page.len()
        );
        rows.extend(page);
        match paging.into_paging_control_flow() {
            ControlFlow::Break(()) => break,
            ControlFlow::Continue(next) => paging_state = next,
        }
        ensure!(
            pages < 100,
            "more than 100 pages for 25 rows: paging never ends"
        );
    }
    check_rows(&rows, pages)
}

/// The driver's cluster state holds `expected` nodes, each with an open connection (the scylla
/// driver's notion of up). The pools fill in the background after the session is built, so this
/// waits up to CONNECT_WAIT.
async fn check_nodes_up(session: &Session, expected: usize) -> Result<()> {
    let deadline = Instant::now() + CONNECT_WAIT;
    loop {
        let state = session.get_cluster_state();
        let nodes = state.get_nodes_info();
        if nodes.len() == expected && nodes.iter().all(|n| n.is_connected()) {
            return Ok(());
        }
        if Instant::now() > deadline {
            let found: Vec<String> = nodes
                .iter()
                .map(|n| format!("{} connected={}", address(n), n.is_connected()))
                .collect();
            bail!("expected {expected} nodes up, found {found:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await; // poll interval
    }
}

fn address(node: &Node) -> String {
    format!("{}:{}", node.address.ip(), node.address.port())
}

/// With a cluster of `expected` nodes: in a keyspace of RF 1, every prepared INSERT and SELECT of
/// a key, sent through the driver's default (token-aware) load balancing policy with no retries,
/// is coordinated by the one replica the driver's cluster state names for the key; every node
/// owns some keys; and the key's replica, asked directly at ONE, returns the row. Prints the
/// requests per node.
async fn check_routing(session: &Session, keyspace: &str, expected: usize) -> Result<()> {
    let table = format!("{keyspace}.kv");
    session
        .query_unpaged(
            format!(
                "CREATE KEYSPACE {keyspace} WITH replication = \
                 {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
            ),
            &[],
        )
        .await
        .context("create the routing keyspace")?;
    session
        .query_unpaged(
            format!("CREATE TABLE {table} (k int PRIMARY KEY, v text)"),
            &[],
        )
        .await
        .context("create the routing table")?;
    // The replica map needs the keyspace's replication and the table's partition key.
    session
        .refresh_metadata()
        .await
        .context("refresh metadata")?;
    // No retries: the coordinator of a result is then the only node the request went to.
    let mut insert = session
        .prepare(format!("INSERT INTO {table} (k, v) VALUES (?, ?)"))
        .await
        .context("prepare the routing insert")?;
    insert.set_retry_policy(Some(Arc::new(FallthroughRetryPolicy)));
    let mut select = session
        .prepare(format!("SELECT v FROM {table} WHERE k = ?"))
        .await
        .context("prepare the routing select")?;
    select.set_retry_policy(Some(Arc::new(FallthroughRetryPolicy)));

    let state = session.get_cluster_state();
    let replica_of = |k: i32| -> Result<Arc<Node>> {
        let replicas = state
            .get_endpoints(keyspace, "kv", &(k,))
            .with_context(|| format!("replicas of key {k}"))?;
        let found: Vec<String> = replicas.iter().map(|(n, _)| address(n)).collect();
        ensure!(
            replicas.len() == 1,
            "key {k}: the driver's replicas {found:?}, expected one"
        );
        Ok(replicas[0].0.clone())
    };
    let sent_to = |result: &QueryResult, replica: &Node, what: &str| -> Result<String> {
        let coordinator = result.request_coordinator().node();
        ensure!(
            coordinator.host_id == replica.host_id,
            "{what} went to {}, the key's replica is {}",
            address(coordinator),
            address(replica)
        );
        Ok(address(coordinator))
    };
    let value = |result: QueryResult| -> Result<Vec<String>> {
        Ok(result
            .into_rows_result()?
            .rows::<(String,)>()?
            .map(|r| r.map(|(v,)| v))
            .collect::<Result<_, _>>()?)
    };

    let (mut owned, mut writes, mut reads, mut direct) = (
        BTreeMap::<String, u32>::new(),
        BTreeMap::<String, u32>::new(),
        BTreeMap::<String, u32>::new(),
        BTreeMap::<String, u32>::new(),
    );
    for k in 0..ROUTING_KEYS {
        let replica = replica_of(k)?;
        *owned.entry(address(&replica)).or_default() += 1;
        let result = session
            .execute_unpaged(&insert, (k, format!("r{k}")))
            .await
            .with_context(|| format!("insert key {k}"))?;
        *writes
            .entry(sent_to(&result, &replica, &format!("INSERT of key {k}"))?)
            .or_default() += 1;
    }
    for k in 0..ROUTING_KEYS {
        let replica = replica_of(k)?;
        let result = session
            .execute_unpaged(&select, (k,))
            .await
            .with_context(|| format!("select key {k}"))?;
        *reads
            .entry(sent_to(&result, &replica, &format!("SELECT of key {k}"))?)
            .or_default() += 1;
        let values = value(result)?;
        ensure!(
            values == [format!("r{k}")],
            "key {k}: SELECT returned {values:?}"
        );
        // The replica itself, at ONE: the row is where the ring says.
        let mut on_replica: PreparedStatement = select.clone();
        on_replica.set_load_balancing_policy(Some(SingleTargetLoadBalancingPolicy::new(
            NodeIdentifier::Node(replica.clone()),
            None,
        )));
        on_replica.set_consistency(Consistency::One);
        let result = session
            .execute_unpaged(&on_replica, (k,))
            .await
            .with_context(|| format!("select key {k} at ONE on its replica"))?;
        *direct
            .entry(sent_to(
                &result,
                &replica,
                &format!("SELECT at ONE of key {k} on its replica"),
            )?)
            .or_default() += 1;
        let values = value(result)?;
        ensure!(
            values == [format!("r{k}")],
            "key {k}: its replica {} returned {values:?} at ONE",
            address(&replica)
        );
    }

    let mut nodes: Vec<String> = state.get_nodes_info().iter().map(|n| address(n)).collect();
    nodes.sort();
    for n in &nodes {
        let get = |m: &BTreeMap<String, u32>| m.get(n).copied().unwrap_or(0);
        println!(
            "rust-scylla: routing: {n}: replica of {} keys, coordinated {} INSERTs, {} SELECTs, \
             {} SELECTs at ONE",
            get(&owned),
            get(&writes),
            get(&reads),
            get(&direct)
        );
    }
    ensure!(
        owned.len() == expected,
        "{ROUTING_KEYS} keys have replicas on {} of {expected} nodes",
        owned.len()
    );
    Ok(())
}

/// Every (k, c) exactly once; each partition's rows contiguous and in clustering order (c
/// ascending); partitions themselves come in token order, which is not checked.
fn check_rows(rows: &[(i32, i32, String)], pages: i32) -> Result<()> {
    let total = SIDE * SIDE;
    let min_pages = (total + PAGE_SIZE - 1) / PAGE_SIZE;
    ensure!(
        pages >= min_pages,
        "{pages} pages, expected at least {min_pages}"
    );
    ensure!(
        rows.len() == total as usize,
        "{} rows, expected {total}",
        rows.len()
    );
    let mut seen_partitions = BTreeSet::new();
    for run in rows.chunk_by(|a, b| a.0 == b.0) {
        let k = run[0].0;
        ensure!(
            seen_partitions.insert(k),
            "partition k={k} is not contiguous"
        );
        let cs: Vec<i32> = run.iter().map(|r| r.1).collect();
        ensure!(
            cs == (0..SIDE).collect::<Vec<_>>(),
            "partition k={k}: clustering {cs:?}"
        );
        for (k, c, v) in run {
            ensure!(*v == format!("v{k}_{c}"), "row ({k}, {c}) has v={v:?}");
        }
    }
    ensure!(
        seen_partitions == (0..SIDE).collect(),
        "partitions {seen_partitions:?}"
    );
    Ok(())
}
