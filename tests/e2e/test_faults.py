"""Faults that used to stop writes for good or lose acknowledged writes: a corrupt data file,
a damaged commit log, a full disk, running out of file descriptors. Each test starts its own
node, breaks something under it, and checks that the node reports it clearly, keeps (or
resumes) serving what it can, and loses nothing it acknowledged. Helenus-only: the tests damage
their own nodes' files and limits.
"""

import os
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
