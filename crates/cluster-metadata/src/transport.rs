//! How metadata messages travel: the [`RaftTransport`] trait (bytes to a node, bytes back),
//! the messages themselves, openraft's network over the trait, and [`MemoryNetwork`], an
//! in-process transport whose nodes tests can cut off.
//!
//! A message is `[format version: u8 = 1][body: JSON]`, the body a `Request` or a `Reply`
//! (openraft's AppendEntries, Vote and InstallSnapshot with their replies, this crate's
//! proposals and joins forwarded to the leader, and its pre-votes). JSON because the messages are rare and small
//! and their types come with serde; the version byte lets a later format coexist with it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::future::BoxFuture;
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::RPCOption;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, LogId, RaftNetwork, RaftNetworkFactory};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::command::{MetadataCommand, MetadataResponse};
use crate::{NodeId, TypeConfig};

/// The first byte of every message: its format.
pub const MESSAGE_FORMAT_VERSION: u8 = 1;

/// Carries a metadata message to another node and brings its reply back. The node at the
/// other end hands the bytes to its `MetadataService::handle` and sends back what that
/// returns. Implementations put their own bound on how long a send may take; the caller also
/// drops the future at its deadline.
pub trait RaftTransport: Send + Sync + 'static {
    /// Sends `message` to node `target`, reachable at `address` (the address it joined with),
    /// and returns the reply.
    fn send(
        &self,
        target: NodeId,
        address: &str,
        message: Vec<u8>,
    ) -> BoxFuture<'static, Result<Vec<u8>, TransportError>>;
}

/// A message that did not get a reply.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TransportError {
    /// No reply came: the node is down, cut off, or the message was lost or undecodable.
    #[error("node {node} is unreachable: {reason}")]
    Unreachable { node: NodeId, reason: String },
}

/// What one node asks another.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Request {
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<NodeId>),
    InstallSnapshot(InstallSnapshotRequest<TypeConfig>),
    /// A proposal forwarded to the leader, to be committed within `timeout_ms`.
    Propose {
        command: MetadataCommand,
        timeout_ms: u64,
    },
    /// A read barrier: the leader's committed index, confirmed leader by a quorum.
    ReadIndex {
        timeout_ms: u64,
    },
    /// A node asking the leader to make it a voter.
    Join {
        node: NodeId,
        address: String,
        timeout_ms: u64,
    },
    /// A candidate asking whether it may campaign (`election`). Added after the first
    /// release of this format: a node that predates it answers `Malformed`, which the
    /// candidate counts as a refusal.
    PreVote(PreVoteRequest),
}

/// The answer to a [`Request`], variant for variant.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Reply {
    AppendEntries(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    InstallSnapshot(
        Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>,
    ),
    /// The proposal's log index and what applying it answered.
    Proposed(Result<(u64, MetadataResponse), ForwardError>),
    /// The index a read barrier waits for this node to apply.
    ReadIndex(Result<Option<u64>, ForwardError>),
    /// The log index of the membership change that made the node a voter.
    Joined(Result<u64, ForwardError>),
    /// The answer to a pre-vote.
    PreVote(PreVoteResponse),
    /// The request did not decode.
    Malformed(String),
}

/// A candidate asking whether it may campaign (the thesis' PreVote RPC, sent by `election`). Answered by
/// [`PreVoteResponse`]; changes nothing at the voter.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct PreVoteRequest {
    /// Who asks.
    pub(crate) candidate: NodeId,
    /// The term it would campaign in (its term + 1): for the voter's log line only.
    pub(crate) next_term: u64,
    /// Its last log id: a voter grants only if this is at least its own.
    pub(crate) last_log_id: Option<LogId<NodeId>>,
}

/// A voter's answer to a [`PreVoteRequest`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct PreVoteResponse {
    /// Whether the candidate may count this voter in its pre-vote majority.
    pub(crate) granted: bool,
}

/// Why a forwarded proposal or join did not happen at the node it was sent to.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum ForwardError {
    /// That node is not the leader; it names the one it knows, if any.
    NotLeader {
        leader: Option<NodeId>,
        address: Option<String>,
    },
    /// It was the leader and the request did not commit within its timeout.
    Timeout,
    /// It was the leader but failed (a stopped log, a refused membership change).
    Failed(String),
}

pub(crate) fn encode<T: Serialize>(message: &T) -> Vec<u8> {
    let mut bytes = vec![MESSAGE_FORMAT_VERSION];
    serde_json::to_writer(&mut bytes, message).expect("metadata messages always serialise");
    bytes
}

