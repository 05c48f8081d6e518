"""`bench/selftest`: checks the harness without starting a server, in a few seconds.

1. Every Python file of the harness (and bench/*.py, bench/run, bench/selftest) compiles.
2. Every workload script the suite names exists, and every script in bench/workloads is one
   of them or listed in `workloads.EXTRA_SCRIPTS`.
3. If latte is installed: each script compiles in latte and defines every function the suite
   calls. latte compiles the script and looks the function up before it connects, so this
   runs `latte run SCRIPT -f FUNCTION` against a closed port and expects the connection error.
4. The latte report parser reads the fixture's reports.
5. The /proc sampler's interpolation, and reading this process's CPU time and peak RSS.
6. The report generator turns bench/fixtures/report into report.md and PNGs in a temporary
   directory, with the ratio table the fixture's numbers give (worked out by hand below).

Prints `N passed, N failed` last; exits 1 if anything failed."""

import contextlib
import json
import os
import py_compile
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, replace
from pathlib import Path

from . import latte as latte_mod
from . import report, servers, workloads

QUICK_PARAMS = workloads.QUICK.params
# Keeps the time-series slice inside the few points loaded.
SMOKE_PARAMS = {"timeseries": {"slice_rows": 5}}

BENCH_DIR = Path(__file__).resolve().parent.parent
FIXTURE = BENCH_DIR / "fixtures" / "report"
CHECKS = []


def check(fn):
    CHECKS.append(fn)
    return fn


@check
def python_compiles():
    files = sorted(BENCH_DIR.glob("harness/*.py")) + sorted(BENCH_DIR.glob("*.py"))
    files += [BENCH_DIR / "run", BENCH_DIR / "selftest"]
    with tempfile.TemporaryDirectory() as tmp:
        for i, f in enumerate(files):
            # Compiled into the temporary directory: the tree gets no __pycache__.
            py_compile.compile(str(f), cfile=os.path.join(tmp, f"{i}.pyc"), doraise=True)
    return f"{len(files)} files"


@check
def workload_scripts_exist_and_are_used():
    used = {w.script for w in workloads.WORKLOADS}
    for script in used:
        assert (workloads.WORKLOAD_DIR / script).is_file(), f"missing {script}"
    present = {p.name for p in workloads.WORKLOAD_DIR.glob("*.rn")}
    unused = present - used - set(workloads.EXTRA_SCRIPTS)
    assert not unused, f"scripts in bench/workloads the harness does not use: {sorted(unused)}"
    missing_extra = set(workloads.EXTRA_SCRIPTS) - present
    assert not missing_extra, f"EXTRA_SCRIPTS not present: {sorted(missing_extra)}"
    return f"{len(present)} scripts"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the socket is: nothing listens there


@check
def workload_scripts_compile_in_latte():
    cache = Path(os.environ.get("HELENUS_CACHE") or Path.home() / ".cache" / "helenus")
    latte = latte_mod.locate(cache, os.environ.get("LATTE_BIN"), install=False)
    if latte is None:
        return "SKIPPED: latte not installed (bench/run installs it)"
    address = f"127.0.0.1:{_closed_port()}"
    scripts = {}
    for w in workloads.WORKLOADS:
        scripts.setdefault(w.path, set()).update(w.all_functions())
    for name in workloads.EXTRA_SCRIPTS:
        scripts.setdefault(workloads.WORKLOAD_DIR / name, set()).add("run")
    count = 0
    for path, functions in scripts.items():
        for fn in sorted(functions):
            # In a temporary directory: latte leaves a latte-<time>.log where it runs.
            with tempfile.TemporaryDirectory() as tmp:
                out = subprocess.run([str(latte), "run", str(path), "-f", fn, "-d", "1", "-q",
                                      address], capture_output=True, text=True, timeout=60,
                                     cwd=tmp)
            text = out.stdout + out.stderr
            assert "Connecting to" in text and "Could not connect" in text, (
                f"{path.name} -f {fn}: expected latte to compile the script and fail to "
                f"connect, got:\n{text[-2000:]}")
            count += 1
    return f"{count} script/function pairs"


def _ceiling_binary() -> Path | None:
    """$HELENUS_CEILING_BIN, else the debug build in $CARGO_TARGET_DIR (or ./target), which
    `scripts/test-all` builds; None if there is none."""
    explicit = os.environ.get("HELENUS_CEILING_BIN")
    if explicit:
        return Path(explicit)
    target = Path(os.environ.get("CARGO_TARGET_DIR") or BENCH_DIR.parent / "target")
    for profile in ("debug", "release"):
        candidate = target / profile / "helenus-ceiling"
        if os.access(candidate, os.X_OK):
            return candidate
    return None


