//! The query processor end to end on the in-memory engine: CQL text in, decoded rows out.
//! (The same paths through the real binary and drivers are covered by tests/e2e.)

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use coordinator::{Coordinator, Deadline, Mutation, ReadDigest, Replica, ReplicaFuture};
use mutation::{ReadCommand, ReadResponse, TableId};
use query::{
    BatchItem, BatchKind, BoundValue, BoundValues, NodeInfo, Outcome, QueryError, QueryOptions,
    QueryProcessor, QueryResult, ResultSet, Session, StatementKind,
};
use replica::LocalReplica;
use schema_service::SchemaService;
use storage::{Durability, MemoryEngine, StorageEngine};
use types::Value;

fn processor_on(engine: Arc<dyn StorageEngine>) -> QueryProcessor {
    let replica = Arc::new(LocalReplica::new(engine.clone(), Durability::None));
    processor_with(engine, replica)
}

/// A processor whose schema lives in `engine` and whose data operations go to `replica`.
fn processor_with(engine: Arc<dyn StorageEngine>, replica: Arc<dyn Replica>) -> QueryProcessor {
    let schema = SchemaService::open(
        engine,
        query::system_keyspaces().expect("the system keyspaces"),
    )
    .expect("open the schema");
    processor_over(Arc::new(schema), replica)
}

/// This node alone, owning three tokens.
fn one_node_ring() -> locator::TokenMetadata {
    let tokens = vec![-3_000_000_000_000_000_000, 0, 3_000_000_000_000_000_000];
    let local = locator::Endpoint {
        host_id: locator::HostId(uuid::Uuid::new_v4()),
        broadcast_address: IpAddr::V4(Ipv4Addr::LOCALHOST),
        native_address: IpAddr::V4(Ipv4Addr::LOCALHOST),
        native_port: 9042,
        location: locator::Snitch::Simple.local_location(),
        state: locator::NodeState::Normal,
    };
    locator::TokenMetadata::new(local, tokens).expect("valid tokens")
}

/// A processor over the schema service `schema`, its data operations going to `replica`.
fn processor_over(schema: Arc<SchemaService>, replica: Arc<dyn Replica>) -> QueryProcessor {
    processor_over_ring(schema, replica, one_node_ring())
}

/// A processor on `engine` that sees the ring `token_metadata`.
fn processor_on_ring(
    engine: Arc<dyn StorageEngine>,
    token_metadata: locator::TokenMetadata,
) -> QueryProcessor {
    let replica = Arc::new(LocalReplica::new(engine.clone(), Durability::None));
    let schema = SchemaService::open(
        engine,
        query::system_keyspaces().expect("the system keyspaces"),
    )
    .expect("open the schema");
    processor_over_ring(Arc::new(schema), replica, token_metadata)
}

fn processor_over_ring(
    schema: Arc<SchemaService>,
    replica: Arc<dyn Replica>,
    token_metadata: locator::TokenMetadata,
) -> QueryProcessor {
    let token_metadata = Arc::new(token_metadata);
    let node = NodeInfo::new("test", "5.0.2", token_metadata.clone());
    let coordinator = Arc::new(Coordinator::new(token_metadata, replica));
    QueryProcessor::open(node, schema, coordinator)
}

struct Harness {
    p: QueryProcessor,
    session: Session,
}

impl Harness {
    fn new() -> Harness {
        Harness {
            p: processor_on(Arc::new(MemoryEngine::new())),
            session: Session::default(),
        }
    }

    async fn run(&mut self, cql: &str) -> Result<QueryResult, QueryError> {
        Ok(self.outcome(cql).await?.result)
    }

    async fn outcome(&mut self, cql: &str) -> Result<Outcome, QueryError> {
        self.p
            .query(cql, QueryOptions::default(), &mut self.session)
            .await
    }

    /// The client warnings of a statement that must succeed.
    async fn warnings(&mut self, cql: &str) -> Vec<String> {
        match self.outcome(cql).await {
            Ok(o) => o.warnings,
            Err(e) => panic!("{cql}: {e:?}"),
        }
    }

    async fn ok(&mut self, cql: &str) -> QueryResult {
        match self.run(cql).await {
            Ok(r) => r,
            Err(e) => panic!("{cql}: {e:?}"),
        }
    }

    async fn rows(&mut self, cql: &str) -> Vec<Vec<Option<Value>>> {
        match self.ok(cql).await {
            QueryResult::Rows(rs) => decode(&rs),
            other => panic!("{cql}: expected rows, got {other:?}"),
        }
    }
}

fn decode(rs: &ResultSet) -> Vec<Vec<Option<Value>>> {
    rs.rows
        .iter()
        .map(|row| {
            row.iter()
                .zip(rs.columns.iter())
                .map(|(cell, spec)| {
                    cell.as_ref()
                        .map(|b| Value::decode(&spec.ty, b).expect("decodable"))
                })
                .collect()
        })
        .collect()
}

fn int(v: i32) -> Option<Value> {
    Some(Value::Int(v))
}

fn text(v: &str) -> Option<Value> {
    Some(Value::Text(v.to_string()))
}

