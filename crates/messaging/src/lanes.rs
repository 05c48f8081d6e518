//! Lanes: which runtime serves which of a peer's connections (ScyllaDB's shard-per-core
//! messaging, adapted).
//!
//! A node given shards (the CQL server's single-threaded runtimes, one thread each) keeps one
//! lane per shard plus a main lane (the runtime the service was started on). A message goes
//! out on the lane of the thread that sends it, on that lane's own connections to the peer,
//! whose task runs on that lane's runtime: queueing a message wakes no other thread. The
//! handshake carries the dialer's lane, and the acceptor serves the connection on its own
//! same-numbered shard (modulo its shard count), where the replica verb runs and its response
//! is queued on that shard's own connection back, which the first node serves on the shard
//! that sent the request. So a replicated write's internode hops stay on one thread per node,
//! and completing the request wakes no thread but the one waiting for it. Messages sent from
//! any other thread (the main runtime's tasks: the metadata log, hints, gossip's followers; a
//! blocking pool) use the main lane, served on the main runtime at the peer too.
//!
//! Which lane a thread is on is a thread-local, set on each shard's thread by a task the
//! service spawns there at start: so shard runtimes must be current-thread runtimes, each
//! driven by one thread (as `cql_server::Shards` are). A node without shards (the simulation,
//! tests) has the main lane only, and everything runs where the service was started.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::runtime::Handle;

use crate::handshake::MAIN_LANE;

/// Services started in this process, so that a thread that is a shard of two services (tests)
/// knows its lane in each.
static NEXT_SERVICE_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The lanes this thread is a shard of: (service id, shard index). At most one entry per
    /// service started with this thread among its shards, a handful in any process.
    static THREAD_LANES: RefCell<Vec<(u64, usize)>> = const { RefCell::new(Vec::new()) };
}

/// A service's lanes: its shards' runtimes and its main runtime. Lane `i < shards` is shard
/// `i`; lane `shards` is the main lane.
pub(crate) struct Lanes {
    service_id: u64,
    shards: Vec<Handle>,
    main: Handle,
}

impl Lanes {
    /// Lanes over `shards` (current-thread runtimes, each driven by one thread) and `main`.
    /// [`Lanes::register`] must run before the shards' lanes are used.
    pub fn new(shards: Vec<Handle>, main: Handle) -> Lanes {
        assert!(
            shards.len() < usize::from(MAIN_LANE),
            "a lane number must fit the handshake"
        );
        Lanes {
            service_id: NEXT_SERVICE_ID.fetch_add(1, Ordering::Relaxed),
            shards,
            main,
        }
    }

    /// Tells each shard's thread its lane (a task on each, awaited).
    pub async fn register(&self) {
        for (index, shard) in self.shards.iter().enumerate() {
            let service_id = self.service_id;
            let registered = shard.spawn(async move {
                THREAD_LANES.with(|lanes| lanes.borrow_mut().push((service_id, index)));
            });
            // A shard whose runtime is gone cannot send either: its lane is never asked for.
            let _ = registered.await;
        }
    }

    /// How many lanes: one per shard and the main lane.
    pub fn count(&self) -> usize {
        self.shards.len() + 1
    }

    /// The main lane's index.
    pub fn main(&self) -> usize {
        self.shards.len()
    }

    /// The lane of the calling thread: its shard's, or the main lane on any other thread.
    pub fn current(&self) -> usize {
        THREAD_LANES.with(|lanes| {
            lanes
                .borrow()
                .iter()
                .find(|(service, _)| *service == self.service_id)
                .map_or(self.main(), |(_, index)| *index)
        })
    }

    /// The runtime that runs lane `lane`'s tasks.
    pub fn runtime(&self, lane: usize) -> &Handle {
        self.shards.get(lane).unwrap_or(&self.main)
    }

    /// What the handshake says for lane `lane`.
    pub fn wire(&self, lane: usize) -> u16 {
        if lane < self.shards.len() {
            u16::try_from(lane).expect("checked at construction")
        } else {
            MAIN_LANE
        }
    }

    /// The lane that serves a connection whose dialer said `wire`: the same-numbered shard
    /// (modulo this node's shard count), or the main lane for the dialer's main lane or when
    /// this node has no shards.
    pub fn for_dialer(&self, wire: u16) -> usize {
        if wire == MAIN_LANE || self.shards.is_empty() {
            self.main()
        } else {
            usize::from(wire) % self.shards.len()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_knows_its_lane_and_the_acceptor_maps_the_dialers() {
        let shard = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let shard_handle = shard.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let _ = shard.block_on(stopped);
        });
        let main = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        main.block_on(async {
            let lanes = std::sync::Arc::new(Lanes::new(
                vec![shard_handle.clone()],
                tokio::runtime::Handle::current(),
            ));
            let other = Lanes::new(vec![shard_handle.clone()], Handle::current());
            lanes.register().await;
            assert_eq!(lanes.count(), 2);
            assert_eq!(lanes.current(), 1, "this thread is no shard: the main lane");
            let on_shard = lanes.clone();
            let seen = shard_handle
                .spawn(async move { (on_shard.current(), other.current()) })
                .await
                .expect("join");
            assert_eq!(
                seen,
                (0, 1),
                "a shard of one service is not one of another's"
            );
            assert_eq!(lanes.wire(0), 0);
            assert_eq!(lanes.wire(1), MAIN_LANE);
            assert_eq!(lanes.for_dialer(0), 0);
            assert_eq!(lanes.for_dialer(3), 0, "modulo the shard count");
            assert_eq!(lanes.for_dialer(MAIN_LANE), 1);
        });
        stop.send(()).expect("shard running");
        thread.join().expect("shard thread");
        let alone = Lanes::new(Vec::new(), main.handle().clone());
        assert_eq!((alone.count(), alone.for_dialer(2)), (1, 0));
    }
}
