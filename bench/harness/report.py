"""report.md and its plots, from an output directory's results.json and the latte JSON reports
it names. Also `bench/run --report-only DIR` to rebuild a report (e.g. of an interrupted run).

The ratio table compares, per workload: saturation throughput; p99 cycle latency at the fixed
rate nearest 50% of Cassandra's saturation throughput (the same offered load for every
server; the median over that rate's runs, as the profile runs it more than once); server CPU
time per operation at that rate (its median likewise); and the server's peak resident memory
(VmHWM) while the workload ran (load and warm pass included).

A run with `--nodes N` (N > 1, `results["nodes"]`) compares two local clusters of N nodes,
Cassandra's and Helenus's, without the ceiling: CPU per op and peak RSS are summed over every
node's process, the table has no ceiling columns, and the targets are the cluster round's
(`CLUSTER_TARGETS`)."""

import json
import math
import statistics
from collections import Counter
from pathlib import Path

from . import latte as latte_mod
from .workloads import WARMUP_FLAT_ROUNDS, WARMUP_GAIN

SERVERS = ("cassandra", "helenus", "ceiling")
LABELS = {"cassandra": "Cassandra", "helenus": "Helenus", "ceiling": "ceiling"}
COLORS = {"cassandra": "#4e79a7", "helenus": "#e15759", "ceiling": "#9c9c9c"}
# (key, label, unit, higher is better)
METRICS = (
    ("throughput", "throughput", "ops/s", True),
    ("p99_ms", "p99 at {half} rate", "ms", False),
    ("cpu_us_per_op", "server CPU per op at {half} rate", "µs", False),
    ("peak_rss_mib", "server peak RSS", "MiB", False),
)
HALF = 0.5


def load(out_dir: Path) -> dict:
    """results.json with each successful run's latte report parsed into run["metrics"]."""
    out_dir = Path(out_dir)
    results = json.loads((out_dir / "results.json").read_text())
    for run in results["runs"]:
        run["metrics"] = None
        if run.get("status") != "ok":
            continue
        try:
            parsed = latte_mod.parse(latte_mod.read_report(out_dir / run["latte_json"]))
        except (OSError, ValueError, KeyError) as e:
            run["status"], run["error"] = "failed", f"unreadable latte report: {e}"
            continue
        m = {
            "throughput": parsed.throughput,
            "p50_ms": parsed.p50_ms,
            "p99_ms": parsed.p99_ms,
            "p999_ms": parsed.p999_ms,
            "errors": parsed.error_count,
            "error_samples": parsed.errors[:3],
            "cycles": parsed.cycle_count,
            "elapsed_s": parsed.elapsed_s,
            "client_cpu_s": parsed.client_cpu_s,
            "server_version": parsed.server_version,
            "cpu_us_per_op": None,
            "server_cores": None,
            "background_cores": None,
        }
        cpu = run.get("server_cpu_s")
        if cpu is not None and parsed.cycle_count > 0:
            m["cpu_us_per_op"] = cpu / parsed.cycle_count * 1e6
            m["server_cores"] = cpu / parsed.elapsed_s if parsed.elapsed_s else None
            busy = run.get("machine_busy_cpu_s")
            if busy is not None and parsed.elapsed_s:
                m["background_cores"] = max(0.0, busy - cpu - parsed.client_cpu_s) / parsed.elapsed_s
        run["metrics"] = m
    return results


def nearest_half(fractions) -> float | None:
    """The fixed-rate fraction the p99 and CPU-per-op ratios are read from: the one nearest
    50% (the lower of two as near)."""
    fractions = sorted(set(fractions))
    if not fractions:
        return None
    return min(fractions, key=lambda f: (abs(f - HALF), f))


def _half_fraction(results: dict) -> float | None:
    return nearest_half(r["fraction"] for r in results["runs"] if r.get("fraction") is not None)


def summary(results: dict) -> dict:
    """{(workload, server): {throughput, p99_ms, cpu_us_per_op, peak_rss_mib}} (None = no
    data)."""
    half = _half_fraction(results)
    out = {}
    for workload in results["workloads"]:
        for server in SERVERS:
            runs = [r for r in results["runs"]
                    if r["workload"] == workload and r["server"] == server]
            if not runs:
                continue
            sat = next((r for r in runs if r["kind"] == "saturation" and r["metrics"]), None)
            mids = [r for r in runs if r["kind"] == "rate" and r["fraction"] == half
                    and r["metrics"]]
            peaks = [r["server_peak_rss_bytes"] for r in runs if r.get("server_peak_rss_bytes")]
            out[(workload, server)] = {
                "throughput": sat["metrics"]["throughput"] if sat else None,
                "p99_ms": _median(mids, "p99_ms"),
                "cpu_us_per_op": _median(mids, "cpu_us_per_op"),
                "peak_rss_mib": max(peaks) / 2**20 if peaks else None,
                "mid_sustained": all(_sustained(r) for r in mids),
            }
    return out


