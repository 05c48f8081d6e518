//! Restarts from the directories crashes leave.
//!
//! First a metadata directory left by a real node killed with SIGKILL
//! (`tests/data/metadata-crash`, written by the build whose log store appended at the log
//! file's start after a restart): the log holds only entry 5, the state machine has applied
//! up to 5, nothing is purged. It must open, keep what it applied, and take new proposals.
//!
//! Then a node's directory edited into what a crash (or that bug) can leave: a state file
//! behind or ahead of the log, a torn last record in the log, a torn value file write.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use cluster_metadata::{
    MemoryNetwork, MetadataCommand, MetadataConfig, MetadataService, NoApplier, NodeId, SchemaEntry,
};
use uuid::Uuid;

const TIMEOUT: Duration = Duration::from_secs(10);

/// The node that wrote the fixture.
const NODE: &str = "cf565356-95b4-41a0-85bb-7ebb3aa8aa35";
const ADDRESS: &str = "127.0.0.1:17000";

fn fixture() -> tempfile::TempDir {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/metadata-crash");
    let dir = tempfile::tempdir().expect("a temporary directory");
    for file in std::fs::read_dir(&source).expect("the fixture") {
        let file = file.expect("a fixture file");
        std::fs::copy(file.path(), dir.path().join(file.file_name())).expect("copied");
    }
    dir
}

async fn open(dir: &Path) -> Arc<MetadataService> {
    let id: NodeId = NODE.parse().expect("a uuid");
    let network = MemoryNetwork::new();
    let service = MetadataService::open(
        id,
        ADDRESS.to_string(),
        dir,
        network.transport(id),
        Arc::new(NoApplier),
        MetadataConfig::default(),
    )
    .await
    .expect("the crashed directory opens");
    network.register(&service);
    service
        .bootstrap()
        .await
        .expect("a no-op: already a member");
    service
}

async fn change_schema(service: &MetadataService) -> u64 {
    let base_version = service.state().borrow().schema_version();
    let version = Uuid::new_v4();
    service
        .propose(
            MetadataCommand::Schema(SchemaEntry {
                base_version,
                version,
                change: format!("{{\"schema\": \"{version}\"}}"),
            }),
            TIMEOUT,
        )
        .await
        .expect("proposed and applied")
}

#[tokio::test(start_paused = true)]
async fn the_directory_a_sigkill_left_opens_and_serves_proposals() {
    let dir = fixture();
    let service = open(dir.path()).await;
    let applied = service.state().borrow().clone();
    assert!(applied.schema.is_some(), "the applied schema is kept");
    assert_eq!(service.metrics().last_applied.map(|l| l.index), Some(5));

    let first = change_schema(&service).await;
    assert!(first > 5, "index {first}");
    let after = service.state().borrow().clone();
    service.shutdown().await.expect("shut down");
    drop(service);

    // Reopened (as after another SIGKILL: nothing more is written at shutdown), it resumes
    // where it was and goes on.
    let service = open(dir.path()).await;
    assert_eq!(*service.state().borrow().clone(), *after);
    let second = change_schema(&service).await;
    assert!(second > first, "index {second} after {first}");
    service.shutdown().await.expect("shut down");
}

// ---- A node of its own, driven into the states a crash can leave ----

const ME: u128 = 1;

fn me() -> NodeId {
    Uuid::from_u128(ME)
}

fn small_config(snapshot_every_entries: u64) -> MetadataConfig {
    MetadataConfig {
        cluster_name: "crash".to_string(),
        heartbeat_interval_ms: 50,
        election_timeout_min_ms: 150,
        election_timeout_max_ms: 300,
        snapshot_every_entries,
        entries_kept_after_snapshot: 1,
    }
}

async fn open_node(dir: &Path, config: MetadataConfig) -> Arc<MetadataService> {
    let network = MemoryNetwork::new();
    let service = MetadataService::open(
        me(),
        "127.0.0.1:7000".to_string(),
        dir,
        network.transport(me()),
        Arc::new(NoApplier),
        config,
    )
    .await
    .unwrap_or_else(|e| panic!("{} opens: {e}", dir.display()));
    network.register(&service);
    service.bootstrap().await.expect("bootstrapped");
    service
}

/// What a reopened node has applied once it leads again.
async fn settled_state(service: &MetadataService) -> cluster_metadata::MetadataState {
    service.read_barrier(TIMEOUT).await.expect("a read barrier");
    service.state().borrow().as_ref().clone()
}

/// The byte ranges of the records in a record file (`files.rs`: length, crc, body).
fn records(path: &Path) -> Vec<std::ops::Range<usize>> {
    let bytes = std::fs::read(path).expect("read");
    let mut ranges = Vec::new();
    let mut at = 0;
    while at + 8 <= bytes.len() {
        let length = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes")) as usize;
        ranges.push(at..at + 8 + length);
        at += 8 + length;
    }
    assert_eq!(at, bytes.len(), "whole records");
    ranges
}

/// Runs a node through `changes` schema changes, keeping a copy of its `state` file after
/// the first, and returns the final state.
async fn run_node(
    dir: &Path,
    config: MetadataConfig,
    changes: usize,
) -> (Vec<u8>, cluster_metadata::MetadataState) {
    let service = open_node(dir, config).await;
    change_schema(&service).await;
    let early_state = std::fs::read(dir.join("state")).expect("a state file");
    for _ in 1..changes {
        change_schema(&service).await;
    }
    let state = service.state().borrow().as_ref().clone();
    service.shutdown().await.expect("shut down");
    (early_state, state)
}

