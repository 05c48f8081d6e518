//! Cluster metadata in Raft (ScyllaDB's group 0, Cassandra's transactional cluster metadata):
//! schema changes and token ownership are entries of one replicated log, and every node
//! applies the committed entries in the same order. Consensus is openraft's (0.9, its
//! storage-v2 API); this crate gives it storage, a network, and a state machine.
//!
//! Owns:
//! - the commands and the deterministic state they build ([`command`]: a schema change with
//!   the version it was decided on, refused alike everywhere when stale; a node's tokens and
//!   ring state, refused when they clash);
//! - the durable Raft state in the node's metadata directory ([`LogStore`]: vote, log,
//!   committed and purged log ids; [`StateMachine`]: the applied state and the snapshot),
//!   checksummed files, fsynced, never RocksDB;
//! - the messages between nodes behind [`RaftTransport`] (bytes in, bytes out), with
//!   [`MemoryNetwork`] for in-process tests;
//! - [`MetadataService`]: bootstrap or join, `propose` (forwarded to the leader, answered
//!   once applied here, or with a clear error at its timeout), the applied state's watch;
//! - when a node campaigns (`election`): pre-vote and a fresh random election timeout
//!   each time, around openraft, whose own election timer is off.
//!
//! A node's schema service implements [`MetadataApplier`]: the state machine hands it every
//! applied schema change, in log order, on every node.
//!
//! Must not depend on: storage (RocksDB), the schema service, the query layer, CQL. Time is
//! tokio's (a simulator can drive it); the network is the transport trait; the election
//! timeouts are drawn from [`MetadataRuntime`]'s thread-local generator, which a simulation
//! seeds ([`seed_rng`]).

// openraft's traits fix the error types (`StorageError`, `RPCError`, a few hundred bytes):
// the helpers that build them return what the traits must.
#![allow(clippy::result_large_err)]

pub mod command;
#[cfg(test)]
mod crash_tests;
mod election;
#[cfg(test)]
mod election_tests;
mod files;
mod log_store;
mod memory_network;
mod runtime;
mod service;
mod state_machine;
mod transport;

use std::io::Cursor;

pub use command::{
    token_metadata, MetadataCommand, MetadataResponse, MetadataState, NodeOwnership,
    OwnershipState, SchemaEntry, TokenMapError, INITIAL_SCHEMA_VERSION,
};
pub use log_store::LogStore;
pub use memory_network::MemoryNetwork;
pub use runtime::{seed_rng, MetadataRuntime, ThreadRng};
pub use service::{MetadataConfig, MetadataError, MetadataService};
pub use state_machine::{MetadataApplier, NoApplier, SchemaSource, StateMachine};
pub use transport::{RaftTransport, TransportError, MESSAGE_FORMAT_VERSION};

/// A node's id in the metadata group: its host id (Cassandra's), stable for its life.
pub type NodeId = uuid::Uuid;

openraft::declare_raft_types!(
    /// The types openraft runs the metadata log with.
    pub TypeConfig:
        D = MetadataCommand,
        R = MetadataResponse,
        NodeId = NodeId,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = MetadataRuntime,
);

/// One entry of the metadata log.
pub type Entry = openraft::Entry<TypeConfig>;
