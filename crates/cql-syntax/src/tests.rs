//! Statement-level tests: a broad table of valid CQL (Cassandra docs, driver system queries),
//! AST shape checks, errors, and a deterministic mutation test that nothing panics.

use crate::*;

fn parse(text: &str) -> Statement {
    match parse_statement(text) {
        Ok(s) => s,
        Err(e) => panic!("{text}\n  => {e}"),
    }
}

fn err(text: &str) -> String {
    match parse_statement(text) {
        Ok(s) => panic!("{text} should not parse, got {s:?}"),
        Err(e) => e.to_string(),
    }
}

fn id(s: &str) -> Identifier {
    Identifier::new(s)
}

fn qn(ks: Option<&str>, name: &str) -> QualifiedName {
    QualifiedName {
        keyspace: ks.map(id),
        name: id(name),
    }
}

fn int(s: &str) -> Term {
    Term::Constant(Constant::Integer(s.into()))
}

fn string(s: &str) -> Term {
    Term::Constant(Constant::String(s.into()))
}

fn marker(index: u32) -> Term {
    Term::BindMarker(BindMarker { index, name: None })
}

fn select(text: &str) -> Select {
    match parse(text) {
        Statement::Select(s) => s,
        other => panic!("not a select: {other:?}"),
    }
}

