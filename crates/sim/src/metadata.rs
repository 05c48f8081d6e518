//! The cluster metadata log in the simulation: every node runs the real
//! `cluster_metadata::MetadataService` (openraft) over a [`RaftTransport`] riding on its
//! messaging (turmoil TCP, so the seeded faults hit it), formed as a real cluster forms its
//! group (node 0 bootstraps a one-voter group, the others join through their peers, then each
//! claims its tokens), and a client on every node proposes schema changes to a spare keyspace
//! while the faults run. The history of the proposals and every node's applied log are
//! recorded here and checked by [`check`].
//!
//! Storage: each node's metadata directory is a temporary directory (under `/dev/shm` where
//! there is one) kept in `Shared` across the node's restarts. That is exact, not an
//! approximation of a crash: the log store and state machine write with synchronous `std::fs`
//! and fsync before they return, inside one poll of the Raft core's task, and turmoil crashes
//! a host only between polls, so a crash never falls inside a write and the directory holds
//! exactly what was synced. (A torn write is the crash tests' business in `cluster-metadata`,
//! not this simulation's.)
//!
//! Invariants checked every run ([`check`]):
//! - every node applies one common log: each node's applied entries (index, command, answer),
//!   recorded through `MetadataApplier::entry_applied`, are consecutive from the first, never
//!   repeated (a restart's replay of entries it had not recorded as applied excepted), and a
//!   prefix of the longest node's; after the heal all are equal;
//! - applying the common log's commands in order to an empty `MetadataState` gives the
//!   answers every node recorded, and the state every node ends with (the ring and the schema
//!   converge), whose tokens are the ones each node claimed;
//! - a proposal acknowledged as committed at index `i` is the command at `i` of the common
//!   log, applied; an acknowledged schema change took effect exactly once;
//! - no proposal waits past its timeout (plus `TIMEOUT_TOLERANCE_MS`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use bytes::Bytes;
use cluster_metadata::{
    MetadataApplier, MetadataCommand, MetadataConfig, MetadataError, MetadataResponse,
    MetadataService, MetadataState, NodeOwnership, OwnershipState, RaftTransport, SchemaEntry,
    SchemaSource, TransportError,
};
use coordinator::Deadline;
use futures_util::future::BoxFuture;
use locator::HostId;
use messaging::{HandlerError, MessagingService, RandomSource, SplitMix64, Verb};
use tokio::sync::watch;
use uuid::Uuid;

use crate::history::TIMEOUT_TOLERANCE_MS;

/// The verb metadata messages travel on (`node`'s `METADATA_VERB`).
pub const METADATA_VERB: Verb = Verb::extension(64);
/// How long one metadata message may wait for its answer (`node`'s).
const METADATA_MESSAGE_TIMEOUT: Duration = Duration::from_secs(10);

/// A planted bug in how a node's applied log is observed, for the test that the check
/// catches a node applying a different log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetadataBug {
    /// Node 1 does not apply its `n`-th entry (as a state machine that skips one).
    SkipEntry(usize),
    /// Node 1 applies its `n`-th entry twice.
    ApplyTwice(usize),
}

/// What a metadata proposal proposed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProposalKind {
    /// A schema change from `base` to `version` (tables of the spare keyspace).
    Schema { base: Uuid, version: Uuid },
    /// A node claiming its tokens (`Normal`).
    Ownership,
}

/// How a proposal ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProposalOutcome {
    Pending,
    /// Committed at this log index and applied on the proposing node.
    Committed(u64),
    /// Applied and refused (a stale schema version): the same on every node.
    Refused(String),
    /// Timed out, no quorum, not yet a member: may or may not be in the log.
    Failed(String),
    /// Its node crashed first.
    Crashed,
}

/// One proposal of the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    pub id: usize,
    pub node: usize,
    pub kind: ProposalKind,
    pub command: MetadataCommand,
    pub invoked_ms: u64,
    pub completed_ms: Option<u64>,
    pub timeout_ms: u64,
    pub outcome: ProposalOutcome,
}

