//! No statement text can panic the query layer: every input, run through the same
//! `QueryProcessor::query` the server uses (parse, analyse, bind, execute against storage),
//! returns a result or an error. The processor is shared across inputs and starts with a
//! keyspace, a user type and tables of many shapes, so fuzzed statements reach reads, writes,
//! DDL and the system tables, not only the parser; state the fuzzer creates persists and is
//! bounded by dropping everything every few thousand inputs. Each input runs on a thread of
//! `budget::STACK_SIZE_BYTES`, a quarter of the stack the node's shards run statements on.
#![no_main]

use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex, OnceLock};

use coordinator::Coordinator;
use replica::LocalReplica;
use libfuzzer_sys::fuzz_target;
use query::{NodeInfo, QueryOptions, QueryProcessor, Session};
use schema_service::SchemaService;
use storage::{Durability, MemoryEngine};

#[path = "../../../cql-syntax/fuzz/budget.rs"]
mod budget;

// What budget.rs says of the shards' stack stays true.
const _: () = assert!(budget::STACK_SIZE_BYTES == query::STATEMENT_STACK_SIZE_BYTES / 4);

const SETUP: &[&str] = &[
    "CREATE KEYSPACE IF NOT EXISTS ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
    "CREATE TYPE IF NOT EXISTS ks.u (a int, b text, c frozen<list<int>>)",
    "CREATE TABLE IF NOT EXISTS ks.kv (k int PRIMARY KEY, v text)",
    "CREATE TABLE IF NOT EXISTS ks.t (p int, c1 int, c2 text, s int static, v blob, l list<int>, st set<text>, m map<text, int>, uu u, fu frozen<u>, tp tuple<int, text>, vec vector<float, 3>, PRIMARY KEY (p, c1, c2)) WITH CLUSTERING ORDER BY (c1 DESC, c2 ASC)",
    "CREATE TABLE IF NOT EXISTS ks.all (k text, c timeuuid, a ascii, b bigint, bo boolean, d date, de decimal, du duration, f float, i inet, sm smallint, ti time, ts timestamp, ty tinyint, uid uuid, vi varint, PRIMARY KEY ((k, b), c))",
    "INSERT INTO ks.kv (k, v) VALUES (1, 'one')",
    "INSERT INTO ks.t (p, c1, c2, s, v, l, st, m, uu) VALUES (1, 1, 'a', 7, 0x01, [1, 2], {'x'}, {'k': 1}, {a: 1, b: 'b'})",
];
/// Inputs between resets of the schema, so fuzzed DDL cannot grow the state without bound.
const RESET_EVERY: u64 = 5_000;

struct State {
    runtime: tokio::runtime::Runtime,
    processor: QueryProcessor,
    runs: u64,
}

fn processor() -> QueryProcessor {
    let engine = Arc::new(MemoryEngine::new());
    let tokens = vec![-3_000_000_000_000_000_000, 0, 3_000_000_000_000_000_000];
    let local = locator::Endpoint {
        host_id: locator::HostId(uuid::Uuid::nil()),
        broadcast_address: IpAddr::V4(Ipv4Addr::LOCALHOST),
        native_address: IpAddr::V4(Ipv4Addr::LOCALHOST),
        native_port: 9042,
        location: locator::Snitch::Simple.local_location(),
        state: locator::NodeState::Normal,
    };
    let token_metadata = Arc::new(locator::TokenMetadata::new(local, tokens).expect("valid tokens"));
    let node = NodeInfo::new("fuzz", "5.0.2", token_metadata.clone());
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

fn setup(state: &State) {
    let mut session = Session::default();
    for statement in SETUP {
        state
            .runtime
            .block_on(
                state
                    .processor
                    .query(statement, QueryOptions::default(), &mut session),
            )
            .expect(statement);
    }
}

fn state() -> &'static Mutex<State> {
    static STATE: OnceLock<Mutex<State>> = OnceLock::new();
    STATE.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let state = State {
            runtime,
            processor: processor(),
            runs: 0,
        };
        setup(&state);
        Mutex::new(state)
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let text = text.to_string();
    budget::run(move || execute(&text));
});

fn execute(text: &str) {
    let mut state = state().lock().unwrap_or_else(|p| p.into_inner());
    state.runs += 1;
    if state.runs % RESET_EVERY == 0 {
        state.processor = processor();
        setup(&state);
    }
    // A session in the keyspace, so unqualified names resolve too.
    let mut session = Session {
        keyspace: Some("ks".to_string()),
    };
    let _ = state.runtime.block_on(state.processor.query(
        text,
        QueryOptions::default(),
        &mut session,
    ));
}
