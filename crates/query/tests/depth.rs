//! Statements at the parser's depth limit (`cql_syntax::MAX_NESTING_DEPTH`) and past it: the
//! deepest trees the parser lets through are analysed and executed within a quarter of the
//! stack a statement thread has (`query::STATEMENT_STACK_SIZE_BYTES`), in time linear in their
//! size; deeper ones are a syntax error whatever the table.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use coordinator::Coordinator;
use query::{NodeInfo, QueryError, QueryOptions, QueryProcessor, Session};
use replica::LocalReplica;
use schema_service::SchemaService;
use storage::{Durability, MemoryEngine};

fn processor() -> QueryProcessor {
    let engine = Arc::new(MemoryEngine::new());
    let tokens = vec![-3_000_000_000_000_000_000, 0, 3_000_000_000_000_000_000];
    let local = locator::Endpoint {
        host_id: locator::HostId(uuid::Uuid::new_v4()),
        broadcast_address: IpAddr::V4(Ipv4Addr::LOCALHOST),
        native_address: IpAddr::V4(Ipv4Addr::LOCALHOST),
        native_port: 9042,
        location: locator::Snitch::Simple.local_location(),
        state: locator::NodeState::Normal,
    };
    let token_metadata =
        Arc::new(locator::TokenMetadata::new(local, tokens).expect("valid tokens"));
    let node = NodeInfo::new("test", "5.0.2", token_metadata.clone());
    let coordinator = Arc::new(Coordinator::new(
        token_metadata,
        Arc::new(LocalReplica::new(engine.clone(), Durability::None)),
    ));
    let schema = SchemaService::open(
        engine,
        query::system_keyspaces().expect("the system keyspaces"),
    )
    .expect("open the schema");
    QueryProcessor::open(node, Arc::new(schema), coordinator)
}

const SETUP: &[&str] = &[
    "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
    "CREATE TABLE ks.t (k int, c int, v int, l list<int>, PRIMARY KEY (k, c))",
];

/// `1+1+...+1` with `n` operands.
fn sum(n: usize) -> String {
    vec!["1"; n].join("+")
}

/// `frozen<list<...<int>...>>` with `lists` lists.
fn deep_type(lists: usize) -> String {
    format!("frozen<{}int{}>", "list<".repeat(lists), ">".repeat(lists))
}

/// `[[...[1]...]]` with `n` lists.
fn deep_list(n: usize) -> String {
    format!("{}1{}", "[".repeat(n), "]".repeat(n))
}

/// The deepest statement of each kind the parser accepts (one more level is a syntax error,
/// as `cql_syntax`'s tests check), in an order where each finds the tables it needs.
fn deepest_statements() -> Vec<String> {
    vec![
        // Terms: a chain in VALUES, in WHERE and in a list literal, nested calls, markers.
        format!("INSERT INTO ks.t (k, c, v) VALUES (0, 0, {})", sum(63)),
        format!("SELECT * FROM ks.t WHERE k = {}", sum(62)),
        format!(
            "SELECT * FROM ks.t WHERE k = 0 AND c IN ({})",
            vec![sum(61); 10].join(", ")
        ),
        format!(
            "INSERT INTO ks.t (k, c, l) VALUES (0, 1, [{}])",
            vec![sum(60); 10].join(", ")
        ),
        format!(
            "INSERT INTO ks.t (k, c, v) VALUES (0, 2, {}1{})",
            "abs(".repeat(31),
            ")".repeat(31)
        ),
        format!(
            "UPDATE ks.t SET v = {}(int)1{} WHERE k = 0 AND c = 3",
            "cast(".repeat(61),
            " as int)".repeat(61)
        ),
        // Selectors: chains, nested calls, negations, casts and type hints.
        format!("SELECT {} FROM ks.t", vec!["v"; 63].join(" + ")),
        format!("SELECT {} FROM ks.t", vec!["v"; 63].join(" * ")),
        format!("SELECT v + {} FROM ks.t", vec!["1"; 62].join(" + ")),
        format!("SELECT {}v{} FROM ks.t", "abs(".repeat(31), ")".repeat(31)),
        format!("SELECT {}v FROM ks.t", "- ".repeat(62)),
        format!(
            "SELECT {}v{} FROM ks.t",
            "cast(".repeat(31),
            " as int)".repeat(31)
        ),
        format!("SELECT {}v FROM ks.t", "(int)".repeat(62)),
        // Types: a table, a type and a column of the deepest types, and values of them.
        format!(
            "CREATE TABLE ks.deep (k int PRIMARY KEY, d {}, e {})",
            deep_type(62),
            deep_type(30)
        ),
        format!("INSERT INTO ks.deep (k, e) VALUES (0, {})", deep_list(30)),
        format!(
            "INSERT INTO ks.deep JSON '{{\"k\": 1, \"d\": {}}}'",
            deep_list(62)
        ),
        "SELECT * FROM ks.deep".to_string(),
        "SELECT JSON * FROM ks.deep".to_string(),
        "SELECT toJson(d), toJson(e) FROM ks.deep".to_string(),
        "DESCRIBE TABLE ks.deep".to_string(),
        "SELECT * FROM system_schema.columns WHERE keyspace_name = 'ks'".to_string(),
        format!("CREATE TYPE ks.deep_type (a {})", deep_type(62)),
        format!("ALTER TABLE ks.deep ADD f {}", deep_type(62)),
    ]
}

