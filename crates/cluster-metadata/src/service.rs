//! [`MetadataService`]: one node's member of the metadata Raft group (ScyllaDB's group 0):
//! bootstrap or join, propose a command and wait for it to apply here, answer other nodes'
//! messages, and watch the applied state.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{ClientWriteError, RaftError};
use openraft::metrics::WaitError;
use openraft::raft::AppendEntriesResponse;
use openraft::{BasicNode, ChangeMembers, Config, Raft, RaftMetrics, ServerState, SnapshotPolicy};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::command::{MetadataCommand, MetadataResponse, MetadataState};
use crate::election::{grants_pre_vote, ElectionClock, Elector};
use crate::log_store::LogStore;
use crate::state_machine::{MetadataApplier, StateMachine};
use crate::transport::{
    call, decode, encode, ForwardError, NetworkFactory, RaftTransport, Reachability, Reply, Request,
};
use crate::transport::{PreVoteRequest, PreVoteResponse};
use crate::NodeId;

/// The timing and compaction of the metadata log. The defaults suit a LAN cluster.
#[derive(Debug, Clone)]
pub struct MetadataConfig {
    /// Names the group in logs.
    pub cluster_name: String,
    /// How often the leader sends heartbeats (AppendEntries), in ms.
    pub heartbeat_interval_ms: u64,
    /// A follower that hears no leader for a random time in this range starts an election.
    pub election_timeout_min_ms: u64,
    /// The top of that range; more than `election_timeout_min_ms`.
    pub election_timeout_max_ms: u64,
    /// A snapshot is taken after this many entries since the last one, and the log up to it
    /// purged (keeping `entries_kept_after_snapshot`, so a briefly lagging node still
    /// catches up from the log).
    pub snapshot_every_entries: u64,
    /// Entries kept in the log below the last snapshot.
    pub entries_kept_after_snapshot: u64,
}

impl Default for MetadataConfig {
    fn default() -> MetadataConfig {
        MetadataConfig {
            cluster_name: "helenus".to_string(),
            heartbeat_interval_ms: 100,
            election_timeout_min_ms: 500,
            election_timeout_max_ms: 1000,
            snapshot_every_entries: 1000,
            entries_kept_after_snapshot: 100,
        }
    }
}

impl MetadataConfig {
    /// openraft's configuration. Its election timer is off: this crate's `election::Elector`
    /// starts elections (with a pre-vote and a fresh timeout each time). With the timer off,
    /// openraft uses its election timeouts for two things only: `election_timeout_max` is
    /// the leader lease within which a follower refuses a RequestVote (thesis §4.2.3), which
    /// must be our `election_timeout_min_ms`, the window of the pre-vote rule, so that a
    /// candidate that passed the pre-vote is not refused its real vote; and
    /// `election_timeout_min` bounds a RequestVote's wait for its answer, set between the
    /// heartbeat interval and that (openraft requires `heartbeat < min < max`).
    fn raft_config(&self) -> Result<Config, MetadataError> {
        if self.election_timeout_min_ms >= self.election_timeout_max_ms {
            return Err(MetadataError::Config(format!(
                "election_timeout_min_ms ({}) must be less than election_timeout_max_ms ({})",
                self.election_timeout_min_ms, self.election_timeout_max_ms
            )));
        }
        if self.election_timeout_min_ms < self.heartbeat_interval_ms + 2 {
            return Err(MetadataError::Config(format!(
                "election_timeout_min_ms ({}) must exceed heartbeat_interval_ms ({}) by 2 or more",
                self.election_timeout_min_ms, self.heartbeat_interval_ms
            )));
        }
        let config = Config {
            cluster_name: self.cluster_name.clone(),
            heartbeat_interval: self.heartbeat_interval_ms,
            election_timeout_min: self.heartbeat_interval_ms
                + (self.election_timeout_min_ms - self.heartbeat_interval_ms) / 2,
            election_timeout_max: self.election_timeout_min_ms,
            enable_elect: false,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(self.snapshot_every_entries),
            max_in_snapshot_log_to_keep: self.entries_kept_after_snapshot,
            ..Config::default()
        };
        config
            .validate()
            .map_err(|e| MetadataError::Config(e.to_string()))
    }

    /// How recently a node must have answered to count as reachable.
    fn reachability_window(&self) -> Duration {
        Duration::from_millis(2 * self.election_timeout_max_ms)
    }
}

