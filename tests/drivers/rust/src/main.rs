//! Driver-matrix client for the Rust `scylla` crate (protocol v4 only).
//!
//! Usage: helenus-driver-check HOST PORT
//!
//! The same steps as every client in tests/drivers (see tests/drivers/README.md): connect with
//! schema metadata on, create a keyspace and a table, check the table in the driver's schema
//! metadata, insert 25 rows with a prepared statement, read them back in pages of 7 and check
//! each row arrives exactly once and in clustering order, drop the keyspace, disconnect.
//! Exit code 0 on success; any failure is an error that names the step.

use std::collections::BTreeSet;
use std::ops::ControlFlow;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, ensure, Context, Result};
use scylla::client::execution_profile::ExecutionProfile;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::response::PagingState;

/// Rows are (k, c) for k and c in 0..SIDE: SIDE partitions of SIDE rows each.
const SIDE: i32 = 5;
/// Smaller than the 25 rows and not a divisor of SIDE, so pages end in the middle of partitions.
const PAGE_SIZE: i32 = 7;
/// Schema changes on Cassandra on a loaded 2-core machine can take seconds.
const REQUEST_TIMEOUT_S: u64 = 30;

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

    let result = exercise(&session, &keyspace, &table).await;
    // Drop the keyspace even when a check failed, so reruns against one server stay clean.
    let dropped = session
        .query_unpaged(format!("DROP KEYSPACE IF EXISTS {keyspace}"), &[])
        .await
        .context("drop keyspace");
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