def _median(runs, key):
    """The median of a metric over runs at one rate, None without a value. With an even count
    the lower middle value: always one a run measured."""
    values = [r["metrics"][key] for r in runs if r["metrics"][key] is not None]
    return statistics.median_low(values) if values else None


# A fixed-rate run that achieved less than this fraction of its offered rate: the server could
# not keep up, so its latency is mostly queueing (marked † in the tables).
SUSTAINED_FRACTION = 0.95


def _sustained(run) -> bool:
    rate = run.get("target_rate")
    return rate is None or run["metrics"]["throughput"] >= SUSTAINED_FRACTION * rate


def _ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def nodes(results: dict) -> int:
    """Nodes per server: 1, or a local cluster's N (`bench/run --nodes N`)."""
    return int(results.get("nodes") or 1)


def ratio_rows(results: dict) -> list[dict]:
    """One row per workload and metric: the three values and the two ratios."""
    s = summary(results)
    half = _half_fraction(results)
    half_text = "50%" if half is None else f"{half:.0%}"
    n = nodes(results)
    rows = []
    for workload in results["workloads"]:
        for key, label, unit, higher_better in METRICS:
            label = label.format(half=half_text)
            if n > 1 and key in ("cpu_us_per_op", "peak_rss_mib"):
                label += f", {n} nodes together"
            values = {srv: s.get((workload, srv), {}).get(key) for srv in SERVERS}
            unsustained = [] if key not in ("p99_ms", "cpu_us_per_op") else [
                srv for srv in SERVERS
                if not s.get((workload, srv), {}).get("mid_sustained", True)]
            rows.append({
                "unsustained": unsustained,
                "workload": workload, "metric": key, "label": label, "unit": unit,
                "higher_is_better": higher_better, "values": values,
                "helenus_vs_cassandra": _ratio(values["helenus"], values["cassandra"]),
                "helenus_vs_ceiling": _ratio(values["helenus"], values["ceiling"]),
                "ceiling_vs_cassandra": _ratio(values["ceiling"], values["cassandra"]),
            })
    return rows


def _fmt_value(value, unit) -> str:
    if value is None:
        return "—"
    if unit in ("ops/s", "MiB"):
        return f"{value:,.0f} {unit}"
    if value >= 100:
        return f"{value:,.0f} {unit}"
    if value >= 10:
        return f"{value:.1f} {unit}"
    return f"{value:.2f} {unit}"


def _fmt_ratio(value, better: bool | None = None) -> str:
    if value is None:
        return "—"
    # Two decimals, but two significant digits for ratios below 0.1 (0.0050×, not 0.00×).
    text = f"{value:.2f}×" if value >= 0.1 else f"{value:.2g}×"
    return f"**{text}**" if better else text


def ratio_table_markdown(results: dict) -> str:
    cluster = nodes(results) > 1
    if cluster:
        # Local clusters: no ceiling (one process answering without executing has no place
        # among replicated clusters).
        lines = ["| workload | metric | Cassandra | Helenus | Helenus ÷ Cassandra |",
                 "|---|---|--:|--:|--:|"]
    else:
        lines = [
            "| workload | metric | Cassandra | Helenus | ceiling | Helenus ÷ Cassandra "
            "| Helenus ÷ ceiling | ceiling ÷ Cassandra |",
            "|---|---|--:|--:|--:|--:|--:|--:|",
        ]
    for row in ratio_rows(results):
        r = row["helenus_vs_cassandra"]
        better = r is not None and (r > 1 if row["higher_is_better"] else r < 1)
        arrow = "↑" if row["higher_is_better"] else "↓"
        cells = {srv: _fmt_value(row["values"][srv], row["unit"])
                 + (" †" if srv in row["unsustained"] else "") for srv in SERVERS}
        if cluster:
            lines.append(f"| {row['workload']} | {row['label']} {arrow} "
                         f"| {cells['cassandra']} | {cells['helenus']} "
                         f"| {_fmt_ratio(r, better)} |")
            continue
        lines.append(
            f"| {row['workload']} | {row['label']} {arrow} "
            f"| {cells['cassandra']} | {cells['helenus']} | {cells['ceiling']} "
            f"| {_fmt_ratio(r, better)} | {_fmt_ratio(row['helenus_vs_ceiling'])} "
            f"| {_fmt_ratio(row['ceiling_vs_cassandra'])} |")
    return "\n".join(lines)


