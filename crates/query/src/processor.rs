//! The query processor: the entry point the server calls for QUERY, PREPARE, EXECUTE, BATCH.

use std::sync::Arc;

use coordinator::{Coordinator, WriteType};
use cql_syntax::ast::Statement;
use schema::Schema;
use schema_service::SchemaService;

use crate::bind::{self, Bound};
use crate::interface::{
    BatchItem, BatchKind, NodeInfo, Outcome, PlanCache, PreparedInfo, QueryOptions, QueryResult,
    Session,
};
use crate::limits::{InSelectGuardrails, RequestStart, RequestTimeouts, ShardTime};
use crate::prepared::PreparedCache;
use crate::warnings::BatchThresholds;
use crate::{analyze, ddl, describe, select, warnings, write, QueryError};

/// A statement to execute, with what its prepared form keeps between executions.
#[derive(Clone, Copy)]
struct Executable<'a> {
    statement: &'a Statement,
    /// A prepared SELECT's compiled selection or INSERT's plan; `None` for a statement that
    /// was not prepared.
    plan: Option<&'a PlanCache>,
}

/// A statement of a BATCH request: parsed from its text, or prepared (shared with the cache,
/// with what it keeps between executions).
enum BatchStatement {
    Text(Box<Statement>),
    Prepared(Arc<PreparedInfo>),
}

pub struct QueryProcessor {
    pub(crate) node: NodeInfo,
    /// The schema's owner: every request reads a snapshot of it, DDL is submitted to it.
    pub(crate) schema: Arc<SchemaService>,
    pub(crate) coordinator: Arc<Coordinator>,
    pub(crate) prepared: PreparedCache,
    pub(crate) batch_thresholds: BatchThresholds,
    /// `tombstone_warn_threshold`: a read command meeting more tombstones gets a warning.
    pub(crate) tombstone_warn_threshold: u64,
    /// `read_request_timeout` and its siblings: each request's deadline.
    pub(crate) timeouts: RequestTimeouts,
    /// The guardrails on a SELECT's IN restrictions.
    pub(crate) in_select_guardrails: InSelectGuardrails,
}

impl QueryProcessor {
    /// Builds the processor over the node's schema service (opened with
    /// [`crate::system_keyspaces`]) and its coordinator, through which every read, write and
    /// TRUNCATE goes.
    pub fn open(
        node: NodeInfo,
        schema: Arc<SchemaService>,
        coordinator: Arc<Coordinator>,
    ) -> QueryProcessor {
        QueryProcessor {
            node,
            schema,
            coordinator,
            prepared: PreparedCache::new(crate::prepared::DEFAULT_PREPARED_STATEMENTS_CACHE_BYTES),
            batch_thresholds: BatchThresholds::default(),
            tombstone_warn_threshold: crate::warnings::DEFAULT_TOMBSTONE_WARN_THRESHOLD,
            timeouts: RequestTimeouts::default(),
            in_select_guardrails: InSelectGuardrails::default(),
        }
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

    /// The current schema (a snapshot; see [`SchemaService::snapshot`]).
    pub fn schema(&self) -> Arc<Schema> {
        self.schema.snapshot()
    }

    pub fn node(&self) -> &NodeInfo {
        &self.node
    }

    /// A write timestamp in microseconds for a statement whose client gave none: the
    /// coordinator's per-node clock, strictly increasing so that two writes from one client in
    /// quick succession never tie (Cassandra's `ClientState.getTimestamp`).
    pub(crate) fn next_timestamp(&self) -> i64 {
        self.coordinator.next_timestamp()
    }

    /// What a SELECT needs of this processor, against the schema snapshot `schema`.
    fn read_context<'a>(&'a self, schema: &'a Schema) -> select::execution::ReadContext<'a> {
        select::execution::ReadContext {
            schema,
            coordinator: &self.coordinator,
            node: &self.node,
            timeouts: &self.timeouts,
            in_select_guardrails: &self.in_select_guardrails,
            tombstone_warn_threshold: self.tombstone_warn_threshold,
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
        let info = analyze::analyze(&statement, &schema, keyspace.as_deref())?;
        let values = bind::resolve_values(&info.specs, std::mem::take(&mut options.values))?;
        let run = Executable {
            statement: &statement,
            plan: None,
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
        let info = analyze::analyze(&statement, &schema, keyspace.as_deref())?;
        let prepared = PreparedInfo {
            id: crate::prepared::statement_id(text, keyspace.as_deref()),
            result_metadata_id: crate::prepared::metadata_id(&info.result_columns),
            bind_specs: info.specs,
            pk_indexes: info.pk_indexes,
            result_columns: info.result_columns,
            statement,
            keyspace,
            plan: PlanCache::default(),
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
            plan: Some(&prepared.plan),
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
                    let info = analyze::analyze(&statement, &schema, keyspace.as_deref())?;
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
        let now_seconds = options.now_seconds();
        let collect = |lists: Option<&write::ListState>| {
            let mut collected = write::MutationSet::default();
            for (statement, values) in &resolved {
                let (statement, ks, insert_cache) = match statement {
                    BatchStatement::Text(s) => (&**s, keyspace.as_deref(), None),
                    BatchStatement::Prepared(p) => {
                        (&p.statement, p.keyspace.as_deref(), Some(&p.plan))
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
            &self.coordinator,
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
            collected.partitions.values(),
        )?);
        // A LOGGED batch goes through the batch log (`send_mutations` with write type BATCH:
        // `Coordinator::write_logged_batch`).
        let write_type = match kind {
            BatchKind::Logged => WriteType::Batch,
            BatchKind::Unlogged | BatchKind::Counter => WriteType::UnloggedBatch,
        };
        let deadline = start.deadline(self.timeouts.write);
        write::send_mutations(
            &self.coordinator,
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
                let select = select::execution::SelectStatement {
                    select,
                    cache: run.plan,
                };
                select::execution::execute(
                    self.read_context(&schema),
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
                let now_seconds = options.now_seconds();
                let collect = |lists: Option<&write::ListState>| {
                    let ctx = write::WriteContext {
                        schema: &schema,
                        keyspace: keyspace.as_deref(),
                        values,
                        default_timestamp: timestamp,
                        now_seconds,
                        in_batch: false,
                        lists,
                        insert_cache: run.plan,
                        in_select_guardrails: &self.in_select_guardrails,
                    };
                    let mut collected = write::MutationSet::default();
                    write::collect_mutations(statement, &ctx, &mut collected)?;
                    Ok::<_, QueryError>(collected)
                };
                let mut collected = write::collect_reading_lists(
                    &self.coordinator,
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
                        collected.partitions.values(),
                    )?);
                    write_type = if logged {
                        WriteType::Batch
                    } else {
                        WriteType::UnloggedBatch
                    };
                }
                let deadline = start.deadline(self.timeouts.write);
                write::send_mutations(
                    &self.coordinator,
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
            other => {
                let next_timestamp = || self.next_timestamp();
                let ctx = ddl::DdlContext {
                    schema: &self.schema,
                    coordinator: &self.coordinator,
                    node: &self.node,
                    prepared: &self.prepared,
                    next_timestamp: &next_timestamp,
                    truncate_deadline: start.deadline(self.timeouts.truncate),
                };
                ddl::execute(&ctx, other, keyspace.as_deref(), warnings).await
            }
        }
    }
}
