"""Issue 53, item 8, through the public API: an epoch cache a node cannot keep is a warning on the
driver naming the node and why (each node's ``CacheStatus`` after epoch 1), not an info line, and
``deterministic=True`` fails naming the same reason."""

from __future__ import annotations

import logging

import pytest

from sparkdl import TFCluster
from sparkdl.common.errors import FeedError

import feed_functions as feed_fns

pytestmark = pytest.mark.timeout(300)


def test_a_cache_that_cannot_be_used_is_a_driver_warning_naming_why(sc2, tmp_path, caplog):
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()
    frame = spark.createDataFrame([([float(i % 7), 1.0], float(i)) for i in range(200)], "x array<float>, y double")
    cluster = TFCluster.run(sc2, feed_fns.count_feed, {"out": str(tmp_path)}, 2, input_mode=TFCluster.InputMode.SPARK)
    caplog.set_level(logging.INFO, logger="sparkdl.driver.feeding")
    try:
        cluster.train(frame.repartition(2), num_epochs=2, cache_max_bytes=2000)
        warnings = [r.getMessage() for r in caplog.records if r.name == "sparkdl.driver.feeding" and r.levelno >= 30]
        assert len(warnings) == 1, warnings
        assert "the epoch cache of training run 1 cannot be used" in warnings[0]
        assert "chief:0: this node's share is more than the cache limit of 2,000 bytes (cache_max_bytes)" in warnings[0]
        with pytest.raises(FeedError, match=r"deterministic=True\): .*cache limit of 2,000 bytes \(cache_max_bytes\)"):
            cluster.train(frame.repartition(2), num_epochs=2, deterministic=True, cache_max_bytes=2000)
    finally:
        cluster.shutdown(timeout=120)