@check
def workloads_run_against_the_ceiling():
    """Every step of every workload, a few cycles each, against `helenus-ceiling` (which
    answers DDL for real and every INSERT/SELECT at once): catches errors latte only finds
    when a function runs, such as a wrong type of value or argument."""
    cache = Path(os.environ.get("HELENUS_CACHE") or Path.home() / ".cache" / "helenus")
    latte = latte_mod.locate(cache, os.environ.get("LATTE_BIN"), install=False)
    ceiling = _ceiling_binary()
    if latte is None or ceiling is None:
        return "SKIPPED: " + ("latte not installed" if latte is None else
                              "no helenus-ceiling binary (set HELENUS_CEILING_BIN)")
    port = _closed_port()
    address = f"127.0.0.1:{port}"
    client = latte_mod.ClientSettings()
    steps = 0
    with tempfile.TemporaryDirectory() as tmp:
        log = open(Path(tmp) / "ceiling.log", "wb")
        proc = subprocess.Popen([str(ceiling), "--listen", address], stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + 30
            while not servers.port_open(port):
                assert proc.poll() is None, f"{ceiling} exited with {proc.returncode}"
                assert time.monotonic() < deadline, f"{ceiling}: port {port} not open in 30 s"
                time.sleep(0.05)
            for w in workloads.WORKLOADS:
                # Small parameters: `load` runs load_cycle_count cycles.
                params = {k: min(int(v), 50) for k, v in QUICK_PARAMS[w.name].items()}
                params.update(SMOKE_PARAMS.get(w.name, {}))
                cmds = [latte_mod.schema_cmd(latte, w.path, address, params, client)]
                if w.load:
                    cmds.append(latte_mod.load_cmd(latte, w.path, address, params, client))
                    cmds.append(latte_mod.run_cmd(
                        latte, w.path, address, ["-f", "warm"], params, client, duration="20",
                        warmup="0", rate=None, output=Path(tmp) / "warm.json", drop_log=True))
                cmds.append(latte_mod.run_cmd(
                    latte, w.path, address, w.function_args(), params, client, duration="200",
                    warmup="10", rate=None, output=Path(tmp) / f"{w.name}.json"))
                for cmd in cmds:
                    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                                         cwd=tmp)
                    assert out.returncode == 0, (
                        f"{w.name}: {' '.join(cmd)}\nexit {out.returncode}:\n"
                        f"{(out.stdout + out.stderr)[-3000:]}")
                    steps += 1
                parsed = latte_mod.parse(json.loads((Path(tmp) / f"{w.name}.json").read_text()))
                assert parsed.cycle_count == 200 and parsed.error_count == 0, (
                    f"{w.name}: {parsed.cycle_count} cycles, {parsed.error_count} errors")
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            log.close()
    return f"{steps} latte commands against {ceiling}"


@check
def latte_reports_parse():
    fixture = FIXTURE / "latte" / "helenus-write-rate50.json"
    parsed = latte_mod.parse(json.loads(fixture.read_text()))
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / fixture.name
        shutil.copy(fixture, copy)
        packed = latte_mod.compress(copy)
        assert packed.name == fixture.name + ".gz" and not copy.exists()
        assert latte_mod.read_report(packed) == json.loads(fixture.read_text())
        assert latte_mod.read_report(fixture) == json.loads(fixture.read_text())
    assert parsed.throughput == 10000.0 and parsed.cycle_count == 100000
    assert (parsed.p50_ms, parsed.p99_ms, parsed.p999_ms) == (0.5, 2.0, 5.0)
    assert parsed.rate == 10000 and parsed.error_count == 0
    assert parsed.end_epoch_s - parsed.start_epoch_s == 10.0
    assert parsed.server_version == "5.0.2"


@check
def compaction_status_parses():
    fixtures = BENCH_DIR / "fixtures"
    assert servers.cassandra_compacting(
        (fixtures / "cassandra-compactionstats-active.txt").read_text())
    assert not servers.cassandra_compacting(
        (fixtures / "cassandra-compactionstats-idle.txt").read_text())
    # An active compaction is reported even if no further task is pending.
    active = (fixtures / "cassandra-compactionstats-active.txt").read_text().replace(
        "pending tasks                        1", "pending tasks                        0")
    assert servers.cassandra_compacting(active)
    idle = (fixtures / "helenus-metrics.txt").read_text()
    assert not servers.helenus_compacting(idle)
    assert servers.helenus_compacting(
        idle.replace("running_compactions=0", "running_compactions=1"))
    assert servers.helenus_compacting(
        idle.replace("pending_compaction_bytes=0", "pending_compaction_bytes=4096"))


@check
def cassandra_tablestats_parse():
    """bench/readamp_cassandra.py sizes its load from `nodetool tablestats` (a capture from
    Cassandra 5.0.9 mid-load: one SSTable and a memtable): files plus memtable bytes."""
    sys.path.insert(0, str(BENCH_DIR))
    import readamp_cassandra

    text = (BENCH_DIR / "fixtures" / "cassandra-tablestats.txt").read_text()
    stats = readamp_cassandra.parse_tablestats(text)
    assert stats["live_file_bytes"] == 146741942 + 99465366, stats
    assert stats["live_files"] == 1, stats
    # `Old SSTable count` and `Space used (total)` must not be read in their place.
    other = text.replace("Old SSTable count: 0", "Old SSTable count: 7").replace(
        "Space used (total): ", "Space used (total): 9")
    assert readamp_cassandra.parse_tablestats(other) == stats
    return "files and memtable bytes"