/// Every statement here is valid for Cassandra 5.0 (or ScyllaDB's USING TIMEOUT extension).
const VALID: &[&str] = &[
    // Driver and cqlsh system queries.
    "SELECT * FROM system.local",
    "SELECT * FROM system.local WHERE key='local'",
    "SELECT * FROM system.peers_v2",
    "SELECT peer, data_center, host_id, preferred_ip, rack, release_version, rpc_address, schema_version, tokens FROM system.peers",
    "SELECT * FROM system_schema.keyspaces",
    "SELECT keyspace_name, table_name FROM system_schema.tables WHERE keyspace_name = 'ks' AND table_name = 't'",
    "SELECT * FROM system_schema.columns WHERE keyspace_name = ?",
    "SELECT schema_version FROM system.local WHERE key='local'",
    "SELECT cluster_name, release_version FROM system.local",
    "SELECT * FROM system.local WHERE key='local' USING TIMEOUT 30000ms",
    "select * from system_virtual_schema.keyspaces",
    "SELECT * FROM system.peers_v2 WHERE peer = ? AND peer_port = ?",
    "SELECT * FROM system_schema.tables",
    "SELECT * FROM system_schema.types",
    "SELECT * FROM system_schema.indexes",
    "SELECT * FROM system_schema.functions",
    "SELECT * FROM system_schema.aggregates",
    "SELECT * FROM system_schema.views",
    "SELECT * FROM system_schema.triggers",
    "SELECT * FROM system.size_estimates WHERE keyspace_name = 'ks'",
    "SELECT \"columnName\" FROM \"MyKs\".\"MyTable\"",
    // SELECT forms.
    "SELECT JSON a, b FROM t",
    "SELECT json FROM t",
    "SELECT DISTINCT pk FROM t",
    "SELECT distinct FROM t",
    "SELECT count(*) FROM t",
    "SELECT COUNT(*) AS n FROM t WHERE pk = 1",
    "SELECT count(1) FROM t",
    "SELECT key, type, ttl, writetime, count, filtering, keys, values, json FROM t",
    "SELECT WRITETIME(v), TTL(v), MAXWRITETIME(v) FROM t",
    "SELECT writetime(m['k']) FROM t",
    "SELECT a AS x, ks.f(b, 1) FROM t",
    "SELECT CAST(v AS text) FROM t",
    "SELECT toJson(v), token(pk) FROM t",
    "SELECT udt.field, m['k'], s[1..3], s[..3], s[1..] FROM t",
    "SELECT a + b * 2, -a, (a - b) % 3 FROM t",
    "SELECT (int) ?, 'const', 1.5, NULL FROM t",
    "SELECT (a), (a) + 1, (frozen<list<int>>) ?, (ks.udt) {f: 1} FROM t",
    "SELECT [a, b], {a, b}, {a: b}, (a, b) FROM t",
    "SELECT * FROM t WHERE pk = 1 AND ck > 2 AND ck <= 10 ORDER BY ck DESC LIMIT 10",
    "SELECT * FROM t WHERE pk IN (1, 2, 3)",
    "SELECT * FROM t WHERE pk IN ?",
    "SELECT * FROM t WHERE pk IN :keys",
    "SELECT * FROM t WHERE pk IN ()",
    "SELECT * FROM t WHERE (c1, c2) > (1, 2)",
    "SELECT * FROM t WHERE (c1, c2) IN ((1, 2), (3, 4))",
    "SELECT * FROM t WHERE (c1, c2) IN (?, ?)",
    "SELECT * FROM t WHERE (c1, c2) = ?",
    "SELECT * FROM t WHERE (c1) >= (1)",
    "SELECT * FROM t WHERE token(pk) > token(?) AND token(pk) <= 100",
    "SELECT * FROM t WHERE token(a, b) > -9223372036854775808",
    "SELECT * FROM t WHERE m CONTAINS 1 AND m CONTAINS KEY 'k' ALLOW FILTERING",
    "SELECT * FROM t WHERE m['k'] = 1 ALLOW FILTERING",
    "SELECT * FROM t WHERE v LIKE 'ab%'",
    "SELECT * FROM t WHERE v != 3 ALLOW FILTERING",
    "SELECT * FROM t WHERE (pk = 1)",
    "SELECT * FROM t WHERE expr(my_index, 'query')",
    "SELECT * FROM t WHERE pk = 1 GROUP BY pk, ck",
    "SELECT * FROM t GROUP BY pk, floor(ts, 1h)",
    "SELECT * FROM t WHERE pk = 1 PER PARTITION LIMIT 2 LIMIT ?",
    "SELECT * FROM t ORDER BY v ANN OF [0.1, 0.2, 0.3] LIMIT 5",
    "SELECT * FROM t WHERE pk = :p AND ck = :c",
    "SELECT * FROM t WHERE a = 1 USING TIMEOUT ?",
    "SELECT * FROM t WHERE d = 1h30m AND u = 550e8400-e29b-41d4-a716-446655440000",
    "SELECT * FROM t WHERE b = 0xCAFE AND f = 1e10 AND g = -1.5E-3 AND h = NaN AND i = -Infinity",
    "SELECT * FROM t WHERE x = P1DT2H AND y = P1W AND z = -1d",
    "SELECT * FROM t WHERE s = $$it's$$",
    "SELECT * FROM t WHERE c = now() AND d = currentTimestamp() AND e = ks.fn(1, 'a')",
    "SELECT * FROM t WHERE v = (text) ? AND w = CAST(1 AS bigint)",
    "SELECT * FROM t WHERE v = 1 + 2 * 3 - -4 / 5 % 6",
    // INSERT.
    "INSERT INTO t (pk, v) VALUES (1, 'a')",
    "INSERT INTO ks.t (pk, v) VALUES (?, ?) IF NOT EXISTS",
    "INSERT INTO t (pk, v) VALUES (1, 2) USING TTL 86400 AND TIMESTAMP 123456789",
    "INSERT INTO t (pk, v) VALUES (:pk, :v) USING TIMESTAMP ? AND TTL ?",
    "INSERT INTO t (pk, v) VALUES (1, 2) USING TIMEOUT 5s AND TTL 10",
    "INSERT INTO t (pk, l, s, m, tup, u) VALUES (1, [1, 2], {'a', 'b'}, {'k': 1}, (1, 'x'), {street: 'x', \"Zip\": 1})",
    "INSERT INTO t (pk, e) VALUES (1, {})",
    "INSERT INTO t (pk, fm) VALUES (1, {1: [1, 2], 2: []})",
    "INSERT INTO t JSON '{\"pk\": 1}'",
    "INSERT INTO t JSON ? DEFAULT UNSET",
    "INSERT INTO t JSON '{}' DEFAULT NULL IF NOT EXISTS USING TTL 1",
    "INSERT INTO t (\"\") VALUES (1)",
    // UPDATE.
    "UPDATE t SET v = 1 WHERE pk = 1",
    "UPDATE ks.t USING TTL 10 AND TIMESTAMP 1 SET v = 'x', w = null WHERE pk = 1 AND ck = 2",
    "UPDATE t SET c = c + 1 WHERE pk = 1",
    "UPDATE t SET c = c - 1 WHERE pk = 1",
    "UPDATE t SET c = c -1 WHERE pk = 1",
    "UPDATE t SET c += 5, d -= 2 WHERE pk = 1",
    "UPDATE t SET l = [0] + l, s = s + {'x'}, m = m + {'k': 'v'} WHERE pk = 1",
    "UPDATE t SET m['k'] = 'v', l[0] = 1, u.street = 'x' WHERE pk = 1",
    "UPDATE t SET v = 1 WHERE pk = 1 IF EXISTS",
    "UPDATE t SET v = 1 WHERE pk = 1 IF v = 0 AND w IN (1, 2) AND m['k'] = 'x' AND u.f > 1",
    "UPDATE t SET v = 1 WHERE pk = 1 IF s CONTAINS 1 AND m CONTAINS KEY 'a'",
    "UPDATE t USING TIMEOUT 1s SET v = ? WHERE pk = ?",
    "UPDATE t SET ts = toTimestamp(now()) WHERE pk IN (1, 2)",
    // DELETE.
    "DELETE FROM t WHERE pk = 1",
    "DELETE v, m['k'], l[0], u.f FROM ks.t WHERE pk = 1",
    "DELETE FROM t USING TIMESTAMP 123 WHERE pk = 1 AND ck > 3",
    "DELETE FROM t WHERE pk = 1 IF EXISTS",
    "DELETE v FROM t WHERE pk = 1 IF v = 3",
    "DELETE FROM t USING TIMESTAMP ? AND TIMEOUT 10ms WHERE pk = ?",
    // BATCH.
    "BEGIN BATCH INSERT INTO t (a) VALUES (1); UPDATE t SET v = 2 WHERE a = 1; DELETE FROM t WHERE a = 3; APPLY BATCH",
    "BEGIN UNLOGGED BATCH USING TIMESTAMP 1 INSERT INTO t (a) VALUES (?) INSERT INTO t (a) VALUES (?) APPLY BATCH;",
    "BEGIN COUNTER BATCH UPDATE c SET n = n + 1 WHERE k = 1; APPLY BATCH",
    "BEGIN BATCH APPLY BATCH",
    // USE / TRUNCATE.
    "USE ks",
    "USE \"MyKeyspace\";",
    "TRUNCATE t",
    "TRUNCATE TABLE ks.t",
    "TRUNCATE COLUMNFAMILY t",
    // Keyspaces.
    "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
    "CREATE KEYSPACE IF NOT EXISTS ks WITH replication = {'class': 'NetworkTopologyStrategy', 'dc1': 3, 'dc2': 2} AND durable_writes = false",
    "CREATE SCHEMA ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': '1'}",
    "ALTER KEYSPACE ks WITH durable_writes = true",
    "ALTER KEYSPACE IF EXISTS ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 2}",
    "DROP KEYSPACE ks",
    "DROP KEYSPACE IF EXISTS ks",
    // Tables.
    "CREATE TABLE t (pk int PRIMARY KEY, v text)",
    "CREATE TABLE IF NOT EXISTS ks.t (a int, b int, c int, d text, PRIMARY KEY ((a, b), c)) WITH CLUSTERING ORDER BY (c DESC) AND comment = 'x'",
    "CREATE TABLE t (a int, b int, s int static, PRIMARY KEY (a, b)) WITH compaction = {'class': 'LeveledCompactionStrategy'} AND gc_grace_seconds = 0",
    "CREATE TABLE t (a int, b int, PRIMARY KEY (a, b)) WITH COMPACT STORAGE",
    "CREATE TABLE t (a int PRIMARY KEY, b int,)",
    "CREATE TABLE t (k text PRIMARY KEY, l list<int>, s set<text>, m map<text, frozen<list<int>>>, tu tuple<int, text>, u frozen<address>, v vector<float, 3>, d duration, c 'org.apache.cassandra.db.marshal.BytesType')",
    "CREATE TABLE t (k int PRIMARY KEY, v text MASKED WITH DEFAULT, w text MASKED WITH mask_inner(1, null))",
    "CREATE TABLE t (key int PRIMARY KEY, type text, ttl int, values int, keys int, json int, count int, filtering int)",
    "CREATE TABLE \"Quoted\" (\"Pk\" int PRIMARY KEY)",
    "CREATE COLUMNFAMILY t (k int PRIMARY KEY) WITH caching = {'keys': 'ALL', 'rows_per_partition': 'NONE'} AND speculative_retry = '99PERCENTILE'",
    "ALTER TABLE t ADD v int",
    "ALTER TABLE t ADD IF NOT EXISTS (v int, w text static)",
    "ALTER TABLE IF EXISTS ks.t DROP v",
    "ALTER TABLE t DROP (v, w) USING TIMESTAMP 1234",
    "ALTER TABLE t DROP IF EXISTS v",
    "ALTER TABLE t RENAME a TO b AND c TO d",
    "ALTER TABLE t RENAME IF EXISTS a TO b",
    "ALTER TABLE t ALTER v TYPE blob",
    "ALTER TABLE t ALTER v MASKED WITH DEFAULT",
    "ALTER TABLE t ALTER IF EXISTS v DROP MASKED",
    "ALTER TABLE t WITH comment = 'x' AND default_time_to_live = 10",
    "ALTER TABLE t DROP COMPACT STORAGE",
    "DROP TABLE t",
    "DROP TABLE IF EXISTS ks.t",
    "DROP COLUMNFAMILY t",
    // Types.
    "CREATE TYPE address (street text, city text, zip int)",
    "CREATE TYPE IF NOT EXISTS ks.phone (number text, tags set<text>,)",
    "ALTER TYPE address ADD country text",
    "ALTER TYPE IF EXISTS ks.address ADD IF NOT EXISTS country text",
    "ALTER TYPE address RENAME street TO road AND city TO town",
    "ALTER TYPE address ALTER zip TYPE bigint",
    "DROP TYPE address",
    "DROP TYPE IF EXISTS ks.address",
    // DESCRIBE.
    "DESCRIBE KEYSPACES",
    "DESC KEYSPACE ks",
    "DESCRIBE ONLY KEYSPACE ks WITH INTERNALS",
    "DESCRIBE KEYSPACE",
    "DESCRIBE TABLES",
    "DESCRIBE TABLE ks.t",
    "DESCRIBE CLUSTER",
    "DESCRIBE SCHEMA",
    "DESCRIBE FULL SCHEMA",
    "DESCRIBE TYPES",
    "DESCRIBE TYPE ks.address",
    "DESCRIBE FUNCTIONS",
    "DESCRIBE FUNCTION ks.f",
    "DESCRIBE AGGREGATES",
    "DESCRIBE AGGREGATE avg2",
    "DESCRIBE INDEX ks.idx",
    "DESCRIBE MATERIALIZED VIEW ks.mv",
    "DESCRIBE ks.t",
    "DESCRIBE t",
    "DESCRIBE TABLE \"MyTable\"",
    "CREATE TABLE t (a int, b int, PRIMARY KEY ((a), b))",
    "UPDATE t SET c=c+1 WHERE k=1",
    "UPDATE t SET c=c-1 WHERE k=1",
    "SELECT * FROM t WHERE d = 1H30M AND e = 10us",
    // Recognised but unsupported.
    "CREATE INDEX ON t (v)",
    "CREATE INDEX IF NOT EXISTS idx ON ks.t (keys(m)) USING 'sai'",
    "CREATE CUSTOM INDEX idx ON t (v) USING 'org.apache.cassandra.index.sasi.SASIIndex' WITH OPTIONS = {'mode': 'CONTAINS'}",
    "DROP INDEX ks.idx",
    "DROP INDEX IF EXISTS idx",
    "CREATE MATERIALIZED VIEW mv AS SELECT * FROM t WHERE a IS NOT NULL AND b IS NOT NULL PRIMARY KEY (b, a)",
    "ALTER MATERIALIZED VIEW mv WITH comment = 'x'",
    "DROP MATERIALIZED VIEW IF EXISTS ks.mv",
    "CREATE FUNCTION f (a int) RETURNS NULL ON NULL INPUT RETURNS int LANGUAGE java AS 'return a;'",
    "CREATE OR REPLACE FUNCTION ks.f (a int) CALLED ON NULL INPUT RETURNS int LANGUAGE java AS $$ return a; $$",
    "DROP FUNCTION f",
    "CREATE AGGREGATE ks.a (int) SFUNC f STYPE int INITCOND 0",
    "DROP AGGREGATE IF EXISTS a",
    "CREATE TRIGGER tr ON t USING 'org.x.Trigger'",
    "DROP TRIGGER tr ON t",
    "CREATE ROLE r WITH PASSWORD = 'p' AND LOGIN = true AND SUPERUSER = false",
    "ALTER ROLE r WITH PASSWORD = 'q'",
    "DROP ROLE IF EXISTS r",
    "CREATE USER u WITH PASSWORD 'p' SUPERUSER",
    "ALTER USER u WITH PASSWORD 'q'",
    "DROP USER u",
    "GRANT SELECT ON KEYSPACE ks TO r",
    "GRANT r1 TO r2",
    "REVOKE ALL PERMISSIONS ON ALL KEYSPACES FROM r",
    "LIST ROLES",
    "LIST USERS",
    "LIST ALL PERMISSIONS OF r",
    "ADD IDENTITY 'spiffe://x' TO ROLE 'r'",
    "DROP IDENTITY 'spiffe://x'",
    // Lexical odds and ends.
    "  -- comment\n SELECT /* inline */ * FROM t // trailing\n ;",
    "SeLeCt * FrOm T wHeRe Pk = 1",
];

