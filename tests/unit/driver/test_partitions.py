"""sparkdl/driver/partitions.py without Spark: which physical plans (their tree strings, as Spark 4
prints them) run an exchange of their own. Real frames: tests/cluster/spark_mode/test_feed_partitions.py."""

from __future__ import annotations

import pytest

from sparkdl.driver.partitions import reads_an_exchange

pytestmark = pytest.mark.timeout(30)

# A filter of a persisted sort-merge join, as PySpark 4.0 prints it before and after a job ran it:
# the join's exchanges are in the plan that filled the cache, drawn below its InMemoryRelation.
FILTER_OF_A_CACHE = """\
AdaptiveSparkPlan isFinalPlan=false
+- Project [x#3, y#4]
   +- Filter ((k#1L % 2) = 0)
      +- InMemoryTableScan [k#1L, x#3, y#4], [((k#1L % 2) = 0)]
            +- InMemoryRelation [k#1L, b#9L, x#3, y#4], StorageLevel(disk, memory, deserialized, 1 replicas)
                  +- AdaptiveSparkPlan isFinalPlan=true
                     +- == Final Plan ==
                        ResultQueryStage 2
                        +- *(5) Project [k#1L, b#9L, x#3, y#4]
                           +- *(5) SortMergeJoin [k#1L], [k#8L], Inner
                              :- *(3) Sort [k#1L ASC NULLS FIRST], false, 0
                              :  +- AQEShuffleRead coalesced
                              :     +- ShuffleQueryStage 0
                              :        +- Exchange hashpartitioning(k#1L, 200), ENSURE_REQUIREMENTS, [plan_id=51]
                              :           +- *(1) Project [(id#0L % 97) AS k#1L, x#3, y#4]
                              :              +- *(1) Range (0, 2000, step=1, splits=2)
                              +- *(4) Sort [k#8L ASC NULLS FIRST], false, 0
                                 +- AQEShuffleRead coalesced
                                    +- ShuffleQueryStage 1
                                       +- Exchange hashpartitioning(k#8L, 200), ENSURE_REQUIREMENTS, [plan_id=62]
                                          +- *(2) Project [id#7L AS k#8L, (id#7L * 2) AS b#9L]
                                             +- *(2) Range (0, 97, step=1, splits=2)
                     +- == Initial Plan ==
                        Project [k#1L, b#9L, x#3, y#4]
                        +- SortMergeJoin [k#1L], [k#8L], Inner
                           :- Sort [k#1L ASC NULLS FIRST], false, 0
                           :  +- Exchange hashpartitioning(k#1L, 200), ENSURE_REQUIREMENTS, [plan_id=30]
                           :     +- Project [(id#0L % 97) AS k#1L, x#3, y#4]
                           :        +- Range (0, 2000, step=1, splits=2)
                           +- Sort [k#8L ASC NULLS FIRST], false, 0
                              +- Exchange hashpartitioning(k#8L, 200), ENSURE_REQUIREMENTS, [plan_id=31]
                                 +- Project [id#7L AS k#8L, (id#7L * 2) AS b#9L]
                                    +- Range (0, 97, step=1, splits=2)
"""

FILTER_OF_A_CACHE_RUN = """\
AdaptiveSparkPlan isFinalPlan=true
+- == Final Plan ==
   ResultQueryStage 1
   +- *(1) Project [y#2L]
      +- *(1) Filter (isnotnull(k#1L) AND ((k#1L % 2) = 0))
         +- TableCacheQueryStage 0
            +- InMemoryTableScan [k#1L, y#2L], [isnotnull(k#1L), ((k#1L % 2) = 0)]
                  +- InMemoryRelation [k#1L, y#2L, b#5L], StorageLevel(disk, memory, deserialized, 1 replicas)
                        +- AdaptiveSparkPlan isFinalPlan=true
                        +- == Final Plan ==
                           ResultQueryStage 0
                           +- *(3) Project [k#1L, y#2L, b#5L]
                              +- *(3) SortMergeJoin [k#1L], [k#4L], Inner
                                 :- *(1) Sort [k#1L ASC NULLS FIRST], false, 0
                                 :  +- ShuffleQueryStage 0
                                 :     +- Exchange hashpartitioning(k#1L, 200), ENSURE_REQUIREMENTS, [plan_id=20]
                                 :        +- *(1) Range (0, 200, step=1, splits=1)
                                 +- *(2) Range (0, 7, step=1, splits=1)
                        +- == Initial Plan ==
                           SortMergeJoin [k#1L], [k#4L], Inner
                           :- Exchange hashpartitioning(k#1L, 200), ENSURE_REQUIREMENTS, [plan_id=12]
                           :  +- Range (0, 200, step=1, splits=1)
                           +- Range (0, 7, step=1, splits=1)
+- == Initial Plan ==
   Project [y#2L]
   +- Filter (isnotnull(k#1L) AND ((k#1L % 2) = 0))
      +- InMemoryTableScan [k#1L, y#2L], [isnotnull(k#1L), ((k#1L % 2) = 0)]
            +- InMemoryRelation [k#1L, y#2L, b#5L], StorageLevel(disk, memory, deserialized, 1 replicas)
                  +- AdaptiveSparkPlan isFinalPlan=true
                  +- == Initial Plan ==
                     SortMergeJoin [k#1L], [k#4L], Inner
                     :- Exchange hashpartitioning(k#1L, 200), ENSURE_REQUIREMENTS, [plan_id=12]
                     :  +- Range (0, 200, step=1, splits=1)
                     +- Range (0, 7, step=1, splits=1)
"""

