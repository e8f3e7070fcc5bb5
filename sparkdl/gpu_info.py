"""TensorFlowOnSpark's ``gpu_info`` module: free GPUs on this host, from ``nvidia-smi``.

A face over sparkdl's GPU module (:mod:`sparkdl.common.gpus`), with TensorFlowOnSpark's signatures:
``nvidia-smi`` is queried as CSV (any GPU name parses), a GPU is busy when it runs compute
processes or uses more than ``gpus.BUSY_MEMORY_MIB`` of memory, and a placement by
``worker_index`` is deterministic. sparkdl's nodes do not need this module (their GPUs are chosen
before they start); it is for code that sets up TensorFlow itself, e.g. in a ``mapPartitions``
function.
"""

from __future__ import annotations

from .common import gpus
from .common.gpus import MAX_RETRIES as MAX_RETRIES  # re-exported: TensorFlowOnSpark's names
from .common.gpus import RETRY_WAIT_S as RETRY_WAIT_S

AS_STRING = "string"  #: ``get_gpus`` format: ``"0,1"``
AS_LIST = "list"  #: ``get_gpus`` format: ``["0", "1"]``


def is_gpu_available(nvidia_smi: str = "nvidia-smi") -> bool:
    """Whether ``nvidia-smi`` runs and lists at least one GPU on this host."""
    return gpus.any_gpu(nvidia_smi)


def get_gpus(
    num_gpu: int = 1,
    worker_index: int = -1,
    format: str = AS_STRING,  # noqa: A002 - TFoS's name
    nvidia_smi: str = "nvidia-smi",
) -> str | list[str]:
    """Indices of ``num_gpu`` free GPUs: ``"0,1"`` (``AS_STRING``) or ``["0", "1"]`` (``AS_LIST``).

    ``worker_index >= 0`` picks deterministically (nodes with different indices on one host
    get different GPUs while enough are free); ``-1`` picks at random among the free GPUs, as
    TensorFlowOnSpark did. When too few are free, asks again up to ``gpus.MAX_RETRIES`` times,
    waiting ``gpus.RETRY_WAIT_S``, then twice, three times as long; then raises
    :class:`sparkdl.common.gpus.GPUSelectionError` saying which GPUs are busy (also when ``nvidia-smi``
    is missing or fails).
    """
    if format not in (AS_STRING, AS_LIST):
        raise ValueError(f"format must be {AS_STRING!r} or {AS_LIST!r}, got {format!r}")
    devices = gpus.free_gpus(num_gpu, worker_index, nvidia_smi)
    return ",".join(devices) if format == AS_STRING else devices