# The speed targets of the benchmark issue's first round: (text, workloads (None: every one),
# metric, which ratio, bound, whether the ratio must be at least the bound (else at most),
# whether the ceiling bounds it). The ceiling does no work, so its ratio to Cassandra is the
# best any server could reach for throughput and p99 (not for memory: it holds no data); where
# it misses such a bound, no server could have met that target in the run, and the report
# says so.
TARGETS = (
    ("throughput ≥ 3× Cassandra's", ("write", "read"), "throughput",
     "helenus_vs_cassandra", 3.0, True, True),
    ("p99 at the 50% rate ≤ ⅓ of Cassandra's", None, "p99_ms",
     "helenus_vs_cassandra", 1 / 3, False, True),
    ("throughput ≥ 0.5× the ceiling's", ("write", "read"), "throughput",
     "helenus_vs_ceiling", 0.5, True, False),
    ("peak RSS ≤ ¼ of Cassandra's", None, "peak_rss_mib",
     "helenus_vs_cassandra", 0.25, False, False),
)


# The targets of the 3-node round (`bench/run --nodes 3`; the same shape as TARGETS): Helenus's
# CPU per replicated write, all nodes together, at most a quarter of Cassandra's.
CLUSTER_TARGETS = (
    ("server CPU per replicated write (all nodes) ≤ ¼ of Cassandra's", ("write",),
     "cpu_us_per_op", "helenus_vs_cassandra", 0.25, False, False),
)


def target_rows(results: dict) -> list[dict]:
    """One row per target and workload: the ratio, and "met", "missed", "out of reach" (missed,
    and the ceiling's own ratio misses the bound too) or "no data"."""
    by_key = {(r["workload"], r["metric"]): r for r in ratio_rows(results)}
    rows = []
    targets = CLUSTER_TARGETS if nodes(results) > 1 else TARGETS
    for text, workloads, metric, ratio_key, bound, at_least, ceiling_bounds in targets:
        def meets(x):
            return x >= bound if at_least else x <= bound
        for workload in results["workloads"]:
            if workloads is not None and workload not in workloads:
                continue
            row = by_key.get((workload, metric), {})
            value = row.get(ratio_key)
            ceiling = row.get("ceiling_vs_cassandra")
            if value is None:
                verdict = "no data"
            elif meets(value):
                verdict = "met"
            elif ceiling_bounds and ceiling is not None and not meets(ceiling):
                verdict = "out of reach"
            else:
                verdict = "missed"
            rows.append({"target": text, "workload": workload, "ratio": value,
                         "verdict": verdict, "ceiling_vs_cassandra": ceiling})
    return rows


def targets_markdown(results: dict) -> list[str]:
    lines = ["| target | workload | Helenus | result |", "|---|---|--:|---|"]
    for t in target_rows(results):
        verdict = {"met": "**met**", "missed": "missed", "no data": "no data"}.get(t["verdict"])
        if t["verdict"] == "out of reach":
            verdict = (f"missed; out of reach in this run: the ceiling's own ratio was "
                       f"{_fmt_ratio(t['ceiling_vs_cassandra'])}")
        lines.append(f"| {t['target']} | {t['workload']} | {_fmt_ratio(t['ratio'])} "
                     f"| {verdict} |")
    return lines


def _run_label(r: dict) -> str:
    """A run as the report names it: `saturation`, or its rate as a fraction (`50% rate`)."""
    return "saturation" if r["kind"] == "saturation" else f"{r['fraction']:.0%} rate"


# Busy CPU outside the suite's processes (cores) above which a run is flagged.
OTHER_LOAD_SUSPECT_CORES = 0.2


def loaded_runs(results: dict) -> list[str]:
    """The runs with more than `OTHER_LOAD_SUSPECT_CORES` of other load, as
    `server workload run` labels."""
    out = []
    for r in results["runs"]:
        m = r.get("metrics") or {}
        if (m.get("background_cores") or 0) > OTHER_LOAD_SUSPECT_CORES:
            out.append(f"{r['server']} {r['workload']} {_run_label(r)}")
    return out


def geometric_means(results: dict) -> dict:
    """Helenus ÷ Cassandra per metric, geometric mean over the workloads that have both."""
    out = {}
    for key, *_ in METRICS:
        ratios = [r["helenus_vs_cassandra"] for r in ratio_rows(results)
                  if r["metric"] == key and r["helenus_vs_cassandra"]]
        out[key] = (math.exp(sum(math.log(x) for x in ratios) / len(ratios)), len(ratios)) \
            if ratios else (None, 0)
    return out


# -- plots ------------------------------------------------------------------------------------

def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _servers_present(results) -> list[str]:
    present = {r["server"] for r in results["runs"]}
    return [s for s in SERVERS if s in present]


