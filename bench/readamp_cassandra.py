#!/usr/bin/env python3
"""Read amplification of Apache Cassandra 5.0's point reads, the counterpart of
bench/readamp.py (which measures Helenus): the same table, rows, keys and reads, and the same
primary number, disk bytes per point read from the server process's /proc/<pid>/io.

    ~/.cache/helenus/venv/bin/python bench/readamp_cassandra.py --quick
    ~/.cache/helenus/venv/bin/python bench/readamp_cassandra.py --read-ahead-kb-sweep 128,4096

Cassandra reads its data files through the kernel's page cache (its own chunk cache is off by
default in 5.0), so "a dataset at least 10x the cache" needs a bound on the page cache the node
may use. This script runs the node in a memory cgroup of its own for the read phases (root,
cgroup v1 or v2 with the memory controller):

1. starts Cassandra through scripts/cassandra.sh (its defaults, Cassandra's default heap for the
   machine, `-XX:+AlwaysPreTouch` so the whole heap is resident from the start), in an instance
   directory of its own under /tmp;
2. creates `readamp.standard1` and loads rows as bench/readamp.py does, until `nodetool
   tablestats` counts `--target-ratio` times the page cache bound (`--cache-mb` plus
   `--margin-mb`, the room left for the JVM's own allocations while it is bounded);
3. `nodetool flush` and `nodetool compact`, then waits for compactions to finish;
4. moves the JVM into a new memory cgroup limited to `--cache-mb` + `--margin-mb` (the memory
   it already holds stays charged where it was, so the limit bounds what it adds: page cache
   for the reads, and the JVM's small growth) and evicts the table's files from the page cache
   (`posix_fadvise(DONTNEED)`; pages the JVM has mapped, such as mmapped index files, stay);
5. warm-up reads fill the bounded page cache, then one measured phase of uniform random point
   reads per `read_ahead_kb` value (`--read-ahead-kb-sweep`, restored afterwards), each
   reporting `read_bytes` per read and the page cache the cgroup held;
6. stops the node by its PID, removes the cgroup and (unless `--keep`) the directory.

Every phase is bounded in time. The exit status is 0 when the run completed, whatever it
measured (there is no Cassandra target), 1 on an error."""

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
sys.path.insert(0, str(BENCH_DIR))

import readamp as ra  # noqa: E402
from harness.servers import CassandraServer, cassandra_default_heap  # noqa: E402

MIB = ra.MIB
NODETOOL_TIMEOUT_S = 900  # a major compaction of a few hundred MiB
COMPACTION_SETTLE_TIMEOUT_S = 600
# The size read_bytes is compared with: the 4 KiB page the kernel reads at least (and the block
# size of bench/readamp.py's Helenus result, so both tables read alike).
PAGE = 4096


def own_memory_cgroup():
    """(version, directory) of this process's memory cgroup, or None. v1: the `memory`
    hierarchy; v2: the unified hierarchy if it offers the memory controller."""
    lines = Path("/proc/self/cgroup").read_text().splitlines()
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            d = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
            if d.is_dir():
                return 1, d
    for line in lines:
        hid, controllers, path = line.split(":", 2)
        if hid == "0" and controllers == "":
            for root in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified")):
                ctl = root / "cgroup.controllers"
                if ctl.exists() and "memory" in ctl.read_text().split():
                    return 2, root / path.lstrip("/")
    return None


