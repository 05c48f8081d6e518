//! Crash points: a one-node and a three-node group run a workload (bootstrap, joins, schema
//! changes, snapshots and purges, a restart) while a hook copies every node's directory after
//! each durable change (`files::crash_points`), with no other change running anywhere. Each
//! copy is what a crash of the whole group at that point (between two file writes) leaves.
//! Every copy must reopen, come back as the same group, apply every proposal that had been
//! acknowledged when the copy was taken (a `propose` that returned Ok is never lost), agree
//! on one state on every node, and take a new proposal.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use uuid::Uuid;

use crate::command::{MetadataCommand, SchemaEntry, INITIAL_SCHEMA_VERSION};
use crate::files::crash_points;
use crate::{MemoryNetwork, MetadataConfig, MetadataService, NoApplier, NodeId};

const TIMEOUT: Duration = Duration::from_secs(10);

fn id(node: usize) -> NodeId {
    Uuid::from_u128(node as u128 + 1)
}

fn address(node: usize) -> String {
    format!("127.0.0.{}:7000", node + 1)
}

fn config() -> MetadataConfig {
    MetadataConfig {
        cluster_name: "crash".to_string(),
        heartbeat_interval_ms: 50,
        election_timeout_min_ms: 150,
        election_timeout_max_ms: 300,
        // Snapshots and purges every few entries, so crashes land around them too.
        snapshot_every_entries: 3,
        entries_kept_after_snapshot: 1,
    }
}

/// One copy of every node's directory, and what had been acknowledged when it was taken.
struct Point {
    dir: PathBuf,
    /// How many of the workload's schema changes `propose` had answered Ok.
    acknowledged: usize,
}

/// The workload's schema changes, in order (each on the one before), and how many were
/// acknowledged so far.
#[derive(Default)]
struct Progress {
    versions: Vec<Uuid>,
    acknowledged: usize,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("a copy directory");
    let Ok(files) = std::fs::read_dir(from) else {
        return; // not created yet
    };
    for file in files {
        let file = file.expect("a directory entry");
        std::fs::copy(file.path(), to.join(file.file_name())).expect("copied");
    }
}

/// The live group's directories (`root/node-N`) and the copies taken at each crash point.
struct Recorder {
    root: tempfile::TempDir,
    copies: tempfile::TempDir,
    nodes: usize,
    progress: Arc<Mutex<Progress>>,
    points: Arc<Mutex<Vec<Point>>>,
}

impl Recorder {
    fn new(nodes: usize) -> Recorder {
        Recorder {
            root: tempfile::tempdir().expect("a temporary directory"),
            copies: tempfile::tempdir().expect("a temporary directory"),
            nodes,
            progress: Arc::default(),
            points: Arc::default(),
        }
    }

    fn node_dir(root: &Path, node: usize) -> PathBuf {
        root.join(format!("node-{node}"))
    }

    fn record(&self) -> crash_points::Registration {
        let root = self.root.path().to_path_buf();
        let copies = self.copies.path().to_path_buf();
        let nodes = self.nodes;
        let progress = self.progress.clone();
        let points = self.points.clone();
        let taken = AtomicUsize::new(0);
        crash_points::register(self.root.path(), move || {
            let dir = copies.join(taken.fetch_add(1, Ordering::Relaxed).to_string());
            for node in 0..nodes {
                copy_dir(&Self::node_dir(&root, node), &Self::node_dir(&dir, node));
            }
            let acknowledged = lock(&progress).acknowledged;
            lock(&points).push(Point { dir, acknowledged });
        })
    }
}

/// A group of `nodes` services over one in-memory network, each in `root/node-N`.
struct Group {
    network: Arc<MemoryNetwork>,
    root: PathBuf,
    nodes: Vec<Option<Arc<MetadataService>>>,
}

impl Group {
    /// Opens every node from its directory and makes it a member as a starting node does:
    /// node 0 bootstraps (a no-op once a member), the others join through it (a no-op once
    /// voters).
    async fn start(root: &Path, nodes: usize) -> Group {
        let mut group = Group {
            network: MemoryNetwork::new(),
            root: root.to_path_buf(),
            nodes: vec![None; nodes],
        };
        for n in 0..nodes {
            group.open(n).await;
        }
        group.node(0).bootstrap().await.expect("bootstrapped");
        let seeds = [(id(0), address(0))];
        for n in 1..nodes {
            group.node(n).join(&seeds, TIMEOUT).await.expect("joined");
        }
        group
    }