impl fmt::Display for Proposal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let end = self
            .completed_ms
            .map_or("…".to_string(), |ms| format!("{ms}"));
        write!(
            f,
            "#{:<4} node {} {:?} [{} .. {}] ms -> {:?}",
            self.id, self.node, self.kind, self.invoked_ms, end, self.outcome
        )
    }
}

/// One applied entry as a node's state machine reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedEntry {
    pub index: u64,
    /// `None`: an entry of Raft's own (blank, membership).
    pub command: Option<MetadataCommand>,
    pub response: MetadataResponse,
}

/// A node's applied log as recorded, and what the recording saw wrong.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppliedLog {
    pub entries: Vec<AppliedEntry>,
    /// Set at a restart: entries up to the last recorded may be applied again (those the
    /// state file did not cover yet) and must match.
    replaying: bool,
    /// Entries applied out of order: (what was expected, what came).
    pub anomalies: Vec<String>,
    /// How many entries the node was told of (for the planted bugs).
    seen: usize,
}

impl AppliedLog {
    fn record(&mut self, entry: AppliedEntry, at_ms: u64) {
        let next = self.entries.last().map_or(0, |e| e.index + 1);
        let first = self.entries.first().map_or(entry.index, |e| e.index);
        if entry.index < next && self.replaying && entry.index >= first {
            let held = &self.entries[(entry.index - first) as usize];
            if *held != entry {
                self.anomalies.push(format!(
                    "at {at_ms} ms, replaying after a restart, applied {entry:?} where it had applied {held:?}"
                ));
            }
            return;
        }
        self.replaying = false;
        if entry.index != next && !self.entries.is_empty() {
            self.anomalies.push(format!(
                "at {at_ms} ms applied entry {} after entry {} (expected {next})",
                entry.index,
                next.saturating_sub(1)
            ));
        }
        self.entries.push(entry);
    }
}

/// The metadata part of a run's history: the proposals and every node's applied log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataHistory {
    pub proposals: Vec<Proposal>,
    pub applied: Vec<AppliedLog>,
    /// Every node's applied state at the run's end.
    pub final_states: Vec<Option<MetadataState>>,
    /// Harness failures on a node (a bootstrap that failed): reported as violations.
    pub errors: Vec<String>,
    /// Sim ms from the heal until one node led and every running node followed it (`None`:
    /// not before the run ended). Measured, not judged.
    pub leaderless_after_heal_ms: Option<u64>,
    next_version: u64,
}

impl MetadataHistory {
    fn new(nodes: usize) -> MetadataHistory {
        MetadataHistory {
            applied: vec![AppliedLog::default(); nodes],
            final_states: vec![None; nodes],
            ..MetadataHistory::default()
        }
    }

    fn invoke(
        &mut self,
        node: usize,
        kind: ProposalKind,
        command: MetadataCommand,
        now_ms: u64,
        timeout_ms: u64,
    ) -> usize {
        let id = self.proposals.len();
        self.proposals.push(Proposal {
            id,
            node,
            kind,
            command,
            invoked_ms: now_ms,
            completed_ms: None,
            timeout_ms,
            outcome: ProposalOutcome::Pending,
        });
        id
    }

    fn complete(&mut self, id: usize, now_ms: u64, outcome: ProposalOutcome) {
        let proposal = &mut self.proposals[id];
        assert_eq!(
            proposal.outcome,
            ProposalOutcome::Pending,
            "proposal {id} completed twice"
        );
        proposal.completed_ms = Some(now_ms);
        proposal.outcome = outcome;
    }

    /// Marks `node`'s pending proposals as cut short by its crash.
    pub fn crash(&mut self, node: usize) {
        for p in self.proposals.iter_mut() {
            if p.node == node && p.outcome == ProposalOutcome::Pending {
                p.outcome = ProposalOutcome::Crashed;
            }
        }
        self.applied[node].replaying = true;
    }

    /// Whether every node has applied the same number of entries, and some.
    pub fn converged(&self) -> bool {
        let lengths: BTreeSet<usize> = self.applied.iter().map(|a| a.entries.len()).collect();
        lengths.len() == 1 && !lengths.contains(&0)
    }

