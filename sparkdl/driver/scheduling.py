"""Stage-level scheduling of the node-launch stage: in InputMode.SPARK each node takes a whole executor.

In InputMode.SPARK a node outlives its launch task: the task returns once the node runs, so
that feeding tasks can use the executor. Two nodes must still never share an executor, and
Spark keeps two launch tasks apart only if they cannot fit on one executor together. Rather
than demanding one task slot per executor for the whole application (``spark.task.cpus`` equal
to ``spark.executor.cores``, sparkdl's old rule), the launch stage alone carries a task
``ResourceProfile`` that asks for all of an executor's cores (and the node's GPUs): every
other stage of the application keeps ``spark.task.cpus`` and all of its slots.

Spark 4 accepts such a profile with dynamic allocation off on standalone (``spark://``,
``local-cluster[...]``), YARN and Kubernetes. Elsewhere (``local[N]``, other cluster
managers) sparkdl needs the old rule only when it matters (several nodes, several slots per
executor) and then says which setting to change. What a node's GPU becomes once its launch
task has returned is documented in docs/deployment.md ("Stage-level scheduling").
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable

from ..common.errors import PreflightError
from .preflight import local_cluster_shape

logger = logging.getLogger(__name__)

Conf = Callable[[str], "str | None"]


@dataclass(frozen=True)
class LaunchResources:
    """What each launch task asks Spark for: ``cpus`` cores and ``gpus`` GPUs (0: none)."""

    cpus: int
    gpus: float = 0.0

    def describe(self) -> str:
        """E.g. ``"4 cores and 1 GPU(s)"``."""
        return f"{self.cpus} cores" + (f" and {self.gpus:g} GPU(s)" if self.gpus else "")


@dataclass(frozen=True)
class LaunchPlan:
    """The launch stage's resources and the PySpark ``ResourceProfile`` Spark accepted for them."""

    resources: LaunchResources
    profile: Any  # pyspark.resource.ResourceProfile


def supports_task_profiles(master: str) -> bool:
    """Whether Spark 4 runs a stage with its own task profile on this master, dynamic allocation off."""
    return master == "yarn" or master.startswith(("spark://", "local-cluster[", "k8s://"))


def _amount(conf: Conf, name: str) -> float:
    return float(conf(name) or 0)


def executor_cores(master: str, conf: Conf, registered: Callable[[], list[int]]) -> int | None:
    """Cores per executor: ``local-cluster[N,C,M]``'s C, ``spark.executor.cores``, else what the
    registered executors report (``registered()``), else Spark's default of 1 on YARN and
    Kubernetes; None when unknown (a standalone executor takes all of its worker's cores).

    Raises PreflightError when registered executors differ, since one profile cannot be a
    whole executor for all of them.
    """
    shape = local_cluster_shape(master)
    if shape:
        return shape[1]
    if conf("spark.executor.cores"):
        return int(conf("spark.executor.cores"))
    cores = sorted(set(registered()))
    if len(cores) > 1:
        raise PreflightError(
            f"the executors have different numbers of cores ({', '.join(map(str, cores))}), and each TF node's "
            "launch task asks for a whole executor; set spark.executor.cores so every executor has the same"
        )
    if cores:
        return cores[0]
    return 1 if master == "yarn" or master.startswith("k8s://") else None


