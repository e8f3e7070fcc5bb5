"""Runs of ``tests/cluster/connect/connect_scenarios.py``: a Spark Connect client process of its own,
against a local Connect server it starts over ``local-cluster[2,1,1024]``.

CI's scenarios start with the session (``tests/conftest.py``'s ``connect_ci_run``): the run is a
Spark application of its own, which needs nothing from the suite's shared Spark, so it goes on
while the unit tests (one core) take the session's first minute, and ``test_connect.py`` only
reads its outcome when its turn comes, last of all. On this 2-core machine that takes about a
minute off the suite.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

SCENARIOS_SCRIPT = Path(__file__).resolve().parents[1] / "cluster" / "connect" / "connect_scenarios.py"

#: The scenarios CI runs, on one Connect server. TFEstimator/TFModel under Connect (27 s here: a
#: TF node, then TensorFlow imported on both executors to score) is the slow tier's: their one
#: Connect-specific line takes the DataFrame's session, and what they run on it, TFCluster's
#: training and the inference UDF under Connect, is proven here.
CI_SCENARIOS = [
    "tensorflow_mode",
    "spark_mode_training",
    "spark_mode_inference",
    "failure_report",
    "parallel",
    "inference_udf",
]

#: The longest a run may take, its Connect server's start included.
RUN_TIMEOUT_S = 840


class ConnectRun:
    """One client process running ``names`` into ``out``; :meth:`outcome` waits for it."""

    def __init__(self, out: Path, names: list[str]):
        self.out = out
        self._stderr_path = out / "client.stderr"  # a file, not a pipe: nobody reads it while the client runs
        with open(self._stderr_path, "wb") as stderr:
            self._process = subprocess.Popen(
                [sys.executable, str(SCENARIOS_SCRIPT), str(out), *names],
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                cwd=out,
                start_new_session=True,  # its own process group: the Connect server's JVM ends with it
            )

    def outcome(self) -> tuple[Path, dict, str]:
        """``(out, results, the client's stderr)`` once the client has ended (killed past RUN_TIMEOUT_S)."""
        try:
            self._process.wait(timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.stop()
        stderr = self._stderr_path.read_text(errors="replace")
        results_file = self.out / "results.json"
        assert results_file.exists(), f"the Connect client failed before any scenario ran:\n{stderr[-6000:]}"
        return self.out, json.loads(results_file.read_text()), stderr

    def stop(self) -> None:
        """End the client and what it started if it still runs (past its time, or the session ended first)."""
        if self._process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait()