    async fn open(&mut self, n: usize) {
        let service = MetadataService::open(
            id(n),
            address(n),
            &Recorder::node_dir(&self.root, n),
            self.network.transport(id(n)),
            Arc::new(NoApplier),
            config(),
        )
        .await
        .unwrap_or_else(|e| panic!("node {n} in {} opens: {e}", self.root.display()));
        self.network.register(&service);
        self.nodes[n] = Some(service);
    }

    async fn restart(&mut self, n: usize) {
        self.network.unregister(id(n));
        let service = self.nodes[n].take().expect("running");
        service.shutdown().await.expect("shut down");
        drop(service);
        self.open(n).await;
    }

    fn node(&self, n: usize) -> &Arc<MetadataService> {
        self.nodes[n].as_ref().expect("running")
    }

    async fn stop(mut self) {
        for n in 0..self.nodes.len() {
            if let Some(service) = self.nodes[n].take() {
                service.shutdown().await.expect("shut down");
            }
        }
    }

    /// Proposes a schema change on the version node `n` has.
    async fn change_schema(&self, n: usize, version: Uuid) {
        let base_version = self.node(n).state().borrow().schema_version();
        let command = MetadataCommand::Schema(SchemaEntry {
            base_version,
            version,
            change: format!("{{\"schema\": \"{version}\"}}"),
        });
        self.node(n)
            .propose(command, TIMEOUT)
            .await
            .unwrap_or_else(|e| panic!("node {n} in {}: {e}", self.root.display()));
    }
}

/// Runs the workload on a live group of `nodes`, recording a crash point after every
/// durable change, then checks every point.
async fn every_crash_point_recovers(nodes: usize) {
    let recorder = Recorder::new(nodes);
    let registration = recorder.record();
    let mut group = Group::start(recorder.root.path(), nodes).await;
    for step in 0..8 {
        if step == 4 {
            // A restart in the middle: appends after a reopen are what the old log store got
            // wrong.
            group.restart(nodes - 1).await;
        }
        let version = Uuid::new_v4();
        lock(&recorder.progress).versions.push(version);
        group.change_schema(step % nodes, version).await;
        lock(&recorder.progress).acknowledged += 1;
    }
    group.stop().await;
    drop(registration);

    let versions = lock(&recorder.progress).versions.clone();
    let points = std::mem::take(&mut *lock(&recorder.points));
    assert!(points.len() > 20 * nodes, "{} crash points", points.len());
    for point in points {
        check_point(&point, nodes, &versions).await;
    }
}

async fn check_point(point: &Point, nodes: usize, versions: &[Uuid]) {
    let group = Group::start(&point.dir, nodes).await;
    let where_ = point.dir.display();
    let mut states = Vec::new();
    for n in 0..nodes {
        group
            .node(n)
            .read_barrier(TIMEOUT)
            .await
            .unwrap_or_else(|e| panic!("node {n} in {where_}: read barrier: {e}"));
        states.push(group.node(n).state().borrow().clone());
    }
    // Every node applied the same; the schema is the last acknowledged change's, or the
    // one in flight at the crash (it may have committed without being acknowledged).
    for (n, state) in states.iter().enumerate() {
        assert_eq!(
            state, &states[0],
            "node {n} and node 0 disagree in {where_}"
        );
    }
    let version = states[0].schema_version();
    let acknowledged = point.acknowledged;
    let allowed: Vec<Uuid> = match acknowledged {
        0 => vec![INITIAL_SCHEMA_VERSION, versions[0]],
        k => versions[k - 1..(k + 1).min(versions.len())].to_vec(),
    };
    assert!(
        allowed.contains(&version),
        "in {where_}: {acknowledged} changes acknowledged but the schema is {version}, \
         change {:?}",
        versions.iter().position(|v| *v == version)
    );
    // And the group goes on.
    group.change_schema(nodes - 1, Uuid::new_v4()).await;
    group.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_one_node_group_recovers_from_a_crash_between_any_two_writes() {
    every_crash_point_recovers(1).await;
}

#[tokio::test(start_paused = true)]
async fn a_three_node_group_recovers_from_a_crash_between_any_two_writes() {
    every_crash_point_recovers(3).await;
}
