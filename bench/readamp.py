#!/usr/bin/env python3
"""Read-amplification benchmark for Helenus point reads.

Requirement (issue): "A benchmark loads a dataset at least 10x the block cache, issues uniform
random point reads, and reports disk bytes read per read; target <= 2 x the block size,
independent of the device's read_ahead_kb."

What it does, each phase bounded in time:

1. starts its own `helenus server` in a fresh directory under /tmp, on 127.0.0.1 with free
   native and admin ports, a small block cache (`block_cache_size_in_mb`) and the partition
   cache off (`partition_cache_size_in_mb: 0`): this measures the LSM's read path;
2. creates a cassandra-stress `standard1`-like table (blob key, blob columns "C0".."C4") and
   loads rows of random (incompressible) values with bounded concurrent `execute_async` until the
   table's data files (`helenus admin stats`) are `--target-ratio` times the cache;
3. `helenus admin flush` and `helenus admin compact`, so every read goes to SSTables, then
   restarts the node so every SST is opened as a restarted node opens it;
4. warms the block cache with uniform random point reads, then runs one measured read phase per
   `read_ahead_kb` value (`--read-ahead-kb-sweep`, only if the sysfs file is writable; the
   original value is restored in a `finally`), or one phase at the device's current value
   (`--rounds N`: N times, restarting in between);
5. for each phase reports the deltas of the server process's `/proc/<pid>/io` `read_bytes` (the
   primary number: bytes the process made the storage layer read, including any kernel
   read-ahead), RocksDB's own counters from `helenus admin metrics` (bytes read from files, block
   cache hits/misses) and `partition_reads`; prints a Markdown table and writes JSON (`--out`);
6. stops the node by its PID and removes the directory (unless `--keep`).

Standalone on purpose: nothing here imports from tests/.
"""

import argparse
import json
import mmap
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

MIB = 1024 * 1024

# Bounds on every phase (seconds). The load and read phases also take command-line bounds.
NODE_START_TIMEOUT_S = 120
NODE_STOP_TIMEOUT_S = 60
ADMIN_TIMEOUT_S = 900  # flush and compact of a few hundred MiB on a slow disk / debug build
REQUEST_TIMEOUT_S = 30
DRAIN_TIMEOUT_S = 120  # waiting for in-flight requests at the end of a chunk or phase
COMPACTION_SETTLE_TIMEOUT_S = 300

KEYSPACE = "readamp"
TABLE = "standard1"
COLUMNS = ["C0", "C1", "C2", "C3", "C4"]
# RocksDB's BlockBasedTableOptions::block_size default; used only if the OPTIONS file the node
# writes cannot be read (crates/storage/src/rocks.rs does not set a block size).
ROCKSDB_DEFAULT_BLOCK_SIZE = 4096


def log(msg):
    print(f"[readamp {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# Machine: ports, block device, read_ahead_kb, O_DIRECT
# --------------------------------------------------------------------------------------------


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mount_of(path):
    """The /proc/self/mountinfo entry of the mount holding `path`: dict with mount_point,
    fstype, source and dev (major:minor as listed)."""
    path = os.path.realpath(path)
    best = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            mount_point = fields[4].replace("\\040", " ")
            inside = path == mount_point or path.startswith(mount_point.rstrip("/") + "/")
            # Later entries shadow earlier ones on the same mount point.
            if inside and (best is None or len(mount_point) >= len(best["mount_point"])):
                best = {
                    "mount_point": mount_point,
                    "dev": fields[2],
                    "fstype": fields[sep + 1],
                    "source": fields[sep + 2],
                }
    return best


def block_device_of(path):
    """Finds the block device backing `path` and its read_ahead_kb.

    st_dev of the directory names the device for ext4/xfs; for filesystems with anonymous
    device numbers (btrfs, overlay) the mount source is tried. A partition's queue settings
    live on its parent disk."""
    info = {"mount": mount_of(path), "device": None, "sysfs": None,
            "read_ahead_kb": None, "read_ahead_kb_path": None, "read_ahead_kb_writable": False}
    candidates = []
    st = os.stat(path)
    candidates.append((os.major(st.st_dev), os.minor(st.st_dev)))
    source = (info["mount"] or {}).get("source", "")
    if source.startswith("/dev/"):
        try:
            rdev = os.stat(source).st_rdev
            candidates.append((os.major(rdev), os.minor(rdev)))
        except OSError:
            pass
    for major, minor in candidates:
        sysfs = Path(f"/sys/dev/block/{major}:{minor}")
        if not sysfs.exists():
            continue
        sysfs = sysfs.resolve()
        disk = sysfs.parent if (sysfs / "partition").exists() else sysfs
        ra = disk / "queue" / "read_ahead_kb"
        if not ra.exists():
            continue
        info["device"] = "/dev/" + sysfs.name
        info["disk"] = disk.name
        info["sysfs"] = str(disk)
        info["read_ahead_kb_path"] = str(ra)
        info["read_ahead_kb"] = int(ra.read_text().strip())
        info["read_ahead_kb_writable"] = os.access(ra, os.W_OK)
        for name in ("logical_block_size", "physical_block_size", "rotational"):
            p = disk / "queue" / name
            if p.exists():
                info[name] = int(p.read_text().strip())
        break
    return info


def probe_o_direct(directory):
    """Whether the filesystem of `directory` accepts O_DIRECT: open, write and read back one
    aligned 4 KiB block. Returns (supported, detail)."""
    if not hasattr(os, "O_DIRECT"):
        return False, "os.O_DIRECT not available on this platform"
    path = os.path.join(directory, ".readamp-odirect-probe")
    buf = mmap.mmap(-1, 4096)  # page-aligned, as O_DIRECT needs
    buf.write(os.urandom(4096))
    fd = None
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o600)
        if os.pwritev(fd, [buf], 0) != 4096:
            return False, "short O_DIRECT write"
        back = mmap.mmap(-1, 4096)
        if os.preadv(fd, [back], 0) != 4096 or back[:] != buf[:]:
            return False, "O_DIRECT read did not return the written block"
        return True, "open(O_DIRECT) + aligned 4 KiB write/read succeeded"
    except OSError as e:
        return False, f"{type(e).__name__}: {e}"
    finally:
        if fd is not None:
            os.close(fd)
        try:
            os.unlink(path)
        except OSError:
            pass


