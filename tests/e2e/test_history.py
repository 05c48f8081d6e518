"""The history checker (history.py) on handcrafted histories, valid and violating, so that it
is shown able to fail. No server: the times come from a fake clock."""

import json
import threading

from history import FAIL, INFO, OK, History, check_inserts, check_registers


class Script:
    """Builds a history by hand: each call gives the time (seconds) the entry happens at."""

    def __init__(self):
        self.t = 0.0
        self.history = History(clock=lambda: self.t)

    def at(self, t):
        assert t >= self.t, "time goes forward"
        self.t = t
        return self.history

    def write(self, t, key, process="w1"):
        """Invokes a write at `t`; returns the invocation (its value is `.value`)."""
        return self.at(t).invoke_write(process, key, "QUORUM")

    def read(self, t, key, process="r1"):
        return self.at(t).invoke(process, "read", key, consistency="QUORUM")

    def done(self, t, invocation, outcome=OK, value=None, error=None):
        return self.at(t).complete(invocation, outcome, value=value, host="127.0.0.1",
                                   error=error)

    def check(self):
        return check_registers(self.history)


def test_sequential_writes_and_reads_are_valid():
    s = Script()
    r0 = s.read(0, 1)
    s.done(1, r0, value=None)  # nothing written yet: the initial value
    w1 = s.write(2, 1)
    s.done(3, w1)
    r1 = s.read(4, 1)
    s.done(5, r1, value=w1.value)
    w2 = s.write(6, 1)
    s.done(7, w2)
    r2 = s.read(8, 1)
    s.done(9, r2, value=w2.value)
    result = s.check()
    assert result.valid, result.report()
    assert result.counts == {"read": {OK: 3, FAIL: 0, INFO: 0}, "write": {OK: 2, FAIL: 0, INFO: 0}}


def test_a_read_after_an_acknowledged_write_returning_an_older_value_is_stale():
    s = Script()
    w1 = s.write(0, 7)
    s.done(1, w1)
    w2 = s.write(2, 7)
    s.done(3, w2)
    r = s.read(4, 7)
    s.done(5, r, value=w1.value)
    result = s.check()
    assert not result.valid
    assert result.first.kind == "stale read"
    assert result.first.bound.invoke_index == w2.index
    report = result.report()
    assert "stale read of key 7" in report
    # The report shows the key's history from the bounding write to the read.
    assert f"ts={w2.timestamp}" in report and f"v={w1.value}" in report
    try:
        result.assert_valid()
    except AssertionError as e:
        assert "stale read" in str(e)
    else:
        raise AssertionError("assert_valid passed an invalid history")


def test_a_read_of_no_row_after_an_acknowledged_write_is_stale():
    s = Script()
    w = s.write(0, 1)
    s.done(1, w)
    r = s.read(2, 1)
    s.done(3, r, value=None)
    result = s.check()
    assert [v.kind for v in result.violations] == ["stale read"]
    assert "the initial value" in result.first.explanation


def test_reads_concurrent_with_a_write_may_return_either_value():
    s = Script()
    w1 = s.write(0, 1)
    s.done(1, w1)
    w2 = s.write(2, 1)
    ra = s.read(2.5, 1, "r1")
    rb = s.read(2.6, 1, "r2")
    s.done(3, ra, value=w2.value)  # the new value before the write is acknowledged
    s.done(3.5, w2)
    s.done(4, rb, value=w1.value)  # rb began before ra completed: still free to see w1
    assert s.check().valid, s.check().report()


def test_a_later_invoked_write_of_unknown_outcome_may_be_read():
    s = Script()
    w1 = s.write(0, 1)
    s.done(1, w1)
    w2 = s.write(2, 1)
    s.done(3, w2, INFO, error="WriteTimeout")
    r = s.read(10, 1)
    s.done(11, r, value=w2.value)
    r2 = s.read(12, 1)
    s.done(13, r2, value=w2.value)
    assert s.check().valid


def test_an_earlier_invoked_write_cannot_win_over_an_acknowledged_later_one():
    # w_old was in flight (unknown outcome) when w_new was invoked and acknowledged: its
    # timestamp is lower, so last-write-wins never lets a read after w_new see it.
    s = Script()
    w_old = s.write(0, 1, "w1")
    w_new = s.write(1, 1, "w2")
    s.done(2, w_new)
    s.done(5, w_old, INFO, error="OperationTimedOut")
    r = s.read(6, 1)
    s.done(7, r, value=w_old.value)
    result = s.check()
    assert [v.kind for v in result.violations] == ["stale read"]


def test_a_read_going_back_in_time_after_another_read_is_non_monotonic():
    s = Script()
    w1 = s.write(0, 1)
    s.done(1, w1)
    w2 = s.write(2, 1)
    s.done(3, w2, INFO, error="WriteTimeout")  # reached one replica, perhaps
    r1 = s.read(4, 1)
    s.done(5, r1, value=w2.value)
    r2 = s.read(6, 1)
    s.done(7, r2, value=w1.value)  # w1 is the latest acknowledged write: rule 1 holds
    result = s.check()
    assert [v.kind for v in result.violations] == ["non-monotonic read"]
    assert result.first.bound.invoke_index == r1.index
    assert "went back in time" in result.report()


def test_a_read_after_a_read_of_a_value_may_not_return_no_row():
    s = Script()
    w = s.write(0, 1)
    r1 = s.read(1, 1)
    s.done(2, r1, value=w.value)
    s.done(3, w, INFO, error="OperationTimedOut")
    r2 = s.read(4, 1)
    s.done(5, r2, value=None)
    assert [v.kind for v in s.check().violations] == ["non-monotonic read"]