@check
def readamp_section_from_results():
    """`bench/run --readamp` summarizes each script's JSON (here the committed results of
    both) into results.json; the report's section shows each phase and Cassandra ÷ Helenus."""
    from . import runner

    results = BENCH_DIR / "results" / "readamp-20261125T0959Z"
    readamp = {name: runner.readamp_summary(name, json.loads(
        (results / f"{name}.json").read_text())) for name in ("helenus", "cassandra")}
    text = "\n".join(report.readamp_rows(readamp))
    for line in (
            "| Helenus | 194 MiB (500,000 rows) | 16 MiB block cache, direct I/O | 128 | 20,000 "
            "| 4,237 | 1.03 |",
            "| Cassandra | 397 MiB (1,200,000 rows) | 32 MiB memory bound (page cache and the "
            "JVM's growth) | 4096 | 20,000 | 34,612 | 8.45 |",
            "Cassandra ÷ Helenus, disk bytes per read: **8.3×** at read_ahead_kb 128, "
            "**8.2×** at read_ahead_kb 4096."):
        assert line in text, f"missing:\n{line}\n--- got:\n{text}"
    failed = report.readamp_rows({"cassandra": {"error": "exit status 2; see logs/x.log"}})
    assert "| Cassandra | failed: exit status 2; see logs/x.log |" in "\n".join(failed)
    return "2 servers, 4 phases"


@check
def sampler():
    samples = [(10.0, 1.0), (11.0, 3.0), (12.0, 3.5)]
    assert servers.interpolate(samples, 10.5) == 2.0
    assert servers.interpolate(samples, 12.0) == 3.5
    assert servers.interpolate(samples, 9.0) is None
    assert servers.process_cpu_s(os.getpid()) > 0
    assert servers.status_kib(os.getpid(), "VmHWM") > 0
    assert servers.machine_busy_s() > 0
    heap = servers.cassandra_default_heap()
    assert heap.endswith("M") and int(heap[:-1]) >= 1024


# The fixture (bench/fixtures/report/results.json), by hand (ratios: Helenus ÷ Cassandra,
# Helenus ÷ ceiling, ceiling ÷ Cassandra). Runs are 10 s; the 50% rate is
# 10,000 ops/s (write) and 12,500 ops/s (read); the ceiling's 50% read run failed.
#   write: throughput C 20,000  H 40,000  ceiling 80,000   -> 2.00, 0.50, 4.00
#          p99 at 50%  C 4.0 ms H 2.0 ms  ceiling 0.5 ms   -> 0.50, 4.00, 0.12
#          CPU/op      C 8.0 s/100k = 80 µs, H 32 µs, ceiling 10 µs -> 0.40, 3.20, 0.12
#          peak RSS    C 4096 MiB, H 1024 MiB, ceiling 16 MiB -> 0.25, 64.00, 0.0039
#   read:  throughput C 25,000  H 30,000  ceiling 90,000   -> 1.20, 0.33, 3.60
#          p99 at 50%  C 5.0 ms H 3.0 ms  ceiling failed   -> 0.60, —, —
#          CPU/op      C 80 µs  H 40 µs   ceiling failed   -> 0.50, —, —
#          peak RSS    C 4608 MiB, H 1536 MiB, ceiling 16 MiB -> 0.33, 96.00, 0.0035
EXPECTED = {
    ("write", "throughput"): (2.0, 0.5),
    ("write", "p99_ms"): (0.5, 4.0),
    ("write", "cpu_us_per_op"): (0.4, 3.2),
    ("write", "peak_rss_mib"): (0.25, 64.0),
    ("read", "throughput"): (1.2, 1 / 3),
    ("read", "p99_ms"): (0.6, None),
    ("read", "cpu_us_per_op"): (0.5, None),
    ("read", "peak_rss_mib"): (1 / 3, 96.0),
}
EXPECTED_LINES = [
    "| write | throughput ↑ | 20,000 ops/s | 40,000 ops/s | 80,000 ops/s | **2.00×** | 0.50× "
    "| 4.00× |",
    "| write | p99 at 50% rate ↓ | 4.00 ms | 2.00 ms | 0.50 ms | **0.50×** | 4.00× | 0.12× |",
    "| write | server CPU per op at 50% rate ↓ | 80.0 µs | 32.0 µs | 10.0 µs | **0.40×** "
    "| 3.20× | 0.12× |",
    "| write | server peak RSS ↓ | 4,096 MiB | 1,024 MiB | 16 MiB | **0.25×** | 64.00× "
    "| 0.0039× |",
    "| read | throughput ↑ | 25,000 ops/s | 30,000 ops/s | 90,000 ops/s | **1.20×** | 0.33× "
    "| 3.60× |",
    "| read | p99 at 50% rate ↓ | 5.00 ms | 3.00 ms | — | **0.60×** | — | — |",
    "| read | server CPU per op at 50% rate ↓ | 80.0 µs | 40.0 µs | — | **0.50×** | — | — |",
    "| read | server peak RSS ↓ | 4,608 MiB | 1,536 MiB | 16 MiB | **0.33×** | 96.00× "
    "| 0.0035× |",
]


def _run(server, fraction, p99, cpu, throughput=1000.0):
    return {"server": server, "workload": "write", "kind": "rate", "fraction": fraction,
            "target_rate": 1000.0, "server_peak_rss_bytes": 2**20,
            "metrics": {"throughput": throughput, "p50_ms": p99 / 2, "p99_ms": p99,
                        "p999_ms": p99 * 2, "errors": 0, "cpu_us_per_op": cpu,
                        "server_cores": 0.1, "client_cpu_s": 1.0, "elapsed_s": 10.0,
                        "background_cores": 0.0}}