    /// Whether the run may end as far as the metadata log goes: the nodes' applied logs
    /// have converged and no node's token claim is still in flight. A claim can be pending
    /// while every log is equal: after a leader change (a rejoining node's inflated term
    /// deposed the leader before the metadata log had pre-vote; a leader cut off by a
    /// partition is still replaced) the new leader's first entry makes the logs equal a
    /// moment before the claim, retried, commits. Ending the run then would report the
    /// claim's node as holding no tokens (seed 5534).
    pub fn settled(&self) -> bool {
        self.converged()
            && !self
                .proposals
                .iter()
                .any(|p| p.kind == ProposalKind::Ownership && p.outcome == ProposalOutcome::Pending)
    }

    /// The proposals, one a line.
    pub fn render(&self) -> String {
        self.proposals.iter().map(|p| format!("  {p}\n")).collect()
    }

    /// Each node's applied log, summarised: its length and its last entries.
    pub fn render_applied(&self) -> String {
        let mut text = String::new();
        for (node, log) in self.applied.iter().enumerate() {
            text += &format!("  node {node}: {} entries applied", log.entries.len());
            for e in log.entries.iter().rev().take(3).rev() {
                text += &format!("; #{} {}", e.index, summary(e.command.as_ref()));
            }
            text += "\n";
        }
        text
    }
}

fn summary(command: Option<&MetadataCommand>) -> String {
    match command {
        None => "(raft)".to_string(),
        Some(MetadataCommand::Schema(s)) => {
            format!("schema {}→{}", short(s.base_version), short(s.version))
        }
        Some(MetadataCommand::Ownership(o)) => format!("ownership {}", short(o.host_id)),
    }
}

fn short(id: Uuid) -> String {
    format!("{:x}", id.as_u128() & 0xffff_ffff)
}

/// A broken metadata invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataViolation {
    /// A node applied entries out of order, twice, or differently when replaying.
    OutOfOrder {
        node: usize,
        what: String,
    },
    /// A node's applied log is not a prefix of the longest one: they differ at `index`.
    Diverged {
        node: usize,
        other: usize,
        index: u64,
    },
    /// After the heal, the nodes' applied logs are not all the same length.
    NotConverged {
        lengths: Vec<usize>,
    },
    /// Applying the common log to an empty state answers differently than a node recorded.
    WrongAnswer {
        index: u64,
        recorded: MetadataResponse,
        model: MetadataResponse,
    },
    /// A node's final state is not the common log's.
    StateDiffers {
        node: usize,
    },
    /// A node's tokens in the final state are not the ones it claimed.
    TokensDiffer {
        node: usize,
    },
    /// An acknowledged proposal is not at its index of the common log, or did not take
    /// effect exactly once (`times`).
    LostProposal {
        proposal: usize,
        times: usize,
    },
    /// A proposal answered past its timeout, or never while its node ran.
    OverTimeout {
        proposal: usize,
        waited_ms: u64,
    },
    NoAnswer {
        proposal: usize,
    },
    /// The harness failed on a node.
    Harness(String),
}