async fn with_keyspace() -> Harness {
    let mut h = Harness::new();
    h.ok("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        .await;
    h.ok("USE ks").await;
    h
}

#[tokio::test]
async fn insert_and_select_one_partition_in_clustering_order() {
    let mut h = with_keyspace().await;
    h.ok("CREATE TABLE t (k int, c int, v text, PRIMARY KEY (k, c))")
        .await;
    for c in [3, 1, 2] {
        h.ok(&format!("INSERT INTO t (k, c, v) VALUES (1, {c}, 'v{c}')"))
            .await;
    }
    h.ok("INSERT INTO t (k, c, v) VALUES (2, 1, 'other')").await;
    assert_eq!(
        h.rows("SELECT c, v FROM t WHERE k = 1").await,
        vec![
            vec![int(1), text("v1")],
            vec![int(2), text("v2")],
            vec![int(3), text("v3")]
        ]
    );
    assert_eq!(
        h.rows("SELECT c FROM t WHERE k = 1 AND c > 1 AND c <= 3")
            .await,
        vec![vec![int(2)], vec![int(3)]]
    );
    assert_eq!(
        h.rows("SELECT c FROM t WHERE k = 1 ORDER BY c DESC").await,
        vec![vec![int(3)], vec![int(2)], vec![int(1)]]
    );
    assert_eq!(h.rows("SELECT * FROM t").await.len(), 4);
    assert_eq!(
        h.rows("SELECT count(*) FROM t").await,
        vec![vec![Some(Value::Bigint(4))]]
    );
}

#[tokio::test]
async fn clustering_order_desc_table() {
    let mut h = with_keyspace().await;
    h.ok("CREATE TABLE d (k int, c int, PRIMARY KEY (k, c)) WITH CLUSTERING ORDER BY (c DESC)")
        .await;
    for c in 1..=3 {
        h.ok(&format!("INSERT INTO d (k, c) VALUES (0, {c})")).await;
    }
    assert_eq!(
        h.rows("SELECT c FROM d WHERE k = 0").await,
        vec![vec![int(3)], vec![int(2)], vec![int(1)]]
    );
}

/// A read by partition key enforces `=`/`IN` on the key and the clustering slice it was given,
/// so its rows skip those checks; everything it cannot enforce is still checked on each row.
#[tokio::test]
async fn rows_match_the_key_restrictions_whether_the_read_or_a_check_applies_them() {
    let mut h = with_keyspace().await;
    h.ok(
        "CREATE TABLE s (k int, a int, b int, v int, PRIMARY KEY (k, a, b)) \
          WITH CLUSTERING ORDER BY (a DESC, b ASC)",
    )
    .await;
    for k in 0..2 {
        for a in 0..3 {
            for b in 0..3 {
                h.ok(&format!(
                    "INSERT INTO s (k, a, b, v) VALUES ({k}, {a}, {b}, {})",
                    k * 100 + a * 10 + b
                ))
                .await;
            }
        }
    }
    let v = |xs: &[i32]| xs.iter().map(|x| vec![int(*x)]).collect::<Vec<_>>();
    // A slice on the first clustering column (descending): the read's bounds.
    assert_eq!(
        h.rows("SELECT v FROM s WHERE k = 1 AND a >= 1 AND a < 2")
            .await,
        v(&[110, 111, 112])
    );
    // The same with the partition key selected, and counted.
    assert_eq!(
        h.rows("SELECT k, v FROM s WHERE k = 0 AND a > 1").await,
        vec![
            vec![int(0), int(20)],
            vec![int(0), int(21)],
            vec![int(0), int(22)]
        ]
    );
    assert_eq!(
        h.rows("SELECT count(*) FROM s WHERE k IN (0, 1) AND a = 2 AND b <= 1")
            .await,
        vec![vec![Some(Value::Bigint(4))]]
    );
    // `=` prefix, then a slice.
    assert_eq!(
        h.rows("SELECT v FROM s WHERE k = 1 AND a = 0 AND b > 0 AND b <= 2")
            .await,
        v(&[101, 102])
    );
    // IN on the first clustering column: the read has no bounds, the slice after it is checked
    // (and, as in Cassandra, needs no ALLOW FILTERING).
    assert_eq!(
        h.rows("SELECT v FROM s WHERE k = 0 AND a IN (0, 2) AND b >= 2")
            .await,
        v(&[22, 2])
    );
    // A slice on the second column with the first unrestricted: checked on each row.
    assert_eq!(
        h.rows("SELECT v FROM s WHERE k = 1 AND b = 1 ALLOW FILTERING")
            .await,
        v(&[121, 111, 101])
    );
    // No partition key: a scan, every restriction checked.
    assert_eq!(
        h.rows("SELECT v FROM s WHERE a = 1 AND b < 1 ALLOW FILTERING")
            .await
            .len(),
        2
    );
    // Virtual tables are not read by key: their restrictions are all checked.
    assert_eq!(
        h.rows(
            "SELECT table_name FROM system_schema.tables WHERE keyspace_name = 'ks' \
                AND table_name = 's'"
        )
        .await,
        vec![vec![text("s")]]
    );
}

#[tokio::test]
async fn update_and_deletes() {
    let mut h = with_keyspace().await;
    h.ok("CREATE TABLE t (k int, c int, a int, b int, PRIMARY KEY (k, c))")
        .await;
    h.ok("UPDATE t SET a = 1, b = 2 WHERE k = 0 AND c = 0")
        .await;
    h.ok("INSERT INTO t (k, c, a) VALUES (0, 1, 10)").await;
    assert_eq!(
        h.rows("SELECT c, a, b FROM t WHERE k = 0").await,
        vec![vec![int(0), int(1), int(2)], vec![int(1), int(10), None]]
    );
    h.ok("DELETE b FROM t WHERE k = 0 AND c = 0").await;
    assert_eq!(
        h.rows("SELECT c, a, b FROM t WHERE k = 0 AND c = 0").await,
        vec![vec![int(0), int(1), None]]
    );
    h.ok("DELETE FROM t WHERE k = 0 AND c = 1").await;
    assert_eq!(
        h.rows("SELECT c FROM t WHERE k = 0").await,
        vec![vec![int(0)]]
    );
    // An UPDATE creates no row marker: nulling its only column removes the row.
    h.ok("DELETE a FROM t WHERE k = 0 AND c = 0").await;
    assert!(h.rows("SELECT c FROM t WHERE k = 0").await.is_empty());
    h.ok("INSERT INTO t (k, c, a) VALUES (0, 5, 1)").await;
    h.ok("DELETE FROM t WHERE k = 0").await;
    assert!(h.rows("SELECT * FROM t WHERE k = 0").await.is_empty());
}

#[tokio::test]
async fn paging_resumes_where_it_stopped() {
    let mut h = with_keyspace().await;
    h.ok("CREATE TABLE t (k int, c int, PRIMARY KEY (k, c))")
        .await;
    for k in 0..7 {
        for c in 0..5 {
            h.ok(&format!("INSERT INTO t (k, c) VALUES ({k}, {c})"))
                .await;
        }
    }
    for query in ["SELECT k, c FROM t", "SELECT k, c FROM t WHERE k = 3"] {
        let expected = h.rows(query).await;
        let mut seen = Vec::new();
        let mut paging_state = None;
        loop {
            let options = QueryOptions {
                page_size: Some(3),
                paging_state: paging_state.take(),
                ..QueryOptions::default()
            };
            let QueryResult::Rows(rs) =
                h.p.query(query, options, &mut h.session)
                    .await
                    .unwrap()
                    .result
            else {
                panic!("rows expected")
            };
            assert!(rs.rows.len() <= 3);
            seen.extend(decode(&rs));
            match rs.paging_state {
                Some(ps) => paging_state = Some(ps.into()),
                None => break,
            }
        }
        assert_eq!(seen, expected, "{query}");
    }
}

#[tokio::test]
async fn prepared_statements_with_positional_and_named_values() {
    let mut h = with_keyspace().await;
    h.ok("CREATE TABLE t (k int, c int, v text, PRIMARY KEY (k, c))")
        .await;
    let insert =
        h.p.prepare("INSERT INTO t (k, c, v) VALUES (?, ?, ?)", None, &h.session)
            .unwrap();
    assert_eq!(insert.pk_indexes, vec![0]);
    assert_eq!(insert.bind_specs.len(), 3);
    let options = QueryOptions {
        values: BoundValues::Positional(vec![
            BoundValue::Value(7i32.to_be_bytes().to_vec().into()),
            BoundValue::Value(1i32.to_be_bytes().to_vec().into()),
            BoundValue::Value(b"hello".to_vec().into()),
        ]),
        ..QueryOptions::default()
    };
    h.p.execute(&insert.id, options, &mut h.session)
        .await
        .unwrap();
    let select =
        h.p.prepare(
            "SELECT v FROM t WHERE k = :key AND c = :c",
            None,
            &h.session,
        )
        .unwrap();
    let options = QueryOptions {
        values: BoundValues::Named(vec![
            (
                "c".into(),
                BoundValue::Value(1i32.to_be_bytes().to_vec().into()),
            ),
            (
                "key".into(),
                BoundValue::Value(7i32.to_be_bytes().to_vec().into()),
            ),
        ]),
        ..QueryOptions::default()
    };
    let QueryResult::Rows(rs) =
        h.p.execute(&select.id, options, &mut h.session)
            .await
            .unwrap()
            .result
    else {
        panic!("rows expected")
    };
    assert_eq!(decode(&rs), vec![vec![text("hello")]]);
    // A wrong-sized int is refused, not stored.
    let options = QueryOptions {
        values: BoundValues::Positional(vec![
            BoundValue::Value(vec![1, 2].into()),
            BoundValue::Value(1i32.to_be_bytes().to_vec().into()),
            BoundValue::Null,
        ]),
        ..QueryOptions::default()
    };
    assert!(matches!(
        h.p.execute(&insert.id, options, &mut h.session).await,
        Err(QueryError::Invalid(_))
    ));
    assert!(matches!(
        h.p.execute(b"nope", QueryOptions::default(), &mut h.session)
            .await,
        Err(QueryError::Unprepared { .. })
    ));
}

/// The rows of a prepared statement executed with one int value.
async fn execute_with_int(h: &mut Harness, id: &[u8], value: i32) -> ResultSet {
    let options = QueryOptions {
        values: BoundValues::Positional(vec![BoundValue::Value(
            value.to_be_bytes().to_vec().into(),
        )]),
        ..QueryOptions::default()
    };
    match h
        .p
        .execute(id, options, &mut h.session)
        .await
        .unwrap()
        .result
    {
        QueryResult::Rows(rs) => rs,
        other => panic!("rows expected, got {other:?}"),
    }
}

#[tokio::test]
async fn a_prepared_select_answers_the_same_across_executions_and_schema_changes() {
    let mut h = with_keyspace().await;
    h.ok("CREATE TABLE t (k int PRIMARY KEY, v text)").await;
    h.ok("INSERT INTO t (k, v) VALUES (1, 'one')").await;
    h.ok("INSERT INTO t (k, v) VALUES (2, 'two')").await;
    let select =
        h.p.prepare("SELECT * FROM t WHERE k = ?", None, &h.session)
            .unwrap();
    let first = execute_with_int(&mut h, &select.id, 1).await;
    let names: Vec<&str> = first.columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["k", "v"]);
    assert_eq!(decode(&first), vec![vec![int(1), text("one")]]);
    // The second execution uses the selection compiled by the first.
    let second = execute_with_int(&mut h, &select.id, 2).await;
    assert_eq!(decode(&second), vec![vec![int(2), text("two")]]);
    // A schema change that keeps the statement prepared gives a new schema version: the
    // selection is compiled again, with the same result.
    h.ok("CREATE TABLE other (k int PRIMARY KEY)").await;
    let third = execute_with_int(&mut h, &select.id, 1).await;
    assert_eq!(decode(&third), vec![vec![int(1), text("one")]]);
    // A column selected twice, and alongside a function of it, is in every place it is asked.
    assert_eq!(
        h.rows("SELECT v, k, v, blob_as_text(text_as_blob(v)) FROM t WHERE k = 2")
            .await,
        vec![vec![text("two"), int(2), text("two"), text("two")]]
    );
}

