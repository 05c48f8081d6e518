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
use std::sync::atomic::Ordering::Relaxed;

use futures_util::stream::{FuturesUnordered, StreamExt};
use mutation::{ReadCommand, ReadResponse, TableId};
use schema::{KeyspaceMetadata, SpeculativeRetry};
use tokio::time::Instant;

use crate::contact::{Contact, ReadLevel};
use crate::stats::{CoordinatorStats, ReplicaVerb, TableStats};
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

/// Where a partition read stands: whom it asked for what, what came back, and what it may
/// still do (speculate).
pub(crate) struct ReadInFlight<'a> {
    contacts: Vec<Contact>,
    /// Each contact's verb, and whether its answer is still awaited (for the counters).
    verbs: Vec<ReplicaVerb>,
    awaited: Vec<bool>,
    pending: FuturesUnordered<Answering>,
    /// The replica a speculation goes to, until it does.
    extra: Option<Contact>,
    speculation: Speculation,
    speculated: bool,
    data: Option<ReadResponse>,
    digests: Vec<ReadDigest>,
    answered: Vec<usize>,
    command: &'a ReadCommand,
    level: ReadLevel,
    deadline: Deadline,
    table: &'a TableStats,
    counters: &'a CoordinatorStats,
}

/// What a read needs besides its replicas: the command, its level and deadline, and where it
/// counts.
pub(crate) struct ReadContext<'a> {
    pub command: &'a ReadCommand,
    pub level: ReadLevel,
    pub deadline: Deadline,
    pub table: &'a TableStats,
    pub counters: &'a CoordinatorStats,
}

fn verb(data: bool) -> ReplicaVerb {
    match data {
        true => ReplicaVerb::Read,
        false => ReplicaVerb::Digest,
    }
}

/// Sends a partition read to `contacts` (data from the first, or from the first two with
/// ALWAYS; digests from the rest), speculates to `extra` as `speculation` says, and waits until
/// `level.block_for` replicas answered, the data among them, or until `deadline` (a
/// `ReadTimeout`). A replica that cannot answer (`is_no_answer`) fails the read at once only if
/// the others can no longer make up the level; another error fails it at once.
pub(crate) async fn gather(
    contacts: Vec<Contact>,
    extra: Option<Contact>,
    speculation: Speculation,
    context: ReadContext<'_>,
) -> Result<Gathered, CoordinatorError> {
    let mut read = ReadInFlight::start(contacts, extra, speculation, context);
    while !read.sufficient() {
        let wake = match read.speculation {
            Speculation::At(at) | Speculation::Insufficient(at) => at.min(read.deadline.instant()),
            Speculation::Never | Speculation::Always => read.deadline.instant(),
        };
        // Whether the timer fired: only then (nothing was ready) may the read speculate or
        // time out; answers that are ready are taken first, however late the clock is.
        let fired = match crate::until(read.pending.next(), wake).await {
            Some(Some((n, Ok(answer)))) => {
                read.take(n, answer);
                false
            }
            Some(Some((_, Err(e)))) if !e.is_no_answer() => return Err(e.into()),
            Some(Some((n, Err(_)))) => {
                read.silent(n)?;
                false
            }
            Some(None) => {
                // Nothing in flight: the level cannot be met unless a speculation is due.
                let (Speculation::At(at), Some(_)) = (read.speculation, &read.extra) else {
                    return Err(read.timeout());
                };
                tokio::time::sleep_until(at.min(read.deadline.instant())).await;
                true
            }
            None => true,
        };
        if fired {
            read.on_timer()?;
        }
    }
    Ok(read.finish())
}