@check
def repeated_half_rate_runs_give_their_median():
    """The profile runs the 50% rate more than once; the ratios take each server's median of
    each metric (the lower middle of an even count), and a run that fell short of its rate
    marks the server's value."""
    results = {"workloads": {"write": {}}, "profile": {"half_runs": 3}, "runs": [
        _run("helenus", 0.25, 9.0, 90.0),
        _run("helenus", 0.5, 3.0, 10.0), _run("helenus", 0.5, 1.0, 30.0),
        _run("helenus", 0.5, 2.0, None),
        _run("cassandra", 0.5, 6.0, 60.0), _run("cassandra", 0.5, 4.0, 40.0, throughput=900.0),
        _run("ceiling", 0.5, 0.5, 5.0),
    ]}
    s = report.summary(results)
    helenus, cassandra, ceiling = (s[("write", x)]
                                   for x in ("helenus", "cassandra", "ceiling"))
    assert (helenus["p99_ms"], helenus["cpu_us_per_op"]) == (2.0, 10.0), helenus
    assert helenus["mid_sustained"] and not cassandra["mid_sustained"]
    assert (cassandra["p99_ms"], cassandra["cpu_us_per_op"]) == (4.0, 40.0), cassandra
    assert (ceiling["p99_ms"], ceiling["cpu_us_per_op"]) == (0.5, 5.0), ceiling
    rows = "\n".join(report._details_rows(results))
    for label in ("| helenus | write | 25% rate | 1,000 |",
                  "| helenus | write | 50% rate (1 of 3) |",
                  "| helenus | write | 50% rate (3 of 3) |",
                  "| ceiling | write | 50% rate | 1,000 |",
                  "| cassandra | write | 50% rate (2 of 2) | 1,000 † |"):
        assert label in rows, f"no row {label!r} in:\n{rows}"
    assert "the median over the 3 runs" in report._half_runs_text(results, 0.5)
    # Runs with other load on the machine are named in the report's warning.
    assert report.loaded_runs(results) == []
    results["runs"][1]["metrics"]["background_cores"] = 0.9
    assert report.loaded_runs(results) == ["helenus write 50% rate"]


@check
def server_warm_up_ends_when_throughput_stops_rising():
    """The warm-up's rounds go on while the throughput rises, after the minimum, up to the
    limit; the report lists them."""
    default = workloads.DEFAULT
    ended = workloads.warm_up_ended
    # Cassandra 5.0 on two cores, 15 s means of its mixed throughput after starting: it rises
    # for ten rounds; the warm-up ends after two rounds below the best (23,689).
    cassandra = [5173, 6941, 7411, 7896, 8715, 11395, 14023, 16593, 18607, 23689, 20738, 14759]
    assert [ended(default, cassandra[:n]) for n in range(11, 13)] == [None, "flat"]
    assert all(ended(default, cassandra[:n]) is None for n in range(1, 11))
    # A server steady from the start stops after the minimum and two flat rounds.
    assert [ended(default, [40000, 40500, 39800][:n]) for n in (1, 2, 3)] == [None, None, "flat"]
    # Flat rounds before the minimum do not end it.
    longer = replace(default, server_warmup_s=60)
    assert [ended(longer, [100] * n) for n in (3, 4)] == [None, "flat"]
    # Still rising at the limit (240 s: 16 rounds of 15 s).
    rising = [1000 * 1.1 ** i for i in range(16)]
    assert ended(default, rising[:15]) is None and ended(default, rising) == "cap"
    # No limit: one round of the minimum.
    assert ended(replace(default, server_warmup_max_s=0), [1.0]) == "cap"
    cell = report._warmup_cell({"warmup": {"round_s": 15, "rounds": cassandra,
                                           "ended": "flat"}})
    assert cell.startswith("180 s (stopped rising): 5,173, 6,941,"), cell
    assert "at most 240 s" in report._warmup_text(asdict(default))


@check
def a_target_the_ceiling_misses_is_out_of_reach():
    """Where even the ceiling's ratio misses a Helenus ÷ Cassandra bound, the target is out of
    reach in that run (report 20261126T135814Z's writes: the ceiling 2.11× Cassandra)."""
    def saturation(server, throughput, p99):
        return {"server": server, "workload": "write", "kind": "saturation", "fraction": None,
                "metrics": {"throughput": throughput, "p99_ms": p99, "cpu_us_per_op": 1.0}}

    def with_half(server, p99):
        run = _run(server, 0.5, p99, 1.0)
        run["server_peak_rss_bytes"] = None
        return run
    results = {"workloads": {"write": {}}, "profile": {"half_runs": 1}, "runs": [
        saturation("cassandra", 31162, 9.0), saturation("helenus", 56358, 4.0),
        saturation("ceiling", 65697, 2.0),
        with_half("cassandra", 2.84), with_half("helenus", 1.48), with_half("ceiling", 1.0),
    ]}
    verdicts = {t["target"]: t["verdict"] for t in report.target_rows(results)}
    assert verdicts == {
        "throughput ≥ 3× Cassandra's": "out of reach",
        # The ceiling's 1.0 ms is 0.35× of 2.84: out of reach too.
        "p99 at the 50% rate ≤ ⅓ of Cassandra's": "out of reach",
        "throughput ≥ 0.5× the ceiling's": "met",
        "peak RSS ≤ ¼ of Cassandra's": "no data",
    }, verdicts
    lines = "\n".join(report.targets_markdown(results))
    assert "| write | 1.81× | missed; out of reach in this run: the ceiling's own ratio was " \
        "2.11× |" in lines, lines


