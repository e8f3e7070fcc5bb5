"""TensorFlowOnSpark's ``util.single_node_env``: set up this process for single-node TensorFlow.

For code that runs TensorFlow itself inside a Spark task (a ``mapPartitions`` function, a
``TFParallel`` trial's helper) rather than in a sparkdl node, whose GPUs and environment sparkdl
already sets. Call it before TensorFlow is first imported: TensorFlow reads
``CUDA_VISIBLE_DEVICES`` only once.
"""

from __future__ import annotations

import logging
import os
import subprocess

from . import gpus

logger = logging.getLogger(__name__)
CLASSPATH_MARK = "SPARKDL_CLASSPATH_UPDATED"
INHERITED_GPUS = gpus.INHERITED_GPUS


def single_node_env(num_gpus: int = 1, worker_index: int = -1, nodes: list[str] | None = None) -> str:
    """Choose this process's GPUs and set ``CUDA_VISIBLE_DEVICES``; returns its value.

    The GPUs Spark assigned the running task (``spark.task.resource.gpu.amount``) come first;
    else ``num_gpus`` free GPUs from ``nvidia-smi`` (:func:`sparkdl.gpu_info.get_gpus`), placed
    by this node's index among the ``nodes`` (``"host:port"`` strings) on its host, or by
    ``worker_index`` alone (``-1``: at random), with ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` so the
    indices mean what ``nvidia-smi`` meant. Without GPUs, or with ``num_gpus=0``, TensorFlow
    gets none (``""``). With ``HADOOP_PREFIX`` (or ``HADOOP_HOME``) set, ``hadoop classpath
    --glob`` is appended to ``CLASSPATH`` once, for TensorFlow's HDFS access through JNI.
    The choice is :func:`sparkdl.common.gpus.single_node_gpus`'s.
    """
    _add_hadoop_classpath()
    chosen = gpus.single_node_gpus(num_gpus, worker_index, nodes)
    if chosen.source == "nvidia-smi":
        os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    visible = chosen.cuda_visible_devices or ""
    logger.info("single-node TensorFlow on %s", f"GPU(s) {visible}" if visible else "the CPU")
    os.environ["CUDA_VISIBLE_DEVICES"] = visible
    return visible


def _add_hadoop_classpath() -> None:
    home = os.environ.get("HADOOP_PREFIX") or os.environ.get("HADOOP_HOME")
    if not home or CLASSPATH_MARK in os.environ:
        return
    try:
        extra = subprocess.run(
            [os.path.join(home, "bin", "hadoop"), "classpath", "--glob"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        logger.warning("could not add Hadoop's classpath (%s/bin/hadoop classpath --glob): %s", home, exc)
        return
    os.environ["CLASSPATH"] = os.pathsep.join(p for p in (os.environ.get("CLASSPATH"), extra) if p)
    os.environ[CLASSPATH_MARK] = "1"
