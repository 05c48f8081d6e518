//! A recorded history of register operations and its checker (issue 36 item 6): every write
//! and read of a register-like key, with its invocation and completion in sim time, and the
//! check that reads never go back in time (Jepsen's check for Cassandra at QUORUM).
//!
//! The register model: every write writes a value no other write writes, so a read's value
//! names the one write it came from. Last-write-wins makes the "newest" value the one with the
//! highest write timestamp, which the checker cannot see; it checks what real time implies.
//! A read `r` that starts after an event `e` must not return a value whose write finished
//! before the write `e` made visible started:
//! - `e` is an acknowledged write `w` (`w` completed before `r` started), or
//! - `e` is a completed read `r'` that returned `w'`'s value (with blocking read repair a
//!   QUORUM read makes what it returns visible to every later QUORUM read, even the value of a
//!   write that timed out).
//!
//! A read returning no value after such an event, or a value no write of its key wrote (or
//! wrote only after the read ended), is a violation too. Times are whole milliseconds of sim
//! time; "before" is strictly before, so operations within the same millisecond count as
//! concurrent (the check never reports an order it cannot be sure of).
//!
//! Under clock skew (the harness calls [`History::judge_by_timestamps`]), last-write-wins
//! makes a later write with a smaller timestamp lose, which is Cassandra's semantics, not a
//! bug; reads are then judged by the write timestamps the coordinators assigned instead (see
//! `stale_by_timestamp`). Without skew the real-time check above applies, as strict as ever.
//!
//! Beside the register check: no operation waits past its timeout (plus one tick for timer
//! granularity), no operation is left without an answer while its node runs, and the final
//! reads at ALL after the faults healed all succeed and agree per key.

use std::collections::HashMap;
use std::fmt;

/// What an operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// Writes `value` (unique across the history) to the key.
    Write { value: u64 },
    /// Reads the key.
    Read,
}

/// The consistency level an operation was issued at, as the checker believes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Level {
    Quorum,
    /// The final reads after the faults healed.
    All,
}

/// How an operation ended.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// No answer yet.
    Pending,
    /// Acknowledged; a read's value (`None`: the key has no value).
    Ok(Option<u64>),
    /// The coordinator answered an error (a timeout, unavailable): a write may or may not be
    /// applied.
    Failed(String),
    /// Its node crashed before it was answered: a write may or may not be applied.
    Crashed,
}

/// One operation of the history.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Op {
    /// Its index in the history.
    pub id: usize,
    /// The node whose coordinator served it.
    pub node: usize,
    pub key: u32,
    pub kind: OpKind,
    pub level: Level,
    /// Sim time of the invocation, milliseconds.
    pub invoked_ms: u64,
    /// Sim time of the answer, milliseconds (`None` while pending or after a crash).
    pub completed_ms: Option<u64>,
    /// The longest the operation may wait for its answer, milliseconds.
    pub timeout_ms: u64,
    pub outcome: Outcome,
    /// A write's timestamp (microseconds), as its coordinator assigned it.
    pub write_timestamp: Option<i64>,
}

impl Op {
    /// When it completed successfully, if it did.
    fn acknowledged_ms(&self) -> Option<u64> {
        match self.outcome {
            Outcome::Ok(_) => self.completed_ms,
            _ => None,
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            OpKind::Write { value } => format!("write {value}"),
            OpKind::Read => "read".to_string(),
        };
        let end = self
            .completed_ms
            .map_or("…".to_string(), |ms| format!("{ms}"));
        write!(
            f,
            "#{:<5} node {} key {} {:?} {:<12} [{} .. {}] ms -> {:?}",
            self.id, self.node, self.key, self.level, what, self.invoked_ms, end, self.outcome
        )?;
        match self.write_timestamp {
            Some(timestamp) => write!(f, " @{timestamp}"),
            None => Ok(()),
        }
    }
}