@check
def the_suite_runs_each_step_on_every_server_in_turn():
    """Every server is up for the whole suite; each workload's setups, then its saturation
    runs, then each fixed rate go to every server in turn (so a drift of the machine reaches
    every server alike), the rates from Cassandra's saturation; a server whose setup failed
    is left out of that workload's runs; the others are paused during a measured run. The
    servers and latte are stand-ins."""
    from . import runner

    class Server:
        stores_data = True

        def __init__(self, name):
            self.name = name

        def pause(self):
            calls.append(("pause", self.name))

        def resume(self):
            calls.append(("resume", self.name))

    calls = []

    class Suite(runner.Suite):
        def start(self, server):
            calls.append(("start", server.name))
            self.results["servers"][server.name] = {}
            return True

        def stop(self, server):
            calls.append(("stop", server.name))

        def warm_up_server(self, server, info):
            calls.append(("warm-up", server.name))

        def set_up(self, server, workload, params):
            calls.append(("set up", server.name, workload.name))
            return not (server.name == "ceiling" and workload.name == "read")

        def measured_run(self, server, workload, params, fraction, rate, repeat=0):
            calls.append((workload.name, server.name, rate, repeat))
            return {"cassandra": 100.0, "helenus": 300.0, "ceiling": 500.0}[server.name]

    args = runner.parse_args(["--quick"])
    profile = replace(workloads.QUICK, rate_fractions=(0.25, 0.5), half_runs=2,
                      server_warmup_s=15)
    # The suite saves its manifest (results.json) into its output directory: a temporary one
    # (removed when `out` goes, as the check returns), not the directory the checks run in.
    out = tempfile.TemporaryDirectory(prefix="bench-selftest-")
    suite = Suite(args, profile, Path(out.name), Path(out.name), Path("latte"),
                  [Server(n) for n in ("cassandra", "helenus", "ceiling")],
                  [workloads.by_name("write"), workloads.by_name("read")])
    suite.results = {"servers": {}, "runs": [], "steps": []}
    suite.run()
    servers_ = ("cassandra", "helenus", "ceiling")
    expected = [("start", n) for n in servers_] + [("warm-up", n) for n in servers_]
    for w, names in (("write", servers_), ("read", servers_[:2])):
        expected += [("set up", n, w) for n in servers_]
        expected += [(w, n, None, 0) for n in names]
        expected += [(w, n, rate, repeat) for rate, repeat in ((25.0, 0), (50.0, 0), (50.0, 1))
                     for n in names]
    expected += [("stop", n) for n in servers_]
    assert calls == expected, "\n".join(map(str, calls))
    assert suite.rate_base["write"] == {"server": "cassandra", "throughput": 100.0}
    # While one server is measured the others are paused, and resumed after, even on error.
    calls.clear()
    try:
        with suite.alone(suite.up[1]):
            calls.append(("run", "helenus"))
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert calls == [("pause", "cassandra"), ("pause", "ceiling"), ("run", "helenus"),
                     ("resume", "cassandra"), ("resume", "ceiling")], calls
    # Before a run, every server that took requests since it last settled waits for its
    # compactions, once.
    calls.clear()
    for server in suite.up:
        server.compacting = lambda name=server.name: calls.append(("compacting?", name))
    suite.unsettled = {"cassandra", "ceiling"}
    suite.up[2].stores_data = False
    suite.settle(workloads.by_name("write"))
    suite.settle(workloads.by_name("write"))
    assert calls == [("compacting?", "cassandra")], calls


def _close(a, b):
    return (a is None and b is None) or (a is not None and b is not None
                                         and abs(a - b) < 1e-9 * max(1, abs(b)))


@check
def report_from_fixture():
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report"
        shutil.copytree(FIXTURE, out)
        # The harness keeps its latte reports gzipped; older reports have them plain. Both
        # are read: Helenus's here gzipped, the others plain.
        manifest = json.loads((out / "results.json").read_text())
        packed_runs = 0
        for run in manifest["runs"]:
            if run["server"] == "helenus" and run.get("latte_json"):
                packed = latte_mod.compress(out / run["latte_json"])
                run["latte_json"] = str(Path(run["latte_json"]).with_name(packed.name))
                packed_runs += 1
        assert packed_runs > 0, "the fixture has Helenus runs"
        (out / "results.json").write_text(json.dumps(manifest))
        path = report.generate(out)
        text = path.read_text()
        rows = report.ratio_rows(report.load(out))
        got = {(r["workload"], r["metric"]): (r["helenus_vs_cassandra"], r["helenus_vs_ceiling"])
               for r in rows}
        assert set(got) == set(EXPECTED), f"rows: {sorted(got)}"
        for key, (hc, hceil) in EXPECTED.items():
            assert _close(got[key][0], hc) and _close(got[key][1], hceil), (
                f"{key}: got {got[key]}, expected {(hc, hceil)}")
        for line in EXPECTED_LINES:
            assert line in text, f"report.md lacks the line:\n{line}\n--- report.md:\n{text}"
        # The targets, from the same ratios: the ceiling met each Helenus ÷ Cassandra bound
        # it has a value for, so a miss is a plain miss.
        verdicts = {(t["target"].split()[0] + (" ceiling" if "ceiling" in t["target"] else ""),
                     t["workload"]): t["verdict"] for t in report.target_rows(report.load(out))}
        assert verdicts == {
            ("throughput", "write"): "missed", ("throughput", "read"): "missed",
            ("p99", "write"): "missed", ("p99", "read"): "missed",
            ("throughput ceiling", "write"): "met", ("throughput ceiling", "read"): "missed",
            ("peak", "write"): "met", ("peak", "read"): "missed",
        }, verdicts
        assert "| throughput ≥ 0.5× the ceiling's | write | 0.50× | **met** |" in text
        # Geometric mean of the throughput ratios: sqrt(2.0 x 1.2) = 1.55.
        assert "throughput **1.55×**" in text, "geometric mean line"
        assert "Warning:" not in text, "the fixture's runs had no other load"
        assert "| ceiling | read | 50% rate | 12,500 | failed:" in text, "failed run row"
        # Every fixture run kept its rate; one that falls short of 95% is marked †.
        table = [line for line in text.split("## Plots")[0].splitlines()
                 if line.startswith("| ")]
        assert not any("†" in line for line in table), "no unsustained rate in the fixture"
        assert not report._sustained({"target_rate": 1000.0, "metrics": {"throughput": 940.0}})
        assert report._sustained({"target_rate": 1000.0, "metrics": {"throughput": 960.0}})
        pngs = ["throughput.png", "cpu-per-op.png", "peak-rss.png", "latency-write.png",
                "latency-read.png"]
        for name in pngs:
            data = (out / name).read_bytes()
            assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000, f"{name} not a plot"
            assert f"({name})" in text, f"report.md does not show {name}"
    return f"ratio table ({len(EXPECTED)} rows) and {len(pngs)} plots"


