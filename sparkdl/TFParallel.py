"""Independent single-node TensorFlow on each executor (TensorFlowOnSpark's ``TFParallel``).

Useful for embarrassingly parallel work such as hyper-parameter sweeps or per-shard batch
inference: every node runs ``map_fn(args, ctx)`` alone, with no TF_CONFIG and no collective,
but with sparkdl's GPU pinning, process supervision and error reporting.
"""

from __future__ import annotations

from typing import Any, Callable

from .common.timeouts import SHUTDOWN_TIMEOUT_S
from .driver.run import run as _run_cluster


def run(
    sc: Any,
    map_fn: Callable[[Any, Any], Any],
    tf_args: Any,
    num_executors: int,
    use_barrier: bool = True,
    *,
    timeout: float = SHUTDOWN_TIMEOUT_S,
    return_results: str = "chief",
    **kwargs: Any,
) -> Any:
    """Run ``map_fn(tf_args, ctx)`` once on each of ``num_executors`` executors and wait for all.

    ``sc`` is a SparkContext, a SparkSession or a Spark Connect session. ``use_barrier``
    gang-schedules the tasks (all start together, one per executor slot); asking for more
    nodes than there are slots raises PreflightError at once. Raises
    ClusterError naming each failed node. Extra keyword arguments go to ``TFCluster.run``
    (e.g. ``num_gpus``, ``env``).

    Returns what node 0's ``map_fn`` returned (TensorFlowOnSpark returned None), or with
    ``return_results="all"`` a list of every node's, by node number: JSON values (numbers,
    strings, lists, dicts, numpy numbers and arrays), at most 512 KiB per node.
    """
    cluster = _run_cluster(
        sc,
        map_fn,
        tf_args,
        num_executors,
        master_node=None,
        use_barrier=use_barrier,
        set_tf_config=False,
        return_results=return_results,
        **kwargs,
    )
    value = cluster.shutdown(timeout=timeout)
    return cluster.results if return_results == "all" else value
