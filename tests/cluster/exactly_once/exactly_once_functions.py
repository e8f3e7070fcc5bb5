"""Node and source functions of test_exactly_once.py, beside them (shipped to executors by Spark)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import feed_functions as feed_fns
from node_functions import write_whole

# 2,000 rows a partition, failing (or stalling) after 1,200: past the first 1,024-row RDD chunk and the
# first two 500-row Arrow frames (the test's maxRecordsPerBatch), so some rows were sent before it.
ROWS, PARTITIONS, FAIL_AFTER = 8_000, 4, 1_200


def record_orders_and_executor(args, ctx):
    """Say which Spark executor hosts this node (its working directory is named after it), then
    record each training run's per-epoch label order (``node_functions.record_epoch_orders``)."""
    write_whole(Path(args["out"], f"executor-node{ctx.executor_id}"), os.path.basename(os.getcwd()))
    feed_fns.record_epoch_orders(args, ctx)


def count_feed_noting_executor(args, ctx):
    """Say which Spark executor hosts this node, then read the feed until it ends (``feed_functions.count_feed``)."""
    write_whole(Path(args["out"], f"executor-node{ctx.executor_id}"), os.path.basename(os.getcwd()))
    feed_fns.count_feed(args, ctx)


def _feeding() -> bool:
    """Whether this task feeds nodes (the row-count job reads the source too, and must not fail)."""
    from pyspark import TaskContext

    return "sparkdl: feed" in (TaskContext.get().getLocalProperty("spark.job.description") or "")


def failing_once(marker: str, partition: int, seen: int) -> None:
    """A flaky source: partition 1 fails once, part-way, in the first feeding task that reaches it."""
    if partition == 1 and seen == FAIL_AFTER and _feeding() and not os.path.exists(marker):
        Path(marker).touch()
        raise RuntimeError(f"flaky source: partition 1 failed after {FAIL_AFTER} rows (once)")


def flaky_rdd(sc, marker: str):
    """ROWS rows ``([features], label)`` in PARTITIONS partitions, labels the global row numbers."""
    size = ROWS // PARTITIONS

    def rows(index, _):
        for seen, row in enumerate(range(index * size, (index + 1) * size)):
            failing_once(marker, index, seen)
            yield ([float(row % 7), 1.0], float(row))

    return sc.parallelize(range(PARTITIONS), PARTITIONS).mapPartitionsWithIndex(rows)


def flaky_frame(spark, marker: str):
    """The same rows as a DataFrame, through an upstream mapInPandas that fails once part-way."""

    def add_features(frames):
        from pyspark import TaskContext

        partition, seen = TaskContext.get().partitionId(), 0
        for frame in frames:
            for offset in range(len(frame)):
                failing_once(marker, partition, seen + offset)
            seen += len(frame)
            labels = frame["id"].astype("float64")
            yield frame.assign(x=[[float(v % 7), 1.0] for v in frame["id"]], y=labels)[["x", "y"]]

    source = spark.range(0, ROWS, numPartitions=PARTITIONS)
    return source.mapInPandas(add_features, "x array<double>, y double")


def stalling_on(executor: str, marker: str, released: str):
    """A source whose first feeding task on ``executor`` stops part-way and waits (bounded) to be killed."""

    def rows(index, _):
        size = ROWS // PARTITIONS
        for seen, row in enumerate(range(index * size, (index + 1) * size)):
            if seen == FAIL_AFTER and _feeding() and os.path.basename(os.getcwd()) == executor:
                if not os.path.exists(marker):
                    Path(marker).write_text(str(index))
                    deadline = time.monotonic() + 120
                    while not os.path.exists(released) and time.monotonic() < deadline:
                        time.sleep(0.2)  # waiting to be killed with its executor
            yield ([float(row % 7), 1.0], float(row))

    return rows


def straggling_once(out: str):
    """Partition 1's first attempt stops part-way (a straggler) until released, or for at most two
    minutes; every attempt notes its host, so the test sees the speculative copy ran elsewhere."""

    def rows(index, _):
        from pyspark import TaskContext

        attempt, size = TaskContext.get().attemptNumber(), ROWS // PARTITIONS
        feeding = _feeding()
        if feeding:
            Path(out, f"attempt-p{index}-a{attempt}").write_text(os.environ.get("SPARK_LOCAL_IP", "?"))
        for seen, row in enumerate(range(index * size, (index + 1) * size)):
            if feeding and index == 1 and attempt == 0 and seen == FAIL_AFTER:
                deadline = time.monotonic() + 120
                while not os.path.exists(Path(out, "released")) and time.monotonic() < deadline:
                    time.sleep(0.2)  # a straggling source, overtaken by its speculative copy
            yield ([float(row % 7), 1.0], float(row))

    return rows


def reordered_on_retry(marker: str):
    """A source whose partition 1 comes back in another order on each attempt (as a recomputed shuffle
    output may), its attempt 0 failing part-way in the feeding job (once: ``marker`` remembers it)."""

    def rows(index, _):
        from pyspark import TaskContext

        size, attempt = ROWS // PARTITIONS, TaskContext.get().attemptNumber()
        labels = list(range(index * size, (index + 1) * size))
        if index == 1 and attempt:
            labels = labels[attempt:] + labels[:attempt]  # the same rows, rotated by the attempt number
        for seen, row in enumerate(labels):
            failing_once(marker, index, seen)
            yield ([float(row % 7), 1.0], float(row))

    return rows


def features_stalling_in_epoch_two(marker: str, released: str):
    """A ``mapInPandas`` function adding ``x`` and ``y`` to ``id`` rows; the first feeding task of the
    training split's epoch 2 that gets rows stops after its first frame and waits (bounded) to be released."""

    def add_features(frames):
        from pyspark import TaskContext

        description = TaskContext.get().getLocalProperty("spark.job.description") or ""
        stall = "sparkdl: feed epoch 2/" in description
        for frame in frames:
            yield frame.assign(x=[[float(v % 7), 1.0] for v in frame["id"]], y=frame["id"].astype("float64"))[
                ["x", "y"]
            ]
            if stall and not os.path.exists(marker):
                Path(marker).write_text(os.path.basename(os.getcwd()))
                deadline = time.monotonic() + 120
                while not os.path.exists(released) and time.monotonic() < deadline:
                    time.sleep(0.2)  # the test kills the executor without a node meanwhile

    return add_features
