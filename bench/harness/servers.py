"""The servers the suite measures, one at a time, each on free loopback ports, each started by
the harness and stopped by its PID at the end (also on Ctrl-C and errors): Apache Cassandra 5.0
(through scripts/cassandra.sh, in its own instance directory), Helenus (the release `helenus`
binary, data under the harness's temporary directory) and the ceiling (`helenus-ceiling`, which
answers without executing). With `bench/run --nodes N` (N > 1) a server is a local cluster of N
nodes on 127.0.0.1 ... 127.0.0.N, one process each: `CassandraCluster` (`cassandra.sh cluster`)
and `HelenusCluster` (`helenus cluster`), in a directory of the harness's, on free ports.

`Sampler` measures the server's processes (a cluster's every node) from /proc: CPU time (utime +
stime of every thread, /proc/<pid>/stat, summed over the processes) sampled every
`SAMPLE_INTERVAL_S` and interpolated to the start and end of a latte run's measured phase, the
machine's busy CPU (/proc/stat) the same way, and peak resident memory (VmHWM in
/proc/<pid>/status, summed over the processes, reset per workload through
/proc/<pid>/clear_refs)."""

import bisect
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
SAMPLE_INTERVAL_S = 0.1
# Bounds on waiting for a server, so a wedged one cannot stall the suite.
START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 60
# Cassandra's first start downloads it from Maven Central.
CASSANDRA_START_TIMEOUT_S = 900
FLUSH_TIMEOUT_S = 300
# A status command (admin metrics, nodetool compactionstats).
STATUS_TIMEOUT_S = 60


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
            return True
        except OSError:
            return False


def free_port_on(hosts: list[str], count: int = 1) -> int:
    """A port P such that P ... P + count - 1 are free on every address of `hosts`: a local
    cluster's nodes share their ports, each on its own address (and Cassandra's nodes take
    consecutive JMX ports on 127.0.0.1)."""
    for _ in range(100):
        port = free_port()
        if port + count > 65536:
            continue
        if all(_bindable(h, p) for h in hosts for p in range(port, port + count)):
            return port
    raise RuntimeError(f"no port free on {', '.join(hosts)} after 100 tries")


def cluster_hosts(nodes: int) -> list[str]:
    """A local cluster's node addresses: 127.0.0.1 ... 127.0.0.N."""
    return [f"127.0.0.{k}" for k in range(1, nodes + 1)]


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def process_cpu_s(pid: int) -> float:
    """utime + stime of the whole process (all threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    # The command name (field 2) is in parentheses and may hold spaces: split after it.
    fields = stat[stat.rindex(")") + 2:].split()
    # fields[0] is field 3 (state); utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS_PER_S


def machine_busy_s() -> float:
    """CPU seconds all CPUs spent busy since boot (user, nice, system, irq, softirq, steal)."""
    with open("/proc/stat") as f:
        cpu = f.readline().split()
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in cpu[1:9])
    return (user + nice + system + irq + softirq + steal) / CLOCK_TICKS_PER_S


def status_kib(pid: int, key: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def reset_peak_rss(pid: int) -> bool:
    """Resets VmHWM to the current RSS (Linux >= 4.0, `echo 5 > clear_refs`)."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def interpolate(samples: list, t: float) -> float | None:
    """Linear interpolation in [(time, value), ...] sorted by time; None outside the samples."""
    if not samples or t < samples[0][0] or t > samples[-1][0]:
        return None
    i = bisect.bisect_left(samples, (t, float("-inf")))
    if samples[i][0] == t or i == 0:
        return samples[i][1]
    (t0, v0), (t1, v1) = samples[i - 1], samples[i]
    return v0 + (v1 - v0) * (t - t0) / (t1 - t0)


def peak_rss_kib(pids: list[int], key: str = "VmHWM") -> int | None:
    """`key` (VmHWM: peak, VmRSS: current) summed over `pids`; None if a process is gone."""
    values = [status_kib(pid, key) for pid in pids]
    if not values or any(v is None for v in values):
        return None
    return sum(values)


