"""GPU inference: rows/s of sparkdl's UDFs against PySpark's ``predict_batch_udf``, scoring on GPUs.

Needs an NVIDIA GPU and TensorFlow with CUDA: install the ``gpu`` extra
(``pip install -e '.[gpu,dev]'``, i.e. ``tensorflow[and-cuda]``) in the venv first. Then::

    .venv/bin/python benchmarks/gpu_inference.py [--rows 1000000] [--json PATH] [inference_udf.py's other options]

The same variants, data, models and table as ``benchmarks/inference_udf.py`` (see there), run on
``local-cluster[2,1,4096]`` whose executors each have a GPU (``benchmarks/gpu_spark.py``: one per
executor when the machine has two, else both share one). sparkdl's UDFs score each task on the
GPU Spark assigned it; PySpark's ``predict_batch_udf`` loads the model with whatever GPUs the
executor sees (it does no pinning), and the ``single process model.predict`` reference runs in
this process on the first GPU. Options given here override the defaults below; ``--conf`` adds
Spark settings.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

DEFAULT_ROWS = "1000000"  # a GPU scores 200k rows (inference_udf.py's default) too fast to time well


def main(argv=None) -> list[dict]:
    """Run inference_udf.py's benchmark with each executor on a GPU; returns its rows."""
    sys.path.insert(0, str(Path(__file__).parent))
    import inference_udf
    from gpu_spark import MASTER, gpu_conf, gpu_count

    gpus = gpu_count()
    # The single-process reference shares a GPU with the executors: let TensorFlow grow into it.
    os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
    settings = gpu_conf(tempfile.mkdtemp(prefix="sparkdl-gpu-inference-"), gpus)
    defaults = ["--master", MASTER, "--rows", DEFAULT_ROWS]
    for name, value in settings.items():
        defaults += ["--conf", f"{name}={value}"]
    return inference_udf.main(defaults + list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    main()
