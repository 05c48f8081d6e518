//! Membership and failure detection: which nodes the cluster has, what each publishes about
//! itself, and which are up.
//!
//! Owns: this node's [`Membership`] in the cluster's gossip, run by chitchat (quickwit's
//! scuttlebutt gossip with a phi-accrual failure detector) over its `Transport` (UDP on the
//! node's storage port; an in-memory channel in tests; `sim`'s own, routed through its
//! faults, in the simulation); the keys a node publishes ([`state`]'s table: state, data
//! centre, rack, native address, tokens, schema and release versions; host id, generation
//! and broadcast address are chitchat's node id); the
//! [`ClusterView`] built from them (every node known, by host id, up or down, and the
//! `locator::TokenMetadata` it makes); and the [`MembershipEvent`]s drivers are told of
//! (TOPOLOGY_CHANGE `NEW_NODE`/`REMOVED_NODE`, STATUS_CHANGE `UP`/`DOWN`), each change once;
//! and [`follow_liveness`], what a follower of the failure detector (messaging, in the node
//! and in the simulation) is told of each peer: restarted, up, down.
//!
//! Cassandra's rules kept: `phi_convict_threshold` means what it means in Cassandra (its phi,
//! not chitchat's; see `membership.rs`); a restarted node gossips under a new generation and
//! replaces its old one, even from a new address; a node once known stays known when down and
//! keeps its tokens in the ring; a node of another `cluster_name` is never admitted; after a
//! pause of this node longer than `max_local_pause`, no peer up before it is marked down until
//! the pause is that long behind (`pause.rs`).
//!
//! Beside phi, a peer is convicted at once on proof that its process is gone
//! ([`Membership::convict`], [`Convicter`]: the node wires messaging's "connection lost and
//! redial refused" to it): liveness is chitchat's live and not locally convicted, and a local
//! conviction holds until the peer heartbeats again or restarts (`conviction.rs`).
//!
//! Must not depend on: storage, schema, query, the coordinator or the protocol; it depends on
//! `locator` for the vocabulary of nodes and rings. Time is tokio's (`tokio::time`, so paused
//! and simulated clocks drive it) and the network is chitchat's injectable `Transport`.
//! Chitchat picks its gossip partners with its own random generator (`rand::rng()`), which
//! cannot be injected: the simulation seeds it through the process's `getrandom`
//! (`sim`'s `entropy`).

mod conviction;
mod events;
mod liveness;
mod membership;
mod pause;
mod state;
mod view;

pub use chitchat::transport::{ChannelTransport, Transport, UdpTransport};
pub use events::{EventKind, MembershipEvent};
pub use liveness::{follow_liveness, PeerChange};
pub use membership::{
    Convicter, Membership, MembershipConfig, CONVICTION_QUEUE_CAPACITY, DEFAULT_GOSSIP_INTERVAL,
    DEFAULT_MAX_LOCAL_PAUSE, DEFAULT_PHI_CONVICT_THRESHOLD, EVENT_CHANNEL_CAPACITY,
};
pub use state::{decode_tokens, encode_tokens, Member, MAX_TOKENS_PER_NODE};
pub use view::ClusterView;

use std::net::SocketAddr;

/// Why membership could not start or take a change.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GossipError {
    /// A configuration or a change this node cannot gossip (the message says which setting).
    #[error("{0}")]
    InvalidConfig(String),
    /// The transport could not open the gossip socket (the address is taken, or not this
    /// machine's).
    #[error("cannot start gossip on {address}: {detail}")]
    Start { address: SocketAddr, detail: String },
}
