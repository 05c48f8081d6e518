//! The schema service over the cluster metadata log: three nodes in one process, each with
//! its own engine and metadata directory, over the in-memory network, with tokio's paused
//! clock.

use std::time::Duration;

use cluster_metadata::{
    MemoryNetwork, MetadataConfig, MetadataService, NodeId, SchemaEntry, SchemaSource,
    INITIAL_SCHEMA_VERSION,
};

use super::*;

const TIMEOUT: Duration = Duration::from_secs(10);

struct Node {
    engine: Arc<TestEngine>,
    schema: SchemaService,
    metadata: Arc<MetadataService>,
    _dir: Option<tempfile::TempDir>,
}

fn node_id(n: usize) -> NodeId {
    Uuid::from_u128(n as u128 + 1)
}

fn metadata_config() -> MetadataConfig {
    MetadataConfig {
        heartbeat_interval_ms: 50,
        election_timeout_min_ms: 150,
        election_timeout_max_ms: 300,
        ..MetadataConfig::default()
    }
}

async fn start_node(network: &Arc<MemoryNetwork>, n: usize, engine: Arc<TestEngine>) -> Node {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut node = start_node_in(network, n, engine, dir.path()).await;
    node._dir = Some(dir);
    node
}

/// Node `n` over `engine`, its Raft state in `dir`.
async fn start_node_in(
    network: &Arc<MemoryNetwork>,
    n: usize,
    engine: Arc<TestEngine>,
    dir: &std::path::Path,
) -> Node {
    let schema =
        SchemaService::open_replicated(engine.clone(), vec![system_keyspace()]).expect("open");
    let metadata = MetadataService::open(
        node_id(n),
        format!("node{n}"),
        dir,
        network.transport(node_id(n)),
        schema.applier(),
        metadata_config(),
    )
    .await
    .expect("metadata opened");
    network.register(&metadata);
    Node {
        engine,
        schema,
        metadata,
        _dir: None,
    }
}

/// Three nodes: node 0 bootstraps, 1 and 2 join; every schema replicated through the log.
async fn cluster(network: &Arc<MemoryNetwork>) -> Vec<Node> {
    let mut nodes = Vec::new();
    for n in 0..3 {
        nodes.push(start_node(network, n, Arc::default()).await);
    }
    nodes[0].metadata.bootstrap().await.expect("bootstrapped");
    let seeds = [(node_id(0), "node0".to_string())];
    for node in &nodes[1..] {
        node.metadata.join(&seeds, TIMEOUT).await.expect("joined");
    }
    for node in &nodes {
        node.schema
            .replicate_through(node.metadata.clone(), TIMEOUT)
            .await
            .expect("replicated");
    }
    nodes
}

