"""A local Apache Cassandra 5.0 cluster for tests, through `scripts/cassandra.sh cluster`, with
the shape of the e2e suite's `LocalCluster` (`helenus cluster`): nodes on 127.0.0.1..N, ports
of their own (free on every node's address), `run(*args)` for any `cluster` command, `pid(k)`,
`node_dir(k)`, `destroy()`. So a cluster test can be run against the real thing by handing it
this instead of a Helenus cluster:

    cluster = CassandraLocalCluster(tmp_path / "cassandra", nodes=3).start()
    try:
        ...  # cluster.hosts, cluster.cql_port, cluster.kill(2), cluster.nodetool(1, "status")
    finally:
        cluster.destroy()

Standard library only. The script assembles Cassandra from Maven Central on first use."""

import os
import signal
import socket
import subprocess
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parents[2]
SCRIPT = REPO_DIR / "scripts" / "cassandra.sh"
# A fresh 3-node start took 70-100 s here (nodes one after another); `stop` SIGKILLs a node
# after 60 s.
START_TIMEOUT_S = 600
STOP_TIMEOUT_S = 180


def _bindable(host, port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
            return True
        except OSError:
            return False


def free_port_on(hosts, count=1):
    """A port P with P ... P + count - 1 free on every address of `hosts`."""
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port + count <= 65536 and all(_bindable(h, p) for h in hosts
                                         for p in range(port, port + count)):
            return port
    raise RuntimeError(f"no port free on all of {hosts}")


class CassandraLocalCluster:
    """`scripts/cassandra.sh cluster` in `directory`: N nodes on 127.0.0.1..N sharing a free
    CQL port and a free storage port, node K on JMX port `jmx_port + K - 1` (Cassandra's local
    JMX binds 127.0.0.1 only). `heap` per node (the script's default, 512M, if None).
    `destroy()` stops it with `cluster stop`, then SIGKILLs any node whose pid file still names
    a live process of that node (its command line names its cassandra.yaml)."""

    # Which server runs the nodes (the e2e suite's `LocalCluster` says "helenus").
    flavor = "cassandra"

    def __init__(self, directory, nodes, heap=None, script=SCRIPT):
        self.directory = Path(directory).resolve()
        self.nodes = nodes
        self.heap = heap
        self.script = str(script)
        self.hosts = [f"127.0.0.{k}" for k in range(1, nodes + 1)]
        self.cql_port = free_port_on(self.hosts)
        self.storage_port = free_port_on(self.hosts)
        self.jmx_port = free_port_on(["127.0.0.1"], nodes)

    def run(self, *args, timeout_s=START_TIMEOUT_S):
        """`cassandra.sh cluster ARGS... --dir DIR`: (exit code, stdout, stderr)."""
        env = dict(os.environ)
        if self.heap:
            env["CASSANDRA_HEAP"] = self.heap
        result = subprocess.run([self.script, "cluster", *args, "--dir", str(self.directory)],
                                capture_output=True, text=True, timeout=timeout_s, env=env)
        return result.returncode, result.stdout, result.stderr

    def _check(self, *args, timeout_s=START_TIMEOUT_S):
        code, out, err = self.run(*args, timeout_s=timeout_s)
        if code != 0:
            raise RuntimeError(f"cassandra.sh cluster {' '.join(args)} failed ({code}):\n"
                               f"{out}{err}")
        return out

    def start(self):
        """Creates and starts the cluster (or starts its nodes that are down); returns once
        every node lists every node UN."""
        self._check("start", "--nodes", str(self.nodes), "--cql-port", str(self.cql_port),
                    "--storage-port", str(self.storage_port), "--jmx-port", str(self.jmx_port))
        # A cluster that existed in the directory keeps the ports it was created with.
        env = dict(line.split("=", 1) for line in
                   (self.directory / "cluster.env").read_text().splitlines()
                   if "=" in line and not line.startswith("#"))
        self.cql_port = int(env["CLUSTER_CQL_PORT"])
        self.storage_port = int(env["CLUSTER_STORAGE_PORT"])
        self.jmx_port = int(env["CLUSTER_JMX_PORT"])
        self.heap = env["CLUSTER_HEAP"]
        return self

    def pids(self):
        """The running nodes' PIDs."""
        return [int(p) for p in self._check("pids", timeout_s=60).split()]

    def kill(self, k):
        """SIGKILL node k: a crash."""
        self._check("kill", str(k))

    def restart(self, k):
        """Starts node k again; returns once every running node sees every running node UN."""
        self._check("restart", str(k))

    def nodetool(self, k, *args):
        """Node k's `nodetool ARGS...`: its stdout."""
        return self._check("nodetool", str(k), *args, timeout_s=120)

    def node_dir(self, k):
        return self.directory / f"node{k}"

    def pid(self, k):
        """Node k's pid from its pid file, or None."""
        try:
            return int((self.node_dir(k) / "cassandra.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def destroy(self):
        try:
            self.run("stop", timeout_s=STOP_TIMEOUT_S)
        finally:
            for k in range(1, self.nodes + 1):
                pid = self.pid(k)
                if pid is not None and self._is_node(pid, k):
                    os.kill(pid, signal.SIGKILL)

    def _is_node(self, pid, k):
        """Whether `pid` is still node k's Cassandra (never signal a reused pid)."""
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        config = f"-Dcassandra.config=file://{self.node_dir(k)}/conf/cassandra.yaml"
        return config.encode() in cmdline