class Sampler(threading.Thread):
    """Samples the CPU time of one process, or the sum over a cluster's processes, and the
    machine's busy CPU time until `stop()`. A sample is taken only when every process could be
    read: a sum missing a node would look like a drop in CPU time."""

    def __init__(self, pids):
        pids = [pids] if isinstance(pids, int) else list(pids)
        super().__init__(name=f"sampler-{pids[0]}", daemon=True)
        self.pids = pids
        self.process = []  # (epoch s, CPU s of the processes together)
        self.machine = []  # (epoch s, machine busy CPU s)
        self._stop_event = threading.Event()
        self._lock = threading.Lock()

    def run(self):
        while not self._stop_event.is_set():
            self.sample()
            self._stop_event.wait(SAMPLE_INTERVAL_S)

    def sample(self):
        try:
            cpu = sum(process_cpu_s(pid) for pid in self.pids)
        except (OSError, ValueError, IndexError):
            return
        now = time.time()
        busy = machine_busy_s()
        with self._lock:
            self.process.append((now, cpu))
            self.machine.append((now, busy))

    def stop(self):
        self._stop_event.set()
        self.join(timeout=5)

    def between(self, start: float, end: float) -> tuple[float | None, float | None]:
        """(process CPU s, machine busy CPU s) between two epoch times."""
        self.sample()  # so `end` is covered even if the thread has not woken up since
        with self._lock:
            process, machine = list(self.process), list(self.machine)
        out = []
        for series in (process, machine):
            a, b = interpolate(series, start), interpolate(series, end)
            out.append(None if a is None or b is None else b - a)
        return out[0], out[1]


