//! The seam between the coordinator and the cluster: which endpoints have a [`Replica`] to send
//! requests to, and which of them are up. Membership (gossip's failure detector) and messaging
//! (a `RemoteReplica` per peer) implement [`Endpoints`] for a cluster; [`SingleNode`] is this
//! node alone, every other endpoint counting as down.

use std::sync::Arc;

use locator::HostId;

use crate::Replica;

/// Which endpoints the coordinator can reach and which are up. Asked on every request, so an
/// implementation answers from memory without waiting (a map read, an atomic load).
///
/// An endpoint counts as live for a request when it is alive and has a replica: a request is
/// sent only to live endpoints, and a write's share for any other goes to hinted handoff.
pub trait Endpoints: Send + Sync + 'static {
    /// The replica that serves `endpoint`'s requests (this node's storage for this node, a
    /// transport to the peer for another), or `None` if there is none (no connection yet).
    fn replica(&self, endpoint: HostId) -> Option<Arc<dyn Replica>>;
    /// Whether the failure detector holds `endpoint` up (Cassandra's `FailureDetector.isAlive`).
    fn is_alive(&self, endpoint: HostId) -> bool;
}

/// This node alone: its own replica is the only one, and every other endpoint is down. What a
/// node runs until membership and messaging give it peers (and what `Coordinator::new` uses).
pub struct SingleNode {
    local: HostId,
    replica: Arc<dyn Replica>,
}

impl SingleNode {
    /// `replica` serves `local`, this node's host id.
    pub fn new(local: HostId, replica: Arc<dyn Replica>) -> SingleNode {
        SingleNode { local, replica }
    }
}

impl Endpoints for SingleNode {
    fn replica(&self, endpoint: HostId) -> Option<Arc<dyn Replica>> {
        (endpoint == self.local).then(|| self.replica.clone())
    }

    fn is_alive(&self, endpoint: HostId) -> bool {
        endpoint == self.local
    }
}