/// The operations of one run, in invocation order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct History {
    ops: Vec<Op>,
    next_value: u64,
    /// Answered operations at ALL (the harness polls it on every step).
    completed_all: usize,
    /// Whether reads are judged by write timestamps (clocks are skewed).
    by_timestamps: bool,
}

impl History {
    /// The operations so far.
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// A value no write of the history has used yet.
    pub fn unique_value(&mut self) -> u64 {
        self.next_value += 1;
        self.next_value
    }

    /// Records an operation's invocation; returns its id for [`History::complete`].
    pub fn invoke(
        &mut self,
        node: usize,
        key: u32,
        kind: OpKind,
        level: Level,
        now_ms: u64,
        timeout_ms: u64,
    ) -> usize {
        let id = self.ops.len();
        self.ops.push(Op {
            id,
            node,
            key,
            kind,
            level,
            invoked_ms: now_ms,
            completed_ms: None,
            timeout_ms,
            outcome: Outcome::Pending,
            write_timestamp: None,
        });
        id
    }

    /// Records the timestamp write `id` was given.
    pub fn set_write_timestamp(&mut self, id: usize, timestamp: i64) {
        self.ops[id].write_timestamp = Some(timestamp);
    }

    /// Judges reads by write timestamps (`true`) rather than real time: what the harness
    /// sets when the nodes' clocks are skewed (see [`check`]).
    pub fn judge_by_timestamps(&mut self, on: bool) {
        self.by_timestamps = on;
    }

    /// Records operation `id`'s answer.
    pub fn complete(&mut self, id: usize, now_ms: u64, outcome: Outcome) {
        let op = &mut self.ops[id];
        assert_eq!(op.outcome, Outcome::Pending, "op {id} completed twice");
        op.completed_ms = Some(now_ms);
        op.outcome = outcome;
        if op.level == Level::All {
            self.completed_all += 1;
        }
    }

    /// How many operations at `level` have been answered.
    pub fn completed_at(&self, level: Level) -> usize {
        match level {
            Level::All => self.completed_all,
            Level::Quorum => self
                .ops
                .iter()
                .filter(|op| op.level == level && op.completed_ms.is_some())
                .count(),
        }
    }

    /// Marks `node`'s pending operations as cut short by its crash.
    pub fn crash(&mut self, node: usize) {
        for op in self.ops.iter_mut() {
            if op.node == node && op.outcome == Outcome::Pending {
                op.outcome = Outcome::Crashed;
            }
        }
    }

    /// The operations of `key` whose span meets `[from_ms, to_ms]`, rendered one a line: the
    /// history around a violation.
    pub fn render_key(&self, key: u32, from_ms: u64, to_ms: u64) -> String {
        self.ops
            .iter()
            .filter(|op| op.key == key)
            .filter(|op| op.invoked_ms <= to_ms && op.completed_ms.is_none_or(|c| c >= from_ms))
            .map(|op| format!("  {op}\n"))
            .collect()
    }
}

/// A broken invariant, naming the operations involved by id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// A read returned a value no write of its key wrote before the read completed.
    UnknownValue { read: usize, value: u64 },
    /// A read returned `returned` (a write's id; `None`: no value) although it started after
    /// `witness` (an acknowledged write, or a read that returned `must_see`'s value) and
    /// `returned` finished before `must_see` started.
    StaleRead {
        read: usize,
        returned: Option<usize>,
        witness: usize,
        must_see: usize,
    },
    /// An operation was answered after its timeout.
    OverTimeout { op: usize, waited_ms: u64 },
    /// An operation was never answered although its node kept running past its timeout.
    NoAnswer { op: usize },
    /// A final read at ALL failed (the faults had healed).
    FinalReadFailed { read: usize },
    /// Two final reads at ALL of the same key returned different values.
    FinalReadsDisagree { first: usize, second: usize },
    /// After the final reads, the nodes' storage disagrees on `key`, or too few or too many
    /// nodes hold it: each node's value (`None`: not held).
    ReplicasDisagree {
        key: u32,
        held: Vec<(usize, Option<u64>)>,
    },
    /// After the heal and hint replay, node `node`, a replica of `key`, holds neither
    /// acknowledged write `write` nor a later one (its storage read directly: a read at ONE
    /// from it alone).
    MissingAtOne { key: u32, node: usize, write: usize },
    /// After the heal, node `node` still holds `pending` hints for node `target`.
    HintsNotDelivered {
        node: usize,
        target: usize,
        pending: u64,
    },
}

