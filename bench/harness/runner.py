"""`bench/run`: the suite. Start every server (Cassandra, Helenus, the ceiling; with `--nodes N`,
a local cluster of N Cassandra nodes and one of N Helenus nodes) and warm each up;
then for each workload, every step on every server in turn: the setup (schema; for read
workloads load, flush and one warm pass), a saturation run, fixed-rate runs at fractions of
Cassandra's saturation throughput (before each measured run, a wait until no server is
compacting; during it, the other servers paused). Stop the servers, then write results.json
and the report (see `report`).

Everything a run produces goes to the output directory: results.json (the manifest the report
is built from, rewritten after every step so an interrupted suite still has its results),
latte/ (latte's JSON reports), logs/ (latte's output, the servers' logs), report.md and the
PNG plots."""

import argparse
import contextlib
import datetime
import json
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path

from . import latte as latte_mod
from . import machine, report, servers
from .workloads import (DEFAULT, QUICK, WORKLOADS, Profile, Workload, by_name, cluster_profile,
                        replication_factor, warm_up_ended)

BENCH_DIR = Path(__file__).resolve().parent.parent
REPO_DIR = BENCH_DIR.parent
SERVER_ORDER = ("cassandra", "helenus", "ceiling")
# A latte process gets its run's duration and warm-up plus this before it is killed.
LATTE_SLACK_S = 60
# Loading and warm passes: this plus one second per this many cycles.
SETUP_BASE_S = 120
SETUP_CYCLES_PER_S = 500
# Before each measured run the suite waits until the server has no compaction running or due,
# polling this often, for at most this long (then the run goes ahead and the step says so).
SETTLE_POLL_S = 1.0
SETTLE_MAX_S = 180
# `--nodes N` (N > 1): the workloads run by default (the benchmark issue's: replicated writes
# and reads), each node's Cassandra heap (three on this 24 GiB machine shared with builds; one
# node gets Cassandra's own default, 6 GiB here), and the consistency of every request.
CLUSTER_WORKLOADS = ("write", "read")
CLUSTER_CASSANDRA_HEAP = "1G"
CLUSTER_CONSISTENCY = "QUORUM"