def write_read_ahead_kb(path, value):
    with open(path, "w") as f:
        f.write(f"{int(value)}\n")
    got = int(Path(path).read_text().strip())
    if got != int(value):
        raise RuntimeError(f"wrote {value} to {path} but it reads back {got}")


class ReadAheadSweep:
    """The read_ahead_kb values a run measures under (`--read-ahead-kb-sweep`), each set in turn
    on the data directory's device by `apply`; `restore` puts the original value back. Without
    a sweep, or if the sysfs file is not writable (a note says so), one phase at the current
    value and nothing is written. Shared with bench/readamp_cassandra.py."""

    def __init__(self, spec, device, notes):
        values = [int(v) for v in (spec or "").split(",") if v.strip()]
        self.path = device.get("read_ahead_kb_path")
        self.disk = device.get("disk")
        if values and not (self.path and device.get("read_ahead_kb_writable")):
            notes.append(
                f"read_ahead_kb sweep {values} skipped: {self.path or 'no block device found'} "
                "is not writable; one phase at the current value")
            values = []
        self.sweeping = bool(values)
        self.values = values or [device.get("read_ahead_kb")]
        self.original = device.get("read_ahead_kb") if values else None

    def apply(self, value):
        if self.sweeping:
            write_read_ahead_kb(self.path, value)
            log(f"read_ahead_kb of {self.disk} set to {value}")

    def restore(self, notes):
        if self.original is None:
            return
        try:
            write_read_ahead_kb(self.path, self.original)
            log(f"read_ahead_kb restored to {self.original}")
        except Exception as e:  # report, but still stop the node
            log(f"FAILED to restore {self.path} to {self.original}: {e}")
            notes.append(f"could not restore read_ahead_kb to {self.original}: {e}")


def proc_io(pid):
    out = {}
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            k, v = line.split(":")
            out[k.strip()] = int(v)
    return out


# --------------------------------------------------------------------------------------------
# The node
# --------------------------------------------------------------------------------------------