impl Violation {
    /// The operations it names.
    pub fn ops(&self) -> Vec<usize> {
        match *self {
            Violation::UnknownValue { read, .. } => vec![read],
            Violation::StaleRead {
                read,
                returned,
                witness,
                must_see,
            } => [Some(read), returned, Some(witness), Some(must_see)]
                .into_iter()
                .flatten()
                .collect(),
            Violation::OverTimeout { op, .. } | Violation::NoAnswer { op } => vec![op],
            Violation::FinalReadFailed { read } => vec![read],
            Violation::FinalReadsDisagree { first, second } => vec![first, second],
            Violation::ReplicasDisagree { .. } | Violation::HintsNotDelivered { .. } => Vec::new(),
            Violation::MissingAtOne { write, .. } => vec![write],
        }
    }

    /// The violation and the history of its key around it.
    pub fn explain(&self, history: &History) -> String {
        if let Violation::ReplicasDisagree { key, .. } = self {
            let last_ms = history.ops.iter().filter_map(|op| op.completed_ms).max();
            let to = last_ms.unwrap_or(0);
            return format!(
                "{self:?}\nhistory of key {key}:\n{}",
                history.render_key(*key, 0, to)
            );
        }
        if self.ops().is_empty() {
            return format!("{self:?}");
        }
        let ops: Vec<&Op> = self.ops().iter().map(|&id| &history.ops[id]).collect();
        let key = ops[0].key;
        let from = ops.iter().map(|op| op.invoked_ms).min().unwrap_or(0);
        let to = ops
            .iter()
            .map(|op| op.completed_ms.unwrap_or(op.invoked_ms))
            .max()
            .unwrap_or(0);
        format!(
            "{self:?}\nhistory of key {key} from {} ms to {} ms:\n{}",
            from.saturating_sub(200),
            to + 200,
            history.render_key(key, from.saturating_sub(200), to + 200)
        )
    }
}

/// Timer granularity: a deadline fires at the first tick at or after it.
pub const TIMEOUT_TOLERANCE_MS: u64 = 5;

/// Every violation of `history`, ordered by the time it shows (the violating operation's
/// completion). `end_ms` is when the run ended: an operation still pending then and older than
/// its timeout was never answered (one cut short by its node's crash is `Outcome::Crashed`,
/// not pending).
pub fn check(history: &History, end_ms: u64) -> Vec<Violation> {
    let mut found: Vec<(u64, Violation)> = Vec::new();
    let writes: HashMap<(u32, u64), &Op> = history
        .ops
        .iter()
        .filter_map(|op| match op.kind {
            OpKind::Write { value } => Some(((op.key, value), op)),
            OpKind::Read => None,
        })
        .collect();
    for op in &history.ops {
        check_timeout(op, end_ms, &mut found);
        let (OpKind::Read, Outcome::Ok(value), Some(done)) =
            (op.kind, &op.outcome, op.completed_ms)
        else {
            continue;
        };
        let returned = match value {
            None => None,
            Some(value) => match writes.get(&(op.key, *value)) {
                Some(w) if w.invoked_ms <= done => Some(*w),
                _ => {
                    found.push((
                        done,
                        Violation::UnknownValue {
                            read: op.id,
                            value: *value,
                        },
                    ));
                    continue;
                }
            },
        };
        if let Some(v) = stale(history, &writes, op, returned, history.by_timestamps) {
            found.push((done, v));
        }
    }
    check_final_reads(history, &mut found);
    found.sort_by_key(|(at, _)| *at);
    found.into_iter().map(|(_, v)| v).collect()
}

