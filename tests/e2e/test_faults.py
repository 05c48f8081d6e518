"""Faults that used to stop writes for good or lose acknowledged writes: a corrupt data file,
a damaged commit log, a full disk, running out of file descriptors. Each test starts its own
node, breaks something under it, and checks that the node reports it clearly, keeps (or
resumes) serving what it can, and loses nothing it acknowledged. Helenus-only: the tests damage
their own nodes' files and limits.
"""

import os
import resource
import select
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from cassandra.cluster import NoHostAvailable
from cassandra.protocol import ServerError

from util import cql_ready, new_session, wait_until

pytestmark = pytest.mark.helenus_only

KEYSPACE = "CREATE KEYSPACE {} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
# How long a node may take to notice a fault or recover from one (its timers tick every second;
# RocksDB retries a stopped database every five).
RECOVERY_TIMEOUT_S = 30


def admin_stats(node, target):
    """{table: {key: int}} from `helenus admin stats TARGET`."""
    code, out, err = node.admin("stats", target)
    assert code == 0, err
    return {
        name: {k: int(v) for k, v in (pair.split("=") for pair in pairs)}
        for name, *pairs in (line.split() for line in out.splitlines())
    }


def admin_metrics(node):
    code, out, err = node.admin("metrics")
    assert code == 0, err
    return {k: int(v) for k, v in (line.split("=") for line in out.splitlines())}


# --- A corrupt data file -------------------------------------------------------------------


def corrupt_a_data_file(node, **config):
    """Writes rot.t (one partition of 2,000 rows: a major compaction's first pass, which reads
    each partition's first row only, does not meet the damage; the compaction itself does) and
    rot.other, flushes rot.t, stops the node, flips 100 bytes in the middle of the data file,
    and starts the node again. Returns the damaged file."""
    with new_session(node.host, node.port) as s:
        s.execute(KEYSPACE.format("rot"))
        s.execute("CREATE TABLE rot.t (k int, c int, v text, PRIMARY KEY (k, c))")
        s.execute("CREATE TABLE rot.other (k int PRIMARY KEY, v text)")
        insert = s.prepare("INSERT INTO rot.t (k, c, v) VALUES (?, ?, ?)")
        for c in range(2000):
            s.execute(insert, [0, c, "x" * 200])
        s.execute("INSERT INTO rot.other (k, v) VALUES (1, 'before')")
    code, _, err = node.admin("flush", "rot.t")
    assert code == 0, err
    node.stop()
    data_file = max((node.directory / "data").glob("*.sst"), key=lambda p: p.stat().st_size)
    damaged = bytearray(data_file.read_bytes())
    middle = len(damaged) // 2  # data blocks; the index and footer are at the end
    for i in range(middle, middle + 100):
        damaged[i] ^= 0xFF
    data_file.write_bytes(bytes(damaged))
    node.start()
    return data_file


def test_corrupt_data_file_fails_its_compaction_not_every_write(node_factory):
    # A compaction that meets a corrupt block used to put RocksDB into a background error that
    # stopped every write to every table until a restart, and `helenus admin compact` still
    # said OK. Now the compaction fails and says so, the table's compactions stop (Cassandra
    # leaves a suspect SSTable out of compactions), and everything else goes on.
    node = node_factory().start()
    data_file = corrupt_a_data_file(node)
    with new_session(node.host, node.port) as s:
        # Reads of the damaged rows fail, naming the file.
        with pytest.raises((ServerError, NoHostAvailable)) as e:
            list(s.execute("SELECT * FROM rot.t"))
        assert data_file.name in str(e.value)

        code, out, err = node.admin("compact", "rot.t")
        assert code != 0, f"compaction of a corrupt file reported OK: {out}"
        assert "Corruption" in err and data_file.name in err, err

        # Writes go on, to the damaged table and to the others, and can be read back.
        s.execute("INSERT INTO rot.other (k, v) VALUES (2, 'after')")
        s.execute("INSERT INTO rot.t (k, c, v) VALUES (9, 0, 'after')")
        assert s.execute("SELECT v FROM rot.other WHERE k = 2").one().v == "after"
        assert s.execute("SELECT v FROM rot.t WHERE k = 9 AND c = 0").one().v == "after"
        assert s.execute("SELECT v FROM rot.other WHERE k = 1").one().v == "before"

        # The operator is told: the table's compactions are suspended, the counters show it.
        wait_until(lambda: admin_stats(node, "rot.t")["rot.t"]["compactions_suspended"] == 1,
                   RECOVERY_TIMEOUT_S, "rot.t's compactions suspended")
        assert admin_stats(node, "rot.other")["rot.other"]["compactions_suspended"] == 0
        metrics = admin_metrics(node)
        assert metrics["failed_compactions"] >= 1
        assert metrics["tables_with_suspended_compactions"] == 1
        assert metrics["corrupt_data_reads"] >= 1

        # More flushes of the damaged table (which would start compactions) stop nothing.
        insert = s.prepare("INSERT INTO rot.t (k, c, v) VALUES (?, ?, ?)")
        for round_no in range(5):
            for c in range(100):
                s.execute(insert, [10 + round_no, c, "y" * 200])
            code, _, err = node.admin("flush", "rot.t")
            assert code == 0, err
        s.execute("INSERT INTO rot.other (k, v) VALUES (3, 'later')")
        assert s.execute("SELECT count(*) FROM rot.t WHERE k = 14").one().count == 100

        # Compacting every table compacts the healthy ones and still reports the failure.
        code, _, err = node.admin("compact")
        assert code != 0 and data_file.name in err, err
    log = node.log_path.read_text(errors="replace")
    assert "corrupt data" in log and data_file.name in log
    assert "panicked" not in log


