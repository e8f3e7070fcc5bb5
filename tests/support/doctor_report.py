"""``python -m sparkdl`` (the stack report) run as users run it, in a subprocess: for the report's
checks in tests/unit/project/test_doctor.py and its ``--check-tf`` run in
tests/cluster/deployment/test_doctor_cluster.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run_doctor(
    *args: str, tmp_path: Path, env: dict[str, str] | None = None, command: list[str] | None = None, expect_rc: int = 0
) -> str:
    """The report's stdout (``command`` replaces ``python -m sparkdl ARGS``), run in ``tmp_path``;
    asserts the exit code."""
    result = subprocess.run(
        command or [sys.executable, "-m", "sparkdl", *args],
        cwd=tmp_path,
        env=env or dict(os.environ),
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert result.returncode == expect_rc, f"exit {result.returncode}\n{result.stdout}\n{result.stderr[-3000:]}"
    return result.stdout
