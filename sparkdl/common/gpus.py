"""sparkdl's one GPU module: which GPUs a TensorFlow process may use, for every caller.

The result is a value for ``CUDA_VISIBLE_DEVICES`` that the caller puts in the environment
*before* TensorFlow is imported (TF reads it only once). Two sources are supported, in this
order of preference:

1. Spark resource scheduling: the running task's GPUs (:func:`task_gpu_addresses`).
2. ``nvidia-smi``, queried as CSV and parsed with :mod:`csv`, so GPU names such
   as ``NVIDIA H100 80GB HBM3`` parse correctly (TensorFlowOnSpark's regex over
   ``--list-gpus`` did not).

``nvidia-smi`` numbers GPUs in PCI bus order while CUDA defaults to
"fastest first"; callers that use indices from :func:`select_gpus` with source
``"nvidia-smi"`` should also set ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` in the child.

Callers: a node's launch task (``node/launch.py``: :func:`select_gpus`), the inference workers
(``inference/worker.py``: :func:`map_spark_addresses`), and TensorFlowOnSpark's faces
``gpu_info.get_gpus`` (:func:`free_gpus`) and ``util.single_node_env`` (:func:`single_node_gpus`).
Neither TensorFlow nor PySpark is imported at module level.
"""

from __future__ import annotations

import csv
import io
import logging
import os
import random
import shutil
import subprocess
import time
from dataclasses import dataclass

from .errors import GPUSelectionError as GPUSelectionError  # re-exported: raised here
from .timeouts import RETRY_WAIT_S

logger = logging.getLogger(__name__)

#: A GPU using more memory than this (MiB) counts as busy even without listed
#: compute processes (their listing can be hidden inside containers).
BUSY_MEMORY_MIB = 500
MAX_RETRIES = 3  #: times :func:`free_gpus` asks again when too few GPUs are free
#: Where :func:`single_node_gpus` keeps the CUDA_VISIBLE_DEVICES a Python worker started with.
INHERITED_GPUS = "SPARKDL_INHERITED_CUDA_VISIBLE_DEVICES"

_GPU_FIELDS = "index,name,uuid,memory.used,memory.total"


@dataclass(frozen=True)
class GPUInfo:
    """One GPU as reported by ``nvidia-smi``."""

    index: int
    name: str
    uuid: str
    memory_used_mib: int
    memory_total_mib: int
    busy: bool


@dataclass(frozen=True)
class GPUAssignment:
    """Outcome of :func:`select_gpus`.

    ``cuda_visible_devices`` is the value to set (``""`` hides all GPUs) or
    ``None`` to leave the environment untouched; ``source`` is one of
    ``"spark"``, ``"nvidia-smi"``, ``"none"``, ``"cpu"``.
    """

    cuda_visible_devices: str | None
    source: str
    devices: tuple[str, ...] = ()


def _for(node_label: str) -> str:
    return f" for {node_label}" if node_label else ""


def _split_devices(value: str | None) -> list[str]:
    return [d.strip() for d in (value or "").split(",") if d.strip()]


def _mib(field: str) -> int:
    # Memory fields read "[N/A]" or "[Not Supported]" on some GPUs (e.g. MIG).
    field = field.strip()
    return 0 if field.startswith("[") else int(field)


def parse_compute_apps(text: str) -> set[str]:
    """Return the GPU UUIDs listed by ``--query-compute-apps=gpu_uuid``."""
    uuids = set()
    for row in csv.reader(io.StringIO(text)):
        if row and row[0].strip() and not row[0].startswith("No running"):
            uuids.add(row[0].strip())
    return uuids