# A join of a cached frame with another scan of it: the shuffles over the cached rows are its own
# (the lines after the first cached relation's plan, back at a shallower column, count again).
JOIN_OVER_A_CACHE = """\
AdaptiveSparkPlan isFinalPlan=false
+- Project [y#2L, b#108L]
   +- SortMergeJoin [y#2L], [y#105L], Inner
      :- Sort [y#2L ASC NULLS FIRST], false, 0
      :  +- Project [y#2L]
      :     +- InMemoryTableScan [k#1L, y#2L]
      :           +- InMemoryRelation [k#1L, y#2L, b#5L], StorageLevel(disk, memory, deserialized, 1 replicas)
      :                 +- AdaptiveSparkPlan isFinalPlan=true
                           +- == Final Plan ==
                              ResultQueryStage 0
                              +- *(3) Project [k#1L, y#2L, b#5L]
                                 +- Exchange hashpartitioning(k#1L, 200), ENSURE_REQUIREMENTS, [plan_id=20]
                                    +- *(1) Range (0, 200, step=1, splits=1)
      +- Sort [y#105L ASC NULLS FIRST], false, 0
         +- Exchange hashpartitioning(y#105L, 200), ENSURE_REQUIREMENTS, [plan_id=110]
            +- InMemoryTableScan [y#105L, b#108L]
                  +- InMemoryRelation [k#104L, y#105L, b#108L], StorageLevel(disk, memory, deserialized, 1 replicas)
"""


def test_exchanges_that_filled_a_cache_are_not_the_plan_s_own():
    assert not reads_an_exchange(FILTER_OF_A_CACHE)
    assert not reads_an_exchange(FILTER_OF_A_CACHE_RUN)


def test_an_exchange_over_cached_rows_or_without_a_cache_counts():
    assert reads_an_exchange(JOIN_OVER_A_CACHE)
    repartitioned = (
        "AdaptiveSparkPlan isFinalPlan=false\n"
        "+- Exchange hashpartitioning(k#1L, 3), REPARTITION_BY_NUM, [plan_id=86]\n"
        "   +- InMemoryTableScan [k#1L, y#2L, b#5L]\n"
        "         +- InMemoryRelation [k#1L, y#2L, b#5L], StorageLevel(disk, memory, deserialized, 1 replicas)\n"
        "               +- *(1) Range (0, 200, step=1, splits=1)\n"
    )
    assert reads_an_exchange(repartitioned)
    uncached = FILTER_OF_A_CACHE.split("+- == Initial Plan ==\n", 1)[1]  # the join itself, drawn from its root
    assert reads_an_exchange(uncached)
    broadcast = (
        "== Physical Plan ==\n"
        "*(2) BroadcastHashJoin [k#1L], [k#4L], Inner, BuildRight\n"
        ":- *(2) Range (0, 9)\n"
        "+- BroadcastExchange HashedRelationBroadcastMode(List(input[0, bigint, false]),false)\n"
        "   +- *(1) Range (0, 3)\n"
    )
    assert reads_an_exchange(broadcast)


def test_a_column_named_like_an_exchange_is_no_exchange():
    assert not reads_an_exchange("*(1) Project [id#0L AS ExchangeRate#2L]\n+- *(1) Range (0, 10, step=1, splits=2)\n")
    assert not reads_an_exchange("Scan ExistingRDD[k#1L,x#3]\n")
