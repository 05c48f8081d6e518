//! The schema service (ScyllaDB's `migration_manager`): the one owner of the node's schema.
//!
//! Owns: the current schema, an immutable `Arc<Schema>` snapshot that every request reads
//! ([`SchemaService::snapshot`]); loading it at start and persisting every change in storage's
//! meta space; the local storage actions a change implies (a table's storage created, dropped,
//! its `gc_grace_seconds` set); and the announcement of each change, the schema change events
//! that connections registered for `SCHEMA_CHANGE` receive ([`SchemaService::subscribe`]).
//!
//! What a change is, is decided elsewhere: `query`'s DDL validates a statement against a
//! snapshot and builds the new `Schema`, in Cassandra's words when it refuses. It submits that
//! decision here ([`SchemaService::submit`]). Changes apply one at a time, in order, each only
//! to the schema version it was decided on, and a submitter is answered once its change is
//! applied. That is the shape of the replicated metadata log to come (issue 35): a submission
//! becomes a log entry ([`SchemaChange`]), and every node applies the same entries in the same
//! order ([`SchemaService::apply`]), running the same storage actions, which it derives from the
//! schemas before and after, so an entry needs to carry nothing else.
//!
//! Over the cluster metadata log (`replicated.rs`, `cluster-metadata`): opened with
//! [`SchemaService::open_replicated`] and wired with [`SchemaService::applier`] and
//! [`SchemaService::replicate_through`], `submit` proposes the decided change as a log entry
//! and answers once it is committed and applied here; every node's state machine hands each
//! committed change to the applier, in log order, which runs the same storage actions. Alone
//! (`open`), the service works as before.
//!
//! Must not depend on: the CQL parser, the query layer, the protocol, or RocksDB (storage is
//! reached only through `storage::StorageEngine`); the metadata log only through
//! `cluster-metadata`'s `MetadataService` and `MetadataApplier`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};

use cluster_metadata::MetadataError;
use mutation::TableId;
use schema::{KeyspaceMetadata, Schema, SchemaError};
use serde::{Deserialize, Serialize};
use storage::{StorageEngine, StorageError};
use tokio::sync::broadcast;
use uuid::Uuid;

mod replicated;

pub use replicated::{decode_change, encode_change};

/// Where the user schema is persisted in storage's meta space (as JSON, `Schema::to_persisted_json`).
pub const SCHEMA_META_KEY: &[u8] = b"schema";

/// Bound on buffered schema events per subscriber; a connection that falls further behind
/// misses events (drivers re-read the schema on reconnect anyway).
pub const SCHEMA_EVENT_BUFFER: usize = 256;

/// How many times a submission decides again when its change met a schema changed since it
/// looked. On one node submissions are serialised, so that takes a change still being applied
/// for a submitter that stopped waiting for it (its application completes): one retry each.
/// Bounded so that a submission cannot go round for ever.
const SUBMIT_ATTEMPTS: usize = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SchemaChangeKind {
    Created,
    Updated,
    Dropped,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SchemaChangeTarget {
    Keyspace,
    Table,
    Type,
}

/// What a schema change announces (the native protocol's `SCHEMA_CHANGE` event and result).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SchemaChangeEvent {
    pub kind: SchemaChangeKind,
    pub target: SchemaChangeTarget,
    pub keyspace: String,
    /// Table or type name; `None` for keyspace changes.
    pub name: Option<String>,
}

/// What a DDL statement decided from the schema it was shown: the whole schema after the change
/// (its version is the service's to set) and the event announcing it.
#[derive(Debug, Clone)]
pub struct SchemaUpdate {
    pub schema: Schema,
    pub event: SchemaChangeEvent,
}

/// A change ready to apply: what an entry of the metadata log will carry. Applying it gives
/// every node the same schema, version included.
#[derive(Debug, Clone)]
pub struct SchemaChange {
    /// The version of the schema the change was decided on: it applies to that one only.
    pub base_version: Uuid,
    /// The schema after the change, with its new version.
    pub schema: Schema,
    pub event: SchemaChangeEvent,
}

#[derive(Debug, thiserror::Error)]
pub enum SchemaServiceError {
    /// Reading the persisted schema, or preparing its tables' storage, failed at start.
    #[error("{0}")]
    Load(StorageError),
    /// The persisted schema does not decode, or a schema does not encode.
    #[error("{0}")]
    Corrupt(SchemaError),
    /// Storage refused the change before it was persisted: the schema is unchanged.
    #[error("could not persist the schema change: {0}")]
    Persist(StorageError),
    /// The change was decided on another version than the current one (a change applied
    /// meanwhile); deciding it again on the current schema may succeed.
    #[error(
        "the schema changed (to version {current}) since this change was decided on version {base}"
    )]
    Conflict { base: Uuid, current: Uuid },
    #[error("the schema change task failed: {0}")]
    Internal(String),
    /// The cluster metadata log did not commit the change (no quorum, a timeout, a stopped
    /// log), or refused it more times than a submission decides again.
    #[error("{0}")]
    Metadata(MetadataError),
}

