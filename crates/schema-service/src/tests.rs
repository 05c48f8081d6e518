//! The service on the in-memory engine, wrapped to fail or hold its metadata writes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use mutation::{
    ClusteringSlice, PartitionKey, PartitionPage, PartitionUpdate, ScanPage, ScanStart,
};
use schema::{ClusteringOrder, Replication, TableMetadata, TableOptions};
use storage::{Durability, MemoryEngine, TableStats};
use types::CqlType;

use super::*;

/// `MemoryEngine`, whose metadata writes can be made to fail, or to wait until released.
#[derive(Default)]
struct TestEngine {
    inner: MemoryEngine,
    fail_put_meta: AtomicBool,
    fail_drop_table: AtomicBool,
    /// When set, `put_meta` reports that it started, then waits for a message to go on.
    hold_put_meta: Mutex<Option<(mpsc::Sender<()>, mpsc::Receiver<()>)>>,
}

impl StorageEngine for TestEngine {
    fn create_table(&self, table: TableId) -> Result<(), StorageError> {
        self.inner.create_table(table)
    }
    fn drop_table(&self, table: TableId) -> Result<(), StorageError> {
        if self.fail_drop_table.load(Ordering::SeqCst) {
            return Err(StorageError::Engine {
                operation: "drop_table",
                detail: "permission denied".to_string(),
            });
        }
        self.inner.drop_table(table)
    }
    fn truncate_table(&self, table: TableId) -> Result<(), StorageError> {
        self.inner.truncate_table(table)
    }
    fn apply_batch(&self, updates: &[PartitionUpdate], d: Durability) -> Result<(), StorageError> {
        self.inner.apply_batch(updates, d)
    }
    fn read_partition(
        &self,
        table: TableId,
        key: &PartitionKey,
        slice: &ClusteringSlice,
        max_rows: usize,
        resume: Option<&[u8]>,
    ) -> Result<PartitionPage, StorageError> {
        self.inner
            .read_partition(table, key, slice, max_rows, resume)
    }
    fn scan(
        &self,
        table: TableId,
        start: ScanStart,
        end_token: Option<i64>,
        max_rows: usize,
    ) -> Result<ScanPage, StorageError> {
        self.inner.scan(table, start, end_token, max_rows)
    }
    fn put_meta(&self, key: &[u8], value: &[u8]) -> Result<(), StorageError> {
        if let Some((started, go_on)) = self
            .hold_put_meta
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            started.send(()).expect("the test waits for the write");
            go_on.recv().expect("the test releases the write");
        }
        if self.fail_put_meta.load(Ordering::SeqCst) {
            return Err(StorageError::Engine {
                operation: "put_meta",
                detail: "disk full".to_string(),
            });
        }
        self.inner.put_meta(key, value)
    }
    fn delete_meta(&self, key: &[u8]) -> Result<(), StorageError> {
        self.inner.delete_meta(key)
    }
    fn get_meta(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        self.inner.get_meta(key)
    }
    fn scan_meta(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>, StorageError> {
        self.inner.scan_meta(prefix)
    }
    fn flush(&self, table: Option<TableId>) -> Result<(), StorageError> {
        self.inner.flush(table)
    }
    fn compact(&self, table: Option<TableId>) -> Result<(), StorageError> {
        self.inner.compact(table)
    }
    fn set_gc_grace(&self, table: TableId, gc_grace_seconds: i32) -> Result<(), StorageError> {
        self.inner.set_gc_grace(table, gc_grace_seconds)
    }
    fn sync_commit_log(&self) -> Result<(), StorageError> {
        self.inner.sync_commit_log()
    }
    fn maintain_commit_log(&self) -> Result<(), StorageError> {
        self.inner.maintain_commit_log()
    }
    fn table_stats(&self, table: TableId) -> Result<TableStats, StorageError> {
        self.inner.table_stats(table)
    }
    fn metrics(&self) -> Result<Vec<(&'static str, u64)>, StorageError> {
        self.inner.metrics()
    }
}

