"""What the suite runs: the workloads (each a latte script in bench/workloads and the functions
run from it), and the two profiles, default and quick, that size them.

Every workload is run against every server with the same client settings: first a saturation
run (no rate limit), then fixed-rate runs at fractions of Cassandra's saturation throughput for
that workload (see `runner`)."""

from dataclasses import dataclass, field, replace
from pathlib import Path

WORKLOAD_DIR = Path(__file__).resolve().parent.parent / "workloads"


@dataclass(frozen=True)
class Workload:
    name: str
    title: str
    script: str
    # latte `-f NAME:WEIGHT` for the measured runs.
    functions: tuple
    # Whether `latte load` fills the table first (then the server flushes it and a warm pass
    # reads it all once, so the data set is in the server's cache when the runs start).
    load: bool
    # The -P parameter whose value is the number of `warm` cycles that read every row once.
    warm_cycles_param: str | None
    keyspace: str
    description: str

    @property
    def path(self) -> Path:
        return WORKLOAD_DIR / self.script

    def function_args(self) -> list[str]:
        args = []
        for name, weight in self.functions:
            args += ["-f", f"{name}:{weight:g}"]
        return args

    def all_functions(self) -> list[str]:
        """Every function of the script the harness calls, for the self-test."""
        names = ["schema", "prepare"] + [n for n, _ in self.functions]
        if self.load:
            names += ["load", "erase"]
        if self.warm_cycles_param:
            names.append("warm")
        return names


WORKLOADS = (
    Workload(
        name="write",
        title="write: standard1 upserts",
        script="standard1.rn",
        functions=(("write", 1.0),),
        load=False,
        warm_cycles_param=None,
        keyspace="bench_standard1",
        description="Upserts of whole cassandra-stress standard1 rows (10-byte blob key, five "
        "60-byte blob columns C0..C4) over `row_count` keys; write-only.",
    ),
    Workload(
        name="read",
        title="read: standard1 point reads",
        script="standard1.rn",
        functions=(("read", 1.0),),
        load=True,
        warm_cycles_param="row_count",
        keyspace="bench_standard1",
        description="Uniform random point reads (`SELECT * ... WHERE key = ?`) of `row_count` "
        "standard1 rows loaded, flushed and read once before the runs (data set in cache).",
    ),
    Workload(
        name="mixed",
        title="mixed: the ScyllaDB report's workload",
        script="mixed.rn",
        functions=(
            ("standard1_insert", 0.04),
            ("standard1_insert_cache", 0.16),
            ("standard1_select", 0.16),
            ("standard1_select_cache", 0.64),
        ),
        load=True,
        warm_cycles_param="row_count",
        keyspace="bench_mixed",
        description="The Super Disk report's latte workload: 4% insert, 16% insert into the hot "
        "set, 16% select, 64% select from the hot set (five 200-byte columns); `row_count` rows "
        "loaded, the hot set their first `cache_rows` (the report: 100M and 10M).",
    ),
    Workload(
        name="timeseries",
        title="timeseries: clustering slices",
        script="timeseries.rn",
        functions=(("slice", 0.8), ("append", 0.2)),
        load=True,
        warm_cycles_param="sensors",
        keyspace="bench_timeseries",
        description="One partition per sensor, rows clustered by time (newest first): 80% "
        "slices of `slice_rows` consecutive readings (`ts >= ? AND ts < ?`), 20% appends; "
        "`sensors` x `points` readings loaded first.",
    ),
)

# latte scripts in bench/workloads that no suite workload runs, and why they are kept.
EXTRA_SCRIPTS = {
    "insert.rn": "single-row INSERTs into a two-column table: the ceiling's smoke test, by hand",
}


def by_name(name: str) -> Workload:
    for w in WORKLOADS:
        if w.name == name:
            return w
    raise KeyError(f"no workload '{name}' (have: {', '.join(w.name for w in WORKLOADS)})")