def _stop_pid(pid: int, timeout_s: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM, then SIGKILL after the deadline; only ever a PID this harness started."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                return
        except ChildProcessError:
            # Not our child (Cassandra is started by the script): poll for its exit.
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def helenus_compacting(metrics: str) -> bool:
    """From `helenus admin metrics` (name=value lines): RocksDB has a compaction running or
    bytes it estimates must be compacted to bring every level within its target."""
    values = dict(line.split("=", 1) for line in metrics.splitlines() if "=" in line)
    return (int(values["running_compactions"]) > 0
            or int(values["pending_compaction_bytes"]) > 0)


def cassandra_compacting(stats: str) -> bool:
    """From `nodetool compactionstats` (Cassandra 5.0): pending tasks, or the table of
    active compactions (its header ends in `progress`)."""
    for line in stats.splitlines():
        words = line.split()
        if words[:2] == ["pending", "tasks"] and int(words[2]) > 0:
            return True
        if words[:1] == ["id"] and words[-1:] == ["progress"]:
            return True
    return False


class Server:
    """One server under test. Subclasses set `name`, `label` and implement start/stop."""

    name = ""
    label = ""
    # False for the ceiling, which stores nothing: loading, flushing and warming it (and
    # warming the server up) would measure nothing, so the suite skips them.
    stores_data = True

    # Processes (nodes) of the server: 1, or a local cluster's N.
    nodes = 1

    def __init__(self, log_dir: Path):
        self.log_dir = log_dir
        self.port = 0
        self.pid = None  # the process, or a cluster's first node's
        self.pids = []  # every process of the server (a cluster: one per node)
        self.command = []  # how it was started, for the report
        self.sampler = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def addresses(self) -> list[str]:
        """What latte connects to: every node (a client learns the others from any one, but
        starts on whichever of these answers)."""
        return [self.address]

    def peak_rss_kib(self) -> int | None:
        """Peak resident memory since the last `reset_peak_rss`, summed over the processes."""
        return peak_rss_kib(self.pids, "VmHWM")

    def rss_kib(self) -> int | None:
        return peak_rss_kib(self.pids, "VmRSS")

    def reset_peak_rss(self) -> None:
        for pid in self.pids:
            reset_peak_rss(pid)

    def version(self) -> str:
        return ""

    def flush(self, keyspace: str) -> None:
        """Memtables to data files (after a load), so reads come from the files."""

    def compacting(self) -> bool:
        """Whether a compaction is running or due. The suite waits for this to be false
        before each measured run, so that a run does not pay for the one before it (a
        saturation run leaves more to compact the faster the server took writes)."""
        return False

    def pause(self) -> None:
        """SIGSTOP: while another server is measured, this one takes no CPU at all (idle,
        Cassandra's JVM still used 0.10-0.19 of a core, the other servers' runs' "other
        load"). Cassandra's own tests pause nodes this way (ccm's `node.pause()`)."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def _signal(self, signum) -> None:
        for pid in self.pids:
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass  # exited: the next step reports it

    def _started(self, pids) -> None:
        self.pids = [pids] if isinstance(pids, int) else list(pids)
        self.pid = self.pids[0]
        self.sampler = Sampler(self.pids)
        self.sampler.start()

    def _stopped(self) -> None:
        if self.sampler:
            self.sampler.stop()
        self.pid = None
        self.pids = []

    def _wait_for_port(self, proc: subprocess.Popen, log: Path) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not port_open(self.port):
            if proc.poll() is not None:
                raise RuntimeError(f"{self.label} exited with {proc.returncode} during start-up; "
                                   f"log: {log}\n{_tail(log)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.label}: port {self.port} not open after "
                                   f"{START_TIMEOUT_S}s; log: {log}")
            time.sleep(0.1)  # poll interval while waiting for the port, not a readiness guess


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


class BinaryServer(Server):
    """A server that is a child process of the harness, in its own session (so a Ctrl-C in the
    terminal reaches the harness, which stops it in order, rather than the server directly)."""

    def __init__(self, log_dir: Path):
        super().__init__(log_dir)
        self.proc = None

    def _spawn(self, cmd: list[str]) -> None:
        log = self.log_dir / f"{self.name}.log"
        self.command = cmd
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        self._started(self.proc.pid)
        self._wait_for_port(self.proc, log)

    def stop(self) -> None:
        self.resume()  # a paused server would not act on SIGTERM
        if self.proc is not None and self.proc.poll() is None:
            _stop_pid(self.proc.pid)
        self.proc = None
        self._stopped()


class HelenusServer(BinaryServer):
    name = "helenus"
    label = "Helenus"

    def __init__(self, binary: Path, work_dir: Path, log_dir: Path):
        super().__init__(log_dir)
        self.binary = binary
        self.work_dir = work_dir
        self.admin_port = 0
        self.config_path = work_dir / "helenus.yaml"

    def start(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.port, self.admin_port = free_port(), free_port()
        # As `helenus server` with its embedded defaults (the README's node command), on free
        # ports, data under the harness's directory; the commit log as Cassandra's config in
        # scripts/cassandra.sh (periodic, 10 s); the block cache at its default (1/16 of RAM).
        self.config_path.write_text(
            "cluster_name: 'Helenus Bench'\n"
            "listen_address: 127.0.0.1\n"
            "rpc_address: 127.0.0.1\n"
            f"native_transport_port: {self.port}\n"
            f"admin_port: {self.admin_port}\n"
            "data_file_directories:\n"
            f"  - {self.work_dir / 'data'}\n"
            f"commitlog_directory: {self.work_dir / 'commitlog'}\n"
            "commitlog_sync: periodic\n"
            "commitlog_sync_period_in_ms: 10000\n"
        )
        self._spawn([str(self.binary), "server", "--config", str(self.config_path)])

    def version(self) -> str:
        out = subprocess.run([str(self.binary), "--version"], capture_output=True, text=True,
                             timeout=30)
        return (out.stdout or out.stderr).strip()

    def flush(self, keyspace: str) -> None:
        subprocess.run([str(self.binary), "admin", "--port", str(self.admin_port), "flush",
                        keyspace], check=True, capture_output=True, timeout=FLUSH_TIMEOUT_S)

    def compacting(self) -> bool:
        out = subprocess.run([str(self.binary), "admin", "--port", str(self.admin_port),
                              "metrics"], check=True, capture_output=True, text=True,
                             timeout=STATUS_TIMEOUT_S).stdout
        return helenus_compacting(out)


class CeilingServer(BinaryServer):
    name = "ceiling"
    label = "ceiling"
    stores_data = False

    def __init__(self, binary: Path, log_dir: Path):
        super().__init__(log_dir)
        self.binary = binary

    def start(self) -> None:
        self.port = free_port()
        self._spawn([str(self.binary), "--listen", self.address])


def cassandra_default_heap() -> str:
    """Cassandra's own default (conf/cassandra-env.sh): max(min(RAM/2, 1 GiB), min(RAM/4,
    8 GiB)), 6 GiB on a 24 GiB machine."""
    with open("/proc/meminfo") as f:
        kib = next(int(line.split()[1]) for line in f if line.startswith("MemTotal:"))
    mib = kib // 1024
    return f"{max(min(mib // 2, 1024), min(mib // 4, 8192))}M"


class CassandraServer(Server):
    """Cassandra through scripts/cassandra.sh, with its own instance directory (conf, data,
    logs, pid file) and ports, so it never touches a test node started by the script with its
    defaults. Stopped with `cassandra.sh stop` and the same environment: SIGTERM to the PID in
    this instance's pid file."""

    name = "cassandra"
    label = "Cassandra"

    def __init__(self, script: Path, instance_dir: Path, heap: str, log_dir: Path,
                 cache_root: Path):
        super().__init__(log_dir)
        self.script = script
        self.instance_dir = instance_dir
        self.heap = heap
        self.cache_root = cache_root
        self.jmx_port = 0
        self.storage_port = 0
        self.started = False
        self._version = ""

    def env(self) -> dict:
        return dict(
            os.environ,
            HELENUS_CACHE=str(self.cache_root),
            CASSANDRA_INSTANCE_DIR=str(self.instance_dir),
            CASSANDRA_PORT=str(self.port),
            CASSANDRA_JMX_PORT=str(self.jmx_port),
            CASSANDRA_STORAGE_PORT=str(self.storage_port),
            CASSANDRA_HEAP=self.heap,
        )

    def start(self) -> None:
        self.port, self.jmx_port, self.storage_port = free_port(), free_port(), free_port()
        self.instance_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_dir / "cassandra-start.log"
        self.command = [f"CASSANDRA_INSTANCE_DIR={self.instance_dir}",
                        f"CASSANDRA_PORT={self.port}", f"CASSANDRA_JMX_PORT={self.jmx_port}",
                        f"CASSANDRA_STORAGE_PORT={self.storage_port}",
                        f"CASSANDRA_HEAP={self.heap}", str(self.script), "start"]
        # From here on `stop` must run even if start fails half way: the script writes the pid
        # file before it waits for the port.
        self.started = True
        with open(log, "ab") as out:
            proc = subprocess.run([str(self.script), "start"], env=self.env(), stdout=out,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  timeout=CASSANDRA_START_TIMEOUT_S)
        if proc.returncode != 0:
            raise RuntimeError(f"cassandra.sh start failed ({proc.returncode}); log: {log}\n"
                               f"{_tail(log)}")
        pid = int((self.instance_dir / "cassandra.pid").read_text().strip())
        self._started(pid)
        status = subprocess.run([str(self.script), "status"], env=self.env(),
                                capture_output=True, text=True, timeout=30).stdout
        # "running: Cassandra 5.0.9, pid 123, CQL port 9042"
        self._version = status.split("Cassandra ", 1)[-1].split(",", 1)[0].strip()

    def version(self) -> str:
        return self._version

    def flush(self, keyspace: str) -> None:
        subprocess.run([str(self.script), "nodetool", "flush", keyspace], env=self.env(),
                       check=True, capture_output=True, timeout=FLUSH_TIMEOUT_S)

    def compacting(self) -> bool:
        out = subprocess.run([str(self.script), "nodetool", "compactionstats"], env=self.env(),
                             check=True, capture_output=True, text=True,
                             timeout=STATUS_TIMEOUT_S).stdout
        return cassandra_compacting(out)

    def stop(self) -> None:
        self.resume()  # a paused server would not act on SIGTERM
        if self.started:
            with open(self.log_dir / "cassandra-start.log", "ab") as out:
                subprocess.run([str(self.script), "stop"], env=self.env(), stdout=out,
                               stderr=subprocess.STDOUT, timeout=STOP_TIMEOUT_S + 30)
            self.started = False
        self._stopped()


