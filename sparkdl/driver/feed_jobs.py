"""The Spark jobs behind ``cluster.train`` and ``cluster.inference``: the functions that run in tasks.

``ClusterFeeder`` (``feeding.py``) decides what to run and watches it; this module holds what
runs on the executors: counting each partition's rows, feeding an epoch's planned slices to the
nodes, and sending partitions to the nodes for inference (results back as an RDD, or as a
DataFrame of a declared schema). DataFrames go through ``mapInArrow`` only (it also works under
Spark Connect); RDDs through ``mapPartitionsWithIndex``.
"""

from __future__ import annotations

import logging

from pyspark import RDD
from pyspark.sql import DataFrame

from ..feed.feeder import FeedTarget, feed_training_partition, infer_partition, rdd_batches
from .spark_access import is_connect

logger = logging.getLogger(__name__)


def count_rows(data: RDD | DataFrame) -> list[int]:
    """Rows per partition, in partition order (one Spark job)."""
    if isinstance(data, DataFrame):
        counts = _count_frame_in_jvm(data)
        if counts is not None:
            return counts
        import pyarrow as pa

        def count(batches):
            from pyspark import TaskContext

            rows = sum(batch.num_rows for batch in batches)
            yield pa.RecordBatch.from_pydict({"partition": [TaskContext.get().partitionId()], "rows": [rows]})

        from pyspark.sql import functions as F

        # Project the columns away first: counting then reads no feature data (Spark prunes it).
        # mapInArrow calls ``count`` for every partition, empty ones too, so none is missing.
        pairs = data.select(F.lit(0).alias("_")).mapInArrow(count, "partition long, rows long").collect()
        counts = [0] * (max((p for p, _ in pairs), default=-1) + 1)
        for partition, rows in pairs:
            counts[partition] = rows
        return counts
    return [
        rows
        for _, rows in sorted(
            data.mapPartitionsWithIndex(lambda index, rows: [(index, sum(1 for _ in rows))]).collect()
        )
    ]


def _count_frame_in_jvm(data: DataFrame) -> list[int] | None:
    """``data``'s rows per partition counted by the executor JVMs alone; None under Spark Connect
    or where this Spark lacks the pieces (the caller then counts through Python).

    Spark counts rows per partition itself when it numbers rows: ``RDD.zipWithIndex`` runs one
    job over every partition but the last and keeps each partition's first index. Run on the
    frame's rows with every column projected away, followed by one empty partition (so the
    last real one is counted too), those indices are the counts, without starting a Python
    worker in any task: a third of the ``mapInArrow`` count's time on a cached frame (docs/benchmarks-method.md,
    "At the limits", (1)). The partitions are the ones every other job over ``data`` sees
    (``stable_partitions`` pins a shuffled frame's first).
    """
    if is_connect(data):
        return None
    from py4j.protocol import Py4JJavaError
    from pyspark.sql import functions as F

    try:
        sc = data.sparkSession.sparkContext
        rows = data.select(F.lit(0).alias("_"))._jdf.queryExecution().toRdd()
        partitions = rows.getNumPartitions()
        # One partition holding nothing (an empty RDD has no partitions at all).
        padded = rows.union(sc._jsc.parallelize(sc._jvm.java.util.ArrayList(), 1).rdd())
        starts = [int(part.startIndex()) for part in padded.zipWithIndex().partitions()]
    except Py4JJavaError as failure:  # the job ran and failed: raised as PySpark raises a failed collect()
        from pyspark.errors.exceptions.captured import convert_exception

        raise convert_exception(failure.java_exception) from None
    except Exception as error:  # noqa: BLE001 - a Spark without these internals: count through Python
        logger.debug("sparkdl: counting rows in the JVM is not possible here (%s); counting through Python", error)
        return None
    if len(starts) != partitions + 1:
        return None
    return [end - start for start, end in zip(starts, starts[1:])]


def feed_epoch(
    data: RDD | DataFrame, target: FeedTarget, session: int, epoch: int, shares, split: str, shuffle_seed: int | None
) -> int:
    """One feeding job: every partition sends its planned slices; returns the mask of skipped nodes."""
    if isinstance(data, DataFrame):
        import pyarrow as pa

        def feed(batches):
            from pyspark import TaskContext

            task = TaskContext.get()
            partition, attempt = task.partitionId(), task.attemptNumber()
            rows, skipped = feed_training_partition(
                target, session, epoch, partition, shares, batches, split, shuffle_seed, attempt
            )
            yield pa.RecordBatch.from_pydict({"rows": [rows], "skipped": [skipped]})

        results = [tuple(row) for row in data.mapInArrow(feed, "rows long, skipped long").collect()]
    else:

        def feed_rdd(index, rows):
            from pyspark import TaskContext

            attempt = TaskContext.get().attemptNumber()
            yield feed_training_partition(
                target, session, epoch, index, shares, rdd_batches(rows), split, shuffle_seed, attempt
            )

        results = data.mapPartitionsWithIndex(feed_rdd).collect()
    skipped = 0
    for _, mask in results:
        skipped |= mask
    return skipped


def infer_frame(data: DataFrame, target: FeedTarget, count: int) -> RDD:
    """DataFrame inference: Arrow in, result frames out as binary rows, flattened to an RDD."""
    import pyarrow as pa

    from ..feed.wire import batch_to_results, decode_batch

    def infer(batches):
        from pyspark import TaskContext

        partition = TaskContext.get().partitionId()
        for payload in infer_partition(target, partition % count, partition, batches, decode=False):
            yield pa.RecordBatch.from_pydict({"payload": [payload]}, schema=pa.schema([("payload", pa.binary())]))

    return data.mapInArrow(infer, "payload binary").rdd.flatMap(lambda row: batch_to_results(decode_batch(row[0])))


def infer_frame_to_frame(data: DataFrame, target: FeedTarget, count: int, result_schema) -> DataFrame:
    """DataFrame inference to a DataFrame of ``result_schema`` (Arrow in, Arrow out, no RDD)."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    from ..feed.results import results_as_rows
    from ..feed.wire import batch_to_results, decode_batch

    # Spark parses a DDL string (on the server under Connect); the executors get Arrow's schema.
    struct = (
        result_schema
        if isinstance(result_schema, StructType)
        else data.sparkSession.createDataFrame([], result_schema).schema
    )
    arrow_schema = to_arrow_schema(struct)

    def infer(batches):
        from pyspark import TaskContext

        partition = TaskContext.get().partitionId()
        for payload in infer_partition(target, partition % count, partition, batches, decode=False):
            yield results_as_rows(batch_to_results(decode_batch(payload)), arrow_schema)

    return data.mapInArrow(infer, struct)


def infer_rdd(data: RDD, target: FeedTarget, count: int) -> RDD:
    """RDD inference: each partition's rows to node ``partition % count``, its results back in order."""

    def infer(index, rows):
        for results in infer_partition(target, index % count, index, rdd_batches(rows)):
            yield from results

    return data.mapPartitionsWithIndex(infer)
