//! A peer as a `coordinator::Replica`: each verb sent through the messaging service.

use std::sync::Arc;

use bytes::Bytes;
use coordinator::{
    Batch, BatchId, Deadline, Mutation, ReadDigest, Replica, ReplicaError, ReplicaFuture,
};
use locator::HostId;
use mutation::{ReadCommand, ReadResponse, TableId};

use crate::codec::{self, PayloadError, RemoteError};
use crate::service::{Inner, MessagingError};
use crate::verb::Verb;

/// Peer `host_id`'s replica, reached over messaging (`MessagingService::remote_replica`). The
/// coordinator holds one per peer beside the local replica.
///
/// Errors as the coordinator expects them: no response by the deadline is
/// `ReplicaError::DeadlinePassed` (the coordinator answers the timeout), the peer's own
/// replica error arrives as it was raised there, a request that did not get there or whose
/// answer cannot come back (no known address, queue full, peer refusing the handshake, peer
/// convicted by the failure detector, shutdown) is `ReplicaError::Unreachable` (the coordinator counts both as no answer), and
/// anything else (a malformed response, an oversized message) is `ReplicaError::Internal`
/// naming messaging.
#[derive(Clone)]
pub struct RemoteReplica {
    messaging: Arc<Inner>,
    peer: HostId,
}

impl RemoteReplica {
    pub(crate) fn new(messaging: Arc<Inner>, peer: HostId) -> RemoteReplica {
        RemoteReplica { messaging, peer }
    }

    /// The peer this replica sends to.
    pub fn peer(&self) -> HostId {
        self.peer
    }

    /// Sends `payload` as `verb` and decodes the success answer with `decode`.
    fn send<T: Send + 'static>(
        &self,
        verb: Verb,
        payload: Bytes,
        deadline: Deadline,
        decode: fn(&[u8]) -> Result<T, PayloadError>,
    ) -> ReplicaFuture<T> {
        let messaging = self.messaging.clone();
        let peer = self.peer;
        Box::pin(async move {
            let body = messaging
                .request(peer, verb, payload, Some(deadline))
                .await
                .map_err(replica_error)?;
            decode(&body).map_err(|e| {
                replica_error(MessagingError::MalformedResponse {
                    verb,
                    from: peer,
                    detail: e.to_string(),
                })
            })
        })
    }
}

/// A messaging failure as the coordinator's replica error (see [`RemoteReplica`]).
pub fn replica_error(e: MessagingError) -> ReplicaError {
    match e {
        MessagingError::Timeout { .. } => ReplicaError::DeadlinePassed,
        MessagingError::Remote(RemoteError::Replica(e)) => e,
        // The request did not get there, or its answer did not come back: no answer.
        e @ (MessagingError::UnknownPeer(_)
        | MessagingError::QueueFull { .. }
        | MessagingError::Refused { .. }
        | MessagingError::PeerDown { .. }
        | MessagingError::Shutdown) => ReplicaError::Unreachable(format!("messaging: {e}")),
        other => ReplicaError::Internal(format!("messaging: {other}")),
    }
}

impl Replica for RemoteReplica {
    fn apply_mutation(&self, mutation: Mutation, deadline: Deadline) -> ReplicaFuture<()> {
        let payload = codec::encode_mutation_request(&mutation);
        self.send(Verb::MUTATION, payload, deadline, codec::decode_empty)
    }

    fn read(&self, command: ReadCommand, deadline: Deadline) -> ReplicaFuture<ReadResponse> {
        let payload = codec::encode_read_request(&command);
        self.send(Verb::READ, payload, deadline, codec::decode_read_response)
    }

    fn digest(&self, command: ReadCommand, deadline: Deadline) -> ReplicaFuture<ReadDigest> {
        let payload = codec::encode_read_request(&command);
        self.send(Verb::DIGEST, payload, deadline, codec::decode_digest)
    }

    fn truncate(&self, table: TableId, deadline: Deadline) -> ReplicaFuture<()> {
        let payload = codec::encode_table_id(table);
        self.send(Verb::TRUNCATE, payload, deadline, codec::decode_empty)
    }

    fn store_batch(&self, batch: Batch, deadline: Deadline) -> ReplicaFuture<()> {
        let payload = codec::encode_batch_store_request(&batch);
        self.send(Verb::BATCH_STORE, payload, deadline, codec::decode_empty)
    }

    fn remove_batch(&self, id: BatchId, deadline: Deadline) -> ReplicaFuture<()> {
        let payload = codec::encode_batch_id(id);
        self.send(Verb::BATCH_REMOVE, payload, deadline, codec::decode_empty)
    }
}