def _run_logged(cmd: list[str], log: Path, timeout_s: float, env: dict | None = None) -> int:
    """Runs `cmd` with its output appended to `log`; its exit status."""
    with open(log, "ab") as out:
        out.write(f"\n$ {' '.join(cmd)}\n".encode())
        out.flush()
        return subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, timeout=timeout_s).returncode


class CassandraCluster(Server):
    """N Cassandra nodes on 127.0.0.1 ... 127.0.0.N through `scripts/cassandra.sh cluster`,
    in the directory `cluster_dir` (the script's `--dir`) on free CQL and storage ports (shared
    by the nodes, each on its own address) and N consecutive free JMX ports. `start` returns
    once every node sees N nodes UN; the PIDs are the nodes' (`cluster pids`). Stopped with
    `cluster stop`: SIGTERM to the PIDs in the cluster's pid files."""

    name = "cassandra"
    label = "Cassandra"

    def __init__(self, script: Path, cluster_dir: Path, nodes: int, heap: str, log_dir: Path,
                 cache_root: Path):
        super().__init__(log_dir)
        self.script = script
        self.cluster_dir = cluster_dir
        self.nodes = nodes
        self.heap = heap
        self.cache_root = cache_root
        self.hosts = cluster_hosts(nodes)
        self.started = False
        self._version = ""
        self.label = f"Cassandra ({nodes} nodes)"

    @property
    def addresses(self) -> list[str]:
        return [f"{h}:{self.port}" for h in self.hosts]

    def env(self) -> dict:
        return dict(os.environ, HELENUS_CACHE=str(self.cache_root), CASSANDRA_HEAP=self.heap,
                    CASSANDRA_START_TIMEOUT_S=str(CASSANDRA_START_TIMEOUT_S))

    def cluster_cmd(self, *args) -> list[str]:
        return [str(self.script), "cluster", args[0], "--dir", str(self.cluster_dir), *args[1:]]

    def start(self) -> None:
        self.port = free_port_on(self.hosts)
        storage_port = free_port_on(self.hosts)
        jmx_port = free_port_on(["127.0.0.1"], self.nodes)
        log = self.log_dir / "cassandra-start.log"
        cmd = self.cluster_cmd("start", "--nodes", str(self.nodes), "--cql-port", str(self.port),
                               "--storage-port", str(storage_port), "--jmx-port", str(jmx_port))
        self.command = [f"CASSANDRA_HEAP={self.heap}", *cmd]
        # From here on `stop` must run even if start fails half way: a node's pid file is
        # written before the script waits for it.
        self.started = True
        # Per node, and once more for the nodes to see each other UN (the first start also
        # downloads Cassandra).
        rc = _run_logged(cmd, log, CASSANDRA_START_TIMEOUT_S * (self.nodes + 1), self.env())
        if rc != 0:
            raise RuntimeError(f"cassandra.sh cluster start failed ({rc}); log: {log}\n"
                               f"{_tail(log)}")
        pids = subprocess.run(self.cluster_cmd("pids"), env=self.env(), capture_output=True,
                              text=True, timeout=30, check=True).stdout.split()
        if len(pids) != self.nodes:
            raise RuntimeError(f"cassandra.sh cluster pids: {len(pids)} of {self.nodes} nodes "
                               "running")
        self._started([int(p) for p in pids])
        self._version = subprocess.run([str(self.script), "install"], env=self.env(),
                                       capture_output=True, text=True, timeout=60).stdout.strip()

    def version(self) -> str:
        return self._version

    def nodetool(self, node: int, *args, timeout_s: float = STATUS_TIMEOUT_S) -> str:
        return subprocess.run(self.cluster_cmd("nodetool", str(node), *args), env=self.env(),
                              check=True, capture_output=True, text=True,
                              timeout=timeout_s).stdout

    def flush(self, keyspace: str) -> None:
        for node in range(1, self.nodes + 1):
            self.nodetool(node, "flush", keyspace, timeout_s=FLUSH_TIMEOUT_S)

    def compacting(self) -> bool:
        return any(cassandra_compacting(self.nodetool(node, "compactionstats"))
                   for node in range(1, self.nodes + 1))

    def stop(self) -> None:
        self.resume()  # a paused node would not act on SIGTERM
        if self.started:
            _run_logged(self.cluster_cmd("stop"), self.log_dir / "cassandra-start.log",
                        STOP_TIMEOUT_S + 30, self.env())
            self.started = False
        self._stopped()


