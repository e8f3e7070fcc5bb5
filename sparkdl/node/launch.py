"""What runs inside the Spark task that hosts a node: pick GPUs, start the node's supervisor.

The launch task is the only place that sees Spark's task context (resources, barrier task
infos), so it decides the node's GPUs and environment, then starts a supervisor process
(``sparkdl.node.supervisor``) that registers with the driver and runs the TF process.

- Blocking launch (InputMode.TENSORFLOW, TFParallel): the task waits for the supervisor, whose
  anchor is this task's process; if Spark kills the task, the node dies with it.
- Detached launch (InputMode.SPARK): the task returns once the node runs, freeing the executor
  for feeding tasks; the supervisor then anchors to the executor JVM instead.
"""

from __future__ import annotations

import getpass
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import psutil

from ..common import gpus
from ..common.roles import NodeRole
from ..storage import is_remote
from .config import LaunchSpec, NodeConfig

#: What a supervisor prints on its stdout to the launching task once its node runs (or not).
READY = "READY"
FAILED = "FAILED"


#: Where Spark names its local (spill) directories for an executor's Python worker, in order:
#: YARN's container directories, then the list Spark itself sets in every Python worker (its block
#: manager's directories under ``spark.local.dir``, ``SPARK_LOCAL_DIRS`` or the cluster manager's).
SPARK_LOCAL_DIR_VARIABLES = ("LOCAL_DIRS", "SPARK_LOCAL_DIRS")


def spark_local_dir() -> Path:
    """The first existing, writable directory Spark names for local data on this executor
    (:data:`SPARK_LOCAL_DIR_VARIABLES`, each a comma-separated list), else ``$TMPDIR``.

    Spark's local directories are where the cluster's operators put disk for spills, and they are
    cleaned up for us (Spark deletes its block manager's directories when the executor stops,
    YARN its container directories when the application ends); ``$TMPDIR`` is often small (a
    root file system, a memory-backed /tmp).
    """
    for variable in SPARK_LOCAL_DIR_VARIABLES:
        for entry in map(str.strip, os.environ.get(variable, "").split(",")):
            if entry and os.path.isdir(entry) and os.access(entry, os.W_OK | os.X_OK):
                return Path(entry)
    return Path(tempfile.gettempdir())


def user_root(base: str | os.PathLike | None = None) -> Path:
    """``<base>/sparkdl-$USER`` (base: ``$TMPDIR``): this user's private (0700) directory for
    sparkdl's node files there.

    Raises PermissionError when another user owns it (on a shared host nobody may plant or
    read another user's node files).
    """
    root = Path(base if base is not None else tempfile.gettempdir()) / f"sparkdl-{getpass.getuser()}"
    root.mkdir(mode=0o700, exist_ok=True)
    info = root.lstat()
    if root.is_symlink() or info.st_uid != os.getuid():
        setting = "TMPDIR" if base is None else "Spark's local directories"
        raise PermissionError(
            f"{root} is not a directory owned by this user (uid {os.getuid()}); remove it or point {setting} elsewhere"
        )
    if info.st_mode & 0o077:
        root.chmod(0o700)
    return root


def cache_root() -> Path:
    """This user's private directory for epoch caches: in Spark's local directory (see :func:`spark_local_dir`)."""
    return user_root(spark_local_dir())


def cluster_dir(cluster_id: str, root: Path | None = None) -> Path:
    """This user's private directory for one cluster's files on this host (created if missing);
    ``root``: a :func:`user_root` (default: the one in ``$TMPDIR``)."""
    path = (root or user_root()) / cluster_id
    path.mkdir(exist_ok=True, mode=0o700)
    return path


def node_dir(cluster_id: str, role: NodeRole, attempt: int = 0, root: Path | None = None) -> Path:
    """A private per-user, per-cluster, per-node (and per-relaunch) directory for logs and status
    (under ``root``, a :func:`user_root`; default: the one in ``$TMPDIR``)."""
    name = f"node{role.node_number}-{role.job_name}{role.task_index}" + (f"-attempt{attempt}" if attempt else "")
    path = cluster_dir(cluster_id, root) / name
    path.mkdir(exist_ok=True, mode=0o700)
    return path