@pytest.mark.parametrize("policy", ["stop_paranoid", "die"])
def test_disk_failure_policy_applies_to_corrupt_data(node_factory, policy):
    # Cassandra's disk_failure_policy: under stop_paranoid a corrupt SSTable stops the client
    # transports (the node stays up for inspection), under die the process exits.
    node = node_factory(extra_config={"disk_failure_policy": policy}).start()
    data_file = corrupt_a_data_file(node)
    with new_session(node.host, node.port) as s:
        with pytest.raises((ServerError, NoHostAvailable)):
            list(s.execute("SELECT * FROM rot.t"))
    if policy == "die":
        code = node.process.wait(timeout=RECOVERY_TIMEOUT_S)
        assert code == 100, node.log_tail()
        node.process = None
    else:
        wait_until(lambda: not cql_ready(node.host, node.port), RECOVERY_TIMEOUT_S,
                   "CQL clients no longer served")
        assert node.is_running()
        assert admin_stats(node, "rot.t")["rot.t"]["live_files"] >= 1, "admin still answers"
        node.stop()
    log = node.log_path.read_text(errors="replace")
    assert data_file.name in log and policy in log


# --- A full disk ---------------------------------------------------------------------------

# The small disk the node's directory is on: a tmpfs, so ENOSPC is real and quick to reach.
SMALL_DISK_MIB = 128
# Values large enough that filling the disk takes a few thousand writes.
FULL_DISK_VALUE = "v" * 32_000