/// `(text, int)` bound values, in that order.
fn text_and_int(v: &str, k: i32) -> BoundValues {
    BoundValues::Positional(vec![
        BoundValue::Value(v.as_bytes().to_vec().into()),
        BoundValue::Value(k.to_be_bytes().to_vec().into()),
    ])
}

#[tokio::test]
async fn a_prepared_insert_writes_the_same_across_executions_and_schema_changes() {
    let mut h = with_keyspace().await;
    h.ok("CREATE TABLE t (k int PRIMARY KEY, v text)").await;
    // Columns listed out of the table's order.
    let insert =
        h.p.prepare("INSERT INTO t (v, k) VALUES (?, ?)", None, &h.session)
            .unwrap();
    let execute = |v: &str, k: i32| QueryOptions {
        values: text_and_int(v, k),
        ..QueryOptions::default()
    };
    h.p.execute(&insert.id, execute("one", 1), &mut h.session)
        .await
        .unwrap();
    // Another table's DDL is a new schema version: the insert is planned again.
    h.ok("CREATE TABLE other (k int PRIMARY KEY)").await;
    h.p.execute(&insert.id, execute("two", 2), &mut h.session)
        .await
        .unwrap();
    // A column that sorts before `v` moves `v` one place on in the table's columns. As in
    // Cassandra, altering the table drops its prepared statements; prepared again, the
    // statement is planned for the new columns.
    h.ok("ALTER TABLE t ADD a int").await;
    assert!(matches!(
        h.p.execute(&insert.id, execute("x", 9), &mut h.session)
            .await,
        Err(QueryError::Unprepared { .. })
    ));
    let insert =
        h.p.prepare("INSERT INTO t (v, k) VALUES (?, ?)", None, &h.session)
            .unwrap();
    h.p.execute(&insert.id, execute("three", 3), &mut h.session)
        .await
        .unwrap();
    // In a batch, the prepared statement brings its plan along.
    h.p.batch(
        BatchKind::Logged,
        vec![BatchItem::Prepared(
            insert.id.clone(),
            text_and_int("four", 4),
        )],
        QueryOptions::default(),
        &mut h.session,
    )
    .await
    .unwrap();
    let mut rows = h.rows("SELECT k, a, v FROM t").await;
    rows.sort_by_key(|r| match r[0] {
        Some(Value::Int(k)) => k,
        _ => panic!("int key expected: {r:?}"),
    });
    assert_eq!(
        rows,
        vec![
            vec![int(1), None, text("one")],
            vec![int(2), None, text("two")],
            vec![int(3), None, text("three")],
            vec![int(4), None, text("four")],
        ]
    );
}