# The 3-node fixture (bench/fixtures/report-cluster/results.json, `bench/run --nodes 3`), by
# hand (Helenus ÷ Cassandra; no ceiling). Runs are 10 s; the 50% rate is 3,000 ops/s (write)
# and 4,000 ops/s (read); Helenus achieved 3,700 of its 4,000 reads/s (under 95%: †).
#   write: throughput C 6,000   H 15,000               -> 2.50
#          p99 at 50% C 6.0 ms   H 1.5 ms               -> 0.25
#          CPU/op     C 9.0 s / 30,000 = 300 µs, H 2.1 s / 30,000 = 70 µs -> 0.2333
#                     (the target, at most ¼: met)
#          peak RSS   C 3,072 MiB (the three nodes'), H 384 MiB         -> 0.125
#   read:  throughput C 8,000   H 12,000               -> 1.50
#          p99 at 50% C 4.0 ms   H 2.0 ms †             -> 0.50
#          CPU/op     C 8.0 s / 40,000 = 200 µs, H 4.07 s / 37,000 = 110 µs † -> 0.55
#          peak RSS   C 3,300 MiB, H 480 MiB            -> 0.1455
CLUSTER_FIXTURE = BENCH_DIR / "fixtures" / "report-cluster"
CLUSTER_EXPECTED_LINES = [
    "| workload | metric | Cassandra | Helenus | Helenus ÷ Cassandra |",
    "| write | throughput ↑ | 6,000 ops/s | 15,000 ops/s | **2.50×** |",
    "| write | p99 at 50% rate ↓ | 6.00 ms | 1.50 ms | **0.25×** |",
    "| write | server CPU per op at 50% rate, 3 nodes together ↓ | 300 µs | 70.0 µs "
    "| **0.23×** |",
    "| write | server peak RSS, 3 nodes together ↓ | 3,072 MiB | 384 MiB | **0.12×** |",
    "| read | throughput ↑ | 8,000 ops/s | 12,000 ops/s | **1.50×** |",
    "| read | p99 at 50% rate ↓ | 4.00 ms | 2.00 ms † | **0.50×** |",
    "| read | server CPU per op at 50% rate, 3 nodes together ↓ | 200 µs | 110 µs † "
    "| **0.55×** |",
    "| read | server peak RSS, 3 nodes together ↓ | 3,300 MiB | 480 MiB | **0.15×** |",
    "| server CPU per replicated write (all nodes) ≤ ¼ of Cassandra's | write | 0.23× "
    "| **met** |",
]


