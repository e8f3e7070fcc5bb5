"""InputMode.SPARK on a real two-executor Spark: RDD elements reach ``next_batch`` with the structure
they had, and ``cluster.inference`` returns what ``map_fun`` gave ``batch_results``, with its type,
as TensorFlowOnSpark programs expect (e.g. ``rdd_out.sum()`` over numpy rows)."""

from __future__ import annotations

import numpy as np
import pytest

from sparkdl import TFCluster

import feed_functions as feed_fns
from conftest import read_json_files

pytestmark = pytest.mark.timeout(300)
SPARK = TFCluster.InputMode.SPARK


def test_next_batch_gives_ints_lists_and_tuples_back_as_they_were(sc2, tmp_path):
    ints = list(range(40))
    lists = [[float(i), -float(i)] for i in range(30)]
    pairs = [([float(i), 0.5], i) for i in range(20)]
    cluster = TFCluster.run(sc2, feed_fns.describe_elements, {"out": str(tmp_path), "runs": 3}, 2, input_mode=SPARK)
    for data in (ints, lists, pairs):
        cluster.train(sc2.parallelize(data, 3), 1)
    cluster.shutdown(timeout=120)
    nodes = list(read_json_files(tmp_path).values())
    assert len(nodes) == 2
    kinds = [sorted({t for node in nodes for t in node["runs"][run]["types"]}) for run in range(3)]
    assert kinds == [["int"], ["list[float,float]"], ["tuple(list[float,float], int)"]]
    for run, data in enumerate((ints, lists, pairs)):
        received = [v for node in nodes for v in node["runs"][run]["values"]]
        expected = [list(v) if isinstance(v, tuple) else v for v in data]
        assert sorted(received, key=repr) == sorted(expected, key=repr)  # 2 nodes, equal shares: no repeats


def test_inference_results_keep_their_types_and_sum_as_under_tfos(sc2, tmp_path):
    cluster = TFCluster.run(sc2, feed_fns.answer_in_kind, {}, 2, input_mode=SPARK)
    try:
        # TensorFlowOnSpark's test_inputmode_spark: [x] rows, squares as numpy rows, rdd.sum().
        squares = cluster.inference(sc2.parallelize([[x] for x in range(1000)], 10))
        first = squares.first()
        assert isinstance(first, np.ndarray) and first.dtype == np.int32 and first.shape == (1,)
        assert squares.sum() == sum(x * x for x in range(1000))
        assert squares.map(lambda r: r[0]).collect() == [x * x for x in range(1000)]

        doubled = cluster.inference(sc2.parallelize(range(100), 4))
        assert doubled.sum() == 2 * sum(range(100))
        assert {type(v) for v in doubled.collect()} == {int}

        shouted = cluster.inference(sc2.parallelize(["a", "bc", "d"], 2)).collect()
        assert shouted == ["A", "BC", "D"] and all(type(v) is str for v in shouted)

        halves = cluster.inference(sc2.parallelize([i / 2 for i in range(10)], 3)).collect()
        assert [type(v) for v in halves] == [np.float32] * 10 and sum(halves) == sum(i / 2 for i in range(10))

        pairs = cluster.inference(sc2.parallelize([([1.0, float(i)], i) for i in range(25)], 3))
        assert pairs.map(lambda r: r[1]).collect() == [str(i) for i in range(25)]
        assert pairs.map(lambda r: r[0]).sum() == sum(1.0 + i for i in range(25))
        assert isinstance(pairs.first(), tuple) and type(pairs.first()[0]) is np.float32
    finally:
        cluster.shutdown(timeout=120)
