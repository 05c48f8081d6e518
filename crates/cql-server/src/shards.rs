//! Shards: one thread per core, each running a single-threaded tokio runtime that serves the
//! connections placed on it, as ScyllaDB pins each connection to one shard.
//!
//! A connection's requests already run on its own task (`connection.rs`); a shard also keeps
//! everything that task hands off (a write group's task, `replica::LocalReplica`) on the
//! same thread, so serving a request wakes no other thread. On a work-stealing runtime, each
//! yield to a write group pushed the connection's task to the shared queue and woke a parked
//! worker to steal it: a futex wake and an inter-processor interrupt per burst of requests,
//! which a virtual machine turns into exits to its hypervisor, and the woken worker then ran
//! the request on cold caches. Removing it lowered the median latency at fixed rates by about
//! 40 us; the tail is now set by the requests' own work (bench/README, "What bounds Helenus
//! now").
//!
//! The price: a connection's requests use one core, and a request that computes for long
//! delays the other connections of its shard (storage calls that may wait still go to the
//! shard's blocking pool). Drivers open a connection per host at least, and the listener
//! places each new connection on the shard with the fewest.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinSet;

/// The shard threads and their runtimes. Dropping it stops every shard (see [`Shards::stop`]).
/// Public so that `helenus-ceiling` serves its connections the way the server does.
pub struct Shards {
    shards: Vec<Shard>,
}

struct Shard {
    handle: tokio::runtime::Handle,
    /// Connections placed on this shard and still open.
    connections: Arc<AtomicUsize>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Shards {
    /// Starts `count` shard threads (at least one), each with a blocking pool of at most
    /// `max_blocking_threads` threads for the storage calls that may wait.
    pub fn start(count: usize, max_blocking_threads: usize) -> io::Result<Shards> {
        let mut shards = Shards {
            shards: Vec::with_capacity(count.max(1)),
        };
        for index in 0..count.max(1) {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .thread_name(format!("helenus-shard-{index}-blocking"))
                .max_blocking_threads(max_blocking_threads.max(1))
                .build()?;
            let handle = runtime.handle().clone();
            let (stop, stopped) = oneshot::channel::<()>();
            let thread = std::thread::Builder::new()
                .name(format!("helenus-shard-{index}"))
                // Statements run here, recursing over their trees: the stack they need, set
                // here rather than left to the default (2 MiB, or RUST_MIN_STACK if set).
                .stack_size(query::STATEMENT_STACK_SIZE_BYTES)
                .spawn(move || {
                    // Tasks spawned on a current-thread runtime run only while it is driven:
                    // this thread drives it until told to stop. Dropping the runtime then
                    // cancels what is left and waits for its blocking calls to return.
                    let _ = runtime.block_on(stopped);
                })?;
            shards.shards.push(Shard {
                handle,
                connections: Arc::default(),
                stop: Some(stop),
                thread: Some(thread),
            });
        }
        Ok(shards)
    }

    pub fn count(&self) -> usize {
        self.shards.len()
    }

    /// The shards' runtimes, by index: current-thread runtimes, each driven by its shard's
    /// thread until [`Shards::stop`] (internode messaging runs a lane on each).
    pub fn handles(&self) -> Vec<tokio::runtime::Handle> {
        self.shards.iter().map(|s| s.handle.clone()).collect()
    }

    /// Chooses the shard for a new connection: the one with the fewest open connections
    /// (ties: the lowest index). The connection runs on the returned runtime, holding the
    /// returned guard until it ends.
    fn place(&self) -> (tokio::runtime::Handle, OpenConnection) {
        let shard = self
            .shards
            .iter()
            .min_by_key(|s| s.connections.load(Ordering::Relaxed))
            .expect("there is at least one shard");
        shard.connections.fetch_add(1, Ordering::Relaxed);
        (
            shard.handle.clone(),
            OpenConnection(shard.connections.clone()),
        )
    }

    /// Moves an accepted socket onto the shard with the fewest open connections and runs
    /// `serve` with it there, as a task of `connections`. Fails only if the socket cannot leave
    /// the accepting runtime's reactor.
    pub fn spawn<F, Fut>(
        &self,
        connections: &mut JoinSet<()>,
        socket: TcpStream,
        peer: SocketAddr,
        serve: F,
    ) -> io::Result<()>
    where
        F: FnOnce(TcpStream) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        // Off the accepting runtime's reactor here, onto the shard's below (on the shard).
        let socket = socket.into_std()?;
        let (shard, open) = self.place();
        connections.spawn_on(
            async move {
                let _open = open;
                match TcpStream::from_std(socket) {
                    Ok(socket) => serve(socket).await,
                    Err(e) => tracing::warn!(%peer, error = %e, "cannot register a connection"),
                }
            },
            &shard,
        );
        Ok(())
    }

    /// Stops every shard and waits for its thread. Call it after the connections are done:
    /// tasks still on a shard are cancelled. Blocks: not for a runtime worker.
    pub fn stop(mut self) {
        self.stop_all();
    }

    fn stop_all(&mut self) {
        for shard in &mut self.shards {
            if let Some(stop) = shard.stop.take() {
                let _ = stop.send(());
            }
        }
        for shard in &mut self.shards {
            if let Some(thread) = shard.thread.take() {
                if thread.join().is_err() {
                    tracing::error!("a shard thread panicked");
                }
            }
        }
    }
}

impl Drop for Shards {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// Counts a connection as open on its shard until dropped.
struct OpenConnection(Arc<AtomicUsize>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_go_to_the_least_loaded_shard_and_run_on_its_thread() {
        let shards = Shards::start(2, 1).expect("start");
        let control = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        control.block_on(async {
            let (release_tx, release_rx) = tokio::sync::oneshot::channel::<()>();
            // The first connection stays open: the second goes to the other shard, and the
            // third (after the second ended) to the second's shard again.
            let (handle, open) = shards.place();
            let first = handle.spawn(async move {
                let _open = open;
                let _ = release_rx.await;
            });
            let mut threads = Vec::new();
            for _ in 0..2 {
                let (handle, open) = shards.place();
                let name = handle
                    .spawn(async move {
                        let _open = open;
                        std::thread::current().name().map(str::to_string)
                    })
                    .await
                    .expect("join");
                threads.push(name.expect("named thread"));
            }
            assert_eq!(threads, ["helenus-shard-1", "helenus-shard-1"]);
            release_tx.send(()).expect("first is waiting");
            first.await.expect("join");
        });
        assert!(shards
            .shards
            .iter()
            .all(|s| s.connections.load(Ordering::Relaxed) == 0));
        shards.stop();
    }
}
