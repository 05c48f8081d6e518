//! The hook for hinted handoff (issue 36): where the coordinator hands over a mutation that a
//! replica failed or did not acknowledge in time, to be stored as a hint and replayed once the
//! replica is back (Cassandra's `StorageProxy.submitHint`). Only the interface lives here; the
//! hint store, its files, window and replay belong to a `hints` crate of their own.

use std::sync::Arc;

use crate::{Mutation, Replica, ReplicaError};

/// Why a replica missed a mutation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MissedWrite {
    /// The replica did not acknowledge it by the request's deadline (it may still apply it).
    TimedOut,
    /// The replica answered with an error. Cassandra hints only writes that time out or
    /// whose replica is down; whether to keep a hint of this one is the hint store's call (a
    /// replay would often meet the same error; one for a dropped table is discarded).
    Failed(ReplicaError),
}

/// Receives every mutation a replica missed. `Coordinator::write` calls it once per replica
/// that failed or timed out, before answering the client, and must not wait on it: an
/// implementation queues the hint and stores it on a task of its own. (With a cluster, a
/// replica known to be down when the write starts is handed over here too, and ANY is met by
/// a stored hint.)
pub trait HintedHandoff: Send + Sync + 'static {
    fn write_missed(&self, replica: &Arc<dyn Replica>, mutation: &Mutation, why: MissedWrite);
}

/// Stores no hints: the coordinator's default while the ring has one node, whose only replica
/// is this node's storage, which finishes a timed out mutation in its own task anyway (see
/// `Replica::apply_mutation`) and whose errors are its storage's, which a replay would meet
/// again.
pub struct NoHints;

impl HintedHandoff for NoHints {
    fn write_missed(&self, _: &Arc<dyn Replica>, _: &Mutation, _: MissedWrite) {}
}