def elf_section_names(path):
    """Section names of a 64-bit little-endian ELF file ([] if it is not one)."""
    with open(path, "rb") as f:
        ident = f.read(64)
        if ident[:4] != b"\x7fELF" or ident[4] != 2 or ident[5] != 1:
            return []
        (shoff,) = struct.unpack_from("<Q", ident, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", ident, 0x3A)
        f.seek(shoff)
        table = f.read(shentsize * shnum)
        header = lambda i: struct.unpack_from("<IIQQQQIIQQ", table, i * shentsize)
        strtab = header(shstrndx)
        f.seek(strtab[4])
        names = f.read(strtab[5])
        out = []
        for i in range(shnum):
            start = header(i)[0]
            out.append(names[start:names.index(b"\0", start)].decode(errors="replace"))
        return out


def build_kind(binary):
    """"release" or "debug" from the path, else a guess: the workspace's dev profile keeps
    debug info (`debug = 1`), a default release build has none."""
    parts = Path(binary).parts
    if "release" in parts:
        return "release"
    if "debug" in parts:
        return "debug"
    try:
        has_debug_info = ".debug_info" in elf_section_names(binary)
    except OSError:
        return "unknown"
    return "debug (guessed: has .debug_info)" if has_debug_info else \
        "release (guessed: no .debug_info)"


def default_helenus_bin():
    if os.environ.get("HELENUS_BIN"):
        return os.environ["HELENUS_BIN"]
    base = Path.home() / ".cache" / "helenus" / "target"
    release = base / "release" / "helenus"
    return str(release if release.exists() else base / "debug" / "helenus")


# A protocol v4 OPTIONS frame: version 4, flags 0, stream 0, opcode OPTIONS (5), empty body.
OPTIONS_FRAME_V4 = struct.pack(">BBhBi", 0x04, 0x00, 0, 0x05, 0)
OPCODE_SUPPORTED = 0x06


def cql_ready(host, port):
    """True once the server answers OPTIONS with SUPPORTED (an open port alone is not enough)."""
    try:
        with socket.create_connection((host, port), timeout=1.0) as s:
            s.sendall(OPTIONS_FRAME_V4)
            header = b""
            while len(header) < 9:
                chunk = s.recv(9 - len(header))
                if not chunk:
                    return False
                header += chunk
            return header[4] == OPCODE_SUPPORTED
    except OSError:
        return False


class Node:
    """One `helenus server` this script starts; only its own PID is ever signalled."""

    def __init__(self, binary, directory, block_cache_mb):
        self.binary = str(binary)
        self.directory = Path(directory)
        self.host = "127.0.0.1"
        self.port = free_port()
        self.admin_port = free_port()
        while self.admin_port == self.port:
            self.admin_port = free_port()
        self.block_cache_mb = block_cache_mb
        self.data_dir = self.directory / "data"
        self.commitlog_dir = self.directory / "commitlog"
        self.config_path = self.directory / "helenus.yaml"
        self.log_path = self.directory / "helenus.log"
        self.process = None

    @property
    def pid(self):
        return self.process.pid

    def start(self):
        if not os.access(self.binary, os.X_OK):
            raise FileNotFoundError(f"helenus binary not found or not executable: {self.binary}")
        self.directory.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            "cluster_name: 'helenus-readamp'\n"
            f"listen_address: {self.host}\n"
            f"rpc_address: {self.host}\n"
            f"native_transport_port: {self.port}\n"
            f"admin_port: {self.admin_port}\n"
            "data_file_directories:\n"
            f"  - {self.data_dir}\n"
            f"commitlog_directory: {self.commitlog_dir}\n"
            "commitlog_sync: periodic\n"
            "commitlog_sync_period_in_ms: 10000\n"
            f"block_cache_size_in_mb: {self.block_cache_mb}\n"
            "partition_cache_size_in_mb: 0\n"
        )
        with open(self.log_path, "ab") as logf:
            self.process = subprocess.Popen(
                [self.binary, "server", "--config", str(self.config_path)],
                stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C reaches us; we stop the node in order
            )
        deadline = time.monotonic() + NODE_START_TIMEOUT_S
        while not cql_ready(self.host, self.port):
            if self.process.poll() is not None:
                raise RuntimeError(f"helenus exited while starting:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(f"helenus did not serve CQL within {NODE_START_TIMEOUT_S} s:\n"
                                   f"{self.log_tail()}")
            time.sleep(0.1)
        return self

    def running(self):
        return self.process is not None and self.process.poll() is None

    def stop(self):
        """SIGTERM by PID and wait; SIGKILL if it does not exit in time."""
        if not self.running():
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=NODE_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            log(f"helenus (pid {self.pid}) did not exit {NODE_STOP_TIMEOUT_S} s after SIGTERM; "
                "SIGKILL")
            self.kill()

    def kill(self):
        if self.running():
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=NODE_STOP_TIMEOUT_S)

    def admin(self, *command, timeout=ADMIN_TIMEOUT_S):
        """`helenus admin` against this node; returns its stdout lines, raises on failure."""
        r = subprocess.run(
            [self.binary, "admin", "--host", self.host, "--port", str(self.admin_port), *command],
            capture_output=True, text=True, timeout=timeout,
        )
        if r.returncode != 0:
            raise RuntimeError(f"helenus admin {' '.join(command)} failed: "
                               f"{r.stderr.strip() or r.stdout.strip()}")
        return [line for line in r.stdout.splitlines() if line.strip()]

    def metrics(self):
        out = {}
        for line in self.admin("metrics", timeout=60):
            name, _, value = line.partition("=")
            out[name.strip()] = int(value)
        return out

    def table_stats(self, target):
        """`helenus admin stats ks.table` as a dict of ints."""
        lines = self.admin("stats", target, timeout=60)
        if len(lines) != 1:
            raise RuntimeError(f"unexpected stats output: {lines}")
        return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", lines[0])}

    def log_tail(self, lines=30):
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def direct_io_from_log(self):
        """The engine logs `storage opened ... direct_io=true|false` at start (rocks.rs)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return None
        text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # the log has ANSI colours
        m = re.findall(r"storage opened.*?direct_io=(true|false)", text)
        return None if not m else m[-1] == "true"

    def sst_properties(self):
        """Table properties of the live table SST files, from the `table_file_creation` events
        RocksDB writes to its info log (LOG and rotated LOG.old.*): data, index and filter
        sizes and data block counts."""
        live = {int(p.name.split(".")[0]) for p in self.data_dir.glob("*.sst")}
        found = {}
        for logf in sorted(self.data_dir.glob("LOG*")):
            for line in logf.read_text(errors="replace").splitlines():
                if '"table_file_creation"' not in line or "{" not in line:
                    continue
                try:
                    event = json.loads(line[line.index("{"):])
                except ValueError:
                    continue
                number = event.get("file_number")
                if number in live and event.get("cf_name") != "default":
                    t = event.get("table_properties", {})
                    found[number] = {
                        "file_size": event.get("file_size"),
                        **{k: t.get(k) for k in ("data_size", "index_size", "filter_size",
                                                 "index_partitions", "num_data_blocks",
                                                 "num_entries", "num_filter_entries")},
                    }
        return found

    def rocksdb_table_options(self):
        """The block-based table options RocksDB wrote to its newest OPTIONS file for the
        table column families (they are created with the same options): block_size and friends
        as RocksDB actually uses them."""
        files = sorted(self.data_dir.glob("OPTIONS-*"),
                       key=lambda p: int(p.name.split("-")[1]) if p.name.split("-")[1].isdigit()
                       else 0)
        if not files:
            return {}
        section, out = None, {}
        for line in files[-1].read_text(errors="replace").splitlines():
            line = line.strip()
            if line.startswith("["):
                section = line
                continue
            # Any table column family (named by a UUID), not `default`.
            if section and section.startswith("[TableOptions/BlockBasedTable") \
                    and '"default"' not in section and "=" in line:
                k, _, v = line.partition("=")
                out.setdefault(k.strip(), v.strip())
        return out


# --------------------------------------------------------------------------------------------
# Bounded concurrent requests
# --------------------------------------------------------------------------------------------


class Inflight:
    """At most `limit` `execute_async` requests in flight. Callbacks run on the driver's event
    loop thread, so they only count and record; failures are collected for the caller."""

    def __init__(self, session, limit):
        self.session = session
        self.limit = limit
        self.sem = threading.BoundedSemaphore(limit)
        self.lock = threading.Lock()
        self.ok = 0
        self.failed = []  # (tag, exception)
        self.bad_results = 0

    def submit(self, statement, params, tag=None, check=None):
        if not self.sem.acquire(timeout=DRAIN_TIMEOUT_S):
            raise TimeoutError(f"no request completed within {DRAIN_TIMEOUT_S} s")
        try:
            future = self.session.execute_async(statement, params, timeout=REQUEST_TIMEOUT_S)
        except Exception:
            self.sem.release()
            raise

        def on_ok(rows, tag=tag):
            try:
                if check is not None and not check(rows):
                    with self.lock:
                        self.bad_results += 1
                with self.lock:
                    self.ok += 1
            finally:
                self.sem.release()

        def on_err(exc, tag=tag):
            with self.lock:
                self.failed.append((tag, exc))
            self.sem.release()

        future.add_callbacks(on_ok, on_err)

    def drain(self):
        """Waits until nothing is in flight."""
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        taken = 0
        try:
            while taken < self.limit:
                if not self.sem.acquire(timeout=max(0.0, deadline - time.monotonic())):
                    raise TimeoutError(f"requests still in flight after {DRAIN_TIMEOUT_S} s")
                taken += 1
        finally:
            for _ in range(taken):
                self.sem.release()

    def take_failures(self):
        with self.lock:
            failed, self.failed = self.failed, []
        return failed


def key_of(i):
    """Row i's partition key: 10 bytes like cassandra-stress's default keys."""
    return b"%010d" % i


# --------------------------------------------------------------------------------------------
# Phases
# --------------------------------------------------------------------------------------------


def create_schema(session):
    session.execute(
        f"CREATE KEYSPACE IF NOT EXISTS {KEYSPACE} WITH replication = "
        "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    cols = ", ".join(f'"{c}" blob' for c in COLUMNS)
    session.execute(f"CREATE TABLE IF NOT EXISTS {KEYSPACE}.{TABLE} (key blob PRIMARY KEY, {cols})")


def load(node, session, args, target_bytes, start_row=0):
    """Inserts rows from `start_row` until the table's on-disk bytes reach `target_bytes`
    (files plus the memtable estimated at the files' bytes per entry). Returns rows loaded."""
    cols = ", ".join(f'"{c}"' for c in COLUMNS)
    marks = ", ".join("?" for _ in range(len(COLUMNS) + 1))
    insert = session.prepare(f"INSERT INTO {KEYSPACE}.{TABLE} (key, {cols}) VALUES ({marks})")
    inflight = Inflight(session, args.write_concurrency)
    target = f"{KEYSPACE}.{TABLE}"
    deadline = time.monotonic() + args.load_timeout
    row = start_row
    started = time.monotonic()
    estimate = 0
    retries = {}
    while True:
        chunk_end = row + args.load_chunk
        while row < chunk_end:
            values = [key_of(row)] + [os.urandom(args.value_size) for _ in COLUMNS]
            inflight.submit(insert, values, tag=row)
            row += 1
        inflight.drain()
        # Re-send failed writes (e.g. a timeout during a write stall) so every key in
        # [0, row) exists when the read phase picks keys from that range.
        for _ in range(5):
            failed = inflight.take_failures()
            if not failed:
                break
            for tag, exc in failed:
                retries[tag] = retries.get(tag, 0) + 1
                if retries[tag] > 5:
                    raise RuntimeError(f"insert of row {tag} failed 5 times: {exc}")
                values = [key_of(tag)] + [os.urandom(args.value_size) for _ in COLUMNS]
                inflight.submit(insert, values, tag=tag)
            inflight.drain()
        if inflight.take_failures():
            raise RuntimeError("inserts kept failing after retries")
        s = node.table_stats(target)
        per_entry = (s["live_file_bytes"] / s["file_entries"]) if s["file_entries"] else None
        if per_entry is None:
            # Nothing flushed yet: a row costs about its payload plus key and cell overhead.
            per_entry = len(COLUMNS) * (args.value_size + 12) + 40
        estimate = s["live_file_bytes"] + s["memtable_entries"] * per_entry
        elapsed = time.monotonic() - started
        log(f"loaded {row} rows ({(row - start_row) / max(elapsed, 1e-9):.0f} rows/s); "
            f"files {s['live_file_bytes'] / MIB:.1f} MiB in {s['live_files']}, "
            f"memtable {s['memtable_entries']} entries; estimate {estimate / MIB:.1f} MiB "
            f"of {target_bytes / MIB:.1f} MiB")
        if estimate >= target_bytes:
            return row
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"loading did not reach {target_bytes / MIB:.0f} MiB within {args.load_timeout} s "
                f"(reached about {estimate / MIB:.0f} MiB; use --load-timeout or a smaller "
                "--block-cache-mb)")