#[tokio::test(start_paused = true)]
async fn a_state_file_behind_the_log_is_caught_up_from_the_log() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (early_state, state) = run_node(dir.path(), small_config(1000), 5).await;
    std::fs::write(dir.path().join("state"), early_state).expect("written");
    let service = open_node(dir.path(), small_config(1000)).await;
    assert_eq!(settled_state(&service).await, state);
    change_schema(&service).await;
    service.shutdown().await.expect("shut down");
}

#[tokio::test(start_paused = true)]
async fn a_state_file_behind_a_purged_log_resumes_from_the_snapshot() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (early_state, state) = run_node(dir.path(), small_config(3), 9).await;
    assert!(dir.path().join("purged").exists(), "the log was purged");
    assert!(dir.path().join("snapshot").exists(), "a snapshot was taken");
    std::fs::write(dir.path().join("state"), early_state).expect("written");
    let service = open_node(dir.path(), small_config(3)).await;
    assert_eq!(settled_state(&service).await, state);
    change_schema(&service).await;
    service.shutdown().await.expect("shut down");
}

#[tokio::test(start_paused = true)]
async fn a_state_file_ahead_of_the_log_is_kept_and_the_log_purged_to_it() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (_, state) = run_node(dir.path(), small_config(1000), 5).await;
    // The log loses its last two entries (as if they had never been written); the state
    // machine has applied them and `committed` names the last.
    let log = dir.path().join("log");
    let ranges = records(&log);
    let keep = ranges[ranges.len() - 2].start;
    let bytes = std::fs::read(&log).expect("read");
    std::fs::write(&log, &bytes[..keep]).expect("written");

    let service = open_node(dir.path(), small_config(1000)).await;
    assert_eq!(settled_state(&service).await, state);
    change_schema(&service).await;
    let after = service.state().borrow().as_ref().clone();
    service.shutdown().await.expect("shut down");
    let service = open_node(dir.path(), small_config(1000)).await;
    assert_eq!(settled_state(&service).await, after);
    service.shutdown().await.expect("shut down");
}

#[tokio::test(start_paused = true)]
async fn a_torn_last_log_record_is_dropped_and_the_log_goes_on_after_it() {
    for cut in [3usize, 8, 20] {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (_, state) = run_node(dir.path(), small_config(1000), 4).await;
        // A record whose append the crash cut `cut` bytes in: never acknowledged.
        let log = dir.path().join("log");
        let mut bytes = std::fs::read(&log).expect("read");
        let last = records(&log).pop().expect("a record");
        let torn: Vec<u8> = bytes[last][..cut].to_vec();
        bytes.extend_from_slice(&torn);
        std::fs::write(&log, &bytes).expect("written");

        let service = open_node(dir.path(), small_config(1000)).await;
        assert_eq!(settled_state(&service).await, state, "cut at {cut}");
        change_schema(&service).await;
        let after = service.state().borrow().as_ref().clone();
        service.shutdown().await.expect("shut down");
        let service = open_node(dir.path(), small_config(1000)).await;
        assert_eq!(settled_state(&service).await, after, "cut at {cut}");
        service.shutdown().await.expect("shut down");
    }
}

#[tokio::test(start_paused = true)]
async fn a_torn_value_file_write_leaves_the_old_value_and_a_torn_value_is_an_error() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (_, state) = run_node(dir.path(), small_config(3), 5).await;
    let names = ["vote", "committed", "purged", "state", "snapshot"];
    // A value file is written to `<name>.tmp` and renamed over: a crash during the write
    // leaves a torn `.tmp` beside the old value, which is what counts.
    for name in names {
        let bytes = std::fs::read(dir.path().join(name)).expect(name);
        std::fs::write(
            dir.path().join(format!("{name}.tmp")),
            &bytes[..bytes.len() / 2],
        )
        .expect("written");
    }
    let service = open_node(dir.path(), small_config(3)).await;
    assert_eq!(settled_state(&service).await, state);
    change_schema(&service).await;
    service.shutdown().await.expect("shut down");

    // The value file itself torn cannot come from a crash (the rename is atomic): it is
    // corruption, reported with the file's name, never guessed around.
    for name in names {
        let copy = tempfile::tempdir().expect("a temporary directory");
        for file in std::fs::read_dir(dir.path()).expect("the directory") {
            let file = file.expect("a file");
            std::fs::copy(file.path(), copy.path().join(file.file_name())).expect("copied");
        }
        let path = copy.path().join(name);
        let bytes = std::fs::read(&path).expect(name);
        std::fs::write(&path, &bytes[..bytes.len() - 1]).expect("written");
        let network = MemoryNetwork::new();
        let opened = MetadataService::open(
            me(),
            "127.0.0.1:7000".to_string(),
            copy.path(),
            network.transport(me()),
            Arc::new(NoApplier),
            small_config(3),
        )
        .await;
        let error = opened
            .err()
            .unwrap_or_else(|| panic!("a torn {name} opens"));
        let message = error.to_string();
        assert!(
            message.contains(&format!("{name} is corrupt")),
            "{name}: {message}"
        );
    }
}