#[tokio::test]
async fn prepared_statements_report_their_kind() {
    let mut h = with_keyspace().await;
    h.ok("CREATE TABLE t (k int PRIMARY KEY, v int)").await;
    let cases = [
        ("SELECT v FROM t WHERE k = ?", StatementKind::UserRead),
        ("SELECT * FROM ks.t", StatementKind::UserRead),
        (
            "INSERT INTO t (k, v) VALUES (?, ?)",
            StatementKind::UserWrite,
        ),
        (
            "UPDATE ks.t SET v = 1 WHERE k = 2",
            StatementKind::UserWrite,
        ),
        ("DELETE FROM t WHERE k = ?", StatementKind::UserWrite),
        (
            "BEGIN BATCH INSERT INTO t (k, v) VALUES (1, 1); DELETE FROM ks.t WHERE k = 2; \
             APPLY BATCH",
            StatementKind::UserWrite,
        ),
        (
            "INSERT INTO t (k, v) VALUES (?, ?) IF NOT EXISTS",
            StatementKind::Other,
        ),
        (
            "UPDATE t SET v = 1 WHERE k = 2 IF v = 0",
            StatementKind::Other,
        ),
        ("DELETE FROM t WHERE k = 2 IF EXISTS", StatementKind::Other),
        (
            "BEGIN BATCH INSERT INTO t (k, v) VALUES (1, 1); \
             UPDATE t SET v = 1 WHERE k = 1 IF v = 0; APPLY BATCH",
            StatementKind::Other,
        ),
        ("SELECT * FROM system.local", StatementKind::Other),
        ("SELECT * FROM system_schema.tables", StatementKind::Other),
        ("USE ks", StatementKind::Other),
        ("CREATE TABLE t2 (k int PRIMARY KEY)", StatementKind::Other),
    ];
    for (cql, kind) in cases {
        let prepared = match h.p.prepare(cql, None, &h.session) {
            Ok(p) => p,
            Err(e) => panic!("{cql}: {e:?}"),
        };
        assert_eq!(prepared.kind(), kind, "{cql}");
    }
}

#[tokio::test]
async fn errors_have_the_right_kind() {
    let mut h = with_keyspace().await;
    h.ok("CREATE TABLE t (k int PRIMARY KEY, v int)").await;
    assert!(matches!(
        h.run("SELEC * FROM t").await,
        Err(QueryError::Syntax(_))
    ));
    assert!(matches!(
        h.run("SELECT * FROM nope").await,
        Err(QueryError::Invalid(_))
    ));
    assert!(matches!(
        h.run("INSERT INTO t (k, v) VALUES (1, 'x')").await,
        Err(QueryError::Invalid(_))
    ));
    assert!(matches!(
        h.run("CREATE TABLE t (k int PRIMARY KEY)").await,
        Err(QueryError::AlreadyExists { .. })
    ));
    h.ok("CREATE TABLE IF NOT EXISTS t (k int PRIMARY KEY)")
        .await;
    assert!(matches!(
        h.run("UPDATE t SET v = 1 WHERE k = 1 IF v = 2").await,
        Err(QueryError::Invalid(_))
    ));
}

#[tokio::test]
async fn schema_survives_reopen_and_system_tables_answer() {
    let engine: Arc<dyn StorageEngine> = Arc::new(MemoryEngine::new());
    {
        let p = processor_on(engine.clone());
        let mut s = Session::default();
        for q in [
            "CREATE KEYSPACE ks WITH replication = {'class': 'NetworkTopologyStrategy', 'datacenter1': 1}",
            "CREATE TYPE ks.addr (street text, zip int)",
            "CREATE TABLE ks.t (k int, c int, s int STATIC, a frozen<addr>, PRIMARY KEY (k, c))",
            "INSERT INTO ks.t (k, c, s) VALUES (1, 2, 3)",
        ] {
            p.query(q, QueryOptions::default(), &mut s).await.unwrap();
        }
    }
    let mut h = Harness {
        p: processor_on(engine),
        session: Session::default(),
    };
    assert_eq!(
        h.rows("SELECT k, c, s FROM ks.t").await,
        vec![vec![int(1), int(2), int(3)]]
    );
    let tables = h
        .rows("SELECT table_name FROM system_schema.tables WHERE keyspace_name = 'ks'")
        .await;
    assert_eq!(tables, vec![vec![text("t")]]);
    let local = h
        .rows("SELECT key, cluster_name, release_version FROM system.local")
        .await;
    assert_eq!(
        local,
        vec![vec![text("local"), text("test"), text("5.0.2")]]
    );
    let cols = h
        .rows("SELECT column_name, kind FROM system_schema.columns WHERE keyspace_name = 'ks' AND table_name = 't'")
        .await;
    assert_eq!(cols.len(), 4);
    assert!(h.rows("SELECT * FROM system.peers").await.is_empty());
}

/// `system.local` shows this node of the ring and `system.peers(_v2)` every other one, from the
/// locator's topology.
#[tokio::test]
async fn system_local_and_peers_come_from_the_ring() {
    let endpoint = |node: u8, host: u128, dc: &str, rack: &str| locator::Endpoint {
        host_id: locator::HostId(uuid::Uuid::from_u128(host)),
        broadcast_address: IpAddr::V4(Ipv4Addr::new(127, 0, 0, node)),
        native_address: IpAddr::V4(Ipv4Addr::new(127, 0, 1, node)),
        native_port: 9000 + u16::from(node),
        location: locator::Location {
            datacenter: dc.to_string(),
            rack: rack.to_string(),
        },
        state: locator::NodeState::Normal,
    };
    let ring = locator::TokenMetadata::new(endpoint(1, 11, "dc1", "r1"), vec![-5, 10])
        .and_then(|r| r.with_normal_tokens(endpoint(3, 33, "dc2", "r3"), vec![30]))
        .and_then(|r| r.with_normal_tokens(endpoint(2, 22, "dc1", "r2"), vec![20, -20]))
        .expect("ring");
    let mut h = Harness {
        p: processor_on_ring(Arc::new(MemoryEngine::new()), ring),
        session: Session::default(),
    };
    let set = |items: &[&str]| {
        Some(Value::Set(
            items.iter().map(|t| Value::Text(t.to_string())).collect(),
        ))
    };
    let inet = |a, b, c, d| Some(Value::Inet(IpAddr::V4(Ipv4Addr::new(a, b, c, d))));
    let host = |h: u128| Some(Value::Uuid(uuid::Uuid::from_u128(h)));
    assert_eq!(
        h.rows("SELECT host_id, data_center, rack, tokens, broadcast_address, rpc_address, rpc_port FROM system.local")
            .await,
        vec![vec![host(11), text("dc1"), text("r1"), set(&["-5", "10"]), inet(127, 0, 0, 1), inet(127, 0, 1, 1), int(9001)]]
    );
    assert_eq!(
        h.rows("SELECT peer, host_id, data_center, rack, rpc_address, tokens FROM system.peers")
            .await,
        vec![
            vec![
                inet(127, 0, 0, 2),
                host(22),
                text("dc1"),
                text("r2"),
                inet(127, 0, 1, 2),
                set(&["-20", "20"])
            ],
            vec![
                inet(127, 0, 0, 3),
                host(33),
                text("dc2"),
                text("r3"),
                inet(127, 0, 1, 3),
                set(&["30"])
            ],
        ]
    );
    assert_eq!(
        h.rows("SELECT peer, peer_port, native_address, native_port FROM system.peers_v2")
            .await,
        vec![
            vec![inet(127, 0, 0, 2), int(7000), inet(127, 0, 1, 2), int(9002)],
            vec![inet(127, 0, 0, 3), int(7000), inet(127, 0, 1, 3), int(9003)],
        ]
    );
}

