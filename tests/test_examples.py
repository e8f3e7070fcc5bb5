"""The examples run as users run them: as a plain script (the demo) and through spark-submit."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.timeout(600)


def _run(command: list[str], tmp_path: Path) -> str:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=540)
    assert result.returncode == 0, f"{command} failed:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    return result.stdout


def _accuracy(stdout: str) -> float:
    match = re.search(r"test accuracy \(distributed inference over (\d+) rows\): ([0-9.]+)", stdout)
    assert match, stdout
    assert int(match.group(1)) == 360
    return float(match.group(2))


def test_mnist_example_runs_with_embedded_defaults(tmp_path):
    stdout = _run([sys.executable, str(ROOT / "examples/mnist/mnist_tf.py"), "--epochs", "5",
                   "--export_dir", str(tmp_path / "export")], tmp_path)
    assert "trained on 2 TF nodes" in stdout
    assert _accuracy(stdout) > 0.85
    assert (tmp_path / "export" / "saved_model.pb").exists()


def test_mnist_spark_mode_example_trains_from_a_dataframe(tmp_path):
    stdout = _run([sys.executable, str(ROOT / "examples/mnist/mnist_spark.py"), "--epochs", "8",
                   "--export_dir", str(tmp_path / "export")], tmp_path)
    assert "from a 1437-row DataFrame" in stdout
    assert _accuracy(stdout) > 0.85


def test_mnist_example_runs_through_spark_submit(tmp_path):
    spark_submit = Path(sys.executable).parent / "spark-submit"
    stdout = _run([str(spark_submit), "--master", "local-cluster[2,1,1024]",
                   "--conf", "spark.ui.enabled=false", str(ROOT / "examples/mnist/mnist_tf.py"),
                   "--epochs", "5", "--export_dir", str(tmp_path / "export")], tmp_path)
    assert _accuracy(stdout) > 0.85