pub(crate) fn decode<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> Result<T, String> {
    match bytes.split_first() {
        Some((&MESSAGE_FORMAT_VERSION, body)) => {
            serde_json::from_slice(body).map_err(|e| format!("undecodable metadata message: {e}"))
        }
        Some((version, _)) => Err(format!("unknown metadata message format {version}")),
        None => Err("empty metadata message".to_string()),
    }
}

/// Which nodes answered lately: what a timed-out proposal reports as reachable.
#[derive(Default)]
pub(crate) struct Reachability {
    /// Node → when it last answered or sent, and whether the last attempt to reach it failed.
    seen: Mutex<HashMap<NodeId, (Instant, bool)>>,
}

impl Reachability {
    pub(crate) fn record(&self, node: NodeId, reached: bool) {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.insert(node, (Instant::now(), reached));
    }

    /// Whether `node` was last heard from, successfully, within `window`.
    pub(crate) fn reachable(&self, node: NodeId, window: Duration) -> bool {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.get(&node)
            .is_some_and(|(at, reached)| *reached && at.elapsed() <= window)
    }
}

/// Sends one request and decodes its reply, noting whether the target was reached.
pub(crate) async fn call(
    transport: &dyn RaftTransport,
    reachability: &Reachability,
    target: NodeId,
    address: &str,
    request: &Request,
    timeout: Duration,
) -> Result<Reply, TransportError> {
    let sent =
        tokio::time::timeout(timeout, transport.send(target, address, encode(request))).await;
    let reply = match sent {
        Ok(Ok(bytes)) => decode::<Reply>(&bytes).map_err(|reason| TransportError::Unreachable {
            node: target,
            reason,
        }),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(TransportError::Unreachable {
            node: target,
            reason: format!("no reply within {} ms", timeout.as_millis()),
        }),
    };
    reachability.record(target, reply.is_ok());
    reply
}

/// openraft's network: one [`NetworkClient`] per target, over the transport.
pub(crate) struct NetworkFactory {
    pub(crate) transport: Arc<dyn RaftTransport>,
    pub(crate) reachability: Arc<Reachability>,
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = NetworkClient;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> NetworkClient {
        NetworkClient {
            target,
            address: node.addr.clone(),
            transport: self.transport.clone(),
            reachability: self.reachability.clone(),
        }
    }
}

/// Sends openraft's messages to one node.
pub(crate) struct NetworkClient {
    target: NodeId,
    address: String,
    transport: Arc<dyn RaftTransport>,
    reachability: Arc<Reachability>,
}

type RpcResult<T, E = openraft::error::Infallible> =
    Result<T, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>;

impl NetworkClient {
    async fn send<E: std::error::Error>(
        &self,
        request: Request,
        option: &RPCOption,
    ) -> Result<Reply, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>> {
        call(
            &*self.transport,
            &self.reachability,
            self.target,
            &self.address,
            &request,
            option.hard_ttl(),
        )
        .await
        .map_err(|e| RPCError::Unreachable(Unreachable::new(&e)))
    }

    fn unexpected<T, E: std::error::Error>(
        &self,
        reply: Reply,
    ) -> Result<T, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>> {
        let error = TransportError::Unreachable {
            node: self.target,
            reason: format!("unexpected reply {reply:?}"),
        };
        Err(RPCError::Network(NetworkError::new(&error)))
    }

    fn remote<T, E: std::error::Error>(
        &self,
        result: Result<T, RaftError<NodeId, E>>,
    ) -> Result<T, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>> {
        result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for NetworkClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>> {
        match self.send(Request::AppendEntries(rpc), &option).await? {
            Reply::AppendEntries(result) => self.remote(result),
            other => self.unexpected(other),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
        match self.send(Request::InstallSnapshot(rpc), &option).await? {
            Reply::InstallSnapshot(result) => self.remote(result),
            other => self.unexpected(other),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>> {
        match self.send(Request::Vote(rpc), &option).await? {
            Reply::Vote(result) => self.remote(result),
            other => self.unexpected(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use openraft::Vote;

    use super::*;

    #[test]
    fn a_message_round_trips_and_a_bad_one_is_an_error_not_a_panic() {
        let request = Request::Vote(VoteRequest::new(Vote::new(3, NodeId::from_u128(1)), None));
        let bytes = encode(&request);
        assert_eq!(bytes[0], MESSAGE_FORMAT_VERSION);
        let decoded: Request = decode(&bytes).expect("decodes");
        assert_eq!(format!("{decoded:?}"), format!("{request:?}"));
        for cut in 0..bytes.len() {
            assert!(decode::<Request>(&bytes[..cut]).is_err(), "{cut} bytes");
        }
        let mut other_version = bytes.clone();
        other_version[0] = 2;
        assert_eq!(
            decode::<Request>(&other_version).expect_err("unknown"),
            "unknown metadata message format 2"
        );
    }
}