/// Cassandra's warning for a replication factor above the node count counts the ring's nodes.
#[tokio::test]
async fn replication_warnings_count_the_nodes_of_the_ring() {
    let endpoint = |node: u8| locator::Endpoint {
        host_id: locator::HostId(uuid::Uuid::from_u128(node.into())),
        broadcast_address: IpAddr::V4(Ipv4Addr::new(127, 0, 0, node)),
        native_address: IpAddr::V4(Ipv4Addr::new(127, 0, 0, node)),
        native_port: 9042,
        location: locator::Snitch::Simple.local_location(),
        state: locator::NodeState::Normal,
    };
    let ring = locator::TokenMetadata::new(endpoint(1), vec![1])
        .and_then(|r| r.with_normal_tokens(endpoint(2), vec![2]))
        .expect("ring");
    let mut h = Harness {
        p: processor_on_ring(Arc::new(MemoryEngine::new()), ring),
        session: Session::default(),
    };
    let simple = |rf| {
        format!("CREATE KEYSPACE ks{rf} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': {rf}}}")
    };
    assert!(h.warnings(&simple(2)).await.is_empty());
    assert_eq!(
        h.warnings(&simple(3)).await,
        ["Your replication factor 3 for keyspace ks3 is higher than the number of nodes 2"]
    );
    assert_eq!(
        h.warnings("CREATE KEYSPACE n3 WITH replication = {'class': 'NetworkTopologyStrategy', 'datacenter1': 3}")
            .await,
        ["Your replication factor 3 for keyspace n3 is higher than the number of nodes 2 for datacenter datacenter1"]
    );
}

/// Every statement the six drivers of tests/drivers send at connect and after DDL (see
/// tests/drivers/README.md) answers with rows.
#[tokio::test]
async fn driver_metadata_queries_answer() {
    let mut h = with_keyspace().await;
    h.ok("CREATE TABLE t (k int, c int, v text, PRIMARY KEY (k, c))")
        .await;
    h.ok("CREATE TYPE u (a int, b text)").await;
    let mut queries = vec![
        "SELECT * FROM system.peers_v2".to_string(),
        "SELECT * FROM system.local WHERE key='local'".to_string(),
        "select * from system.local where key = 'local'".to_string(),
        "SELECT cluster_name FROM system.local".to_string(),
        "SELECT * FROM system.local".to_string(),
        "SELECT * FROM system.peers".to_string(),
        "SELECT host_id, peer, peer_port, native_address, native_port, schema_version FROM system.peers_v2".to_string(),
        "SELECT schema_version FROM system.local WHERE key='local'".to_string(),
        "SELECT host_id, rpc_address, data_center, rack, tokens FROM system.peers".to_string(),
        "SELECT host_id, rpc_address, data_center, rack, tokens, cluster_name FROM system.local WHERE key='local'".to_string(),
        "SELECT keyspace_name, replication, durable_writes FROM system_schema.keyspaces".to_string(),
        "SELECT keyspace_name, table_name FROM system_schema.tables".to_string(),
        "SELECT keyspace_name, table_name, column_name, kind, position, type FROM system_schema.columns".to_string(),
        "SELECT keyspace_name, type_name, field_names, field_types FROM system_schema.types".to_string(),
        "SELECT keyspace_name, view_name, base_table_name FROM system_schema.views".to_string(),
        "SELECT * FROM system_schema.tables WHERE keyspace_name = 'ks' AND table_name = 't'".to_string(),
        "SELECT * FROM system_schema.columns WHERE keyspace_name = 'ks' AND table_name = 't'".to_string(),
        "SELECT * FROM system_schema.keyspaces WHERE keyspace_name = 'ks'".to_string(),
        "SELECT * FROM system_schema.types WHERE keyspace_name = 'ks'".to_string(),
        "SELECT\n\tkeyspace_name,\n\ttable_name\nFROM system_schema.tables\nWHERE keyspace_name = 'ks'".to_string(),
    ];
    for t in [
        "keyspaces",
        "tables",
        "columns",
        "types",
        "functions",
        "aggregates",
        "indexes",
        "triggers",
        "views",
        "dropped_columns",
    ] {
        queries.push(format!("SELECT * FROM system_schema.{t}"));
    }
    for t in ["keyspaces", "tables", "columns"] {
        queries.push(format!("SELECT * FROM system_virtual_schema.{t}"));
    }
    for q in &queries {
        match h.run(q).await {
            Ok(QueryResult::Rows(_)) => {}
            other => panic!("{q}: {other:?}"),
        }
    }
    let local = h
        .rows("SELECT tokens, data_center, partitioner FROM system.local WHERE key='local'")
        .await;
    let Some(Value::Set(tokens)) = &local[0][0] else {
        panic!("tokens: {:?}", local[0][0])
    };
    assert_eq!(tokens.len(), 3);
    assert_eq!(local[0][1], text("datacenter1"));
    assert_eq!(
        local[0][2],
        text("org.apache.cassandra.dht.Murmur3Partitioner")
    );
    let types = h
        .rows("SELECT field_names, field_types FROM system_schema.types WHERE keyspace_name = 'ks'")
        .await;
    assert_eq!(
        types,
        vec![vec![
            Some(Value::List(vec![
                Value::Text("a".into()),
                Value::Text("b".into())
            ])),
            Some(Value::List(vec![
                Value::Text("int".into()),
                Value::Text("text".into())
            ])),
        ]]
    );
}

