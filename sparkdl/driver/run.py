"""``run()``: from TensorFlowOnSpark's arguments to a running cluster.

Validates the request, checks that Spark can host it (preflight: slots, dynamic allocation,
executors, the executors' Python), plans the launch stage (stage-level scheduling), builds the
``NodeSettings`` every node gets, and starts a :class:`~sparkdl.driver.cluster.TFCluster`.
``run`` keeps TensorFlowOnSpark's signature; ``launch`` takes the same arguments for callers
whose users name the node counts otherwise (``KerasEstimator``).
"""

from __future__ import annotations

import inspect
import os
import uuid
from dataclasses import dataclass, replace
from typing import Any, Callable

from ..common.errors import PreflightError
from ..common.roles import ClusterLayout
from ..common.timeouts import ELASTIC_WAIT_S, RESERVATION_TIMEOUT_S
from ..node import keras_policy
from ..node.config import NodeSettings
from ..storage import preflight as storage_preflight
from . import preflight, scheduling
from .arguments import InputMode, RunLimits, check_run, node_range, verbose_logs
from .attempt import ClusterRequest
from .cluster import TFCluster
from .executor_python import check_executor_python
from .lifecycle import MAX_LOST_EXECUTOR_RELAUNCHES
from .spark_access import spark_access


def run(
    sc: Any,
    map_fun: Callable[[Any, Any], Any],
    tf_args: Any,
    num_executors: int,
    num_ps: int = 0,
    tensorboard: bool = False,
    input_mode: int = InputMode.TENSORFLOW,
    log_dir: str | None = None,
    driver_ps_nodes: bool = False,
    master_node: str | None = "chief",
    reservation_timeout: float = RESERVATION_TIMEOUT_S,
    queues: Any = None,
    eval_node: bool = False,
    release_port: bool = True,
    *,
    num_gpus: int | None = None,
    env: dict[str, str] | None = None,
    use_barrier: bool = True,
    executor_wait_timeout: float = 30.0,
    set_tf_config: bool = True,
    feed_queue_bytes: int = 64 * 1024 * 1024,
    stall_timeout: float | None = None,
    max_restarts: int = 0,
    progress: bool | None = None,
    log_to_driver: bool = True,
    verbose: bool | None = None,
    keep_node_files_days: float | None = 7,
    return_results: str = "chief",
    min_executors: int | None = None,
    elastic_wait: float = ELASTIC_WAIT_S,
    max_lost_executor_relaunches: int = MAX_LOST_EXECUTOR_RELAUNCHES,
) -> TFCluster:
    """Start a TensorFlow cluster of ``num_executors`` nodes and call ``map_fun(tf_args, ctx)`` on each.

    ``sc`` is a SparkContext, a SparkSession, or a Spark Connect session (no SparkContext): under
    Connect the nodes launch as a barrier ``mapInArrow``, ``train``/``inference`` take DataFrames
    only, and the coordinator runs in this (the client's) process, which the executors must reach
    (docs/deployment.md, "Spark Connect").

    Arguments keep TensorFlowOnSpark's names and meanings: ``num_ps`` ps nodes come first,
    then the ``master_node`` ('chief', 'master' or None), then an evaluator if ``eval_node``,
    then workers; ``driver_ps_nodes`` runs the ps nodes in this driver process. ``tf_args``
    (argparse Namespace, dict or argv list) reaches ``map_fun`` as is. ``input_mode``:
    ``InputMode.TENSORFLOW`` (the nodes read their own data) or ``InputMode.SPARK``
    (``cluster.train`` feeds them DataFrames or RDDs). Every node registers within
    ``reservation_timeout`` seconds, else ReservationTimeout.
    ``tensorboard`` starts TensorBoard on the chief (or worker 0) logging ``log_dir`` (default:
    a per-cluster directory next to the node's log). A store ``log_dir`` (``s3://``, ``abfss://``,
    ``hdfs://``) is written locally on each node as ``ctx.log_dir`` and copied there while the node
    runs and when it ends, with each node's own logs under ``sparkdl-nodes/`` (``node/log_mirror.py``).
    ``release_port=False`` keeps each node's TF port reserved in ``ctx.tmp_socket`` until
    ``ctx.release_port()``. ``queues`` is accepted for compatibility and ignored.

    sparkdl's additions are keyword-only, in five groups.

    Placement: ``num_gpus`` per node (default: Spark's GPU resources, else one GPU if nvidia-smi
    finds any, else CPU); ``env`` extra environment for the TF processes (a node's Keras is the
    driver's: Keras 3, or tf-keras where ``env``, the driver's or the executors' environment sets
    ``TF_USE_LEGACY_KERAS=1``; see ``node/keras_policy.py``); ``use_barrier`` gang-schedules the
    nodes with Spark's barrier mode; ``executor_wait_timeout`` bounds the wait for enough executors
    to register (else PreflightError); ``set_tf_config=False`` leaves TF_CONFIG unset (independent
    nodes, see ``TFParallel``).

    Feeding: ``feed_queue_bytes`` bounds each node's queue of fed data (InputMode.SPARK
    backpressure).

    Recovery: ``stall_timeout`` stops a chief/worker that reports no progress for that many
    seconds and raises NodeStalled naming it, with its Python stacks (progress: reading the
    feed or waiting for it, ``ctx.heartbeat()``, ``ctx.report_progress()``, or Keras's
    ``ctx.progress_callback()``; default None: off, though ``cluster.train`` always applies
    its ``feed_timeout`` this way). ``max_restarts`` relaunches the whole cluster up to that
    many times after a node fails (``ctx.attempt`` counts relaunches); pair it with
    ``ctx.backup_and_restore(dir)`` so training resumes from the last epoch.

    Recovery, elastic: ``min_executors`` (default: ``num_executors``, a fixed cluster) lets the
    cluster run on fewer nodes. It starts on as many executors as Spark has within
    ``executor_wait_timeout`` (at least ``min_executors``); when a node's executor is lost and Spark
    gives no replacement within ``elastic_wait`` seconds, it goes on with the survivors (a fresh
    MultiWorkerMirroredStrategy, new TF_CONFIG, the epochs not yet completed fed again, shared out
    over the new node count); when Spark adds executors it grows back, at the next epoch boundary
    of a ``cluster.train`` call, up to ``num_executors``. Losing an executor is then not counted
    against ``max_restarts`` but against ``max_lost_executor_relaunches`` (default 10): a node whose
    own memory gets its container killed loses its executor on every attempt, so once that many
    relaunches followed lost executors the next loss is raised as a ClusterError naming the node and
    the setting. ``cluster.resizes`` and ``cluster.history["nodes"]`` say when and
    why; docs/reliability.md says what it guarantees. With ``spark.dynamicAllocation.enabled``
    the nodes launch without barrier mode and each launch task holds its executor for the node's
    life, so Spark never releases a node's executor as idle.

    Console: ``progress`` (default on unless ``SPARKDL_PROGRESS=0``) displays
    ``cluster.train``'s rows, epochs, partitions and the chief's step/loss (from
    ``ctx.progress_callback()``), and the partitions and rows scored by each action on an RDD
    from ``cluster.inference``; ``log_to_driver`` prints each node's stdout/stderr (and Python
    logging) on the driver's stdout prefixed ``[role:index]``, leaving out TensorFlow's C++ and
    INFO chatter unless ``verbose`` (default: ``SPARKDL_VERBOSE=1`` in the environment) asks for
    every line.
    Either way each node's full log stays in the file named by ``cluster_info[i]['log_path']``,
    under ``$TMPDIR/sparkdl-$USER/<cluster id>/`` on its host; a starting node removes the
    directories of this user's earlier clusters on that host once nothing in them has changed
    for ``keep_node_files_days`` (None keeps them for good).

    Results: what ``map_fun`` returns reaches the driver as JSON (numbers, strings, booleans,
    None, lists, dicts with string keys, numpy numbers and arrays; at most 512 KiB per node):
    ``shutdown()`` returns the chief's (or, without a chief, worker 0's) value. With
    ``return_results="all"`` every node sends its value and ``cluster.results`` lists them by
    node number; by default (``"chief"``) only the chief sends it. A value that cannot travel
    fails its node with a message naming its type.

    The executors' Python: before any node starts, one small Spark task checks that it imports
    sparkdl, and raises PreflightError naming that interpreter and ``PYSPARK_PYTHON`` when it does
    not (other TensorFlow or Keras versions than the driver's are a warning). With a local master
    (``local[N]``, ``local-cluster[...]``) and no ``PYSPARK_PYTHON`` or ``spark.pyspark.python``,
    the executors run this driver's Python.

    Returns once every node has registered; raises PreflightError or ReservationTimeout
    (naming the missing nodes) otherwise.
    """
    return launch(CountNames(), **locals())  # every argument, by name


