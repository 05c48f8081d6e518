"""Jepsen-style operation histories, and a checker for registers written and read at QUORUM.

A `History` records every operation a test's clients perform, as Jepsen does: an *invocation*
when a client thread is about to send the request, and a *completion* when it knows the
outcome, one of

- `ok`: the operation took effect (a write acknowledged, a read answered);
- `fail`: the operation certainly did not take effect (a write refused with Unavailable, which
  the coordinator answers before it sends anything to a replica; any failed read);
- `info`: the outcome is unknown (a timeout, a connection lost with the request in flight):
  the write may take effect at any time after its invocation, even after its completion was
  recorded, or never.

Each entry carries the client thread (`process`), the operation (`f`: "write", "read",
"insert"), the key, the value, the consistency level, the monotonic time since the history
began, the coordinator the driver sent the request to, and the error. A fault injector records
its actions in the same history (`process` "nemesis", type `info`), so a violation is shown
with the faults around it.

The register model (Cassandra's last-write-wins, as Jepsen's Cassandra tests read it):
a register is a partition key with one regular column, written with INSERT ... USING TIMESTAMP
and read with SELECT, both at QUORUM. `History.invoke_write` assigns each write's timestamp
and unique value under the lock that orders invocations, so *a write invoked later has a
greater timestamp*; a replica keeps the value of the greatest timestamp it has seen. Where the
rules below say one write is "later" than another, they mean a greater timestamp, which is
the same as a later invocation. A read that returns no row returns the *initial value*, which
is earlier than every write.

`check_registers` holds each key's history to three rules; the first is Jepsen's check that
QUORUM reads never go back in time after a QUORUM write was acknowledged:

1. **No stale read after an acknowledged write.** If a write W of key k completed `ok` before
   a read R of k was invoked, R returns W's value or the value of a write of k invoked after
   W's invocation, whatever that write's outcome (acknowledged, or unknown: it may have
   reached a replica the read met). Quorums intersect: W is on a majority of replicas, R
   reads a majority, and the coordinator returns the latest value it met.
2. **No read going back in time after another read (monotonic QUORUM reads).** If a read R1
   of k completed `ok` before a read R2 of k was invoked, and R1 returned the value of W1 (or
   the initial value), R2 returns W1's value or a later write's. Cassandra guarantees this
   through blocking read repair: before R1 answers, W1 is on a majority of replicas.
3. **No phantom values.** A read returns the initial value or the value of a write of the
   same key that was invoked before the read completed and did not `fail`.

These hold under any faults (process crashes with a synced commit log, partitions, pauses)
as long as the acknowledged writes survive on a majority of replicas; they do not assume
linearizability (two concurrent writes may be seen in either order by concurrent reads).
Timestamps are compared, so the rules are exact; times (monotonic) only say which operations
are concurrent.

`check_inserts` checks a grow-only set (each insert a row of its own): after the faults,
every acknowledged insert is present, and no insert known to have failed is.

Both return a `CheckResult`; its `report()` names the FIRST violation (the one whose read
completed earliest) with the history of that key around it.
"""

import json
import threading
import time
from dataclasses import asdict, dataclass, field

INVOKE, OK, FAIL, INFO = "invoke", "ok", "fail", "info"
NEMESIS = "nemesis"
# The initial value's place in the timestamp order: before every write.
INITIAL = None
# How many lines of history a report shows around a violation (the oldest are cut first).
REPORT_CONTEXT_LINES = 60
# Of those, how many are the first lines (the operation that bounds what the read may return).
REPORT_HEAD_LINES = 6


