//! An in-process network of metadata services, for tests and simulations: messages go
//! straight to the target's `MetadataService::handle`, with faults a test sets.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use futures_util::future::BoxFuture;

use crate::service::MetadataService;
use crate::transport::{RaftTransport, TransportError};
use crate::NodeId;

/// An in-process network of metadata services, for tests: a message goes straight to the
/// target's `MetadataService::handle`. A node that is not registered (stopped) or is
/// isolated is unreachable, both ways, at once; so is a node across a cut link; and with
/// loss set, every n-th message is lost (deterministically: a count, no randomness).
#[derive(Default)]
pub struct MemoryNetwork {
    nodes: Mutex<HashMap<NodeId, Weak<MetadataService>>>,
    faults: Mutex<Faults>,
}

#[derive(Default)]
struct Faults {
    isolated: HashSet<NodeId>,
    /// Cut links, each as (lower id, higher id).
    cut: HashSet<(NodeId, NodeId)>,
    /// Lose every n-th message, counting all messages sent.
    lose_every: Option<u64>,
    sent: u64,
}

impl Faults {
    /// Whether a message from `from` to `to` is lost.
    fn lost(&mut self, from: NodeId, to: NodeId) -> bool {
        self.sent += 1;
        self.isolated.contains(&from)
            || self.isolated.contains(&to)
            || self.cut.contains(&link(from, to))
            || self.lose_every.is_some_and(|n| self.sent.is_multiple_of(n))
    }
}

fn link(a: NodeId, b: NodeId) -> (NodeId, NodeId) {
    (a.min(b), a.max(b))
}

impl MemoryNetwork {
    /// An empty network, without faults.
    pub fn new() -> Arc<MemoryNetwork> {
        Arc::new(MemoryNetwork::default())
    }

    /// The transport node `from` sends through.
    pub fn transport(self: &Arc<Self>, from: NodeId) -> Arc<dyn RaftTransport> {
        Arc::new(MemoryTransport {
            from,
            network: self.clone(),
        })
    }

    /// Makes `service` reachable (again, after a restart).
    pub fn register(&self, service: &Arc<MetadataService>) {
        self.lock_nodes()
            .insert(service.node_id(), Arc::downgrade(service));
    }

    /// Makes `node` unreachable (stopped).
    pub fn unregister(&self, node: NodeId) {
        self.lock_nodes().remove(&node);
    }

    /// Cuts `node` off: nothing reaches it and nothing it sends arrives.
    pub fn isolate(&self, node: NodeId) {
        self.lock_faults().isolated.insert(node);
    }

    /// Undoes [`MemoryNetwork::isolate`].
    pub fn heal(&self, node: NodeId) {
        self.lock_faults().isolated.remove(&node);
    }

    /// Cuts the link between `a` and `b`, both ways (a partition is a set of cut links).
    pub fn cut(&self, a: NodeId, b: NodeId) {
        self.lock_faults().cut.insert(link(a, b));
    }

    /// Undoes [`MemoryNetwork::cut`].
    pub fn mend(&self, a: NodeId, b: NodeId) {
        self.lock_faults().cut.remove(&link(a, b));
    }

    /// Loses every `n`-th message from now on (`None`: none). `n` must be at least 2 (losing
    /// everything is what `isolate` says).
    pub fn lose_every(&self, n: Option<u64>) {
        assert!(n.is_none_or(|n| n >= 2), "lose_every needs n >= 2");
        let mut faults = self.lock_faults();
        faults.lose_every = n;
        faults.sent = 0;
    }

    fn lock_nodes(&self) -> std::sync::MutexGuard<'_, HashMap<NodeId, Weak<MetadataService>>> {
        self.nodes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_faults(&self) -> std::sync::MutexGuard<'_, Faults> {
        self.faults.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

struct MemoryTransport {
    from: NodeId,
    network: Arc<MemoryNetwork>,
}

impl RaftTransport for MemoryTransport {
    fn send(
        &self,
        target: NodeId,
        _address: &str,
        message: Vec<u8>,
    ) -> BoxFuture<'static, Result<Vec<u8>, TransportError>> {
        let unreachable = move |reason: &str| TransportError::Unreachable {
            node: target,
            reason: reason.to_string(),
        };
        let lost = self.network.lock_faults().lost(self.from, target);
        let service = self
            .network
            .lock_nodes()
            .get(&target)
            .and_then(Weak::upgrade);
        Box::pin(async move {
            if lost {
                return Err(unreachable("the message was lost"));
            }
            let service = service.ok_or_else(|| unreachable("not running"))?;
            Ok(service.handle(&message).await)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_lose_what_they_say() {
        let (a, b, c) = (
            NodeId::from_u128(1),
            NodeId::from_u128(2),
            NodeId::from_u128(3),
        );
        let mut faults = Faults::default();
        faults.cut.insert(link(b, a));
        assert!(faults.lost(a, b) && faults.lost(b, a));
        assert!(!faults.lost(a, c));
        faults.isolated.insert(c);
        assert!(faults.lost(b, c) && faults.lost(c, b));
        let mut faults = Faults {
            lose_every: Some(3),
            ..Faults::default()
        };
        let lost: Vec<bool> = (0..6).map(|_| faults.lost(a, b)).collect();
        assert_eq!(lost, [false, false, true, false, false, true]);
    }
}
