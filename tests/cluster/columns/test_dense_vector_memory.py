"""Memory follows the batch: a wide sparse Vector column (HashingTF's 2^18 features) read dense, the
default, is densified one batch at a time on the node, and the driver's log says once per node that
``Sparse()`` exists."""

from __future__ import annotations

import json
import logging

import pytest

from sparkdl import TFCluster

import column_functions as cf

pytestmark = pytest.mark.timeout(300)
SPARK = TFCluster.InputMode.SPARK
ROWS_PER_NODE, BATCH, WORDS = 400, 40, 50  # dense: 40 rows x 2^18 float64 = 84 MB a batch, 840 MB a node's share


def hashed_words(spark, rows: int):
    """``rows`` rows of a HashingTF column (2^18 features, 50 words a row: at most 50 non-zeros)."""
    from pyspark.ml.feature import HashingTF
    from pyspark.sql import functions as F

    word = lambda i: F.concat(F.lit("w"), (F.col("id") * 7919 + i * 104729).cast("string"))  # noqa: E731
    words = spark.range(rows, numPartitions=4).select(
        F.transform(F.sequence(F.lit(1), F.lit(WORDS)), word).alias("words")
    )
    return HashingTF(inputCol="words", outputCol="features").transform(words).select("features")


def test_a_sparse_vector_read_dense_is_densified_per_batch_and_the_log_names_sparse(
    sc2, spark_holder, tmp_path, caplog
):
    frame = hashed_words(spark_holder.spark, 2 * ROWS_PER_NODE)
    cluster = TFCluster.run(sc2, cf.read_dense_vectors, {"out": str(tmp_path), "batch": BATCH}, 2, input_mode=SPARK)
    with caplog.at_level(logging.WARNING, logger="sparkdl"):
        cluster.train(frame, num_epochs=1)
        cluster.shutdown(timeout=120)
    nodes = [json.loads((tmp_path / f"node{n}.json").read_text()) for n in (0, 1)]
    for node in nodes:
        assert (node["rows"], node["batches"], node["width"]) == (ROWS_PER_NODE, ROWS_PER_NODE // BATCH, 1 << 18)
        # a few dense batches in flight (the generator's, tf.data's prefetch, the one read), not the share
        assert node["peak_growth_mib"] < 600, node
    hints = [r.getMessage() for r in caplog.records if "Sparse()" in r.getMessage()]
    assert sorted(h.split(": ")[0] for h in hints) == ["chief:0", "worker:0"], "once per node"
    assert "a batch of 40 rows takes 84 MB" in hints[0] and "columns={'features': Sparse()}" in hints[0]