def feed_cache_dir(cluster_id: str, role: NodeRole, attempt: int = 0) -> Path:
    """Where a node keeps the epoch caches of its training runs (``feed/cache.py``): its node
    directory under :func:`cache_root`, not the one holding its logs, since a cache can be as big
    as the node's share of the data. The supervisor removes it when the TF process ends."""
    return node_dir(cluster_id, role, attempt, cache_root()) / "feed-cache"


def prune_node_files(keep_days: float | None, current: str) -> None:
    """Prune earlier clusters' files (see :func:`prune_old_clusters`) from both places they live."""
    for root in dict.fromkeys((user_root(), cache_root())):  # one root when Spark names no local dir
        prune_old_clusters(root, keep_days, current)


def prune_old_clusters(root: Path, keep_days: float | None, current: str) -> list[str]:
    """Remove the directories of earlier clusters under ``root`` in which nothing changed for
    ``keep_days`` (None: keep everything); returns the cluster ids removed.

    The newest modification time of anything inside counts, so a node still writing its log
    keeps its cluster's directory. Several nodes on one host may prune at once: whatever
    another one removed first is simply skipped.
    """
    if keep_days is None:
        return []
    cutoff = time.time() - keep_days * 86400
    removed = []
    for cluster in root.iterdir():
        if cluster.name == current or cluster.is_symlink() or not cluster.is_dir():
            continue
        try:
            # A directory changed recently needs no walk; otherwise its newest entry decides.
            if cluster.lstat().st_mtime >= cutoff:
                continue
            if max((entry.lstat().st_mtime for entry in cluster.rglob("*")), default=0.0) < cutoff:
                shutil.rmtree(cluster)
                removed.append(cluster.name)
        except OSError:
            continue  # best effort: another node of this host pruned it first, or it is not ours to remove
    return removed


def executor_jvm_pid() -> int:
    """The pid of the executor JVM hosting this Python worker (falls back to our parent)."""
    for parent in psutil.Process().parents():
        try:
            if parent.name().startswith("java"):
                return parent.pid
        except psutil.Error:
            continue
    return os.getppid()


def executor_id() -> str | None:
    """The Spark executor id of this Python worker's executor (its JVM's ``--executor-id``); None
    when it cannot be read (the driver's own executor in ``local[N]``, another platform)."""
    try:
        args = psutil.Process(executor_jvm_pid()).cmdline()
    except psutil.Error:
        return None
    return next((value for flag, value in zip(args, args[1:]) if flag == "--executor-id"), None)


def node_config(
    spec: LaunchSpec, node_number: int, gpus: str | None, spark_executor: str, anchor_pid: int, cores: int | None = None
) -> NodeConfig:
    """The supervisor's configuration of node ``node_number`` on this host (creates its directory);
    ``cores``: what Spark gave its launch task (the node decodes that many images at once)."""
    settings = spec.settings
    role = settings.roles[node_number]
    directory = node_dir(spec.cluster_id, role, spec.attempt)
    env = dict(settings.env)
    if cores:
        from ..feed.dataset import NODE_CORES_ENV  # here: the feed's readers are not the launch's concern

        env[NODE_CORES_ENV] = str(int(cores))
    if gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpus
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # nvidia-smi's numbering, which the choice used
    tensorboard = settings.tensorboard_node == node_number
    # TensorBoard's default log dir is per cluster, so concurrent clusters never share one.
    log_dir = settings.log_dir or (str(directory / "tensorboard") if tensorboard else None)
    log_store = None
    if log_dir is not None and is_remote(log_dir) and not log_dir.startswith("gs://"):
        # TensorFlow writes and TensorBoard reads local paths and gs:// only: the node writes here,
        # and its supervisor copies the files to the store (node/log_mirror.py).
        log_store, log_dir = log_dir, str(directory / "tensorboard")
    return NodeConfig(
        launch=spec,
        node_number=node_number,
        spark_executor=spark_executor,
        anchor_pid=anchor_pid,
        env=env,
        tensorboard=tensorboard,
        log_dir=log_dir,
        gpus=gpus,
        working_dir=os.getcwd(),
        node_dir=str(directory),
        cache_dir=str(feed_cache_dir(spec.cluster_id, role, spec.attempt)),
        # The node's processes import what this task can (sparkdl, addPyFile'd modules, test helpers).
        pythonpath=os.pathsep.join(p for p in sys.path if p),
        log_store=log_store,
    )