@dataclass
class Entry:
    """One line of the history: an invocation or a completion (or a nemesis event)."""

    index: int
    process: str
    type: str
    f: str
    key: object = None
    value: object = None
    consistency: str = None
    time_s: float = 0.0
    timestamp: int = None
    host: str = None
    error: str = None
    # For a completion, the index of its invocation.
    invocation: int = None

    def line(self):
        """Jepsen's one-line form: index, time, process, type, f, key, value, and the rest."""
        parts = [f"{self.index:6d}", f"{self.time_s:9.3f}s", f"{self.process:<10}",
                 f":{self.type:<6}", f":{self.f:<7}"]
        if self.key is not None:
            parts.append(f"k={self.key}")
        if self.value is not None or self.f == "read" and self.type == OK:
            parts.append(f"v={self.value}")
        if self.timestamp is not None:
            parts.append(f"ts={self.timestamp}")
        if self.consistency:
            parts.append(self.consistency)
        if self.host:
            parts.append(f"via {self.host}")
        if self.error:
            parts.append(f"({self.error})")
        return " ".join(parts)


@dataclass
class Operation:
    """An invocation paired with its completion. `outcome` is `ok`, `fail` or `info`; an
    operation never completed is `info` with `complete_s` infinite. `value` is the written
    value for a write, the returned value for an `ok` read."""

    process: str
    f: str
    key: object
    value: object
    consistency: str
    timestamp: int
    invoke_s: float
    complete_s: float
    outcome: str
    host: str
    error: str
    invoke_index: int
    complete_index: int


@dataclass
class Violation:
    """A broken rule: `kind` ("stale read", "non-monotonic read", "phantom value", "lost
    insert", "failed insert present"), the key, the offending operation, the operation that
    bounds what it may return (`bound`: the acknowledged write or the earlier read), and the
    rule in words."""

    kind: str
    key: object
    op: Operation
    bound: Operation
    explanation: str


@dataclass
class CheckResult:
    """What a check found: `valid`, the first violation (None if valid), all of them, the
    counts of operations by kind and outcome, and the history for the report."""

    valid: bool
    first: Violation
    violations: list
    counts: dict
    history: "History" = field(repr=False)

    def report(self):
        """The first violation in words, with the history of its key around it."""
        if self.valid:
            return f"history valid: {self.counts}"
        v = self.first
        lines = [f"{len(self.violations)} violation(s); the first: {v.kind} of key {v.key}",
                 v.explanation, f"history of key {v.key} (and the nemesis) around it:"]
        start = v.bound.invoke_index if v.bound is not None else v.op.invoke_index
        end = v.op.complete_index if v.op.complete_index is not None else v.op.invoke_index
        lines += self.history.excerpt(v.key, start, end)
        return "\n".join(lines)

    def assert_valid(self):
        assert self.valid, self.report()