/// Every metadata violation of `history` at the end of a run (`end_ms`). `tokens` are the
/// tokens each node claimed; `converge` whether the run waited for the log to converge
/// (after the heal).
pub fn check(
    history: &MetadataHistory,
    tokens: &[Vec<i64>],
    end_ms: u64,
) -> Vec<MetadataViolation> {
    let mut found: Vec<MetadataViolation> = history
        .errors
        .iter()
        .cloned()
        .map(MetadataViolation::Harness)
        .collect();
    for (node, log) in history.applied.iter().enumerate() {
        for what in &log.anomalies {
            found.push(MetadataViolation::OutOfOrder {
                node,
                what: what.clone(),
            });
        }
    }
    let (longest, common) = history
        .applied
        .iter()
        .enumerate()
        .max_by_key(|(node, log)| (log.entries.len(), std::cmp::Reverse(*node)))
        .map(|(n, log)| (n, &log.entries))
        .expect("nodes");
    for (node, log) in history.applied.iter().enumerate() {
        if let Some((mine, theirs)) = log.entries.iter().zip(common.iter()).find(|(a, b)| a != b) {
            let _ = theirs;
            found.push(MetadataViolation::Diverged {
                node,
                other: longest,
                index: mine.index,
            });
        }
    }
    let lengths: Vec<usize> = history.applied.iter().map(|a| a.entries.len()).collect();
    if !history.converged() {
        found.push(MetadataViolation::NotConverged { lengths });
    }
    // The model: the common log applied to an empty state.
    let mut model = MetadataState::default();
    let mut installed: BTreeMap<Uuid, usize> = BTreeMap::new();
    for entry in common {
        let Some(command) = &entry.command else {
            continue;
        };
        let before = model.schema_version();
        let answer = model.apply(command);
        if model.schema_version() != before {
            *installed.entry(model.schema_version()).or_default() += 1;
        }
        if answer != entry.response {
            found.push(MetadataViolation::WrongAnswer {
                index: entry.index,
                recorded: entry.response.clone(),
                model: answer,
            });
        }
    }
    for (node, state) in history.final_states.iter().enumerate() {
        match state {
            Some(state) if *state == model => {}
            _ => found.push(MetadataViolation::StateDiffers { node }),
        }
        let claimed = |t: &Vec<i64>| {
            let mut t = t.clone();
            t.sort_unstable();
            t
        };
        let held = state.as_ref().and_then(|s| {
            s.nodes
                .values()
                .find(|o| o.host_id == host_id(node).0)
                .map(|o| claimed(&o.tokens))
        });
        if held != Some(claimed(&tokens[node])) {
            found.push(MetadataViolation::TokensDiffer { node });
        }
    }
    let first = common.first().map_or(0, |e| e.index);
    for p in &history.proposals {
        let limit_ms = p.timeout_ms + TIMEOUT_TOLERANCE_MS;
        match p.completed_ms {
            Some(done) if done - p.invoked_ms > limit_ms => {
                found.push(MetadataViolation::OverTimeout {
                    proposal: p.id,
                    waited_ms: done - p.invoked_ms,
                })
            }
            None if p.outcome == ProposalOutcome::Pending && end_ms > p.invoked_ms + limit_ms => {
                found.push(MetadataViolation::NoAnswer { proposal: p.id })
            }
            _ => {}
        }
        let ProposalOutcome::Committed(index) = p.outcome else {
            continue;
        };
        let at = index
            .checked_sub(first)
            .and_then(|i| common.get(i as usize));
        let in_place = at.is_some_and(|e| {
            e.command.as_ref() == Some(&p.command) && e.response == MetadataResponse::Applied
        });
        let times = match p.kind {
            ProposalKind::Schema { version, .. } => installed.get(&version).copied().unwrap_or(0),
            ProposalKind::Ownership => usize::from(in_place),
        };
        if !in_place || times != 1 {
            found.push(MetadataViolation::LostProposal {
                proposal: p.id,
                times,
            });
        }
    }
    found
}

/// A node's host id (the same as `cluster::Shared::host_ids`).
pub(crate) fn host_id(node: usize) -> HostId {
    HostId(Uuid::from_u128(0x1000 + node as u128))
}

