//! Speculative retry of partition reads (Cassandra's `AbstractReadExecutor` with its
//! `SpeculatingReadExecutor`, `AlwaysSpeculatingReadExecutor` and `NeverSpeculatingReadExecutor`):
//! when the replicas a read contacted have not answered within the table's
//! `speculative_retry` threshold, the read goes to one more replica, the closest one not
//! contacted, and the first sufficient answers win. The extra replica gets a digest request
//! if the data has already come, else a data request. With ALWAYS it is contacted at once,
//! and the two closest replicas get data requests. EACH_QUORUM and range scans never
//! speculate, as in Cassandra.

use std::future::Future;
use std::pin::Pin;

use futures_util::stream::{FuturesUnordered, StreamExt};
use mutation::{ReadCommand, ReadResponse, TableId};
use schema::{KeyspaceMetadata, SpeculativeRetry};
use tokio::time::Instant;

use crate::read::{Contact, ReadLevel};
use crate::stats::TableStats;
use crate::{read_digest, ConsistencyLevel, Coordinator, CoordinatorError, Deadline, ReadDigest};
use crate::{ReplicaError, ReplicaFuture};

/// When (and whether) a partition read sends to one more replica.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Speculation {
    /// Never (`NEVER`, EACH_QUORUM, a threshold past the deadline, or no other replica where
    /// none could be: ALL, or a single replica).
    Never,
    /// At once, with the first requests (`ALWAYS`).
    Always,
    /// At this instant, if the read is not answered by then.
    At(Instant),
    /// It would at this instant, but no other live replica is there to ask: counted as
    /// Cassandra's `speculativeInsufficientReplicas`.
    Insufficient(Instant),
}

/// What the replicas contacted for a partition read answered, once enough did.
pub(crate) struct Gathered {
    /// The first data response.
    pub data: ReadResponse,
    /// The digests of the other responses (a second data response's own digest too).
    pub digests: Vec<ReadDigest>,
    /// The replicas that answered, in the order they did: a digest mismatch reads from them.
    pub answered: Vec<Contact>,
}

type Answering =
    Pin<Box<dyn Future<Output = (usize, Result<Answer, ReplicaError>)> + Send + 'static>>;

enum Answer {
    Data(ReadResponse),
    Digest(ReadDigest),
}

/// A data or digest request to contact `n`, as a future of its answer.
fn request(
    n: usize,
    contact: &Contact,
    command: &ReadCommand,
    deadline: Deadline,
    data: bool,
) -> Answering {
    if data {
        let read: ReplicaFuture<ReadResponse> = contact.1.read(command.clone(), deadline);
        Box::pin(async move { (n, read.await.map(Answer::Data)) })
    } else {
        let digest = contact.1.digest(command.clone(), deadline);
        Box::pin(async move { (n, digest.await.map(Answer::Digest)) })
    }
}

impl Coordinator {
    /// How a read of `table` at `consistency` may speculate: its `speculative_retry` policy and
    /// latency-derived threshold, whether an uncontacted live replica (`has_extra`) is there,
    /// and whether any could be (`more_replicas`: the partition has replicas beyond those
    /// contacted, live or not).
    #[allow(clippy::too_many_arguments)] // the read's parts
    pub(crate) fn speculation(
        &self,
        keyspace: &KeyspaceMetadata,
        table: TableId,
        consistency: ConsistencyLevel,
        has_extra: bool,
        more_replicas: bool,
        started: Instant,
        deadline: Deadline,
        stats: &TableStats,
    ) -> Speculation {
        if consistency == ConsistencyLevel::EachQuorum || keyspace.virtual_keyspace {
            return Speculation::Never;
        }
        // Not has_extra and no other replica at all (a single node, RF 1), or ALL (which
        // contacts every replica): nothing to speculate to by design, nothing to count.
        if !has_extra && (!more_replicas || consistency == ConsistencyLevel::All) {
            return Speculation::Never;
        }
        let policy = keyspace
            .tables
            .values()
            .find(|t| t.id == table)
            .map_or_else(SpeculativeRetry::default, |t| t.options.speculative_retry);
        let threshold = match policy {
            SpeculativeRetry::Never => return Speculation::Never,
            SpeculativeRetry::Always if has_extra => return Speculation::Always,
            SpeculativeRetry::Always => std::time::Duration::ZERO,
            other => other
                .threshold(|p| stats.percentile_latency(p), self.unmeasured_threshold)
                .expect("a threshold policy has a threshold"),
        };
        let at = started + threshold;
        // Cassandra does not speculate when its threshold is past the request's timeout.
        if at >= deadline.instant() {
            return Speculation::Never;
        }
        if has_extra {
            Speculation::At(at)
        } else {
            Speculation::Insufficient(at)
        }
    }
}