/// Why a metadata operation did not happen.
#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    /// No majority of the voters could be reached: nothing can commit.
    #[error(
        "no quorum: {reachable} of {voters} voters reachable; the metadata change was not \
         committed within {timeout_ms} ms (it may still apply if it reached the log)"
    )]
    NoQuorum {
        reachable: usize,
        voters: usize,
        timeout_ms: u64,
    },
    /// A majority seemed reachable but the change did not commit in time (an election, a
    /// slow node).
    #[error(
        "the metadata change was not committed within {timeout_ms} ms ({reachable} of \
         {voters} voters reachable; it may still apply if it reached the log)"
    )]
    Timeout {
        reachable: usize,
        voters: usize,
        timeout_ms: u64,
    },
    /// The log applied the command and refused it, on every node alike.
    #[error("{0}")]
    Refused(String),
    #[error("cannot open the metadata directory {dir}: {source}")]
    Open { dir: PathBuf, source: io::Error },
    #[error("invalid metadata configuration: {0}")]
    Config(String),
    /// The node's Raft stopped (a storage error, or shut down).
    #[error("the metadata log has stopped: {0}")]
    Stopped(String),
    #[error("cannot join the metadata cluster: {0}")]
    Join(String),
    /// The node is in no group: bootstrap or join first.
    #[error("this node is not a member of the cluster metadata group (bootstrap or join first)")]
    NotMember,
}

