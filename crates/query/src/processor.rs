//! The query processor: the entry point the server calls for QUERY, PREPARE, EXECUTE, BATCH.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use coordinator::{ConsistencyLevel, Coordinator, WriteType};
use cql_syntax::ast::Statement;
use locator::{Endpoint, TokenMetadata};
use schema::Schema;
use storage::{Durability, StorageEngine};
use tokio::sync::broadcast;
use uuid::Uuid;

use crate::bind::{self, Bound};
use crate::limits::{InSelectGuardrails, RequestStart, RequestTimeouts, ShardTime};
use crate::prepared::PreparedCache;
use crate::warnings::BatchThresholds;
use crate::{ddl, describe, select, system_tables, warnings, write, QueryError};

/// Facts about this node and the cluster that system tables report.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    pub cluster_name: String,
    pub release_version: String,
    /// The ring as the locator has it: this node's host id, addresses, data centre, rack and
    /// tokens (its local endpoint), and every other node (`system.peers`).
    pub token_metadata: Arc<TokenMetadata>,
}

impl NodeInfo {
    /// This node as the ring knows it.
    pub fn local(&self) -> &Endpoint {
        self.token_metadata.local_endpoint()
    }

    /// This node's data centre.
    pub fn data_center(&self) -> &str {
        &self.local().location.datacenter
    }
}

/// A value bound to a marker.
#[derive(Debug, Clone, PartialEq)]
pub enum BoundValue {
    Null,
    /// Protocol v4+ "not set": leaves the column untouched.
    Unset,
    Value(Bytes),
}

#[derive(Debug, Clone, Default)]
pub enum BoundValues {
    #[default]
    None,
    Positional(Vec<BoundValue>),
    Named(Vec<(String, BoundValue)>),
}

/// Per-request options (the protocol's query parameters).
#[derive(Debug, Clone)]
pub struct QueryOptions {
    pub consistency: ConsistencyLevel,
    pub values: BoundValues,
    pub page_size: Option<i32>,
    pub paging_state: Option<Bytes>,
    pub serial_consistency: Option<ConsistencyLevel>,
    pub timestamp: Option<i64>,
    /// Protocol v5 per-request keyspace.
    pub keyspace: Option<String>,
    pub now_in_seconds: Option<i32>,
}

impl Default for QueryOptions {
    fn default() -> Self {
        QueryOptions {
            consistency: ConsistencyLevel::One,
            values: BoundValues::None,
            page_size: None,
            paging_state: None,
            serial_consistency: None,
            timestamp: None,
            keyspace: None,
            now_in_seconds: None,
        }
    }
}

pub use types::ColumnSpec;

