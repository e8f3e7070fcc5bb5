"""Pin a DataFrame's partitions so that every Spark job over it sees the same ones.

``cluster.train`` runs several jobs over the same data: one that counts the rows of each
partition (with every column projected away, so it reads no feature data) and then one
feeding job per epoch that sends each partition its planned rows. The plan is only right if
all those jobs see the same partitions with the same rows. For a DataFrame that comes out of a
shuffle (a join, a groupBy, a repartition) that is not guaranteed: each job is planned anew,
and adaptive query execution coalesces or splits shuffle partitions from the sizes it measures
(which column pruning changes), and even without AQE pruning changes the size estimates that
pick a join strategy and its build side. The count job and the feeding jobs can then be
partitioned differently, and training fails ("not deterministic") or follows a wrong plan.

:func:`stable_partitions` materialises such a frame once with a local checkpoint, so later jobs
read stored blocks instead of planning the shuffle again. What a frame reads decides: a frame
over cached rows (a filter or select of a persisted frame) already reads stored blocks, so the
shuffles that filled the cache are not planned again and it is used as it is.
"""

from __future__ import annotations

import contextlib
import logging
import re
from typing import Iterator, TypeVar

from pyspark import RDD, StorageLevel
from pyspark.sql import DataFrame

from .spark_access import is_connect

logger = logging.getLogger(__name__)

Data = TypeVar("Data", RDD, DataFrame)

# A physical plan's tree string, line by line: the tree-drawing prefix (" :  +- "), then the node:
# an optional whole-stage-codegen marker ("*(3) ") and its name. The column where the node starts
# is its depth in the drawing. Matching node names (not "Exchange" anywhere) keeps a column named
# e.g. "ExchangeRate" from counting. Every exchange counts, broadcasts too: a broadcast join's
# build side (and so which side's partitions the output has) is chosen from size estimates, which
# column pruning changes. ("Exchange", "BroadcastExchange", "ReusedExchange", and plugins'
# "GpuColumnarExchange"...)
_TREE_PREFIX = " :|+-"
_EXCHANGE_NODE = re.compile(r"(?:\*\(\d+\)\s+)?\w*Exchange\b")
# A cached relation: the lines drawn deeper below it are the plan that filled the cache (Spark
# prints it as the relation's inner child), which later jobs do not run: they read its blocks.
_CACHED_NODE = re.compile(r"InMemoryRelation\b")


def reads_an_exchange(plan: str) -> bool:
    """Whether the physical plan ``plan`` (its tree string, as ``explain()`` prints it) runs a
    shuffle or broadcast exchange of its own: exchanges inside the plan of a cached relation it
    reads (``InMemoryRelation``, drawn below the ``InMemoryTableScan`` that reads the stored
    blocks) do not count, since no job over ``plan`` runs them again once the cache is filled."""
    cached_at = None  # the column of the cached relation whose plan is being skipped
    for line in plan.splitlines():
        node = line.lstrip(_TREE_PREFIX)
        if not node:
            continue
        column = len(line) - len(node)
        if cached_at is not None:
            if column > cached_at:
                continue
            cached_at = None
        if _CACHED_NODE.match(node):
            cached_at = column
        elif _EXCHANGE_NODE.match(node):
            return True
    return False


def _has_exchange(frame: DataFrame) -> bool:
    """Whether ``frame``'s physical plan has a shuffle or broadcast exchange outside the cached
    relations it reads (:func:`reads_an_exchange`).

    The tree string is searched rather than the tree walked: with AQE the root is an
    ``AdaptiveSparkPlanExec``, a leaf whose plan hangs off ``executedPlan``/``inputPlan`` (and,
    once run, inside query stages), while its tree string prints that whole plan, subqueries
    included; and Spark Connect gives only the string. Planning does not run anything.
    """
    if is_connect(frame):  # the server's physical plan, as explain() prints it
        plan = frame._explain_string(extended=False)
    else:
        plan = frame._jdf.queryExecution().executedPlan().toString()
    return reads_an_exchange(plan)


def _release(frame: DataFrame) -> None:
    """Drop the blocks of a local checkpoint made by :func:`stable_partitions` (best effort).

    Under Spark Connect the server drops them itself once the client lets go of the frame.
    """
    if is_connect(frame):
        return
    try:
        logical = frame._jdf.queryExecution().logical()  # LogicalRDD over the checkpointed RDD
        rdd_id = logical.rdd().id()
        # SparkContext.unpersistRDD is what RDD.unpersist and the ContextCleaner call; calling
        # it directly avoids the warning Spark 4 logs for unpersisting a locally checkpointed RDD
        # (SPARK-48928), which is harmless here: nothing reads this RDD any more.
        frame.sparkSession.sparkContext._jsc.sc().unpersistRDD(rdd_id, False)
        logger.debug("sparkdl: released the local checkpoint (RDD %d)", rdd_id)
    except Exception as error:  # noqa: BLE001 - cleaning up must never mask train's outcome
        logger.debug(
            "sparkdl: could not release the local checkpoint (%s); Spark's ContextCleaner "
            "removes its blocks once the checkpointed frame is garbage-collected",
            error,
        )


@contextlib.contextmanager
def stable_partitions(data: Data) -> Iterator[Data]:
    """Yield ``data`` in a form whose partitions are the same in every Spark job run on it.

    - An RDD is yielded unchanged (its partitions are fixed; determinism is the caller's).
    - A DataFrame that is cached/persisted, or whose physical plan has no exchange of its own,
      is yielded unchanged: its partitions do not depend on how a job is planned. (Cached is
      read from ``storageLevel``, not pyspark's ``is_cached``, which is only set on the Python
      object that ``cache()`` was called on.) A frame that reads a cached one (a filter or
      select of it: ``KerasEstimator``'s training and validation rows) reads its stored blocks,
      so the exchanges that filled the cache are not its own; an exchange over the cached rows
      (a repartition, a join) is.
    - Any other DataFrame (one out of a join, groupBy, repartition...) is replaced by
      ``data.localCheckpoint(eager=False)``: the first job run on it (the row count) computes
      all its columns once and stores its partitions in the executors' block managers (memory,
      spilling to disk); later jobs read those blocks, so they see exactly the same partitions.
      Nothing goes through Python. With AQE, creating the checkpoint already runs the shuffle
      stages (the final plan is fixed there); without AQE nothing runs until the first job.
      On exit the stored blocks are released; if that fails, Spark's ContextCleaner removes
      them once the checkpointed frame is garbage-collected.

    A local checkpoint lives on the executors: if one is lost (or removed by dynamic
    allocation) before the last job, that job fails rather than silently recomputing, and
    ``cluster.train`` raises a ``FeedError`` saying so and what to do (``spark_errors.py``).
    """
    if not isinstance(data, DataFrame):
        logger.debug("sparkdl: feeding an RDD: its partitions are used as they are")
        yield data
        return
    if data.storageLevel != StorageLevel.NONE:
        logger.debug("sparkdl: the DataFrame is persisted (%s): its partitions are used as they are", data.storageLevel)
        yield data
        return
    if not _has_exchange(data):
        logger.debug("sparkdl: the DataFrame's plan has no exchange: its partitions are used as they are")
        yield data
        return
    logger.debug(
        "sparkdl: the DataFrame comes out of an exchange: pinning its partitions with a local "
        "checkpoint (computed by the first job, then read by every later one)"
    )
    pinned = data.localCheckpoint(eager=False)
    try:
        yield pinned
    finally:
        _release(pinned)