class BoundedCgroup:
    """A child memory cgroup with a hard limit; `enter(pid)` moves a process (all threads)."""

    def __init__(self, limit_bytes):
        found = own_memory_cgroup()
        if found is None:
            raise RuntimeError("no writable memory cgroup: this measurement needs root and the "
                               "memory controller (cgroup v1 or v2)")
        self.version, parent = found
        self.dir = parent / f"helenus-readamp-cassandra-{os.getpid()}"
        self.dir.mkdir()
        try:
            self._write("memory.limit_in_bytes" if self.version == 1 else "memory.max",
                        limit_bytes)
        except OSError as e:
            self.dir.rmdir()
            # cgroup v2 offers memory.max in a child only if the parent delegates the memory
            # controller (`+memory` in its cgroup.subtree_control).
            raise RuntimeError(f"cannot limit the memory of {self.dir} (cgroup v{self.version}):"
                               f" {e}") from e

    def _write(self, name, value):
        (self.dir / name).write_text(f"{value}\n")

    def enter(self, pid):
        self._write("cgroup.procs", pid)

    def stat(self):
        """Page cache (`file`) and anonymous bytes charged here, and the limit hits."""
        stat = {}
        for line in (self.dir / "memory.stat").read_text().splitlines():
            k, _, v = line.partition(" ")
            stat[k] = int(v)
        if self.version == 1:
            usage = int((self.dir / "memory.usage_in_bytes").read_text())
            failcnt = int((self.dir / "memory.failcnt").read_text())
            return {"page_cache": stat.get("cache", 0), "mapped_file": stat.get("mapped_file", 0),
                    "anon": stat.get("rss", 0), "usage": usage, "limit_hits": failcnt}
        usage = int((self.dir / "memory.current").read_text())
        events = dict(line.split() for line in (self.dir / "memory.events").read_text()
                      .splitlines())
        return {"page_cache": stat.get("file", 0), "mapped_file": stat.get("file_mapped", 0),
                "anon": stat.get("anon", 0), "usage": usage,
                "limit_hits": int(events.get("max", 0)),
                "oom_kills": int(events.get("oom_kill", 0))}

    def remove(self, back_to):
        """Moves the process `back_to` (if alive) to the parent and removes the cgroup."""
        if back_to is not None:
            try:
                (self.dir.parent / "cgroup.procs").write_text(f"{back_to}\n")
            except OSError:
                pass
        for _ in range(50):
            try:
                self.dir.rmdir()
                return
            except OSError:
                time.sleep(0.1)
        ra.log(f"could not remove {self.dir}")


class Node:
    """Cassandra for this run: `table_stats` in the shape bench/readamp.py's `load` reads."""

    def __init__(self, server: CassandraServer):
        self.server = server

    def nodetool(self, *args, timeout=NODETOOL_TIMEOUT_S):
        r = subprocess.run([str(self.server.script), "nodetool", *args], env=self.server.env(),
                           capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"nodetool {' '.join(args)} failed: "
                               f"{r.stderr.strip() or r.stdout.strip()}")
        return r.stdout

    def table_stats(self, target):
        return parse_tablestats(self.nodetool("tablestats", target, timeout=120))

    def data_files(self):
        return [p for p in (self.server.instance_dir / "data" / "data").rglob("*")
                if p.is_file() and p.parent.parent.name == ra.KEYSPACE]


def parse_tablestats(out):
    """`nodetool tablestats KS.T` in the shape bench/readamp.py's `load` reads. Cassandra
    flushes a memtable only when it fills its share of the heap (gigabytes here), and its
    partition estimate counts the memtable's too, so the memtable's bytes are added to the
    files' directly: `load`'s estimate (file bytes plus memtable entries times bytes per entry)
    is then their sum."""

    def number(label):
        m = re.search(rf"^\s*{re.escape(label)}:\s*([0-9.]+)", out, re.M)
        return int(float(m.group(1))) if m else 0

    return {
        "live_file_bytes": number("Space used (live)") + number("Memtable data size"),
        "live_files": number("SSTable count"),
        "file_entries": 1,
        "memtable_entries": 0,
    }