class HelenusCluster(Server):
    """N Helenus nodes on 127.0.0.1 ... 127.0.0.N through `helenus cluster start --nodes N
    --dir DIR` on free CQL, storage and admin ports (shared by the nodes, each on its own
    address); the PIDs are the nodes' (DIR/nodeK/helenus.pid). Stopped with `helenus cluster
    stop`. A binary without the `cluster` command fails `start` with a message saying so."""

    name = "helenus"
    label = "Helenus"

    def __init__(self, binary: Path, cluster_dir: Path, nodes: int, log_dir: Path):
        super().__init__(log_dir)
        self.binary = binary
        self.cluster_dir = cluster_dir
        self.nodes = nodes
        self.hosts = cluster_hosts(nodes)
        self.admin_port = 0
        self.started = False
        self.label = f"Helenus ({nodes} nodes)"

    @property
    def addresses(self) -> list[str]:
        return [f"{h}:{self.port}" for h in self.hosts]

    def cluster_cmd(self, *args) -> list[str]:
        return [str(self.binary), "cluster", args[0], *args[1:], "--dir", str(self.cluster_dir)]

    def start(self) -> None:
        # `helenus cluster status` on a directory holding no cluster: "no cluster in DIR" from a
        # binary that has the command, the top-level usage (which names no `cluster`) from one
        # that has not.
        probe = subprocess.run(self.cluster_cmd("status"), capture_output=True, text=True,
                               timeout=30)
        if "cluster" not in probe.stdout + probe.stderr:
            raise RuntimeError(
                f"{self.binary} has no `cluster` command (`helenus cluster start --nodes "
                f"{self.nodes}`), which the {self.nodes}-node benchmark starts Helenus with: "
                "build a helenus that has it, or run Cassandra's side alone with "
                "--servers cassandra")
        self.port = free_port_on(self.hosts)
        storage_port = free_port_on(self.hosts)
        self.admin_port = free_port_on(self.hosts)
        log = self.log_dir / "helenus-start.log"
        cmd = self.cluster_cmd("start", "--nodes", str(self.nodes), "--cql-port", str(self.port),
                               "--storage-port", str(storage_port),
                               "--admin-port", str(self.admin_port))
        self.command = cmd
        self.started = True
        rc = _run_logged(cmd, log, START_TIMEOUT_S * (self.nodes + 1))
        if rc != 0:
            raise RuntimeError(f"helenus cluster start failed ({rc}); log: {log}\n{_tail(log)}")
        pids = []
        for k in range(1, self.nodes + 1):
            pid_file = self.cluster_dir / f"node{k}" / "helenus.pid"
            try:
                pids.append(int(pid_file.read_text().strip()))
            except (OSError, ValueError) as e:
                raise RuntimeError(f"node{k}: no pid in {pid_file}: {e}") from e
        self._started(pids)

    def version(self) -> str:
        out = subprocess.run([str(self.binary), "--version"], capture_output=True, text=True,
                             timeout=30)
        return (out.stdout or out.stderr).strip()

    def admin(self, host: str, *args, timeout_s: float = STATUS_TIMEOUT_S) -> str:
        return subprocess.run([str(self.binary), "admin", "--host", host, "--port",
                               str(self.admin_port), *args], check=True, capture_output=True,
                              text=True, timeout=timeout_s).stdout

    def flush(self, keyspace: str) -> None:
        for host in self.hosts:
            self.admin(host, "flush", keyspace, timeout_s=FLUSH_TIMEOUT_S)

    def compacting(self) -> bool:
        return any(helenus_compacting(self.admin(host, "metrics")) for host in self.hosts)

    def stop(self) -> None:
        self.resume()  # a paused node would not act on SIGTERM
        if self.started:
            _run_logged(self.cluster_cmd("stop"), self.log_dir / "helenus-start.log",
                        STOP_TIMEOUT_S + 30)
            self.started = False
            # Any node `cluster stop` left (it SIGKILLs after its own deadline): by PID, only
            # while it is still that node's server.
            for k, pid in enumerate(self.pids, 1):
                config = str(self.cluster_dir / f"node{k}" / "helenus.yaml").encode()
                try:
                    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                if config in cmdline:
                    os.kill(pid, signal.SIGKILL)
        self._stopped()