/// Whether read `read` (which returned `returned`'s value) missed a write it must see.
///
/// With `by_timestamps` (skewed clocks), last-write-wins picks the highest timestamp, not the
/// latest write: a write acknowledged before a read began is on a quorum, so the read (whose
/// quorum meets it) returns a value of that timestamp or higher; and a value a completed read
/// returned was made visible to every later read by its blocking read repair. So the read must
/// return a value whose write timestamp is at least that of every write acknowledged before it
/// began, and of every value a read that completed before it began returned.
fn stale(
    history: &History,
    writes: &HashMap<(u32, u64), &Op>,
    read: &Op,
    returned: Option<&Op>,
    by_timestamps: bool,
) -> Option<Violation> {
    let before = |op: &Op| op.acknowledged_ms().is_some_and(|t| t < read.invoked_ms);
    for witness in history
        .ops
        .iter()
        .filter(|o| o.key == read.key && before(o))
    {
        let must_see = match (witness.kind, &witness.outcome) {
            (OpKind::Write { .. }, _) => witness,
            (OpKind::Read, Outcome::Ok(Some(value))) => match writes.get(&(read.key, *value)) {
                Some(w) => w,
                None => continue, // reported as UnknownValue
            },
            _ => continue,
        };
        let older = if by_timestamps {
            let returned_timestamp = returned.map_or(Some(i64::MIN), |r| r.write_timestamp);
            match (returned_timestamp, must_see.write_timestamp) {
                (Some(returned), Some(must)) => returned < must,
                _ => continue,
            }
        } else {
            match returned {
                None => true,
                Some(r) => r.acknowledged_ms().is_some_and(|t| t < must_see.invoked_ms),
            }
        };
        if older {
            return Some(Violation::StaleRead {
                read: read.id,
                returned: returned.map(|r| r.id),
                witness: witness.id,
                must_see: must_see.id,
            });
        }
    }
    None
}

fn check_timeout(op: &Op, end_ms: u64, found: &mut Vec<(u64, Violation)>) {
    let limit_ms = op.timeout_ms + TIMEOUT_TOLERANCE_MS;
    match (op.completed_ms, &op.outcome) {
        (Some(done), _) if done - op.invoked_ms > limit_ms => found.push((
            done,
            Violation::OverTimeout {
                op: op.id,
                waited_ms: done - op.invoked_ms,
            },
        )),
        (None, Outcome::Pending) if end_ms > op.invoked_ms + limit_ms => {
            found.push((op.invoked_ms + limit_ms, Violation::NoAnswer { op: op.id }))
        }
        _ => {}
    }
}