fn has_storage(engine: &dyn StorageEngine, table: TableId) -> bool {
    match engine.table_stats(table) {
        Ok(_) => true,
        Err(StorageError::UnknownTable(_)) => false,
        Err(e) => panic!("{e}"),
    }
}

fn system_keyspace() -> KeyspaceMetadata {
    KeyspaceMetadata {
        name: "system_test".to_string(),
        durable_writes: true,
        replication: Replication::local(),
        tables: BTreeMap::new(),
        types: BTreeMap::new(),
        virtual_keyspace: true,
    }
}

fn open(engine: &Arc<TestEngine>) -> SchemaService {
    SchemaService::open(engine.clone(), vec![system_keyspace()]).expect("open")
}

fn event(
    kind: SchemaChangeKind,
    target: SchemaChangeTarget,
    name: Option<&str>,
) -> SchemaChangeEvent {
    SchemaChangeEvent {
        kind,
        target,
        keyspace: "ks".to_string(),
        name: name.map(str::to_string),
    }
}

/// `schema` with keyspace `ks` added.
fn with_keyspace(schema: &Schema) -> SchemaUpdate {
    let options = BTreeMap::from([
        ("class".to_string(), "SimpleStrategy".to_string()),
        ("replication_factor".to_string(), "1".to_string()),
    ]);
    let mut schema = schema.clone();
    schema.keyspaces.insert(
        "ks".to_string(),
        Arc::new(KeyspaceMetadata {
            name: "ks".to_string(),
            durable_writes: true,
            replication: Replication::from_options(&options, "dc1", "ks", None).expect("valid"),
            tables: BTreeMap::new(),
            types: BTreeMap::new(),
            virtual_keyspace: false,
        }),
    );
    SchemaUpdate {
        schema,
        event: event(
            SchemaChangeKind::Created,
            SchemaChangeTarget::Keyspace,
            None,
        ),
    }
}

/// `schema` with table `ks.<name>` added (`ks` exists), of id `id`.
fn with_table(schema: &Schema, name: &str, id: TableId) -> SchemaUpdate {
    let table = TableMetadata::new(
        "ks",
        name,
        id,
        vec![("k".to_string(), CqlType::Int, false)],
        &["k".to_string()],
        &[] as &[(String, ClusteringOrder)],
        TableOptions {
            gc_grace_seconds: 60,
            ..TableOptions::default()
        },
    )
    .expect("valid table");
    let mut schema = schema.clone();
    let mut ks = (**schema.keyspace("ks").expect("ks exists")).clone();
    ks.tables.insert(name.to_string(), Arc::new(table));
    schema.keyspaces.insert("ks".to_string(), Arc::new(ks));
    SchemaUpdate {
        schema,
        event: event(
            SchemaChangeKind::Created,
            SchemaChangeTarget::Table,
            Some(name),
        ),
    }
}

/// `schema` without table `ks.<name>`.
fn without_table(schema: &Schema, name: &str) -> SchemaUpdate {
    let mut schema = schema.clone();
    let mut ks = (**schema.keyspace("ks").expect("ks exists")).clone();
    ks.tables.remove(name);
    schema.keyspaces.insert("ks".to_string(), Arc::new(ks));
    SchemaUpdate {
        schema,
        event: event(
            SchemaChangeKind::Dropped,
            SchemaChangeTarget::Table,
            Some(name),
        ),
    }
}

/// A decision that always makes `update` from the schema it is shown.
fn always(
    update: fn(&Schema) -> SchemaUpdate,
) -> impl FnMut(&Schema) -> Result<Option<SchemaUpdate>, SchemaServiceError> {
    move |schema| Ok(Some(update(schema)))
}

const T1: TableId = TableId::from_u128(1);
const T2: TableId = TableId::from_u128(2);

#[tokio::test]
async fn a_new_node_starts_with_only_the_system_keyspaces() {
    let engine = Arc::new(TestEngine::default());
    let service = open(&engine);
    let schema = service.snapshot();
    assert_eq!(
        schema.keyspaces.keys().collect::<Vec<_>>(),
        vec!["system_test"]
    );
    // Nothing is persisted until a change.
    assert_eq!(engine.get_meta(SCHEMA_META_KEY).expect("read"), None);
}

