//! The state machine (openraft's `RaftStateMachine`): applies committed entries, in log order,
//! to the [`MetadataState`], hands each applied schema change to this node's
//! [`MetadataApplier`] (the schema service), publishes the state after each entry, and keeps
//! the snapshot.
//!
//! Files in the metadata directory (`files.rs` describes their bytes):
//! - `state`: the applied state ([`StoredState`]: last applied log id, membership, the
//!   metadata), rewritten after every entry that changes it, *after* the applier has run. A
//!   crash between the two replays that one entry at restart, so an applier must take an entry
//!   whose version it already has as done (see [`MetadataApplier`]).
//! - `snapshot`: the last snapshot ([`StoredSnapshot`]: its meta and the state it holds).

use std::io::{self, Cursor};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use futures_util::future::BoxFuture;
use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    BasicNode, EntryPayload, LogId, RaftSnapshotBuilder, SnapshotMeta, StorageError,
    StorageIOError, StoredMembership,
};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::command::{MetadataCommand, MetadataResponse, MetadataState, SchemaEntry};
use crate::files;
use crate::{Entry, NodeId, TypeConfig};

const STATE_FILE: &str = "state";
const SNAPSHOT_FILE: &str = "snapshot";

/// Why the applier is shown a schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaSource {
    /// A committed entry, applied in log order: announce it.
    Entry,
    /// A snapshot installed to catch up: the schema replaces whatever this node had, and the
    /// changes between are not announced one by one.
    Snapshot,
}

/// What this node does with each committed schema change: the schema service implements it,
/// running the change's storage actions and putting the schema in force. Called on every node
/// for every applied schema entry, in log order, one at a time; never for a refused one.
///
/// Contract: make this node's schema the entry's (`entry.version`), from whatever it has. An
/// entry whose version this node already has is done (a restart may show the last entry
/// again). An error stops this node's metadata log (openraft treats a state machine error as
/// fatal): the node then refuses metadata changes until it is restarted, when the entry is
/// applied again.
pub trait MetadataApplier: Send + Sync + 'static {
    /// Applies `entry`; see the trait's contract.
    fn apply_schema(
        &self,
        entry: SchemaEntry,
        source: SchemaSource,
    ) -> BoxFuture<'static, Result<(), String>>;

    /// Observes every entry this node's state machine applies, in log order: its index, its
    /// command (`None`: an entry of Raft's own, blank or membership) and what applying it
    /// answered. Called synchronously, right after the entry's effect is recorded (before the
    /// `state` file is written for a blank entry, which a crash may make it replay), never for
    /// entries a snapshot covers. A restart applies again the entries after what the `state`
    /// file holds. For tests and the simulation, which check that every node applies the same
    /// log; the default does nothing.
    fn entry_applied(
        &self,
        index: u64,
        command: Option<&MetadataCommand>,
        response: &MetadataResponse,
    ) {
        let _ = (index, command, response);
    }
}

/// An applier that does nothing: for a node whose schema is not (yet) driven by the log, and
/// for tests that look at the state only.
pub struct NoApplier;

impl MetadataApplier for NoApplier {
    fn apply_schema(
        &self,
        _: SchemaEntry,
        _: SchemaSource,
    ) -> BoxFuture<'static, Result<(), String>> {
        Box::pin(async { Ok(()) })
    }
}

/// The `state` file: everything applied so far.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StoredState {
    /// The last entry applied.
    pub applied: Option<LogId<NodeId>>,
    /// The last membership applied (the group's voters and learners).
    pub membership: StoredMembership<NodeId, BasicNode>,
    /// What the applied entries built.
    pub state: MetadataState,
}

/// The `snapshot` file: a snapshot's meta and the state it holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredSnapshot {
    /// Up to which entry, and with which membership.
    pub meta: SnapshotMeta<NodeId, BasicNode>,
    /// The state the entries up to it built.
    pub state: MetadataState,
}

/// How far the state machine's files go, for the log store, which must not purge an entry
/// the state machine could still need after a crash: openraft purges the log up to an
/// installed snapshot as soon as it has handed the snapshot to the state machine, not once
/// the state machine has saved it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Persisted {
    /// The `state` file holds everything applied up to this index (`None`: nothing).
    Upto(Option<u64>),
    /// The state machine failed (openraft stops on it): it will save nothing more.
    Failed,
}