#[derive(Debug, Clone, Default)]
pub struct ResultSet {
    /// Shared with the compiled selection, which a prepared SELECT keeps between executions.
    pub columns: Arc<[ColumnSpec]>,
    pub rows: Vec<Vec<Option<Bytes>>>,
    /// Present when there are more pages.
    pub paging_state: Option<Vec<u8>>,
    /// The client asked to skip metadata (it has it from PREPARE).
    pub skip_metadata: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaChangeKind {
    Created,
    Updated,
    Dropped,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaChangeTarget {
    Keyspace,
    Table,
    Type,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SchemaChangeEvent {
    pub kind: SchemaChangeKind,
    pub target: SchemaChangeTarget,
    pub keyspace: String,
    /// Table or type name; `None` for keyspace changes.
    pub name: Option<String>,
}

#[derive(Debug, Clone)]
pub enum QueryResult {
    Void,
    Rows(ResultSet),
    SetKeyspace(String),
    SchemaChange(SchemaChangeEvent),
}

/// What QUERY, EXECUTE and BATCH return: the result, and the client warnings Cassandra 5.0
/// would send with it (the native protocol's WARNING flag), in its order.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub result: QueryResult,
    pub warnings: Vec<String>,
}

/// What PREPARE returns and EXECUTE needs.
#[derive(Debug)]
pub struct PreparedInfo {
    pub id: Bytes,
    /// Protocol v5: identifies the result metadata, so a client can tell when it changed.
    pub result_metadata_id: Bytes,
    pub bind_specs: Vec<ColumnSpec>,
    /// Indexes into `bind_specs` of the partition key columns, in key order, when every
    /// partition key column is bound by a marker (lets token-aware drivers route).
    pub pk_indexes: Vec<u16>,
    pub result_columns: Vec<ColumnSpec>,
    pub(crate) statement: Statement,
    pub(crate) keyspace: Option<String>,
    /// A SELECT's compiled selection, filled by its first execution.
    pub(crate) selection: select::SelectionCache,
    /// An INSERT's plan, filled by its first execution.
    pub(crate) insert: write::InsertCache,
}

/// A statement to execute, with what its prepared form keeps between executions.
#[derive(Clone, Copy)]
struct Executable<'a> {
    statement: &'a Statement,
    /// A prepared SELECT's compiled selection; `None` for a statement that was not prepared.
    selection: Option<&'a select::SelectionCache>,
    /// A prepared INSERT's plan; `None` for a statement that was not prepared.
    insert: Option<&'a write::InsertCache>,
}

/// What a prepared statement does, for a front end that answers reads and writes of user data
/// without running them (the `ceiling` benchmark server). Executing the statement is unchanged
/// by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatementKind {
    /// A SELECT from a table of a user (non-system) keyspace; its rows would be described by
    /// [`PreparedInfo::result_columns`].
    UserRead,
    /// An INSERT, UPDATE or DELETE without `IF` conditions, or a BATCH of only such statements,
    /// on tables of user keyspaces; a successful one answers Void.
    UserWrite,
    /// Anything else: statements on system keyspaces, conditional (`IF`) writes, DDL, USE,
    /// TRUNCATE, DESCRIBE and unsupported statements.
    Other,
}

impl PreparedInfo {
    /// What this statement does; see [`StatementKind`]. The keyspace of an unqualified table is
    /// the one the statement was prepared in, as for execution.
    pub fn kind(&self) -> StatementKind {
        statement_kind(&self.statement, self.keyspace.as_deref())
    }
}