#[tokio::test]
async fn changes_survive_a_restart_with_their_version_and_storage() {
    let engine = Arc::new(TestEngine::default());
    let version = {
        let service = open(&engine);
        service
            .submit(always(with_keyspace))
            .await
            .expect("keyspace");
        service
            .submit(|s: &Schema| Ok::<_, SchemaServiceError>(Some(with_table(s, "t", T1))))
            .await
            .expect("table");
        assert!(has_storage(engine.as_ref(), T1));
        service.snapshot().version
    };
    // A restart on a fresh engine over the same metadata: storage is prepared for the
    // persisted tables (RocksDB keeps them; here the load recreates them).
    let restarted = Arc::new(TestEngine::default());
    let persisted = engine
        .get_meta(SCHEMA_META_KEY)
        .expect("read")
        .expect("persisted");
    restarted
        .inner
        .put_meta(SCHEMA_META_KEY, &persisted)
        .expect("copy");
    let service = open(&restarted);
    let schema = service.snapshot();
    assert_eq!(schema.version, version);
    assert!(schema.table("ks", "t").is_some());
    assert!(schema.keyspace("system_test").is_some());
    assert!(has_storage(restarted.as_ref(), T1));
    // The system keyspace is the node's, not the persisted schema's.
    let persisted = Schema::from_persisted_json(&persisted).expect("decodes");
    assert!(persisted.keyspace("system_test").is_none());
}

#[tokio::test]
async fn a_change_applies_its_storage_actions_and_a_new_version() {
    let engine = Arc::new(TestEngine::default());
    let service = open(&engine);
    service
        .submit(always(with_keyspace))
        .await
        .expect("keyspace");
    let before = service.snapshot();
    service
        .submit(|s: &Schema| Ok::<_, SchemaServiceError>(Some(with_table(s, "t", T1))))
        .await
        .expect("create");
    let after = service.snapshot();
    assert_ne!(before.version, after.version);
    // The snapshot taken before is untouched by the change.
    assert!(before.table("ks", "t").is_none());
    assert!(has_storage(engine.as_ref(), T1));
    service
        .submit(|s: &Schema| Ok::<_, SchemaServiceError>(Some(without_table(s, "t"))))
        .await
        .expect("drop");
    assert!(!has_storage(engine.as_ref(), T1));
    assert!(service.snapshot().table("ks", "t").is_none());
}

#[tokio::test]
async fn a_decision_of_no_change_changes_nothing_and_announces_nothing() {
    let engine = Arc::new(TestEngine::default());
    let service = open(&engine);
    let mut events = service.subscribe();
    let before = service.snapshot();
    let answer = service
        .submit(|_: &Schema| Ok::<_, SchemaServiceError>(None))
        .await
        .expect("no-op");
    assert_eq!(answer, None);
    assert!(Arc::ptr_eq(&before, &service.snapshot()));
    assert!(matches!(
        events.try_recv(),
        Err(broadcast::error::TryRecvError::Empty)
    ));
}

#[tokio::test]
async fn every_applied_change_is_announced_once_in_order() {
    let engine = Arc::new(TestEngine::default());
    let service = open(&engine);
    let mut events = service.subscribe();
    let answered = service
        .submit(always(with_keyspace))
        .await
        .expect("keyspace");
    service
        .submit(|s: &Schema| Ok::<_, SchemaServiceError>(Some(with_table(s, "t", T1))))
        .await
        .expect("table");
    let created_keyspace = event(
        SchemaChangeKind::Created,
        SchemaChangeTarget::Keyspace,
        None,
    );
    assert_eq!(answered, Some(created_keyspace.clone()));
    assert_eq!(events.try_recv().expect("first"), created_keyspace);
    assert_eq!(
        events.try_recv().expect("second"),
        event(
            SchemaChangeKind::Created,
            SchemaChangeTarget::Table,
            Some("t")
        )
    );
    assert!(matches!(
        events.try_recv(),
        Err(broadcast::error::TryRecvError::Empty)
    ));
}

