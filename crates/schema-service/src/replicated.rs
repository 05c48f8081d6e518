//! The schema over the cluster metadata log (issue 35): a submission becomes a log entry, and
//! every node's state machine hands each committed schema change to this node's applier,
//! in log order, which runs the same storage actions as a local change.
//!
//! Wiring, at start: [`SchemaService::open_replicated`], then
//! `cluster_metadata::MetadataService::open(.., schema_service.applier(), ..)`, bootstrap or
//! join, then [`SchemaService::replicate_through`]. From then on `submit` proposes, and
//! answers once the change is committed and applied on this node; the compare-and-swap on
//! the version a change was decided on is the log's (every state machine refuses a stale
//! change alike), and a refused change is decided again on the newer schema, as locally.
//!
//! An entry's `change` is this module's encoding of the schema after the change:
//!
//! ```text
//! {"schema": "<Schema::to_persisted_json, as a string>", "event": <SchemaChangeEvent> | null}
//! ```

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use cluster_metadata::{
    MetadataApplier, MetadataCommand, MetadataError, MetadataService, SchemaEntry, SchemaSource,
    INITIAL_SCHEMA_VERSION,
};
use schema::{KeyspaceMetadata, Schema, SchemaError};
use serde::{Deserialize, Serialize};
use storage::StorageEngine;
use uuid::Uuid;

use crate::{
    SchemaChangeEvent, SchemaService, SchemaServiceError, SchemaUpdate, Shared, SUBMIT_ATTEMPTS,
};

/// The log a replicated schema service proposes to, and how long a proposal may take.
pub(crate) struct Log {
    metadata: Arc<MetadataService>,
    timeout: Duration,
}

#[derive(Serialize, Deserialize)]
struct EncodedChange {
    schema: String,
    event: Option<SchemaChangeEvent>,
}

/// Encodes the schema after a change, and its event, as a log entry's `change`.
pub fn encode_change(
    schema: &Schema,
    event: Option<&SchemaChangeEvent>,
) -> Result<String, SchemaServiceError> {
    let persisted = schema
        .to_persisted_json()
        .map_err(SchemaServiceError::Corrupt)?;
    let schema = String::from_utf8(persisted).expect("serde_json writes UTF-8");
    serde_json::to_string(&EncodedChange {
        schema,
        event: event.cloned(),
    })
    .map_err(|e| SchemaServiceError::Corrupt(SchemaError::Corrupt(e.to_string())))
}

/// Decodes a log entry's `change`: the schema after it (user keyspaces only) and its event.
pub fn decode_change(
    change: &str,
) -> Result<(Schema, Option<SchemaChangeEvent>), SchemaServiceError> {
    let corrupt = |e: String| SchemaServiceError::Corrupt(SchemaError::Corrupt(e));
    let encoded: EncodedChange =
        serde_json::from_str(change).map_err(|e| corrupt(e.to_string()))?;
    let schema = Schema::from_persisted_json(encoded.schema.as_bytes())
        .map_err(SchemaServiceError::Corrupt)?;
    Ok((schema, encoded.event))
}

impl SchemaService {
    /// Opens the schema as [`SchemaService::open`] does, for a node whose schema the cluster
    /// metadata log drives: a new node's empty schema is at
    /// [`INITIAL_SCHEMA_VERSION`], the log's version before its first schema change.
    pub fn open_replicated(
        engine: Arc<dyn StorageEngine>,
        system_keyspaces: Vec<KeyspaceMetadata>,
    ) -> Result<SchemaService, SchemaServiceError> {
        SchemaService::open_with(engine, system_keyspaces, INITIAL_SCHEMA_VERSION)
    }

    /// What the metadata log's state machine hands committed schema changes to: give it to
    /// `MetadataService::open`.
    pub fn applier(&self) -> Arc<dyn MetadataApplier> {
        Arc::new(LogApplier {
            shared: self.shared.clone(),
        })
    }

