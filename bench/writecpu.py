#!/usr/bin/env python3
"""Server CPU per write, the work a write leaves behind included: starts a fresh node, runs
`--cycles` standard1 upserts (bench/workloads/standard1.rn, the suite's write workload) at
maximum rate with the suite's client settings, then flushes and waits until no compaction is
running or due, and prints the node's CPU time (/proc/PID/stat utime + stime) per write, for
the run alone and with the flushes and compactions it caused.

    bench/writecpu.py --helenus-bin BIN [--cycles 1500000]

The node runs as the suite runs it (`harness.servers.HelenusServer`: same configuration, free
loopback ports).

`bench/cpu-per-op` measures a loaded, warm node at a fixed rate and misses what a write costs
later (flushes, compactions); this measures it. Alternate two binaries several times and
compare the medians: the machine's noise is larger than most single changes.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from harness.runner import SETTLE_MAX_S, wait_until_settled  # noqa: E402
from harness.servers import HelenusServer, process_cpu_s  # noqa: E402

KEYSPACE = "bench_standard1"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--helenus-bin", required=True, type=Path)
    p.add_argument("--cycles", type=int, default=1_500_000)
    p.add_argument("--row-count", type=int, default=200_000)
    a = p.parse_args()
    cache = Path(os.environ.get("HELENUS_CACHE", Path.home() / ".cache/helenus"))
    latte = os.environ.get("LATTE", str(cache / "latte/bin/latte"))
    workload = str(BENCH_DIR / "workloads/standard1.rn")
    work = Path(tempfile.mkdtemp(prefix="helenus-writecpu-"))
    node = HelenusServer(a.helenus_bin, work / "node", work)
    try:
        node.start()
        client = ["--connections", "1", "--consistency", "ONE", "--request-timeout", "5s",
                  "-P", f"row_count={a.row_count}"]
        subprocess.run([latte, "schema", workload, *client, node.address], check=True,
                       capture_output=True)
        before = process_cpu_s(node.pid)
        started = time.monotonic()
        subprocess.run([latte, "run", workload, "-q", "-f", "write:1", *client, "--threads", "1",
                        "--concurrency", "128", "--duration", str(a.cycles), "--warmup", "0",
                        "--output", str(work / "latte.json"), node.address],
                       check=True, capture_output=True)
        elapsed = time.monotonic() - started
        after_run = process_cpu_s(node.pid)
        node.flush(KEYSPACE)
        if not wait_until_settled(node):
            sys.exit(f"compactions still running after {SETTLE_MAX_S} s")
        after_all = process_cpu_s(node.pid)
        n = a.cycles
        print(f"{n / elapsed:,.0f} writes/s; node CPU per write: run "
              f"{(after_run - before) / n * 1e6:.2f} us, with its flushes and compactions "
              f"{(after_all - before) / n * 1e6:.2f} us")
        return 0
    finally:
        node.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
