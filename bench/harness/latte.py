"""latte: finding (or installing) it, its command lines, and reading its JSON reports.

latte 0.29's report (`latte run ... -o FILE`) is `{"conf": RunCommand, "percentiles": [0, 1,
2, 5, ..., 99, 99.9, 99.99, 100], "result": BenchmarkStats}`. What we read from `result`:
`cycle_throughput.value` (cycles/s), `cycle_count`, `error_count`, `errors`, `elapsed_time_s`,
`start_time`/`end_time` (RFC 3339: the measured phase only, after the warm-up), `cpu_time_s`
(the client's own CPU in that phase), and `cycle_latency.percentiles`, a list of
`{"value": ms, ...}` in the order of the top-level `percentiles`. Cycle latency is measured from
the cycle's scheduled start, so at a fixed rate it includes queueing (no coordinated omission).
"""

import datetime
import gzip
import json
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

LATTE_CRATE = "latte-cli"


def locate(cache_root: Path, explicit: str | None, install: bool = True) -> Path | None:
    """--latte-bin, else $HELENUS_CACHE/latte/bin/latte, else `latte` on PATH, else (if
    `install`) `cargo install --locked latte-cli --root $HELENUS_CACHE/latte`."""
    if explicit:
        path = Path(explicit)
        if not os.access(path, os.X_OK):
            raise SystemExit(f"bench: --latte-bin {path} is not executable")
        return path
    cached = cache_root / "latte" / "bin" / "latte"
    if os.access(cached, os.X_OK):
        return cached
    on_path = shutil.which("latte")
    if on_path:
        return Path(on_path)
    if not install:
        return None
    cmd = ["cargo", "install", "--locked", LATTE_CRATE, "--root", str(cache_root / "latte")]
    print(f"bench: installing latte: {shlex.join(cmd)}", flush=True)
    subprocess.run(cmd, check=True)
    return cached


def version(latte: Path) -> str:
    out = subprocess.run([str(latte), "--version"], capture_output=True, text=True, timeout=30)
    return out.stdout.strip() or out.stderr.strip()


@dataclass(frozen=True)
class ClientSettings:
    """The same for every server and run."""

    threads: int = 1
    concurrency: int = 128
    connections: int = 1
    consistency: str = "ONE"
    request_timeout: str = "5s"

    def connection_args(self) -> list[str]:
        """Accepted by every latte command (schema, load, run)."""
        return [
            "--connections", str(self.connections),
            "--consistency", self.consistency,
            "--request-timeout", self.request_timeout,
        ]


def params_args(params: dict) -> list[str]:
    args = []
    for key, value in params.items():
        args += ["-P", f"{key}={value}"]
    return args


def addresses_args(address) -> list[str]:
    """latte's trailing contact points: one `HOST:PORT`, or a list of them (a cluster's
    nodes)."""
    return [address] if isinstance(address, str) else list(address)


def schema_cmd(latte, script, address, params, client: ClientSettings) -> list[str]:
    return [str(latte), "schema", str(script), *params_args(params), *client.connection_args(),
            *addresses_args(address)]


def load_cmd(latte, script, address, params, client: ClientSettings) -> list[str]:
    # `load` runs `erase` (TRUNCATE) first, then `load_cycle_count` cycles of `load`.
    # Not measured: latte's default load concurrency (512 in flight per thread).
    return [str(latte), "load", str(script), "-q", *params_args(params),
            "--threads", str(client.threads), *client.connection_args(),
            *addresses_args(address)]


def run_cmd(latte, script, address, functions: list[str], params, client: ClientSettings, *,
            duration: str, warmup: str, rate: float | None, output: Path,
            drop_log: bool = False) -> list[str]:
    cmd = [str(latte), "run", str(script), "-q", *functions, *params_args(params),
           "--threads", str(client.threads), "--concurrency", str(client.concurrency),
           *client.connection_args(),
           "--duration", duration, "--warmup", warmup, "--output", str(output)]
    if rate is not None:
        cmd += ["--rate", f"{rate:.0f}"]
    if drop_log:
        cmd.append("--drop-sampling-log")
    cmd += addresses_args(address)
    return cmd


def _time(value: str) -> float:
    """RFC 3339 with up to nanoseconds (Python 3.11 truncates past microseconds) -> epoch s."""
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


@dataclass
class LatteResult:
    throughput: float  # cycles/s in the measured phase
    cycle_count: int
    error_count: int
    errors: list
    elapsed_s: float
    start_epoch_s: float
    end_epoch_s: float
    client_cpu_s: float
    p50_ms: float
    p99_ms: float
    p999_ms: float
    mean_ms: float
    rate: float | None  # the --rate latte ran with, None when unthrottled
    server_version: str | None  # the release_version the server reported


def read_report(path: Path) -> dict:
    """A latte JSON report, as latte wrote it (`FILE.json`) or as the harness keeps it
    (`FILE.json.gz`, see `compress`)."""
    path = Path(path)
    if path.suffix == ".gz":
        with gzip.open(path, "rt") as f:
            return json.load(f)
    return json.loads(path.read_text())


def compress(path: Path) -> Path:
    """Replaces latte's report `FILE.json` with `FILE.json.gz`, returning the new path. Each
    report is ~0.4 MB, mostly the per-second samples' serialized histograms; gzip keeps every
    byte (`latte show` reads the file once `gunzip -k` restored it) in about 40% of that."""
    path = Path(path)
    packed = path.with_name(path.name + ".gz")
    with open(path, "rb") as src, gzip.open(packed, "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    path.unlink()
    return packed


def parse(report: dict) -> LatteResult:
    result = report["result"]
    pct = [float(p) for p in report["percentiles"]]
    values = result["cycle_latency"]["percentiles"]

    def at(p: float) -> float:
        return float(values[pct.index(p)]["value"])

    conf = report.get("conf", {})
    return LatteResult(
        throughput=float(result["cycle_throughput"]["value"]),
        cycle_count=int(result["cycle_count"]),
        error_count=int(result["error_count"]),
        errors=list(result.get("errors") or []),
        elapsed_s=float(result["elapsed_time_s"]),
        start_epoch_s=_time(result["start_time"]),
        end_epoch_s=_time(result["end_time"]),
        client_cpu_s=float(result.get("cpu_time_s") or 0.0),
        p50_ms=at(50.0),
        p99_ms=at(99.0),
        p999_ms=at(99.9),
        mean_ms=float(result["cycle_latency"]["mean"]["value"]),
        rate=conf.get("rate"),
        server_version=conf.get("cass_version"),
    )