class History:
    """A thread-safe Jepsen-style history (see the module docstring). Invocations and
    completions are numbered in the order they were recorded; times are `time.monotonic()`
    seconds since the history began."""

    def __init__(self, clock=time.monotonic):
        self._lock = threading.Lock()
        self._clock = clock
        self._start = clock()
        self.entries = []
        # Write timestamps: microseconds since the epoch at the start, plus one per write, so
        # they sort after anything written before the history and by invocation order.
        self._next_timestamp = int(time.time() * 1_000_000)

    def now_s(self):
        """Seconds since the history began (the time entries carry)."""
        return self._clock() - self._start

    def _append(self, **fields):
        entry = Entry(index=len(self.entries), time_s=self.now_s(), **fields)
        self.entries.append(entry)
        return entry

    def invoke(self, process, f, key, value=None, consistency=None, timestamp=None):
        """Records an invocation; returns it, to be passed to `complete`."""
        with self._lock:
            return self._append(process=process, type=INVOKE, f=f, key=key, value=value,
                                consistency=consistency, timestamp=timestamp)

    def invoke_write(self, process, key, consistency, f="write"):
        """Records the invocation of a register write, assigning its timestamp (greater than
        every earlier invocation's) and its value (the timestamp: unique in the history)."""
        with self._lock:
            self._next_timestamp += 1
            ts = self._next_timestamp
            return self._append(process=process, type=INVOKE, f=f, key=key, value=ts,
                                consistency=consistency, timestamp=ts)

    def complete(self, invocation, outcome, value=None, host=None, error=None):
        """Records the completion of `invocation`: `ok`, `fail` or `info`. `value` is what a
        read returned (None: no row); a write's completion repeats the written value."""
        assert outcome in (OK, FAIL, INFO), outcome
        if invocation.f != "read":
            value = invocation.value
        with self._lock:
            return self._append(process=invocation.process, type=outcome, f=invocation.f,
                                key=invocation.key, value=value,
                                consistency=invocation.consistency,
                                timestamp=invocation.timestamp, host=host, error=error,
                                invocation=invocation.index)

    def nemesis(self, f, value=None):
        """Records a fault injector's action (`f`: "kill", "restart", "partition", ...)."""
        with self._lock:
            return self._append(process=NEMESIS, type=INFO, f=f, value=value)

    def operations(self, f=None):
        """Every invocation paired with its completion (in invocation order); `f` filters."""
        with self._lock:
            entries = list(self.entries)
        completions = {e.invocation: e for e in entries if e.invocation is not None}
        ops = []
        for e in entries:
            if e.type != INVOKE or (f is not None and e.f != f):
                continue
            done = completions.get(e.index)
            ops.append(Operation(
                process=e.process, f=e.f, key=e.key,
                value=done.value if done is not None and e.f == "read" else e.value,
                consistency=e.consistency, timestamp=e.timestamp, invoke_s=e.time_s,
                complete_s=done.time_s if done is not None else float("inf"),
                outcome=done.type if done is not None else INFO,
                host=done.host if done is not None else None,
                error=done.error if done is not None else None,
                invoke_index=e.index,
                complete_index=done.index if done is not None else None,
            ))
        return ops

    def nemesis_events(self):
        with self._lock:
            return [e for e in self.entries if e.process == NEMESIS]

    def counts(self):
        """{f: {outcome: n}} over the completed and pending operations."""
        counts = {}
        for op in self.operations():
            by_outcome = counts.setdefault(op.f, {OK: 0, FAIL: 0, INFO: 0})
            by_outcome[op.outcome] += 1
        return counts

    def excerpt(self, key, start, end, limit=REPORT_CONTEXT_LINES):
        """The lines of entries `start`..`end` (indexes) about `key` or the nemesis; past
        `limit` lines, lines after the first few are left out (and counted)."""
        with self._lock:
            chosen = [e for e in self.entries[start:end + 1]
                      if e.key == key or e.process == NEMESIS]
        lines = [e.line() for e in chosen]
        if len(lines) > limit:
            # The first lines hold the operation that bounds the violation, the last the
            # violation itself.
            head = REPORT_HEAD_LINES
            left_out = len(lines) - limit
            lines = lines[:head] + [f"  ... {left_out} lines left out"] + lines[head + left_out:]
        return lines

    def dump(self, path):
        """Writes the history as JSON lines (one entry each) to `path`, for a post-mortem."""
        with self._lock:
            entries = list(self.entries)
        with open(path, "w") as out:
            for e in entries:
                out.write(json.dumps(asdict(e), default=str) + "\n")


def _bisect_right(sorted_times, t):
    lo, hi = 0, len(sorted_times)
    while lo < hi:
        mid = (lo + hi) // 2
        if sorted_times[mid] < t:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _prefix_max(ops, order_key):
    """`ops` sorted by completion time, with for each prefix the op of greatest `order_key`:
    (completion times, best op of each prefix)."""
    ops = sorted(ops, key=lambda o: o.complete_s)
    times, best, top = [], [], None
    for op in ops:
        if top is None or order_key(op) > order_key(top):
            top = op
        times.append(op.complete_s)
        best.append(top)
    return times, best


def _latest_before(index, t):
    """The op of greatest order among those that completed strictly before `t`, or None."""
    times, best = index
    n = _bisect_right(times, t)
    return best[n - 1] if n else None


def check_registers(history, f_write="write", f_read="read"):
    """Checks every key read in `history` against the register rules of the module docstring:
    a `CheckResult` whose `first` violation is the one whose read completed earliest."""
    writes = history.operations(f_write)
    reads = [r for r in history.operations(f_read) if r.outcome == OK]
    by_key_writes, by_key_reads = {}, {}
    for w in writes:
        by_key_writes.setdefault(w.key, []).append(w)
    for r in reads:
        by_key_reads.setdefault(r.key, []).append(r)
    violations = []
    for key, key_reads in by_key_reads.items():
        violations += _check_key(key, by_key_writes.get(key, []), key_reads)
    violations.sort(key=lambda v: v.op.complete_s)
    counts = history.counts()
    return CheckResult(valid=not violations, first=violations[0] if violations else None,
                       violations=violations, counts=counts, history=history)