@dataclass(frozen=True)
class Profile:
    name: str
    # Length of each measured run, and of the unmeasured warm-up before it (at a fixed rate
    # the warm-up is the number of cycles the rate gives in that time, run unthrottled).
    duration_s: int
    warmup_s: int
    # Unmeasured load on a freshly started server before its first workload (the `mixed`
    # workload, unthrottled), so Cassandra's JIT has compiled its hot paths: a cold JVM runs
    # several times slower at first. It runs in rounds of `server_warmup_round_s` for at least
    # `server_warmup_s` and then until its throughput stops rising (`warm_up_ended`), for at
    # most `server_warmup_max_s`. On this 2-core machine (2026-11-26) Cassandra 5.0's mixed
    # throughput rose for 2-3 minutes (15 s means 5.2k, 6.9k, 7.4k, 7.9k, 8.7k, 11.4k, 14.0k,
    # 16.6k, 18.6k, 23.7k, then 14-23k), and its write saturation after 30 s of it was 7.0k/s
    # against 17.7-28.0k/s after 150-360 s.
    server_warmup_s: int
    # Fixed-rate runs, as fractions of Cassandra's saturation throughput.
    rate_fractions: tuple
    # Measured runs at the fraction nearest 50%, the one the p99 and CPU-per-op ratios are
    # read from; the report takes the median of each. The extra runs come after the other
    # fractions', so one disturbance (a GC pause, a compaction, another process) decides at
    # most one of them.
    half_runs: int = 1
    # latte -P parameters per workload.
    params: dict = field(default_factory=dict)
    server_warmup_round_s: int = 15
    # 0: exactly `server_warmup_s`, in one round.
    server_warmup_max_s: int = 0
    # Nodes per server (`bench/run --nodes`): 1, or a local cluster's N.
    nodes: int = 1


# A warm-up round "rises" when its throughput is more than this fraction above the best round
# before it; the warm-up ends after WARMUP_FLAT_ROUNDS rounds in a row that did not.
WARMUP_GAIN = 0.05
WARMUP_FLAT_ROUNDS = 2


def warm_up_ended(profile: Profile, rounds: list) -> str | None:
    """Whether a server's warm-up is over after `rounds` (each round's throughput, in order):
    "flat" when the throughput stopped rising, "cap" at `server_warmup_max_s`, else None."""
    elapsed = len(rounds) * profile.server_warmup_round_s
    if profile.server_warmup_max_s <= 0:
        return "cap" if rounds else None
    if elapsed >= profile.server_warmup_s:
        flat, best = 0, 0.0
        for throughput in rounds:
            flat = 0 if throughput > best * (1 + WARMUP_GAIN) else flat + 1
            best = max(best, throughput)
        if flat >= WARMUP_FLAT_ROUNDS:
            return "flat"
    if elapsed + profile.server_warmup_round_s > profile.server_warmup_max_s:
        return "cap"
    return None


# Sized for a 2-core machine: 26 minutes for the three servers (the budget is 30), most of it in
# the 72 measured runs of 15 s; loading and warming ~200k rows per workload takes 10-40 s per
# server.
DEFAULT = Profile(
    name="default",
    duration_s=15,
    warmup_s=3,
    server_warmup_s=30,
    server_warmup_max_s=240,
    rate_fractions=(0.25, 0.5, 0.75),
    half_runs=3,
    params={
        "write": {"row_count": 200_000},
        "read": {"row_count": 200_000},
        # The report's hot set is a tenth of the rows.
        "mixed": {"row_count": 200_000, "cache_rows": 20_000},
        "timeseries": {"sensors": 1_000, "points": 200, "slice_rows": 20},
    },
)

# Under 5 minutes (about 4 on a quiet 2-core machine, a minute of it Cassandra's start): one
# fixed rate (50%), 4 s runs, small data sets. A smoke test of the whole pipeline; its numbers
# are indicative only.
QUICK = Profile(
    name="quick",
    duration_s=4,
    warmup_s=1,
    server_warmup_s=15,
    rate_fractions=(0.5,),
    params={
        "write": {"row_count": 20_000},
        "read": {"row_count": 20_000},
        "mixed": {"row_count": 20_000, "cache_rows": 2_000},
        "timeseries": {"sensors": 200, "points": 50, "slice_rows": 20},
    },
)


def replication_factor(nodes: int) -> int:
    """The keyspaces' replication factor on `nodes` nodes: 3, as the benchmark issue asks,
    unless there are fewer nodes."""
    return min(nodes, 3)


def cluster_profile(profile: Profile, nodes: int) -> Profile:
    """`profile` for servers that are local clusters of `nodes` nodes: the same runs and data
    sets, every workload's keyspace created with `replication_factor(nodes)` (the
    `replication_factor` parameter every workload script takes)."""
    rf = replication_factor(nodes)
    params = {name: {**p, "replication_factor": rf} for name, p in profile.params.items()}
    return replace(profile, name=f"{profile.name}, {nodes} nodes", params=params, nodes=nodes)