def plot_bars(results: dict, path: Path, metric: str, ylabel: str, title: str,
              log: bool = False) -> None:
    plt = _plt()
    s = summary(results)
    workloads = list(results["workloads"])
    present = _servers_present(results)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.9 * len(workloads) + 2), 4.2))
    width = 0.8 / max(len(present), 1)
    for i, server in enumerate(present):
        xs, ys = [], []
        for j, w in enumerate(workloads):
            v = s.get((w, server), {}).get(metric)
            if v is not None:
                xs.append(j + (i - (len(present) - 1) / 2) * width)
                ys.append(v)
        bars = ax.bar(xs, ys, width, label=LABELS[server], color=COLORS[server])
        for bar, y in zip(bars, ys):
            ax.annotate(f"{y:,.0f}" if y >= 10 else f"{y:.2f}",
                        (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                        ha="center", va="bottom", fontsize=7, xytext=(0, 1),
                        textcoords="offset points")
    ax.set_xticks(range(len(workloads)), workloads)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if log and ax.has_data():
        ax.set_yscale("log")
    ax.grid(axis="y", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _thousands(value, _pos) -> str:
    return f"{value / 1000:g}k" if value >= 1000 else f"{value:g}"


def plot_latency(results: dict, workload: str, path: Path) -> None:
    """p50, p99 and p99.9 against the offered rate: one panel per percentile, one line per
    server through its fixed-rate runs; the saturation run as a hollow marker at the
    throughput it reached."""
    plt = _plt()
    from matplotlib import ticker

    present = _servers_present(results)
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2), sharey=True)
    for ax, (key, name) in zip(axes, (("p50_ms", "p50"), ("p99_ms", "p99"),
                                      ("p999_ms", "p99.9"))):
        for server in present:
            runs = [r for r in results["runs"] if r["workload"] == workload
                    and r["server"] == server and r["metrics"]]
            by_rate = {}
            for r in runs:
                if r["kind"] == "rate":
                    by_rate.setdefault(r["target_rate"], []).append(r)
            rates = sorted(by_rate)
            if rates:
                # The line goes through each rate's median; a rate run more than once also
                # shows each run as a dot.
                ax.plot(rates, [_median(by_rate[x], key) for x in rates], marker="o",
                        color=COLORS[server], label=LABELS[server])
                repeated = [(x, r["metrics"][key]) for x in rates if len(by_rate[x]) > 1
                            for r in by_rate[x]]
                if repeated:
                    ax.plot(*zip(*repeated), marker=".", markersize=4, linestyle="none",
                            color=COLORS[server], alpha=0.6)
            for r in runs:
                if r["kind"] == "saturation":
                    ax.plot([r["metrics"]["throughput"]], [r["metrics"][key]], marker="D",
                            markerfacecolor="none", color=COLORS[server], linestyle="none",
                            label=f"{LABELS[server]} saturation")
        ax.set_title(name)
        ax.set_xlabel("offered rate (ops/s, log); ◇ = saturation throughput")
        if ax.has_data():
            # Log scales: the ceiling's saturation throughput is many times the others'.
            ax.set_yscale("log")
            ax.set_xscale("log")
            ax.xaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
            ax.xaxis.set_major_formatter(ticker.FuncFormatter(_thousands))
            ax.xaxis.set_minor_formatter(ticker.NullFormatter())
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel("cycle latency (ms)")
    if axes[0].get_legend_handles_labels()[0]:
        axes[0].legend(fontsize=7)
    fig.suptitle(f"{results['workloads'][workload]['title']}: latency vs rate")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- the report ---------------------------------------------------------------------------------

def _mib(b):
    return "—" if b is None else f"{b / 2**20:,.0f} MiB"


def _gib(b):
    return "—" if not b else f"{b / 2**30:.1f} GiB"


