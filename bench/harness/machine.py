"""The machine and software versions a report states next to its numbers."""

import os
import platform
import subprocess
from pathlib import Path


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def _run(cmd: list[str], cwd: Path | None = None) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=cwd)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (out.stdout.strip() or out.stderr.strip()).splitlines()[0] if (
        out.stdout.strip() or out.stderr.strip()) else ""


def cpu_model() -> str:
    for line in _read("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def memory_bytes() -> int:
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return 0


def disk_of(path: Path) -> dict:
    """The mount and block device behind `path`: source, filesystem, device model, whether it
    is rotational, its size."""
    info = {"path": str(path)}
    try:
        st = os.stat(path)
    except OSError:
        return info
    major, minor = os.major(st.st_dev), os.minor(st.st_dev)
    for line in _read("/proc/self/mountinfo").splitlines():
        fields = line.split()
        if fields[2] == f"{major}:{minor}":
            rest = fields[fields.index("-") + 1:]
            info.update(mount_point=fields[4], filesystem=rest[0], source=rest[1])
            break
    sys_dev = Path(f"/sys/dev/block/{major}:{minor}")
    if sys_dev.exists():
        dev = sys_dev.resolve()
        # A partition's queue/ and device/ are its parent disk's.
        disk = dev.parent if (dev / "partition").exists() else dev
        info["device"] = disk.name
        model = _read(str(disk / "device" / "model"))
        if model:
            info["model"] = model
        rotational = _read(str(disk / "queue" / "rotational"))
        if rotational:
            info["rotational"] = rotational == "1"
        size = _read(str(disk / "size"))
        if size.isdigit():
            info["size_bytes"] = int(size) * 512
    return info


def describe(work_dir: Path) -> dict:
    uname = platform.uname()
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = os.cpu_count()
    return {
        "cpu_model": cpu_model(),
        "logical_cpus": os.cpu_count(),
        "cpus_available": affinity,
        "memory_bytes": memory_bytes(),
        "kernel": f"{uname.system} {uname.release} {uname.version}",
        "hostname": uname.node,
        "disk": disk_of(work_dir),
        "load_average_at_start": os.getloadavg(),
    }


def git_commit(repo: Path) -> str:
    commit = _run(["git", "rev-parse", "HEAD"], cwd=repo)
    if not commit:
        return "unknown"
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, cwd=repo).stdout.strip()
    return commit + (" (with uncommitted changes)" if dirty else "")


def java_version() -> str:
    return _run(["java", "-version"])


def rustc_version() -> str:
    return _run(["rustc", "--version"])
