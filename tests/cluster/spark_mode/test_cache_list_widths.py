"""Issue 53, item 1, through the public API: a DataFrame's ``array<float>`` column of sequences of
varying length, in small partitions, trains over a cached epoch with validation rows.

The feeder sends a list column as a fixed-size list per Spark batch whenever the batch's rows
agree in length, so the nodes receive frames of shape (n, 2), (n, 3) and (n, 4) of one column (and
Arrow lists where a batch's rows differ): the node's kind check and its epoch cache must take them
as the one column they are."""

from __future__ import annotations

import logging
from collections import Counter

import pytest

from sparkdl import TFCluster

from conftest import read_json_files
from node_functions import _write

pytestmark = pytest.mark.timeout(300)


def read_padded_epochs(args, ctx):
    """Read both splits epoch by epoch with ``x`` padded; record each row's label and how many
    values its ``x`` held (row ``r`` holds its length in copies of ``r + 1``)."""
    import numpy as np

    from sparkdl.columns.specs import Padded

    feed = ctx.get_data_feed()
    splits = {
        split: feed.as_dataset(8, features="x", label="y", split=split, columns={"x": Padded(4)})
        for split in ("train", "validation")
    }
    record = {split: [] for split in splits}
    for _ in range(args["epochs"]):
        for split, dataset in splits.items():
            rows = []
            for x, y in dataset:
                x, y = x.numpy(), y.numpy()
                assert (x[:, 0] == y + 1).all(), "each row's values are its own"
                rows += [[float(label), int(n)] for label, n in zip(y, np.count_nonzero(x, axis=1))]
            record[split].append(rows)
    _write(args, ctx, record)


def sequences(spark, partitions: list[list[int]], start: int):
    """A DataFrame ``x array<float>, y double`` with one Spark partition per list of lengths (so one
    Arrow batch each): row ``r`` (labels from ``start``) holds ``length`` copies of ``r + 1``; and
    each label's length."""
    labelled, label = [], start
    for lengths in partitions:
        labelled.append([(float(label + i), n) for i, n in enumerate(lengths)])
        label += len(lengths)

    def rows(index, _):
        for y, n in labelled[index]:
            yield [y + 1.0] * n, y

    rdd = spark.sparkContext.parallelize(range(len(partitions)), len(partitions)).mapPartitionsWithIndex(rows)
    return spark.createDataFrame(rdd, "x array<float>, y double"), dict(pair for part in labelled for pair in part)


def test_sequences_of_varying_length_train_over_a_cached_epoch_with_validation(sc2, tmp_path, caplog):
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()
    train, train_lengths = sequences(spark, [[3] * 6, [2] * 5, [4] * 7, [1, 3, 2, 4]], 0)
    validation, validation_lengths = sequences(spark, [[4] * 3, [2] * 4], 1000)
    epochs = 2
    caplog.set_level(logging.INFO, logger="sparkdl.driver.feeding")
    cluster = TFCluster.run(sc2, read_padded_epochs, {"out": str(tmp_path), "epochs": epochs}, 2, input_mode=SPARK)
    try:
        cluster.train(train, num_epochs=epochs, validation_data=validation)
    finally:
        cluster.shutdown(timeout=120)
    assert "served from the nodes' caches" in caplog.text, "epoch 2 was replayed from the nodes' caches"
    nodes = list(read_json_files(tmp_path).values())
    assert len(nodes) == 2
    for split, lengths in (("train", train_lengths), ("validation", validation_lengths)):
        seen = Counter()
        for node in nodes:
            first, *later = node[split]
            assert all(Counter(map(tuple, e)) == Counter(map(tuple, first)) for e in later), "the same rows each epoch"
            for label, n in first:
                assert n == lengths[label], f"{split} row {label}: {n} values, sent {lengths[label]}"
            seen.update(label for label, _ in first)
        assert set(seen) == set(lengths), f"every {split} row reached a node"


SPARK = TFCluster.InputMode.SPARK
