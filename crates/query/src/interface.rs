//! The processor's vocabulary, shared by its callers and its stages: bound values, request
//! options, results, prepared statements, sessions and the node's own facts. Depends on nothing
//! else in this crate, so every stage can use it without reaching back into the processor.

use std::net::IpAddr;
use std::sync::Arc;

use bytes::Bytes;
use coordinator::ConsistencyLevel;
use cql_syntax::ast::Statement;
use uuid::Uuid;

use crate::processor::SchemaChangeEvent;
use crate::{select, write};

/// Facts about this node that system tables report.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    pub cluster_name: String,
    pub host_id: Uuid,
    pub listen_address: IpAddr,
    pub rpc_address: IpAddr,
    pub native_port: u16,
    pub data_center: String,
    pub rack: String,
    pub tokens: Vec<i64>,
    pub release_version: String,
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