def _check_key(key, writes, reads):
    by_value = {w.value: w for w in writes}
    # The order of values: a write's timestamp; the initial value before all.
    def order(op):
        return op.timestamp if op is not None and op.timestamp is not None else -1

    acked = _prefix_max([w for w in writes if w.outcome == OK], order)
    found = []
    # Each ok read, with the write whose value it returned (None: the initial value).
    returned = []
    for r in reads:
        if r.value is INITIAL:
            source = None
        else:
            source = by_value.get(r.value)
            if source is None or source.outcome == FAIL or source.invoke_s > r.complete_s:
                why = ("no write of this key wrote it" if source is None
                       else "its write failed (it cannot have taken effect)"
                       if source.outcome == FAIL else "its write was invoked after the read "
                       "completed")
                found.append(Violation(
                    "phantom value", key, r, source,
                    f"read {_describe(r)} returned {r.value!r}: {why}"))
                continue
        returned.append((r, source))
        bound = _latest_before(acked, r.invoke_s)
        if bound is not None and order(source) < order(bound):
            found.append(Violation(
                "stale read", key, r, bound,
                f"read {_describe(r)} returned {_value_of(source)}, but write {_describe(bound)} "
                f"was acknowledged before the read began; the read must return that write's "
                f"value or a later-invoked write's"))
    # Monotonic reads: the latest value returned by a read that completed before each read
    # began.
    read_index = _prefix_max([_AsWrite(r, s) for r, s in returned], lambda a: order(a.source))
    for r, source in returned:
        earlier = _latest_before(read_index, r.invoke_s)
        if earlier is not None and order(source) < order(earlier.source):
            found.append(Violation(
                "non-monotonic read", key, r, earlier.read,
                f"read {_describe(r)} returned {_value_of(source)}, but read "
                f"{_describe(earlier.read)} completed before it began and returned "
                f"{_value_of(earlier.source)}, a later write's value: QUORUM reads went back "
                f"in time"))
    return found


class _AsWrite:
    """A read seen as the write whose value it returned, for `_prefix_max`."""

    def __init__(self, read, source):
        self.read = read
        self.source = source
        self.complete_s = read.complete_s


def _describe(op):
    span = f"[{op.invoke_s:.3f}s, {op.complete_s:.3f}s]"
    who = f"{op.process} {op.f} #{op.invoke_index} {span}"
    if op.timestamp is not None:
        who += f" ts={op.timestamp} ({op.outcome})"
    if op.host:
        who += f" via {op.host}"
    return who


def _value_of(source):
    if source is None:
        return "the initial value (no row)"
    return f"{source.value!r} (written by #{source.invoke_index}, {source.outcome})"


def check_inserts(history, present, f="insert"):
    """Checks a grow-only set: `present` is {key: set of values} read back after the faults
    (every key the history inserted into must be there, empty if nothing was found). Every
    `ok` insert must be present (else "lost insert"); no `fail` insert may be (else "failed
    insert present"); an `info` insert may be either. The first violation is the one whose
    insert was invoked earliest."""
    found = []
    for op in history.operations(f):
        assert op.key in present, f"key {op.key!r} was not read back"
        there = op.value in present[op.key]
        if op.outcome == OK and not there:
            found.append(Violation("lost insert", op.key, op, None,
                                   f"insert {_describe(op)} was acknowledged but is missing"))
        elif op.outcome == FAIL and there:
            found.append(Violation("failed insert present", op.key, op, None,
                                   f"insert {_describe(op)} failed ({op.error}) but is present"))
    found.sort(key=lambda v: v.op.invoke_index)
    return CheckResult(valid=not found, first=found[0] if found else None, violations=found,
                       counts=history.counts(), history=history)