def wait_until_settled(server) -> bool:
    """Waits until `server` has no compaction running or due; False if it still had after
    `SETTLE_MAX_S`."""
    started = time.monotonic()
    while server.compacting():
        if time.monotonic() - started > SETTLE_MAX_S:
            return False
        time.sleep(SETTLE_POLL_S)
    return True


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="bench/run",
        description="Runs the same latte workloads against Apache Cassandra 5.0, Helenus and "
        "the ceiling server, one at a time, and writes a Markdown report with ratios and plots.",
    )
    p.add_argument("--quick", action="store_true",
                   help="under 5 minutes: 5 s runs, one fixed rate (50%%), small data sets")
    p.add_argument("--nodes", type=int, default=1,
                   help="1 (default): one process per server; N > 1: Cassandra and Helenus as "
                   "local clusters of N nodes on 127.0.0.1..N, keyspaces with replication "
                   "factor min(N, 3), consistency QUORUM, the write and read workloads by "
                   "default, CPU and memory summed over the nodes (no ceiling)")
    p.add_argument("--out", help="output directory (default bench/results/<UTC timestamp>)")
    p.add_argument("--helenus-bin", help="helenus binary (default: cargo build --release)")
    p.add_argument("--ceiling-bin", help="helenus-ceiling binary (default: cargo build --release)")
    p.add_argument("--latte-bin", help="latte binary (default $HELENUS_CACHE/latte/bin/latte, "
                   "installed with cargo install if missing)")
    p.add_argument("--servers", help="comma-separated subset of cassandra,helenus,ceiling "
                   "(default: all; with --nodes N > 1: cassandra,helenus)")
    p.add_argument("--workloads", help="comma-separated subset of "
                   + ",".join(w.name for w in WORKLOADS)
                   + " (default: all; with --nodes N > 1: "
                   + ",".join(CLUSTER_WORKLOADS) + ")")
    p.add_argument("--duration", type=int, help="seconds per measured run (profile default)")
    p.add_argument("--warmup", type=int, help="seconds of warm-up before each run")
    p.add_argument("--server-warmup-max", type=int, metavar="S",
                   help="the longest a server's warm-up runs, waiting for its throughput to stop "
                   "rising (default 240, quick 0); 0: exactly the profile's minimum (30 s, quick "
                   "15 s)")
    p.add_argument("--rates", help="fixed-rate runs as fractions of Cassandra's saturation "
                   "throughput, e.g. 0.25,0.5,0.75")
    p.add_argument("--half-runs", type=int, help="measured runs at the rate nearest 50%% "
                   "(the report takes their median; default 3, quick 1)")
    p.add_argument("--readamp", action="store_true",
                   help="also measure disk bytes per point read (bench/readamp.py and "
                   "bench/readamp_cassandra.py, data 12x the cache) after the workloads: about "
                   "5 minutes, 3 with --quick; Cassandra's side needs root (a memory cgroup)")
    p.add_argument("--cassandra-heap",
                   help="Cassandra's -Xms/-Xmx (default: Cassandra's own formula, "
                   f"{servers.cassandra_default_heap()} here; with --nodes N > 1: "
                   f"{CLUSTER_CASSANDRA_HEAP} per node)")
    p.add_argument("--threads", type=int, default=1, help="latte worker threads (default 1)")
    p.add_argument("--concurrency", type=int, default=128,
                   help="latte requests in flight per thread (default 128)")
    p.add_argument("--connections", type=int, default=1,
                   help="latte connections per server (default 1)")
    p.add_argument("--workdir", help="parent of the temporary directory holding the servers' "
                   "data (default $TMPDIR or /tmp)")
    p.add_argument("--keep-workdir", action="store_true", help="keep the servers' data")
    p.add_argument("--report-only", metavar="DIR",
                   help="only (re)write report.md and the plots from DIR/results.json")
    args = p.parse_args(argv)
    if args.nodes < 1 or args.nodes > 254:
        p.error("--nodes must be 1 to 254")
    cluster = args.nodes > 1
    if args.servers is None:
        args.servers = ",".join(s for s in SERVER_ORDER if not (cluster and s == "ceiling"))
    if args.workloads is None:
        args.workloads = ",".join(CLUSTER_WORKLOADS if cluster else
                                  (w.name for w in WORKLOADS))
    if args.cassandra_heap is None:
        args.cassandra_heap = CLUSTER_CASSANDRA_HEAP if cluster else \
            servers.cassandra_default_heap()
    if cluster and "ceiling" in args.servers.split(","):
        p.error("the ceiling is one process: it has no place in a --nodes N > 1 run")
    if cluster and args.readamp:
        p.error("--readamp measures one node: run it without --nodes")
    return args


def _profile(args) -> Profile:
    profile = QUICK if args.quick else DEFAULT
    if args.nodes > 1:
        profile = cluster_profile(profile, args.nodes)
    if args.duration:
        profile = replace(profile, duration_s=args.duration)
    if args.warmup is not None:
        profile = replace(profile, warmup_s=args.warmup)
    if args.rates:
        profile = replace(profile, rate_fractions=tuple(float(x) for x in args.rates.split(",")))
    if args.half_runs is not None:
        profile = replace(profile, half_runs=max(1, args.half_runs))
    if args.server_warmup_max is not None:
        profile = replace(profile, server_warmup_max_s=max(0, args.server_warmup_max))
    return profile


def _timestamp() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


# Bound on each read-amplification script (load, compaction and reads of a few hundred MiB).
READAMP_TIMEOUT_S = 1800


def readamp_summary(name: str, data: dict) -> dict:
    """What the report shows of a read-amplification script's JSON result."""
    cfg, ds = data.get("config", {}), data.get("dataset", {})
    if name == "helenus":
        cache = f"{cfg.get('block_cache_mb')} MiB block cache, direct I/O"
    else:
        cache = (f"{cfg.get('cache_mb', 0) + cfg.get('margin_mb', 0)} MiB memory bound "
                 "(page cache and the JVM's growth)")
    return {
        "dataset_bytes": ds.get("live_file_bytes"),
        "rows": ds.get("rows"),
        "cache": cache,
        "phases": [{"read_ahead_kb": p.get("read_ahead_kb"), "reads": p.get("reads_ok"),
                    "disk_bytes_per_read": p.get("disk_bytes_per_read"),
                    "page_cache_bytes": p.get("page_cache_bytes_at_end")}
                   for p in data.get("phases", [])],
        "error": data.get("error"),
    }