/// Sends a partition read to `contacts` (data from the first, or from the first two with
/// ALWAYS; digests from the rest), speculates to `extra` as `speculation` says, and waits until
/// `level.block_for` replicas answered, the data among them, or until `deadline` (a
/// `ReadTimeout`). A replica that cannot answer (`is_no_answer`) fails the read at once only if
/// the others can no longer make up the level; another error fails it at once.
pub(crate) async fn gather(
    mut contacts: Vec<Contact>,
    mut extra: Option<Contact>,
    mut speculation: Speculation,
    command: &ReadCommand,
    level: ReadLevel,
    deadline: Deadline,
    stats: &TableStats,
) -> Result<Gathered, CoordinatorError> {
    use std::sync::atomic::Ordering::Relaxed;
    if speculation == Speculation::Always {
        if let Some(extra) = extra.take() {
            contacts.push(extra);
            stats.speculative_retries.fetch_add(1, Relaxed);
        }
    }
    let data_requests = if speculation == Speculation::Always && contacts.len() > 1 {
        2
    } else {
        1
    };
    let mut pending: FuturesUnordered<Answering> = contacts
        .iter()
        .enumerate()
        .map(|(n, contact)| request(n, contact, command, deadline, n < data_requests))
        .collect();
    let mut data: Option<ReadResponse> = None;
    let mut digests: Vec<ReadDigest> = Vec::new();
    let mut answered: Vec<usize> = Vec::new();
    let mut speculated = speculation == Speculation::Always;
    let timeout = |received: usize, data_present: bool, speculated: bool| {
        if speculated {
            stats.speculative_failed_retries.fetch_add(1, Relaxed);
        }
        Err(level.timeout(received, data_present))
    };
    while answered.len() < level.block_for.max(1) || data.is_none() {
        let wake = match speculation {
            Speculation::At(at) | Speculation::Insufficient(at) => at.min(deadline.instant()),
            Speculation::Never | Speculation::Always => deadline.instant(),
        };
        // Whether the timer fired: only then (nothing was ready) may the read speculate or
        // time out; answers that are ready are taken first, however late the clock is.
        let fired = match crate::until(pending.next(), wake).await {
            Some(Some((n, Ok(answer)))) => {
                answered.push(n);
                match (answer, &data) {
                    (Answer::Data(response), None) => data = Some(response),
                    // A second data response (ALWAYS, or a speculated one) is compared as a digest.
                    (Answer::Data(response), Some(_)) => digests.push(read_digest(&response)),
                    (Answer::Digest(digest), _) => digests.push(digest),
                }
                false
            }
            Some(Some((_, Err(e)))) if !e.is_no_answer() => return Err(e.into()),
            Some(Some((_, Err(_)))) => {
                // A replica that will not answer: wait on only if the rest can still do.
                let can_speculate = matches!(speculation, Speculation::At(_)) && extra.is_some();
                let to_come = pending.len() + usize::from(can_speculate);
                if answered.len() + to_come < level.block_for.max(1) {
                    return timeout(answered.len(), data.is_some(), speculated);
                }
                false
            }
            Some(None) => {
                // Nothing in flight: the level cannot be met unless a speculation is due.
                let (Speculation::At(at), Some(_)) = (speculation, &extra) else {
                    return timeout(answered.len(), data.is_some(), speculated);
                };
                tokio::time::sleep_until(at.min(deadline.instant())).await;
                true
            }
            None => true,
        };
        if !fired {
            continue;
        }
        let now = Instant::now();
        if deadline.passed_at(now) {
            return timeout(answered.len(), data.is_some(), speculated);
        }
        match speculation {
            Speculation::At(at) if now >= at => {
                speculation = Speculation::Never;
                if let Some(extra) = extra.take() {
                    stats.speculative_retries.fetch_add(1, Relaxed);
                    speculated = true;
                    tracing::debug!(endpoint = %extra.0 .0, data = data.is_none(), "speculative retry");
                    let n = contacts.len();
                    pending.push(request(n, &extra, command, deadline, data.is_none()));
                    contacts.push(extra);
                }
            }
            Speculation::Insufficient(at) if now >= at => {
                speculation = Speculation::Never;
                stats
                    .speculative_insufficient_replicas
                    .fetch_add(1, Relaxed);
            }
            _ => {}
        }
    }
    let data = data.expect("the loop ends only with the data");
    let answered = answered.iter().map(|n| contacts[*n].clone()).collect();
    Ok(Gathered {
        data,
        digests,
        answered,
    })
}