/// The state machine of one node.
pub struct StateMachine {
    dir: PathBuf,
    stored: StoredState,
    /// What the `state` file holds, published after every write of it.
    persisted: watch::Sender<Persisted>,
    applier: Arc<dyn MetadataApplier>,
    published: watch::Sender<Arc<MetadataState>>,
    /// Serialises writes of the `snapshot` file by the builder and by an install.
    snapshot_lock: Arc<Mutex<()>>,
}

impl StateMachine {
    /// Opens the state machine in `dir` (the applied state is empty on a new node), and the
    /// watch it publishes its state on.
    pub fn open(
        dir: &Path,
        applier: Arc<dyn MetadataApplier>,
    ) -> io::Result<(StateMachine, watch::Receiver<Arc<MetadataState>>)> {
        std::fs::create_dir_all(dir)?;
        let mut stored: StoredState = files::read_value(dir, STATE_FILE)?.unwrap_or_default();
        // An install writes the snapshot, then the state: a crash between leaves the
        // snapshot ahead, and the log (purged, or never holding the entries between) cannot
        // bring the state up to it. The snapshot's applier call came before it was written.
        let snapshot: Option<StoredSnapshot> = files::read_value(dir, SNAPSHOT_FILE)?;
        if let Some(snapshot) = snapshot {
            let index = |l: Option<LogId<NodeId>>| l.map(|l| l.index);
            if index(snapshot.meta.last_log_id) > index(stored.applied) {
                tracing::info!(
                    "{}: the snapshot up to {:?} is ahead of the applied state ({:?}); \
                     resuming from the snapshot",
                    dir.display(),
                    snapshot.meta.last_log_id,
                    stored.applied
                );
                stored = StoredState {
                    applied: snapshot.meta.last_log_id,
                    membership: snapshot.meta.last_membership,
                    state: snapshot.state,
                };
                files::write_value(dir, STATE_FILE, &stored)?;
            }
        }
        let (published, receiver) = watch::channel(Arc::new(stored.state.clone()));
        let (persisted, _) = watch::channel(Persisted::Upto(stored.applied.map(|l| l.index)));
        Ok((
            StateMachine {
                dir: dir.to_path_buf(),
                stored,
                persisted,
                applier,
                published,
                snapshot_lock: Arc::new(Mutex::new(())),
            },
            receiver,
        ))
    }

    /// The last log id applied (what the `state` file records): open the log with it
    /// ([`crate::LogStore::open`]).
    pub fn applied(&self) -> Option<LogId<NodeId>> {
        self.stored.applied
    }

    /// Follows what the `state` file holds ([`Persisted`]); the log store waits on it before
    /// a purge.
    pub(crate) fn persisted(&self) -> watch::Receiver<Persisted> {
        self.persisted.subscribe()
    }

    fn persist(&self) -> Result<(), StorageError<NodeId>> {
        files::write_value(&self.dir, STATE_FILE, &self.stored)
            .map_err(|e| StorageIOError::write_state_machine(&e))?;
        self.persisted
            .send_replace(Persisted::Upto(self.stored.applied.map(|l| l.index)));
        Ok(())
    }

    /// Marks the state machine failed when `result` is an error (openraft stops on it), so
    /// that a purge waiting for it gives up.
    fn failed_if<T>(
        &self,
        result: Result<T, StorageError<NodeId>>,
    ) -> Result<T, StorageError<NodeId>> {
        if result.is_err() {
            self.persisted.send_replace(Persisted::Failed);
        }
        result
    }

    fn publish(&self) {
        self.published
            .send_replace(Arc::new(self.stored.state.clone()));
    }

