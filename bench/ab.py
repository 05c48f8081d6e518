#!/usr/bin/env python3
"""One server through the suite's steps, for A/B comparisons between full runs: starts a fresh
Helenus node (or the ceiling) as the suite does, gives it the suite's 30 s of unmeasured mixed
load, creates (and for read workloads loads, flushes and warms) one workload, then runs it at
each rate given, and prints each run's throughput, p50/p99/p99.9 and server CPU per operation,
and for a workload of several functions each function's p50 and p99.

    bench/ab.py BIN --workload write --rates max,11737,11737 [--repeat N]
    bench/ab.py BIN --workload mixed --before write,read --rates 26737
    bench/ab.py BIN --workload write --rates 11737 --env GLIBC_TUNABLES=glibc.malloc.hugetlb=1
    bench/ab.py BIN --workload write --rates 11737 --hook 'perf sched record -a -- sleep 3'

BIN is a `helenus` binary, or `helenus-ceiling` (named so) for the ceiling. `max` is a
saturation run. `--before` first runs other workloads through their saturation and 25/50/75%
runs (at the rates of report 20261125T071953Z), as the suite does before the one measured. `--hook`
runs a shell command 4 s into each fixed-rate run, `{pid}` replaced with the server's PID (a
profiler, a fault counter). `--env` sets a variable for the server; `--param` overrides a latte
-P parameter; `--script` runs another latte script in place of the workload's (with the
workload's functions).

Alternate the binaries (or settings) being compared, several times each: this machine's noise
is larger than most single changes, and it drifts over hours. CPU per operation is the server
process's (every thread) during latte's measured phase, as in the suite.
"""

import argparse
import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from harness import latte as latte_mod  # noqa: E402
from harness import servers, workloads  # noqa: E402
from harness.runner import wait_until_settled  # noqa: E402

SERVER_WARMUP_S = workloads.DEFAULT.server_warmup_s
# Rates of the suite's fixed-rate runs in report 20261125T071953Z (25%, 50%, 75% of
# Cassandra's saturation), for `--before`.
BEFORE_RATES = {
    "write": (6691, 13382, 20073),
    "read": (14483, 28966, 43450),
    "mixed": (13500, 26999, 40499),
    "timeseries": (6512, 13025, 19537),
}


def parse_args(argv):
    p = argparse.ArgumentParser(prog="bench/ab.py", description=__doc__.split("\n\n")[0])
    p.add_argument("binary", help="helenus or helenus-ceiling binary")
    p.add_argument("--workload", default="write",
                   help=", ".join(w.name for w in workloads.WORKLOADS))
    p.add_argument("--rates", default="max", help="comma-separated ops/s, or max")
    p.add_argument("--repeat", type=int, default=1, help="times to run the list of rates")
    p.add_argument("--duration", type=int, default=workloads.DEFAULT.duration_s)
    p.add_argument("--warmup", type=int, default=workloads.DEFAULT.warmup_s)
    p.add_argument("--before", default="", help="workloads run first, as the suite does")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--script", help="latte script run in place of the workload's")
    p.add_argument("--hook", help="shell command run 4 s into each fixed-rate run ({pid})")
    p.add_argument("--workdir", help="parent of the server's data directory (default /tmp)")
    p.add_argument("--samples", action="store_true",
                   help="also print each of latte's one-second samples of a fixed-rate run")
    return p.parse_args(argv)