/// The node's schema, and the one writer of it.
pub struct SchemaService {
    shared: Arc<Shared>,
    /// Serialises submissions: each decides on the schema the one before it applied, so two
    /// CREATE TABLEs of one name racing see each other (the second finds the table), as under
    /// `query`'s former DDL lock.
    submissions: tokio::sync::Mutex<()>,
    /// Set once the schema is replicated through the cluster metadata log
    /// ([`SchemaService::replicate_through`]): submissions then become log entries.
    log: OnceLock<replicated::Log>,
}

/// What a change's application (on the blocking pool) shares with the service.
struct Shared {
    engine: Arc<dyn StorageEngine>,
    current: RwLock<Arc<Schema>>,
    /// Held while one change is applied: changes apply one at a time, each checked against the
    /// schema the previous one left.
    applying: Mutex<()>,
    events: broadcast::Sender<SchemaChangeEvent>,
}

impl SchemaService {
    /// Loads the persisted user schema (a new, empty one on a new node), prepares its tables'
    /// storage and their `gc_grace_seconds`, and adds `system_keyspaces` (node-served virtual
    /// keyspaces: never persisted, no storage). Runs storage calls on the calling thread: call
    /// it at start, before serving.
    pub fn open(
        engine: Arc<dyn StorageEngine>,
        system_keyspaces: Vec<KeyspaceMetadata>,
    ) -> Result<SchemaService, SchemaServiceError> {
        SchemaService::open_with(engine, system_keyspaces, Uuid::new_v4())
    }

    /// Loads the schema as `open` does, with the version a new node's empty schema gets:
    /// a random one alone, [`cluster_metadata::INITIAL_SCHEMA_VERSION`] for a node whose
    /// schema the metadata log will drive (`open_replicated`), so the first change a node
    /// decides applies on every node.
    fn open_with(
        engine: Arc<dyn StorageEngine>,
        system_keyspaces: Vec<KeyspaceMetadata>,
        empty_version: Uuid,
    ) -> Result<SchemaService, SchemaServiceError> {
        let mut schema = match engine
            .get_meta(SCHEMA_META_KEY)
            .map_err(SchemaServiceError::Load)?
        {
            Some(bytes) => {
                Schema::from_persisted_json(&bytes).map_err(SchemaServiceError::Corrupt)?
            }
            None => Schema {
                keyspaces: BTreeMap::new(),
                version: empty_version,
            },
        };
        for (id, grace) in stored_tables(&schema) {
            engine
                .create_table(id)
                .and_then(|()| engine.set_gc_grace(id, grace))
                .map_err(SchemaServiceError::Load)?;
        }
        for keyspace in system_keyspaces {
            assert!(
                keyspace.virtual_keyspace,
                "system keyspace {} must be virtual: it is not persisted and has no storage",
                keyspace.name
            );
            schema
                .keyspaces
                .insert(keyspace.name.clone(), Arc::new(keyspace));
        }
        let (events, _) = broadcast::channel(SCHEMA_EVENT_BUFFER);
        Ok(SchemaService {
            shared: Arc::new(Shared {
                engine,
                current: RwLock::new(Arc::new(schema)),
                applying: Mutex::new(()),
                events,
            }),
            submissions: tokio::sync::Mutex::new(()),
            log: OnceLock::new(),
        })
    }

    /// The current schema. Cheap (a reference count), for every request; the value never
    /// changes: a change swaps in a new one.
    pub fn snapshot(&self) -> Arc<Schema> {
        self.shared.snapshot()
    }

    /// Schema change events from now on, each once its change is applied. A receiver that
    /// falls more than [`SCHEMA_EVENT_BUFFER`] events behind misses the oldest (`Lagged`).
    pub fn subscribe(&self) -> broadcast::Receiver<SchemaChangeEvent> {
        self.shared.events.subscribe()
    }