def evict(files):
    """Drops the files' clean, unmapped pages from the page cache."""
    for f in files:
        try:
            fd = os.open(f, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def node_configuration(server: CassandraServer):
    """The settings that decide how Cassandra reads, from the configuration it logs at start."""
    log = server.instance_dir / "logs" / "system.log"
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return {}
    m = re.search(r"Node configuration:\[(.*)\]", text)
    if not m:
        return {}
    wanted = ("disk_access_mode", "file_cache_enabled", "file_cache_size", "key_cache_size",
              "row_cache_size", "disk_optimization_strategy", "sstable", "compaction")
    out = {}
    for item in m.group(1).split("; "):
        k, _, v = item.partition("=")
        if k.strip() in wanted:
            out[k.strip()] = v.strip()
    return out


def summarize(label, read_ahead_kb, issued, ok, bad, failures, seconds, io, cg_before,
              cg_after):
    per_read = io["read_bytes"] / max(ok, 1)
    return {
        **ra.phase_basics(label, read_ahead_kb, issued, ok, bad, failures, seconds, io),
        "disk_bytes_per_read_in_pages": round(per_read / PAGE, 3),
        "page_cache_bytes_at_end": cg_after["page_cache"],
        "anon_bytes_at_end": cg_after["anon"],
        "limit_hits": cg_after["limit_hits"] - cg_before["limit_hits"],
    }


def markdown(result):
    cfg, ds = result["config"], result["dataset"]
    dev = result["environment"]["device"]
    bound = cfg["cache_mb"] + cfg["margin_mb"]
    lines = [
        f"### Cassandra {result.get('cassandra_version', '?')} read amplification",
        "",
        f"- dataset: {ds['rows']} rows, {ds['live_file_bytes'] / MIB:.1f} MiB in "
        f"{ds['live_files']} SSTable(s) = **{ds['live_file_bytes'] / (bound * MIB):.1f}x** the "
        f"{bound} MiB memory bound ({cfg['cache_mb']} MiB of page cache plus "
        f"{cfg['margin_mb']} MiB for the JVM's growth, cgroup v{result['cgroup_version']})",
        f"- heap {cfg['heap']} (resident from the start); as logged: "
        + ", ".join(f"{k}={v}" for k, v in sorted(result["cassandra_configuration"].items())),
        f"- data dir device: {dev.get('device')} ({(dev.get('mount') or {}).get('fstype')}), "
        f"read_ahead_kb at start {dev.get('read_ahead_kb')}, logical sector "
        f"{dev.get('logical_block_size')} B",
        f"- {result['warmup']['reads_ok']} unmeasured warm-up reads before the phases",
        "",
        "| read_ahead_kb | reads | disk bytes/read (/proc io) | x 4 KiB | page cache held "
        "| limit hits | reads/s |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for p in result["phases"]:
        lines.append(
            f"| {p['read_ahead_kb']} | {p['reads_ok']} | {p['disk_bytes_per_read']:.0f} | "
            f"{p['disk_bytes_per_read_in_pages']:.2f} | "
            f"{p['page_cache_bytes_at_end'] / MIB:.1f} MiB | {p['limit_hits']} | "
            f"{p['reads_per_second']} |")
    if result.get("notes"):
        lines.append("")
        lines.extend(f"- {n}" for n in result["notes"])
    return "\n".join(lines)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="4 MiB of page cache, 1000 warm-up and 4000 measured reads")
    p.add_argument("--cache-mb", type=int, help="page cache part of the memory bound "
                   "(default 16, quick 4: bench/readamp.py's block cache)")
    p.add_argument("--margin-mb", type=int, default=16,
                   help="the bound's room for the JVM's own growth (default 16); what the JVM "
                   "does not use of it holds page cache too, which the table reports")
    p.add_argument("--heap", default=cassandra_default_heap(),
                   help="-Xms/-Xmx (default: Cassandra's own default for this machine)")
    p.add_argument("--target-ratio", type=float, default=12.0,
                   help="load until the table is this many times the memory bound")
    p.add_argument("--min-ratio", type=float, default=10.0,
                   help="after compaction, load more if the table is below this ratio")
    p.add_argument("--load-timeout", type=float, default=1800.0, help="bound on loading (s)")
    p.add_argument("--load-chunk", type=int, default=100000,
                   help="rows between size checks (each runs nodetool: a JVM start)")
    p.add_argument("--out", default=None, help="JSON result path (default "
                   "/tmp/cassandra-readamp-<time>.json)")
    ra.add_shared_arguments(p)
    args = p.parse_args(argv)
    if args.cache_mb is None:
        args.cache_mb = 4 if args.quick else 16
    ra.quick_defaults(args)
    if args.out is None:
        args.out = f"/tmp/cassandra-readamp-{time.strftime('%Y%m%dT%H%M%S')}.json"
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)

    def on_sigterm(_signum, _frame):
        raise KeyboardInterrupt("SIGTERM")

    signal.signal(signal.SIGTERM, on_sigterm)

    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import RoundRobinPolicy

    bound_bytes = (args.cache_mb + args.margin_mb) * MIB
    cgroup = BoundedCgroup(bound_bytes)  # fails early, before the long load, without root
    run_dir = Path(tempfile.mkdtemp(prefix="cassandra-readamp-", dir=args.workdir))
    cache_root = Path(os.environ.get("HELENUS_CACHE") or Path.home() / ".cache" / "helenus")
    os.environ["CASSANDRA_JVM_EXTRA_OPTS"] = "-XX:+AlwaysPreTouch"
    server = CassandraServer(REPO_DIR / "scripts" / "cassandra.sh", run_dir / "instance",
                             args.heap, run_dir, cache_root)
    node = Node(server)
    cluster = None
    sweep = None
    result = {
        "benchmark": "readamp-cassandra",
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "config": {k: v for k, v in vars(args).items() if k != "out"},
        "cgroup_version": cgroup.version,
        "notes": [],
    }
    try:
        ra.log(f"starting Cassandra (heap {args.heap}) in {run_dir}")
        server.start()
        result["cassandra_version"] = server.version()
        result["cassandra_configuration"] = node_configuration(server)
        data_dir = server.instance_dir / "data" / "data"
        device = ra.block_device_of(data_dir)
        result["environment"] = {"device": device, "kernel": os.uname().release,
                                 "cpus": os.cpu_count()}
        profile = ExecutionProfile(load_balancing_policy=RoundRobinPolicy(),
                                   request_timeout=ra.REQUEST_TIMEOUT_S)
        cluster = Cluster(contact_points=["127.0.0.1"], port=server.port,
                          execution_profiles={EXEC_PROFILE_DEFAULT: profile},
                          connect_timeout=10, control_connection_timeout=10)
        session = cluster.connect()
        ra.create_schema(session)

        target = f"{ra.KEYSPACE}.{ra.TABLE}"
        t0 = time.monotonic()
        rows = ra.load(node, session, args, args.target_ratio * bound_bytes)
        while True:
            ra.log("nodetool flush, compact")
            node.nodetool("flush", ra.KEYSPACE, ra.TABLE)
            node.nodetool("compact", ra.KEYSPACE, ra.TABLE)
            deadline = time.monotonic() + COMPACTION_SETTLE_TIMEOUT_S
            while server.compacting():
                if time.monotonic() > deadline:
                    raise TimeoutError("compactions still running after "
                                       f"{COMPACTION_SETTLE_TIMEOUT_S} s")
                time.sleep(2)
            stats = node.table_stats(target)
            ratio = stats["live_file_bytes"] / bound_bytes
            if ratio >= args.min_ratio:
                break
            ra.log(f"after compaction the table is {ratio:.1f}x the bound; loading more")
            rows = ra.load(node, session, args,
                           stats["live_file_bytes"] + (args.target_ratio - ratio) * bound_bytes,
                           start_row=rows)
        result["dataset"] = {
            "rows": rows,
            "live_files": stats["live_files"],
            "live_file_bytes": stats["live_file_bytes"],
            "bytes_per_row_on_disk": round(stats["live_file_bytes"] / max(rows, 1), 1),
            "ratio_to_bound": round(stats["live_file_bytes"] / bound_bytes, 2),
            "load_and_compact_seconds": round(time.monotonic() - t0, 1),
        }
        ra.log(f"dataset: {rows} rows, {stats['live_file_bytes'] / MIB:.1f} MiB in "
               f"{stats['live_files']} SSTable(s), {result['dataset']['ratio_to_bound']}x the "
               f"{bound_bytes // MIB} MiB bound")

        cgroup.enter(server.pid)
        evict(node.data_files())
        ra.log(f"node in {cgroup.dir} (limit {bound_bytes // MIB} MiB); table files evicted")

        select = session.prepare(f"SELECT * FROM {target} WHERE key = ?")
        rng = random.Random(args.seed)

        def phase(label, count, read_ahead_kb):
            cg_before = cgroup.stat()
            io_before = ra.proc_io(server.pid)
            issued, ok, bad, failures, secs = ra.read_phase(
                session, select, rows, count, args.duration, args.read_concurrency, rng)
            io_after = ra.proc_io(server.pid)
            io = {k: io_after[k] - io_before.get(k, 0) for k in io_after}
            p = summarize(label, read_ahead_kb, issued, ok, bad, failures, secs, io, cg_before,
                          cgroup.stat())
            if bad or failures:
                result["notes"].append(f"{label}: {bad} wrong results, {len(failures)} failed "
                                       "reads")
            return p

        ra.log(f"warm-up, {args.warmup} reads")
        result["warmup"] = phase("warm-up", args.warmup, device.get("read_ahead_kb"))

        sweep = ra.ReadAheadSweep(args.read_ahead_kb_sweep, device, result["notes"])
        result["phases"] = []
        for value in sweep.values:
            sweep.apply(value)
            label = f"read_ahead_kb={value}"
            ra.log(f"{label}: {args.reads} measured reads")
            p = phase(label, args.reads, value)
            result["phases"].append(p)
            ra.log(f"  {p['disk_bytes_per_read']:.0f} disk B/read, page cache "
                   f"{p['page_cache_bytes_at_end'] / MIB:.1f} MiB, {p['reads_per_second']} reads/s")
        result["cgroup_at_end"] = cgroup.stat()
        if result["cgroup_at_end"].get("oom_kills"):
            result["notes"].append("the JVM grew past the bound and was OOM-killed: raise "
                                   "--margin-mb")
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
                ra.log(f"driver shutdown: {e}")
        pid = server.pid
        cgroup.remove(pid)
        server.stop()
        result["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        if args.keep:
            ra.log(f"kept {run_dir}")
        else:
            shutil.rmtree(run_dir, ignore_errors=True)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=2, default=str) + "\n")

    print(markdown(result))
    print(f"\nJSON: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
