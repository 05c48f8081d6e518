//! Where data lives: the token ring, the nodes on it, and which of them replicate a token.
//!
//! Owns: [`TokenMetadata`] (every node's tokens, the sorted ring and Cassandra's ring walk,
//! this node's tokens), the [`Topology`] (endpoints with their host id, addresses, data
//! centre, rack and state), the [`Snitch`] that places this node, the typed
//! [`ReplicationStrategy`] a keyspace is parsed into once, and replica placement exactly as
//! Cassandra 5.0's `SimpleStrategy` and `NetworkTopologyStrategy` compute it. Also the minting
//! and persistence of this node's tokens ([`tokens`]), through a [`TokenStore`] the node
//! implements, so that nothing here touches a disk.
//!
//! Must not depend on: storage, schema, query, the CQL parser or the protocol, or any I/O (the
//! schema depends on this crate for the typed strategy a keyspace holds). Everything
//! here is a pure function of its inputs: a [`TokenMetadata`] is an immutable value, and a
//! change (a node joining, leaving, moving) builds a new one, as a `Schema` does.

mod snitch;
mod strategy;
mod token_metadata;
pub mod tokens;
mod topology;

pub use snitch::Snitch;
pub use strategy::ReplicationStrategy;
pub use token_metadata::TokenMetadata;
pub use tokens::TokenStore;
pub use topology::{Endpoint, HostId, Location, NodeState, Topology};

/// A token of the Murmur3 ring (`partitioner::murmur3_token`).
pub type Token = i64;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LocatorError {
    /// A token list that cannot place a node: empty, or holding the minimum token, which
    /// Cassandra's Murmur3Partitioner reserves for the start of the ring.
    #[error("invalid tokens for {host_id}: {detail}")]
    InvalidTokens { host_id: HostId, detail: String },
    /// This node cannot leave its own view of the ring.
    #[error("this node ({0}) cannot be removed from its own ring")]
    LocalEndpoint(HostId),
    /// An endpoint this token metadata does not know.
    #[error("unknown endpoint {0}")]
    UnknownEndpoint(HostId),
    /// `num_tokens` is not the count of tokens this node took at its first start: a node's
    /// tokens never change on a restart (its data would belong to other ranges), and Cassandra
    /// refuses to start, in these words.
    #[error("Cannot change the number of tokens from {stored} to {configured}")]
    TokenCountChanged { stored: usize, configured: usize },
    /// The stored tokens cannot be read back.
    #[error("corrupt stored tokens: {0}")]
    CorruptTokens(String),
    /// The token store failed to load or save.
    #[error("token store: {0}")]
    Store(String),
}
