"""Crash consistency: clients write under load, the node is killed with SIGKILL at a random
moment, restarted on the same directory, and every acknowledged write is read back.

`commitlog_sync: batch` acknowledges only after the commit log is synced, so nothing
acknowledged may be lost. `periodic` acknowledges before the sync and may lose what was
acknowledged within the last sync period; anything acknowledged earlier must survive. (A
process crash leaves the OS's buffers intact, so in practice periodic loses nothing here either,
but the test holds the node only to its contract.) Helenus-only: the tests kill their own nodes.
"""

import random
import threading
import time

import pytest
from cassandra.cluster import NoHostAvailable
from cassandra.protocol import ServerError

from util import new_session, wait_until

pytestmark = pytest.mark.helenus_only

ROUNDS = 3                 # kills per mode
WRITERS = 4                # client threads writing concurrently
LOAD_S = (0.5, 2.0)        # the kill comes at a uniformly random moment in this window
PERIOD_MS = 200            # periodic mode's sync period, short so the allowance is small
PERIODIC_SLACK_S = 0.5     # timer jitter on a loaded 2-core machine, on top of the period


def write_until_failure(session, insert, key_base, writer, acked, stop):
    """Writes keys key_base + writer, + WRITERS, ... until a write fails (the node died) or
    `stop` is set, recording (key, monotonic time of the acknowledgement)."""
    n = 0
    while not stop.is_set():
        key = key_base + writer + n * WRITERS
        try:
            session.execute(insert, [key, f"value-{key}"], timeout=5)
        except Exception:  # noqa: BLE001 - any failure means the node is gone
            return
        acked.append((key, time.monotonic()))
        n += 1


def crash_rounds(node_factory, mode):
    node = node_factory(commitlog_sync=mode, commitlog_sync_period_in_ms=PERIOD_MS).start()
    with new_session(node.host, node.port) as s:
        s.execute(
            "CREATE KEYSPACE crash WITH replication = "
            "{'class': 'SimpleStrategy', 'replication_factor': 1}"
        )
        s.execute("CREATE TABLE crash.t (k int PRIMARY KEY, v text)")
    all_acked = []
    for round_no in range(ROUNDS):
        acked, stop = [], threading.Event()
        with new_session(node.host, node.port) as s:
            insert = s.prepare("INSERT INTO crash.t (k, v) VALUES (?, ?)")
            writers = [
                threading.Thread(
                    target=write_until_failure,
                    args=(s, insert, round_no * 10_000_000, w, acked, stop),
                )
                for w in range(WRITERS)
            ]
            for t in writers:
                t.start()
            time.sleep(random.uniform(*LOAD_S))
            killed_at = time.monotonic()
            node.kill()
            stop.set()
            for t in writers:
                t.join(timeout=30)
            assert not any(t.is_alive() for t in writers), "a writer hung after the kill"
        assert acked, f"round {round_no}: no write was acknowledged before the kill"
        all_acked.append((killed_at, acked))
        node.start()

    with new_session(node.host, node.port) as s:
        stored = {r.k: r.v for r in s.execute("SELECT k, v FROM crash.t")}
    node.stop()
    for round_no, (killed_at, acked) in enumerate(all_acked):
        if mode == "batch":
            must_survive = acked
        else:
            horizon = killed_at - PERIOD_MS / 1000 - PERIODIC_SLACK_S
            must_survive = [(k, t) for k, t in acked if t < horizon]
        lost = [k for k, _ in must_survive if stored.get(k) != f"value-{k}"]
        assert not lost, (
            f"{mode} round {round_no}: {len(lost)} of {len(must_survive)} acknowledged writes "
            f"lost after SIGKILL, e.g. {lost[:5]}"
        )
    return sum(len(a) for _, a in all_acked)


@pytest.mark.parametrize("mode", ["batch", "periodic"])
def test_acknowledged_writes_survive_sigkill(node_factory, mode):
    acknowledged = crash_rounds(node_factory, mode)
    assert acknowledged > 0


def test_killed_node_restarts_with_schema_and_serves(node_factory):
    # A kill right after DDL: the schema is written synchronously, so it must be there.
    node = node_factory().start()
    with new_session(node.host, node.port) as s:
        s.execute(
            "CREATE KEYSPACE k2 WITH replication = "
            "{'class': 'SimpleStrategy', 'replication_factor': 1}"
        )
        s.execute("CREATE TABLE k2.t (k int PRIMARY KEY, v int)")
    node.kill()
    node.start()
    with new_session(node.host, node.port) as s:
        s.execute("INSERT INTO k2.t (k, v) VALUES (1, 2)")
        assert s.execute("SELECT v FROM k2.t WHERE k = 1").one().v == 2


def newest_commit_log_file(node):
    logs = sorted((node.directory / "commitlog").glob("*.log"))
    assert logs, f"no commit log files in {node.directory / 'commitlog'}"
    return logs[-1]


def write_rows(s, keys):
    insert = s.prepare("INSERT INTO torn.t (k, v) VALUES (?, ?)")
    for k in keys:
        s.execute(insert, [k, f"value-{k}"])


def stored_keys(node):
    with new_session(node.host, node.port) as s:
        return {r.k for r in s.execute("SELECT k FROM torn.t")}