    /// From now on, submissions are proposed to `metadata`'s log and answered once applied
    /// here; a proposal that does not commit within `timeout` fails with the log's error
    /// (`no quorum: ...`). A node whose log has no schema yet but which has one of its own
    /// (a single node that kept its schema without the log) proposes it as the log's first
    /// schema; if another node's first change won, this node takes the log's.
    pub async fn replicate_through(
        &self,
        metadata: Arc<MetadataService>,
        timeout: Duration,
    ) -> Result<(), SchemaServiceError> {
        let log_has_schema = metadata.state().borrow().schema.is_some();
        let local = self.snapshot();
        if !log_has_schema && local.version != INITIAL_SCHEMA_VERSION {
            let entry = SchemaEntry {
                base_version: INITIAL_SCHEMA_VERSION,
                version: local.version,
                change: encode_change(&local, None)?,
            };
            match metadata
                .propose(MetadataCommand::Schema(entry), timeout)
                .await
            {
                Ok(_) | Err(MetadataError::Refused(_)) => {}
                Err(e) => return Err(SchemaServiceError::Metadata(e)),
            }
        }
        self.log
            .set(Log { metadata, timeout })
            .map_err(|_| SchemaServiceError::Internal("the schema is already replicated".into()))
    }
}

impl Log {
    /// `SchemaService::submit` through the log (the caller holds the submissions' turn).
    pub(crate) async fn submit<E>(
        &self,
        shared: &Arc<Shared>,
        mut decide: impl FnMut(&Schema) -> Result<Option<SchemaUpdate>, E>,
    ) -> Result<Option<SchemaChangeEvent>, E>
    where
        E: From<SchemaServiceError>,
    {
        let mut attempt = 1;
        loop {
            let current = shared.snapshot();
            let Some(SchemaUpdate { mut schema, event }) = decide(&current)? else {
                return Ok(None);
            };
            schema.version = Uuid::new_v4();
            let entry = SchemaEntry {
                base_version: current.version,
                version: schema.version,
                change: encode_change(&schema, Some(&event))?,
            };
            let proposed = self
                .metadata
                .propose(MetadataCommand::Schema(entry), self.timeout)
                .await;
            match proposed {
                Ok(_) => return Ok(Some(event)),
                // Another node's change came first: it is applied here by now (the log
                // answers after applying everything before this entry), so decide again.
                Err(MetadataError::Refused(_)) if attempt < SUBMIT_ATTEMPTS => attempt += 1,
                Err(e) => return Err(SchemaServiceError::Metadata(e).into()),
            }
        }
    }
}

/// Applies committed schema changes to this node (see [`MetadataApplier`]'s contract).
struct LogApplier {
    shared: Arc<Shared>,
}

impl MetadataApplier for LogApplier {
    fn apply_schema(
        &self,
        entry: SchemaEntry,
        source: SchemaSource,
    ) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'static>> {
        let shared = self.shared.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || shared.apply_committed(&entry, source))
                .await
                .map_err(|e| format!("the schema change task failed: {e}"))?
                .map_err(|e| e.to_string())
        })
    }
}

impl Shared {
    /// Makes this node's schema the entry's, from whatever it has: a no-op if it has that
    /// version already (a restart shows the last entry again). The node's own virtual
    /// keyspaces stay. An entry's change is announced; a snapshot's is not (the changes it
    /// stands for are not known one by one).
    fn apply_committed(
        &self,
        entry: &SchemaEntry,
        source: SchemaSource,
    ) -> Result<(), SchemaServiceError> {
        let (mut target, event) = decode_change(&entry.change)?;
        if target.version != entry.version {
            return Err(SchemaServiceError::Corrupt(SchemaError::Corrupt(format!(
                "a schema entry of version {} carries a schema of version {}",
                entry.version, target.version
            ))));
        }
        let _applying = self.applying.lock().unwrap_or_else(PoisonError::into_inner);
        let current = self.snapshot();
        if current.version == target.version {
            return Ok(());
        }
        for (name, keyspace) in &current.keyspaces {
            if keyspace.virtual_keyspace {
                target.keyspaces.insert(name.clone(), keyspace.clone());
            }
        }
        let event = match source {
            SchemaSource::Entry => event,
            SchemaSource::Snapshot => None,
        };
        self.transition(&current, target, event)
    }
}
