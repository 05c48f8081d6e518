#!/usr/bin/env python3
"""Server CPU per write, the work a write leaves behind included: starts a fresh node, runs
`--cycles` standard1 upserts (bench/workloads/standard1.rn, the suite's write workload) at
maximum rate with the suite's client settings, then flushes and waits until no compaction is
running or due, and prints the node's CPU time (/proc/PID/stat utime + stime) per write, for
the run alone and with the flushes and compactions it caused.

    bench/writecpu.py --helenus-bin BIN [--cycles 1500000] [--env K=V ...]

`bench/cpu-per-op` measures a loaded, warm node at a fixed rate and misses what a write costs
later (flushes, compactions); this measures it. Alternate two binaries several times and
compare the medians: the machine's noise is larger than most single changes.
"""

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from harness.servers import helenus_compacting  # noqa: E402

ADDRESS = "127.0.0.9"
PORT = 9142
SETTLE_MAX_S = 300


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--helenus-bin", required=True)
    p.add_argument("--cycles", type=int, default=1_500_000)
    p.add_argument("--row-count", type=int, default=200_000)
    p.add_argument("--env", action="append", default=[], help="K=V for the node's environment")
    a = p.parse_args()
    cache = Path(os.environ.get("HELENUS_CACHE", Path.home() / ".cache/helenus"))
    latte = os.environ.get("LATTE", str(cache / "latte/bin/latte"))
    workload = str(BENCH_DIR / "workloads/standard1.rn")
    env = dict(os.environ)
    for kv in a.env:
        k, v = kv.split("=", 1)
        env[k] = v
    work = Path(tempfile.mkdtemp(prefix="helenus-writecpu-"))
    (work / "helenus.yaml").write_text(
        f"cluster_name: writecpu\nlisten_address: {ADDRESS}\nrpc_address: {ADDRESS}\n"
        f"native_transport_port: {PORT}\nadmin_port: {PORT + 1}\n"
        f"data_file_directories:\n  - {work}/data\ncommitlog_directory: {work}/commitlog\n")
    node = subprocess.Popen([a.helenus_bin, "server", "--config", str(work / "helenus.yaml")],
                            env=env, stdout=open(work / "node.log", "w"),
                            stderr=subprocess.STDOUT)
    try:
        wait_for_port(node)
        client = ["--connections", "1", "--consistency", "ONE", "--request-timeout", "5s",
                  "-P", f"row_count={a.row_count}"]
        subprocess.run([latte, "schema", workload, *client, f"{ADDRESS}:{PORT}"], check=True,
                       capture_output=True)
        before = cpu_seconds(node.pid)
        started = time.monotonic()
        subprocess.run([latte, "run", workload, "-q", "-f", "write:1", *client, "--threads", "1",
                        "--concurrency", "128", "--duration", str(a.cycles), "--warmup", "0",
                        "--output", str(work / "latte.json"), f"{ADDRESS}:{PORT}"],
                       check=True, capture_output=True)
        elapsed = time.monotonic() - started
        after_run = cpu_seconds(node.pid)
        admin(a.helenus_bin, "flush", "bench_standard1")
        settle(a.helenus_bin)
        after_all = cpu_seconds(node.pid)
        n = a.cycles
        print(f"{n / elapsed:,.0f} writes/s; node CPU per write: run {(after_run - before) / n * 1e6:.2f} us, "
              f"with its flushes and compactions {(after_all - before) / n * 1e6:.2f} us")
        return 0
    finally:
        node.terminate()
        node.wait()
        shutil.rmtree(work, ignore_errors=True)


def wait_for_port(node: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while True:
        if node.poll() is not None:
            sys.exit(f"the node exited with status {node.returncode}")
        try:
            socket.create_connection((ADDRESS, PORT), 0.2).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                sys.exit("the node did not open its native port within 60 s")
            time.sleep(0.1)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def admin(binary: str, *args: str) -> str:
    return subprocess.run([binary, "admin", "--host", ADDRESS, "--port", str(PORT + 1), *args],
                          check=True, capture_output=True, text=True).stdout


def settle(binary: str) -> None:
    """Waits until the node reports no compaction running and none due."""
    deadline = time.monotonic() + SETTLE_MAX_S
    while time.monotonic() < deadline:
        if not helenus_compacting(admin(binary, "metrics")):
            return
        time.sleep(0.5)
    sys.exit(f"compactions still running after {SETTLE_MAX_S} s")


if __name__ == "__main__":
    sys.exit(main())