def settle_compactions(node):
    """Waits until no compaction runs or is pending, so the read phase reads a quiet LSM."""
    deadline = time.monotonic() + COMPACTION_SETTLE_TIMEOUT_S
    while True:
        m = node.metrics()
        if m.get("running_compactions", 0) == 0 and m.get("pending_compaction_bytes", 0) == 0:
            return m
        if time.monotonic() > deadline:
            raise TimeoutError("compactions still running after "
                               f"{COMPACTION_SETTLE_TIMEOUT_S} s")
        time.sleep(1)


def read_phase(session, select, rows, count, duration_s, concurrency, rng):
    """`count` uniform random point reads of existing keys (stops early at `duration_s`).
    Returns (reads issued, reads ok, wrong results, failures, seconds)."""
    inflight = Inflight(session, concurrency)

    def one_row(result):
        result = list(result)
        return len(result) == 1 and all(getattr(result[0], c) is not None for c in COLUMNS)

    started = time.monotonic()
    deadline = started + duration_s
    issued = 0
    while issued < count and time.monotonic() < deadline:
        inflight.submit(select, [key_of(rng.randrange(rows))], check=one_row)
        issued += 1
    inflight.drain()
    elapsed = time.monotonic() - started
    failures = inflight.take_failures()
    return issued, inflight.ok, inflight.bad_results, failures, elapsed


def snapshot(node):
    return {"io": proc_io(node.pid), "metrics": node.metrics(), "time": time.monotonic()}


