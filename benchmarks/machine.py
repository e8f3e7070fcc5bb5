"""What a benchmark ran on: the machine, the software stack, the commit, the load.

``describe()`` gathers what stays the same for a whole ``run_all.py`` run; ``load_average()``
is taken again before each script (the machine may be shared). The software stack comes from
``sparkdl --version``'s own report (``sparkdl.__main__.collect``), with local paths left out.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
import subprocess
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
#: A parenthesised part naming a path, e.g. "3.11.7 (/work/.venv/bin/python)": local detail, not the stack.
_PATH_PART = re.compile(r"\s*\([^()]*/[^()]*\)")


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux, else what ``platform`` knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def software_stack() -> dict[str, str]:
    """Versions of Python, PySpark, TensorFlow, Keras, Java, ..., the GPUs, and TFoS if installed."""
    from sparkdl.__main__ import collect

    rows, _ = collect()
    stack = {name: _PATH_PART.sub("", value) for name, value in rows}
    try:
        stack["tensorflowonspark"] = importlib.metadata.version("tensorflowonspark")
    except importlib.metadata.PackageNotFoundError:
        stack["tensorflowonspark"] = "not installed"
    return stack


def git_commit(root: Path = ROOT) -> str | None:
    """The short commit of the checkout at ``root`` (this one by default), with ``+changes`` when the
    tree differs from it; None outside git."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, timeout=30
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def load_average() -> float:
    """The 1-minute load average (how busy the machine was; it should be near 0 for timings)."""
    return round(os.getloadavg()[0], 2)


def describe() -> dict:
    """The machine and its software, as stored with every result."""
    return {
        "cpu": cpu_model(),
        "logical_cores": os.cpu_count(),
        "physical_cores": psutil.cpu_count(logical=False),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "os": platform.platform(),
        "stack": software_stack(),
        "commit": git_commit(),
    }