@dataclass(frozen=True)
class CountNames:
    """The names the node counts go by in error messages: ``run``'s, or a caller's whose users
    set them under other names (``KerasEstimator``: ``num_workers``, ``min_workers``)."""

    nodes: str = "num_executors"
    min_nodes: str = "min_executors"


def launch(names: CountNames, /, *args: Any, **kwargs: Any) -> TFCluster:
    """:func:`run` with ``run``'s arguments, its errors naming the node counts as ``names`` does."""
    arguments = inspect.signature(run).bind(*args, **kwargs)
    arguments.apply_defaults()
    return _start(names, **arguments.arguments)


def _start(
    names: CountNames,
    *,
    sc: Any,
    map_fun: Callable[[Any, Any], Any],
    tf_args: Any,
    num_executors: int,
    num_ps: int,
    tensorboard: bool,
    input_mode: int,
    log_dir: str | None,
    driver_ps_nodes: bool,
    master_node: str | None,
    reservation_timeout: float,
    queues: Any,
    eval_node: bool,
    release_port: bool,
    num_gpus: int | None,
    env: dict[str, str] | None,
    use_barrier: bool,
    executor_wait_timeout: float,
    set_tf_config: bool,
    feed_queue_bytes: int,
    stall_timeout: float | None,
    max_restarts: int,
    progress: bool | None,
    log_to_driver: bool,
    verbose: bool | None,
    keep_node_files_days: float | None,
    return_results: str,
    min_executors: int | None,
    elastic_wait: float,
    max_lost_executor_relaunches: int,
) -> TFCluster:
    """``run``'s work, every argument given (``launch`` applies ``run``'s defaults)."""
    del queues  # sparkdl has no multiprocessing-manager queues
    layout = ClusterLayout(
        num_executors=num_executors,
        num_ps=num_ps,
        master_node=master_node,
        eval_node=eval_node,
        driver_ps_nodes=driver_ps_nodes,
    )
    limits = RunLimits(
        reservation_timeout=reservation_timeout,
        stall_timeout=stall_timeout,
        max_restarts=max_restarts,
        max_lost_executor_relaunches=max_lost_executor_relaunches,
        keep_node_files_days=keep_node_files_days,
        num_gpus=num_gpus,
    )
    check_run(map_fun, input_mode, layout, limits, return_results=return_results)
    nodes = node_range(layout, min_executors)
    if not elastic_wait or elastic_wait < 0:
        raise ValueError(f"elastic_wait must be positive seconds, got {elastic_wait!r}")
    feeds = input_mode == InputMode.SPARK
    spark = spark_access(sc)
    # Every store path in tf_args is reached now, before any node starts (endpoint, bucket, credentials).
    # Listed, not written: tf_args name input data too, which read-only credentials may serve.
    store = spark.store_settings()
    storage_preflight.check(storage_preflight.paths_in(tf_args), store, write=False)
    if nodes.elastic and spark.connect:
        raise PreflightError(
            f"{names.min_nodes} needs a classic SparkContext: a Spark Connect client cannot see the executors "
            "an elastic cluster sizes itself by"
        )
    first = layout.first_spark_node
    # How many nodes one executor hosts: in InputMode.SPARK a node takes a whole executor.
    per_executor = 1 if feeds else max(1, preflight.slot_layout(spark.master, spark.conf).slots_per_executor or 1)
    dynamic = preflight.dynamic_allocation(spark.conf)
    slots = preflight.check_configuration(
        spark.master, spark.conf, nodes.min_nodes - first, names.min_nodes if nodes.elastic else names.nodes
    )
    # A Connect client cannot count executors (Spark's barrier check waits for slots); under dynamic
    # allocation Spark starts them when the launch stage asks.
    if not spark.connect and not dynamic:
        executors = preflight.wait_for_executors(
            spark.count_executors,
            num_executors - first,
            slots,
            executor_wait_timeout,
            one_node_per_executor=feeds,
            nodes_param=names.nodes,
            at_least=nodes.min_nodes - first,
        )
        if nodes.elastic:  # the executors Spark can give tasks to, not those it is removing
            executors = len(spark.active_executors() or ()) or executors
        if nodes.elastic and first + executors * per_executor < num_executors:  # start on what Spark has
            layout = replace(layout, num_executors=first + executors * per_executor)
    check_executor_python(spark)  # a Python without sparkdl fails here, plainly, not in the launch task
    spark_nodes = layout.num_executors - first
    # A SPARK-mode node outlives its launch task, so its launch stage asks for a whole executor.
    launch_plan = scheduling.plan_launch(spark, spark_nodes, num_gpus) if feeds else None

    from pyspark import cloudpickle

    settings = NodeSettings(
        fn=cloudpickle.dumps((map_fun, tf_args)),
        roles=tuple(layout.roles),
        feeds=feeds,
        set_tf_config=set_tf_config,
        release_port=release_port,
        reservation_timeout=float(limits.reservation_timeout),
        tensorboard_node=layout.chief_like if tensorboard else None,
        log_dir=log_dir,
        num_gpus=limits.num_gpus,
        feed_queue_bytes=int(feed_queue_bytes),
        stream_logs=bool(log_to_driver),
        verbose_logs=verbose_logs(verbose),
        env=keras_policy.cluster_env(env or {}, os.environ),
        keep_node_files_days=limits.keep_node_files_days,
        return_results=return_results,
        hold_executor=dynamic,
        elastic=nodes.elastic,
        storage=store,
    )
    request = ClusterRequest(
        settings=settings,
        first_spark_node=first,
        # Spark refuses barrier stages under dynamic allocation; the nodes still form a cluster only
        # once every one registered (each launch task holds its executor until then).
        use_barrier=use_barrier and not dynamic,
        stall_timeout=limits.stall_timeout,
        launch_profile=launch_plan.profile if launch_plan else None,
        layout=layout,
    )
    cluster = TFCluster(
        spark,
        request,
        uuid.uuid4().hex[:12],
        input_mode,
        limits.max_restarts,
        progress,
        node_range=nodes,
        elastic_wait=float(elastic_wait),
        nodes_per_executor=per_executor,
        max_lost_executor_relaunches=limits.max_lost_executor_relaunches,
    )
    cluster.start()
    return cluster