def parse_gpu_csv(
    text: str, busy_uuids: set[str] | frozenset[str] = frozenset(), busy_memory_mib: int = BUSY_MEMORY_MIB
) -> list[GPUInfo]:
    """Parse ``nvidia-smi --query-gpu=index,name,uuid,memory.used,memory.total``
    output (``--format=csv,noheader,nounits``).

    A GPU is busy if its UUID is in ``busy_uuids`` or it uses more than
    ``busy_memory_mib`` MiB. Raises :class:`GPUSelectionError` on bad rows.
    """
    gpus = []
    for row in csv.reader(io.StringIO(text), skipinitialspace=True):
        if not row:
            continue
        try:
            if len(row) != 5:
                raise ValueError(f"expected 5 fields, got {len(row)}")
            index, name, uuid = int(row[0]), row[1].strip(), row[2].strip()
            used, total = _mib(row[3]), _mib(row[4])
        except ValueError as e:
            raise GPUSelectionError(f"cannot parse nvidia-smi line {','.join(row)!r}: {e}") from None
        gpus.append(GPUInfo(index, name, uuid, used, total, busy=uuid in busy_uuids or used > busy_memory_mib))
    return sorted(gpus, key=lambda g: g.index)


def _run(nvidia_smi: str, args: list[str], timeout: float) -> str:
    cmd = [nvidia_smi, *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise GPUSelectionError(f"running {' '.join(cmd)!r} failed: {e}") from None
    if proc.returncode != 0:
        detail = (proc.stderr.strip() or proc.stdout.strip())[-500:]
        raise GPUSelectionError(f"{' '.join(cmd)!r} exited with status {proc.returncode}: {detail}")
    return proc.stdout


def query_nvidia_smi(nvidia_smi: str = "nvidia-smi", timeout: float = 10.0) -> list[GPUInfo] | None:
    """List the GPUs on this host via ``nvidia-smi``, or ``None`` if it is not installed.

    ``nvidia_smi`` is a command name looked up on ``PATH`` or a path. Raises
    :class:`GPUSelectionError` if it fails, times out or prints unparsable output.
    """
    exe = shutil.which(nvidia_smi)
    if exe is None:
        return None
    gpu_text = _run(exe, [f"--query-gpu={_GPU_FIELDS}", "--format=csv,noheader,nounits"], timeout)
    apps_text = _run(exe, ["--query-compute-apps=gpu_uuid", "--format=csv,noheader"], timeout)
    return parse_gpu_csv(gpu_text, parse_compute_apps(apps_text))


def map_spark_addresses(addresses: list[str], inherited_cuda_visible_devices: str | None) -> list[str]:
    """Translate Spark GPU addresses into ``CUDA_VISIBLE_DEVICES`` entries.

    Rule, applied to the whole list (Spark's order kept, duplicates dropped):

    * no inherited ``CUDA_VISIBLE_DEVICES`` (``None`` or empty): use verbatim;
    * every address is a member of the inherited list: use verbatim (the
      discovery script reported physical ids);
    * every address is an integer index into the inherited list: map by
      position (the executor was already restricted, addresses are ordinals);
    * otherwise raise :class:`GPUSelectionError` naming both lists.
    """
    addrs = list(dict.fromkeys(a.strip() for a in addresses if a.strip()))
    inherited = _split_devices(inherited_cuda_visible_devices)
    if not inherited or all(a in inherited for a in addrs):
        return addrs
    if all(a.isdigit() and int(a) < len(inherited) for a in addrs):
        return list(dict.fromkeys(inherited[int(a)] for a in addrs))
    raise GPUSelectionError(
        f"Spark GPU addresses {addrs} are neither members of nor indices into the "
        f"inherited CUDA_VISIBLE_DEVICES {inherited}; check the executor's GPU "
        "discovery script against the devices it may see"
    )


def choose_free_gpus(gpus: list[GPUInfo], count: int, slot: int = 0, node_label: str = "") -> list[int]:
    """Deterministically pick ``count`` free GPU indices.

    Candidates are the non-busy GPUs sorted by index; the pick is ``count``
    consecutive candidates starting at ``(slot * count) % len(candidates)``,
    wrapping, so nodes on one host with different ``slot`` values get
    different GPUs when enough are free. Raises :class:`GPUSelectionError`
    if fewer than ``count`` are free.
    """
    if count <= 0:
        return []
    free = sorted((g for g in gpus if not g.busy), key=lambda g: g.index)
    if len(free) < count:
        busy = ", ".join(
            f"{g.index} ({g.name}, {g.memory_used_mib}/{g.memory_total_mib} MiB used)" for g in gpus if g.busy
        )
        raise GPUSelectionError(
            f"asked for {count} GPU{'s' if count != 1 else ''}{_for(node_label)}, only "
            f"{len(free)} of {len(gpus)} free: {[g.index for g in free]}; busy: [{busy}]"
        )
    start = (slot * count) % len(free)
    return [free[(start + i) % len(free)].index for i in range(count)]


def select_gpus(
    num_gpus: int | None,
    spark_addresses: list[str] | None,
    inherited_cuda_visible_devices: str | None,
    *,
    slot: int = 0,
    node_label: str = "",
    nvidia_smi: str = "nvidia-smi",
) -> GPUAssignment:
    """Decide ``CUDA_VISIBLE_DEVICES`` for one TensorFlow node process.

    1. Spark assigned addresses: use :func:`map_spark_addresses` (error if
       ``num_gpus`` exceeds what Spark gave); source ``"spark"``.
    2. ``num_gpus == 0``: ``""`` hides all GPUs from TF; source ``"cpu"``.
    3. Otherwise ask ``nvidia-smi``, limited to an inherited
       ``CUDA_VISIBLE_DEVICES`` (by index or UUID) if set, and pick
       ``num_gpus`` free GPUs (default 1, as TensorFlowOnSpark did) with
       :func:`choose_free_gpus`; source ``"nvidia-smi"``. Without
       ``nvidia-smi`` or GPUs, leave the environment untouched (source
       ``"none"``) unless GPUs were asked for, which is an error.
    """
    if num_gpus is not None and num_gpus < 0:
        raise ValueError(f"num_gpus must be >= 0 or None, got {num_gpus}")
    if spark_addresses:
        devices = map_spark_addresses(spark_addresses, inherited_cuda_visible_devices)
        if num_gpus is not None and num_gpus > len(devices):
            raise GPUSelectionError(
                f"asked for {num_gpus} GPUs{_for(node_label)} but Spark assigned only "
                f"{len(devices)}: {devices}; raise spark.task.resource.gpu.amount "
                "or lower num_gpus"
            )
        return GPUAssignment(",".join(devices), "spark", tuple(devices))
    if num_gpus == 0:
        return GPUAssignment("", "cpu")

    gpus = query_nvidia_smi(nvidia_smi)
    inherited = _split_devices(inherited_cuda_visible_devices)
    if gpus and inherited:
        gpus = [g for g in gpus if str(g.index) in inherited or g.uuid in inherited]
        if not gpus:
            raise GPUSelectionError(
                f"none of the GPUs reported by nvidia-smi{_for(node_label)} are in the "
                f"inherited CUDA_VISIBLE_DEVICES {inherited}"
            )
    if not gpus:
        if num_gpus is None:
            return GPUAssignment(None, "none")
        found = "nvidia-smi was not found" if gpus is None else "nvidia-smi lists no GPUs"
        raise GPUSelectionError(
            f"asked for {num_gpus} GPUs{_for(node_label)} but {found} and Spark assigned "
            "none; set spark.task.resource.gpu.amount (with a GPU discovery script) "
            "or run on hosts with NVIDIA GPUs, or use num_gpus=0 for CPU"
        )
    chosen = choose_free_gpus(gpus, num_gpus if num_gpus is not None else 1, slot, node_label)
    devices = tuple(str(i) for i in chosen)
    return GPUAssignment(",".join(devices), "nvidia-smi", devices)


def task_gpu_addresses(context=None) -> list[str]:
    """The GPU addresses Spark assigned the running task (``context``, else the current one);
    ``[]`` outside a Spark task or without GPUs."""
    if context is None:
        try:
            from pyspark import TaskContext
        except ImportError:  # pragma: no cover - pyspark is a dependency
            return []
        context = TaskContext.get()
    resource = context.resources().get("gpu") if context is not None else None
    return list(resource.addresses) if resource is not None else []


def any_gpu(nvidia_smi: str = "nvidia-smi") -> bool:
    """Whether ``nvidia-smi`` runs and lists at least one GPU on this host."""
    try:
        return bool(query_nvidia_smi(nvidia_smi))
    except GPUSelectionError as exc:
        logger.debug("no GPU available: %s", exc)
        return False


def free_gpus(count: int, worker_index: int = -1, nvidia_smi: str = "nvidia-smi") -> list[str]:
    """Indices of ``count`` free GPUs on this host (TensorFlowOnSpark's ``gpu_info.get_gpus``).

    ``worker_index >= 0`` picks deterministically (:func:`choose_free_gpus`); ``-1`` at random among
    the free GPUs. When too few are free, asks again up to ``MAX_RETRIES`` times, waiting
    ``RETRY_WAIT_S``, then twice, three times as long; then raises :class:`GPUSelectionError`
    saying which GPUs are busy (also when ``nvidia-smi`` is missing or fails).
    """
    for attempt in range(MAX_RETRIES + 1):
        found = query_nvidia_smi(nvidia_smi)
        if found is None:
            raise GPUSelectionError(f"asked for {count} GPU(s) but {nvidia_smi} was not found")
        free = [g.index for g in found if not g.busy]
        if len(free) >= count or attempt == MAX_RETRIES:
            break
        wait = RETRY_WAIT_S * (attempt + 1)
        logger.warning("%d GPU(s) asked for, %d free; asking nvidia-smi again in %.0f s", count, len(free), wait)
        time.sleep(wait)
    if worker_index < 0 and len(free) >= count:
        chosen = sorted(random.sample(free, count))
    else:
        chosen = choose_free_gpus(found, count, max(worker_index, 0))
    logger.info("GPUs chosen: %s", chosen)
    return [str(i) for i in chosen]


def single_node_gpus(num_gpus: int = 1, worker_index: int = -1, nodes: list[str] | None = None) -> GPUAssignment:
    """The GPUs of a process that runs TensorFlow by itself in a Spark task (``util.single_node_env``).

    The task's Spark GPUs come first (mapped through the ``CUDA_VISIBLE_DEVICES`` the Python worker
    started with, kept aside on the first call: a reused worker has since had it set); else
    ``num_gpus`` free GPUs from ``nvidia-smi``, placed by this node's index among the ``nodes``
    (``"host:port"``) on its host, or by ``worker_index`` alone; else none (``""``: the CPU).
    """
    addresses = task_gpu_addresses()
    if num_gpus > 0 and addresses:
        inherited = os.environ.setdefault(INHERITED_GPUS, os.environ.get("CUDA_VISIBLE_DEVICES", ""))
        chosen = select_gpus(num_gpus, addresses[:num_gpus], inherited)
        return GPUAssignment(chosen.cuda_visible_devices or "", "spark", chosen.devices)
    if num_gpus > 0 and any_gpu():
        devices = tuple(free_gpus(num_gpus, _index_on_host(worker_index, nodes)))
        return GPUAssignment(",".join(devices), "nvidia-smi", devices)
    return GPUAssignment("", "cpu")


def _index_on_host(worker_index: int, nodes: list[str] | None) -> int:
    """This node's position among the ``nodes`` on its own host (else ``worker_index``)."""
    if worker_index < 0 or not nodes or worker_index >= len(nodes):
        return worker_index
    mine = nodes[worker_index]
    host = mine.split(":")[0]
    return [n for n in nodes if n.split(":")[0] == host].index(mine)