def build_binaries(cache_root: Path) -> tuple[Path, Path]:
    """Release builds of helenus and helenus-ceiling in the user's CARGO_TARGET_DIR, else in
    the cache's target directory, as `.ci/run` builds (not the tree's own `target/`, where the
    first build compiles RocksDB again, for ~20 minutes)."""
    cmd = ["cargo", "build", "--release", "--locked", "--bin", "helenus",
           "--bin", "helenus-ceiling"]
    env = dict(os.environ)
    env.setdefault("CARGO_TARGET_DIR", str(cache_root / "target"))
    _log(f"building: CARGO_TARGET_DIR={env['CARGO_TARGET_DIR']} {shlex.join(cmd)}")
    subprocess.run(cmd, cwd=REPO_DIR, check=True, env=env)
    meta = subprocess.run(["cargo", "metadata", "--format-version", "1", "--no-deps"],
                          cwd=REPO_DIR, check=True, capture_output=True, text=True, env=env)
    target = Path(json.loads(meta.stdout)["target_directory"])
    return target / "release" / "helenus", target / "release" / "helenus-ceiling"


class Suite:
    def __init__(self, args, profile: Profile, out: Path, work_dir: Path, latte: Path,
                 server_list: list, workloads: list[Workload]):
        self.args = args
        self.profile = profile
        self.out = out
        self.work_dir = work_dir
        self.latte = latte
        self.servers = server_list
        self.workloads = workloads
        self.client = latte_mod.ClientSettings(
            threads=args.threads, concurrency=args.concurrency, connections=args.connections,
            consistency=CLUSTER_CONSISTENCY if args.nodes > 1 else "ONE")
        self.results = {}
        self.up = []  # the servers started, in SERVER_ORDER
        self.unsettled = set()  # servers that took requests since they last settled
        self.rate_base = {}  # workload -> {"server", "throughput"}

    # -- read amplification ------------------------------------------------------------------

    def readamp(self, helenus_bin: Path, cache_root: Path) -> None:
        """Runs the read-amplification scripts for Helenus and Cassandra (those in the suite),
        each starting its own server, and records their results for the report."""
        self.results["readamp"] = {}
        # The tests' venv (scripts/test-all makes it) has the Python driver they use.
        python = cache_root / "venv" / "bin" / "python"
        names = {s.name for s in self.servers}
        for name, script, extra in (
                ("helenus", "readamp.py", ["--helenus-bin", str(helenus_bin)]),
                ("cassandra", "readamp_cassandra.py", ["--heap", self.args.cassandra_heap])):
            if name not in names:
                continue
            out_json = self.out / f"readamp-{name}.json"
            cmd = [str(python), str(BENCH_DIR / script), "--out", str(out_json), *extra]
            if self.args.quick:
                cmd.append("--quick")
            record = {"command": shlex.join(cmd)}
            self.results["readamp"][name] = record
            if not python.exists():
                record["error"] = f"no {python}: scripts/test-all creates it"
                self.save()
                continue
            _log(f"read amplification, {name}: {record['command']}")
            started = time.monotonic()
            log = self.out / "logs" / f"readamp-{name}.log"
            with open(log, "ab") as out:
                proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, cwd=REPO_DIR)
                try:
                    rc = proc.wait(timeout=READAMP_TIMEOUT_S)
                except BaseException as e:
                    # Timed out or interrupted: SIGTERM lets the script stop the server it
                    # started (SIGKILL, subprocess.run's way, would leave it running).
                    proc.terminate()
                    try:
                        proc.wait(timeout=servers.STOP_TIMEOUT_S + 60)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                    if not isinstance(e, subprocess.TimeoutExpired):
                        raise
                    rc = None
            record["seconds"] = round(time.monotonic() - started, 1)
            if out_json.exists():
                record.update(readamp_summary(name, json.loads(out_json.read_text())))
            # readamp.py exits 1 when a phase misses its target: a result, not a failure.
            if rc is None or rc > 1 or not out_json.exists():
                why = "timed out" if rc is None else f"exit status {rc}"
                record["error"] = (record.get("error") or why) + f"; see logs/{log.name}"
            self.save()

    # -- bookkeeping -------------------------------------------------------------------------

    def save(self) -> None:
        tmp = self.out / "results.json.tmp"
        tmp.write_text(json.dumps(self.results, indent=1))
        tmp.replace(self.out / "results.json")

    def step(self, server, workload, name, started, status="ok", error=None) -> None:
        self.results["steps"].append({
            "server": server.name, "workload": workload, "step": name,
            "seconds": round(time.monotonic() - started, 2), "status": status, "error": error,
        })
        self.save()

    def latte_process(self, cmd: list[str], log: Path, timeout_s: float) -> tuple[bool, str]:
        """Runs one latte command; (succeeded, last lines of its output)."""
        with open(log, "ab") as out:
            out.write(f"\n$ {shlex.join(cmd)}\n".encode())
            out.flush()
            # latte writes a latte-<time>.log into its working directory: keep it in logs/.
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, cwd=self.out / "logs")
            try:
                rc = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                return False, f"killed after {timeout_s:.0f}s"
            except BaseException:
                proc.kill()
                proc.wait()
                raise
        if rc != 0:
            tail = [l for l in log.read_text(errors="replace").splitlines() if l.strip()][-5:]
            return False, f"exit {rc}: " + " | ".join(tail)
        return True, ""

    # -- the suite ---------------------------------------------------------------------------

    def run(self) -> None:
        """Starts every server, warms each up, then runs the workloads one at a time, each
        step on every server before the next step: the setups, the saturation runs
        (Cassandra's first: its throughput sets the fixed rates), then each fixed rate on
        every server in turn. So a drift of this shared machine's speed over the suite (the
        same build's p99 went from 0.9 to 2.5 ms within an hour) reaches every server's runs
        at a rate alike, instead of deciding which server looks better. During each measured
        run the other servers are paused (`alone`)."""
        up = self.up
        try:
            for server in self.servers:
                if self.start(server):
                    up.append(server)
            for server in up:
                if server.stores_data and self.profile.server_warmup_s > 0:
                    self.warm_up_server(server, self.results["servers"][server.name])
            for workload in self.workloads:
                self.run_workload(up, workload)
        finally:
            for server in up:
                self.stop(server)

    def start(self, server) -> bool:
        info = {"name": server.name, "label": server.label, "status": "ok"}
        self.results["servers"][server.name] = info
        started = time.monotonic()
        _log(f"{server.label}: starting")
        try:
            server.start()
        except Exception as e:  # noqa: BLE001 - reported, and the suite goes on
            info.update(status="failed", error=str(e))
            _log(f"{server.label}: failed to start: {e}")
            self.step(server, None, "start", started, "failed", str(e))
            server.stop()
            return False
        info.update(version=server.version(), command=shlex.join(server.command),
                    pid=server.pid, pids=server.pids, address=" ".join(server.addresses),
                    nodes=server.nodes)
        if isinstance(server, (servers.CassandraServer, servers.CassandraCluster)):
            info["heap"] = server.heap
        info["start_peak_rss_bytes"] = _kib(server.peak_rss_kib())
        self.step(server, None, "start", started)
        _log(f"{server.label} {info['version']} up on {info['address']} "
             f"(pid {' '.join(map(str, server.pids))})")
        return True

    def stop(self, server) -> None:
        info = self.results["servers"][server.name]
        started = time.monotonic()
        peaks = [r.get("server_peak_rss_bytes") or 0 for r in self.results["runs"]
                 if r["server"] == server.name]
        info["peak_rss_bytes"] = max([info["start_peak_rss_bytes"] or 0, *peaks])
        _log(f"{server.label}: stopping")
        server.stop()
        self.step(server, None, "stop", started)

    def warm_up_server(self, server, info: dict) -> None:
        """The mixed workload, unthrottled and unmeasured, on an empty table (its schema is
        created again by the workload itself), in rounds until its throughput stops rising
        (`workloads.warm_up_ended`); each round's throughput goes to `info["warmup"]`."""
        workload = by_name("mixed")
        params = dict(self.profile.params.get("mixed", {}))
        log = self.out / "logs" / f"{server.name}-server-warmup.log"
        adaptive = self.profile.server_warmup_max_s > 0
        round_s = self.profile.server_warmup_round_s if adaptive else self.profile.server_warmup_s
        warmup = {"round_s": round_s, "rounds": [], "ended": None}
        info["warmup"] = warmup
        started = time.monotonic()
        ok, error = self.latte_process(
            latte_mod.schema_cmd(self.latte, workload.path, server.addresses, params,
                                 self.client), log, SETUP_BASE_S)
        while ok and warmup["ended"] is None:
            output = self.out / "logs" / f"{server.name}-server-warmup.json"
            ok, error = self.latte_process(latte_mod.run_cmd(
                self.latte, workload.path, server.addresses, workload.function_args(), params,
                self.client, duration=f"{round_s}s", warmup="0", rate=None, output=output,
                drop_log=True), log, round_s + LATTE_SLACK_S)
            if ok:
                try:
                    throughput = latte_mod.parse(latte_mod.read_report(output)).throughput
                except (OSError, ValueError, KeyError) as e:
                    ok, error = False, f"unreadable latte report: {e}"
                    break
                warmup["rounds"].append(round(throughput, 1))
                warmup["ended"] = warm_up_ended(self.profile, warmup["rounds"])
        if not ok:
            warmup["ended"] = "failed"
        seconds = len(warmup["rounds"]) * round_s
        self.step(server, None, "server warm-up", started, "ok" if ok else "failed", error)
        _log(f"{server.label}: warmed up for {seconds} s ("
             + (f"failed: {error}" if not ok else
                "throughput stopped rising" if warmup["ended"] == "flat" else "the limit")
             + "), mixed ops/s per round: "
             + ", ".join(f"{t:,.0f}" for t in warmup["rounds"]))

    def run_workload(self, up: list, workload: Workload) -> None:
        """One workload: set up on every server, then each measured run on every server in
        turn (see `run`)."""
        params = dict(self.profile.params.get(workload.name, {}))
        ready = [server for server in up if self.set_up(server, workload, params)]
        saturations = {}
        for server in ready:
            saturations[server.name] = self.measured_run(server, workload, params, None, None)
        # Servers run in SERVER_ORDER, Cassandra first: the first saturation throughput of a
        # workload is Cassandra's unless its run failed or it was left out (the report says
        # whose it was).
        for server in ready:
            if saturations[server.name] and workload.name not in self.rate_base:
                self.rate_base[workload.name] = {"server": server.name,
                                                 "throughput": saturations[server.name]}
                self.results["rate_base"] = self.rate_base
        base = self.rate_base.get(workload.name)
        if base is None:
            _log(f"{workload.name}: no saturation throughput, no fixed rates")
            return
        fractions = list(self.profile.rate_fractions)
        half = report.nearest_half(fractions)
        if half is not None:
            # After the other fractions' runs: see `Profile.half_runs`.
            fractions += [half] * (self.profile.half_runs - 1)
        for i, fraction in enumerate(fractions):
            for server in ready:
                self.measured_run(server, workload, params, fraction,
                                  max(1.0, base["throughput"] * fraction),
                                  fractions[:i].count(fraction))

    def set_up(self, server, workload: Workload, params: dict) -> bool:
        """Schema, and for read workloads: load, flush, warm; whether it all succeeded."""
        self.unsettled.add(server.name)
        log = self.out / "logs" / f"{server.name}-{workload.name}.log"
        server.reset_peak_rss()
        script = workload.path

        started = time.monotonic()
        ok, error = self.latte_process(
            latte_mod.schema_cmd(self.latte, script, server.addresses, params, self.client),
            log, SETUP_BASE_S)
        self.step(server, workload.name, "schema", started, "ok" if ok else "failed", error)
        if not ok:
            _log(f"{server.label} {workload.name}: schema failed: {error}")
            return False
        if workload.load and server.stores_data:
            started = time.monotonic()
            cycles = _load_cycles(workload, params)
            ok, error = self.latte_process(
                latte_mod.load_cmd(self.latte, script, server.addresses, params, self.client),
                log, SETUP_BASE_S + cycles / SETUP_CYCLES_PER_S)
            self.step(server, workload.name, "load", started, "ok" if ok else "failed", error)
            if not ok:
                _log(f"{server.label} {workload.name}: load failed: {error}")
                return False
            started = time.monotonic()
            try:
                server.flush(workload.keyspace)
                self.step(server, workload.name, "flush", started)
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
                self.step(server, workload.name, "flush", started, "failed", str(e))
            started = time.monotonic()
            warm_cycles = int(params[workload.warm_cycles_param])
            cmd = latte_mod.run_cmd(
                self.latte, script, server.addresses, ["-f", "warm"], params, self.client,
                duration=str(warm_cycles), warmup="0", rate=None,
                output=self.out / "logs" / f"{server.name}-{workload.name}-warm.json",
                drop_log=True)
            ok, error = self.latte_process(cmd, log,
                                           SETUP_BASE_S + warm_cycles / SETUP_CYCLES_PER_S)
            self.step(server, workload.name, "warm", started, "ok" if ok else "failed", error)
            if not ok:
                _log(f"{server.label} {workload.name}: warm pass failed: {error}")
                return False

        return True

    def settle(self, workload: Workload) -> None:
        """Waits until no server has a compaction running or due, so that a run does not pay
        for the writes of the one before it, its own or another server's (the others are up
        too): a saturation run leaves more to compact the more writes a server took, and every
        server gets the same quiet start."""
        for server in self.up:
            # Only a server that took requests since it last settled can have compactions
            # due (Cassandra's check, a nodetool JVM, takes seconds).
            if not server.stores_data or server.name not in self.unsettled:
                continue
            self.unsettled.discard(server.name)
            started = time.monotonic()
            try:
                if not wait_until_settled(server):
                    _log(f"{server.label} {workload.name}: still compacting after "
                         f"{SETTLE_MAX_S} s; measuring anyway")
                    self.step(server, workload.name, "settle", started, "timed out",
                              f"still compacting after {SETTLE_MAX_S} s")
                    continue
            except (subprocess.SubprocessError, OSError, ValueError, KeyError,
                    IndexError) as e:
                self.step(server, workload.name, "settle", started, "failed", str(e))
                continue
            self.step(server, workload.name, "settle", started)

    def measured_run(self, server, workload, params, fraction, rate,
                     repeat: int = 0) -> float | None:
        """One measured latte run (`repeat`: how many ran at this rate before it); returns
        its throughput, None if it failed."""
        log = self.out / "logs" / f"{server.name}-{workload.name}.log"
        self.settle(workload)
        try:
            with self.alone(server):
                return self._measured_run(server, workload, params, log, fraction, rate,
                                          repeat)
        finally:
            self.unsettled.add(server.name)

    @contextlib.contextmanager
    def alone(self, server):
        """The other servers paused (SIGSTOP) while `server` is measured, so it has the
        machine to itself as when the servers ran one after another; resumed after."""
        others = [s for s in self.up if s is not server]
        try:
            for other in others:
                other.pause()
            yield
        finally:
            for other in others:
                other.resume()

    def _measured_run(self, server, workload, params, log, fraction, rate, repeat):
        tag = "saturation" if rate is None else f"rate{round(fraction * 100):02d}"
        if repeat:
            tag += f"-{repeat + 1}"
        rel = Path("latte") / f"{server.name}-{workload.name}-{tag}.json"
        warmup_s = self.profile.warmup_s
        warmup = f"{warmup_s}s" if rate is None else str(int(rate * warmup_s))
        cmd = latte_mod.run_cmd(self.latte, workload.path, server.addresses,
                                workload.function_args(), params, self.client,
                                duration=f"{self.profile.duration_s}s", warmup=warmup,
                                rate=rate, output=self.out / rel)
        record = {
            "server": server.name, "workload": workload.name,
            "kind": "saturation" if rate is None else "rate",
            "fraction": fraction, "target_rate": rate, "latte_json": str(rel),
            "command": shlex.join(cmd), "load_average": os.getloadavg()[0],
        }
        _log(f"{server.label} {workload.name} {tag}"
             + ("" if rate is None else f" ({rate:.0f} ops/s)"))
        started = time.monotonic()
        ok, error = self.latte_process(
            cmd, log, self.profile.duration_s + warmup_s + LATTE_SLACK_S)
        throughput = None
        if ok:
            try:
                result = latte_mod.parse(latte_mod.read_report(self.out / rel))
                record["latte_json"] = str(rel.with_name(
                    latte_mod.compress(self.out / rel).name))
            except (OSError, ValueError, KeyError) as e:
                ok, error = False, f"unreadable latte report: {e}"
        if ok:
            throughput = result.throughput
            cpu, busy = server.sampler.between(result.start_epoch_s, result.end_epoch_s)
            record.update(status="ok", server_cpu_s=cpu, machine_busy_cpu_s=busy)
            _log(f"  {result.throughput:,.0f} ops/s, p50 {result.p50_ms:.2f} ms, "
                 f"p99 {result.p99_ms:.2f} ms, errors {result.error_count}, server CPU "
                 f"{(cpu or 0) / max(result.cycle_count, 1) * 1e6:.1f} us/op")
        else:
            record.update(status="failed", error=error)
            _log(f"  failed: {error}")
        record["server_peak_rss_bytes"] = _kib(server.peak_rss_kib())
        record["server_rss_bytes"] = _kib(server.rss_kib())
        self.results["runs"].append(record)
        self.step(server, workload.name, tag, started, record["status"], error)
        return throughput