def delta(before, after):
    io = {k: after["io"][k] - before["io"].get(k, 0) for k in after["io"]}
    m = {k: after["metrics"][k] - before["metrics"].get(k, 0) for k in after["metrics"]
         if k not in ("memtable_bytes", "pending_compaction_bytes", "running_compactions")}
    return io, m


def phase_basics(label, read_ahead_kb, issued, ok, bad, failures, seconds, io):
    """What every read phase reports, whichever server it read from (also
    bench/readamp_cassandra.py): the reads and the server process's /proc/<pid>/io deltas."""
    return {
        "label": label,
        "read_ahead_kb": read_ahead_kb,
        "reads_issued": issued,
        "reads_ok": ok,
        "wrong_results": bad,
        "failures": len(failures),
        "failure_examples": [repr(e) for _, e in failures[:3]],
        "seconds": round(seconds, 3),
        "reads_per_second": round(ok / seconds, 1) if seconds > 0 else None,
        "proc_read_bytes": io["read_bytes"],
        "proc_rchar": io.get("rchar"),
        "proc_syscr": io.get("syscr"),
        "disk_bytes_per_read": round(io["read_bytes"] / max(ok, 1), 1),
    }


def summarize_phase(label, read_ahead_kb, issued, ok, bad, failures, seconds, io, m, block_size):
    reads = max(ok, 1)
    hits, misses = m.get("block_cache_hits", 0), m.get("block_cache_misses", 0)
    dhits, dmisses = m.get("block_cache_data_hits", 0), m.get("block_cache_data_misses", 0)
    disk_per_read = io["read_bytes"] / reads
    return {
        **phase_basics(label, read_ahead_kb, issued, ok, bad, failures, seconds, io),
        "disk_bytes_per_read_in_blocks": round(disk_per_read / block_size, 3),
        "rocksdb_file_read_bytes": m.get("file_read_bytes", 0),
        "rocksdb_file_bytes_per_read": round(m.get("file_read_bytes", 0) / reads, 1),
        "partition_reads": m.get("partition_reads", 0),
        "block_cache_hits": hits,
        "block_cache_misses": misses,
        "block_cache_hit_ratio": round(hits / (hits + misses), 4) if hits + misses else None,
        "block_cache_data_hits": dhits,
        "block_cache_data_misses": dmisses,
        "block_cache_data_hit_ratio": round(dhits / (dhits + dmisses), 4) if dhits + dmisses
        else None,
        "data_block_misses_per_read": round(dmisses / reads, 4),
        # Every block cache miss is one file read (RocksDB reads a block at a time here), so
        # these are the bytes one block read costs at the device and as RocksDB requested it;
        # the difference is direct I/O's rounding out to the device's logical sector size.
        "disk_bytes_per_block_read": round(io["read_bytes"] / misses, 1) if misses else None,
        "rocksdb_bytes_per_block_read": round(m.get("file_read_bytes", 0) / misses, 1)
        if misses else None,
        # Everything that is not a data block: index and filter blocks.
        "index_filter_misses_per_read": round((misses - dmisses) / reads, 4),
        "bloom": {k: v for k, v in m.items() if k.startswith("bloom_")},
        # rchar counts bytes returned by read syscalls; equal to read_bytes means every byte the
        # process read came from the device, none from the page cache (direct I/O).
        "all_reads_from_device": io.get("rchar") == io["read_bytes"],
        "compaction_read_bytes": m.get("compaction_read_bytes", 0),
        "flush_write_bytes": m.get("flush_write_bytes", 0),
        "target_bytes_per_read": 2 * block_size,
        "meets_target": disk_per_read <= 2 * block_size,
    }


def markdown(result):
    cfg, ds, env = result["config"], result["dataset"], result["environment"]
    bs = result["block_size"]
    lines = [
        f"### Helenus read amplification ({result['binary_kind']} build)",
        "",
        f"- dataset: {ds['rows']} rows, {ds['live_file_bytes'] / MIB:.1f} MiB in "
        f"{ds['live_files']} SST file(s) = **{ds['ratio_to_cache']:.1f}x** the "
        f"{cfg['block_cache_mb']} MiB block cache",
        f"- block size: {bs} B (source: {result['block_size_source']}); "
        f"target <= 2 x block size = {2 * bs} B per read",
        f"- data dir device: {env['device'].get('device')} "
        f"({(env['device'].get('mount') or {}).get('fstype')}), read_ahead_kb at start "
        f"{env['device'].get('read_ahead_kb')}, logical sector "
        f"{env['device'].get('logical_block_size')} B; O_DIRECT on the data dir's filesystem: "
        f"{env['o_direct_supported']}; node uses direct I/O: {env['node_direct_io']}",
        f"- {len(result['warmups'])} round(s) of {result['warmups'][0]['reads_ok']} unmeasured "
        f"warm-up reads and the measured phases; node restarted (empty block cache) before "
        f"{'every round' if cfg['restart'] else 'every round but the first'}",
    ]
    sst = result.get("sst")
    if sst:
        layout = ("partitioned" if sst["index_partitions"]
                  else "one index and one filter block per file")
        largest = max(sst["largest_index_block"], sst["largest_filter_block"]) / 1024
        lines.append(
            f"- SSTs: {sst['data_blocks']} data blocks, {sst['mean_data_block_bytes']} B on "
            f"average; index {sst['index_bytes'] / MIB:.2f} MiB + filter "
            f"{sst['filter_bytes'] / MIB:.2f} MiB ("
            f"{layout}, largest {largest:.0f} KiB) = "
            f"{sst['index_and_filter_to_cache']:.0%} of the block cache")
    lines += [
        "",
        "| round | read_ahead_kb | reads | disk bytes/read (/proc io) | x block size "
        "| RocksDB file "
        "bytes/read | block cache hit ratio | data block hit ratio | index+filter misses/read "
        "| disk bytes per block read | partition_reads | reads/s | <= 2 x block |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---:|",
    ]
    for p in result["phases"]:
        lines.append(
            f"| {p['round']} | {p['read_ahead_kb']} | {p['reads_ok']} | "
            f"{p['disk_bytes_per_read']:.0f} | "
            f"{p['disk_bytes_per_read_in_blocks']:.2f} | {p['rocksdb_file_bytes_per_read']:.0f} | "
            f"{p['block_cache_hit_ratio']} | {p['block_cache_data_hit_ratio']} | "
            f"{p['index_filter_misses_per_read']} | {p['disk_bytes_per_block_read']} | "
            f"{p['partition_reads']} | "
            f"{p['reads_per_second']} | {'yes' if p['meets_target'] else 'NO'} |")
    if result.get("notes"):
        lines.append("")
        lines.extend(f"- {n}" for n in result["notes"])
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------