@check
def report_from_cluster_fixture():
    """`bench/run --nodes 3`'s report: Helenus ÷ Cassandra without ceiling columns, CPU per op
    and peak RSS of the nodes together, the 3-node round's target."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report"
        shutil.copytree(CLUSTER_FIXTURE, out)
        text = report.generate(out).read_text()
        results = report.load(out)
        got = {(r["workload"], r["metric"]): r["helenus_vs_cassandra"]
               for r in report.ratio_rows(results)}
        for key, value in {("write", "cpu_us_per_op"): 70 / 300, ("read", "p99_ms"): 0.5,
                           ("read", "cpu_us_per_op"): 110 / 200,
                           ("write", "peak_rss_mib"): 0.125}.items():
            assert _close(got[key], value), f"{key}: got {got[key]}, expected {value}"
        for line in CLUSTER_EXPECTED_LINES:
            assert line in text, f"report.md lacks the line:\n{line}\n--- report.md:\n{text}"
        assert "ceiling" not in text.split("## Plots")[0].split("## Ratios")[1], \
            "a 3-node report has no ceiling columns"
        assert "**Local clusters of 3 nodes**" in text and "consistency QUORUM" in text
        assert "replication factor 3" in text
        verdicts = [t["verdict"] for t in report.target_rows(results)]
        assert verdicts == ["met"], verdicts
        # Just above a quarter: missed.
        for r in results["runs"]:
            if r["server"] == "helenus" and r["workload"] == "write" and r["kind"] == "rate":
                r["metrics"]["cpu_us_per_op"] = 76.0
        assert [t["verdict"] for t in report.target_rows(results)] == ["missed"]
    return f"{len(CLUSTER_EXPECTED_LINES)} lines"


@check
def cluster_mode_settings():
    """`--nodes 3`: Cassandra and Helenus clusters (no ceiling), the write and read workloads,
    keyspaces with replication factor 3, requests at QUORUM, every node a contact point."""
    from . import runner

    args = runner.parse_args(["--nodes", "3"])
    assert args.servers == "cassandra,helenus" and args.workloads == "write,read", args
    assert args.cassandra_heap == runner.CLUSTER_CASSANDRA_HEAP
    profile = runner._profile(args)
    assert profile.nodes == 3 and all(p["replication_factor"] == 3
                                      for p in profile.params.values()), profile
    assert runner._profile(runner.parse_args([])).params == workloads.DEFAULT.params
    for bad in (["--nodes", "3", "--servers", "cassandra,ceiling"], ["--nodes", "0"],
                ["--nodes", "3", "--readamp"]):
        try:
            with open(os.devnull, "w") as devnull, \
                    contextlib.redirect_stderr(devnull):
                runner.parse_args(bad)
        except SystemExit:
            continue
        raise AssertionError(f"{bad} accepted")
    with tempfile.TemporaryDirectory() as tmp:
        cluster = servers.CassandraCluster(Path("cassandra.sh"), Path(tmp), 3, "1G", Path(tmp),
                                           Path(tmp))
        cluster.port = 9999
        client = latte_mod.ClientSettings(consistency=runner.CLUSTER_CONSISTENCY)
        cmd = latte_mod.run_cmd(Path("latte"), Path("w.rn"), cluster.addresses, ["-f", "write"],
                                profile.params["write"], client, duration="1s", warmup="0",
                                rate=None, output=Path(tmp) / "o.json")
    assert cmd[-3:] == ["127.0.0.1:9999", "127.0.0.2:9999", "127.0.0.3:9999"], cmd
    assert "replication_factor=3" in cmd and cmd[cmd.index("--consistency") + 1] == "QUORUM"
    # Every workload script takes the replication factor.
    for w in workloads.WORKLOADS:
        assert 'latte::param!("replication_factor", 1)' in w.path.read_text(), w.script
    # Ports a cluster's nodes share are free on every node's address.
    hosts = servers.cluster_hosts(3)
    port = servers.free_port_on(hosts, 3)
    assert all(servers._bindable(h, p) for h in hosts for p in range(port, port + 3))


@check
def cluster_cpu_and_memory_are_summed():
    """A cluster's CPU time and peak RSS are its nodes' processes' together; a sample with a
    node missing is no sample (it would look like a fall in CPU time)."""
    me = os.getpid()
    single = servers.status_kib(me, "VmHWM")
    assert servers.peak_rss_kib([me, me]) >= 2 * single
    assert servers.peak_rss_kib([me, 2**22 + 1]) is None  # above pid_max's default: no process
    both = servers.Sampler([me, me])
    both.sample()
    one = servers.Sampler(me)
    one.sample()
    assert both.process[0][1] >= 2 * one.process[0][1] - 0.05
    gone = servers.Sampler([me, 2**22 + 1])
    gone.sample()
    assert gone.process == []


@check
def helenus_cluster_needs_the_cluster_command():
    """A helenus binary without `cluster` (it answers with its usage, which names no cluster)
    fails the 3-node run's start with a message saying so, and starts nothing."""
    with tempfile.TemporaryDirectory() as tmp:
        fake = Path(tmp) / "helenus"
        fake.write_text("#!/bin/sh\necho 'helenus: usage: helenus server [--config FILE]' >&2\n"
                        "exit 1\n")
        fake.chmod(0o755)
        cluster = servers.HelenusCluster(fake, Path(tmp) / "c", 3, Path(tmp))
        try:
            cluster.start()
        except RuntimeError as e:
            assert "has no `cluster` command" in str(e), e
        else:
            raise AssertionError("started a cluster with a binary that has no cluster command")
        assert cluster.pids == [] and not cluster.started


# A stand-in `helenus` for the check below: `cluster start|stop|status` and `admin` as the real
# binary's (crates/node/src/cluster.rs), each node a process listening on 127.0.0.K:PORT whose
# command line names DIR/nodeK/helenus.yaml; every admin call is appended to $FAKE_ADMIN_LOG.
FAKE_HELENUS = r"""#!/usr/bin/env python3
import os, signal, socket, subprocess, sys, time
args = sys.argv[1:]
def opt(name):
    return args[args.index(name) + 1] if name in args else None
if args[:1] == ["--version"]:
    print("helenus stand-in"); sys.exit(0)
if args[:1] == ["admin"]:
    with open(os.environ["FAKE_ADMIN_LOG"], "a") as f:
        f.write(" ".join(args[1:]) + "\n")
    if "metrics" in args:
        print("running_compactions=0\npending_compaction_bytes=0")
    sys.exit(0)
command, d = args[1], opt("--dir")
if command == "status" and not os.path.isdir(d):
    print(f"no cluster in {d}", file=sys.stderr); sys.exit(1)
if command == "start":
    port = int(opt("--cql-port"))
    for k in range(1, int(opt("--nodes")) + 1):
        node = os.path.join(d, f"node{k}")
        os.makedirs(node, exist_ok=True)
        config = os.path.join(node, "helenus.yaml")
        open(config, "w").close()
        code = ("import socket, sys, time; s = socket.socket(); "
                "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
                f"s.bind(('127.0.0.{k}', {port})); s.listen(); time.sleep(600)")
        proc = subprocess.Popen([sys.executable, "-c", code, "server", "--config", config],
                                start_new_session=True)
        with open(os.path.join(node, "helenus.pid"), "w") as f:
            f.write(f"{proc.pid}\n")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection((f"127.0.0.{k}", port), timeout=1).close(); break
            except OSError:
                time.sleep(0.05)
if command == "stop":
    for k in range(1, 255):
        pid_file = os.path.join(d, f"node{k}", "helenus.pid")
        if not os.path.exists(pid_file):
            break
        pid = int(open(pid_file).read())
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
"""


