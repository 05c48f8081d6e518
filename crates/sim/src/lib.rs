//! Deterministic simulation of the cluster layer (issue 36, items 4 and 6): the real code of N
//! nodes (3 to 9) in one process on turmoil (the tokio project's simulator), under seeded
//! faults, with every run's history checked.
//!
//! Each node runs `messaging::MessagingService` over turmoil's TCP ([`TurmoilNetwork`]), a
//! `replica::LocalReplica` over a `storage::MemoryEngine` (kept across the node's restarts, as a
//! commit log synced on every write would keep it), a `coordinator::Coordinator` over a
//! static ring (`locator::TokenMetadata`, an RF=3 SimpleStrategy keyspace) whose write
//! timestamps come from sim time plus the node's clock skew, with hinted handoff (the real
//! `hints::HintStore` and `HintsService`, the store kept across restarts in a per-node
//! temporary directory; `hinted` says what stands in for the disk and for gossip), and the
//! real cluster metadata log (`cluster_metadata::MetadataService`, openraft) over messaging
//! ([`metadata`]). Clients on every node write unique values to a few register keys and read
//! them at QUORUM, and propose schema changes to a spare keyspace (create, alter, drop of its
//! tables, decided on the node's applied schema: a stale version refused is a normal outcome),
//! while the seed's faults run: message loss and delay (messaging's fault hook, [`Chaos`]), link latency and
//! reordering, partitions (turmoil `hold`/`release`; see `faults` for why not `partition`),
//! node crashes and restarts, and for half the seeds clock skew (some nodes ahead or behind by
//! up to 300 ms, jumping at run time: [`faults::clock_skews`]). Then everything heals and
//! every node reads every key at ALL.
//!
//! Every run checks ([`history::check`], [`metadata::check`]): no QUORUM read goes back in time
//! after an acknowledged QUORUM write or an earlier read (a register check with recorded
//! invocations and completions in sim time; under skew, by the writes' timestamps, since
//! last-write-wins lets a later write with a smaller timestamp lose); no request waits past
//! its timeout; the final reads at ALL all succeed and agree; then each node's storage, read
//! directly, agrees on every key among the nodes holding it, which are exactly its replicas.
//! Before the final reads (which repair what they read), once the clients' last requests ended
//! and the hints were replayed: hints are delivered (none pending on any node), and every
//! acknowledged write is readable at ONE from each of its replicas (its storage read directly
//! holds the write or a later one, by timestamp).
//! And the metadata log: every node applies a prefix of one common log, all the same after the
//! heal; that log, applied to an empty state, gives every node's answers and final state (the
//! ring and the schema converge, with the tokens each node claimed); every proposal
//! acknowledged as committed is at its index, a schema change taking effect exactly once; no
//! proposal waits past its timeout. A seed replays exactly: the same seed gives the same
//! history and the same metadata logs (`tests/seeds.rs` checks it), and a failing run prints
//! its seed, its fault schedule and the history around the first violation (the proposals and
//! each node's applied log for the metadata log: [`RunReport::describe`]).
//!
//! Commands: `cargo test -p sim` runs a few hundred seeds; thousands:
//! `SIM_SEEDS=10000 cargo test -p sim --release --test seeds seeds_find -- --nocapture` (and
//! `SIM_SEED_BASE=n` to start elsewhere); one seed: `SIM_SEED=n cargo test -p sim --test seeds
//! replay_one -- --nocapture`.
//!
//! Determinism: turmoil runs every host on one thread with its own paused tokio clock and a
//! seeded network; the harness seeds everything else from the run's seed (the fault schedule,
//! messaging's reconnection jitter through `Environment::random`, the `Chaos` hook, the
//! clients, the ring's tokens, openraft's election timeouts through
//! `cluster_metadata::seed_rng` on the run's thread), fixes turmoil's epoch (write timestamps
//! come from sim time through `Coordinator::with_clock`), and uses no UUID v4. Two sources it
//! cannot seed, and why they do not break replay: tokio's `select!` draws a branch order from
//! a per-runtime generator seeded at random (turmoil seeds it only under `--cfg
//! tokio_unstable`); messaging's only unbiased `select!` with two branches that can both be
//! ready is its listener's (accept a connection, reap an ended one), whose order changes
//! nothing; openraft has two (a metrics wait's timeout against a change, replication's backoff
//! sleep against an event: `cluster_metadata::MetadataRuntime`'s docs), where both are ready
//! in one poll only when a timer fires in the same instant as the event, which sim time makes
//! rare and the replay test has not met. And std's `HashMap` iteration order is random per
//! process; messaging iterates its maps only at shutdown. One divergence was found and is
//! worked around: a crashed node's tasks are dropped in an order that follows tokio's
//! process-wide task ids, so the segments its sockets send on drop drew turmoil's latencies in
//! a different order when other threads spawned tasks meanwhile; the harness cuts the node's
//! links for the instant of the crash (`cluster::apply`).
//!
//! The metadata log's storage is a temporary directory per node, kept across its restarts,
//! not an in-memory store: `MetadataService::open` writes with synchronous `std::fs`, fsyncing
//! before each write returns, inside one poll of the Raft core's task, and turmoil crashes a
//! host only between polls, so the directory a restart finds holds exactly what was synced
//! (torn writes are `cluster-metadata`'s crash tests' business).
//!
//! Not yet simulated: gossip membership. What stands in the way:
//! - gossip: chitchat 0.13's `Transport` is injectable, but `ChitchatEnvelope::serialize` and
//!   `deserialize` are crate-private, so a transport over turmoil's UDP cannot encode its
//!   messages (only chitchat's in-process `ChannelTransport` can, outside turmoil's faults);
//!   and chitchat picks gossip partners with `rand::rng()`, which cannot be seeded, so a run
//!   with gossip would not replay exactly.
//! - the coordinator's ring is the static one, not the metadata log's (the check compares the
//!   log's final token map with it); ring changes (joins, decommissions) under traffic are
//!   not simulated.
//!
//! Without a failure detector every endpoint counts as alive, so a request to a crashed or
//! cut-off node times out rather than failing `Unavailable`.
//!
//! Must not be a dependency of any other crate: it exists for its tests. Depends only on crates
//! without RocksDB.

pub mod cluster;
pub mod entropy;
pub mod faults;
mod hinted;
pub mod history;
pub mod membership;
pub mod metadata;
mod network;

pub use cluster::{run, RunReport, SimConfig};
pub use faults::{Chaos, Fault, ScheduledFault};
pub use history::{check, History, Level, Op, OpKind, Outcome, Violation};
pub use membership::{GossipBug, GossipEvent, GossipHistory, GossipViolation};
pub use metadata::{MetadataBug, MetadataHistory, MetadataViolation};
pub use network::TurmoilNetwork;
