//! The hook for hinted handoff (issue 36): where the coordinator hands over a mutation that a
//! replica was down for, failed, or did not acknowledge in time, to be stored as a hint and
//! replayed once the replica is back (Cassandra's `StorageProxy.submitHint`). Only the
//! interface lives here; the hint store, its files, window and replay belong to a `hints` crate
//! of their own.

use locator::HostId;

use crate::{Mutation, ReplicaError};

/// Why a replica missed a mutation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MissedWrite {
    /// The replica was down (or unreachable) when the write started: it was not sent.
    Down,
    /// The replica did not acknowledge it by the request's deadline (it may still apply it).
    TimedOut,
    /// The replica answered with an error. Cassandra hints only writes that time out or
    /// whose replica is down; whether to keep a hint of this one is the hint store's call (a
    /// replay would often meet the same error; one for a dropped table is discarded).
    Failed(ReplicaError),
}

/// Receives every mutation a replica missed: `Coordinator::write` calls it once per replica
/// endpoint that was down when the write started (with that replica's share of the write),
/// and once per replica that failed or timed out (before answering the client, or from the
/// write's background task for replicas still outstanding once the level was met). It must not
/// wait: an implementation queues the hint and stores it on a task of its own.
pub trait HintedHandoff: Send + Sync + 'static {
    /// Hands over `mutation`, which `target` missed. Answers whether a hint is kept (stored or
    /// queued to be): at consistency level ANY a kept hint of a replica that was down
    /// (`MissedWrite::Down`) counts as the write's acknowledgement, as Cassandra's hint write
    /// does; `false` (hints disabled, the target's hint window passed) counts for nothing.
    fn write_missed(&self, target: HostId, mutation: &Mutation, why: MissedWrite) -> bool;

    /// Blocks until every hint kept so far is written and fsynced (Cassandra's
    /// `HintsService.flushAndFsyncBlockingly`, which the batch log's replay runs before it
    /// deletes the batches it hinted: a batch is never gone before its hints are durable).
    /// `false` if they could not be made durable (the hints directory failing). Blocking file
    /// I/O: call it from a blocking thread. By default there is nothing to sync.
    fn make_durable(&self) -> bool {
        true
    }
}

/// Stores no hints: the coordinator's default (as Cassandra with `hinted_handoff_enabled:
/// false`). A write at ANY whose replicas are all down then times out, as Cassandra's does
/// without hints.
pub struct NoHints;

impl HintedHandoff for NoHints {
    fn write_missed(&self, _: HostId, _: &Mutation, _: MissedWrite) -> bool {
        false
    }
}
