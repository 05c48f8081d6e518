"""`helenus-ceiling`, the benchmark harness's upper bound: a CQL server that answers reads and
writes at once without storing anything. A driver must connect to it, create a schema and prepare
statements as against Helenus (it serialises bound values by the prepared types, and reads
result columns from the prepared metadata), and then get Void for writes and no rows for reads.

Helenus-only: the test starts the binary itself ($HELENUS_CEILING_BIN, else
$CARGO_TARGET_DIR/debug/helenus-ceiling, else target/debug/helenus-ceiling) and is skipped if it
has not been built (`cargo build -p ceiling`).
"""

import os
import subprocess
from pathlib import Path

import pytest
from cassandra.query import BatchStatement

from util import free_port, new_session, unique_name, wait_for_cql

pytestmark = pytest.mark.helenus_only

# The ceiling only opens an in-memory engine, but a loaded machine may still be slow to exec it.
CEILING_START_TIMEOUT_S = 30
CEILING_STOP_TIMEOUT_S = 10


def ceiling_binary():
    if os.environ.get("HELENUS_CEILING_BIN"):
        return Path(os.environ["HELENUS_CEILING_BIN"])
    if os.environ.get("CARGO_TARGET_DIR"):
        return Path(os.environ["CARGO_TARGET_DIR"]) / "debug" / "helenus-ceiling"
    return Path(__file__).resolve().parents[2] / "target" / "debug" / "helenus-ceiling"


@pytest.fixture(scope="module")
def ceiling(tmp_path_factory):
    """(host, port) of a `helenus-ceiling` started for this module; stopped with SIGTERM."""
    binary = ceiling_binary()
    if not os.access(binary, os.X_OK):
        pytest.skip(f"helenus-ceiling not built at {binary} (cargo build -p ceiling)")
    host, port = "127.0.0.1", free_port()
    log_path = tmp_path_factory.mktemp("ceiling") / "ceiling.log"
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [str(binary), "--listen", f"{host}:{port}", "--threads", "2"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_for_cql(host, port, CEILING_START_TIMEOUT_S, alive=lambda: process.poll() is None)
        yield host, port
    except Exception as e:
        raise RuntimeError(f"{e}\n--- {log_path} ---\n{log_path.read_text(errors='replace')}")
    finally:
        process.terminate()
        try:
            process.wait(timeout=CEILING_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            pytest.fail(f"helenus-ceiling did not exit within {CEILING_STOP_TIMEOUT_S} s of SIGTERM")


# v4 is what the benchmark client (latte, on the ScyllaDB Rust driver) speaks; v5 is what the
# Python driver negotiates by default.
@pytest.mark.parametrize("protocol_version", [4, 5])
def test_prepared_writes_are_void_and_reads_find_no_rows(ceiling, protocol_version):
    with new_session(*ceiling, protocol_version=protocol_version) as cql:
        ks = unique_name("ks")
        cql.execute(
            f"CREATE KEYSPACE {ks} WITH replication = "
            "{'class': 'SimpleStrategy', 'replication_factor': 1}"
        )
        cql.execute(f"CREATE TABLE {ks}.kv (k int, c text, v bigint, PRIMARY KEY (k, c))")
        # The driver's schema metadata comes from the real system_schema tables.
        assert "kv" in cql.cluster.metadata.keyspaces[ks].tables

        insert = cql.prepare(f"INSERT INTO {ks}.kv (k, c, v) VALUES (?, ?, ?)")
        assert [c.name for c in insert.column_metadata] == ["k", "c", "v"]
        assert insert.routing_key_indexes == [0]
        select = cql.prepare(f"SELECT c, v FROM {ks}.kv WHERE k = ?")

        # A write answers Void: no rows, nothing to read.
        result = cql.execute(insert, (1, "a", 10))
        assert result.one() is None
        batch = BatchStatement()
        batch.add(insert, (2, "b", 20))
        batch.add(insert, (3, "c", 30))
        assert cql.execute(batch).one() is None

        # Nothing was stored: the SELECT has no rows, with the prepared result columns.
        rows = cql.execute(select, (1,))
        assert rows.column_names == ["c", "v"]
        assert list(rows) == []

        # The same statements as plain QUERY text.
        assert cql.execute(f"INSERT INTO {ks}.kv (k, c, v) VALUES (4, 'd', 40)").one() is None
        rows = cql.execute(f"SELECT k, c FROM {ks}.kv WHERE k = 4")
        assert rows.column_names == ["k", "c"]
        assert list(rows) == []