fn check_final_reads(history: &History, found: &mut Vec<(u64, Violation)>) {
    let mut first_of_key: HashMap<u32, &Op> = HashMap::new();
    for op in history.ops.iter().filter(|op| op.level == Level::All) {
        let done = op.completed_ms.unwrap_or(op.invoked_ms);
        let Outcome::Ok(value) = &op.outcome else {
            found.push((done, Violation::FinalReadFailed { read: op.id }));
            continue;
        };
        match first_of_key.get(&op.key) {
            None => {
                first_of_key.insert(op.key, op);
            }
            Some(first) if first.outcome != Outcome::Ok(*value) => found.push((
                done,
                Violation::FinalReadsDisagree {
                    first: first.id,
                    second: op.id,
                },
            )),
            Some(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT: u64 = 1_000;

    /// Builds histories by hand: `op(...)` records an operation over `[start, end]`.
    #[derive(Default)]
    struct Builder(History);

    impl Builder {
        fn op(&mut self, key: u32, kind: OpKind, span: (u64, Option<u64>), out: Outcome) -> usize {
            let id = self.0.invoke(0, key, kind, Level::Quorum, span.0, TIMEOUT);
            if let Some(end) = span.1 {
                self.0.complete(id, end, out);
            } else if out == Outcome::Crashed {
                self.0.crash(0);
            }
            id
        }
        fn write(&mut self, value: u64, start: u64, end: u64) -> usize {
            self.op(
                1,
                OpKind::Write { value },
                (start, Some(end)),
                Outcome::Ok(None),
            )
        }
        fn failed_write(&mut self, value: u64, start: u64, end: u64) -> usize {
            let out = Outcome::Failed("timed out".into());
            self.op(1, OpKind::Write { value }, (start, Some(end)), out)
        }
        fn read(&mut self, value: Option<u64>, start: u64, end: u64) -> usize {
            self.op(1, OpKind::Read, (start, Some(end)), Outcome::Ok(value))
        }
    }

    #[test]
    fn reads_of_the_latest_or_a_concurrent_write_are_valid() {
        let mut h = Builder::default();
        h.read(None, 0, 5);
        h.write(1, 10, 20);
        h.read(Some(1), 25, 30);
        // Concurrent with write 2: either value.
        h.write(2, 40, 60);
        h.read(Some(1), 45, 50);
        h.read(Some(2), 50, 55);
        // Write 3 timed out: it may show or not, until a read shows it.
        h.failed_write(3, 70, 80);
        h.read(Some(2), 90, 95);
        h.read(Some(3), 100, 105);
        h.read(Some(3), 110, 115);
        assert_eq!(check(&h.0, 200), vec![]);
    }

    #[test]
    fn a_read_older_than_an_acknowledged_write_is_stale() {
        let mut h = Builder::default();
        let w1 = h.write(1, 0, 10);
        let w2 = h.write(2, 20, 30);
        let r = h.read(Some(1), 40, 50);
        assert_eq!(
            check(&h.0, 100),
            vec![Violation::StaleRead {
                read: r,
                returned: Some(w1),
                witness: w2,
                must_see: w2
            }]
        );
    }

    #[test]
    fn a_read_of_nothing_after_an_acknowledged_write_is_stale() {
        let mut h = Builder::default();
        let w1 = h.write(1, 0, 10);
        let r = h.read(None, 11, 20);
        assert_eq!(
            check(&h.0, 100),
            vec![Violation::StaleRead {
                read: r,
                returned: None,
                witness: w1,
                must_see: w1
            }]
        );
    }

    #[test]
    fn a_read_going_back_before_an_earlier_reads_value_is_stale() {
        let mut h = Builder::default();
        let w1 = h.write(1, 0, 10);
        // Timed out, but a read saw it: later reads must too.
        let w2 = h.failed_write(2, 20, 30);
        let r1 = h.read(Some(2), 40, 50);
        let r2 = h.read(Some(1), 60, 70);
        // w1 did not finish before w2 started? It did (10 < 20): r2 is stale.
        assert_eq!(
            check(&h.0, 100),
            vec![Violation::StaleRead {
                read: r2,
                returned: Some(w1),
                witness: r1,
                must_see: w2
            }]
        );
    }

    #[test]
    fn same_millisecond_counts_as_concurrent() {
        let mut h = Builder::default();
        h.write(1, 0, 10);
        h.write(2, 10, 20);
        // Write 1 finished at 10 and write 2 started at 10: no order between them.
        h.read(Some(1), 21, 30);
        assert_eq!(check(&h.0, 100), vec![]);
    }

    #[test]
    fn a_value_never_written_or_written_later_is_unknown() {
        let mut h = Builder::default();
        let r1 = h.read(Some(9), 0, 10);
        let r2 = h.read(Some(1), 11, 12);
        h.write(1, 20, 30);
        assert_eq!(
            check(&h.0, 100),
            vec![
                Violation::UnknownValue { read: r1, value: 9 },
                Violation::UnknownValue { read: r2, value: 1 },
            ]
        );
    }

    #[test]
    fn answers_past_the_timeout_and_missing_answers_are_violations() {
        let mut h = Builder::default();
        // Cut short by its node's crash: fine.
        h.op(1, OpKind::Read, (200, None), Outcome::Crashed);
        let late = h.read(None, 0, TIMEOUT + TIMEOUT_TOLERANCE_MS + 1);
        h.read(None, 0, TIMEOUT);
        let hung = h.op(1, OpKind::Read, (100, None), Outcome::Pending);
        // Pending at the end but still within its timeout: fine.
        h.op(1, OpKind::Read, (5_000, None), Outcome::Pending);
        let found = check(&h.0, 5_500);
        assert_eq!(
            found,
            vec![
                Violation::OverTimeout {
                    op: late,
                    waited_ms: TIMEOUT + TIMEOUT_TOLERANCE_MS + 1
                },
                Violation::NoAnswer { op: hung },
            ]
        );
    }

    #[test]
    fn final_reads_must_succeed_and_agree() {
        let mut h = Builder::default();
        h.write(1, 0, 10);
        h.failed_write(2, 20, 30);
        let final_read = |h: &mut Builder, value, at| {
            let id = h.0.invoke(0, 1, OpKind::Read, Level::All, at, TIMEOUT);
            h.0.complete(id, at + 5, value);
            id
        };
        // Concurrent, so neither is stale; but they disagree.
        let a = final_read(&mut h, Outcome::Ok(Some(2)), 100);
        let b = final_read(&mut h, Outcome::Ok(Some(1)), 100);
        let c = final_read(&mut h, Outcome::Failed("unavailable".into()), 120);
        assert_eq!(
            check(&h.0, 500),
            vec![
                Violation::FinalReadsDisagree {
                    first: a,
                    second: b
                },
                Violation::FinalReadFailed { read: c },
            ]
        );
    }

    #[test]
    fn under_skew_reads_are_judged_by_write_timestamps() {
        let mut h = Builder::default();
        h.0.judge_by_timestamps(true);
        let w1 = h.write(1, 0, 10);
        h.0.set_write_timestamp(w1, 500);
        // Later in real time, but from a clock behind: loses to write 1.
        let w2 = h.write(2, 20, 30);
        h.0.set_write_timestamp(w2, 400);
        h.read(Some(1), 40, 50);
        assert_eq!(check(&h.0, 100), vec![]);
        // Reading write 2 after write 1 was acknowledged goes back in timestamps.
        let r = h.read(Some(2), 60, 70);
        assert_eq!(
            check(&h.0, 100),
            vec![Violation::StaleRead {
                read: r,
                returned: Some(w2),
                witness: w1,
                must_see: w1
            }]
        );
        // Without skew the same history is judged by real time: reading write 1 after
        // write 2 was acknowledged is stale there.
        let mut strict = h.0.clone();
        strict.judge_by_timestamps(false);
        assert!(check(&strict, 100)
            .iter()
            .any(|v| matches!(v, Violation::StaleRead { read, .. } if *read == 2)));
    }

    #[test]
    fn an_explanation_shows_the_keys_history() {
        let mut h = Builder::default();
        h.write(1, 0, 10);
        h.write(2, 20, 30);
        h.read(Some(1), 40, 50);
        let violations = check(&h.0, 100);
        let text = violations[0].explain(&h.0);
        assert!(text.contains("write 2"), "{text}");
        assert!(text.contains("Ok(Some(1))"), "{text}");
    }

    #[test]
    fn a_storage_disagreement_is_explained_with_the_keys_whole_history() {
        let mut h = Builder::default();
        h.write(1, 0, 10);
        let v = Violation::ReplicasDisagree {
            key: 1,
            held: vec![(0, Some(1)), (1, None), (2, Some(1))],
        };
        assert!(v.ops().is_empty());
        let text = v.explain(&h.0);
        assert!(text.contains("write 1"), "{text}");
    }
}
