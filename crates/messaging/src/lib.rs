//! Internode messaging: how the nodes of a Helenus cluster ask each other for things
//! (Cassandra's `org.apache.cassandra.net`, ScyllaDB's `message/`).
//!
//! Owns: the frame format (`frame`: header with verb, request id, deadline, lengths and
//! checksums; lz4 above a size; a size cap), the handshake (`handshake`: protocol version,
//! cluster name, host id, broadcast address, the acceptor's start generation; another
//! cluster's node is refused), the verbs
//! (`verb`) and their payloads (`codec`: the replica verbs carry `mutation::wire`'s
//! encodings), and the [`MessagingService`]: a listener, two lazily opened, one-way
//! connections per peer and lane (small and large messages, as Cassandra 4.0; a lane per CQL
//! shard and one for the main runtime, so a request's hops stay on one thread per node:
//! `lanes`), reconnection with capped
//! jittered backoff, bounded outbound queues that drop (and count by verb) when full, requests
//! waiting for responses until their deadline, peers the failure detector convicts failing
//! their requests at once and left undialled until they are up (`mark_down`, `mark_up`),
//! connections to a restarted peer's old process (the acceptance carries its start
//! generation) replaced at once with their queues kept (`peer_restarted`), a peer whose
//! process is gone (an open connection lost, and the redial refused by the operating system)
//! reported at once to a listener the node wires to gossip (`on_peer_gone`), with one
//! connection kept open to each live peer so that an idle one is noticed too
//! (`keep_connected`), and
//! the serving of peers' requests: replica
//! verbs through a `coordinator::Replica` (the node's `replica::LocalReplica`), other verbs
//! through handlers other crates register. [`RemoteReplica`] is a peer as a
//! `coordinator::Replica`.
//!
//! Simulation-ready: the network ([`Network`]), randomness ([`RandomSource`]) and an outbound
//! hook for fault injection ([`OutboundInterceptor`]) come in through [`Environment`]; time is
//! `tokio::time`.
//!
//! Must not depend on: `storage`, `replica` (both only as dev-dependencies, for end-to-end
//! tests), `query`, the CQL crates. Bytes from a peer never panic the node: every decoder
//! checks lengths before use, and a malformed frame closes only its connection.

mod codec;
mod environment;
mod frame;
mod handshake;
mod inbound;
mod lanes;
mod log_limit;
mod metrics;
mod network;
mod options;
mod outbound;
mod remote;
mod service;
mod untrusted;
mod verb;

pub use codec::{RemoteError, MAX_ERROR_MESSAGE_BYTES};
pub use environment::{
    reconnect_delay, Environment, FaultInjector, Interception, LinkFault, NoInterception,
    OutboundInterceptor, RandomSource, SplitMix64, VerbFilter,
};
pub use frame::{
    decode_frame, encode_frame, Frame, FrameError, FrameKind, FRAME_HEADER_BYTES,
    MAX_FRAME_PAYLOAD_BYTES, PROTOCOL_VERSION,
};
pub use handshake::ConnectionType;
pub use metrics::{MessagingMetrics, VerbCounts};
pub use network::{Listener, Network, NetworkFuture, Stream, TcpNetwork};
pub use options::MessagingOptions;
pub use remote::{replica_error, RemoteReplica};
pub use service::{
    HandlerError, HandlerFuture, MessagingConfig, MessagingError, MessagingService,
    PeerGoneListener, VerbHandler,
};
pub use untrusted::check_decoders;
pub use verb::{Verb, MAX_VERB_ID};