#[tokio::test]
async fn alter_type_reaches_tables_and_types_that_use_it() {
    let mut h = with_keyspace().await;
    h.ok("CREATE TYPE inner_t (a int)").await;
    h.ok("CREATE TYPE outer_t (i frozen<inner_t>)").await;
    h.ok("CREATE TABLE t (k int PRIMARY KEY, o frozen<outer_t>, i frozen<inner_t>)")
        .await;
    h.ok("INSERT INTO t (k, i, o) VALUES (1, {a: 1}, {i: {a: 2}})")
        .await;
    h.ok("ALTER TYPE inner_t ADD b text").await;
    h.ok("ALTER TYPE inner_t RENAME a TO a2").await;
    // The new field is usable through the table and through the enclosing type.
    h.ok("INSERT INTO t (k, i, o) VALUES (2, {a2: 3, b: 'x'}, {i: {a2: 4, b: 'y'}})")
        .await;
    let rows = h.rows("SELECT k, i FROM t WHERE k IN (1, 2)").await;
    assert_eq!(
        rows,
        vec![
            // Stored before the field existed: it reads back as null.
            vec![int(1), Some(Value::Udt(vec![Some(Value::Int(1)), None]))],
            vec![
                int(2),
                Some(Value::Udt(vec![
                    Some(Value::Int(3)),
                    Some(Value::Text("x".into()))
                ]))
            ],
        ]
    );
    // A field added to a type in a primary key would change how keys serialise: refused, in
    // Cassandra's words for a partition key.
    h.ok("CREATE TYPE key_t (a int)").await;
    h.ok("CREATE TABLE keyed (k frozen<key_t> PRIMARY KEY, v int)")
        .await;
    match h.run("ALTER TYPE key_t ADD b int").await {
        Err(QueryError::Invalid(m)) => assert!(m.contains("used in partition key"), "{m}"),
        other => panic!("expected Invalid, got {other:?}"),
    }
    h.ok("CREATE TYPE ck_t (a int)").await;
    h.ok("CREATE TABLE clustered (k int, c frozen<ck_t>, PRIMARY KEY (k, c))")
        .await;
    match h.run("ALTER TYPE ck_t ADD b int").await {
        Err(QueryError::Invalid(m)) => assert!(m.contains("primary key"), "{m}"),
        other => panic!("expected Invalid, got {other:?}"),
    }
    h.ok("ALTER TYPE key_t RENAME a TO a2").await;
}

#[tokio::test]
async fn ddl_errors_are_the_kinds_cassandra_5_uses() {
    let mut h = with_keyspace().await;
    for (cql, what) in [
        ("DROP KEYSPACE no_such_ks", "missing keyspace"),
        ("CREATE TABLE nopk (k int, v int)", "no primary key"),
    ] {
        assert!(
            matches!(h.run(cql).await, Err(QueryError::Invalid(_))),
            "{what}"
        );
    }
    h.ok("CREATE TYPE ty (a int)").await;
    assert!(matches!(
        h.run("CREATE TYPE ty (a int)").await,
        Err(QueryError::Invalid(_))
    ));
}

#[tokio::test]
async fn types_too_wide_for_the_protocol_are_refused() {
    let mut h = with_keyspace().await;
    let fields: Vec<String> = (0..70_000).map(|i| format!("f{i} int")).collect();
    match h
        .run(&format!("CREATE TYPE wide ({})", fields.join(", ")))
        .await
    {
        Err(QueryError::Invalid(m)) => assert!(m.contains("at most 65535 fields"), "{m}"),
        other => panic!("expected Invalid, got {other:?}"),
    }
    let items = vec!["int"; 70_000].join(", ");
    match h
        .run(&format!(
            "CREATE TABLE wide_t (k int PRIMARY KEY, t tuple<{items}>)"
        ))
        .await
    {
        Err(QueryError::Invalid(m)) => assert!(m.contains("at most 65535 components"), "{m}"),
        other => panic!("expected Invalid, got {other:?}"),
    }
}

#[tokio::test]
async fn aggregates_over_many_partitions_warn_as_cassandra_does() {
    let mut h = with_keyspace().await;
    h.ok("CREATE TABLE t (k int, c int, v int, PRIMARY KEY (k, c))")
        .await;
    let none: Vec<String> = Vec::new();
    let no_key = vec!["Aggregation query used without partition key".to_string()];
    let in_keys =
        vec!["Aggregation query used on multiple partition keys (IN restriction)".to_string()];
    assert_eq!(h.warnings("SELECT count(*) FROM t").await, no_key);
    assert_eq!(h.warnings("SELECT k FROM t GROUP BY k").await, no_key);
    assert_eq!(h.warnings("SELECT JSON max(v) FROM t").await, no_key);
    assert_eq!(
        h.warnings("SELECT count(*) FROM t WHERE v = 1 ALLOW FILTERING")
            .await,
        no_key
    );
    assert_eq!(
        h.warnings("SELECT count(*) FROM t WHERE k IN (1, 2)").await,
        in_keys
    );
    assert_eq!(h.warnings("SELECT count(*) FROM t WHERE k = 1").await, none);
    assert_eq!(
        h.warnings("SELECT count(*) FROM t WHERE k IN (1)").await,
        none
    );
    assert_eq!(
        h.warnings("SELECT count(*) FROM t WHERE token(k) > 0")
            .await,
        none
    );
    assert_eq!(h.warnings("SELECT k, v FROM t").await, none);
}

#[tokio::test]
async fn batches_warn_on_size_and_on_unlogged_partitions() {
    let mut h = with_keyspace().await;
    h.ok("CREATE TABLE t (k int, c int, v text, PRIMARY KEY (k, c))")
        .await;
    let insert = |k: i32, v: &str| format!("INSERT INTO t (k, c, v) VALUES ({k}, 0, '{v}');");
    let batch = |kind: &str, inserts: Vec<String>| {
        format!("BEGIN {kind}BATCH {} APPLY BATCH", inserts.concat())
    };
    let ten: Vec<String> = (0..10).map(|k| insert(k, "x")).collect();
    assert!(h.warnings(&batch("UNLOGGED ", ten)).await.is_empty());
    let eleven: Vec<String> = (0..11).map(|k| insert(k, "x")).collect();
    assert_eq!(
        h.warnings(&batch("UNLOGGED ", eleven.clone())).await,
        vec![format!(
            "Unlogged batch covering 11 partitions detected against table [{}.t]. You should \
             use a logged batch for atomicity, or asynchronous writes for performance.",
            "ks"
        )]
    );
    assert!(h.warnings(&batch("", eleven)).await.is_empty());
    // Cassandra 5.0.9 measured these: a 5000-byte text in one of two single-row partitions of
    // (int, int, text) is a batch of 5148 bytes.
    let big = "x".repeat(5000);
    assert_eq!(
        h.warnings(&batch("", vec![insert(1, &big), insert(2, "")]))
            .await,
        vec![format!(
            "Batch for [{}.t] is of size 5148, exceeding specified threshold of 5120 by 28.",
            "ks"
        )]
    );
    // One partition: no size warning however big.
    assert!(h
        .warnings(&batch("", vec![insert(1, &"x".repeat(6000))]))
        .await
        .is_empty());
    let huge = "x".repeat(60_000);
    assert!(matches!(
        h.run(&batch("", vec![insert(1, &huge), insert(2, "")])).await,
        Err(QueryError::Invalid(m)) if m == "Batch too large"
    ));
}

