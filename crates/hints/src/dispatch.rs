//! The hint service's tasks: the flusher (buffered hints to files every `hints_flush_period`)
//! and the dispatcher (a target's files replayed through its replica when it is up), as
//! Cassandra's `HintsWriteExecutor` and `HintsDispatchExecutor`.
//!
//! A dispatch of one target closes its open file (so every hint kept so far is in a closed
//! file), then replays its closed files oldest first, a page of hints at a time, all of a
//! page sent at once and awaited: the hints before the first that failed count as done, and
//! the dispatch stops there, to retry after a backoff (a replayed mutation is idempotent, so
//! the hints after it that were acknowledged too are simply sent again). A file is deleted
//! once every hint in it is done. Before a hint is sent, the throttle takes its bytes.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use coordinator::{Deadline, Mutation, ReplicaError};
use futures_util::future::{join_all, BoxFuture};
use locator::HostId;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::format::Record;
use crate::store::{lock, HintStore, Target};

/// How often the dispatcher looks for live targets with hints besides UP events (Cassandra's
/// `HintsDispatchTrigger` runs every 10 s).
pub const DISPATCH_INTERVAL: Duration = Duration::from_secs(10);
/// The first wait after a failed dispatch; doubled by each failure that follows, up to
/// `MAX_BACKOFF`.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// The running hint service: the store's flusher and dispatcher. Dropping it leaves the tasks
/// running; [`HintsService::shutdown`] stops them and flushes.
pub struct HintsService {
    store: Arc<HintStore>,
    stop: watch::Sender<bool>,
    flusher: JoinHandle<()>,
    dispatcher: JoinHandle<()>,
}

impl HintsService {
    /// Starts the flusher and the dispatcher of `store` on the current runtime. A store may
    /// outlive the runtime of an earlier service (a simulated node's restart keeps it, as a
    /// node keeps its files): a dispatch that service left running is forgotten, and every
    /// backoff ends, so each target with hints is replayed afresh.
    pub fn start(store: Arc<HintStore>) -> HintsService {
        for target in store.all_targets() {
            *lock(&target.dispatch) = crate::store::DispatchState::default();
        }
        let (stop, stopped) = watch::channel(false);
        let flusher = tokio::spawn(flush_loop(store.clone(), stopped.clone()));
        let dispatcher = tokio::spawn(dispatch_loop(store.clone(), stopped));
        HintsService {
            store,
            stop,
            flusher,
            dispatcher,
        }
    }

    /// The store the service runs.
    pub fn store(&self) -> &Arc<HintStore> {
        &self.store
    }

    /// `host` was seen up (gossip's UP): its hints are replayed now, without waiting for a
    /// backoff or the next period.
    pub fn target_up(&self, host: HostId) {
        self.store.target_up(host);
    }

    /// Stops the flusher and the dispatcher (a dispatch in flight is abandoned where it is;
    /// its hints stay in their files), then writes and fsyncs every buffered hint.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.flusher.await;
        let _ = self.dispatcher.await;
        let store = self.store.clone();
        if let Err(e) = self.store.file_step(move || store.flush(false)).await {
            tracing::error!(error = %e, "the final flush of hints failed");
        }
    }
}

impl HintStore {
    /// Runs the blocking file step `step` where `file_io` says: the blocking pool, or inline.
    pub(crate) async fn file_step<T: Send + 'static>(
        &self,
        step: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, tokio::task::JoinError> {
        match self.config.file_io {
            crate::FileIo::BlockingPool => tokio::task::spawn_blocking(step).await,
            crate::FileIo::Inline => Ok(step()),
        }
    }

    /// See [`HintsService::target_up`].
    pub fn target_up(&self, host: HostId) {
        for target in self.all_targets() {
            if target.host == host {
                let mut state = lock(&target.dispatch);
                state.retry_at = None;
                state.backoff = Duration::ZERO;
            }
        }
        self.dispatch_soon.notify_one();
    }
}

async fn flush_loop(store: Arc<HintStore>, mut stopped: watch::Receiver<bool>) {
    let mut ticker = tokio::time::interval(store.config.flush_period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => store.retry_disk(),
            _ = store.flush_soon.notified() => {}
            _ = stopped.changed() => return,
        }
        let flushing = store.clone();
        if let Err(e) = store.file_step(move || flushing.flush(false)).await {
            tracing::error!(error = %e, "the hints flush task failed");
        }
    }
}