@pytest.fixture
def small_disk():
    """A directory on a tmpfs of SMALL_DISK_MIB mounted for the test; unmounted after. Needs
    root (CI runs as root); skipped where mounting is not possible. Request it before
    `node_factory` so its nodes stop before the unmount."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs for a full disk needs root")
    path = Path(tempfile.mkdtemp(prefix="helenus-small-disk-"))
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SMALL_DISK_MIB}m", "tmpfs", str(path)],
        capture_output=True, text=True, timeout=30,
    )
    if mounted.returncode != 0:
        path.rmdir()
        pytest.skip(f"cannot mount a tmpfs for a full disk: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30)
        shutil.rmtree(path, ignore_errors=True)


def fill_file(path, mib):
    with open(path, "wb") as f:
        f.write(b"\0" * (mib << 20))


def write_until_failure(session, table, first_key):
    """Writes FULL_DISK_VALUE under keys first_key, first_key + 1, ... until a write fails;
    returns (the keys acknowledged, the error)."""
    insert = session.prepare(f"INSERT INTO {table} (k, v) VALUES (?, ?)")
    acknowledged = []
    deadline = time.monotonic() + 120
    key = first_key
    while time.monotonic() < deadline:
        try:
            session.execute(insert, [key, FULL_DISK_VALUE])
        except (ServerError, NoHostAvailable) as e:
            return acknowledged, e
        acknowledged.append(key)
        key += 1
    pytest.fail("no write failed within 120 s")


def test_full_disk_fails_writes_clearly_and_they_resume_once_space_is_freed(small_disk, node_factory):
    # Writes used to fail with "No space left on device", then, once the commit log's periodic
    # sync had met the failed writer, with "Writer has previous error" until a restart, however
    # much space was freed. A short sync period makes that sync happen while the disk is full.
    filler = small_disk / "filler"
    fill_file(filler, 72)  # freed later: room for the flush that resuming writes starts with
    node = node_factory(small_disk / "node", commitlog_sync_period_in_ms=100).start()
    with new_session(node.host, node.port) as s:
        s.execute(KEYSPACE.format("disk"))
        s.execute("CREATE TABLE disk.t (k int PRIMARY KEY, v text)")
        acknowledged, error = write_until_failure(s, "disk.t", 0)
        assert acknowledged, "nothing was written before the disk filled up"
        assert "No space left on device" in str(error), error

        # While the disk is full (and the commit log sync runs ten times a second), writes
        # keep failing with a clear error; reads go on.
        insert = s.prepare("INSERT INTO disk.t (k, v) VALUES (?, ?)")
        for _ in range(5):
            with pytest.raises((ServerError, NoHostAvailable)) as e:
                s.execute(insert, [-1, "x"])
            assert "No space left on device" in str(e.value), e.value
            time.sleep(0.3)  # let the periodic sync meet the failed commit log writer
        assert s.execute("SELECT v FROM disk.t WHERE k = 0").one().v == FULL_DISK_VALUE

        filler.unlink()

        def written():
            try:
                s.execute(insert, [-2, "after"])
                return True
            except (ServerError, NoHostAvailable):
                return False

        wait_until(written, RECOVERY_TIMEOUT_S, "writes resume after space was freed")
        assert s.execute("SELECT v FROM disk.t WHERE k = -2").one().v == "after"
        stored = {r.k for r in s.execute("SELECT k FROM disk.t")}
    assert set(acknowledged) <= stored
    node.stop()


def test_restart_after_a_full_disk_needs_little_headroom(small_disk, node_factory):
    # A restart used to write everything the commit log held into new data files before it
    # deleted the log, so it needed about the commit log's size in free space: a node stopped
    # by a full disk did not start again after a little space was freed.
    headroom = small_disk / "headroom"
    fill_file(headroom, 4)
    node = node_factory(small_disk / "node", commitlog_sync="batch").start()
    with new_session(node.host, node.port) as s:
        s.execute(KEYSPACE.format("disk"))
        s.execute("CREATE TABLE disk.t (k int PRIMARY KEY, v text)")
        acknowledged, error = write_until_failure(s, "disk.t", 0)
    assert len(acknowledged) > 1000, f"{len(acknowledged)} writes filled the disk: {error}"
    node.kill()
    headroom.unlink()  # 4 MiB free, for a commit log of over 30 MiB
    node.start()
    with new_session(node.host, node.port) as s:
        stored = {r.k for r in s.execute("SELECT k FROM disk.t")}
    lost = set(acknowledged) - stored
    assert not lost, f"{len(lost)} acknowledged writes lost, e.g. {sorted(lost)[:5]}"
    node.stop()


# --- A damaged commit log ------------------------------------------------------------------


def test_damaged_commit_log_refuses_to_start_unless_told_to_salvage(node_factory):
    # Bytes flipped in the middle of a commit log file used to cost every write after them
    # (replay stopped there, newer files too) with only a warning. Now the node refuses to
    # start, naming the file and offset, as Cassandra refuses on a replay error; told to go on
    # (Cassandra's cassandra.commitlog.ignorereplayerrors), it replays every intact record.
    node = node_factory(commitlog_sync="batch").start()
    with new_session(node.host, node.port) as s:
        s.execute(KEYSPACE.format("wal"))
        s.execute("CREATE TABLE wal.t (k int PRIMARY KEY, v text)")
        insert = s.prepare("INSERT INTO wal.t (k, v) VALUES (?, ?)")
        for k in range(2000):
            s.execute(insert, [k, f"value-{k}"])  # acknowledged after the commit log sync
    node.kill()
    log = max((node.directory / "commitlog").glob("*.log"), key=lambda p: p.stat().st_size)
    damaged = bytearray(log.read_bytes())
    middle = len(damaged) // 2
    for i in range(middle, middle + 16):
        damaged[i] ^= 0x5A
    log.write_bytes(bytes(damaged))

    with pytest.raises(RuntimeError) as refused:
        node.start()
    message = str(refused.value)
    assert f"the commit log is damaged: {log}" in message and "at offset" in message, message
    assert "--ignore-commitlog-replay-errors" in message, message
    assert log.read_bytes() == bytes(damaged), "a refused start changes nothing"

    node.extra_config["commitlog_ignore_replay_errors"] = "true"
    node.start()
    with new_session(node.host, node.port) as s:
        stored = {r.k: r.v for r in s.execute("SELECT k, v FROM wal.t")}
    lost = set(range(2000)) - set(stored)
    # Each write is one record: the damage takes one or two, every other write is replayed,
    # those after the damage too.
    assert 1 <= len(lost) <= 2, sorted(lost)
    assert all(stored[k] == f"value-{k}" for k in stored)
    assert 1999 in stored
    assert (log.parent / (log.name + ".damaged")).read_bytes() == bytes(damaged)
    assert "the writes in them are lost" in node.log_path.read_text(errors="replace")

    # The log was rewritten whole: the next start needs no override.
    del node.extra_config["commitlog_ignore_replay_errors"]
    node.restart()
    with new_session(node.host, node.port) as s:
        assert s.execute("SELECT count(*) FROM wal.t").one().count == len(stored)
    node.stop()


def test_ignore_commitlog_replay_errors_flag(node_factory, tmp_path):
    # The override as a one-off command-line flag, as Cassandra's system property is given.
    node = node_factory(commitlog_sync="batch").start()
    with new_session(node.host, node.port) as s:
        s.execute(KEYSPACE.format("wal"))
        s.execute("CREATE TABLE wal.t (k int PRIMARY KEY, v text)")
        insert = s.prepare("INSERT INTO wal.t (k, v) VALUES (?, ?)")
        for k in range(500):
            s.execute(insert, [k, f"value-{k}"])
    node.kill()
    log = max((node.directory / "commitlog").glob("*.log"), key=lambda p: p.stat().st_size)
    damaged = bytearray(log.read_bytes())
    for i in range(len(damaged) // 2, len(damaged) // 2 + 16):
        damaged[i] ^= 0x5A
    log.write_bytes(bytes(damaged))
    # HelenusNode starts `binary server --config FILE`: a wrapper adds the flag.
    wrapper = tmp_path / "helenus-with-flag"
    wrapper.write_text(f"#!/bin/sh\nexec {node.binary} \"$@\" --ignore-commitlog-replay-errors\n")
    wrapper.chmod(0o755)
    binary, node.binary = node.binary, str(wrapper)
    try:
        node.start()
    finally:
        node.binary = binary
    with new_session(node.host, node.port) as s:
        count = s.execute("SELECT count(*) FROM wal.t").one().count
    assert 498 <= count < 500
    node.stop()


# --- File descriptors ----------------------------------------------------------------------

# The open file limit the node runs with: low, so that a test can open more connections than
# fit. The node takes half for connections (128) and a quarter for data files.
LOW_OPEN_FILE_LIMIT = 256
IDLE_CONNECTIONS = 300


def with_open_file_limit(node, tmp_path, limit):
    """Makes `node` start under `ulimit -n limit` (soft and hard, so the node cannot raise it):
    HelenusNode starts `binary server --config FILE`, so a wrapper script sets the limit."""
    wrapper = tmp_path / "helenus-low-nofile"
    wrapper.write_text(f"#!/bin/sh\nulimit -n {limit} || exit 111\nexec {node.binary} \"$@\"\n")
    wrapper.chmod(0o755)
    node.binary = str(wrapper)


def open_idle_connections(node, count):
    """`count` TCP connections to the node's CQL port that send nothing."""
    sockets = []
    for _ in range(count):
        sockets.append(socket.create_connection((node.host, node.port), timeout=10))
    return sockets