def _details_rows(results) -> list[str]:
    lines = [
        "| server | workload | run | offered ops/s | achieved ops/s | p50 ms | p99 ms "
        "| p99.9 ms | errors | server CPU µs/op | server cores | client cores "
        "| other load (cores) | peak RSS |",
        "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    def rate_key(r):
        return r["server"], r["workload"], r["fraction"]

    # Grouped by server, then workload (the suite interleaves the servers' runs); in the
    # order they ran within each.
    server_rank = {name: i for i, name in enumerate(results.get("servers", {}))}
    workload_rank = {name: i for i, name in enumerate(results.get("workloads", {}))}
    runs = sorted(results["runs"], key=lambda r: (server_rank.get(r["server"], len(server_rank)),
                                                   workload_rank.get(r["workload"], 0)))
    count = Counter(rate_key(r) for r in runs)
    nth = Counter()
    for r in runs:
        run = _run_label(r)
        nth[rate_key(r)] += 1
        if r["kind"] != "saturation" and count[rate_key(r)] > 1:
            run += f" ({nth[rate_key(r)]} of {count[rate_key(r)]})"
        offered = "max" if r["target_rate"] is None else f"{r['target_rate']:,.0f}"
        if r["metrics"] and not _sustained(r):
            offered += " †"
        m = r["metrics"]
        if not m:
            lines.append(f"| {r['server']} | {r['workload']} | {run} | {offered} "
                         f"| failed: {_md_escape(r.get('error') or '')[:160]} "
                         "| | | | | | | | | |")
            continue

        def f(x, spec=".2f"):
            return "—" if x is None else format(x, spec)

        client_cores = m["client_cpu_s"] / m["elapsed_s"] if m["elapsed_s"] else None
        lines.append(
            f"| {r['server']} | {r['workload']} | {run} | {offered} "
            f"| {m['throughput']:,.0f} | {f(m['p50_ms'])} | {f(m['p99_ms'])} "
            f"| {f(m['p999_ms'])} | {m['errors']} | {f(m['cpu_us_per_op'], '.1f')} "
            f"| {f(m['server_cores'])} | {f(client_cores)} | {f(m['background_cores'])} "
            f"| {_mib(r.get('server_peak_rss_bytes'))} |")
    return lines


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _time_rows(results) -> list[str]:
    lines = ["| server | start and warm-up | setup (schema, load, flush, warm, compactions) "
             "| measured runs | stop "
             "| total |", "|---|--:|--:|--:|--:|--:|"]
    for server in SERVERS:
        steps = [s for s in results["steps"] if s["server"] == server]
        if not steps:
            continue
        start = sum(s["seconds"] for s in steps if s["step"] in ("start", "server warm-up"))
        stop = sum(s["seconds"] for s in steps if s["step"] == "stop")
        setup = sum(s["seconds"] for s in steps
                    if s["step"] in ("schema", "load", "flush", "warm", "settle"))
        runs = sum(s["seconds"] for s in steps if s["step"] == "saturation"
                   or s["step"].startswith("rate"))
        lines.append(f"| {LABELS[server]} | {start:.0f} s | {setup:.0f} s | {runs:.0f} s "
                     f"| {stop:.0f} s | {start + setup + runs + stop:.0f} s |")
    return lines


def generate(out_dir: Path) -> Path:
    out_dir = Path(out_dir)
    results = load(out_dir)
    plot_bars(results, out_dir / "throughput.png", "throughput", "ops/s",
              "Saturation throughput (higher is better)")
    half = _half_fraction(results)
    plot_bars(results, out_dir / "cpu-per-op.png", "cpu_us_per_op", "server CPU µs per op",
              f"Server CPU per operation at {half or HALF:.0%} rate (lower is better)", log=True)
    plot_bars(results, out_dir / "peak-rss.png", "peak_rss_mib", "MiB",
              "Server peak RSS per workload (lower is better)", log=True)
    for workload in results["workloads"]:
        plot_latency(results, workload, out_dir / f"latency-{workload}.png")
    text = render(results)
    path = out_dir / "report.md"
    path.write_text(text)
    return path


READAMP_LABELS = {"helenus": "Helenus", "cassandra": "Cassandra"}


def readamp_rows(readamp: dict) -> list[str]:
    """The read-amplification section: disk bytes per point read (the server process's
    /proc/<pid>/io read_bytes) per read_ahead_kb value, for each server measured, and
    Cassandra's over Helenus's where both measured a value."""
    L = [
        "Uniform random point reads of a standard1 table 10-12x the cache, after a warm-up "
        "(`bench/readamp.py`, `bench/readamp_cassandra.py`; see bench/README.md). Cassandra "
        "reads through the page cache, which a memory cgroup bounds; Helenus reads with "
        "direct I/O through its block cache.",
        "",
        "| server | data set | cache | read_ahead_kb | reads | disk bytes per read | x 4 KiB |",
        "|---|--:|---|--:|--:|--:|--:|",
    ]
    per_read = {}
    for name in ("helenus", "cassandra"):
        r = readamp.get(name)
        if r is None:
            continue
        label = READAMP_LABELS[name]
        if r.get("error") and not r.get("phases"):
            L.append(f"| {label} | failed: {_md_escape(r['error'])} | | | | | |")
            continue
        data = (f"{_mib(r['dataset_bytes'])} ({r['rows']:,} rows)"
                if r.get("dataset_bytes") else "?")
        for p in r["phases"]:
            value = p["disk_bytes_per_read"]
            per_read[(name, p["read_ahead_kb"])] = value
            L.append(f"| {label} | {data} | {r['cache']} | {p['read_ahead_kb']} | "
                     f"{p['reads']:,} | {value:,.0f} | {value / 4096:.2f} |")
        if r.get("error"):
            L.append(f"| {label} | error: {_md_escape(r['error'])} | | | | | |")
    both = sorted(ra for (name, ra) in per_read if name == "helenus"
                  and ("cassandra", ra) in per_read and per_read[(name, ra)])
    if both:
        L.append("")
        L.append("Cassandra ÷ Helenus, disk bytes per read: " + ", ".join(
            f"**{per_read[('cassandra', ra)] / per_read[('helenus', ra)]:.1f}×** at "
            f"read_ahead_kb {ra}" for ra in both) + ".")
    return L


def _half_runs_text(results: dict, half: float) -> str:
    n = results["profile"].get("half_runs", 1)
    if n > 1:
        return (f"the median over the {n} runs at the {half:.0%} fixed rate (each server's "
                "own median, of each metric; every run is in *Every run*)")
    return f"the {half:.0%} fixed-rate run"


def _order_text(results: dict) -> str:
    if results.get("order") == "interleaved":
        return ("One machine, the servers up side by side and measured one at a time (the "
                "others paused with SIGSTOP): each workload's saturation runs, then each fixed "
                "rate, go to every server in turn, so a drift in this shared machine's speed "
                "reaches every server's runs alike.")
    return "One machine, one server at a time (each server's runs one after another)."


def _warmup_text(prof: dict) -> str:
    minimum = prof.get("server_warmup_s", 0)
    most = prof.get("server_warmup_max_s", 0)
    if most <= 0:
        return (f"Before its first workload each server gets {minimum} s of the mixed "
                "workload, unmeasured, so Cassandra's JIT has compiled its hot paths.")
    return (f"Before its first workload each server runs the mixed workload, unmeasured, in "
            f"rounds of {prof.get('server_warmup_round_s')} s until its throughput stops rising "
            f"(at least {minimum} s; then until {WARMUP_FLAT_ROUNDS} rounds in a row are no more "
            f"than {WARMUP_GAIN:.0%} above the best round before them; at most {most} s), so "
            "Cassandra's JIT has compiled its hot paths: on two cores a cold Cassandra took "
            "minutes to reach its steady throughput. *Servers* gives each round's throughput.")


def _warmup_cell(si: dict) -> str:
    w = si.get("warmup")
    if not w:
        return ""
    rounds = w.get("rounds") or []
    ended = {"flat": "stopped rising", "cap": "the limit", "failed": "failed"}.get(
        w.get("ended"), str(w.get("ended")))
    return (f"{len(rounds) * w.get('round_s', 0)} s ({ended}): "
            + ", ".join(f"{t:,.0f}" for t in rounds))


def render(results: dict) -> str:
    m = results["machine"]
    v = results["versions"]
    prof = results["profile"]
    client = results["client"]
    half = _half_fraction(results)
    gm = geometric_means(results)
    servers_info = results["servers"]
    L = []
    L.append(f"# Helenus benchmark: {results.get('started', '')}")
    L.append("")
    status = results.get("status", "")
    if status != "complete":
        L.append(f"**This suite did not complete (status: {status}); the tables show what ran.**")
        L.append("")
    L.append(
        f"Profile `{prof['name']}`: {prof['duration_s']} s per measured run, fixed rates at "
        + ", ".join(f"{f:.0%}" for f in prof["rate_fractions"])
        + " of Cassandra's saturation throughput"
        + (f" (the {half:.0%} rate {prof['half_runs']} times)"
           if half is not None and prof.get("half_runs", 1) > 1 else "")
        + ". " + _order_text(results) + " The "
        "latte client on the same cores: numbers are **noisy** (see *Noise* below), compare "
        "ratios rather than absolute values.")
    L.append("")
    n_nodes = nodes(results)
    if n_nodes > 1:
        L.append(
            f"**Local clusters of {n_nodes} nodes**, Cassandra's (`scripts/cassandra.sh cluster "
            f"start --nodes {n_nodes}`) and Helenus's (`helenus cluster start --nodes "
            f"{n_nodes}`), node K on 127.0.0.K, every node of both on this machine's "
            f"{results['machine'].get('logical_cpus', '?')} cores with the client: keyspaces "
            f"with replication factor {results.get('replication_factor', '?')}, every request "
            f"at consistency {client['consistency']}, the client connected to every node. A "
            "server's CPU per op and peak RSS are its nodes' processes' summed; a measured "
            "cluster's nodes all run while the other cluster's are paused.")
        L.append("")
    parts = []
    for key, label, _unit, higher in METRICS:
        value, n = gm[key]
        if value is not None:
            label = label.format(half="50%" if half is None else f"{half:.0%}")
            parts.append(f"{label} **{value:.2f}×**")
    if parts:
        L.append("**Helenus ÷ Cassandra, geometric mean over the workloads:** " + ", ".join(parts)
                 + ". (Throughput: higher is better; the others: lower is better.)")
        L.append("")
    loaded = loaded_runs(results)
    if loaded:
        L.append(f"**Warning: {len(loaded)} of {len(results['runs'])} runs had more than "
                 f"{OTHER_LOAD_SUSPECT_CORES} cores of other load** (processes outside the suite "
                 "busy on this machine; *other load* in *Every run*): "
                 + ", ".join(loaded[:8]) + (", ..." if len(loaded) > 8 else "")
                 + ". Their numbers, and the rates derived from them, are suspect.")
        L.append("")
    L.append("## Ratios")
    L.append("")
    L.append(ratio_table_markdown(results))
    L.append("")
    L.append(
        "↑ higher is better, ↓ lower is better; a **bold** Helenus ÷ Cassandra ratio is one "
        "where Helenus is better. Throughput: the saturation run. p99 (cycle latency, "
        f"queueing included) and CPU per op: {_half_runs_text(results, half)}, the same "
        "offered load for every server. CPU per op: the server process's user + system CPU time "
        "(/proc/<pid>/stat"
        + (", summed over the nodes" if n_nodes > 1 else "")
        + ") during the measured phase ÷ operations. Peak RSS: VmHWM"
        + (" summed over the nodes" if n_nodes > 1 else "")
        + " while the workload ran, load and warm pass included. † the server did not sustain "
        f"that rate (it achieved under {SUSTAINED_FRACTION:.0%} of it), so its latency there "
        "is mostly queueing."
        + ("" if n_nodes > 1 else " The ceiling answers without executing "
        "(what the client and loopback cost): Helenus ÷ ceiling throughput is the fraction of "
        "the reachable maximum, and ceiling ÷ Cassandra p99 is the lowest Helenus ÷ Cassandra "
        "p99 any server could have reached in this run (a server that did no work at all): "
        "read a p99 ratio against it, as Cassandra's p99 varies from run to run far more than "
        "the ceiling's.") if half is not None else
        "↑ higher is better, ↓ lower is better. No fixed-rate runs, so no p99 or CPU per op.")
    L.append("")
    L.append("## Targets")
    L.append("")
    if n_nodes > 1:
        L.append(f"The targets of the benchmark issue's {n_nodes}-node round, as ratios of this "
                 "run.")
    else:
        L.append("The speed targets of the benchmark issue's first round, as ratios of this "
                 "run (\"out of reach\": not even the ceiling, which does no work, met the "
                 "bound).")
    L.append("")
    L.extend(targets_markdown(results))
    L.append("")
    rb = results.get("rate_base") or {}
    others = {w: b for w, b in rb.items() if b["server"] != "cassandra"}
    if others:
        L.append("Fixed rates of " + ", ".join(
            f"`{w}` are fractions of {LABELS[b['server']]}'s saturation throughput "
            f"({b['throughput']:,.0f} ops/s)" for w, b in others.items())
            + ", as Cassandra's saturation run did not complete.")
        L.append("")
    L.append("## Plots")
    L.append("")
    L.append("![throughput](throughput.png)")
    L.append("")
    for workload in results["workloads"]:
        L.append(f"![latency {workload}](latency-{workload}.png)")
        L.append("")
    L.append("![cpu per op](cpu-per-op.png) ![peak rss](peak-rss.png)")
    L.append("")
    if results.get("readamp"):
        L.append("## Read amplification")
        L.append("")
        L.extend(readamp_rows(results["readamp"]))
        L.append("")
    L.append("## Workloads")
    L.append("")
    for name, w in results["workloads"].items():
        params = ", ".join(f"{k}={v:,}" if isinstance(v, int) else f"{k}={v}"
                           for k, v in w["params"].items())
        L.append(f"- **{name}** (`{w['script']}`, `{' '.join(w['functions'])}`; {params}): "
                 f"{w['description']}")
    L.append("")
    L.append(
        f"Client (the same for every server and run): latte, {client['threads']} thread(s), "
        f"{client['connections']} connection(s), {client['concurrency']} requests in flight "
        f"per thread, consistency {client['consistency']}, request timeout "
        f"{client['request_timeout']}, prepared statements. Each measured run follows an "
        f"unmeasured warm-up of {prof['warmup_s']} s (at a fixed rate: the cycles that rate "
        "gives in that time). Read workloads are loaded, flushed (nodetool flush / helenus "
        "admin flush) and read once in full before their runs, so the data set is in the "
        "server's cache (Cassandra: the page cache; Helenus: its block cache). "
        + _warmup_text(prof)
        + (" The ceiling stores nothing, so it is neither warmed up nor loaded."
           if "ceiling" in servers_info else ""))
    L.append("")
    L.append("## Machine")
    L.append("")
    disk = m.get("disk", {})
    disk_text = ", ".join(str(x) for x in (
        disk.get("source"), disk.get("filesystem"), disk.get("model"),
        None if "rotational" not in disk else
        f"queue/rotational={int(disk['rotational'])} (virtual disks often claim 1)",
        _gib(disk.get("size_bytes")) if disk.get("size_bytes") else None) if x)
    L.append(f"- CPU: {m['cpu_model']}, {m['logical_cpus']} logical CPUs "
             f"({m['cpus_available']} available to the harness)")
    L.append(f"- Memory: {_gib(m['memory_bytes'])}")
    L.append(f"- Kernel: {m['kernel']}")
    L.append(f"- Disk (servers' data, `{disk.get('path', '')}`): {disk_text}")
    la = m.get("load_average_at_start")
    if la:
        L.append(f"- Load average when the suite started: {la[0]:.2f} {la[1]:.2f} {la[2]:.2f}")
    L.append("")
    L.append("## Versions")
    L.append("")
    binaries = results.get("binaries", {})
    if "helenus" in servers_info:
        built = binaries.get("helenus_built")
        origin = ("built by the harness from this tree" if built else
                  "given with --helenus-bin: its commit may differ from the tree's")
        L.append(f"- Helenus: `{servers_info['helenus'].get('version', '')}`, "
                 f"`{binaries.get('helenus', '')}` ({origin})")
    L.append(f"- This tree (harness and workloads): git {v['git_commit']}")
    if "cassandra" in servers_info:
        ci = servers_info["cassandra"]
        L.append(f"- Apache Cassandra {ci.get('version', '?')} (scripts/cassandra.sh), JVM: "
                 f"{v.get('java', '')}, heap {ci.get('heap', '?')} (-Xms = -Xmx)"
                 + (" per node" if nodes(results) > 1 else ""))
    L.append(f"- latte: {v['latte']}")
    L.append(f"- rustc: {v.get('rustc', '')}")
    L.append("")
    L.append("## Servers")
    L.append("")
    L.append("| server | status | address | peak RSS (whole suite) | warm-up: mixed ops/s per "
             "round | started with |")
    L.append("|---|---|---|--:|---|---|")
    for name in SERVERS:
        if name not in servers_info:
            continue
        si = servers_info[name]
        state = si.get("status", "")
        if si.get("error"):
            state += ": " + _md_escape(si["error"])[:200]
        L.append(f"| {LABELS[name]} | {state} | {si.get('address', '')} "
                 f"| {_mib(si.get('peak_rss_bytes'))} | {_warmup_cell(si)} "
                 f"| `{si.get('command', '')}` |")
    L.append("")
    if "cassandra" in servers_info:
        L.append(
            "Cassandra's RSS is the JVM's: the heap pages it has touched (up to -Xmx, and G1 "
            "rarely gives them back), off-heap memtable and buffer space, metaspace, code "
            "cache and thread stacks; its page cache use is not counted, as Helenus's block "
            "cache is.")
        L.append("")
    L.append("## Every run")
    L.append("")
    L.extend(_details_rows(results))
    L.append("")
    L.append(
        "*server cores* / *client cores*: CPU time ÷ elapsed time of the measured phase; "
        "*other load*: the rest of the machine's busy CPU in that phase (other processes on "
        f"this shared machine): runs with more than {OTHER_LOAD_SUSPECT_CORES} cores of it are "
        "suspect.")
    L.append("")
    L.append("## Noise")
    L.append("")
    L.append(
        "Each number is one run on one machine that may be shared with other work (the ratios' p99"
        " and CPU per op: the median of the runs at that rate, when it ran more than once). The "
        "client (latte) and the server share the same cores, so a server that leaves the client "
        "less CPU loses throughput for it; the ceiling shows where that limit is. Runs are short "
        "(especially with `--quick`): treat differences under ~20% as noise unless they repeat. "
        "The latte JSON reports in `latte/` carry error margins for throughput and latency "
        "(`gunzip -k FILE.json.gz && latte show FILE.json`).")
    L.append("")
    L.append("## Where the time went")
    L.append("")
    L.extend(_time_rows(results))
    L.append("")
    if results.get("build_seconds"):
        L.append(f"Release build: {results['build_seconds']:.0f} s. ")
    if results.get("total_seconds") is not None:
        L.append(f"Whole suite: {results['total_seconds']:.0f} s.")
    L.append("")
    L.append("## Commands")
    L.append("")
    L.append("```")
    L.append(results["command"])
    L.append("```")
    L.append("")
    L.append("<details><summary>Every latte command of the measured runs</summary>")
    L.append("")
    L.append("```")
    for r in results["runs"]:
        L.append(r["command"])
    L.append("```")
    L.append("")
    L.append("</details>")
    L.append("")
    L.append("Logs (latte's output per server and workload, the servers' logs) are in `logs/`, "
             "latte's JSON reports in `latte/` (gzipped), everything above in `results.json`.")
    L.append("")
    return "\n".join(L)
