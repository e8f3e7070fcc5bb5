"""What the GPU suite needs: whether this machine has a GPU TensorFlow can use, and a Spark
``local-cluster`` whose executors each get one through Spark's resource scheduling.

The suite runs only where ``nvidia-smi`` lists a GPU *and* TensorFlow (the ``gpu`` extra:
``pip install -e '.[gpu,dev]'``) sees one; everywhere else every test is skipped, saying why.
Nothing here is faked: the workers' discovery script is ``scripts/gpu_discovery.sh`` over the
real ``nvidia-smi``.

Layout: ``local-cluster[2,2,4096]`` (two task slots per executor), each worker and executor with
one GPU. With two GPUs or more each executor gets its own (``gpu_discovery.sh --claim`` hands
them out in turn) and a task takes all of it; with one GPU both executors get it and
``spark.task.resource.gpu.amount=0.5`` lets an executor's two tasks share it. Either way
TensorFlow grows its GPU memory as it needs it (``TF_FORCE_GPU_ALLOW_GROWTH``), so processes
sharing a GPU do not starve each other.

The functions the tests run on executors (``gpu_node_functions``) reach them pickled by value,
so executors need not import anything from ``tests/gpu``.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import gpu_node_functions
import pytest
from pyspark import cloudpickle  # the pickler PySpark and sparkdl ship closures with

from sparkdl.common.gpus import GPUSelectionError, query_nvidia_smi

REPO = Path(__file__).resolve().parents[2]
DISCOVERY_SCRIPT = REPO / "scripts" / "gpu_discovery.sh"
TF_CHECK_TIMEOUT_S = 180

cloudpickle.register_pickle_by_value(gpu_node_functions)


@functools.lru_cache(maxsize=None)
def machine_gpus() -> int:
    """How many GPUs ``nvidia-smi`` lists (0 without it, or when it fails)."""
    try:
        return len(query_nvidia_smi() or [])
    except GPUSelectionError:
        return 0


@functools.lru_cache(maxsize=None)
def tensorflow_gpus() -> int:
    """How many GPUs TensorFlow sees, asked in a child process so that this one (the Spark
    driver) never initialises CUDA or holds GPU memory."""
    code = "import tensorflow as tf; print(len(tf.config.list_physical_devices('GPU')))"
    try:
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=TF_CHECK_TIMEOUT_S,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        )
        return int(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else 0
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return 0


def why_no_gpu() -> str | None:
    """Why the GPU suite cannot run here, or None when it can."""
    if not machine_gpus():
        return "no NVIDIA GPU here (nvidia-smi is missing or lists none)"
    if not tensorflow_gpus():
        return "nvidia-smi lists a GPU but TensorFlow sees none: install the gpu extra (pip install -e '.[gpu,dev]')"
    return None


_NO_GPU = why_no_gpu()
#: Marks a module or test to run only where TensorFlow can use a GPU.
requires_gpu = pytest.mark.skipif(_NO_GPU is not None, reason=_NO_GPU or "")


def shared_gpu() -> bool:
    """True when both executors get the same (only) GPU."""
    return machine_gpus() < 2


def local_cluster_conf(directory: Path) -> dict[str, str]:
    """Spark settings giving each ``local-cluster`` worker and executor one GPU (see the module docstring).

    ``directory`` holds the discovery wrapper and the claims; reusing it keeps the settings, and
    so the test session's SparkContext, the same across test modules.
    """
    directory.mkdir(parents=True, exist_ok=True)
    wrapper = directory / "discover_gpus.sh"
    wrapper.write_text(f"#!/bin/sh\nexec bash {DISCOVERY_SCRIPT} --claim {directory / 'claims'}\n")
    wrapper.chmod(0o755)
    return {
        "spark.worker.resource.gpu.amount": "1",
        "spark.worker.resource.gpu.discoveryScript": str(wrapper),
        "spark.executor.resource.gpu.amount": "1",
        "spark.task.resource.gpu.amount": "0.5" if shared_gpu() else "1",
        "spark.executorEnv.TF_FORCE_GPU_ALLOW_GROWTH": "true",
    }


@pytest.fixture
def gpu_sc(spark_holder, tmp_path_factory):
    """A SparkContext on ``local-cluster[2,2,4096]`` whose executors each have a GPU."""
    conf = local_cluster_conf(tmp_path_factory.getbasetemp() / "gpu-discovery")
    return spark_holder.get(2, conf, cores=2, memory_mb=4096)