def add_shared_arguments(p):
    """The options of the load and the reads, shared with bench/readamp_cassandra.py."""
    p.add_argument("--value-size", type=int, default=60,
                   help="bytes per column C0..C4 (default %(default)s)")
    p.add_argument("--reads", type=int, help="measured reads per phase (default 20000, quick "
                   "4000)")
    p.add_argument("--warmup", type=int, help="unmeasured reads before the first phase, to "
                   "fill the cache (default 5000, quick 1000)")
    p.add_argument("--duration", type=float, default=120.0,
                   help="upper bound in seconds on each read phase (and on the warm-up) "
                   "(default %(default)s)")
    p.add_argument("--write-concurrency", type=int, default=128,
                   help="inserts in flight (default %(default)s)")
    p.add_argument("--read-concurrency", type=int, default=16,
                   help="reads in flight (default %(default)s)")
    p.add_argument("--read-ahead-kb-sweep", default=None,
                   help="comma-separated read_ahead_kb values, one read phase each (needs a "
                   "writable /sys/block/<dev>/queue/read_ahead_kb; restored afterwards)")
    p.add_argument("--seed", type=int, default=1,
                   help="seed of the read key sequence (default %(default)s)")
    p.add_argument("--workdir", default=None, help="parent of the node's fresh directory "
                   "(default: the system temp dir, /tmp)")
    p.add_argument("--keep", action="store_true", help="keep the node's directory")


