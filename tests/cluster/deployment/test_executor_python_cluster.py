"""The executors' Python, as a user meets it: a script run with the venv's ``python`` without
activating the venv (no ``VIRTUAL_ENV``, its ``bin/`` not on ``PATH``, no ``PYSPARK_PYTHON``), so
PySpark's default executor Python would be the machine's ``python3``.

On ``local-cluster`` the executors then run the driver's interpreter and a TF node trains; pointed
at a Python without sparkdl (a fresh empty venv) through ``PYSPARK_PYTHON``, ``TFCluster.run``
fails within seconds with a PreflightError naming that interpreter and the setting, without a
Java stack. Each case is its own application in a subprocess (about 15 s of Spark start).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

#: One application: Spark's start, one TF node (TensorFlow's import and a tiny fit), Spark's stop.
APP_TIMEOUT_S = 240
#: The bound the check promises, from ``TFCluster.run`` being called to the error.
FAILS_WITHIN_S = 10.0
pytestmark = [pytest.mark.timeout(2 * APP_TIMEOUT_S + 60), pytest.mark.cluster]

SCRIPT = r"""
import sys, time
from pyspark.sql import SparkSession
from sparkdl import TFCluster


def main_fun(args, ctx):
    import numpy as np
    import keras

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    x = np.arange(32, dtype="float32").reshape(16, 2) / 32
    history = model.fit(x, x.sum(axis=1), epochs=2, verbose=0)
    return {"python": sys.executable, "loss": history.history["loss"][-1]}


spark = SparkSession.builder.master("local-cluster[1,1,1024]").config("spark.ui.enabled", "false").getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
started = time.monotonic()
try:
    cluster = TFCluster.run(spark.sparkContext, main_fun, {}, 1, input_mode=TFCluster.InputMode.TENSORFLOW)
    result = cluster.shutdown()
    print(f"TRAINED on {result['python']}: loss {result['loss']:.4f}")
except Exception as exc:
    print(f"FAILED after {time.monotonic() - started:.1f} s: {type(exc).__name__}: {exc}\nEND OF ERROR")
    sys.exit(3)
finally:
    spark.stop()
"""


def _unactivated_environment(**extra: str) -> dict[str, str]:
    """This environment as a shell that never activated the venv has it (the suite's JVM flags kept)."""
    venv_bin = str(Path(sys.executable).parent)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME") and not k.startswith("PYSPARK_")
    }
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and p != venv_bin)
    return {**env, **extra}


def _run_app(tmp_path: Path, env: dict[str, str]) -> tuple[int, str]:
    script = tmp_path / "app.py"
    script.write_text(SCRIPT)
    log = tmp_path / "app.log"
    with open(log, "w") as out:
        process = subprocess.Popen(
            [sys.executable, str(script)],  # the venv's python, by its path, as `.venv/bin/python app.py`
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: a timeout stops its Spark JVMs and TF node too
        )
        try:
            returncode = process.wait(timeout=APP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            pytest.fail(f"the application ran past {APP_TIMEOUT_S} s:\n{log.read_text()[-6000:]}")
    return returncode, log.read_text()


def test_a_script_run_with_the_venvs_python_unactivated_trains_on_local_cluster(tmp_path):
    returncode, output = _run_app(tmp_path, _unactivated_environment())
    assert returncode == 0, output[-6000:]
    trained = re.search(r"^TRAINED on (\S+): loss ([0-9.]+)$", output, re.M)
    assert trained, output[-6000:]
    assert trained.group(1) == sys.executable  # the node ran the driver's interpreter, not PATH's python3


def test_an_executor_python_without_sparkdl_fails_at_run_within_seconds_naming_it_and_the_setting(tmp_path):
    bare = tmp_path / "bare"  # a real Python of the driver's version with nothing installed: no sparkdl
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    bare_python = str(bare / "bin" / "python")
    returncode, output = _run_app(tmp_path, _unactivated_environment(PYSPARK_PYTHON=bare_python))
    assert returncode == 3, output[-6000:]
    failed = re.search(r"^FAILED after ([0-9.]+) s: PreflightError: (.*?)\nEND OF ERROR$", output, re.M | re.S)
    assert failed, output[-6000:]
    seconds, message = float(failed.group(1)), failed.group(2)
    assert seconds < FAILS_WITHIN_S, output[-6000:]
    assert "cannot import sparkdl (ModuleNotFoundError: No module named 'sparkdl')" in message, message
    assert f"executors run: {bare_python} (Python 3.{sys.version_info.minor}." in message, message
    assert "set by PYSPARK_PYTHON" in message, message  # the setting that chose it
    assert f"this driver runs: {sys.executable} " in message, message
    assert "Java" not in message and "\tat " not in message and len(message.splitlines()) <= 8, message