#[test]
fn valid_statements_parse_and_number_their_markers() {
    for text in VALID {
        let (statement, counted) = match parse_statement_counting(text) {
            Ok(r) => r,
            Err(e) => panic!("{text}\n  => {e}"),
        };
        let markers = bind_markers(&statement);
        assert_eq!(
            markers.len() as u32,
            counted,
            "marker walk misses some: {text}"
        );
        for (i, m) in markers.iter().enumerate() {
            assert_eq!(m.index as usize, i, "{text}");
        }
    }
}

#[test]
fn select_system_local() {
    let s = select("SELECT * FROM system.local WHERE key='local'");
    assert_eq!(s.selection, Selection::Wildcard);
    assert_eq!(s.table, qn(Some("system"), "local"));
    assert_eq!(
        s.where_clause,
        vec![Relation::Simple {
            column: id("key"),
            op: Operator::Eq,
            value: RelationValue::Single(string("local")),
        }]
    );
    assert!(!s.json && !s.distinct && !s.allow_filtering);
    assert_eq!(s.timeout, None);
}

#[test]
fn select_clauses() {
    let s = select(
        "SELECT JSON DISTINCT a AS x, count(*) FROM ks.t WHERE pk = ? AND ck IN ? \
         GROUP BY pk ORDER BY ck DESC PER PARTITION LIMIT 3 LIMIT 10 ALLOW FILTERING \
         USING TIMEOUT 30000ms",
    );
    assert!(s.json && s.distinct && s.allow_filtering);
    assert_eq!(
        s.selection,
        Selection::Columns(vec![
            Selector {
                expr: SelectorExpr::Column(id("a")),
                alias: Some(id("x")),
            },
            Selector {
                expr: SelectorExpr::CountRows,
                alias: None,
            },
        ])
    );
    assert_eq!(
        s.where_clause[1],
        Relation::Simple {
            column: id("ck"),
            op: Operator::In,
            value: RelationValue::Marker(BindMarker {
                index: 1,
                name: None
            }),
        }
    );
    assert_eq!(s.group_by, vec![SelectorExpr::Column(id("pk"))]);
    assert_eq!(
        s.order_by,
        vec![Ordering {
            column: id("ck"),
            ann_of: None,
            order: Order::Desc,
        }]
    );
    assert_eq!(s.per_partition_limit, Some(int("3")));
    assert_eq!(s.limit, Some(int("10")));
    assert_eq!(
        s.timeout,
        Some(Term::Constant(Constant::Duration("30000ms".into())))
    );
}

