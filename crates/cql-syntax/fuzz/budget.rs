//! The stack budget of a fuzz input, shared by the fuzz targets of `cql-syntax`, `cql-protocol`,
//! `query` and `mutation` (each includes this file by path).
//!
//! libFuzzer runs each input on its main thread, whose stack (8 MiB, or `ulimit -s`) is larger
//! than the threads of the node that run requests get, so a recursion too deep for a shard
//! could pass unseen. Each target therefore runs its inputs on one worker thread of
//! `STACK_SIZE_BYTES`: a recursion that needs more overflows it and aborts the process, which
//! libFuzzer reports as a crash with the input. The time budget is libFuzzer's own: run with
//! `-timeout=1` and an input taking over a second is reported as a failure too (see the
//! README's Fuzzing section).

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Mutex, OnceLock};

/// The stack an input runs on: a quarter of what the node's shard threads have
/// (`query::STATEMENT_STACK_SIZE_BYTES`, 8 MiB), so a recursion that threatens a shard fails
/// here first. The deepest statements the parser accepts need about 1.1 MiB in a debug build,
/// and run within this budget in the fuzzers' optimised and instrumented build (the seed
/// corpora hold them: `depth-*`).
pub const STACK_SIZE_BYTES: usize = 2 * 1024 * 1024;

type Work = Box<dyn FnOnce() + Send>;

struct Worker {
    inputs: SyncSender<Work>,
    done: Receiver<()>,
}

/// Runs `work` on the worker thread of `STACK_SIZE_BYTES` and waits for it. A panic there
/// aborts the process (libfuzzer-sys's panic hook), as one on the main thread would.
pub fn run(work: impl FnOnce() + Send + 'static) {
    static WORKER: OnceLock<Mutex<Worker>> = OnceLock::new();
    let worker = WORKER.get_or_init(|| {
        let (inputs, work_rx) = sync_channel::<Work>(0);
        let (done_tx, done) = sync_channel(0);
        std::thread::Builder::new()
            .name("fuzz-input".to_string())
            .stack_size(STACK_SIZE_BYTES)
            .spawn(move || {
                for work in work_rx {
                    work();
                    if done_tx.send(()).is_err() {
                        return;
                    }
                }
            })
            .expect("the fuzz worker thread starts");
        Mutex::new(Worker { inputs, done })
    });
    let worker = worker.lock().unwrap_or_else(|p| p.into_inner());
    worker
        .inputs
        .send(Box::new(work))
        .expect("the fuzz worker is running");
    worker.done.recv().expect("the fuzz worker finishes the input");
}
