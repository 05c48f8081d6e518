//! The processor's vocabulary, shared by its callers and its stages: bound values, request
//! options, results, prepared statements, sessions and the node's own facts. Depends on nothing
//! else in this crate, so every stage can use it without reaching back into the processor.

use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use bytes::Bytes;
use coordinator::ConsistencyLevel;
use cql_syntax::ast::Statement;
use locator::{Endpoint, HostId, TokenMetadata};
use schema_service::SchemaChangeEvent;
use uuid::Uuid;

/// Cassandra's default `storage_port`, which a [`NodeInfo`] built by [`NodeInfo::new`] reports.
pub const DEFAULT_STORAGE_PORT: u16 = 7000;

/// What membership (gossip) knows about another node beyond its place in the ring: the
/// `system.peers` and `system.peers_v2` columns the ring does not hold, and whether the node is
/// up. Cassandra's gossip application states `RELEASE_VERSION`, `SCHEMA`,
/// `INTERNAL_ADDRESS_AND_PORT` and the failure detector's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerDetails {
    /// The port the peer's internode messaging listens on (`peers_v2.peer_port`).
    pub storage_port: u16,
    /// The Cassandra release the peer reports (`release_version`); `None` until gossip says.
    pub release_version: Option<String>,
    /// The peer's schema version (`schema_version`); `None` until gossip says.
    pub schema_version: Option<Uuid>,
    /// The address to reach the peer on inside its data centre (`preferred_ip`,
    /// `preferred_port`), when it differs from its broadcast address.
    pub preferred_address: Option<SocketAddr>,
    /// Whether the failure detector deems the peer up. The peers tables list a ring member up
    /// or down, as Cassandra's do.
    pub up: bool,
}

/// Every peer's [`PeerDetails`], by host id. Peers of the ring without an entry are listed
/// with what the ring knows and nulls for the rest.
pub type PeerDetailsMap = BTreeMap<HostId, PeerDetails>;

/// Facts about this node and the cluster that system tables report. Cloning shares the live
/// ring and peer details: membership stores new values into `token_metadata` and
/// `peer_details`, and every reader (every clone) sees them from its next read.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    pub cluster_name: String,
    pub release_version: String,
    /// `listen_address`: what `system.local.listen_address` shows (the ring holds the
    /// broadcast address).
    pub listen_address: IpAddr,
    /// `storage_port`: `system.local`'s `listen_port` and `broadcast_port`.
    pub storage_port: u16,
    /// This start's gossip generation (`system.local.gossip_generation`): seconds since the
    /// epoch at start, greater than any earlier start's.
    pub gossip_generation: i32,
    /// The ring as the locator has it: this node's host id, addresses, data centre, rack and
    /// tokens (its local endpoint), and every other node (`system.peers`). Membership swaps
    /// new rings in; a request loads one and reads that consistent value throughout.
    pub token_metadata: Arc<ArcSwap<TokenMetadata>>,
    /// What gossip knows of each peer beyond the ring, swapped in whole like the ring.
    pub peer_details: Arc<ArcSwap<PeerDetailsMap>>,
    /// This node's batch log, which `system.batches` shows (`None`: the table is empty).
    pub batchlog: Option<BatchlogView>,
}

/// This node's stored batches as `system.batches` reads them (`replica::BatchlogStorage` in a
/// node). Reading scans the batch log: small, as batches are removed once applied.
#[derive(Clone)]
pub struct BatchlogView(pub Arc<dyn coordinator::BatchlogStore>);

impl std::fmt::Debug for BatchlogView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BatchlogView")
    }
}

impl NodeInfo {
    /// A node whose listen address is its broadcast address in `token_metadata`, on Cassandra's
    /// default storage port, with gossip generation 0 and no peer details: what a node that
    /// is alone (a test, the benchmark ceiling) reports. Fields can be set after.
    pub fn new(
        cluster_name: impl Into<String>,
        release_version: impl Into<String>,
        token_metadata: Arc<TokenMetadata>,
    ) -> NodeInfo {
        NodeInfo {
            cluster_name: cluster_name.into(),
            release_version: release_version.into(),
            listen_address: token_metadata.local_endpoint().broadcast_address,
            storage_port: DEFAULT_STORAGE_PORT,
            gossip_generation: 0,
            token_metadata: Arc::new(ArcSwap::new(token_metadata)),
            peer_details: Arc::new(ArcSwap::from_pointee(PeerDetailsMap::new())),
            batchlog: None,
        }
    }