/// What the nodes' metadata share outside turmoil's hosts (so it survives their crashes).
pub(crate) struct MetadataShared {
    /// Each node's metadata directory (synced writes only: see the module's header).
    dirs: Vec<tempfile::TempDir>,
    pub(crate) history: Mutex<MetadataHistory>,
    /// Each node's applied-state watch (the last opened service's).
    states: Vec<Mutex<Option<watch::Receiver<Arc<MetadataState>>>>>,
    /// Each node's service (the last opened; dead once its node crashed), to see who leads.
    services: Vec<Mutex<Weak<MetadataService>>>,
    bug: Option<MetadataBug>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl MetadataShared {
    pub(crate) fn new(nodes: usize, bug: Option<MetadataBug>) -> MetadataShared {
        let shm = std::path::Path::new("/dev/shm");
        let dirs = (0..nodes)
            .map(|_| {
                let dir = if shm.is_dir() {
                    tempfile::tempdir_in(shm)
                } else {
                    tempfile::tempdir()
                };
                dir.expect("a temporary directory for a node's metadata")
            })
            .collect();
        MetadataShared {
            dirs,
            history: Mutex::new(MetadataHistory::new(nodes)),
            states: (0..nodes).map(|_| Mutex::new(None)).collect(),
            services: (0..nodes).map(|_| Mutex::new(Weak::new())).collect(),
            bug,
        }
    }

    /// Whether one running node leads and every running node follows it in its term: the
    /// end of a leader-less time.
    pub(crate) fn leader_agreed(&self) -> bool {
        let running: Vec<Arc<MetadataService>> = self
            .services
            .iter()
            .filter_map(|s| lock(s).upgrade())
            .collect();
        let Some(leader) = running
            .iter()
            .map(|s| s.metrics())
            .find(|m| m.state.is_leader())
        else {
            return false;
        };
        running.iter().all(|s| {
            let m = s.metrics();
            m.current_leader == Some(leader.id) && m.current_term == leader.current_term
        })
    }

    /// Records every node's applied state (at the run's end) and returns the history.
    pub(crate) fn finish(&self) -> MetadataHistory {
        let mut history = lock(&self.history).clone();
        for (node, state) in self.states.iter().enumerate() {
            history.final_states[node] = lock(state).as_ref().map(|s| (**s.borrow()).clone());
        }
        history
    }
}

/// Records what a node's state machine applies into the shared history.
struct Recorder {
    shared: Arc<crate::cluster::Shared>,
    node: usize,
}

impl MetadataApplier for Recorder {
    fn apply_schema(
        &self,
        _: SchemaEntry,
        _: SchemaSource,
    ) -> BoxFuture<'static, Result<(), String>> {
        Box::pin(async { Ok(()) })
    }

    fn entry_applied(
        &self,
        index: u64,
        command: Option<&MetadataCommand>,
        response: &MetadataResponse,
    ) {
        let metadata = &self.shared.metadata;
        let mut history = lock(&metadata.history);
        let log = &mut history.applied[self.node];
        log.seen += 1;
        let entry = AppliedEntry {
            index,
            command: command.cloned(),
            response: response.clone(),
        };
        let at_ms = crate::cluster::now_ms();
        match metadata.bug {
            Some(MetadataBug::SkipEntry(n)) if self.node == 1 && log.seen == n => {}
            Some(MetadataBug::ApplyTwice(n)) if self.node == 1 && log.seen == n => {
                log.record(entry.clone(), at_ms);
                log.record(entry, at_ms);
            }
            _ => log.record(entry, at_ms),
        }
    }
}

/// The metadata log's messages over messaging (`node`'s `MessagingTransport`).
struct MessagingTransport {
    messaging: Arc<MessagingService>,
}

impl RaftTransport for MessagingTransport {
    fn send(
        &self,
        target: Uuid,
        address: &str,
        message: Vec<u8>,
    ) -> BoxFuture<'static, Result<Vec<u8>, TransportError>> {
        let messaging = self.messaging.clone();
        let address = address.parse::<SocketAddr>();
        Box::pin(async move {
            let unreachable = |reason: String| TransportError::Unreachable {
                node: target,
                reason,
            };
            let address = address.map_err(|e| unreachable(format!("bad address: {e}")))?;
            let to = HostId(target);
            messaging.set_peer_address(to, address);
            let deadline = Deadline::after(METADATA_MESSAGE_TIMEOUT);
            messaging
                .request(to, METADATA_VERB, Bytes::from(message), Some(deadline))
                .await
                .map(|reply| reply.to_vec())
                .map_err(|e| unreachable(e.to_string()))
        })
    }
}

/// The metadata log's timing in the simulation: a LAN's (the defaults), so that the faults'
/// seconds see elections.
fn config() -> MetadataConfig {
    MetadataConfig {
        cluster_name: "sim".to_string(),
        ..MetadataConfig::default()
    }
}

/// A proposal's timeout.
const PROPOSAL_TIMEOUT_MS: u64 = 1_000;