class Bench:
    def __init__(self, args, server, work: Path):
        cache = Path(os.environ.get("HELENUS_CACHE") or Path.home() / ".cache" / "helenus")
        self.latte = latte_mod.locate(cache, os.environ.get("LATTE_BIN"))
        self.args = args
        self.server = server
        self.work = work
        self.client = latte_mod.ClientSettings()

    def call(self, cmd):
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       stdin=subprocess.DEVNULL, cwd=self.work, timeout=1800)

    def setup(self, workload, params):
        address = self.server.address
        self.call(latte_mod.schema_cmd(self.latte, workload.path, address, params,
                                        self.client))
        if workload.load and self.server.stores_data:
            self.call(latte_mod.load_cmd(self.latte, workload.path, address, params,
                                          self.client))
            self.server.flush(workload.keyspace)
            cycles = str(params[workload.warm_cycles_param])
            self.call(latte_mod.run_cmd(
                self.latte, workload.path, address, ["-f", "warm"], params, self.client,
                duration=cycles, warmup="0", rate=None, output=self.work / "warm.json",
                drop_log=True))

    def run(self, workload, params, rate, label) -> None:
        if self.server.stores_data:
            wait_until_settled(self.server)
        out = self.work / f"{label}.json"
        warmup = f"{self.args.warmup}s" if rate is None else str(int(rate * self.args.warmup))
        cmd = latte_mod.run_cmd(self.latte, workload.path, self.server.address,
                                workload.function_args(), params, self.client,
                                duration=f"{self.args.duration}s", warmup=warmup, rate=rate,
                                output=out)
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL, cwd=self.work)
        hook = None
        if self.args.hook and rate is not None:
            time.sleep(4)
            hook = subprocess.Popen(self.args.hook.replace("{pid}", str(self.server.pid)),
                                    shell=True)
        proc.wait(timeout=self.args.duration + self.args.warmup + 120)
        if hook:
            hook.wait()
        if proc.returncode != 0:
            print(f"{label}: latte exited with {proc.returncode}", flush=True)
            return
        report = latte_mod.read_report(out)
        r = latte_mod.parse(report)
        # As the suite: the server's CPU time in latte's measured phase.
        cpu, _ = self.server.sampler.between(r.start_epoch_s, r.end_epoch_s)
        print(f"{label} rate={'max' if rate is None else f'{rate:.0f}'} "
              f"ops/s={r.throughput:,.0f} p50={r.p50_ms:.3f} p99={r.p99_ms:.3f} "
              f"p99.9={r.p999_ms:.3f} errors={r.error_count} "
              f"cpu/op={(cpu or 0) / max(r.cycle_count, 1) * 1e6:.1f}us", flush=True)
        if self.args.samples and rate is not None:
            print_samples(report)
        by_function = report["result"].get("cycle_latency_by_fn") or {}
        if len(by_function) > 1:
            pct = [float(p) for p in report["percentiles"]]
            for name, stats in sorted(by_function.items()):
                value = {p: stats["percentiles"][pct.index(p)]["value"] for p in (50.0, 99.0)}
                print(f"    {name}: p50={value[50.0]:.3f} p99={value[99.0]:.3f}", flush=True)


def print_samples(report):
    """Each one-second sample's throughput and p99 (ms), on one line each: a p99 lifted by a
    few seconds (a flush, a sync) shows apart from one lifted throughout."""
    pct = [float(p) for p in report["percentiles"]]
    i99 = pct.index(99.0)
    for s in report["result"].get("log") or []:
        p99 = s["cycle_latency"]["percentiles"][i99]["value"]
        print(f"    t={s['time_s']:5.1f}s ops/s={s['cycle_throughput']:,.0f} p99={p99:.3f}",
              flush=True)


def main(argv) -> int:
    args = parse_args(argv)
    binary = Path(args.binary).resolve()
    env_before = dict(os.environ)
    for item in args.env:
        name, _, value = item.partition("=")
        os.environ[name] = value
    work = Path(tempfile.mkdtemp(prefix="helenus-ab-", dir=args.workdir))
    server = (servers.CeilingServer(binary, work) if "ceiling" in binary.name
              else servers.HelenusServer(binary, work / "server", work))
    try:
        server.start()
        # Only the server gets --env.
        os.environ.clear()
        os.environ.update(env_before)
        bench = Bench(args, server, work)
        if server.stores_data and SERVER_WARMUP_S > 0:
            mixed = workloads.by_name("mixed")
            params = dict(workloads.DEFAULT.params["mixed"])
            bench.call(latte_mod.schema_cmd(bench.latte, mixed.path, server.address, params,
                                             bench.client))
            bench.call(latte_mod.run_cmd(
                bench.latte, mixed.path, server.address, mixed.function_args(), params,
                bench.client, duration=f"{SERVER_WARMUP_S}s", warmup="0", rate=None,
                output=work / "server-warmup.json", drop_log=True))
        for name in filter(None, args.before.split(",")):
            before = workloads.by_name(name)
            params = dict(workloads.DEFAULT.params[name])
            bench.setup(before, params)
            for rate in (None, *BEFORE_RATES[name]):
                bench.run(before, params, rate, f"before-{name}")
        workload = workloads.by_name(args.workload)
        if args.script:
            workload = dataclasses.replace(workload, script=str(Path(args.script).resolve()))
        params = dict(workloads.DEFAULT.params[workload.name])
        for item in args.param:
            name, _, value = item.partition("=")
            params[name] = value
        bench.setup(workload, params)
        for _ in range(args.repeat):
            for rate in args.rates.split(","):
                bench.run(workload, params, None if rate == "max" else float(rate),
                          workload.name)
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