def _kib(value):
    return None if value is None else value * 1024


def _load_cycles(workload: Workload, params: dict) -> int:
    if workload.name == "timeseries":
        return int(params["sensors"]) * int(params["points"])
    return int(params.get("row_count", 0))


def main(argv) -> int:
    args = parse_args(argv)
    if args.report_only:
        path = report.generate(Path(args.report_only))
        print(path)
        return 0
    # Ctrl-C, kill and a closed terminal all stop the servers: SIGINT too is set explicitly,
    # as a shell that starts the harness in the background passes it on ignored.
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _interrupt)
    profile = _profile(args)
    wanted = [s.strip() for s in args.servers.split(",") if s.strip()]
    cluster = args.nodes > 1
    for name in wanted:
        if name not in SERVER_ORDER:
            raise SystemExit(f"bench: unknown server '{name}' (have {', '.join(SERVER_ORDER)})")
    workloads = [by_name(w.strip()) for w in args.workloads.split(",") if w.strip()]
    out = Path(args.out) if args.out else BENCH_DIR / "results" / _timestamp()
    out = out.resolve()
    (out / "latte").mkdir(parents=True, exist_ok=True)
    (out / "logs").mkdir(exist_ok=True)
    cache_root = Path(os.environ.get("HELENUS_CACHE") or Path.home() / ".cache" / "helenus")
    suite_started = time.monotonic()

    latte = latte_mod.locate(cache_root, args.latte_bin)
    helenus_bin = Path(args.helenus_bin) if args.helenus_bin else None
    ceiling_bin = Path(args.ceiling_bin) if args.ceiling_bin else None
    needs = {"helenus": helenus_bin is None and "helenus" in wanted,
             "ceiling": ceiling_bin is None and "ceiling" in wanted}
    build_s = 0.0
    if any(needs.values()):
        started = time.monotonic()
        built_helenus, built_ceiling = build_binaries(cache_root)
        build_s = time.monotonic() - started
        helenus_bin = helenus_bin or built_helenus
        ceiling_bin = ceiling_bin or built_ceiling
    for name, binary in (("helenus", helenus_bin), ("ceiling", ceiling_bin)):
        if name in wanted and not os.access(binary, os.X_OK):
            raise SystemExit(f"bench: {name} binary {binary} is not executable")

    work_parent = Path(args.workdir or tempfile.gettempdir())
    work_dir = Path(tempfile.mkdtemp(prefix="helenus-bench-", dir=work_parent))
    server_list = []
    for name in SERVER_ORDER:
        if name not in wanted:
            continue
        if name == "cassandra" and cluster:
            server_list.append(servers.CassandraCluster(
                REPO_DIR / "scripts" / "cassandra.sh", work_dir / "cassandra", args.nodes,
                args.cassandra_heap, out / "logs", cache_root))
        elif name == "helenus" and cluster:
            server_list.append(servers.HelenusCluster(helenus_bin, work_dir / "helenus",
                                                      args.nodes, out / "logs"))
        elif name == "cassandra":
            server_list.append(servers.CassandraServer(
                REPO_DIR / "scripts" / "cassandra.sh", work_dir / "cassandra",
                args.cassandra_heap, out / "logs", cache_root))
        elif name == "helenus":
            server_list.append(servers.HelenusServer(helenus_bin, work_dir / "helenus",
                                                     out / "logs"))
        else:
            server_list.append(servers.CeilingServer(ceiling_bin, out / "logs"))

    suite = Suite(args, profile, out, work_dir, latte, server_list, workloads)
    suite.results = {
        "format": 1,
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": shlex.join(["bench/run", *argv]),
        # Servers as local clusters of this many nodes (1: one process each), keyspaces with
        # this replication factor.
        "nodes": args.nodes,
        "replication_factor": replication_factor(args.nodes),
        "profile": asdict(profile),
        "client": asdict(suite.client),
        "workloads": {w.name: {"title": w.title, "script": f"bench/workloads/{w.script}",
                               "functions": w.function_args(), "description": w.description,
                               "params": profile.params.get(w.name, {})} for w in workloads},
        "machine": machine.describe(work_dir),
        "versions": {
            "git_commit": machine.git_commit(REPO_DIR),
            "latte": latte_mod.version(latte),
            "java": machine.java_version() if "cassandra" in wanted else "",
            "rustc": machine.rustc_version(),
        },
        "binaries": {"latte": str(latte), "helenus": str(helenus_bin or ""),
                     "ceiling": str(ceiling_bin or ""),
                     # Built here from this tree, or given with --helenus-bin (commit unknown).
                     "helenus_built": needs["helenus"]},
        "build_seconds": round(build_s, 1),
        "servers": {},
        "runs": [],
        "steps": [],
        "rate_base": {},
        # Each step of a workload on every server in turn (`Suite.run`).
        "order": "interleaved",
        "status": "running",
    }
    suite.save()
    _log(f"results in {out}; servers' data in {work_dir}")
    status = 0
    try:
        suite.run()
        if args.readamp:
            suite.readamp(helenus_bin, cache_root)
        suite.results["status"] = "complete"
    except KeyboardInterrupt:
        suite.results["status"] = "interrupted"
        status = 130
        _log("interrupted: stopping the servers")
    finally:
        for server in server_list:
            server.stop()
        cassandra_log = work_dir / "cassandra" / "logs" / "system.log"
        if cassandra_log.exists():
            shutil.copy(cassandra_log, out / "logs" / "cassandra-system.log")
        for k in range(1, args.nodes + 1) if cluster else ():
            for src, dst in ((work_dir / "cassandra" / f"node{k}" / "logs" / "system.log",
                              f"cassandra-node{k}-system.log"),
                             (work_dir / "helenus" / f"node{k}" / "helenus.log",
                              f"helenus-node{k}.log")):
                if src.exists():
                    shutil.copy(src, out / "logs" / dst)
        if not args.keep_workdir:
            shutil.rmtree(work_dir, ignore_errors=True)
        suite.results["finished"] = datetime.datetime.now(
            datetime.timezone.utc).isoformat(timespec="seconds")
        suite.results["total_seconds"] = round(time.monotonic() - suite_started, 1)
        suite.save()
    path = report.generate(out)
    _log(f"report: {path}")
    print()
    print(report.ratio_table_markdown(report.load(out)))
    return status