async fn dispatch_loop(store: Arc<HintStore>, mut stopped: watch::Receiver<bool>) {
    let mut ticker = tokio::time::interval(DISPATCH_INTERVAL);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut running = tokio::task::JoinSet::new();
    loop {
        // A failed dispatch is retried when its backoff ends, not at the next period.
        let retry = store.next_retry();
        let retry_due = async move {
            match retry {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = ticker.tick() => {}
            _ = store.dispatch_soon.notified() => {}
            _ = retry_due => {}
            Some(_) = running.join_next(), if !running.is_empty() => continue,
            _ = stopped.changed() => {
                running.abort_all();
                while running.join_next().await.is_some() {}
                return;
            }
        }
        let now = Instant::now();
        for target in store.all_targets() {
            if target.pending() == 0 || !store.targets.is_alive(target.host) {
                continue;
            }
            {
                let mut state = lock(&target.dispatch);
                if state.running || state.retry_at.is_some_and(|at| at > now) {
                    continue;
                }
                state.running = true;
            }
            running.spawn(run_dispatch(store.clone(), target));
        }
    }
}

impl HintStore {
    /// When the first backoff still running of a target with hints ends. One that ended
    /// already is not a reason to wake (its target may be down, and would be skipped again at
    /// once): the period or an UP event dispatches it.
    pub(crate) fn next_retry(&self) -> Option<Instant> {
        let now = Instant::now();
        self.all_targets()
            .iter()
            .filter(|t| t.pending() > 0)
            .filter_map(|t| {
                let state = lock(&t.dispatch);
                state.retry_at.filter(|at| !state.running && *at > now)
            })
            .min()
    }
}

/// Why a dispatch ended.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Nothing left to replay.
    Done,
    /// The target went down, or has no replica to send to.
    Stopped,
    /// A hint was not acknowledged.
    Failed(ReplicaError),
}

/// One dispatch of `target`, with its bookkeeping (backoff, last replay time).
async fn run_dispatch(store: Arc<HintStore>, target: Arc<Target>) {
    let started = Instant::now();
    let outcome = dispatch(&store, &target).await;
    let mut state = lock(&target.dispatch);
    state.running = false;
    match outcome {
        Outcome::Done => {
            state.retry_at = None;
            state.backoff = Duration::ZERO;
            target
                .last_replay_ms
                .store(store.now_ms(), Ordering::Release);
            tracing::debug!(target = %target.host, elapsed_ms = started.elapsed().as_millis() as u64, "hints replayed");
        }
        Outcome::Stopped => {}
        Outcome::Failed(e) => {
            state.backoff = (state.backoff * 2).clamp(FIRST_BACKOFF, MAX_BACKOFF);
            state.retry_at = Some(Instant::now() + state.backoff);
            tracing::info!(target = %target.host, error = %e, retry_in_ms = state.backoff.as_millis() as u64, "hint delivery failed; retrying later");
        }
    }
}

/// Replays `target`'s hints until none is left, it goes down, or one fails.
pub(crate) async fn dispatch(store: &Arc<HintStore>, target: &Arc<Target>) -> Outcome {
    let Some(replica) = store.targets.replica(target.host) else {
        return Outcome::Stopped;
    };
    let mut throttle = Throttle::new(store.throttle_for_target());
    loop {
        if !store.targets.is_alive(target.host) {
            return Outcome::Stopped;
        }
        let page = {
            let (stepping, target) = (store.clone(), target.clone());
            store
                .file_step(move || match stepping.read_page(&target) {
                    Some(page) => Some(page),
                    None => {
                        // Every closed file is done: close the open one, and go on if it held any.
                        stepping.flush_target(&target, true);
                        stepping.read_page(&target)
                    }
                })
                .await
        };
        let page = match page {
            Ok(Some(page)) => page,
            Ok(None) => return Outcome::Done,
            Err(e) => return Outcome::Failed(ReplicaError::Internal(e.to_string())),
        };
        let deadline = Deadline::after(store.config.delivery_timeout);
        let mut sends: Vec<BoxFuture<'static, Result<(), ReplicaError>>> = Vec::new();
        let mut sent = Vec::with_capacity(page.records.len());
        for (_, record) in &page.records {
            match store.judge(target, record) {
                Some(mutation) => {
                    throttle.take(record.size_bytes).await;
                    sends.push(replica.apply_mutation(mutation, deadline));
                    sent.push(true);
                }
                None => {
                    sends.push(Box::pin(async { Ok(()) }));
                    sent.push(false);
                }
            }
        }
        let results = join_all(sends).await;
        // Done: the hints before the first failure (acknowledged, or discarded).
        let acked = results.iter().take_while(|r| r.is_ok()).count();
        let delivered = sent[..acked].iter().filter(|s| **s).count() as u64;
        target
            .counters
            .delivered
            .fetch_add(delivered, Ordering::Relaxed);
        let finished = acked == page.records.len() && page.last;
        if acked > 0 || finished {
            let offset = acked.checked_sub(1).map(|n| page.records[n].0);
            let last_created = acked.checked_sub(1).map(|n| page.records[n].1.created_ms);
            let (stepping, target, path) = (store.clone(), target.clone(), page.path.clone());
            let done = acked as u64;
            let _ = store
                .file_step(move || {
                    stepping.advance(&target, &path, offset, done, last_created, finished)
                })
                .await;
        }
        if let Some(Err(e)) = results.into_iter().find(|r| r.is_err()) {
            return Outcome::Failed(e);
        }
    }
}