fn statement_kind(statement: &Statement, keyspace: Option<&str>) -> StatementKind {
    use cql_syntax::ast::QualifiedName;
    let user = |table: &QualifiedName| {
        match table.keyspace.as_ref().map(|k| k.as_str()).or(keyspace) {
            Some(ks) => !schema::SYSTEM_KEYSPACES.contains(&ks),
            // Cannot happen for a prepared statement (analysis needs the keyspace); not data.
            None => false,
        }
    };
    let write = |is_user: bool, conditional: bool| {
        if is_user && !conditional {
            StatementKind::UserWrite
        } else {
            StatementKind::Other
        }
    };
    match statement {
        Statement::Select(s) if user(&s.table) => StatementKind::UserRead,
        Statement::Insert(s) => write(user(&s.table), s.if_not_exists),
        Statement::Update(s) => write(user(&s.table), s.conditions.is_some()),
        Statement::Delete(s) => write(user(&s.table), s.conditions.is_some()),
        Statement::Batch(b)
            if b.statements
                .iter()
                .all(|s| statement_kind(s, keyspace) == StatementKind::UserWrite) =>
        {
            StatementKind::UserWrite
        }
        _ => StatementKind::Other,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchKind {
    Logged,
    Unlogged,
    Counter,
}

/// A statement of a BATCH request: parsed from its text, or prepared (shared with the cache,
/// with what it keeps between executions).
enum BatchStatement {
    Text(Box<Statement>),
    Prepared(Arc<PreparedInfo>),
}

#[derive(Debug, Clone)]
pub enum BatchItem {
    Query(String, BoundValues),
    Prepared(Bytes, BoundValues),
}

/// Per-connection state.
#[derive(Debug, Clone, Default)]
pub struct Session {
    pub keyspace: Option<String>,
}

/// Bound on buffered schema events per subscriber; a connection that falls further behind
/// misses events (drivers re-read the schema on reconnect anyway).
const SCHEMA_EVENT_BUFFER: usize = 256;

pub struct QueryProcessor {
    pub(crate) node: NodeInfo,
    pub(crate) schema: RwLock<Arc<Schema>>,
    /// Serialises DDL so each change applies to the schema the previous one produced.
    pub(crate) ddl_lock: tokio::sync::Mutex<()>,
    pub(crate) coordinator: Arc<Coordinator>,
    pub(crate) engine: Arc<dyn StorageEngine>,
    pub(crate) prepared: PreparedCache,
    pub(crate) events: broadcast::Sender<SchemaChangeEvent>,
    /// The commit log mode writes of durable keyspaces use.
    pub(crate) write_durability: Durability,
    pub(crate) batch_thresholds: BatchThresholds,
    /// `tombstone_warn_threshold`: a read command meeting more tombstones gets a warning.
    pub(crate) tombstone_warn_threshold: u64,
    /// `read_request_timeout` and its siblings: each request's deadline.
    pub(crate) timeouts: RequestTimeouts,
    /// The guardrails on a SELECT's IN restrictions.
    pub(crate) in_select_guardrails: InSelectGuardrails,
    last_timestamp_micros: AtomicI64,
}

/// Where the user schema is persisted in storage's meta space.
pub(crate) const SCHEMA_META_KEY: &[u8] = b"schema";

impl QueryProcessor {
    /// Builds the processor, loading the persisted user schema and adding the system keyspaces.
    pub fn open(
        node: NodeInfo,
        coordinator: Arc<Coordinator>,
        engine: Arc<dyn StorageEngine>,
        write_durability: Durability,
    ) -> Result<QueryProcessor, QueryError> {
        let mut schema = match engine
            .get_meta(SCHEMA_META_KEY)
            .map_err(|e| QueryError::Server(e.to_string()))?
        {
            Some(bytes) => Schema::from_persisted_json(&bytes)?,
            None => Schema {
                keyspaces: Default::default(),
                version: Uuid::new_v4(),
            },
        };
        for table in schema.keyspaces.values().flat_map(|k| k.tables.values()) {
            engine
                .create_table(table.id)
                .and_then(|()| engine.set_gc_grace(table.id, table.options.gc_grace_seconds))
                .map_err(|e| QueryError::Server(e.to_string()))?;
        }
        system_tables::add_system_keyspaces(&mut schema)?;
        let (events, _) = broadcast::channel(SCHEMA_EVENT_BUFFER);
        Ok(QueryProcessor {
            node,
            schema: RwLock::new(Arc::new(schema)),
            ddl_lock: tokio::sync::Mutex::new(()),
            coordinator,
            engine,
            prepared: PreparedCache::new(crate::prepared::DEFAULT_PREPARED_STATEMENTS_CACHE_BYTES),
            events,
            write_durability,
            batch_thresholds: BatchThresholds::default(),
            tombstone_warn_threshold: crate::warnings::DEFAULT_TOMBSTONE_WARN_THRESHOLD,
            timeouts: RequestTimeouts::default(),
            in_select_guardrails: InSelectGuardrails::default(),
            last_timestamp_micros: AtomicI64::new(0),
        })
    }

    /// Replaces Cassandra's default batch thresholds (`cassandra.yaml` settings).
    pub fn with_batch_thresholds(mut self, thresholds: BatchThresholds) -> QueryProcessor {
        self.batch_thresholds = thresholds;
        self
    }

    /// Replaces Cassandra's default `tombstone_warn_threshold`.
    pub fn with_tombstone_warn_threshold(mut self, threshold: u64) -> QueryProcessor {
        self.tombstone_warn_threshold = threshold;
        self
    }

    /// Replaces Cassandra's default request timeouts.
    pub fn with_request_timeouts(mut self, timeouts: RequestTimeouts) -> QueryProcessor {
        self.timeouts = timeouts;
        self
    }

    /// Bounds the prepared statement cache (`prepared_statements_cache_size`) to
    /// `capacity_bytes`; it starts empty, so call it before any PREPARE.
    pub fn with_prepared_statements_cache_size(mut self, capacity_bytes: u64) -> QueryProcessor {
        self.prepared = PreparedCache::new(capacity_bytes);
        self
    }

    /// Replaces Helenus's default guardrails on IN restrictions.
    pub fn with_in_select_guardrails(mut self, guardrails: InSelectGuardrails) -> QueryProcessor {
        self.in_select_guardrails = guardrails;
        self
    }

    pub fn schema(&self) -> Arc<Schema> {
        self.schema
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    pub fn node(&self) -> &NodeInfo {
        &self.node
    }

    pub fn subscribe_schema_events(&self) -> broadcast::Receiver<SchemaChangeEvent> {
        self.events.subscribe()
    }

    /// A write timestamp in microseconds, strictly increasing on this node so that two writes
    /// from one client in quick succession never tie (Cassandra's `ClientState` does the same).
    pub(crate) fn next_timestamp(&self) -> i64 {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as i64)
            .unwrap_or(0);
        let mut last = self.last_timestamp_micros.load(Ordering::Relaxed);
        loop {
            let next = if now > last { now } else { last + 1 };
            match self.last_timestamp_micros.compare_exchange_weak(
                last,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return next,
                Err(actual) => last = actual,
            }
        }
    }

    /// The request's `now`: the client's `now_in_seconds` (protocol v5) or the server clock.
    pub(crate) fn now_seconds(options: &QueryOptions) -> mutation::LocalTime {
        match options.now_in_seconds {
            Some(now) => now.max(0).unsigned_abs(),
            None => SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| {
                mutation::LocalTime::try_from(d.as_secs()).unwrap_or(mutation::LocalTime::MAX)
            }),
        }
    }

    /// QUERY: parse, bind and execute in one go.
    pub async fn query(
        &self,
        text: &str,
        mut options: QueryOptions,
        session: &mut Session,
    ) -> Result<Outcome, QueryError> {
        let start = RequestStart::now();
        let statement =
            cql_syntax::parse_statement(text).map_err(|e| QueryError::Syntax(e.to_string()))?;
        let keyspace = options
            .keyspace
            .clone()
            .or_else(|| session.keyspace.clone());
        let schema = self.schema();
        let info = bind::analyze(&statement, &schema, keyspace.as_deref())?;
        let values = bind::resolve_values(&info.specs, std::mem::take(&mut options.values))?;
        let run = Executable {
            statement: &statement,
            selection: None,
            insert: None,
        };
        self.outcome(run, keyspace, &values, &options, session, start)
            .await
    }

    /// PREPARE: analyse the statement and cache it.
    pub fn prepare(
        &self,
        text: &str,
        keyspace: Option<&str>,
        session: &Session,
    ) -> Result<Arc<PreparedInfo>, QueryError> {
        let keyspace = keyspace
            .map(str::to_string)
            .or_else(|| session.keyspace.clone());
        if let Some(found) = self.prepared.get_by_text(text, keyspace.as_deref()) {
            return Ok(found);
        }
        self.prepared.admit(text)?;
        let statement =
            cql_syntax::parse_statement(text).map_err(|e| QueryError::Syntax(e.to_string()))?;
        let schema = self.schema();
        let info = bind::analyze(&statement, &schema, keyspace.as_deref())?;
        let prepared = PreparedInfo {
            id: crate::prepared::statement_id(text, keyspace.as_deref()),
            result_metadata_id: crate::prepared::metadata_id(&info.result_columns),
            bind_specs: info.specs,
            pk_indexes: info.pk_indexes,
            result_columns: info.result_columns,
            statement,
            keyspace,
            selection: select::SelectionCache::default(),
            insert: write::InsertCache::default(),
        };
        Ok(self.prepared.insert(prepared, text))
    }

    pub fn prepared(&self, id: &[u8]) -> Option<Arc<PreparedInfo>> {
        self.prepared.get(id)
    }

    /// EXECUTE a prepared statement.
    pub async fn execute(
        &self,
        id: &[u8],
        options: QueryOptions,
        session: &mut Session,
    ) -> Result<Outcome, QueryError> {
        let prepared = self
            .prepared
            .get(id)
            .ok_or_else(|| QueryError::Unprepared { id: id.to_vec() })?;
        self.execute_prepared(&prepared, options, session).await
    }

    /// EXECUTE of a statement the caller already looked up (`prepared`).
    pub async fn execute_prepared(
        &self,
        prepared: &PreparedInfo,
        mut options: QueryOptions,
        session: &mut Session,
    ) -> Result<Outcome, QueryError> {
        let start = RequestStart::now();
        let values =
            bind::resolve_values(&prepared.bind_specs, std::mem::take(&mut options.values))?;
        let keyspace = prepared.keyspace.clone();
        let run = Executable {
            statement: &prepared.statement,
            selection: Some(&prepared.selection),
            insert: Some(&prepared.insert),
        };
        self.outcome(run, keyspace, &values, &options, session, start)
            .await
    }

    /// One statement executed, with the client warnings it raised.
    async fn outcome(
        &self,
        run: Executable<'_>,
        keyspace: Option<String>,
        values: &[Bound],
        options: &QueryOptions,
        session: &mut Session,
        start: RequestStart,
    ) -> Result<Outcome, QueryError> {
        let mut warnings = Vec::new();
        let result = self
            .execute_statement(
                run,
                keyspace,
                values,
                options,
                session,
                start,
                &mut warnings,
            )
            .await?;
        Ok(Outcome { result, warnings })
    }

    /// BATCH: every statement is an INSERT, UPDATE or DELETE; all their mutations are applied
    /// together (atomically on this node).
    pub async fn batch(
        &self,
        kind: BatchKind,
        items: Vec<BatchItem>,
        options: QueryOptions,
        session: &mut Session,
    ) -> Result<Outcome, QueryError> {
        let start = RequestStart::now();
        crate::write::check_batch_kind(kind == BatchKind::Counter, items.len())?;
        let keyspace = options
            .keyspace
            .clone()
            .or_else(|| session.keyspace.clone());
        let schema = self.schema();
        let timestamp = match options.timestamp {
            Some(t) => t,
            None => self.next_timestamp(),
        };
        let mut resolved = Vec::with_capacity(items.len());
        // Up to 65,535 statements, each parsed and analysed: the shard's other connections
        // get their turns meanwhile (the write's deadline is checked when it is sent).
        let mut shard = ShardTime::new();
        for item in items {
            shard.yield_if_due().await;
            let (statement, values) = match item {
                BatchItem::Query(text, values) => {
                    let statement = cql_syntax::parse_statement(&text)
                        .map_err(|e| QueryError::Syntax(e.to_string()))?;
                    let info = bind::analyze(&statement, &schema, keyspace.as_deref())?;
                    let values = bind::resolve_values(&info.specs, values)?;
                    (BatchStatement::Text(Box::new(statement)), values)
                }
                BatchItem::Prepared(id, values) => {
                    let prepared = self
                        .prepared
                        .get(&id)
                        .ok_or_else(|| QueryError::Unprepared { id: id.to_vec() })?;
                    let values = bind::resolve_values(&prepared.bind_specs, values)?;
                    (BatchStatement::Prepared(prepared), values)
                }
            };
            resolved.push((statement, values));
        }
        let now_seconds = Self::now_seconds(&options);
        let collect = |lists: Option<&write::ListState>| {
            let mut collected = write::MutationSet::default();
            for (statement, values) in &resolved {
                let (statement, ks, insert_cache) = match statement {
                    BatchStatement::Text(s) => (&**s, keyspace.as_deref(), None),
                    BatchStatement::Prepared(p) => {
                        (&p.statement, p.keyspace.as_deref(), Some(&p.insert))
                    }
                };
                let ctx = write::WriteContext {
                    schema: &schema,
                    keyspace: ks,
                    values,
                    default_timestamp: timestamp,
                    now_seconds,
                    in_batch: true,
                    lists,
                    insert_cache,
                    in_select_guardrails: &self.in_select_guardrails,
                };
                write::collect_mutations(statement, &ctx, &mut collected)?;
            }
            Ok::<_, QueryError>(collected)
        };
        let mut collected = write::collect_reading_lists(
            self,
            &schema,
            options.consistency,
            now_seconds,
            start.deadline(self.timeouts.read),
            collect,
        )
        .await?;
        let mut warnings = std::mem::take(&mut collected.warnings);
        warnings.extend(warnings::check_batch(
            &schema,
            &self.batch_thresholds,
            kind == BatchKind::Logged,
            &collected,
        )?);
        let write_type = match kind {
            BatchKind::Logged => WriteType::Batch,
            BatchKind::Unlogged | BatchKind::Counter => WriteType::UnloggedBatch,
        };
        let deadline = start.deadline(self.timeouts.write);
        write::apply(
            self,
            &schema,
            collected,
            options.consistency,
            write_type,
            deadline,
        )
        .await?;
        Ok(Outcome {
            result: QueryResult::Void,
            warnings,
        })
    }

    #[allow(clippy::too_many_arguments)] // the request's parts, each used by some statement
    async fn execute_statement(
        &self,
        run: Executable<'_>,
        keyspace: Option<String>,
        values: &[Bound],
        options: &QueryOptions,
        session: &mut Session,
        start: RequestStart,
        warnings: &mut Vec<String>,
    ) -> Result<QueryResult, QueryError> {
        let statement = run.statement;
        let schema = self.schema();
        match statement {
            Statement::Use(name) => {
                let name = name.as_str().to_string();
                if schema.keyspace(&name).is_none() {
                    return Err(QueryError::Invalid(format!(
                        "Keyspace '{name}' does not exist"
                    )));
                }
                session.keyspace = Some(name.clone());
                Ok(QueryResult::SetKeyspace(name))
            }
            Statement::Select(select) => {
                let select = select::SelectStatement {
                    select,
                    cache: run.selection,
                };
                select::execute(
                    self,
                    &schema,
                    select,
                    keyspace.as_deref(),
                    values,
                    options,
                    start,
                    warnings,
                )
                .await
            }
            Statement::Insert(_)
            | Statement::Update(_)
            | Statement::Delete(_)
            | Statement::Batch(_) => {
                let timestamp = match options.timestamp {
                    Some(t) => t,
                    None => self.next_timestamp(),
                };
                let now_seconds = Self::now_seconds(options);
                let collect = |lists: Option<&write::ListState>| {
                    let ctx = write::WriteContext {
                        schema: &schema,
                        keyspace: keyspace.as_deref(),
                        values,
                        default_timestamp: timestamp,
                        now_seconds,
                        in_batch: false,
                        lists,
                        insert_cache: run.insert,
                        in_select_guardrails: &self.in_select_guardrails,
                    };
                    let mut collected = write::MutationSet::default();
                    write::collect_mutations(statement, &ctx, &mut collected)?;
                    Ok::<_, QueryError>(collected)
                };
                let mut collected = write::collect_reading_lists(
                    self,
                    &schema,
                    options.consistency,
                    now_seconds,
                    start.deadline(self.timeouts.read),
                    collect,
                )
                .await?;
                warnings.append(&mut collected.warnings);
                let mut write_type = WriteType::Simple;
                if let Statement::Batch(batch) = statement {
                    let logged = batch.kind == cql_syntax::ast::BatchKind::Logged;
                    warnings.extend(warnings::check_batch(
                        &schema,
                        &self.batch_thresholds,
                        logged,
                        &collected,
                    )?);
                    write_type = if logged {
                        WriteType::Batch
                    } else {
                        WriteType::UnloggedBatch
                    };
                }
                let deadline = start.deadline(self.timeouts.write);
                write::apply(
                    self,
                    &schema,
                    collected,
                    options.consistency,
                    write_type,
                    deadline,
                )
                .await?;
                Ok(QueryResult::Void)
            }
            Statement::Describe(describe) => {
                describe::execute(&schema, &self.node, describe, keyspace.as_deref())
            }
            Statement::Unsupported { feature } => Err(QueryError::Invalid(format!(
                "{feature} is not supported yet by Helenus"
            ))),
            other => ddl::execute(self, other, keyspace.as_deref(), warnings).await,
        }
    }
}