    /// The ring now. Hold the returned value for the whole of a request, so it reads one ring.
    pub fn ring(&self) -> Arc<TokenMetadata> {
        self.token_metadata.load_full()
    }

    /// The peer details now.
    pub fn peers(&self) -> Arc<PeerDetailsMap> {
        self.peer_details.load_full()
    }

    /// This node as the ring knows it now.
    pub fn local(&self) -> Endpoint {
        self.token_metadata.load().local_endpoint().clone()
    }

    /// This node's data centre.
    pub fn data_center(&self) -> String {
        self.token_metadata
            .load()
            .local_endpoint()
            .location
            .datacenter
            .clone()
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

impl QueryOptions {
    /// The request's `now`: the client's `now_in_seconds` (protocol v5) or the server clock.
    pub(crate) fn now_seconds(&self) -> mutation::LocalTime {
        match self.now_in_seconds {
            Some(now) => now.max(0).unsigned_abs(),
            None => SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| {
                mutation::LocalTime::try_from(d.as_secs()).unwrap_or(mutation::LocalTime::MAX)
            }),
        }
    }
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
    /// A SELECT's compiled selection or an INSERT's plan, filled by its first execution.
    pub(crate) plan: PlanCache,
}

/// What a prepared statement's executions compile once and share (a SELECT's selection, an
/// INSERT's column positions), kept with the schema version it was compiled against: a
/// statement's plan depends only on its text, its keyspace and the schema, and every schema
/// change gets a new version. The plan's type is the stage's own (`select`, `write`), which
/// this module does not know: a statement only ever stores one type, and a plan of another
/// type is compiled again as if it were stale. A failed compilation is not kept: the error is
/// the statement's until the schema changes, and is found again on each execution.
#[derive(Default)]
pub(crate) struct PlanCache {
    planned: Mutex<Option<(Uuid, Arc<dyn Any + Send + Sync>)>>,
}

impl PlanCache {
    /// The plan compiled for `version`, compiling it with `compile` if there is none.
    pub(crate) fn get_or_compile<T: Any + Send + Sync, E>(
        &self,
        version: Uuid,
        compile: impl FnOnce() -> Result<T, E>,
    ) -> Result<Arc<T>, E> {
        let mut planned = self.planned.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((planned_version, plan)) = planned.as_ref() {
            if *planned_version == version {
                if let Ok(plan) = Arc::clone(plan).downcast::<T>() {
                    return Ok(plan);
                }
            }
        }
        let plan = Arc::new(compile()?);
        *planned = Some((version, plan.clone()));
        Ok(plan)
    }
}

impl fmt::Debug for PlanCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let planned = self.planned.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("PlanCache")
            .field("version", &planned.as_ref().map(|(version, _)| *version))
            .finish()
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_is_kept_for_its_schema_version_and_type() {
        let cache = PlanCache::default();
        let (v1, v2) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let first = cache.get_or_compile(v1, || Ok::<_, ()>(1u32)).unwrap();
        let again = cache.get_or_compile(v1, || Ok::<_, ()>(2u32)).unwrap();
        assert!(
            Arc::ptr_eq(&first, &again),
            "the same version shares the plan"
        );
        let other_type = cache.get_or_compile(v1, || Ok::<_, ()>("text")).unwrap();
        assert_eq!(
            *other_type, "text",
            "a plan of another type is compiled again"
        );
        let newer = cache.get_or_compile(v2, || Ok::<_, ()>(3u32)).unwrap();
        assert_eq!(*newer, 3, "a new schema version compiles again");
    }

    #[test]
    fn a_failed_compilation_is_not_kept() {
        let cache = PlanCache::default();
        let version = Uuid::from_u128(1);
        assert_eq!(
            cache.get_or_compile(version, || Err::<u32, _>("bad")),
            Err("bad")
        );
        let plan = cache
            .get_or_compile(version, || Ok::<_, &str>(7u32))
            .unwrap();
        assert_eq!(*plan, 7);
    }
}