/// Opens `node`'s metadata service over its messaging and serves its peers' messages.
pub(crate) async fn start(
    shared: &Arc<crate::cluster::Shared>,
    node: usize,
    messaging: &Arc<MessagingService>,
    storage_address: SocketAddr,
) -> Result<Arc<MetadataService>, Box<dyn std::error::Error>> {
    let metadata = MetadataService::open(
        host_id(node).0,
        storage_address.to_string(),
        shared.metadata.dirs[node].path(),
        Arc::new(MessagingTransport {
            messaging: messaging.clone(),
        }),
        Arc::new(Recorder {
            shared: shared.clone(),
            node,
        }),
        config(),
    )
    .await?;
    *lock(&shared.metadata.states[node]) = Some(metadata.state());
    *lock(&shared.metadata.services[node]) = Arc::downgrade(&metadata);
    let served = Arc::downgrade(&metadata);
    messaging.register_handler(
        METADATA_VERB,
        Arc::new(move |_from: HostId, payload: Bytes, _deadline: Deadline| {
            let served = served.clone();
            async move {
                match served.upgrade() {
                    Some(metadata) => Ok(Bytes::from(metadata.handle(&payload).await)),
                    None => Err(HandlerError("the metadata log has stopped".to_string())),
                }
            }
        }),
    )?;
    Ok(metadata)
}

/// A node's life in the metadata group, as `node`'s `internode` does it: node 0 bootstraps,
/// the others join through their peers (retrying until they are voters); each claims its
/// tokens; then its client proposes schema changes until the heal.
pub(crate) async fn member(
    shared: Arc<crate::cluster::Shared>,
    node: usize,
    metadata: Arc<MetadataService>,
    start: u64,
) {
    let restarted = match metadata.is_voter().await {
        Ok(voter) => voter,
        Err(e) => {
            return lock(&shared.metadata.history)
                .errors
                .push(format!("node {node}: {e}"))
        }
    };
    if !restarted && node == 0 {
        if let Err(e) = metadata.bootstrap().await {
            return lock(&shared.metadata.history)
                .errors
                .push(format!("node 0 cannot bootstrap: {e}"));
        }
    } else if !restarted {
        let seeds: Vec<(Uuid, String)> = (0..shared.config.nodes)
            .filter(|p| *p != node)
            .map(|p| {
                (
                    host_id(p).0,
                    SocketAddr::new(
                        crate::cluster::address(&shared, p),
                        crate::cluster::STORAGE_PORT,
                    )
                    .to_string(),
                )
            })
            .collect();
        while metadata
            .join(&seeds, Duration::from_millis(2_000))
            .await
            .is_err()
        {}
    }
    claim_tokens(&shared, node, &metadata).await;
    let mut random =
        SplitMix64::new(shared.config.seed ^ 0x3e7a ^ (node as u64) << 24 ^ start << 48);
    while crate::cluster::now_ms() < shared.config.heal_ms {
        let think_ms = shared.config.metadata_think_ms / 2
            + random.next_u64() % shared.config.metadata_think_ms.max(1);
        tokio::time::sleep(Duration::from_millis(think_ms)).await;
        if crate::cluster::now_ms() >= shared.config.heal_ms {
            break;
        }
        propose_schema_change(&shared, node, &metadata, &mut random).await;
    }
}