/// Runs each statement as a QUERY and a PREPARE on a fresh processor, returning their errors.
fn run(statements: &[String]) -> Vec<Result<(), QueryError>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let p = processor();
    let mut session = Session::default();
    for s in SETUP {
        runtime
            .block_on(p.query(s, QueryOptions::default(), &mut session))
            .expect(s);
    }
    statements
        .iter()
        .map(|s| {
            runtime.block_on(p.query(s, QueryOptions::default(), &mut session))?;
            p.prepare(s, None, &session)?;
            Ok(())
        })
        .collect()
}

/// `run` on a thread of `stack_bytes`: a statement needing more overflows it, aborting the
/// test.
fn run_on_stack(stack_bytes: usize, statements: Vec<String>) -> Vec<Result<(), QueryError>> {
    std::thread::Builder::new()
        .stack_size(stack_bytes)
        .spawn(move || run(&statements))
        .expect("a thread")
        .join()
        .expect("no panic")
}

#[test]
fn deepest_statements_run_in_a_quarter_of_the_statement_stack() {
    // Measured in a debug build: up to 1.1 MiB (the selector chains), 0.6 MiB for terms and
    // types; a quarter of the stack is 2 MiB.
    let statements = deepest_statements();
    let results = run_on_stack(query::STATEMENT_STACK_SIZE_BYTES / 4, statements.clone());
    for (statement, result) in statements.iter().zip(results) {
        if let Err(e) = result {
            panic!("{statement}: {e}");
        }
    }
}

#[test]
fn deeper_statements_are_syntax_errors_whatever_the_table() {
    // The crash: a 1,000-operand sum in a WHERE, a VALUES or a PREPARE, even on a
    // table that does not exist, overflowed the stack.
    let statements: Vec<String> = ["ks.t", "ks.missing", "missing.t"]
        .iter()
        .flat_map(|table| {
            [
                format!("SELECT * FROM {table} WHERE k = {}", sum(1_000)),
                format!(
                    "INSERT INTO {table} (k, c, v) VALUES (0, 0, {})",
                    sum(1_000)
                ),
                format!("SELECT {} FROM {table}", vec!["v"; 1_000].join(" + ")),
                format!("SELECT * FROM {table} WHERE k = {}", sum(63)),
            ]
        })
        .collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let p = processor();
    let mut session = Session::default();
    for s in SETUP {
        runtime
            .block_on(p.query(s, QueryOptions::default(), &mut session))
            .expect(s);
    }
    for s in &statements {
        let queried = runtime.block_on(p.query(s, QueryOptions::default(), &mut session));
        let prepared = p.prepare(s, None, &session).map(|_| ());
        for result in [queried.map(|_| ()), prepared] {
            match result {
                Err(QueryError::Syntax(message)) => {
                    assert!(
                        message.contains("maximum nesting depth (64) exceeded"),
                        "{s}: {message}"
                    )
                }
                other => panic!("{s}: {other:?}"),
            }
        }
    }
}

#[test]
fn terms_take_time_linear_in_their_size() {
    // 200 sums of 60 operands in one list literal, as QUERY and PREPARE: each call of a sum
    // was resolved again by every call above it, with every argument's text written each
    // time, about 90 s in a debug build; now well under a second. The bound is far from both.
    let statement = format!(
        "INSERT INTO ks.t (k, c, l) VALUES (0, 1, [{}])",
        vec![sum(60); 200].join(", ")
    );
    let started = Instant::now();
    let results = run_on_stack(query::STATEMENT_STACK_SIZE_BYTES, vec![statement]);
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
}