def launch_node(
    spec: LaunchSpec,
    node_number: int,
    spark_gpu_addresses: list[str] | None = None,
    spark_executor: str = "",
    anchor_pid: int | None = None,
    cores: int | None = None,
) -> dict:
    """Start the node numbered ``node_number`` and return a small status record (``cores``: the
    launch task's, None on the driver).

    Raises RuntimeError when the node cannot start (GPU selection, registration refused);
    the driver also hears about it over the channel.
    """
    settings = spec.settings
    role = settings.roles[node_number]
    prune_node_files(settings.keep_node_files_days, spec.cluster_id)
    label = f"{role.label} on host {os.uname().nodename}"
    assignment = gpus.select_gpus(
        settings.num_gpus,
        spark_gpu_addresses,
        os.environ.get("CUDA_VISIBLE_DEVICES"),
        slot=node_number,
        node_label=label,
    )
    if anchor_pid is None:
        anchor_pid = executor_jvm_pid() if settings.feeds else os.getpid()
    config = node_config(spec, node_number, assignment.cuda_visible_devices, spark_executor, anchor_pid, cores)
    directory = Path(config.node_dir)
    with open(directory / "supervisor.log", "ab") as supervisor_log:
        supervisor = subprocess.Popen(
            [sys.executable, "-m", "sparkdl.node.supervisor", "--cluster", spec.cluster_id, "--node", role.label],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=supervisor_log,
            env={**os.environ, "PYTHONPATH": config.pythonpath},
            start_new_session=settings.feeds,
        )
    supervisor.stdin.write(pickle.dumps(config))
    supervisor.stdin.close()
    first_line = supervisor.stdout.readline().decode().strip()
    if first_line != READY:
        supervisor.wait(timeout=30)
        reason = (
            first_line[len(FAILED) :].strip()
            if first_line.startswith(FAILED)
            else f"supervisor exited with status {supervisor.returncode}; see {directory / 'supervisor.log'}"
        )
        raise RuntimeError(f"sparkdl node {role.label} did not start: {reason}")
    record = {
        "node_number": node_number,
        "job_name": role.job_name,
        "task_index": role.task_index,
        "gpus": asdict(assignment),
        "supervisor_pid": supervisor.pid,
    }
    if not settings.feeds or settings.hold_executor:
        record["supervisor_exit"] = supervisor.wait()
    return record


def spark_partition_launcher(spec: LaunchSpec, first_node_number: int = 0):
    """The ``mapPartitions`` function that launches node ``first_node_number + partition``."""

    def launch(_rows):
        from pyspark import BarrierTaskContext, TaskContext

        context = TaskContext.get()
        node_number = first_node_number + context.partitionId()
        if context.attemptNumber() > 0:
            # Spark retried the launch; a TF node is never restarted behind the driver's back.
            yield {"node_number": node_number, "skipped": "retry"}
            return
        here = executor_id()
        if spec.placement and isinstance(context, BarrierTaskContext):
            # Every task learns whether all are where the driver placed them before any node
            # starts: Spark's locality is a preference, and a node must never join another
            # cluster's executor. The driver launches again if one is not.
            # Any of the placed executors will do, one node each (Spark may swap two of them).
            known = [e for e in (json.loads(x) for x in context.allGather(json.dumps(here))) if e is not None]
            if len(set(known)) != len(known) or not set(known) <= set(spec.placement):
                misplaced = here is not None and (here not in spec.placement or known.count(here) > 1)
                yield {"node_number": node_number, "misplaced": misplaced, "executor_id": here}
                return
        addresses = gpus.task_gpu_addresses(context) or None
        spark_executor = ""
        if isinstance(context, BarrierTaskContext):
            spark_executor = context.getTaskInfos()[context.partitionId()].address
        # cpus: a whole executor's when the stage has sparkdl's profile
        record = launch_node(spec, node_number, addresses, spark_executor, cores=context.cpus())
        record["task_cpus"] = context.cpus()
        record["executor_id"] = here
        yield record

    return launch