impl HintStore {
    /// The bytes per second one target's dispatch may send: `hinted_handoff_throttle` split
    /// across the other nodes (Cassandra's `DispatchHintsTask`: the goal is to bound the hint
    /// traffic a recovering node receives from the whole cluster); `None` for no throttle.
    pub(crate) fn throttle_for_target(&self) -> Option<f64> {
        let throttle = self.config.throttle_bytes_per_second;
        if throttle == 0 {
            return None;
        }
        let others = self.targets.node_count().saturating_sub(1).max(1);
        Some(throttle as f64 / others as f64)
    }

    /// The mutation a hint replays, or `None` if it is discarded (counted): one that does not
    /// decode, one whose tables were all dropped, or one older than the smallest
    /// `gc_grace_seconds` of its tables (Cassandra's hint TTL: replayed after gc_grace, its
    /// data could resurrect what a purged tombstone deleted). Updates of dropped tables are
    /// left out of a hint that also writes live ones.
    pub(crate) fn judge(&self, target: &Target, record: &Record) -> Option<Mutation> {
        let counters = &target.counters;
        let updates = match mutation::decode_mutation(&record.mutation) {
            Ok(updates) => updates,
            Err(e) => {
                tracing::error!(target = %target.host, error = %e, "a hint does not decode; discarded");
                counters.dropped_corrupt.fetch_add(1, Ordering::Relaxed);
                return None;
            }
        };
        let mut smallest_gc_grace: Option<u32> = None;
        let live: Vec<_> = updates
            .into_iter()
            .filter(|u| match self.tables.gc_grace_seconds(u.table) {
                Some(gc) => {
                    smallest_gc_grace = Some(smallest_gc_grace.map_or(gc, |s| s.min(gc)));
                    true
                }
                None => false,
            })
            .collect();
        let Some(gc_grace) = smallest_gc_grace else {
            counters.dropped_table.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        let expires_ms = record.created_ms.saturating_add(i64::from(gc_grace) * 1000);
        if expires_ms <= self.now_ms() {
            counters.dropped_expired.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        Some(Mutation {
            updates: Arc::new(live),
            durable_writes: record.durable_writes,
        })
    }
}

/// A rate limiter of bytes per second for one dispatch (Guava's `RateLimiter`, as Cassandra
/// uses it, without its burst): a take of `n` bytes waits until the time the earlier takes
/// paid for has passed, then pays `n / rate` seconds more.
pub(crate) struct Throttle {
    bytes_per_second: Option<f64>,
    next_free: Option<Instant>,
}

impl Throttle {
    pub(crate) fn new(bytes_per_second: Option<f64>) -> Throttle {
        Throttle {
            bytes_per_second,
            next_free: None,
        }
    }

    pub(crate) async fn take(&mut self, bytes: u64) {
        let Some(rate) = self.bytes_per_second else {
            return;
        };
        let now = Instant::now();
        let start = match self.next_free {
            Some(at) if at > now => {
                tokio::time::sleep_until(at).await;
                at
            }
            _ => now,
        };
        self.next_free = Some(start + Duration::from_secs_f64(bytes as f64 / rate));
    }
}