def slots_per_executor(cores: int, conf: Conf) -> int:
    """How many tasks of the application's default profile one executor runs at once (cores, GPUs)."""
    slots = cores // int(conf("spark.task.cpus") or 1)
    executor_gpus = _amount(conf, "spark.executor.resource.gpu.amount")
    task_gpus = _amount(conf, "spark.task.resource.gpu.amount")
    if executor_gpus and task_gpus:
        # Spark's rule: a fractional amount shares each GPU among int(1 / amount) tasks.
        gpu_slots = int(executor_gpus) * int(1 / task_gpus) if task_gpus < 1 else int(executor_gpus // task_gpus)
        slots = min(slots, gpu_slots)
    return slots


def launch_resources(
    master: str, conf: Conf, spark_nodes: int, num_gpus: int | None, cores: int | None
) -> LaunchResources | None:
    """What each InputMode.SPARK launch task must ask for; None when the default profile will do.

    A profile is *needed* when two launch tasks could share an executor (several nodes, several
    task slots per executor) and *wanted* when the executors have GPUs that no default task gets
    (``spark.task.resource.gpu.amount`` unset), so the node's GPUs come from Spark rather than
    ``nvidia-smi``. The request is a whole executor: all ``cores`` and, unless ``num_gpus`` says
    otherwise, all of its GPUs. Raises PreflightError naming the setting to change when a needed
    profile cannot be used, or cannot fit an executor.
    """
    executor_gpus = _amount(conf, "spark.executor.resource.gpu.amount")
    task_gpus = _amount(conf, "spark.task.resource.gpu.amount")
    supported = supports_task_profiles(master)
    if cores is None:
        if spark_nodes > 1 and supported:
            raise PreflightError(
                "cannot tell how many cores each executor has, and each TF node's launch task asks for a whole "
                "executor: set spark.executor.cores"
            )
        return None
    slots = slots_per_executor(cores, conf)
    needed = spark_nodes > 1 and slots > 1
    gpus_from_spark = executor_gpus > 0 and not task_gpus and num_gpus != 0
    if not (needed or gpus_from_spark):
        return None
    if not supported:
        if needed:
            raise PreflightError(
                f"each executor has {slots} task slots, so Spark may place two TF nodes on one executor, and master "
                f"{master!r} cannot give sparkdl's launch stage a whole executor per task (stage-level scheduling "
                "works on standalone, local-cluster, YARN and Kubernetes). Give each executor one slot: set "
                "spark.task.cpus equal to spark.executor.cores."
            )
        return None
    gpus = 0.0 if num_gpus == 0 or not executor_gpus else float(num_gpus or executor_gpus)
    if gpus > executor_gpus:
        raise PreflightError(
            f"num_gpus={num_gpus} but each executor has spark.executor.resource.gpu.amount={executor_gpus:g}; "
            "raise that setting or lower num_gpus"
        )
    return LaunchResources(cores, gpus)


def resource_profile(resources: LaunchResources) -> Any:
    """The PySpark task ``ResourceProfile`` asking for ``resources`` (no executor requests)."""
    from pyspark.resource import ResourceProfileBuilder, TaskResourceRequests

    requests = TaskResourceRequests().cpus(resources.cpus)
    if resources.gpus:
        requests.resource("gpu", resources.gpus)
    return ResourceProfileBuilder().require(requests).build


def register_profile(access, resources: LaunchResources) -> Any:
    """The profile for ``resources``, accepted by Spark now, so a refusal is a PreflightError.

    Spark checks a profile when an RDD first takes it (classic) or when the client creates it
    (Spark Connect): a cluster manager or setting that rejects stage-level scheduling says so
    here, before any node starts.
    """
    try:
        profile = resource_profile(resources)
        access.check_profile(profile)
    except Exception as exc:  # py4j's Py4JJavaError or Connect's error: Spark's reason is its first line
        reason = str(getattr(exc, "java_exception", exc)).strip().splitlines()[0].rstrip(".")
        raise PreflightError(
            f"Spark refused the TF node launch stage's resource profile ({resources.describe()} per task): "
            f"{reason}. Give each executor one task slot instead: set spark.task.cpus equal to "
            "spark.executor.cores."
        ) from exc
    return profile


def plan_launch(access, spark_nodes: int, num_gpus: int | None) -> LaunchPlan | None:
    """The launch stage's profile for an InputMode.SPARK cluster (None: the default one).

    ``access`` is the cluster's ``SparkAccess``. Call it once the executors registered
    (``preflight.wait_for_executors``): their cores are read from Spark when the configuration
    does not say (a classic SparkContext only; under Spark Connect, set spark.executor.cores).
    """
    master = access.master
    # Only a master that can use a profile needs the cores (local[N] has no executors to ask).
    registered = (lambda: access.executor_cores(at_least=spark_nodes)) if supports_task_profiles(master) else list
    cores = executor_cores(master, access.conf, registered)
    resources = launch_resources(master, access.conf, spark_nodes, num_gpus, cores)
    if resources is None:
        return None
    profile = register_profile(access, resources)
    logger.info("sparkdl: each TF node's launch task asks for a whole executor: %s", resources.describe())
    return LaunchPlan(resources, profile)