def served(sockets, timeout_s=10):
    """The sockets of `sockets` the server answers an OPTIONS frame on within `timeout_s`; the
    others it closed (or never accepted)."""
    from util import OPTIONS_FRAME_V4, OPCODE_SUPPORTED, read_frame
    waiting = []
    for sock in sockets:
        try:
            sock.sendall(OPTIONS_FRAME_V4)
            waiting.append(sock)
        except OSError:
            pass  # closed already
    answered = []
    deadline = time.monotonic() + timeout_s
    while waiting and time.monotonic() < deadline:
        readable, _, _ = select.select(waiting, [], [], max(0.0, deadline - time.monotonic()))
        for sock in readable:
            waiting.remove(sock)
            try:
                frame = read_frame(sock)  # the whole frame is there or follows at once
            except OSError:
                continue
            if frame is not None and frame[1] == OPCODE_SUPPORTED:
                answered.append(sock)
    return answered


def test_idle_connections_cannot_take_the_descriptors_storage_needs(node_factory, tmp_path):
    # With too few descriptors and no cap, idle connections took them all: RocksDB could not
    # open a new commit log file, and every write failed until a restart. Now connections are
    # capped at half the descriptor limit and the rest are closed as Cassandra closes them.
    node = node_factory()
    with_open_file_limit(node, tmp_path, LOW_OPEN_FILE_LIMIT)
    node.start()
    with new_session(node.host, node.port) as s:
        s.execute(KEYSPACE.format("fds"))
        s.execute("CREATE TABLE fds.t (k int PRIMARY KEY, v text)")
        insert = s.prepare("INSERT INTO fds.t (k, v) VALUES (?, ?)")
        idle = open_idle_connections(node, IDLE_CONNECTIONS)
        try:
            answered = len(served(idle))
            assert 0 < answered <= LOW_OPEN_FILE_LIMIT // 2, answered
            # Storage still opens files: a flush switches to a new commit log file and writes
            # a data file, and writes go on.
            for k in range(100):
                s.execute(insert, [k, "while full"])
            code, _, err = node.admin("flush", "fds.t")
            assert code == 0, err
            s.execute(insert, [100, "after the flush"])
            # A new client is refused clearly: its connection is closed.
            with pytest.raises(NoHostAvailable):
                with new_session(node.host, node.port, connect_timeout=5) as refused:
                    refused.execute("SELECT key FROM system.local")
        finally:
            for sock in idle:
                sock.close()
        s.execute(insert, [101, "after the idle connections closed"])
    # Once they are closed, new clients are served.
    with new_session(node.host, node.port) as s:
        assert s.execute("SELECT count(*) FROM fds.t").one().count == 102
    log = node.log_path.read_text(errors="replace")
    assert "Exceeded maximum native connection limit of 128" in log
    # The limit could not be raised: the node said it is low, as Cassandra's start-up checks.
    assert "Minimum value for max open files should be >= 10000" in log
    node.stop()