#[test]
fn json_and_distinct_can_be_column_names() {
    let s = select("SELECT json FROM t");
    assert!(!s.json);
    assert_eq!(
        s.selection,
        Selection::Columns(vec![Selector {
            expr: SelectorExpr::Column(id("json")),
            alias: None
        }])
    );
    let s = select("SELECT distinct, json AS j FROM t");
    assert!(!s.distinct && !s.json);
}

#[test]
fn selector_shapes() {
    let s =
        select("SELECT writetime(v), m['k'], s[1..3], u.f, CAST(a AS text), ks.f(a, 1), -a FROM t");
    let Selection::Columns(cols) = s.selection else {
        panic!()
    };
    let exprs: Vec<_> = cols.into_iter().map(|c| c.expr).collect();
    let col = |n: &str| Box::new(SelectorExpr::Column(id(n)));
    assert_eq!(
        exprs,
        vec![
            SelectorExpr::WriteTime(col("v")),
            SelectorExpr::ElementAccess(col("m"), string("k")),
            SelectorExpr::Slice {
                expr: col("s"),
                from: Some(int("1")),
                to: Some(int("3")),
            },
            SelectorExpr::FieldAccess(col("u"), id("f")),
            SelectorExpr::Cast(col("a"), TypeExpr::Native("text".into())),
            SelectorExpr::FunctionCall {
                keyspace: Some(id("ks")),
                name: id("f"),
                args: vec![SelectorExpr::Column(id("a")), SelectorExpr::Term(int("1"))],
            },
            SelectorExpr::Negate(col("a")),
        ]
    );
}

#[test]
fn relations() {
    let s = select(
        "SELECT * FROM t WHERE (a, b) > (1, 2) AND token(pk) >= token(?) AND m['k'] = 1 \
         AND v IS NOT NULL AND s CONTAINS KEY 'x' AND (c, d) IN ((1, 2))",
    );
    assert_eq!(
        s.where_clause,
        vec![
            Relation::MultiColumn {
                columns: vec![id("a"), id("b")],
                op: Operator::Gt,
                value: RelationValue::Single(Term::Tuple(vec![int("1"), int("2")])),
            },
            Relation::Token {
                columns: vec![id("pk")],
                op: Operator::Gte,
                value: RelationValue::Single(Term::FunctionCall {
                    keyspace: None,
                    name: id("token"),
                    args: vec![marker(0)],
                }),
            },
            Relation::Element {
                column: id("m"),
                key: string("k"),
                op: Operator::Eq,
                value: int("1"),
            },
            Relation::IsNotNull(id("v")),
            Relation::Simple {
                column: id("s"),
                op: Operator::ContainsKey,
                value: RelationValue::Single(string("x")),
            },
            Relation::MultiColumn {
                columns: vec![id("c"), id("d")],
                op: Operator::In,
                value: RelationValue::List(vec![Term::Tuple(vec![int("1"), int("2")])]),
            },
        ]
    );
}

