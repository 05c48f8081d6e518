//! When a request must be answered by, and what kind of write timed out.

use std::fmt;

// tokio's clock, not std's: a deterministic simulator (turmoil) or a test with paused time
// (`start_paused`) drives it, so deadlines pass in simulated time, never in real time.
use tokio::time::Instant;

/// The instant by which a request must be answered (its start plus Cassandra's
/// `read_request_timeout`, `range_request_timeout` or `write_request_timeout`). The coordinator
/// stops waiting for replicas then, and a replica does not start a read whose deadline passed;
/// the query layer checks it between the reads of a long request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Deadline(Instant);

impl Deadline {
    /// The deadline at `instant` of tokio's clock (which a simulator or paused time drives).
    pub fn at(instant: Instant) -> Deadline {
        Deadline(instant)
    }

    /// The deadline `timeout` from now (tokio's now).
    pub fn after(timeout: std::time::Duration) -> Deadline {
        Deadline(Instant::now() + timeout)
    }

    /// The instant of tokio's clock this deadline is at.
    pub fn instant(self) -> Instant {
        self.0
    }

    /// Whether the deadline has passed now.
    pub fn passed(self) -> bool {
        self.passed_at(Instant::now())
    }

    /// How long is left until the deadline (zero once it passed).
    pub fn remaining(self) -> std::time::Duration {
        self.0.saturating_duration_since(Instant::now())
    }

    /// Whether the deadline has passed at `now` (for a caller that read the clock already).
    pub fn passed_at(self, now: Instant) -> bool {
        now >= self.0
    }
}

/// The kind of a write, as the native protocol's WriteTimeout error names it
/// (`<writeType>`; the kinds Helenus has).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteType {
    /// A write of one statement, not in a batch.
    Simple,
    /// A logged batch.
    Batch,
    /// An unlogged batch.
    UnloggedBatch,
    /// The batch log write of a logged batch (its batch log endpoints did not acknowledge).
    BatchLog,
}

impl WriteType {
    pub fn as_str(self) -> &'static str {
        match self {
            WriteType::Simple => "SIMPLE",
            WriteType::Batch => "BATCH",
            WriteType::UnloggedBatch => "UNLOGGED_BATCH",
            WriteType::BatchLog => "BATCH_LOG",
        }
    }
}

impl fmt::Display for WriteType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