/// One node's member of the metadata Raft group.
pub struct MetadataService {
    id: NodeId,
    address: String,
    config: MetadataConfig,
    raft: Raft<crate::TypeConfig>,
    transport: Arc<dyn RaftTransport>,
    reachability: Arc<Reachability>,
    state: watch::Receiver<Arc<MetadataState>>,
    /// Serialises the membership changes this node makes as leader (add a learner, then
    /// promote it), so two joins do not interleave.
    membership_changes: tokio::sync::Mutex<()>,
    /// When this node last heard from a leader; its election timer.
    clock: Arc<ElectionClock>,
    /// The log (shared with openraft): its last log id, for the pre-votes this node answers.
    log_store: LogStore,
    /// The task that starts this node's elections (`election::Elector`); aborted at
    /// shutdown and when the service is dropped.
    elector: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl MetadataService {
    /// Opens node `id`'s Raft state in `dir` (created if missing; a restarted node resumes
    /// from it) and starts its Raft. `address` is how other nodes reach it through
    /// `transport`. A new node is a member of nothing until [`MetadataService::bootstrap`] or
    /// [`MetadataService::join`]. Register the service with the transport's receiving side
    /// (its messages go to [`MetadataService::handle`]).
    pub async fn open(
        id: NodeId,
        address: String,
        dir: &Path,
        transport: Arc<dyn RaftTransport>,
        applier: Arc<dyn MetadataApplier>,
        config: MetadataConfig,
    ) -> Result<Arc<MetadataService>, MetadataError> {
        let opened = |source| MetadataError::Open {
            dir: dir.to_path_buf(),
            source,
        };
        let (state_machine, state) = StateMachine::open(dir, applier).map_err(opened)?;
        let log_store = LogStore::open(dir, &state_machine).map_err(opened)?;
        let reachability = Arc::new(Reachability::default());
        let network = NetworkFactory {
            transport: transport.clone(),
            reachability: reachability.clone(),
        };
        let raft = Raft::new(
            id,
            Arc::new(config.raft_config()?),
            network,
            log_store.clone(),
            state_machine,
        )
        .await
        .map_err(|e| MetadataError::Stopped(e.to_string()))?;
        let clock = Arc::new(ElectionClock::new());
        let elector = Elector {
            id,
            raft: raft.clone(),
            transport: transport.clone(),
            reachability: reachability.clone(),
            clock: clock.clone(),
            log_store: log_store.clone(),
            heartbeat_interval: Duration::from_millis(config.heartbeat_interval_ms),
            election_timeout_min: Duration::from_millis(config.election_timeout_min_ms),
            election_timeout_max: Duration::from_millis(config.election_timeout_max_ms),
        };
        let elector = tokio::spawn(elector.run());
        Ok(Arc::new(MetadataService {
            id,
            address,
            config,
            raft,
            transport,
            reachability,
            state,
            membership_changes: tokio::sync::Mutex::new(()),
            clock,
            log_store,
            elector: std::sync::Mutex::new(Some(elector)),
        }))
    }

    /// This node's id in the group.
    pub fn node_id(&self) -> NodeId {
        self.id
    }

    /// The applied state, published after every applied entry: the last schema change and
    /// the token map (`MetadataState::nodes`, from which `command::token_metadata` builds
    /// the ring).
    pub fn state(&self) -> watch::Receiver<Arc<MetadataState>> {
        self.state.clone()
    }

    /// The leader this node knows of.
    pub fn leader(&self) -> Option<NodeId> {
        self.metrics().current_leader
    }

    /// The voters of the group as this node knows them.
    pub fn voters(&self) -> BTreeSet<NodeId> {
        self.metrics()
            .membership_config
            .membership()
            .voter_ids()
            .collect()
    }

    /// This node's Raft, for tests that drive it by hand.
    #[cfg(test)]
    pub(crate) fn raft(&self) -> &Raft<crate::TypeConfig> {
        &self.raft
    }

    /// openraft's view of this node (term, leader, log and applied indexes).
    pub fn metrics(&self) -> RaftMetrics<NodeId, BasicNode> {
        self.raft.metrics().borrow().clone()
    }

    /// Makes this node a one-voter group (the first node of a new cluster). Does nothing on a
    /// node already in a group (a restart).
    pub async fn bootstrap(&self) -> Result<(), MetadataError> {
        if self.is_member().await? {
            return Ok(());
        }
        let members = BTreeMap::from([(self.id, BasicNode::new(&self.address))]);
        self.raft
            .initialize(members)
            .await
            .map_err(|e| MetadataError::Stopped(e.to_string()))
    }

    async fn is_member(&self) -> Result<bool, MetadataError> {
        self.raft
            .is_initialized()
            .await
            .map_err(|e| MetadataError::Stopped(e.to_string()))
    }

    /// Whether this node is a voter of its group (a restart of a node that bootstrapped or
    /// joined before): asked of the Raft core, so it holds right after `open`.
    pub async fn is_voter(&self) -> Result<bool, MetadataError> {
        let id = self.id;
        self.raft
            .with_raft_state(move |st| {
                st.membership_state
                    .effective()
                    .membership()
                    .voter_ids()
                    .any(|v| v == id)
            })
            .await
            .map_err(|e| MetadataError::Stopped(e.to_string()))
    }

    /// Whether this node's effective membership names any node: asked of the Raft core, not
    /// read from the metrics, which a just-opened node publishes a moment later.
    async fn in_membership(&self) -> Result<bool, MetadataError> {
        self.raft
            .with_raft_state(|st| {
                st.membership_state
                    .effective()
                    .membership()
                    .nodes()
                    .next()
                    .is_some()
            })
            .await
            .map_err(|e| MetadataError::Stopped(e.to_string()))
    }

    /// Joins the group `seeds` (node id and address) belong to: the leader adds this node as a
    /// learner, which catches up from the log or a snapshot, then makes it a voter; both
    /// membership changes go through the log, one at a time. Answers once this node has
    /// applied the change that made it a voter, or fails at `timeout`. A node already a voter
    /// (a restart) returns at once.
    pub async fn join(
        &self,
        seeds: &[(NodeId, String)],
        timeout: Duration,
    ) -> Result<(), MetadataError> {
        if self.voters().contains(&self.id) {
            return Ok(());
        }
        let deadline = Instant::now() + timeout;
        let mut last_error = "no seed answered".to_string();
        let mut targets: Vec<(NodeId, String)> = seeds.to_vec();
        while Instant::now() < deadline {
            let Some((target, address)) = targets.first().cloned() else {
                break;
            };
            targets.rotate_left(1);
            let request = Request::Join {
                node: self.id,
                address: self.address.clone(),
                timeout_ms: remaining_ms(deadline),
            };
            let reply = self.call(target, &address, &request, deadline).await;
            match reply {
                Ok(Reply::Joined(Ok(index))) => {
                    return self.await_applied(index, deadline, timeout).await
                }
                Ok(Reply::Joined(Err(ForwardError::NotLeader {
                    leader: Some(leader),
                    address: Some(address),
                }))) => {
                    targets.insert(0, (leader, address));
                    continue;
                }
                Ok(other) => last_error = format!("node {target} answered {other:?}"),
                Err(e) => last_error = e.to_string(),
            }
            self.pause(deadline).await;
        }
        Err(MetadataError::Join(format!(
            "not a voter after {} ms: {last_error}",
            timeout.as_millis()
        )))
    }

    /// Proposes `command` to the log (through the leader, wherever it is) and answers once it
    /// is committed and applied on this node, with its log index; or with what the log
    /// refused (`Refused`, the same on every node); or, at `timeout`, with `NoQuorum` when a
    /// majority of the voters cannot be reached, `Timeout` otherwise. Never waits past
    /// `timeout`.
    pub async fn propose(
        &self,
        command: MetadataCommand,
        timeout: Duration,
    ) -> Result<u64, MetadataError> {
        if !self.in_membership().await? {
            return Err(MetadataError::NotMember);
        }
        let deadline = Instant::now() + timeout;
        let proposing = self.propose_until(command, deadline, timeout);
        match tokio::time::timeout_at(deadline, proposing).await {
            Ok(result) => result,
            Err(_) => Err(self.timed_out(timeout)),
        }
    }

    async fn propose_until(
        &self,
        command: MetadataCommand,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<u64, MetadataError> {
        loop {
            let leader = self.metrics().current_leader;
            if leader == Some(self.id) {
                match self.raft.client_write(command.clone()).await {
                    Ok(written) => return committed(written.log_id.index, written.data),
                    Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_))) => {}
                    Err(e) => return Err(MetadataError::Stopped(e.to_string())),
                }
            } else if let Some((leader, address)) = leader.and_then(|l| self.address_of(l)) {
                let request = Request::Propose {
                    command: command.clone(),
                    timeout_ms: remaining_ms(deadline),
                };
                match self.call(leader, &address, &request, deadline).await {
                    Ok(Reply::Proposed(Ok((index, response)))) => {
                        self.await_applied(index, deadline, timeout).await?;
                        return committed(index, response);
                    }
                    Ok(Reply::Proposed(Err(ForwardError::Failed(reason)))) => {
                        return Err(MetadataError::Stopped(format!(
                            "the leader, node {leader}, failed: {reason}"
                        )))
                    }
                    // Not the leader any more, unreachable, or not committed in time (the
                    // deadline says which error that is): look again. A proposal that did
                    // commit is answered as applied when proposed again (a schema change by
                    // its version; a token claim is the same claim).
                    Ok(_) | Err(_) => {}
                }
            }
            self.pause(deadline).await;
        }
    }

    /// A read barrier (ScyllaDB's group 0 `read_barrier`): waits until this node has
    /// applied every entry committed before the call, so that what a DDL statement answered
    /// on another node is visible here. Asks the leader (which confirms its leadership with
    /// a quorum) for its committed index; fails at `timeout` as `propose` does.
    pub async fn read_barrier(&self, timeout: Duration) -> Result<(), MetadataError> {
        if !self.in_membership().await? {
            return Err(MetadataError::NotMember);
        }
        let deadline = Instant::now() + timeout;
        match tokio::time::timeout_at(deadline, self.read_barrier_until(deadline, timeout)).await {
            Ok(result) => result,
            Err(_) => Err(self.timed_out(timeout)),
        }
    }

    async fn read_barrier_until(
        &self,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<(), MetadataError> {
        loop {
            let leader = self.metrics().current_leader;
            let index = if leader == Some(self.id) {
                self.read_index(remaining_ms(deadline)).await.ok()
            } else if let Some((leader, address)) = leader.and_then(|l| self.address_of(l)) {
                let request = Request::ReadIndex {
                    timeout_ms: remaining_ms(deadline),
                };
                match self.call(leader, &address, &request, deadline).await {
                    Ok(Reply::ReadIndex(Ok(index))) => Some(index),
                    _ => None,
                }
            } else {
                None
            };
            match index {
                Some(Some(index)) => return self.await_applied(index, deadline, timeout).await,
                Some(None) => return Ok(()),
                None => self.pause(deadline).await,
            }
        }
    }

    /// As leader: the committed index a read barrier waits for, once a quorum confirmed this
    /// node still leads.
    async fn read_index(&self, timeout_ms: u64) -> Result<Option<u64>, ForwardError> {
        if self.leader() != Some(self.id) {
            return Err(self.not_leader());
        }
        let read = tokio::time::timeout(
            Duration::from_millis(timeout_ms),
            self.raft.get_read_log_id(),
        )
        .await
        .map_err(|_| ForwardError::Timeout)?;
        match read {
            Ok((read_log_id, _applied)) => Ok(read_log_id.map(|l| l.index)),
            Err(RaftError::APIError(_)) => Err(self.not_leader()),
            Err(e) => Err(ForwardError::Failed(e.to_string())),
        }
    }

    /// The error a proposal that ran out of time gets: how many voters answered lately says
    /// whether a quorum could have committed it.
    fn timed_out(&self, timeout: Duration) -> MetadataError {
        let voters = self.voters();
        let window = self.config.reachability_window();
        let reachable = voters
            .iter()
            .filter(|v| **v == self.id || self.reachability.reachable(**v, window))
            .count();
        let timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        if voters.is_empty() || reachable * 2 <= voters.len() {
            MetadataError::NoQuorum {
                reachable,
                voters: voters.len(),
                timeout_ms,
            }
        } else {
            MetadataError::Timeout {
                reachable,
                voters: voters.len(),
                timeout_ms,
            }
        }
    }

    /// Waits until this node has applied the log up to `index`; at `deadline`, fails as an
    /// operation of `timeout` that ran out of time does (`NoQuorum` or `Timeout`: this node
    /// lags, its log has not stopped).
    async fn await_applied(
        &self,
        index: u64,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<(), MetadataError> {
        let remaining = deadline.saturating_duration_since(Instant::now());
        match self
            .raft
            .wait(Some(remaining))
            .applied_index_at_least(Some(index), "a proposal to apply here")
            .await
        {
            Ok(_) => Ok(()),
            Err(WaitError::Timeout(..)) => Err(self.timed_out(timeout)),
            Err(e @ WaitError::ShuttingDown) => {
                Err(MetadataError::Stopped(format!("not applied here: {e}")))
            }
        }
    }

    fn address_of(&self, node: NodeId) -> Option<(NodeId, String)> {
        let metrics = self.metrics();
        let address = metrics.membership_config.membership().get_node(&node)?;
        Some((node, address.addr.clone()))
    }

    async fn call(
        &self,
        target: NodeId,
        address: &str,
        request: &Request,
        deadline: Instant,
    ) -> Result<Reply, crate::TransportError> {
        let remaining = deadline.saturating_duration_since(Instant::now());
        call(
            &*self.transport,
            &self.reachability,
            target,
            address,
            request,
            remaining,
        )
        .await
    }

    /// Waits a heartbeat (or until the deadline) before looking for a leader again.
    async fn pause(&self, deadline: Instant) {
        let next = Instant::now() + Duration::from_millis(self.config.heartbeat_interval_ms);
        tokio::time::sleep_until(next.min(deadline)).await;
    }

    /// Answers a message from another node (what its transport hands over) with the reply to
    /// send back.
    pub async fn handle(&self, message: &[u8]) -> Vec<u8> {
        let reply = match decode::<Request>(message) {
            Ok(request) => self.answer(request).await,
            Err(reason) => Reply::Malformed(reason),
        };
        encode(&reply)
    }

    async fn answer(&self, request: Request) -> Reply {
        match request {
            Request::AppendEntries(rpc) => {
                if let Some(leader) = rpc.vote.leader_id().voted_for() {
                    self.reachability.record(leader, true);
                }
                let answered = self.raft.append_entries(rpc).await;
                // Accepted (the leader's term is current here), whether or not the entries
                // matched: this node heard from a leader.
                if matches!(&answered, Ok(r) if !matches!(r, AppendEntriesResponse::HigherVote(_)))
                {
                    self.clock.heard_from_leader();
                }
                Reply::AppendEntries(answered)
            }
            Request::Vote(rpc) => {
                if let Some(candidate) = rpc.vote.leader_id().voted_for() {
                    self.reachability.record(candidate, true);
                }
                let answered = self.raft.vote(rpc).await;
                if matches!(&answered, Ok(r) if r.vote_granted) {
                    // Raft restarts a voter's election timer when it grants its vote.
                    self.clock.reset_timer();
                }
                Reply::Vote(answered)
            }
            Request::InstallSnapshot(rpc) => {
                let vote = rpc.vote;
                let answered = self.raft.install_snapshot(rpc).await;
                // A refusal answers this node's own, greater, vote.
                if matches!(&answered, Ok(r) if r.vote == vote) {
                    self.clock.heard_from_leader();
                }
                Reply::InstallSnapshot(answered)
            }
            Request::PreVote(request) => Reply::PreVote(self.answer_pre_vote(request)),
            Request::Propose {
                command,
                timeout_ms,
            } => Reply::Proposed(self.propose_as_leader(command, timeout_ms).await),
            Request::ReadIndex { timeout_ms } => {
                Reply::ReadIndex(self.read_index(timeout_ms).await)
            }
            Request::Join {
                node,
                address,
                timeout_ms,
            } => Reply::Joined(self.add_voter(node, address, timeout_ms).await),
        }
    }

    /// The pre-vote rule (`election::grants_pre_vote`): granted iff this node is not the
    /// leader, has heard from none within `election_timeout_min_ms`, and the candidate's log
    /// is at least as long as its own. Changes nothing here.
    fn answer_pre_vote(&self, request: PreVoteRequest) -> PreVoteResponse {
        let is_leader = self.metrics().state == ServerState::Leader;
        let window = Duration::from_millis(self.config.election_timeout_min_ms);
        let leader_heard_recently = self.clock.leader_heard_within(window);
        let own_last_log_id = self.log_store.last_log_id();
        let granted = grants_pre_vote(
            is_leader,
            leader_heard_recently,
            request.last_log_id.as_ref(),
            own_last_log_id.as_ref(),
        );
        tracing::debug!(
            node = %self.id,
            candidate = %request.candidate,
            next_term = request.next_term,
            granted,
            is_leader,
            leader_heard_recently,
            "pre-vote"
        );
        PreVoteResponse { granted }
    }

    fn not_leader(&self) -> ForwardError {
        let leader = self.leader().filter(|l| *l != self.id);
        ForwardError::NotLeader {
            leader,
            address: leader.and_then(|l| self.address_of(l)).map(|(_, a)| a),
        }
    }

    async fn propose_as_leader(
        &self,
        command: MetadataCommand,
        timeout_ms: u64,
    ) -> Result<(u64, MetadataResponse), ForwardError> {
        if self.leader() != Some(self.id) {
            return Err(self.not_leader());
        }
        let written = tokio::time::timeout(
            Duration::from_millis(timeout_ms),
            self.raft.client_write(command),
        )
        .await
        .map_err(|_| ForwardError::Timeout)?;
        match written {
            Ok(written) => Ok((written.log_id.index, written.data)),
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_))) => {
                Err(self.not_leader())
            }
            Err(e) => Err(ForwardError::Failed(e.to_string())),
        }
    }

    /// As leader: makes `node` a learner (it catches up), then a voter, one join at a time.
    async fn add_voter(
        &self,
        node: NodeId,
        address: String,
        timeout_ms: u64,
    ) -> Result<u64, ForwardError> {
        if self.leader() != Some(self.id) {
            return Err(self.not_leader());
        }
        let changing = async {
            let _turn = self.membership_changes.lock().await;
            let forward = |e: RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>| match e {
                RaftError::APIError(ClientWriteError::ForwardToLeader(_)) => self.not_leader(),
                other => ForwardError::Failed(other.to_string()),
            };
            if self.voters().contains(&node) {
                let applied = self.metrics().last_applied.map_or(0, |l| l.index);
                return Ok(applied);
            }
            self.raft
                .add_learner(node, BasicNode::new(address), true)
                .await
                .map_err(forward)?;
            let promoted = self
                .raft
                .change_membership(ChangeMembers::AddVoterIds(BTreeSet::from([node])), false)
                .await
                .map_err(forward)?;
            Ok(promoted.log_id.index)
        };
        tokio::time::timeout(Duration::from_millis(timeout_ms), changing)
            .await
            .unwrap_or(Err(ForwardError::Timeout))
    }

    /// Stops this node's elections and its Raft (its state stays in its directory).
    pub async fn shutdown(&self) -> Result<(), MetadataError> {
        let elector = self.lock_elector().take();
        if let Some(elector) = elector {
            elector.abort();
            let _ = elector.await; // cancelled, or ended by itself: either way stopped
        }
        self.raft
            .shutdown()
            .await
            .map_err(|e| MetadataError::Stopped(e.to_string()))
    }

    fn lock_elector(&self) -> std::sync::MutexGuard<'_, Option<tokio::task::JoinHandle<()>>> {
        self.elector
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Drop for MetadataService {
    /// A service dropped without `shutdown` stops its elections too: the elector holds a
    /// handle on the Raft and would otherwise keep it campaigning.
    fn drop(&mut self) {
        if let Some(elector) = self.lock_elector().take() {
            elector.abort();
        }
    }
}

fn committed(index: u64, response: MetadataResponse) -> Result<u64, MetadataError> {
    match response {
        MetadataResponse::Applied => Ok(index),
        MetadataResponse::Refused(reason) => Err(MetadataError::Refused(reason)),
    }
}

fn remaining_ms(deadline: Instant) -> u64 {
    let remaining = deadline.saturating_duration_since(Instant::now());
    u64::try_from(remaining.as_millis()).unwrap_or(u64::MAX)
}