#[tokio::test]
async fn a_failed_persist_leaves_the_schema_as_it_was() {
    let engine = Arc::new(TestEngine::default());
    let service = open(&engine);
    service
        .submit(always(with_keyspace))
        .await
        .expect("keyspace");
    let before = service.snapshot();
    let persisted_before = engine.get_meta(SCHEMA_META_KEY).expect("read");
    let mut events = service.subscribe();
    engine.fail_put_meta.store(true, Ordering::SeqCst);
    let e = service
        .submit(|s: &Schema| Ok::<_, SchemaServiceError>(Some(with_table(s, "t", T1))))
        .await
        .expect_err("the disk is full");
    assert!(matches!(e, SchemaServiceError::Persist(_)), "{e:?}");
    assert_eq!(
        e.to_string(),
        "could not persist the schema change: storage engine error during put_meta: disk full"
    );
    assert!(Arc::ptr_eq(&before, &service.snapshot()));
    assert_eq!(
        engine.get_meta(SCHEMA_META_KEY).expect("read"),
        persisted_before
    );
    assert!(matches!(
        events.try_recv(),
        Err(broadcast::error::TryRecvError::Empty)
    ));
    // Once storage is back the same change goes through.
    engine.fail_put_meta.store(false, Ordering::SeqCst);
    service
        .submit(|s: &Schema| Ok::<_, SchemaServiceError>(Some(with_table(s, "t", T1))))
        .await
        .expect("table");
    assert!(service.snapshot().table("ks", "t").is_some());
}

/// Two CREATE TABLEs of one name at once: one creates it, the other is decided on the schema
/// the first made and finds it, as under `query`'s former DDL lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_submissions_each_decide_on_the_schema_the_previous_one_made() {
    let engine = Arc::new(TestEngine::default());
    let service = Arc::new(open(&engine));
    service
        .submit(always(with_keyspace))
        .await
        .expect("keyspace");
    let create = |id: TableId| {
        let service = service.clone();
        tokio::spawn(async move {
            service
                .submit(|s: &Schema| {
                    if s.table("ks", "t").is_some() {
                        return Err("Table ks.t already exists");
                    }
                    Ok(Some(with_table(s, "t", id)))
                })
                .await
        })
    };
    for _ in 0..20 {
        let (a, b) = tokio::join!(create(T1), create(T2));
        let (a, b) = (a.expect("task"), b.expect("task"));
        assert!(
            a.is_ok() != b.is_ok(),
            "exactly one creates the table: {a:?} {b:?}"
        );
        let created = if a.is_ok() { T1 } else { T2 };
        assert_eq!(
            service.snapshot().table("ks", "t").expect("created").id,
            created
        );
        assert!(has_storage(engine.as_ref(), created));
        service
            .submit(|s: &Schema| Ok::<_, &str>(Some(without_table(s, "t"))))
            .await
            .expect("drop");
    }
}

impl From<SchemaServiceError> for &str {
    fn from(_: SchemaServiceError) -> Self {
        "the service failed"
    }
}

#[tokio::test]
async fn a_change_decided_on_another_version_is_refused_and_changes_nothing() {
    let engine = Arc::new(TestEngine::default());
    let service = open(&engine);
    let stale = service.snapshot();
    service
        .submit(always(with_keyspace))
        .await
        .expect("keyspace");
    let before = service.snapshot();
    let mut schema = with_keyspace(&stale).schema;
    schema.version = Uuid::new_v4();
    let e = service
        .apply(SchemaChange {
            base_version: stale.version,
            schema,
            event: event(
                SchemaChangeKind::Created,
                SchemaChangeTarget::Keyspace,
                None,
            ),
        })
        .await
        .expect_err("stale");
    assert!(matches!(e, SchemaServiceError::Conflict { .. }), "{e:?}");
    assert!(Arc::ptr_eq(&before, &service.snapshot()));
}

