"""Runs the launchers under $HELENUS_CACHE/venv-bench, a venv with bench/requirements.txt
(matplotlib), creating or updating it first. Standard library only: it runs under the system
Python before the venv exists."""

import os
import subprocess
import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent.parent
REQUIREMENTS = BENCH_DIR / "requirements.txt"


def cache_root() -> Path:
    return Path(os.environ.get("HELENUS_CACHE") or Path.home() / ".cache" / "helenus")


def venv_dir() -> Path:
    return cache_root() / "venv-bench"


def ensure_venv() -> None:
    """Returns if this interpreter is the bench venv's; otherwise makes the venv current (create,
    install the requirements when they changed) and re-executes the script under it."""
    venv = venv_dir()
    if os.path.realpath(sys.prefix) == os.path.realpath(venv):
        return
    if os.environ.get("HELENUS_BENCH_REEXEC") == "1":
        sys.exit(f"bench: re-executed but not running under {venv} (sys.prefix={sys.prefix})")
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"bench: creating {venv}", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    wanted = REQUIREMENTS.read_text()
    stamp = venv / ".bench-requirements"
    if not stamp.exists() or stamp.read_text() != wanted:
        print(f"bench: installing {REQUIREMENTS.name} into {venv}", file=sys.stderr)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
             "-r", str(REQUIREMENTS)],
            check=True,
        )
        stamp.write_text(wanted)
    env = dict(os.environ, HELENUS_BENCH_REEXEC="1")
    os.execve(str(python), [str(python), sys.argv[0], *sys.argv[1:]], env)
