"""``sparkdl --version`` / ``python -m sparkdl``: the stack report, run as users run it (a subprocess).
(``--check-tf``, which imports TensorFlow: tests/cluster/deployment/test_doctor_cluster.py.)"""

from __future__ import annotations

import importlib.metadata
import os
import re
import stat
import sys
from pathlib import Path

import pytest

import sparkdl

from doctor_report import run_doctor as _doctor

pytestmark = pytest.mark.timeout(180)

PACKAGE_DIR = Path(sparkdl.__file__).resolve().parent


def _field(report: str, name: str) -> str:
    match = re.search(rf"^{re.escape(name)}:\s+(.*)$", report, re.M)
    assert match, f"no {name!r} line in:\n{report}"
    return match.group(1)


def test_report_names_every_component_without_importing_tensorflow(tmp_path):
    code = (
        "import sys; from sparkdl.__main__ import main; rc = main([]); "
        "print('TF IMPORTED' if 'tensorflow' in sys.modules else 'tf not imported'); sys.exit(rc)"
    )
    report = _doctor(tmp_path=tmp_path, command=[sys.executable, "-c", code])
    assert report.splitlines()[-1] == "tf not imported", report
    assert _field(report, "sparkdl") == f"{sparkdl.__version__} (sparkdl-tf {sparkdl.__version__}, {PACKAGE_DIR})"
    assert _field(report, "python").endswith(f"({sys.executable})")
    import pyspark

    assert _field(report, "pyspark").startswith(pyspark.__version__)
    for name in ("tensorflow", "tf-keras", "keras", "pyarrow", "pandas", "numpy", "java", "gpus", "node keras"):
        assert _field(report, name), name
    assert re.search(r"version \"\d+", _field(report, "java")), report


def test_another_sparkdl_distribution_is_reported(tmp_path):
    """PyPI's sparkdl (Databricks' spark-deep-learning) installed beside sparkdl-tf: its module clashes."""
    info = tmp_path / "sparkdl-0.2.2.dist-info"  # the report runs in tmp_path, which is on sys.path
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: sparkdl\nVersion: 0.2.2\nSummary: Deep Learning Pipelines for Apache Spark\n"
    )
    report = _doctor(tmp_path=tmp_path)
    assert re.search(
        r"^note: a distribution named 'sparkdl' \(0\.2\.2\) is also installed: it is another project", report, re.M
    ), report
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: sparkdl\nVersion: 0.0.9\nSummary: "
        + importlib.metadata.metadata("sparkdl-tf")["Summary"]
        + "\n"
    )
    assert "distribution named 'sparkdl'" not in _doctor(tmp_path=tmp_path)  # this project, before its rename


def test_console_script_and_module_print_the_same_report(tmp_path):
    console = Path(sys.executable).parent / "sparkdl"
    assert console.exists(), "the sparkdl console script is not installed next to this Python"
    by_script = _doctor(tmp_path=tmp_path, command=[str(console), "--version"])
    by_module = _doctor(tmp_path=tmp_path)
    assert by_script.splitlines()[0] == by_module.splitlines()[0]
    assert [line.split(":")[0] for line in by_script.splitlines()] == [
        line.split(":")[0] for line in by_module.splitlines()
    ]


def test_node_keras_follows_tf_use_legacy_keras(tmp_path):
    default_env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    default = _doctor(tmp_path=tmp_path, env=default_env)
    assert re.match(r"Keras 3\.\S+ \(TF_USE_LEGACY_KERAS unset: TensorFlow's default\)", _field(default, "node keras"))
    assert "keras-team/keras#20585" not in default  # a verified Keras 3: nothing to say

    legacy = _doctor(tmp_path=tmp_path, env={**default_env, "TF_USE_LEGACY_KERAS": "1"})
    assert re.match(r"tf-keras \S+ \(TF_USE_LEGACY_KERAS=1, set in this environment\)", _field(legacy, "node keras"))

    layer_off = _doctor(tmp_path=tmp_path, env={**default_env, "SPARKDL_KERAS3_MULTI_WORKER": "0"})
    assert re.search(r"^note: .*keras-team/keras#20585", layer_off, re.M), layer_off


def test_gpu_line_counts_nvidia_smi_gpus_and_shows_cuda_visible_devices(tmp_path):
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    fake = fake_bin / "nvidia-smi"
    fake.write_text(
        '#!/bin/sh\n[ "$1" = -L ] || exit 3\n'
        "echo 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaa)'\n"
        "echo 'GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-bbbb)'\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{fake_bin}{os.pathsep}{os.environ['PATH']}", "CUDA_VISIBLE_DEVICES": "1"}
    report = _doctor(tmp_path=tmp_path, env=env)
    assert _field(report, "gpus") == "2 NVIDIA GPUs (nvidia-smi -L); CUDA_VISIBLE_DEVICES='1'"

    no_gpu_path = os.pathsep.join(
        p for p in os.environ["PATH"].split(os.pathsep) if not (Path(p) / "nvidia-smi").exists()
    )
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    report = _doctor(tmp_path=tmp_path, env={**env, "PATH": no_gpu_path})
    assert _field(report, "gpus") == "no NVIDIA GPU visible (nvidia-smi not found); CUDA_VISIBLE_DEVICES unset"


def test_missing_java_is_reported_as_a_problem(tmp_path):
    report = _doctor(tmp_path=tmp_path, env={**os.environ, "JAVA_HOME": str(tmp_path / "no-such-jdk")})
    assert _field(report, "java") == "not found"
    assert re.search(r"^note: no java on JAVA_HOME=.*no-such-jdk: PySpark 4 needs Java 17", report, re.M), report