/// A submitter that stops waiting (its client went away) while its change is being applied:
/// the change still applies, and the next submission, decided on the schema before it, is
/// decided again on the schema after it instead of undoing it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_whose_submitter_gave_up_still_applies_and_the_next_builds_on_it() {
    let engine = Arc::new(TestEngine::default());
    let service = Arc::new(open(&engine));
    service
        .submit(always(with_keyspace))
        .await
        .expect("keyspace");
    let (started_tx, started) = mpsc::channel();
    let (go_on, go_on_rx) = mpsc::channel();
    *engine.hold_put_meta.lock().expect("lock") = Some((started_tx, go_on_rx));
    let first = {
        let service = service.clone();
        tokio::spawn(async move {
            service
                .submit(|s: &Schema| Ok::<_, SchemaServiceError>(Some(with_table(s, "a", T1))))
                .await
        })
    };
    tokio::task::spawn_blocking(move || started.recv().expect("the first change persists"))
        .await
        .expect("waited");
    first.abort();
    assert!(first.await.expect_err("aborted").is_cancelled());
    // Decided while the first change is still being applied: it sees no table `a`.
    let (decided_tx, decided) = mpsc::channel();
    let mut shown = Vec::new();
    let second = {
        let service = service.clone();
        tokio::spawn(async move {
            let answer = service
                .submit(|s: &Schema| {
                    shown.push(s.table("ks", "a").is_some());
                    let _ = decided_tx.send(());
                    Ok::<_, SchemaServiceError>(Some(with_table(s, "b", T2)))
                })
                .await;
            (answer, shown)
        })
    };
    tokio::task::spawn_blocking(move || decided.recv().expect("the second change is decided"))
        .await
        .expect("waited");
    go_on.send(()).expect("release the first change");
    let (answer, shown) = second.await.expect("task");
    answer.expect("second");
    assert_eq!(shown, vec![false, true]);
    let schema = service.snapshot();
    assert!(schema.table("ks", "a").is_some());
    assert!(schema.table("ks", "b").is_some());
}

#[tokio::test]
async fn an_unreadable_persisted_schema_stops_the_start() {
    let engine = Arc::new(TestEngine::default());
    engine
        .inner
        .put_meta(SCHEMA_META_KEY, b"{not json")
        .expect("write");
    let e = SchemaService::open(engine, vec![system_keyspace()])
        .err()
        .expect("corrupt");
    assert!(matches!(e, SchemaServiceError::Corrupt(_)), "{e:?}");
}

/// Once a change is persisted it is in force: storage failing to drop a dropped table's data
/// afterwards is logged, not answered (the change cannot be undone, and the next start loads
/// the schema without the table).
#[tokio::test]
async fn a_failed_drop_after_the_schema_is_persisted_keeps_the_change() {
    let engine = Arc::new(TestEngine::default());
    let service = open(&engine);
    service
        .submit(always(with_keyspace))
        .await
        .expect("keyspace");
    service
        .submit(|s: &Schema| Ok::<_, SchemaServiceError>(Some(with_table(s, "t", T1))))
        .await
        .expect("table");
    let mut events = service.subscribe();
    engine.fail_drop_table.store(true, Ordering::SeqCst);
    service
        .submit(|s: &Schema| Ok::<_, SchemaServiceError>(Some(without_table(s, "t"))))
        .await
        .expect("dropped from the schema");
    assert!(service.snapshot().table("ks", "t").is_none());
    assert_eq!(
        events.try_recv().expect("announced"),
        event(
            SchemaChangeKind::Dropped,
            SchemaChangeTarget::Table,
            Some("t")
        )
    );
    assert!(has_storage(engine.as_ref(), T1), "left behind");
    let persisted = engine
        .get_meta(SCHEMA_META_KEY)
        .expect("read")
        .expect("persisted");
    let persisted = Schema::from_persisted_json(&persisted).expect("decodes");
    assert!(persisted.table("ks", "t").is_none());
}

mod replicated;