/// Claims this node's tokens (`Normal`) until the log has them (`node`'s `claim_tokens`).
async fn claim_tokens(shared: &crate::cluster::Shared, node: usize, metadata: &MetadataService) {
    let ownership = NodeOwnership {
        host_id: host_id(node).0,
        broadcast_address: crate::cluster::address(shared, node),
        native_address: crate::cluster::address(shared, node),
        native_port: 9042,
        datacenter: "dc1".to_string(),
        rack: "rack1".to_string(),
        tokens: shared.tokens[node].clone(),
        state: OwnershipState::Normal,
    };
    loop {
        if metadata.state().borrow().nodes.get(&ownership.host_id) == Some(&ownership) {
            return;
        }
        let command = MetadataCommand::Ownership(ownership.clone());
        let outcome = propose(shared, node, metadata, ProposalKind::Ownership, command).await;
        if !matches!(outcome, ProposalOutcome::Failed(_)) {
            return;
        }
        // A failure that took no time (not a member yet) must not spin: sim time would stand.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Proposes `command`, recording it; returns its outcome.
async fn propose(
    shared: &crate::cluster::Shared,
    node: usize,
    metadata: &MetadataService,
    kind: ProposalKind,
    command: MetadataCommand,
) -> ProposalOutcome {
    let id = lock(&shared.metadata.history).invoke(
        node,
        kind,
        command.clone(),
        crate::cluster::now_ms(),
        PROPOSAL_TIMEOUT_MS,
    );
    let outcome = match metadata
        .propose(command, Duration::from_millis(PROPOSAL_TIMEOUT_MS))
        .await
    {
        Ok(index) => ProposalOutcome::Committed(index),
        Err(MetadataError::Refused(why)) => ProposalOutcome::Refused(why),
        Err(e) => ProposalOutcome::Failed(e.to_string()),
    };
    lock(&shared.metadata.history).complete(id, crate::cluster::now_ms(), outcome.clone());
    outcome
}

/// The spare keyspace's tables as a schema change carries them: `name:generation` pairs,
/// comma-separated (the schema service's encoding is opaque to the log; this one is the
/// simulation's).
fn tables(state: &MetadataState) -> BTreeMap<u32, u32> {
    let Some(schema) = &state.schema else {
        return BTreeMap::new();
    };
    schema
        .change
        .split(',')
        .filter_map(|t| {
            let (name, generation) = t.split_once(':')?;
            Some((
                name.trim_start_matches("spare.t").parse().ok()?,
                generation.parse().ok()?,
            ))
        })
        .collect()
}

/// Creates, alters or drops a table of the spare keyspace, decided on this node's applied
/// schema (so a stale version is refused, a normal outcome).
async fn propose_schema_change(
    shared: &crate::cluster::Shared,
    node: usize,
    metadata: &MetadataService,
    random: &mut SplitMix64,
) {
    let state = metadata.state().borrow().clone();
    let mut tables = tables(&state);
    let table = (random.next_u64() % 8) as u32;
    match tables.get(&table).copied() {
        None => {
            tables.insert(table, 0);
        }
        Some(_) if random.next_u64().is_multiple_of(3) => {
            tables.remove(&table);
        }
        Some(generation) => {
            tables.insert(table, generation + 1);
        }
    }
    let change = tables
        .iter()
        .map(|(t, g)| format!("spare.t{t}:{g}"))
        .collect::<Vec<_>>()
        .join(",");
    let base = state.schema_version();
    let version = {
        let mut history = lock(&shared.metadata.history);
        history.next_version += 1;
        Uuid::from_u128(u128::from(shared.config.seed) << 64 | u128::from(history.next_version))
    };
    let command = MetadataCommand::Schema(SchemaEntry {
        base_version: base,
        version,
        change,
    });
    propose(
        shared,
        node,
        metadata,
        ProposalKind::Schema { base, version },
        command,
    )
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: u64) -> AppliedEntry {
        AppliedEntry {
            index,
            command: None,
            response: MetadataResponse::Applied,
        }
    }

    #[test]
    fn the_run_is_not_settled_while_a_token_claim_is_in_flight() {
        let mut history = MetadataHistory::new(2);
        for log in &mut history.applied {
            log.record(entry(0), 0);
        }
        assert!(history.converged() && history.settled());
        history.proposals.push(Proposal {
            id: 0,
            node: 1,
            kind: ProposalKind::Ownership,
            command: MetadataCommand::Schema(SchemaEntry {
                base_version: Uuid::nil(),
                version: Uuid::nil(),
                change: String::new(),
            }),
            invoked_ms: 0,
            completed_ms: None,
            timeout_ms: 1000,
            outcome: ProposalOutcome::Pending,
        });
        assert!(history.converged(), "equal logs");
        assert!(!history.settled(), "a claim in flight (seed 5534's end)");
        history.proposals[0].outcome = ProposalOutcome::Committed(1);
        assert!(history.settled());
    }

    #[test]
    fn a_log_records_gaps_and_repeats_but_takes_a_restarts_replay() {
        let mut log = AppliedLog::default();
        for i in 0..3 {
            log.record(entry(i), 0);
        }
        log.replaying = true;
        log.record(entry(2), 1);
        log.record(entry(3), 1);
        assert!(log.anomalies.is_empty(), "{:?}", log.anomalies);
        log.record(entry(3), 2);
        log.record(entry(5), 3);
        assert_eq!(log.anomalies.len(), 2, "{:?}", log.anomalies);
        assert_eq!(log.entries.len(), 6);
    }
}