    /// Decides and applies one change. `decide` is shown the current schema and returns the
    /// update it makes, `None` for none (`IF NOT EXISTS` on what exists), or the caller's
    /// error; it may be shown a newer schema again if the schema changed before its update
    /// applied. Answers once the change is applied (persisted, in force, announced), with the
    /// event that announced it.
    pub async fn submit<E>(
        &self,
        mut decide: impl FnMut(&Schema) -> Result<Option<SchemaUpdate>, E>,
    ) -> Result<Option<SchemaChangeEvent>, E>
    where
        E: From<SchemaServiceError>,
    {
        let _turn = self.submissions.lock().await;
        if let Some(log) = self.log.get() {
            return log.submit(&self.shared, decide).await;
        }
        let mut attempt = 1;
        loop {
            let current = self.snapshot();
            let Some(SchemaUpdate { mut schema, event }) = decide(&current)? else {
                return Ok(None);
            };
            schema.version = Uuid::new_v4();
            let change = SchemaChange {
                base_version: current.version,
                schema,
                event: event.clone(),
            };
            match self.apply(change).await {
                Ok(()) => return Ok(Some(event)),
                Err(SchemaServiceError::Conflict { .. }) if attempt < SUBMIT_ATTEMPTS => {
                    attempt += 1;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Applies one change, after those before it, on this node alone (the log's state
    /// machine goes through [`SchemaService::applier`] instead, and a replicated service
    /// refuses this: its changes go through the log). A change decided on another
    /// version than the current one is refused (`Conflict`) and changes nothing. Storage is
    /// prepared first (a created table's storage exists before the schema names it), then the
    /// schema is persisted, put in force and announced, then a dropped table's storage goes
    /// (the schema stops naming it before its data goes). If storage fails before the schema
    /// is persisted, the schema stays as it was. Runs on the blocking pool, and runs to the
    /// end even if the caller stops waiting.
    pub async fn apply(&self, change: SchemaChange) -> Result<(), SchemaServiceError> {
        if self.log.get().is_some() {
            return Err(SchemaServiceError::Internal(
                "the schema is replicated: a change goes through the metadata log (submit)"
                    .to_string(),
            ));
        }
        let shared = self.shared.clone();
        tokio::task::spawn_blocking(move || shared.apply(change))
            .await
            .map_err(|e| SchemaServiceError::Internal(e.to_string()))?
    }
}

impl Shared {
    fn snapshot(&self) -> Arc<Schema> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn apply(&self, change: SchemaChange) -> Result<(), SchemaServiceError> {
        let _applying = self.applying.lock().unwrap_or_else(PoisonError::into_inner);
        let current = self.snapshot();
        if change.base_version != current.version {
            return Err(SchemaServiceError::Conflict {
                base: change.base_version,
                current: current.version,
            });
        }
        self.transition(&current, change.schema, Some(change.event))
    }

    /// Moves the schema from `current` (in force; the caller holds `applying`) to `target`:
    /// storage prepared, the schema persisted, put in force and announced (when there is an
    /// event), then dropped tables' storage dropped and every grace set.
    fn transition(
        &self,
        current: &Schema,
        target: Schema,
        event: Option<SchemaChangeEvent>,
    ) -> Result<(), SchemaServiceError> {
        let before = stored_tables(current);
        let after = stored_tables(&target);
        let persisted = target
            .to_persisted_json()
            .map_err(SchemaServiceError::Corrupt)?;
        for id in after.keys().filter(|id| !before.contains_key(id)) {
            self.engine
                .create_table(*id)
                .map_err(SchemaServiceError::Persist)?;
        }
        self.engine
            .put_meta(SCHEMA_META_KEY, &persisted)
            .map_err(SchemaServiceError::Persist)?;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(target);
        if let Some(event) = event {
            // Nobody subscribed is fine: no connection registered for events.
            let _ = self.events.send(event);
        }
        // The change is persisted and in force: what follows cannot undo it, so a failure is
        // logged (a dropped table's storage left behind; a grace not updated until restart).
        let dropped: BTreeSet<&TableId> =
            before.keys().filter(|id| !after.contains_key(id)).collect();
        for id in dropped {
            if let Err(e) = self.engine.drop_table(*id) {
                tracing::error!(table = %id, error = %e, "cannot drop a dropped table's storage");
            }
        }
        // Every table's grace, so a CREATE or an ALTER of gc_grace_seconds reaches compaction
        // (cheap: one store per table, and schema changes are rare).
        for (id, grace) in after {
            if let Err(e) = self.engine.set_gc_grace(id, grace) {
                tracing::error!(table = %id, error = %e, "cannot set a table's gc_grace_seconds");
            }
        }
        Ok(())
    }
}

/// The tables of `schema` that have storage (not the node-served virtual ones), with their
/// `gc_grace_seconds`.
fn stored_tables(schema: &Schema) -> BTreeMap<TableId, i32> {
    schema
        .keyspaces
        .values()
        .filter(|k| !k.virtual_keyspace)
        .flat_map(|k| k.tables.values())
        .filter(|t| !t.virtual_table)
        .map(|t| (t.id, t.options.gc_grace_seconds))
        .collect()
}

#[cfg(test)]
mod tests;
