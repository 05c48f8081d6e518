//! A metadata directory left by a real node killed with SIGKILL (`tests/data/metadata-crash`,
//! written by the build whose log store appended at the log file's start after a restart):
//! the log holds only entry 5, the state machine has applied up to 5, nothing is purged.
//! It must open, keep what it applied, and take new proposals.

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
