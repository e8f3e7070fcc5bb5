"""The Spark set-up shared by the GPU benchmarks: a ``local-cluster`` whose executors each get a GPU.

Both executors get a GPU of their own when the machine has two or more
(``scripts/gpu_discovery.sh --claim`` hands them out in turn); with one GPU they share it
(``spark.task.resource.gpu.amount=0.5``). TensorFlow in the executors grows its GPU memory as it
needs it (``TF_FORCE_GPU_ALLOW_GROWTH``), so processes sharing a GPU do not starve each other.
Driver-side only.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DISCOVERY_SCRIPT = ROOT / "scripts" / "gpu_discovery.sh"
MASTER = "local-cluster[2,1,4096]"


def gpu_count() -> int:
    """GPUs ``nvidia-smi`` lists; exits with what to do when there are none."""
    from sparkdl.common.gpus import query_nvidia_smi

    gpus = query_nvidia_smi() or []
    if not gpus:
        sys.exit(
            "no NVIDIA GPU found (nvidia-smi is missing or lists none): the GPU benchmarks need one, and "
            "TensorFlow with CUDA (pip install -e '.[gpu,dev]')"
        )
    return len(gpus)


def gpu_conf(workdir: str | Path, gpus: int) -> dict[str, str]:
    """Spark settings giving each worker and executor of ``MASTER`` one GPU (see the module docstring)."""
    directory = Path(workdir)
    wrapper = directory / "discover_gpus.sh"
    wrapper.write_text(f"#!/bin/sh\nexec bash {DISCOVERY_SCRIPT} --claim {directory / 'gpu-claims'}\n")
    wrapper.chmod(0o755)
    return {
        "spark.worker.resource.gpu.amount": "1",
        "spark.worker.resource.gpu.discoveryScript": str(wrapper),
        "spark.executor.resource.gpu.amount": "1",
        "spark.task.resource.gpu.amount": "0.5" if gpus < 2 else "1",
        "spark.executorEnv.TF_FORCE_GPU_ALLOW_GROWTH": "true",
    }
