"""Pinned partitions (sparkdl/driver/partitions.py) for DataFrames that come out of a shuffle.

``cluster.train`` counts each partition's rows with every column projected away, then feeds
the full rows in later jobs. With AQE a shuffle's partitions are coalesced from the measured
shuffle sizes, so an uncached sort-merge join can have different partitions in the two jobs.
These tests show that happening, and that ``stable_partitions`` makes the jobs agree.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from sparkdl import TFCluster
from sparkdl.driver.feed_jobs import _count_frame_in_jvm, count_rows
from sparkdl.driver.partitions import _has_exchange, stable_partitions

import feed_functions as feed_fns
from conftest import read_json_files

pytestmark = pytest.mark.timeout(300)

ROWS = 2000
# A sort-merge join (no broadcasts) under AQE, coalescing shuffle partitions to ~8 KB. The
# minimum partition size (default 1 MB, a floor under the advisory size whatever
# parallelismFirst says) is lowered too, else this small data coalesces to a single partition
# in both jobs. Measured here: the count job gets 2 partitions, a job reading every column 24
# (at 2 KB: 8 against 72, three times the Python tasks for the same proof). (With the default
# floor the counts also differ once the shuffle is big enough: 40000 rows of 128 floats gave 10
# partitions fed against 1 counted.)
SHUFFLE_CONF = {
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.autoBroadcastJoinThreshold": "-1",
    "spark.sql.adaptive.advisoryPartitionSizeInBytes": "8k",
    "spark.sql.adaptive.coalescePartitions.minPartitionSize": "4k",
}


@pytest.fixture
def spark(sc2):
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()
    saved = {name: spark.conf.get(name) for name in SHUFFLE_CONF}
    try:
        for name, value in SHUFFLE_CONF.items():
            spark.conf.set(name, value)
        yield spark
    finally:
        for name, value in saved.items():
            spark.conf.set(name, value)


def joined(spark):
    """An uncached sort-merge join of ROWS rows ``k, b, x array<float>[16], y double`` (y: 0..ROWS-1, last,
    so that count_feed, which gets rows as tuples, sums it)."""
    from pyspark.sql import functions as F

    left = spark.range(ROWS).select(
        (F.col("id") % 97).alias("k"),
        F.array(*[(F.col("id") + i).cast("float") for i in range(16)]).alias("x"),
        F.col("id").cast("double").alias("y"),
    )
    right = spark.range(97).select(F.col("id").alias("k"), (F.col("id") * 2).alias("b"))
    return left.join(right, "k").select("k", "b", "x", "y")


def full_row_counts(frame) -> list[int]:
    """Rows per partition as a job that reads every column (like a feeding job) sees them."""

    def count(batches):
        from pyspark import TaskContext

        rows = sum(batch.num_rows for batch in batches)
        yield pa.RecordBatch.from_pydict({"partition": [TaskContext.get().partitionId()], "rows": [rows]})

    pairs = [tuple(row) for row in frame.mapInArrow(count, "partition long, rows long").collect()]
    counts = [0] * (max(partition for partition, _ in pairs) + 1)
    for partition, rows in pairs:
        counts[partition] = rows
    return counts


def stored_rdd_ids(sc) -> set[int]:
    return {info.id() for info in sc._jsc.sc().getRDDStorageInfo()}


def test_without_pinning_counting_and_feeding_jobs_see_different_partitions(spark):
    frame = joined(spark)
    assert _has_exchange(frame)
    counted, fed = count_rows(frame), full_row_counts(frame)
    assert sum(counted) == sum(fed) == ROWS
    # The count job shuffles only the join keys, so AQE coalesces it to fewer partitions.
    assert counted != fed
    assert sum(1 for rows in counted if rows) < sum(1 for rows in fed if rows)


def test_pinned_frame_has_the_same_partitions_in_every_job_and_is_released(spark, sc2):
    frame = joined(spark)
    with stable_partitions(frame) as pinned:
        assert pinned is not frame
        assert not _has_exchange(pinned)  # a scan of the checkpointed RDD
        counted = count_rows(pinned)
        rdd_id = pinned._jdf.queryExecution().logical().rdd().id()
        assert rdd_id in stored_rdd_ids(sc2)  # the count job stored the partitions
        fed = full_row_counts(pinned)
        assert counted == fed == full_row_counts(pinned)
        assert sum(fed) == ROWS and sum(1 for rows in fed if rows) > 1
    assert rdd_id not in stored_rdd_ids(sc2)


def test_the_jvm_count_matches_a_python_count_with_empty_partitions_first_between_and_last(spark):
    frame = spark.range(0, 40, numPartitions=8).where("id < 8 or (id >= 20 and id < 25)")  # 5 rows a partition
    counted = _count_frame_in_jvm(frame)
    assert counted == full_row_counts(frame) == [5, 3, 0, 0, 5, 0, 0, 0]  # a Python count ends at the last non-empty
    assert count_rows(frame) == counted
    assert _count_frame_in_jvm(spark.range(0, 7, numPartitions=1)) == [7]
    assert _count_frame_in_jvm(spark.range(0, 3, numPartitions=3).where("id > 5")) == [0, 0, 0]
    # A failing job raises as PySpark's own actions do (here: a Python UDF's error in a filter).
    from pyspark.errors import PythonException
    from pyspark.sql import functions as F

    broken = spark.range(0, 4, numPartitions=2).where(F.udf(lambda i: 1 // (i - 3) >= 0, "boolean")("id"))
    with pytest.raises(PythonException, match="ZeroDivisionError"):
        count_rows(broken)


def test_rdds_cached_frames_and_frames_without_a_shuffle_are_used_as_they_are(spark, sc2):
    rdd = sc2.parallelize(range(10), 2)
    with stable_partitions(rdd) as same:
        assert same is rdd
    plain = spark.range(10)
    assert not _has_exchange(plain)
    with stable_partitions(plain) as same:
        assert same is plain
    cached = joined(spark).cache()
    try:
        again = joined(spark)  # the same plan through another reference: cached, though is_cached is False
        assert not again.is_cached
        with stable_partitions(again) as same:
            assert same is again
    finally:
        cached.unpersist()


def test_train_feeds_every_planned_row_of_an_uncached_join(sc2, spark, tmp_path):
    args = {"out": str(tmp_path), "batch": 100}
    cluster = TFCluster.run(sc2, feed_fns.count_feed, args, 2, input_mode=TFCluster.InputMode.SPARK)
    stored = stored_rdd_ids(sc2)
    try:
        # cache=False: both epochs are Spark feeding jobs over the pinned frame.
        cluster.train(joined(spark), num_epochs=2, cache=False)
        assert stored_rdd_ids(sc2) <= stored  # the local checkpoint was released
    finally:
        cluster.shutdown(timeout=120)
    nodes = read_json_files(tmp_path)
    assert [n["rows"] for n in nodes.values()] == [2 * (ROWS // 2)] * 2  # ceil(T/2) rows per node per epoch
    # count_feed sums each row's last field, y: the sum of every row once per epoch.
    assert sum(n["label_sum"] for n in nodes.values()) == 2 * sum(range(ROWS))


def test_frames_read_from_a_cache_are_not_checkpointed_again_but_a_new_shuffle_over_it_is(spark, sc2):
    """What a frame reads decides: a filter or select of a persisted shuffle reads its stored blocks (the
    shuffle's exchange belongs to the plan that filled the cache, not to the frame's own), as
    ``KerasEstimator`` reads its persisted rows split into training and validation; a shuffle over the
    cache, or an uncached one, is still pinned."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    shuffled = spark.range(0, 60, numPartitions=2).repartition(3).select("id", (F.col("id") * 2).alias("x"))
    persisted = shuffled.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        filtered = persisted.where(F.col("id") % 2 == 0).select("x")
        selected = persisted.select((F.col("x") + 1).alias("x1"))
        for frame in (filtered, selected, persisted):
            with stable_partitions(frame) as same:
                assert same is frame, frame.columns
            assert not _has_exchange(frame)  # the shuffle that filled the cache is not the frame's own
        assert sum(count_rows(filtered)) == 30
        uncached = spark.range(0, 60, numPartitions=2).repartition(2)
        for frame in (persisted.repartition(2), uncached):
            with stable_partitions(frame) as pinned:
                assert pinned is not frame, frame.columns
    finally:
        persisted.unpersist()