def quick_defaults(args):
    """--reads and --warmup where not given: the full or the --quick sizes."""
    if args.reads is None:
        args.reads = 4000 if args.quick else 20000
    if args.warmup is None:
        args.warmup = 1000 if args.quick else 5000


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog="See bench/README.md.")
    p.add_argument("--helenus-bin", default=default_helenus_bin(),
                   help="helenus binary ($HELENUS_BIN, else ~/.cache/helenus/target/release, "
                   "else debug)")
    p.add_argument("--quick", action="store_true",
                   help="about a minute: 4 MiB cache, 4000 reads, 1000 warm-up reads (explicit "
                   "options still win)")
    p.add_argument("--block-cache-mb", type=int, help="block_cache_size_in_mb (default 16, "
                   "quick 4)")
    p.add_argument("--target-ratio", type=float, default=12.0,
                   help="load until the table's files are this many times the block cache "
                   "(default %(default)s)")
    p.add_argument("--min-ratio", type=float, default=10.0,
                   help="after compaction the dataset must be at least this many times the "
                   "cache (more rows are loaded if not) (default %(default)s)")
    add_shared_arguments(p)
    p.add_argument("--load-timeout", type=float, default=1200.0,
                   help="upper bound in seconds on loading (default %(default)s)")
    p.add_argument("--load-chunk", type=int, default=20000,
                   help="rows between progress checks (helenus admin stats) (default %(default)s)")
    p.add_argument("--rounds", type=int, default=1,
                   help="measurement rounds, each after a node restart (empty block cache) and "
                   "a warm-up, to show the result is repeatable on the same files. It does not "
                   "resample which cache shard a block lands in: RocksDB derives cache keys from "
                   "each file's own properties, so that is fixed when the files are written; "
                   "run the benchmark again for a new dataset (default %(default)s)")
    p.add_argument("--no-restart", dest="restart", action="store_false",
                   help="do not restart the node between compaction and round 1 (a restart "
                   "opens every SST as a restarted node would: RocksDB decides when it opens a "
                   "file whether its index and filter blocks stay pinned, so a file flushed to "
                   "L0 and moved down by compaction would keep them pinned, never looked up in "
                   "the cache)")
    p.add_argument("--out", default=None, help="JSON result path (default "
                   "/tmp/helenus-readamp-<time>.json)")
    args = p.parse_args(argv)
    if args.block_cache_mb is None:
        args.block_cache_mb = 4 if args.quick else 16
    quick_defaults(args)
    if args.out is None:
        args.out = f"/tmp/helenus-readamp-{time.strftime('%Y%m%d-%H%M%S')}.json"
    if args.rounds < 1 or args.reads < 1 or args.warmup < 0:
        p.error("--rounds and --reads must be positive, --warmup not negative")
    if args.target_ratio < args.min_ratio:
        p.error("--target-ratio must be >= --min-ratio")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # SIGTERM unwinds like Ctrl-C, so the finally blocks restore read_ahead_kb and stop the node.
    def on_sigterm(_signum, _frame):
        raise KeyboardInterrupt("SIGTERM")

    signal.signal(signal.SIGTERM, on_sigterm)

    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import RoundRobinPolicy

    binary = os.path.realpath(args.helenus_bin)
    if not os.access(binary, os.X_OK):
        print(f"readamp: helenus binary not found or not executable: {binary} "
              "(use --helenus-bin or $HELENUS_BIN)", file=sys.stderr)
        return 2
    run_dir = Path(tempfile.mkdtemp(prefix="helenus-readamp-", dir=args.workdir))
    node = Node(binary, run_dir, args.block_cache_mb)
    cluster = None
    sweep = None
    result = {
        "benchmark": "readamp",
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "binary": binary,
        "binary_kind": build_kind(binary),
        "config": {k: v for k, v in vars(args).items() if k not in ("out",)},
        "notes": [],
    }
    try:
        version = subprocess.run([binary, "--version"], capture_output=True, text=True,
                                 timeout=30).stdout.strip()
        result["binary_version"] = version
        log(f"starting {version} in {run_dir} (CQL {node.port}, admin {node.admin_port}, "
            f"block cache {args.block_cache_mb} MiB)")
        node.start()
        result["node"] = {"pid": node.pid, "port": node.port, "admin_port": node.admin_port,
                          "directory": str(run_dir)}

        device = block_device_of(node.data_dir)
        o_direct, o_direct_detail = probe_o_direct(node.data_dir)
        result["environment"] = {
            "device": device,
            "o_direct_supported": o_direct,
            "o_direct_detail": o_direct_detail,
            "node_direct_io": node.direct_io_from_log(),
            "kernel": os.uname().release,
            "cpus": os.cpu_count(),
        }
        if result["environment"]["node_direct_io"] is False:
            result["notes"].append(
                "the node fell back to buffered I/O: reads go through the kernel page cache, "
                "so /proc read_bytes depends on page cache state and read_ahead_kb")
        log(f"data dir on {device.get('device')} ({(device.get('mount') or {}).get('fstype')}), "
            f"read_ahead_kb={device.get('read_ahead_kb')}, O_DIRECT: {o_direct} "
            f"({o_direct_detail}), node direct_io={result['environment']['node_direct_io']}")

        def connect():
            profile = ExecutionProfile(load_balancing_policy=RoundRobinPolicy(),
                                       request_timeout=REQUEST_TIMEOUT_S)
            c = Cluster(contact_points=[node.host], port=node.port,
                        execution_profiles={EXEC_PROFILE_DEFAULT: profile},
                        connect_timeout=10, control_connection_timeout=10)
            return c, c.connect()

        cluster, session = connect()
        create_schema(session)

        cache_bytes = args.block_cache_mb * MIB
        t0 = time.monotonic()
        rows = load(node, session, args, args.target_ratio * cache_bytes)
        target = f"{KEYSPACE}.{TABLE}"
        while True:
            log("admin flush")
            node.admin("flush", target)
            log("admin compact")
            tc = time.monotonic()
            node.admin("compact", target)
            log(f"compaction took {time.monotonic() - tc:.1f} s")
            settle_compactions(node)
            stats = node.table_stats(target)
            ratio = stats["live_file_bytes"] / cache_bytes
            if ratio >= args.min_ratio:
                break
            log(f"after compaction the dataset is {ratio:.1f}x the cache; loading more")
            extra = (args.target_ratio - ratio) * cache_bytes
            rows = load(node, session, args, stats["live_file_bytes"] + extra, start_row=rows)
        result["dataset"] = {
            "rows": rows,
            "value_size": args.value_size,
            "live_files": stats["live_files"],
            "live_file_bytes": stats["live_file_bytes"],
            "file_entries": stats["file_entries"],
            "memtable_entries": stats["memtable_entries"],
            "bytes_per_row_on_disk": round(stats["live_file_bytes"] / max(rows, 1), 1),
            "ratio_to_cache": round(stats["live_file_bytes"] / cache_bytes, 2),
            "load_and_compact_seconds": round(time.monotonic() - t0, 1),
        }
        log(f"dataset: {rows} rows, {stats['live_file_bytes'] / MIB:.1f} MiB in "
            f"{stats['live_files']} file(s), {result['dataset']['ratio_to_cache']}x the cache")

        def restart(why):
            nonlocal cluster, session
            log(f"restarting the node ({why})")
            cluster.shutdown()
            cluster = None
            node.stop()
            node.start()
            result["node"].setdefault("pids_after_restart", []).append(node.pid)
            result["environment"]["node_direct_io"] = node.direct_io_from_log()
            cluster, session = connect()

        table_opts = node.rocksdb_table_options()
        if "block_size" in table_opts:
            block_size, source = int(table_opts["block_size"]), "RocksDB OPTIONS file"
        else:
            block_size, source = ROCKSDB_DEFAULT_BLOCK_SIZE, "RocksDB default (OPTIONS unread)"
        result["block_size"] = block_size
        result["block_size_source"] = source
        result["rocksdb_table_options"] = {k: table_opts[k] for k in sorted(table_opts) if k in (
            "block_size", "block_align", "cache_index_and_filter_blocks",
            "cache_index_and_filter_blocks_with_high_priority",
            "pin_l0_filter_and_index_blocks_in_cache", "pin_top_level_index_and_filter",
            "index_type", "partition_filters", "metadata_block_size", "filter_policy",
            "whole_key_filtering", "prepopulate_block_cache", "max_auto_readahead_size",
            "initial_auto_readahead_size", "optimize_filters_for_memory")}

        ssts = node.sst_properties()
        if ssts:
            total = lambda k: sum(f.get(k) or 0 for f in ssts.values())
            meta = total("index_size") + total("filter_size")
            blocks = total("num_data_blocks")
            result["sst"] = {
                "files": len(ssts),
                "data_bytes": total("data_size"),
                "index_bytes": total("index_size"),
                "filter_bytes": total("filter_size"),
                "data_blocks": blocks,
                "index_partitions": total("index_partitions"),
                "mean_data_block_bytes": round(total("data_size") / blocks, 1) if blocks else None,
                "largest_index_block": max(f.get("index_size") or 0 for f in ssts.values()),
                "largest_filter_block": max(f.get("filter_size") or 0 for f in ssts.values()),
                "index_and_filter_to_cache": round(meta / cache_bytes, 3),
                "per_file": {str(k): v for k, v in sorted(ssts.items())},
            }
            log(f"SSTs: {blocks} data blocks of {result['sst']['mean_data_block_bytes']} B on "
                f"average; index {total('index_size') / MIB:.2f} MiB + filter "
                f"{total('filter_size') / MIB:.2f} MiB = "
                f"{result['sst']['index_and_filter_to_cache']:.0%} of the block cache")

        rng = random.Random(args.seed)

        sweep = ReadAheadSweep(args.read_ahead_kb_sweep, device, result["notes"])
        result["warmups"] = []
        result["phases"] = []
        for rnd in range(1, args.rounds + 1):
            # A restart empties the block cache. It keeps the blocks' cache keys (RocksDB's stable
            # cache keys come from each file's db_session_id and file number), hence their
            # cache shards: those change only with new files, i.e. another run.
            if rnd > 1:
                restart(f"round {rnd}: empty block cache")
            elif args.restart:
                restart("SSTs reopened at their final level, block cache empty")
            select = session.prepare(f"SELECT * FROM {KEYSPACE}.{TABLE} WHERE key = ?")

            log(f"round {rnd}: warm-up, {args.warmup} reads")
            before = snapshot(node)
            issued, ok, bad, failures, secs = read_phase(
                session, select, rows, args.warmup, args.duration, args.read_concurrency, rng)
            io, m = delta(before, snapshot(node))
            warm = summarize_phase("warm-up", device.get("read_ahead_kb"), issued, ok, bad,
                                   failures, secs, io, m, block_size)
            warm["round"] = rnd
            result["warmups"].append(warm)

            for ra in sweep.values:
                sweep.apply(ra)
                label = f"round {rnd}, read_ahead_kb={ra}"
                log(f"{label}: {args.reads} measured reads")
                before = snapshot(node)
                issued, ok, bad, failures, secs = read_phase(
                    session, select, rows, args.reads, args.duration, args.read_concurrency,
                    rng)
                io, m = delta(before, snapshot(node))
                phase = summarize_phase(label, ra, issued, ok, bad, failures, secs, io, m,
                                        block_size)
                phase["round"] = rnd
                result["phases"].append(phase)
                log(f"  {phase['disk_bytes_per_read']:.0f} disk B/read (/proc), "
                    f"{phase['rocksdb_file_bytes_per_read']:.0f} RocksDB B/read, hit ratio "
                    f"{phase['block_cache_hit_ratio']}, index+filter misses/read "
                    f"{phase['index_filter_misses_per_read']}, {phase['reads_per_second']} "
                    "reads/s")
                if bad or failures:
                    result["notes"].append(f"{label}: {bad} wrong results, "
                                           f"{len(failures)} failed reads")
                if phase["compaction_read_bytes"] or phase["flush_write_bytes"]:
                    result["notes"].append(
                        f"{label}: background work during the phase (compaction read "
                        f"{phase['compaction_read_bytes']} B, flush wrote "
                        f"{phase['flush_write_bytes']} B) may inflate /proc read_bytes")
                if phase["partition_reads"] != ok:
                    result["notes"].append(
                        f"{label}: partition_reads {phase['partition_reads']} != {ok} reads")
                if phase["index_filter_misses_per_read"] > 0.05:
                    sst = result.get("sst") or {}
                    largest_kib = max(sst.get("largest_index_block", 0),
                                      sst.get("largest_filter_block", 0)) // 1024
                    result["notes"].append(
                        f"{label}: index/filter blocks miss the cache "
                        f"({phase['index_filter_misses_per_read']} per read); each such miss "
                        f"reads a whole per-file index or filter block (up to {largest_kib} KiB "
                        "here), see bench/README.md")

        result["meets_target"] = all(p["meets_target"] for p in result["phases"])
        sector = device.get("logical_block_size")
        if sector:
            result["notes"].append(
                f"direct I/O rounds each block read out to {sector} B sectors: a block of about "
                f"{block_size} B at an unaligned offset costs about block + {sector} B at the "
                "device (see 'disk bytes per block read')")
        # read_ahead_kb independence is judged within a round (same cache placement).
        spreads = []
        for rnd in range(1, args.rounds + 1):
            per_read = [p["disk_bytes_per_read"] for p in result["phases"] if p["round"] == rnd]
            if len(per_read) > 1:
                spread = (max(per_read) - min(per_read)) / max(min(per_read), 1)
                spreads.append(spread)
                result["notes"].append(
                    f"round {rnd}: disk bytes/read across read_ahead_kb values: min "
                    f"{min(per_read):.0f}, max {max(per_read):.0f} ({spread:.1%} spread)")
        if spreads:
            result["read_ahead_kb_max_spread"] = round(max(spreads), 4)
    except BaseException as e:
        result["error"] = f"{type(e).__name__}: {e}"
        raise
    finally:
        if sweep is not None:
            sweep.restore(result["notes"])
        if cluster is not None:
            try:
                cluster.shutdown()
            except Exception as e:
                log(f"driver shutdown: {e}")
        node.stop()
        result["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        if args.keep:
            log(f"kept {run_dir}")
        else:
            shutil.rmtree(run_dir, ignore_errors=True)
        # Written even when a phase failed, with "error" set, so a bounded run leaves a record.
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=2, default=str) + "\n")

    print(markdown(result))
    print(f"\nJSON: {args.out}")
    return 0 if result.get("meets_target") else 1


if __name__ == "__main__":
    sys.exit(main())