    async fn apply_one(&mut self, entry: Entry) -> Result<MetadataResponse, StorageError<NodeId>> {
        self.stored.applied = Some(entry.log_id);
        let index = entry.log_id.index;
        let response = match entry.payload {
            EntryPayload::Blank => {
                let response = MetadataResponse::Applied;
                self.applier.entry_applied(index, None, &response);
                return Ok(response);
            }
            EntryPayload::Membership(membership) => {
                self.stored.membership = StoredMembership::new(Some(entry.log_id), membership);
                MetadataResponse::Applied
            }
            EntryPayload::Normal(command) => {
                let before = self.stored.state.schema_version();
                let response = self.stored.state.apply(&command);
                // A repeated change (applied, changing nothing) is not handed over again:
                // this node may have moved past it.
                let changed = self.stored.state.schema_version() != before;
                if let (true, MetadataCommand::Schema(schema)) = (changed, &command) {
                    self.applier
                        .apply_schema(schema.clone(), SchemaSource::Entry)
                        .await
                        .map_err(|e| StorageIOError::apply(entry.log_id, &io::Error::other(e)))?;
                }
                self.persist()?;
                self.applier.entry_applied(index, Some(&command), &response);
                self.publish();
                return Ok(response);
            }
        };
        self.persist()?;
        self.applier.entry_applied(index, None, &response);
        self.publish();
        Ok(response)
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, StoredMembership<NodeId, BasicNode>), StorageError<NodeId>>
    {
        Ok((self.stored.applied, self.stored.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<MetadataResponse>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let mut responses = Vec::new();
        for entry in entries {
            let response = self.apply_one(entry).await;
            responses.push(self.failed_if(response)?);
        }
        // Blank entries are not written one by one; the applied log id catches up here (and
        // replaying a blank entry after a crash changes nothing).
        let persisted = self.persist();
        self.failed_if(persisted)?;
        Ok(responses)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        SnapshotBuilder {
            dir: self.dir.clone(),
            stored: self.stored.clone(),
            snapshot_lock: self.snapshot_lock.clone(),
        }
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<NodeId>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<NodeId>> {
        let installed = self.install(meta, snapshot).await;
        self.failed_if(installed)
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        let stored: Option<StoredSnapshot> = files::read_value(&self.dir, SNAPSHOT_FILE)
            .map_err(|e| StorageIOError::read_snapshot(None, &e))?;
        stored.map(to_snapshot).transpose()
    }
}

impl StateMachine {
    async fn install(
        &mut self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<NodeId>> {
        let signature = Some(meta.signature());
        let state: MetadataState = serde_json::from_slice(snapshot.get_ref())
            .map_err(|e| StorageIOError::read_snapshot(signature.clone(), &e))?;
        if let Some(schema) = state.schema.clone() {
            self.applier
                .apply_schema(schema, SchemaSource::Snapshot)
                .await
                .map_err(|e| {
                    StorageIOError::write_snapshot(signature.clone(), &io::Error::other(e))
                })?;
        }
        let stored = StoredSnapshot {
            meta: meta.clone(),
            state: state.clone(),
        };
        write_snapshot(&self.dir, &self.snapshot_lock, &stored)
            .map_err(|e| StorageIOError::write_snapshot(signature, &e))?;
        self.stored = StoredState {
            applied: meta.last_log_id,
            membership: meta.last_membership.clone(),
            state,
        };
        self.persist()?;
        self.publish();
        Ok(())
    }
}

/// Builds a snapshot of the state as it was when the builder was made.
pub struct SnapshotBuilder {
    dir: PathBuf,
    stored: StoredState,
    snapshot_lock: Arc<Mutex<()>>,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        let snapshot_id = match self.stored.applied {
            Some(log_id) => format!("{}-{}", log_id.leader_id, log_id.index),
            None => "empty".to_string(),
        };
        let stored = StoredSnapshot {
            meta: SnapshotMeta {
                last_log_id: self.stored.applied,
                last_membership: self.stored.membership.clone(),
                snapshot_id,
            },
            state: self.stored.state.clone(),
        };
        write_snapshot(&self.dir, &self.snapshot_lock, &stored)
            .map_err(|e| StorageIOError::write_snapshot(Some(stored.meta.signature()), &e))?;
        to_snapshot(stored)
    }
}

fn write_snapshot(dir: &Path, lock: &Mutex<()>, stored: &StoredSnapshot) -> io::Result<()> {
    let _writing = lock.lock().unwrap_or_else(PoisonError::into_inner);
    files::write_value(dir, SNAPSHOT_FILE, stored)
}

fn to_snapshot(stored: StoredSnapshot) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
    let data = serde_json::to_vec(&stored.state)
        .map_err(|e| StorageIOError::read_snapshot(Some(stored.meta.signature()), &e))?;
    Ok(Snapshot {
        meta: stored.meta,
        snapshot: Box::new(Cursor::new(data)),
    })
}