def test_writes_resume_once_descriptors_are_free_again(node_factory):
    # When RocksDB could not open a new commit log file for want of a descriptor, it stopped
    # every write for good (a fatal background error): after descriptors were free again,
    # writes still failed until a restart. Now storage reopens itself. The node's own soft
    # limit is lowered to what it uses, from outside, as nothing else could take them now.
    node = node_factory().start()
    pid = node.process.pid
    soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    with new_session(node.host, node.port) as s:
        s.execute(KEYSPACE.format("fds"))
        s.execute("CREATE TABLE fds.t (k int PRIMARY KEY, v text)")
        insert = s.prepare("INSERT INTO fds.t (k, v) VALUES (?, ?)")
        in_use = len(os.listdir(f"/proc/{pid}/fd"))
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (in_use, hard))
        try:
            # Writes fill the memtable until the switch to a new one, which needs a new commit
            # log file, fails.
            acknowledged, error = write_until_failure(s, "fds.t", 0)
            assert "Too many open files" in str(error), error
            time.sleep(1.5)  # storage's recovery runs meanwhile, and must not give up
            with pytest.raises((ServerError, NoHostAvailable)):
                s.execute(insert, [-1, "still no descriptor"])
        finally:
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (soft, hard))

        def written():
            try:
                s.execute(insert, [-2, "after"])
                return True
            except (ServerError, NoHostAvailable):
                return False

        wait_until(written, RECOVERY_TIMEOUT_S, "writes resume once descriptors are free")
        stored = {r.k for r in s.execute("SELECT k FROM fds.t")}
    assert set(acknowledged) <= stored
    assert -2 in stored
    node.stop()


def test_connections_per_client_address_are_capped(node_factory):
    node = node_factory(extra_config={"native_transport_max_concurrent_connections_per_ip": 3})
    node.start()
    idle, answered = [], []

    def three_of_five_served():
        # The readiness probe's connection may not have been seen closed yet: try again.
        for sock in idle:
            sock.close()
        idle[:] = open_idle_connections(node, 5)
        answered[:] = served(idle)
        return len(answered) == 3

    try:
        wait_until(three_of_five_served, RECOVERY_TIMEOUT_S, "three of five connections served")
        # Once one of them closes, a new connection from the address is served.
        answered[0].close()

        def new_connection_served():
            with socket.create_connection((node.host, node.port), timeout=10) as sock:
                return served([sock], timeout_s=2) == [sock]

        wait_until(new_connection_served, RECOVERY_TIMEOUT_S, "a connection served after one closed")
    finally:
        for sock in idle:
            sock.close()
    log = node.log_path.read_text(errors="replace")
    assert "Exceeded maximum native connection limit per ip of 3" in log
    node.stop()