impl<'a> ReadInFlight<'a> {
    /// Sends the first requests (and with ALWAYS the speculative one).
    fn start(
        mut contacts: Vec<Contact>,
        mut extra: Option<Contact>,
        speculation: Speculation,
        context: ReadContext<'a>,
    ) -> ReadInFlight<'a> {
        let mut speculated = false;
        if speculation == Speculation::Always {
            if let Some(extra) = extra.take() {
                contacts.push(extra);
                context.table.speculative_retries.fetch_add(1, Relaxed);
                speculated = true;
            }
        }
        let data_requests = if speculated && contacts.len() > 1 {
            2
        } else {
            1
        };
        let (command, deadline) = (context.command, context.deadline);
        let pending = contacts
            .iter()
            .enumerate()
            .map(|(n, contact)| request(n, contact, command, deadline, n < data_requests))
            .collect();
        ReadInFlight {
            verbs: (0..contacts.len())
                .map(|n| verb(n < data_requests))
                .collect(),
            awaited: vec![true; contacts.len()],
            contacts,
            pending,
            extra,
            speculation,
            speculated,
            data: None,
            digests: Vec::new(),
            answered: Vec::new(),
            command,
            level: context.level,
            deadline,
            table: context.table,
            counters: context.counters,
        }
    }

    /// Whether enough replicas answered, the data among them.
    fn sufficient(&self) -> bool {
        self.answered.len() >= self.level.block_for.max(1) && self.data.is_some()
    }

    /// Takes contact `n`'s answer.
    fn take(&mut self, n: usize, answer: Answer) {
        self.answered.push(n);
        self.awaited[n] = false;
        match (answer, &self.data) {
            (Answer::Data(response), None) => self.data = Some(response),
            // A second data response (ALWAYS, or a speculated one) is compared as a digest.
            (Answer::Data(response), Some(_)) => self.digests.push(read_digest(&response)),
            (Answer::Digest(digest), _) => self.digests.push(digest),
        }
    }

    /// Contact `n` will not answer (unreachable, or it did not start in time): the read waits
    /// on only if the rest can still make up its level.
    fn silent(&mut self, n: usize) -> Result<(), CoordinatorError> {
        self.awaited[n] = false;
        self.counters.count_replica_timeouts(self.verbs[n], 1);
        let can_speculate = matches!(self.speculation, Speculation::At(_)) && self.extra.is_some();
        let to_come = self.pending.len() + usize::from(can_speculate);
        if self.answered.len() + to_come < self.level.block_for.max(1) {
            return Err(self.timeout());
        }
        Ok(())
    }

    /// The timer fired: the deadline passed (a timeout), or the speculation is due.
    fn on_timer(&mut self) -> Result<(), CoordinatorError> {
        let now = Instant::now();
        if self.deadline.passed_at(now) {
            return Err(self.timeout());
        }
        match self.speculation {
            Speculation::At(at) if now >= at => {
                self.speculation = Speculation::Never;
                if let Some(extra) = self.extra.take() {
                    self.speculate(extra);
                }
            }
            Speculation::Insufficient(at) if now >= at => {
                self.speculation = Speculation::Never;
                self.table
                    .speculative_insufficient_replicas
                    .fetch_add(1, Relaxed);
            }
            _ => {}
        }
        Ok(())
    }

    /// Sends the read to `extra`: a digest request if the data came, else a data request.
    fn speculate(&mut self, extra: Contact) {
        self.table.speculative_retries.fetch_add(1, Relaxed);
        self.speculated = true;
        let data = self.data.is_none();
        tracing::debug!(endpoint = %extra.0 .0, data, "speculative retry");
        let n = self.contacts.len();
        self.pending
            .push(request(n, &extra, self.command, self.deadline, data));
        self.contacts.push(extra);
        self.verbs.push(verb(data));
        self.awaited.push(true);
    }

    /// The read's timeout, counting the replicas still silent and a failed speculation.
    fn timeout(&self) -> CoordinatorError {
        if self.speculated {
            self.table.speculative_failed_retries.fetch_add(1, Relaxed);
        }
        for (verb, awaited) in self.verbs.iter().zip(&self.awaited) {
            if *awaited {
                self.counters.count_replica_timeouts(*verb, 1);
            }
        }
        self.level.timeout(self.answered.len(), self.data.is_some())
    }

    fn finish(self) -> Gathered {
        let answered = self
            .answered
            .iter()
            .map(|n| self.contacts[*n].clone())
            .collect();
        Gathered {
            data: self.data.expect("finished only once sufficient"),
            digests: self.digests,
            answered,
        }
    }
}
