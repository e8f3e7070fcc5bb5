"""Every README code block that claims to run (a ```` ```python ```` fence) runs as pasted, and the
quickstart's console shows no Python warning from the nodes.

The blocks run as a user runs them: a fresh process of the project's Python started by its path
(``.venv/bin/python``), without activating its virtual environment (no ``VIRTUAL_ENV``, its
``bin/`` not on ``PATH``) and with none of the suite's set-up (no test folders on ``PYTHONPATH``),
in an empty working directory. They run one after another in that one process, so they share one
Spark application (``local-cluster[2,1,1024]``, started by the first block's ``getOrCreate()``):
each block is compiled and run as its own ``__main__`` program, and the ``spark.stop()`` each ends
with is deferred to the end (``readme_blocks.py``). Only the suite's JVM flags (``SPARK_CONF_DIR``)
are kept. The node warnings counted are ``node_warnings.py``'s.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from node_warnings import node_warnings

from readme_blocks import runnable_blocks, runner_program

ROOT = Path(__file__).resolve().parents[3]
#: The blocks take 1-2 minutes on 2 idle cores (about 4 under a loaded machine's contention); a
#: hung block fails the test, with the output so far, well before pytest's own limit.
README_TIMEOUT_S = 480
pytestmark = [pytest.mark.timeout(README_TIMEOUT_S + 60), pytest.mark.cluster]


def _users_environment() -> dict[str, str]:
    """This environment as a user's shell has it when they run the venv's Python by its path, the
    venv not activated."""
    venv_bin = Path(sys.executable).parent
    drop = ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    path = [entry for entry in env.get("PATH", "").split(os.pathsep) if entry and Path(entry) != venv_bin]
    env["PATH"] = os.pathsep.join(path)
    # Until TFCluster.run gives a local master's executors the driver's Python, the executors would
    # run python3 from PATH: name the venv's, as spark-submit's spark.pyspark.python would.
    env["PYSPARK_PYTHON"] = sys.executable
    return env


def _block_output(output: str, number: int) -> str:
    """What the console showed while README block ``number`` (1-based) ran, between the runner's lines."""
    start = re.search(rf"README block {number} \(line \d+\): running\n", output)
    end = re.search(rf"README block {number} \(line \d+\): ok in ", output)
    assert start and end, output[-3000:]
    return output[start.end() : end.start()]


def test_every_runnable_readme_block_runs_as_pasted(tmp_path):
    blocks = runnable_blocks((ROOT / "README.md").read_text())
    assert len(blocks) >= 5, [block.line for block in blocks]
    program = tmp_path / "readme_blocks_run.py"
    program.write_text(runner_program(blocks))
    work = tmp_path / "work"
    work.mkdir()
    log = tmp_path / "readme_blocks.log"
    with open(log, "w") as out:
        process = subprocess.Popen(
            [sys.executable, "-u", str(program)],
            cwd=work,
            env=_users_environment(),
            stdout=out,
            stderr=out,
            start_new_session=True,  # its own process group: a timeout stops its Spark JVMs and TF nodes too
        )
        try:
            returncode = process.wait(timeout=README_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            pytest.fail(f"the README blocks ran past {README_TIMEOUT_S} s:\n{log.read_text()[-6000:]}")
    output = log.read_text()
    assert returncode == 0, output[-6000:]
    ran = re.findall(r"README block (\d+) \(line (\d+)\): ok in ([0-9.]+) s", output)
    assert [int(line) for _, line, _ in ran] == [block.line for block in blocks], output[-6000:]
    print("\n".join(f"README block {n} (line {line}): {seconds} s" for n, line, seconds in ran))
    warned = {n: node_warnings(_block_output(output, n)) for n in range(1, len(blocks) + 1)}
    print("\n".join(f"README block {n}: {len(lines)} warnings from the nodes" for n, lines in warned.items()))
    assert warned[1] == [], "the quickstart's nodes warned:\n" + "\n".join(warned[1])
    # the quickstart (the first block) trains and scores: its accuracy says the model learned
    accuracy = re.search(r"accuracy: ([0-9.]+)$", output, re.M)  # after Spark's progress bar, on its line
    assert accuracy and float(accuracy.group(1)) > 0.8, output[-3000:]
    assert f"README blocks: {len(blocks)} ran; spark.stop() called {len(blocks)} times" in output
