"""TensorFlowOnSpark's ``gpu_info`` module: free GPUs on this host, from ``nvidia-smi``.

``get_gpus`` and ``is_gpu_available`` keep TensorFlowOnSpark's signatures over sparkdl's GPU
logic (:mod:`sparkdl.gpus`): ``nvidia-smi`` is queried as CSV (any GPU name parses), a GPU is
busy when it runs compute processes or uses more than ``gpus.BUSY_MEMORY_MIB`` of memory, and
a placement by ``worker_index`` is deterministic. sparkdl's nodes do not need this module (their
GPUs are chosen before they start); it is for code that sets up TensorFlow itself, e.g. in a
``mapPartitions`` function.
"""

from __future__ import annotations

import logging
import random
import time

from . import gpus

logger = logging.getLogger(__name__)

MAX_RETRIES = 3  #: times ``get_gpus`` asks again when too few GPUs are free
RETRY_WAIT_S = 30.0  #: seconds before the first retry; the n-th retry waits n times as long
AS_STRING = "string"  #: ``get_gpus`` format: ``"0,1"``
AS_LIST = "list"  #: ``get_gpus`` format: ``["0", "1"]``


def is_gpu_available(nvidia_smi: str = "nvidia-smi") -> bool:
    """Whether ``nvidia-smi`` runs and lists at least one GPU on this host."""
    try:
        return bool(gpus.query_nvidia_smi(nvidia_smi))
    except gpus.GPUSelectionError as exc:
        logger.debug("no GPU available: %s", exc)
        return False


def get_gpus(
    num_gpu: int = 1,
    worker_index: int = -1,
    format: str = AS_STRING,  # noqa: A002 - TFoS's name
    nvidia_smi: str = "nvidia-smi",
) -> str | list[str]:
    """Indices of ``num_gpu`` free GPUs: ``"0,1"`` (``AS_STRING``) or ``["0", "1"]`` (``AS_LIST``).

    ``worker_index >= 0`` picks deterministically (nodes with different indices on one host
    get different GPUs while enough are free); ``-1`` picks at random among the free GPUs, as
    TensorFlowOnSpark did. When too few are free, asks again up to ``MAX_RETRIES`` times,
    waiting ``RETRY_WAIT_S``, then twice, three times as long; then raises
    :class:`sparkdl.gpus.GPUSelectionError` saying which GPUs are busy (also when ``nvidia-smi``
    is missing or fails).
    """
    if format not in (AS_STRING, AS_LIST):
        raise ValueError(f"format must be {AS_STRING!r} or {AS_LIST!r}, got {format!r}")
    for attempt in range(MAX_RETRIES + 1):
        found = gpus.query_nvidia_smi(nvidia_smi)
        if found is None:
            raise gpus.GPUSelectionError(f"asked for {num_gpu} GPU(s) but {nvidia_smi} was not found")
        free = [g.index for g in found if not g.busy]
        if len(free) >= num_gpu or attempt == MAX_RETRIES:
            break
        wait = RETRY_WAIT_S * (attempt + 1)
        logger.warning("%d GPU(s) asked for, %d free; asking nvidia-smi again in %.0f s", num_gpu, len(free), wait)
        time.sleep(wait)
    if worker_index < 0 and len(free) >= num_gpu:
        chosen = sorted(random.sample(free, num_gpu))
    else:
        chosen = gpus.choose_free_gpus(found, num_gpu, max(worker_index, 0))
    devices = [str(i) for i in chosen]
    logger.info("GPUs chosen: %s", devices)
    return ",".join(devices) if format == AS_STRING else devices