def test_values_never_written_or_of_failed_writes_are_phantoms():
    s = Script()
    w_failed = s.write(0, 1)
    s.done(1, w_failed, FAIL, error="Unavailable")
    r1 = s.read(2, 1)
    s.done(3, r1, value=w_failed.value)
    r2 = s.read(4, 1)
    s.done(5, r2, value=123)
    r3 = s.read(6, 1)
    w_future = s.write(7, 1)
    s.done(7.5, r3, value=None)
    s.done(8, w_future)
    r4 = s.read(9, 1)
    s.done(10, r4, value=w_future.value)
    # A value read before its write was invoked.
    r5 = s.read(11, 2)
    s.done(12, r5, value=None)
    result = s.check()
    kinds = [(v.kind, v.op.invoke_index) for v in result.violations]
    assert kinds == [("phantom value", r1.index), ("phantom value", r2.index)], result.report()
    assert "failed" in result.violations[0].explanation
    assert "no write" in result.violations[1].explanation


def test_a_value_read_before_its_write_was_invoked_is_a_phantom():
    # Valid: the write was invoked (at 0.5) while the read was in flight; it may have landed.
    s = Script()
    r = s.read(0, 1)
    w = s.write(0.5, 1)
    s.done(1, r, value=w.value)
    assert s.check().valid
    # Invalid: the read completed (at 0.2) with the value of a write invoked later (at 1);
    # the history assigns values in invocation order, so the next write's value is known.
    s = Script()
    r = s.read(0, 1)
    value = s.history._next_timestamp + 1
    s.done(0.2, r, value=value)
    w = s.write(1, 1)
    assert w.value == value
    s.done(2, w)
    result = s.check()
    assert [v.kind for v in result.violations] == ["phantom value"]
    assert "invoked after the read completed" in result.first.explanation


def test_the_first_violation_is_the_one_completed_earliest_and_keys_are_separate():
    s = Script()
    a1 = s.write(0, "a")
    s.done(1, a1)
    b1 = s.write(1, "b")
    s.done(2, b1)
    late = s.read(3, "a", "r1")
    early = s.read(4, "b", "r2")
    s.done(5, early, value=None)
    s.done(6, late, value=None)
    ok = s.read(7, "c", "r3")  # a key never written: no row is right
    s.done(8, ok, value=None)
    result = s.check()
    assert [v.key for v in result.violations] == ["b", "a"]
    assert result.first.op.invoke_index == early.index
    assert result.report().startswith("2 violation(s); the first: stale read of key b")


def test_operations_never_completed_count_as_unknown():
    s = Script()
    w = s.write(0, 1)
    r = s.read(1, 1)
    s.done(2, r, value=w.value)  # the write is still in flight: it may have landed
    ops = {op.f: op for op in s.history.operations()}
    assert ops["write"].outcome == INFO and ops["write"].complete_s == float("inf")
    assert s.check().valid


def test_failed_and_unknown_reads_bound_nothing():
    s = Script()
    w1 = s.write(0, 1)
    s.done(1, w1)
    r1 = s.read(2, 1)
    s.done(3, r1, FAIL, error="ReadTimeout")
    w2 = s.write(4, 1)
    s.done(5, w2)
    r2 = s.read(6, 1)
    s.done(7, r2, value=w2.value)
    assert s.check().valid


def test_report_shows_nemesis_events_and_cuts_long_histories():
    s = Script()
    w = s.write(0, 1)
    s.done(0.5, w)
    s.at(0.6).nemesis("kill", 2)
    t = 1.0
    for _ in range(100):  # concurrent noise on the key, all before the stale read completes
        other = s.write(t, 1, "w2")
        s.done(t + 0.001, other, FAIL, error="Unavailable")
        t += 0.01
    r = s.read(t, 1)
    s.done(t + 1, r, value=None)
    report = s.check().report()
    assert ":kill" in report and "nemesis" in report
    assert "lines left out" in report
    # The first lines show the acknowledged write, the last the stale read's completion.
    assert f"ts={w.timestamp}" in "\n".join(report.splitlines()[3:6])
    assert report.splitlines()[-1].split()[2:5] == ["r1", ":ok", ":read"]


def test_inserts_acknowledged_must_be_present_and_failed_ones_absent():
    s = Script()
    h = s.history
    ok = h.invoke("w1", "insert", "p1", value=1)
    s.done(1, ok)
    lost = h.invoke("w1", "insert", "p1", value=2)
    s.done(2, lost)
    unknown = h.invoke("w2", "insert", "p2", value=1)
    s.done(3, unknown, INFO, error="WriteTimeout")
    failed = h.invoke("w2", "insert", "p2", value=2)
    s.done(4, failed, FAIL, error="Unavailable")
    result = check_inserts(h, {"p1": {1}, "p2": {1, 2}})
    assert [(v.kind, v.op.value) for v in result.violations] == [
        ("lost insert", 2), ("failed insert present", 2)]
    assert result.report().startswith("2 violation(s); the first: lost insert of key p1")
    assert check_inserts(h, {"p1": {1, 2}, "p2": set()}).valid
    assert check_inserts(h, {"p1": {1, 2}, "p2": {1}}).valid


def test_recording_from_many_threads_orders_timestamps_by_invocation(tmp_path):
    h = History()

    def client(n):
        for _ in range(200):
            inv = h.invoke_write(f"w{n}", n % 3, "QUORUM")
            h.complete(inv, OK)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    writes = h.operations("write")
    assert len(writes) == 1600
    stamps = [w.timestamp for w in writes]  # in invocation order
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    assert all(e.index == i for i, e in enumerate(h.entries))
    path = tmp_path / "history.jsonl"
    h.dump(path)
    lines = path.read_text().splitlines()
    assert len(lines) == 3200
    assert json.loads(lines[0])["type"] == "invoke"