#[tokio::test]
async fn in_restrictions_read_each_partition_once_in_key_order() {
    let mut h = with_keyspace().await;
    h.ok("CREATE TABLE t (a int, b text, v int, PRIMARY KEY ((a, b)))")
        .await;
    for (a, b) in [(1, "x"), (1, "y"), (2, "x"), (-5, "y")] {
        h.ok(&format!("INSERT INTO t (a, b, v) VALUES ({a}, '{b}', {a})"))
            .await;
    }
    // Values in any order, repeated: each partition once, by key values (a, then b).
    let rows = h
        .rows("SELECT a, b FROM t WHERE a IN (2, 1, 2, -5, 7) AND b IN ('y', 'x', 'y')")
        .await;
    assert_eq!(
        rows,
        [
            vec![int(-5), text("y")],
            vec![int(1), text("x")],
            vec![int(1), text("y")],
            vec![int(2), text("x")],
        ]
    );
    // A token() restriction beside the key leaves keys out without filtering.
    let tokens = h
        .rows("SELECT token(a, b) FROM t WHERE a IN (1, 2) AND b IN ('x', 'y')")
        .await;
    assert_eq!(tokens.len(), 3);
    let Some(Some(Value::Bigint(middle))) = tokens
        .iter()
        .map(|r| r[0].clone())
        .collect::<Vec<_>>()
        .into_iter()
        .nth(1)
    else {
        panic!("{tokens:?}")
    };
    let rows = h
        .rows(&format!(
            "SELECT a, b FROM t WHERE a IN (1, 2) AND b IN ('x', 'y') AND token(a, b) = {middle}"
        ))
        .await;
    assert_eq!(rows.len(), 1);
    // Paging through the combinations returns each once.
    let mut seen = Vec::new();
    let mut paging_state = None;
    loop {
        let options = QueryOptions {
            page_size: Some(1),
            paging_state: paging_state.take(),
            ..QueryOptions::default()
        };
        let QueryResult::Rows(rs) =
            h.p.query(
                "SELECT a, b FROM t WHERE a IN (2, 1) AND b IN ('x', 'y')",
                options,
                &mut h.session,
            )
            .await
            .expect("page")
            .result
        else {
            panic!("rows")
        };
        seen.extend(decode(&rs));
        match rs.paging_state {
            Some(s) => paging_state = Some(s.into()),
            None => break,
        }
    }
    assert_eq!(seen.len(), 3);
}