# Garbage after the last record: random bytes, and a record header whose type byte belongs to
# recycled logs (5), which RocksDB 11.8's log reader spun on forever (facebook/rocksdb#13333;
# random garbage starts that way about once in forty).
GARBAGE_TAILS = {
    "random": lambda: bytes(random.getrandbits(8) for _ in range(300)),
    "recycled-log-header": lambda: (b"\x12\x34\x56\x78\x20\x00\x05"
                                    + bytes(random.getrandbits(8) for _ in range(293))),
}


@pytest.mark.parametrize("garbage", sorted(GARBAGE_TAILS))
def test_torn_or_garbage_commit_log_tail_is_truncated_not_fatal(node_factory, garbage):
    # A crash mid-write leaves a partial last record; a disk may leave garbage after it. The node
    # must start, keeping every complete record before the damage.
    node = node_factory(commitlog_sync="batch").start()
    with new_session(node.host, node.port) as s:
        s.execute("CREATE KEYSPACE torn WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE torn.t (k int PRIMARY KEY, v text)")
        write_rows(s, range(0, 200))
    node.kill()
    with open(newest_commit_log_file(node), "ab") as f:
        f.write(GARBAGE_TAILS[garbage]())
    node.start()
    assert stored_keys(node) == set(range(0, 200))
    # The discarded tail is reported in the node's own log, naming the commit log file.
    assert count_truncation_warnings(node) == 1, node.log_tail(50)

    with new_session(node.host, node.port) as s:
        write_rows(s, range(200, 400))
    node.kill()
    wal = newest_commit_log_file(node)
    size = wal.stat().st_size
    with open(wal, "r+b") as f:
        f.truncate(size - 7)  # the last record is torn
    node.start()
    keys = stored_keys(node)
    assert set(range(0, 200)) <= keys
    # Only the torn record (the last write) may be gone.
    assert set(range(200, 399)) <= keys, sorted(set(range(200, 400)) - keys)[:10]
    assert count_truncation_warnings(node) == 2, node.log_tail(50)
    assert "panicked" not in node.log_tail(200)


def count_truncation_warnings(node):
    return sum(
        1 for line in node.log_path.read_text(errors="replace").splitlines()
        if "commit log replay stopped" in line and ".log: dropping" in line
    )


def test_corrupt_data_file_is_an_error_naming_the_file(node_factory):
    # Bit rot in a data file: the read that meets it fails with an error naming the file; the
    # node neither panics nor refuses other requests.
    node = node_factory().start()
    with new_session(node.host, node.port) as s:
        s.execute("CREATE KEYSPACE rot WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE rot.t (k int PRIMARY KEY, v text)")
        insert = s.prepare("INSERT INTO rot.t (k, v) VALUES (?, ?)")
        for k in range(500):
            s.execute(insert, [k, "x" * 200])
    code, _, err = node.admin("flush", "rot.t")
    assert code == 0, err
    node.stop()
    data_file = max((node.directory / "data").glob("*.sst"), key=lambda p: p.stat().st_size)
    damaged = bytearray(data_file.read_bytes())
    for i in range(1000, 1100):  # inside the first data blocks, well before the footer
        damaged[i] ^= 0xFF
    data_file.write_bytes(bytes(damaged))
    node.start()
    with new_session(node.host, node.port) as s:
        # A server error (code 0x0000); the driver wraps it once it has no other host to try.
        with pytest.raises((ServerError, NoHostAvailable)) as e:
            list(s.execute("SELECT * FROM rot.t"))
        assert data_file.name in str(e.value)
        assert s.execute("SELECT key FROM system.local").one().key == "local"
    assert "panicked" not in node.log_tail(200)


def commit_log_bytes(node):
    return sum(f.stat().st_size for f in (node.directory / "commitlog").glob("*.log"))


def test_commit_log_stays_within_commitlog_total_space_and_replays(node_factory):
    # Past `commitlog_total_space` the tables holding the oldest commit log file are flushed, so
    # the file can go: a quiet table's one early write must not keep every later file alive.
    bound = 1 << 20
    node = node_factory(extra_config={"commitlog_total_space": "1MiB"}).start()
    value = "x" * 10_000
    with new_session(node.host, node.port) as s:
        s.execute("CREATE KEYSPACE bound WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE bound.quiet (k int PRIMARY KEY, v text)")
        s.execute("CREATE TABLE bound.busy (k int PRIMARY KEY, v text)")
        s.execute("INSERT INTO bound.quiet (k, v) VALUES (0, 'early')")
        insert = s.prepare("INSERT INTO bound.busy (k, v) VALUES (?, ?)")
        for k in range(600):  # ~6 MB of commit log
            s.execute(insert, [k, value])
    wait_until(lambda: commit_log_bytes(node) <= 2 * bound, 30,
               f"the commit log within 2x its {bound}-byte bound")
    # A crash now replays what the remaining files hold; the flushed rest is in data files.
    node.kill()
    node.start()
    with new_session(node.host, node.port) as s:
        assert s.execute("SELECT v FROM bound.quiet WHERE k = 0").one().v == "early"
        rows = {r.k: r.v for r in s.execute("SELECT k, v FROM bound.busy")}
    node.stop()
    assert sorted(rows) == list(range(600)) and set(rows.values()) == {value}