/// Waits until every node's schema is at `version`.
async fn converge(nodes: &[Node], version: Uuid) {
    tokio::time::timeout(TIMEOUT, async {
        while nodes.iter().any(|n| n.schema.snapshot().version != version) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("every node has the schema");
}

#[tokio::test(start_paused = true)]
async fn a_change_submitted_anywhere_applies_on_every_node_with_its_storage_and_event() {
    let network = MemoryNetwork::new();
    let nodes = cluster(&network).await;
    let mut events: Vec<_> = nodes.iter().map(|n| n.schema.subscribe()).collect();
    for node in &nodes {
        assert_eq!(node.schema.snapshot().version, INITIAL_SCHEMA_VERSION);
    }
    nodes[1]
        .schema
        .submit(always(with_keyspace))
        .await
        .expect("keyspace");
    // Submitting answers once the change is applied on the submitter.
    assert!(nodes[1].schema.snapshot().keyspace("ks").is_some());
    converge(&nodes, nodes[1].schema.snapshot().version).await;
    nodes[2]
        .schema
        .submit(|s: &Schema| Ok::<_, SchemaServiceError>(Some(with_table(s, "t", T1))))
        .await
        .expect("table");
    let version = nodes[2].schema.snapshot().version;
    converge(&nodes, version).await;
    for (n, node) in nodes.iter().enumerate() {
        let schema = node.schema.snapshot();
        assert!(schema.table("ks", "t").is_some(), "node {n}");
        assert!(schema.keyspace("system_test").is_some(), "node {n}");
        assert!(has_storage(node.engine.as_ref(), T1), "node {n}");
        let persisted = node
            .engine
            .get_meta(SCHEMA_META_KEY)
            .expect("read")
            .expect("persisted");
        assert_eq!(
            Schema::from_persisted_json(&persisted)
                .expect("decodes")
                .version,
            version
        );
        let announced = [
            events[n].try_recv().expect("keyspace event"),
            events[n].try_recv().expect("table event"),
        ];
        assert_eq!(
            announced,
            [
                event(
                    SchemaChangeKind::Created,
                    SchemaChangeTarget::Keyspace,
                    None
                ),
                event(
                    SchemaChangeKind::Created,
                    SchemaChangeTarget::Table,
                    Some("t")
                ),
            ],
            "node {n}"
        );
    }
    nodes[0]
        .schema
        .submit(|s: &Schema| Ok::<_, SchemaServiceError>(Some(without_table(s, "t"))))
        .await
        .expect("drop");
    converge(&nodes, nodes[0].schema.snapshot().version).await;
    for node in &nodes {
        assert!(!has_storage(node.engine.as_ref(), T1));
    }
}

#[tokio::test(start_paused = true)]
async fn concurrent_submissions_on_two_nodes_both_apply_one_after_the_other() {
    let network = MemoryNetwork::new();
    let nodes = cluster(&network).await;
    nodes[0]
        .schema
        .submit(always(with_keyspace))
        .await
        .expect("keyspace");
    converge(&nodes, nodes[0].schema.snapshot().version).await;
    // Both decide on the same schema; the log takes one, refuses the other, which decides
    // again on the schema with the first table in it.
    let (a, b) = tokio::join!(
        nodes[1]
            .schema
            .submit(|s: &Schema| Ok::<_, SchemaServiceError>(Some(with_table(s, "a", T1)))),
        nodes[2]
            .schema
            .submit(|s: &Schema| Ok::<_, SchemaServiceError>(Some(with_table(s, "b", T2)))),
    );
    a.expect("a");
    b.expect("b");
    let last = [&nodes[1], &nodes[2]]
        .iter()
        .map(|n| n.schema.snapshot())
        .find(|s| s.table("ks", "a").is_some() && s.table("ks", "b").is_some())
        .expect("the later submitter has both tables");
    converge(&nodes, last.version).await;
    for node in &nodes {
        assert!(has_storage(node.engine.as_ref(), T1));
        assert!(has_storage(node.engine.as_ref(), T2));
    }
}

#[tokio::test(start_paused = true)]
async fn without_a_quorum_a_submission_fails_with_the_logs_error_and_changes_nothing() {
    let network = MemoryNetwork::new();
    let nodes = cluster(&network).await;
    network.isolate(node_id(1));
    network.isolate(node_id(2));
    let before = nodes[0].schema.snapshot().version;
    let error = nodes[0]
        .schema
        .submit(always(with_keyspace))
        .await
        .expect_err("no quorum");
    assert!(
        error
            .to_string()
            .starts_with("no quorum: 1 of 3 voters reachable"),
        "{error}"
    );
    assert_eq!(nodes[0].schema.snapshot().version, before);
    assert!(nodes[0].schema.snapshot().keyspace("ks").is_none());
}

#[tokio::test]
async fn an_entry_the_node_already_has_is_done() {
    let engine = Arc::new(TestEngine::default());
    let service =
        SchemaService::open_replicated(engine.clone(), vec![system_keyspace()]).expect("open");
    let mut events = service.subscribe();
    let mut schema = with_keyspace(&service.snapshot()).schema;
    schema.version = Uuid::from_u128(7);
    let entry = SchemaEntry {
        base_version: INITIAL_SCHEMA_VERSION,
        version: schema.version,
        change: encode_change(
            &schema,
            Some(&event(
                SchemaChangeKind::Created,
                SchemaChangeTarget::Keyspace,
                None,
            )),
        )
        .expect("encodes"),
    };
    let applier = service.applier();
    for _ in 0..2 {
        applier
            .apply_schema(entry.clone(), SchemaSource::Entry)
            .await
            .expect("applied");
    }
    assert_eq!(service.snapshot().version, schema.version);
    assert!(service.snapshot().keyspace("system_test").is_some());
    assert!(events.try_recv().is_ok());
    assert!(events.try_recv().is_err(), "announced once");
}

#[tokio::test(start_paused = true)]
async fn a_node_with_a_schema_of_its_own_makes_it_the_logs_first() {
    let network = MemoryNetwork::new();
    let engine = Arc::new(TestEngine::default());
    let version = {
        let alone = open(&engine);
        alone.submit(always(with_keyspace)).await.expect("keyspace");
        alone.snapshot().version
    };
    let node = start_node(&network, 0, engine).await;
    assert_eq!(node.schema.snapshot().version, version);
    node.metadata.bootstrap().await.expect("bootstrapped");
    node.schema
        .replicate_through(node.metadata.clone(), TIMEOUT)
        .await
        .expect("replicated");
    let state = node.metadata.state().borrow().clone();
    assert_eq!(state.schema_version(), version);
    node.schema
        .submit(|s: &Schema| Ok::<_, SchemaServiceError>(Some(with_table(s, "t", T1))))
        .await
        .expect("a change on the node's schema");
    assert!(node.schema.snapshot().table("ks", "t").is_some());
}

#[tokio::test(start_paused = true)]
async fn a_restarted_node_keeps_its_replicated_schema_and_goes_on() {
    let network = MemoryNetwork::new();
    let engine = Arc::new(TestEngine::default());
    let dir = tempfile::tempdir().expect("a temporary directory");
    let version = {
        let node = start_node_in(&network, 0, engine.clone(), dir.path()).await;
        node.metadata.bootstrap().await.expect("bootstrapped");
        node.schema
            .replicate_through(node.metadata.clone(), TIMEOUT)
            .await
            .expect("replicated");
        node.schema
            .submit(always(with_keyspace))
            .await
            .expect("keyspace");
        node.schema
            .submit(|s: &Schema| Ok::<_, SchemaServiceError>(Some(with_table(s, "t", T1))))
            .await
            .expect("table");
        network.unregister(node_id(0));
        node.metadata.shutdown().await.expect("shut down");
        node.schema.snapshot().version
    };
    // Storage kept the schema and the directory the log: the log's entries, replayed or not,
    // leave the schema as it was.
    let node = start_node_in(&network, 0, engine, dir.path()).await;
    assert_eq!(node.schema.snapshot().version, version);
    node.metadata.bootstrap().await.expect("a no-op");
    node.schema
        .replicate_through(node.metadata.clone(), TIMEOUT)
        .await
        .expect("replicated");
    assert_eq!(node.schema.snapshot().version, version);
    let change = SchemaChange {
        base_version: version,
        schema: with_table(&node.schema.snapshot(), "u", T2).schema,
        event: event(
            SchemaChangeKind::Created,
            SchemaChangeTarget::Table,
            Some("u"),
        ),
    };
    assert!(matches!(
        node.schema.apply(change).await,
        Err(SchemaServiceError::Internal(_))
    ));
    node.schema
        .submit(|s: &Schema| Ok::<_, SchemaServiceError>(Some(with_table(s, "u", T2))))
        .await
        .expect("a change after the restart");
    let schema = node.schema.snapshot();
    assert!(schema.table("ks", "t").is_some() && schema.table("ks", "u").is_some());
    assert!(has_storage(node.engine.as_ref(), T1) && has_storage(node.engine.as_ref(), T2));
}