#[tokio::test]
async fn a_read_past_its_deadline_answers_a_read_timeout() {
    let engine = Arc::new(MemoryEngine::new());
    let p = processor_on(engine).with_request_timeouts(query::RequestTimeouts {
        read: std::time::Duration::ZERO,
        ..query::RequestTimeouts::default()
    });
    let mut h = Harness {
        p,
        session: Session::default(),
    };
    h.ok("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        .await;
    h.ok("CREATE TABLE ks.t (k int PRIMARY KEY, v int)").await;
    let e = h
        .run("SELECT * FROM ks.t WHERE k IN (1, 2)")
        .await
        .expect_err("no time to read");
    assert!(
        matches!(
            e,
            QueryError::ReadTimeout {
                received: 0,
                block_for: 1,
                data_present: false,
                ..
            }
        ),
        "{e:?}"
    );
    // A scan has its own timeout.
    h.ok("SELECT * FROM ks.t").await;
}

#[tokio::test]
async fn the_prepared_cache_keeps_the_most_recently_used_within_its_bytes() {
    let engine = Arc::new(MemoryEngine::new());
    // 64 KiB: about ten statements of 2 KiB text (4 KiB and more each in the cache).
    let p = processor_on(engine).with_prepared_statements_cache_size(64 * 1024);
    let mut h = Harness {
        p,
        session: Session::default(),
    };
    h.ok("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        .await;
    h.ok("CREATE TABLE ks.t (k int PRIMARY KEY, v text)").await;
    let statement = |i: usize| {
        format!(
            "INSERT INTO ks.t (k, v) VALUES (?, '{i}{}')",
            "x".repeat(2048)
        )
    };
    let first =
        h.p.prepare(&statement(0), None, &h.session)
            .expect("prepare");
    let mut ids = vec![first.id.clone()];
    for i in 1..40 {
        // The first statement is used all along: it stays.
        assert!(h.p.prepared(&first.id).is_some(), "evicted at {i}");
        ids.push(
            h.p.prepare(&statement(i), None, &h.session)
                .expect("prepare")
                .id
                .clone(),
        );
    }
    assert!(
        h.p.prepared(&ids[1]).is_none(),
        "the least recently used goes"
    );
    assert!(h.p.prepared(&ids[39]).is_some());
    let cached = ids.iter().filter(|id| h.p.prepared(id).is_some()).count();
    assert!((5..=16).contains(&cached), "{cached} statements cached");
    // A statement larger than the whole cache is refused, in Cassandra's words.
    let e =
        h.p.prepare(
            &format!(
                "INSERT INTO ks.t (k, v) VALUES (?, '{}')",
                "y".repeat(40_000)
            ),
            None,
            &h.session,
        )
        .expect_err("too large");
    assert!(
        e.to_string().starts_with("Prepared statement of size 81") &&
            e.to_string().contains(" bytes is larger than allowed maximum of 0 MB: INSERT INTO ks.t (k, v) VALUES (?, 'yyy"),
        "{e}"
    );
}

#[tokio::test]
async fn truncate_empties_a_table_through_the_coordinator() {
    let mut h = with_keyspace().await;
    h.ok("CREATE TABLE t (k int, c int, v int, PRIMARY KEY (k, c))")
        .await;
    for i in 0..10 {
        h.ok(&format!(
            "INSERT INTO t (k, c, v) VALUES ({}, {i}, {i})",
            i % 3
        ))
        .await;
    }
    assert!(matches!(h.ok("TRUNCATE t").await, QueryResult::Void));
    assert!(h.rows("SELECT * FROM t").await.is_empty());
    h.ok("INSERT INTO t (k, c, v) VALUES (1, 1, 1)").await;
    assert_eq!(h.rows("SELECT v FROM ks.t").await, vec![vec![int(1)]]);
    h.ok("TRUNCATE TABLE ks.t").await;
    assert!(h.rows("SELECT * FROM t").await.is_empty());
    let e = h.run("TRUNCATE no_such_table").await.expect_err("missing");
    assert_eq!(e.to_string(), "table no_such_table does not exist");
    let e = h.run("TRUNCATE system.local").await.expect_err("virtual");
    assert!(matches!(e, QueryError::Invalid(_)), "{e:?}");
}

/// The local replica, except that it never answers a TRUNCATE (a node that died meanwhile).
struct TruncateNeverAnswers(LocalReplica);

impl Replica for TruncateNeverAnswers {
    fn apply_mutation(&self, mutation: Mutation, deadline: Deadline) -> ReplicaFuture<()> {
        self.0.apply_mutation(mutation, deadline)
    }
    fn read(&self, command: ReadCommand, deadline: Deadline) -> ReplicaFuture<ReadResponse> {
        self.0.read(command, deadline)
    }
    fn digest(&self, command: ReadCommand, deadline: Deadline) -> ReplicaFuture<ReadDigest> {
        self.0.digest(command, deadline)
    }
    fn truncate(&self, _: TableId, _: Deadline) -> ReplicaFuture<()> {
        Box::pin(std::future::pending())
    }
}

#[tokio::test]
async fn a_truncate_past_truncate_request_timeout_is_a_truncate_error() {
    let engine: Arc<dyn StorageEngine> = Arc::new(MemoryEngine::new());
    let replica = Arc::new(TruncateNeverAnswers(LocalReplica::new(
        engine.clone(),
        Durability::None,
    )));
    let p = processor_with(engine, replica).with_request_timeouts(query::RequestTimeouts {
        truncate: std::time::Duration::from_millis(20),
        ..query::RequestTimeouts::default()
    });
    let mut h = Harness {
        p,
        session: Session::default(),
    };
    h.ok("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        .await;
    h.ok("CREATE TABLE ks.t (k int PRIMARY KEY, v int)").await;
    let e = h.run("TRUNCATE ks.t").await.expect_err("no answer");
    // Cassandra's TruncateException: code TRUNCATE_ERROR, in its words.
    assert!(matches!(e, QueryError::Truncate(_)), "{e:?}");
    assert_eq!(
        e.to_string(),
        "Error during truncate: Truncate timed out - received only 0 responses"
    );
}

/// DDL through the processor is applied by the schema service: its snapshot changes and its
/// subscribers hear of it, in order; a no-op (IF NOT EXISTS) and a refusal announce nothing.
#[tokio::test]
async fn ddl_is_applied_and_announced_by_the_schema_service() {
    use query::{SchemaChangeEvent, SchemaChangeKind, SchemaChangeTarget};
    let engine: Arc<dyn StorageEngine> = Arc::new(MemoryEngine::new());
    let schema = Arc::new(
        SchemaService::open(
            engine.clone(),
            query::system_keyspaces().expect("the system keyspaces"),
        )
        .expect("open the schema"),
    );
    let mut events = schema.subscribe();
    let mut h = Harness {
        p: processor_over(
            schema.clone(),
            Arc::new(LocalReplica::new(engine, Durability::None)),
        ),
        session: Session::default(),
    };
    let before = schema.snapshot();
    let created = h
        .ok("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        .await;
    let keyspace_event = SchemaChangeEvent {
        kind: SchemaChangeKind::Created,
        target: SchemaChangeTarget::Keyspace,
        keyspace: "ks".to_string(),
        name: None,
    };
    assert!(
        matches!(&created, QueryResult::SchemaChange(e) if *e == keyspace_event),
        "{created:?}"
    );
    h.ok("CREATE TABLE ks.t (k int PRIMARY KEY)").await;
    h.ok("CREATE TABLE IF NOT EXISTS ks.t (k int PRIMARY KEY)")
        .await;
    h.run("CREATE TABLE ks.t (k int PRIMARY KEY)")
        .await
        .expect_err("exists");
    h.ok("TRUNCATE ks.t").await;
    assert_eq!(events.try_recv().expect("keyspace"), keyspace_event);
    assert_eq!(
        events.try_recv().expect("table"),
        SchemaChangeEvent {
            kind: SchemaChangeKind::Created,
            target: SchemaChangeTarget::Table,
            keyspace: "ks".to_string(),
            name: Some("t".to_string()),
        }
    );
    assert!(events.try_recv().is_err(), "nothing else was announced");
    let after = schema.snapshot();
    assert!(after.table("ks", "t").is_some());
    assert!(before.keyspace("ks").is_none(), "a snapshot never changes");
    assert_ne!(before.version, after.version);
    // system.local reports the service's version.
    let local = h.rows("SELECT schema_version FROM system.local").await;
    assert_eq!(local, vec![vec![Some(Value::Uuid(after.version))]]);
}

/// Two CREATE TABLEs of one table at once: one creates it, the other is refused with
/// AlreadyExists (or, with IF NOT EXISTS, does nothing), as Cassandra on one node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_creates_of_one_table_create_it_once() {
    let p = Arc::new(processor_on(Arc::new(MemoryEngine::new())));
    let mut session = Session::default();
    p.query(
        "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
        QueryOptions::default(),
        &mut session,
    )
    .await
    .expect("keyspace");
    for round in 0..20 {
        let create = |if_not_exists: bool| {
            let p = p.clone();
            tokio::spawn(async move {
                let guard = if if_not_exists { "IF NOT EXISTS " } else { "" };
                p.query(
                    &format!("CREATE TABLE {guard}ks.t{round} (k int PRIMARY KEY, v int)"),
                    QueryOptions::default(),
                    &mut Session::default(),
                )
                .await
                .map(|o| o.result)
            })
        };
        let (a, b, c) = tokio::join!(create(false), create(false), create(true));
        let results = [a.expect("task"), b.expect("task"), c.expect("task")];
        let changes = results
            .iter()
            .filter(|r| matches!(r, Ok(QueryResult::SchemaChange(_))))
            .count();
        let refusals = results
            .iter()
            .filter(|r| matches!(r, Err(QueryError::AlreadyExists { .. })))
            .count();
        let no_ops = results
            .iter()
            .filter(|r| matches!(r, Ok(QueryResult::Void)))
            .count();
        assert_eq!(changes, 1, "{results:?}");
        assert_eq!(changes + refusals + no_ops, 3, "{results:?}");
        assert!(refusals >= 1, "{results:?}");
    }
}