#[test]
fn literals_and_terms() {
    let s = select(
        "SELECT * FROM t WHERE a = [1, 2] AND b = {'x', 'y'} AND c = {'k': 1} AND d = {} \
         AND e = {f: 1, \"G\": 'x'} AND f = (int) ? AND g = 1 + 2 * 3 AND h = -Infinity \
         AND i = 0xff AND j = true AND k = 550e8400-e29b-41d4-a716-446655440000 AND l = :named",
    );
    let values: Vec<Term> = s
        .where_clause
        .into_iter()
        .map(|r| match r {
            Relation::Simple {
                value: RelationValue::Single(t),
                ..
            } => t,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        values,
        vec![
            Term::List(vec![int("1"), int("2")]),
            Term::Set(vec![string("x"), string("y")]),
            Term::Map(vec![(string("k"), int("1"))]),
            Term::Set(vec![]),
            Term::UserType(vec![(id("f"), int("1")), (id("G"), string("x"))]),
            Term::TypeHint {
                ty: TypeExpr::Native("int".into()),
                term: Box::new(marker(0)),
            },
            Term::Binary {
                op: BinaryOp::Add,
                lhs: Box::new(int("1")),
                rhs: Box::new(Term::Binary {
                    op: BinaryOp::Mul,
                    lhs: Box::new(int("2")),
                    rhs: Box::new(int("3")),
                }),
            },
            Term::Constant(Constant::NegInfinity),
            Term::Constant(Constant::Hex("ff".into())),
            Term::Constant(Constant::Boolean(true)),
            Term::Constant(Constant::Uuid(
                "550e8400-e29b-41d4-a716-446655440000".into()
            )),
            Term::BindMarker(BindMarker {
                index: 1,
                name: Some(id("named")),
            }),
        ]
    );
}

#[test]
fn insert_forms() {
    let Statement::Insert(i) = parse(
        "INSERT INTO ks.t (pk, \"Val\") VALUES (?, 'x') IF NOT EXISTS USING TTL 10 AND TIMESTAMP ? AND TIMEOUT 1s",
    ) else {
        panic!()
    };
    assert_eq!(i.table, qn(Some("ks"), "t"));
    assert_eq!(
        i.values,
        InsertValues::Values {
            columns: vec![id("pk"), id("Val")],
            values: vec![marker(0), string("x")],
        }
    );
    assert!(i.if_not_exists);
    assert_eq!(
        i.using,
        Using {
            timestamp: Some(marker(1)),
            ttl: Some(int("10")),
            timeout: Some(Term::Constant(Constant::Duration("1s".into()))),
        }
    );
    let Statement::Insert(i) = parse("INSERT INTO t JSON ? DEFAULT UNSET") else {
        panic!()
    };
    assert_eq!(
        i.values,
        InsertValues::Json {
            value: marker(0),
            default: JsonDefault::Unset
        }
    );
}

#[test]
fn update_assignments() {
    let Statement::Update(u) = parse(
        "UPDATE t USING TTL 5 SET a = 1, c = c + 2, d = d - 3, e = e -4, f += 1, g -= {'x'}, \
         l = [0] + l, m['k'] = 'v', u.f = 2 WHERE pk = 1 IF a = 0 AND m['k'] IN ('a', 'b')",
    ) else {
        panic!()
    };
    assert_eq!(u.using.ttl, Some(int("5")));
    let c = id;
    assert_eq!(
        u.assignments,
        vec![
            Assignment::Set {
                column: c("a"),
                value: int("1")
            },
            Assignment::Add {
                column: c("c"),
                value: int("2")
            },
            Assignment::Subtract {
                column: c("d"),
                value: int("3")
            },
            Assignment::Add {
                column: c("e"),
                value: int("-4")
            },
            Assignment::Add {
                column: c("f"),
                value: int("1")
            },
            Assignment::Subtract {
                column: c("g"),
                value: Term::Set(vec![string("x")])
            },
            Assignment::Prepend {
                column: c("l"),
                value: Term::List(vec![int("0")])
            },
            Assignment::SetElement {
                column: c("m"),
                key: string("k"),
                value: string("v")
            },
            Assignment::SetField {
                column: c("u"),
                field: c("f"),
                value: int("2")
            },
        ]
    );
    assert_eq!(
        u.conditions,
        Some(Conditions::Columns(vec![
            Condition::Simple {
                column: c("a"),
                op: Operator::Eq,
                value: RelationValue::Single(int("0")),
            },
            Condition::Element {
                column: c("m"),
                key: string("k"),
                op: Operator::In,
                value: RelationValue::List(vec![string("a"), string("b")]),
            },
        ]))
    );
}

#[test]
fn delete_and_batch() {
    let Statement::Delete(d) =
        parse("DELETE v, m['k'], u.f FROM t USING TIMESTAMP 7 WHERE pk = 1 IF EXISTS")
    else {
        panic!()
    };
    assert_eq!(
        d.columns,
        vec![
            DeleteSelector::Column(id("v")),
            DeleteSelector::Element {
                column: id("m"),
                key: string("k")
            },
            DeleteSelector::Field {
                column: id("u"),
                field: id("f")
            },
        ]
    );
    assert_eq!(d.using.timestamp, Some(int("7")));
    assert_eq!(d.conditions, Some(Conditions::Exists));

    let batch = parse(
        "BEGIN UNLOGGED BATCH USING TIMESTAMP ? INSERT INTO t (a) VALUES (?); \
         UPDATE t SET v = :v WHERE a = ?; APPLY BATCH",
    );
    let Statement::Batch(b) = &batch else {
        panic!()
    };
    assert_eq!(b.kind, BatchKind::Unlogged);
    assert_eq!(b.statements.len(), 2);
    // Markers are numbered across the whole batch.
    let names: Vec<_> = bind_markers(&batch).into_iter().map(|m| m.name).collect();
    assert_eq!(names, vec![None, None, Some(id("v")), None]);
    assert_eq!(bind_marker_count(&batch), 4);
}

#[test]
fn create_table_primary_keys() {
    let Statement::CreateTable(t) = parse(
        "CREATE TABLE IF NOT EXISTS ks.t (a int, b text, c timeuuid, s int STATIC, v map<text, int>, \
         PRIMARY KEY ((a, b), c)) WITH CLUSTERING ORDER BY (c DESC) AND COMPACT STORAGE \
         AND compaction = {'class': 'SizeTieredCompactionStrategy', 'min_threshold': 4} AND comment = 'hi' \
         AND read_repair = BLOCKING",
    ) else {
        panic!()
    };
    assert!(t.if_not_exists);
    assert_eq!(t.name, qn(Some("ks"), "t"));
    assert_eq!(t.partition_key, vec![id("a"), id("b")]);
    assert_eq!(t.clustering_columns, vec![id("c")]);
    assert_eq!(t.clustering_order, vec![(id("c"), Order::Desc)]);
    assert!(t.compact_storage);
    assert_eq!(t.columns.len(), 5);
    assert!(t.columns[3].is_static);
    assert_eq!(
        t.columns[4].ty,
        TypeExpr::Map(
            Box::new(TypeExpr::Native("text".into())),
            Box::new(TypeExpr::Native("int".into()))
        )
    );
    assert_eq!(
        t.properties.0,
        vec![
            Property {
                name: id("compaction"),
                value: PropertyValue::Map(vec![
                    (
                        Constant::String("class".into()),
                        Constant::String("SizeTieredCompactionStrategy".into())
                    ),
                    (
                        Constant::String("min_threshold".into()),
                        Constant::Integer("4".into())
                    ),
                ]),
            },
            Property {
                name: id("comment"),
                value: PropertyValue::Constant(Constant::String("hi".into())),
            },
            Property {
                name: id("read_repair"),
                value: PropertyValue::Identifier(id("blocking")),
            },
        ]
    );

    let Statement::CreateTable(t) = parse("CREATE TABLE t (k int PRIMARY KEY, v text)") else {
        panic!()
    };
    assert_eq!(t.partition_key, vec![id("k")]);
    assert!(t.clustering_columns.is_empty());
}

#[test]
fn alter_and_drop() {
    assert_eq!(
        parse("ALTER TABLE t ADD IF NOT EXISTS (a int, b set<text> static)"),
        Statement::AlterTable(AlterTable {
            name: qn(None, "t"),
            if_exists: false,
            action: AlterTableAction::Add {
                if_not_exists: true,
                columns: vec![
                    ColumnDef {
                        name: id("a"),
                        ty: TypeExpr::Native("int".into()),
                        is_static: false,
                        mask: None
                    },
                    ColumnDef {
                        name: id("b"),
                        ty: TypeExpr::Set(Box::new(TypeExpr::Native("text".into()))),
                        is_static: true,
                        mask: None
                    },
                ],
            },
        })
    );
    assert_eq!(
        parse("ALTER TABLE IF EXISTS t DROP (a, b) USING TIMESTAMP 99"),
        Statement::AlterTable(AlterTable {
            name: qn(None, "t"),
            if_exists: true,
            action: AlterTableAction::Drop {
                if_exists: false,
                columns: vec![id("a"), id("b")],
                timestamp: Some(99),
            },
        })
    );
    assert_eq!(
        parse("ALTER TYPE ks.a RENAME x TO y AND z TO w"),
        Statement::AlterType(AlterType {
            name: qn(Some("ks"), "a"),
            if_exists: false,
            action: AlterTypeAction::Rename {
                if_exists: false,
                renames: vec![(id("x"), id("y")), (id("z"), id("w"))],
            },
        })
    );
    assert_eq!(
        parse("DROP KEYSPACE IF EXISTS \"Ks\""),
        Statement::DropKeyspace(DropKeyspace {
            name: id("Ks"),
            if_exists: true
        })
    );
    assert_eq!(
        parse("CREATE TYPE t.addr (street text, \"Zip\" int)"),
        Statement::CreateType(CreateType {
            name: qn(Some("t"), "addr"),
            if_not_exists: false,
            fields: vec![
                (id("street"), TypeExpr::Native("text".into())),
                (id("Zip"), TypeExpr::Native("int".into()))
            ],
        })
    );
}

#[test]
fn keyspace_properties() {
    let Statement::CreateKeyspace(k) = parse(
        "CREATE KEYSPACE Ks WITH REPLICATION = {'class': 'SimpleStrategy', 'replication_factor': 1} AND DURABLE_WRITES = false",
    ) else {
        panic!()
    };
    assert_eq!(k.name, id("ks"));
    assert_eq!(k.properties.0[0].name, id("replication"));
    assert_eq!(
        k.properties.0[1].value,
        PropertyValue::Constant(Constant::Boolean(false))
    );
}

#[test]
fn describe_targets() {
    let d = |s: &str| match parse(s) {
        Statement::Describe(d) => d,
        other => panic!("{other:?}"),
    };
    assert_eq!(d("DESCRIBE KEYSPACES").target, DescribeTarget::Keyspaces);
    assert_eq!(
        d("DESC ONLY KEYSPACE ks").target,
        DescribeTarget::Keyspace {
            name: Some(id("ks")),
            only: true
        }
    );
    assert_eq!(
        d("DESCRIBE KEYSPACE").target,
        DescribeTarget::Keyspace {
            name: None,
            only: false
        }
    );
    assert_eq!(
        d("DESCRIBE TABLE ks.t").target,
        DescribeTarget::Table(qn(Some("ks"), "t"))
    );
    assert_eq!(
        d("DESCRIBE FULL SCHEMA").target,
        DescribeTarget::Schema { full: true }
    );
    assert_eq!(
        d("DESCRIBE ks.t").target,
        DescribeTarget::Generic(qn(Some("ks"), "t"))
    );
    assert!(d("DESCRIBE CLUSTER WITH INTERNALS").with_internals);
}

#[test]
fn unsupported_features_are_named() {
    for (text, feature) in [
        ("CREATE INDEX ON t (v)", "CREATE INDEX"),
        (
            "CREATE CUSTOM INDEX i ON t (v) USING 'x'",
            "CREATE CUSTOM INDEX",
        ),
        ("DROP INDEX i", "DROP INDEX"),
        (
            "CREATE MATERIALIZED VIEW v AS SELECT * FROM t PRIMARY KEY (a)",
            "CREATE MATERIALIZED VIEW",
        ),
        ("DROP MATERIALIZED VIEW v", "DROP MATERIALIZED VIEW"),
        (
            "CREATE FUNCTION f () CALLED ON NULL INPUT RETURNS int LANGUAGE java AS 'x'",
            "CREATE FUNCTION",
        ),
        ("GRANT SELECT ON ALL KEYSPACES TO r", "GRANT"),
        ("LIST ROLES", "LIST ROLES"),
        ("CREATE ROLE r", "CREATE ROLE"),
    ] {
        assert_eq!(parse(text), Statement::Unsupported { feature }, "{text}");
    }
}

#[test]
fn scripts() {
    let all = parse_statements(
        "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1};\n\
         USE ks;;\n\
         CREATE FUNCTION f (a int) CALLED ON NULL INPUT RETURNS int LANGUAGE java AS $$ return a; $$;\n\
         INSERT INTO t (a) VALUES (?); SELECT * FROM t WHERE a = ?",
    )
    .unwrap();
    assert_eq!(all.len(), 5);
    assert_eq!(all[1], Statement::Use(id("ks")));
    // Numbering restarts for each statement.
    assert_eq!(bind_markers(&all[4])[0].index, 0);
    assert!(parse_statements("").unwrap().is_empty());
    assert!(parse_statements("USE ks USE ks").is_err());
}

#[test]
fn types() {
    assert_eq!(
        parse_type("frozen<map<text, int>>").unwrap(),
        TypeExpr::Frozen(Box::new(TypeExpr::Map(
            Box::new(TypeExpr::Native("text".into())),
            Box::new(TypeExpr::Native("int".into()))
        )))
    );
    assert_eq!(
        parse_type("vector<float, 3>").unwrap(),
        TypeExpr::Vector(Box::new(TypeExpr::Native("float".into())), 3)
    );
    assert_eq!(
        parse_type("frozen<tuple<int, \"MyType\", ks.addr>>").unwrap(),
        TypeExpr::Frozen(Box::new(TypeExpr::Tuple(vec![
            TypeExpr::Native("int".into()),
            TypeExpr::UserType(qn(None, "MyType")),
            TypeExpr::UserType(qn(Some("ks"), "addr")),
        ])))
    );
    assert_eq!(
        parse_type("'org.apache.cassandra.db.marshal.BytesType'").unwrap(),
        TypeExpr::Custom("org.apache.cassandra.db.marshal.BytesType".into())
    );
    assert_eq!(
        parse_type("VARCHAR").unwrap(),
        TypeExpr::Native("varchar".into())
    );
    // A dimension below 1 is the type's refusal (an invalid request), not the grammar's.
    assert_eq!(
        parse_type("vector<float, -1>").unwrap(),
        TypeExpr::Vector(Box::new(TypeExpr::Native("float".into())), -1)
    );
    assert_eq!(
        parse_type("vector<float, 2147483648>")
            .unwrap_err()
            .to_string(),
        "Failed parsing statement: [vector<float, 2147483648>] reason: NumberFormatException For input string: \"2147483648\""
    );
    assert!(parse_type("vector<float, 1.5>").is_err());
    assert!(parse_type("list<int").is_err());
    assert!(parse_type("int int").is_err());
}

#[test]
fn terms() {
    assert_eq!(
        parse_term("{'a': [1, 2]}").unwrap(),
        Term::Map(vec![(string("a"), Term::List(vec![int("1"), int("2")]))])
    );
    assert_eq!(parse_term("-NaN").unwrap(), Term::Constant(Constant::NaN));
}

#[test]
fn identifiers() {
    assert!(!id("abc_1").needs_quoting());
    assert!(id("Abc").needs_quoting());
    assert!(id("select").needs_quoting());
    assert!(!id("key").needs_quoting());
    assert!(id("1a").needs_quoting());
    assert!(id("").needs_quoting());
    assert_eq!(id("My\"Col").to_string(), "\"My\"\"Col\"");
    assert_eq!(id("plain").to_cql(), "plain");
    // Unquoted names are lowercased, quoted ones kept.
    let s = select("SELECT MyCol, \"MyCol\" FROM MyTable");
    assert_eq!(s.table.name, id("mytable"));
    let Selection::Columns(c) = s.selection else {
        panic!()
    };
    assert_eq!(c[0].expr, SelectorExpr::Column(id("mycol")));
    assert_eq!(c[1].expr, SelectorExpr::Column(id("MyCol")));
}

#[test]
fn errors_are_phrased_like_cassandra() {
    assert_eq!(
        err("SELECT FROM t"),
        "line 1:7 no viable alternative at input 'FROM'"
    );
    assert_eq!(
        err("SELECT * FRM t"),
        "line 1:9 mismatched input 'FRM' expecting K_FROM"
    );
    assert_eq!(
        err("SELECT * FROM t WHERE"),
        "line 1:21 no viable alternative at input '<EOF>'"
    );
    assert_eq!(
        err("INSERT INTO t (a) VALUES (1"),
        "line 1:27 mismatched input '<EOF>' expecting ')'"
    );
    assert_eq!(
        err("SELECT * FROM t\nWHERE a = 1 x"),
        "line 2:12 mismatched input 'x' expecting EOF"
    );
    // A second PRIMARY KEY is an invalid query in Cassandra, refused by the executor; not
    // when a column declared twice precedes it (that is refused first).
    for (text, multiple) in [
        (
            "CREATE TABLE t (a int PRIMARY KEY, b int PRIMARY KEY)",
            true,
        ),
        (
            "CREATE TABLE t (a int, b int, PRIMARY KEY (a), PRIMARY KEY (b))",
            true,
        ),
        (
            "CREATE TABLE t (a int PRIMARY KEY, a int PRIMARY KEY)",
            false,
        ),
        ("CREATE TABLE t (a int PRIMARY KEY, b int)", false),
    ] {
        let Statement::CreateTable(create) = parse(text) else {
            panic!("{text}");
        };
        assert_eq!(create.multiple_primary_keys, multiple, "{text}");
        assert_eq!(create.partition_key[0].as_str(), "a", "{text}");
    }
    assert!(matches!(
        parse("CREATE TABLE t (a int)"),
        Statement::CreateTable(CreateTable { partition_key, .. }) if partition_key.is_empty()
    ));
    assert!(err("UPDATE t SET a = b + 1 WHERE k = 1")
        .contains("Only expressions of the form X = X + <value>"));
    assert!(err("CREATE TYPE byte (a int)").contains("Invalid (reserved) user type name byte"));
}

#[test]
fn invalid_statements_are_rejected() {
    for text in [
        "",
        ";",
        "SELECT",
        "SELECT * FROM",
        "SELECT * FROM t WHERE a",
        "SELECT * FROM t WHERE a = ",
        "SELECT * FROM t LIMIT 'x'",
        "SELECT * FROM t LIMIT 1.5",
        "SELECT * FROM t ORDER BY",
        "SELECT * FROM t USING TIMEOUT 'x'",
        "SELECT a b FROM t",
        "SELECT * FROM select",
        "SELECT * FROM t WHERE from = 1",
        "INSERT INTO t VALUES (1)",
        "INSERT INTO t (a) VALUES ()",
        "INSERT INTO t (a) VALUES (1) USING TTL 'x'",
        "INSERT INTO t JSON 1",
        "UPDATE t SET WHERE a = 1",
        "UPDATE t SET a = 1",
        "UPDATE t SET a = 1 WHERE",
        "DELETE FROM t",
        "DELETE FROM t USING TTL 1 WHERE a = 1",
        "BEGIN BATCH SELECT * FROM t APPLY BATCH",
        "BEGIN BATCH INSERT INTO t (a) VALUES (1)",
        "CREATE KEYSPACE ks",
        "CREATE KEYSPACE ks WITH replication = {'class': ?}",
        "CREATE TABLE t (a int PRIMARY KEY, b)",
        "CREATE TABLE t (a int PRIMARY KEY) WITH CLUSTERING ORDER BY (a)",
        "CREATE TABLE t (a list<int PRIMARY KEY)",
        "CREATE TABLE t (a vector<float> PRIMARY KEY)",
        "CREATE TYPE int (a int)",
        "ALTER TABLE t",
        "ALTER TABLE t DROP a USING TIMESTAMP ?",
        "DROP t",
        "USE",
        "USE select",
        "TRUNCATE",
        "FOO BAR",
        "SELECT * FROM t WHERE a = 'unterminated",
        "SELECT * FROM t WHERE a = \"unterminated",
        "SELECT * FROM t /* unterminated",
        "SELECT * FROM t WHERE a = 1 AND",
        "SELECT * FROM t WHERE (a, b) > ",
        "SELECT * FROM t WHERE token(a) IN (1)",
        "SELECT * FROM t WHERE a = {1: 2, 3}",
        "SELECT * FROM t WHERE a = [1, 2",
        "SELECT * FROM t WHERE a = #",
        "SELECT * FROM t; SELECT * FROM t",
        "DESCRIBE",
        "DESCRIBE TABLE",
    ] {
        assert!(parse_statement(text).is_err(), "{text:?} should not parse");
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    for (open, close) in [("(", ")"), ("[", "]"), ("{", "}"), ("-(", ")")] {
        let text = format!(
            "SELECT * FROM t WHERE a = {}1{}",
            open.repeat(100_000),
            close.repeat(100_000)
        );
        let e = parse_statement(&text).unwrap_err();
        assert!(e.message.contains("nesting depth"), "{e}");
        let text = format!(
            "SELECT {}a{} FROM t",
            open.repeat(50_000),
            close.repeat(50_000)
        );
        assert!(parse_statement(&text).is_err());
    }
    let text = format!(
        "SELECT * FROM t WHERE {}a = 1{}",
        "(".repeat(10_000),
        ")".repeat(10_000)
    );
    assert!(parse_statement(&text).is_err());
    let ty = format!("{}int{}", "list<".repeat(10_000), ">".repeat(10_000));
    assert!(parse_type(&ty).is_err());
    // Real statements stay well inside the limit.
    let ok = format!(
        "SELECT * FROM t WHERE a = {}1{}",
        "[".repeat(20),
        "]".repeat(20)
    );
    assert!(parse_statement(&ok).is_ok());
}

#[test]
fn oversized_input_is_rejected() {
    let text = format!(
        "SELECT * FROM t WHERE a = '{}'",
        "x".repeat(MAX_STATEMENT_LENGTH_BYTES)
    );
    assert!(parse_statement(&text)
        .unwrap_err()
        .message
        .contains("exceeds"));
}

/// A small deterministic generator (xorshift) so the test is reproducible without a crate.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

#[test]
fn mutated_statements_never_panic() {
    const PIECES: &[&str] = &[
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        ",",
        ";",
        ".",
        "..",
        ":",
        "=",
        "<",
        ">",
        "!=",
        "+",
        "-",
        "*",
        "/",
        "%",
        "+=",
        "?",
        "'",
        "\"",
        "$$",
        "--",
        "/*",
        "*/",
        "0x",
        "-1",
        "1.5e",
        "P1",
        "1h",
        "NaN",
        "-Inf",
        "µ",
        "é",
        "\n",
        " ",
        "SELECT",
        "FROM",
        "WHERE",
        "AND",
        "IN",
        "token",
        "frozen<",
        "map<",
        "IF",
        "EXISTS",
        "NOT",
        "NULL",
        "USING",
        "TTL",
        "TIMEOUT",
        "PRIMARY KEY",
        "BATCH",
        "APPLY",
        "550e8400-e29b-41d4-a716-446655440000",
    ];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut checked = 0;
    for round in 0..60 {
        for text in VALID {
            let mut s: Vec<char> = text.chars().collect();
            let edits = 1 + rng.below(4);
            for _ in 0..edits {
                let at = rng.below(s.len() + 1);
                match rng.below(5) {
                    0 if !s.is_empty() => {
                        let end = (at + 1 + rng.below(6)).min(s.len());
                        s.drain(at.min(end)..end);
                    }
                    1 => {
                        let piece = PIECES[rng.below(PIECES.len())];
                        s.splice(at..at, piece.chars());
                    }
                    2 => s.truncate(at),
                    3 if !s.is_empty() => {
                        let from = rng.below(s.len());
                        let end = (from + rng.below(12)).min(s.len());
                        let copy: Vec<char> = s[from..end].to_vec();
                        s.splice(at..at, copy);
                    }
                    _ => s.insert(at, char::from(b' ' + (rng.below(95) as u8))),
                }
            }
            let mutated: String = s.into_iter().collect();
            if let Ok(statement) = parse_statement(&mutated) {
                // Whatever parses must be numbered consistently, too.
                let markers = bind_markers(&statement);
                assert!(markers
                    .iter()
                    .enumerate()
                    .all(|(i, m)| m.index as usize == i));
            }
            let _ = parse_statements(&mutated);
            let _ = parse_type(&mutated);
            checked += 1;
        }
        let _ = round;
    }
    assert!(checked > 10_000);
}

/// Refusals Cassandra's grammar words without a position: bind markers for keyspace and
/// table names, and property maps holding anything but constants, or a key twice.
#[test]
fn unpositioned_refusals_are_worded_like_cassandra() {
    let error = |text: &str| parse_statement(text).unwrap_err().to_string();
    let keyspace = "Bind variables cannot be used for keyspace names";
    let table = "Bind variables cannot be used for table names";
    assert_eq!(error("USE ?"), keyspace);
    assert_eq!(error("DROP KEYSPACE ?"), keyspace);
    assert_eq!(error("SELECT * FROM ?.t"), keyspace);
    assert_eq!(error("SELECT * FROM ks.?"), table);
    assert_eq!(error("INSERT INTO ? (a) VALUES (1)"), table);
    assert_eq!(error("TRUNCATE ?"), table);
    assert_eq!(
        error("CREATE TABLE t (p int PRIMARY KEY) WITH compression = {'class': 'LZ4Compressor', 'chunk_length_in_kb': null}"),
        "Invalid property value: NULL for property: 'chunk_length_in_kb'"
    );
    assert_eq!(
        error("CREATE TABLE t (p int PRIMARY KEY) WITH compression = {'class': ?}"),
        "Invalid property value: ? for property: 'class' (bind variables are not supported in DDL queries)"
    );
    assert_eq!(
        error("CREATE TABLE t (p int PRIMARY KEY) WITH compression = {null: 'x'}"),
        "Invalid property name: NULL"
    );
    assert_eq!(
        error("CREATE KEYSPACE k WITH replication = {'class': 'SimpleStrategy', 'class': 'x'}"),
        "Multiple definition for property class"
    );
    assert_eq!(
        error("CREATE TABLE t (p int PRIMARY KEY) WITH comment = 'a' AND comment = 'b'"),
        "Multiple definitions for property 'comment'"
    );
    // Positioned errors keep ANTLR's `line:column` prefix.
    assert!(error("USE 1").starts_with("line 1:4 "));
}