@check
def helenus_cluster_starts_measures_and_stops_its_nodes():
    """`HelenusCluster` against a stand-in `helenus` (the real `cluster` command is not in
    every binary yet): 3 node processes, each on 127.0.0.K:PORT, their PIDs from the pid
    files; CPU and RSS sampled over the three; flush and the compaction check on every node's
    admin endpoint; paused and resumed together; stopped with `cluster stop`."""
    with tempfile.TemporaryDirectory() as tmp:
        fake = Path(tmp) / "helenus"
        fake.write_text(FAKE_HELENUS)
        fake.chmod(0o755)
        admin_log = Path(tmp) / "admin.log"
        os.environ["FAKE_ADMIN_LOG"] = str(admin_log)
        cluster = servers.HelenusCluster(fake, Path(tmp) / "cluster", 3, Path(tmp))
        try:
            cluster.start()
            assert len(cluster.pids) == 3 and cluster.pid == cluster.pids[0], cluster.pids
            for k, address in enumerate(cluster.addresses, 1):
                host, port = address.split(":")
                assert host == f"127.0.0.{k}" and servers.port_open(int(port), host), address
            # The nodes sleep: their peaks hold still between the two readings.
            assert cluster.peak_rss_kib() == sum(servers.status_kib(pid, "VmHWM")
                                                 for pid in cluster.pids)
            cluster.flush("ks")
            assert not cluster.compacting()
            calls = admin_log.read_text().splitlines()
            port = cluster.admin_port
            assert calls == [f"--host 127.0.0.{k} --port {port} flush ks" for k in (1, 2, 3)] + \
                [f"--host 127.0.0.{k} --port {port} metrics" for k in (1, 2, 3)], calls
            def states():
                return [Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                        for pid in cluster.pids]
            cluster.pause()
            # A signal is delivered when the process is next scheduled: wait for it.
            deadline = time.monotonic() + 5
            while states() != ["T"] * 3 and time.monotonic() < deadline:
                time.sleep(0.01)
            paused = states()
            cluster.resume()
            assert paused == ["T"] * 3, paused
            pids = list(cluster.pids)
        finally:
            cluster.stop()
            os.environ.pop("FAKE_ADMIN_LOG", None)
        deadline = time.monotonic() + 20
        while any(Path(f"/proc/{pid}").exists() and
                  Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
                  for pid in pids):
            assert time.monotonic() < deadline, f"nodes {pids} still running after stop"
            time.sleep(0.1)
        assert cluster.pids == [] and not cluster.started
    return "3 nodes"


@check
def cassandra_cluster_script_refuses_without_a_cluster():
    """`scripts/cassandra.sh cluster` checks its arguments before it downloads or starts
    anything: no cluster in the directory, no node count, a node the cluster has not."""
    script = BENCH_DIR.parent / "scripts" / "cassandra.sh"
    with tempfile.TemporaryDirectory() as tmp:
        def run(*args):
            out = subprocess.run([str(script), "cluster", *args, "--dir", tmp],
                                 capture_output=True, text=True, timeout=60,
                                 env=dict(os.environ, HELENUS_CACHE=tmp))
            return out.returncode, out.stderr
        code, err = run("status")
        assert code == 1 and "no cluster in" in err, err
        code, err = run("start")
        assert code == 1 and "give --nodes N" in err, err
        assert not (Path(tmp) / "cassandra-5.0.9").exists(), "downloaded before checking"
        (Path(tmp) / "cluster.env").write_text(
            "CLUSTER_NODES=3\nCLUSTER_CQL_PORT=1\nCLUSTER_STORAGE_PORT=2\n"
            "CLUSTER_JMX_PORT=3\nCLUSTER_HEAP=512M\n")
        code, err = run("kill", "5")
        assert code == 1 and "no node '5'" in err, err
        code, err = run("start", "--nodes", "4")
        assert code == 1 and "a cluster of 3 nodes, not 4" in err, err
        code, out = run("status")
        assert code == 1, out
        code, err = run("frobnicate")
        assert code == 1 and "unknown cluster command" in err, err
    return "4 refusals"


def main(argv) -> int:
    passed = failed = 0
    for fn in CHECKS:
        try:
            note = fn()
        except Exception:  # noqa: BLE001 - every failure is reported, then counted
            failed += 1
            print(f"FAIL {fn.__name__}")
            traceback.print_exc(file=sys.stdout)
        else:
            passed += 1
            print(f"ok   {fn.__name__}" + (f" ({note})" if note else ""))
    print(f"selftest: {passed} passed, {failed} failed")
    return 1 if failed else 0
