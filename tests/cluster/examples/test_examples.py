"""The examples' own code, run on the suite's shared Spark (each example's ``main(argv, spark)``).

Each example is run with the arguments its README gives, at the smallest size that still shows
what it teaches, on this session's ``local-cluster`` (two or three executor JVMs) instead of a
Spark application of its own: the examples are the same code either way, and the suite starts one
Spark instead of seven. How users start them is tested once each elsewhere: the demo
(``scripts/demo.sh``'s job) from an installed wheel, outside the repository, through spark-submit
on a real standalone master in ``test_packaging.py`` (slow tier); the inference example in
``test_inference.py``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import example_functions

ROOT = Path(__file__).resolve().parents[3]
pytestmark = [pytest.mark.timeout(600), pytest.mark.cluster]


def _example(script: str):
    return example_functions.load_example(script)


def _run(script: str, argv: list[str], spark, capsys) -> str:
    """Run ``script``'s ``main(argv, spark=spark)`` and return what it printed."""
    _example(script).main(argv, spark=spark)
    return capsys.readouterr().out


def _accuracy(stdout: str, rows: int = 360) -> float:
    """The accuracy the example printed, after checking it scored ``rows`` rows."""
    match = re.search(r"test accuracy \(distributed inference over (\d+) rows\): ([0-9.]+)", stdout)
    assert match, stdout
    assert int(match.group(1)) == rows
    return float(match.group(2))


@pytest.fixture
def spark2(sc2, spark_holder):
    return spark_holder.spark


@pytest.fixture
def spark3(sc3, spark_holder):
    return spark_holder.spark


def test_the_demo_trains_two_tf_nodes_exports_and_scores(spark2, tmp_path, capsys):
    """The demo's code (``scripts/demo.sh`` runs ``mnist_tf.py``): two MWMS nodes in
    InputMode.TENSORFLOW, the chief's export, distributed scoring. Spark ML's baseline beside it,
    and the demo as users start it, are the slow tier's (``test_packaging.py``)."""
    argv = ["--epochs", "3", "--no_baseline", "--export_dir", str(tmp_path / "export")]
    stdout = _run("examples/mnist/mnist_tf.py", argv, spark2, capsys)
    assert re.search(r"trained on 2 TF nodes in [0-9.]+ s; model in ", stdout), stdout
    assert (tmp_path / "export" / "saved_model.pb").exists()
    assert _accuracy(stdout) > 0.8


def test_mnist_tf_example_gives_three_nodes_disjoint_shards_that_cover_the_data(spark3, tmp_path):
    """Issue 53 item 12: each node shuffled with ``seed=ctx.task_index`` and left the sharding to
    MWMS's auto-shard by element, which needs one order on every node; chief:0 and worker:0 share
    index 0, so from three nodes the shards overlapped. The example's own ``main_fun`` on three
    nodes, its fit replaced by two passes over the dataset as MWMS distributes it: every epoch,
    every row reaches exactly one node, and each node's order changes between epochs."""
    import functools

    from sparkdl import TFCluster

    import example_functions

    example = _example("examples/mnist/mnist_tf.py")
    example.digits_common.start_spark("shards", None, 3, spark=spark3)  # ships digits_common to the executors
    rows, epochs = 90, 2
    args = example.parse_args(["--batch_size", "16", "--export_dir", str(tmp_path / "export")])
    node = functools.partial(example_functions.shards_as_mwms_deals_them, example.main_fun, rows, epochs)
    cluster = TFCluster.run(
        spark3.sparkContext, node, args, 3, input_mode=TFCluster.InputMode.TENSORFLOW, return_results="all"
    )
    cluster.shutdown(timeout=240)
    shards = cluster.results
    assert len(shards) == 3 and all(shards), shards
    for epoch in map(str, range(epochs)):
        got = [sorted(shard[epoch]) for shard in shards]
        assert sorted(i for ids in got for i in ids) == list(range(rows)), f"epoch {epoch}: {got}"
    assert all(shard["0"] != shard["1"] for shard in shards), "a node's rows come in a new order every epoch"


def test_mnist_spark_mode_example_trains_from_a_dataframe(spark2, tmp_path, capsys):
    # 3 epochs: epoch 1 from the feed, then the nodes' cache; past 0.9 held-out accuracy from epoch 1 (Adam(1e-2))
    argv = ["--epochs", "3", "--export_dir", str(tmp_path / "export")]
    stdout = _run("examples/mnist/mnist_spark.py", argv, spark2, capsys)
    assert "from a 1437-row DataFrame" in stdout
    assert _accuracy(stdout) > 0.85


def test_tfparallel_example_prints_one_result_per_node_and_trial(spark2, tmp_path, capsys):
    rates = ["0.001", "0.01", "0.05", "0.3"]
    argv = ["--epochs", "3", "--learning_rates", ",".join(rates), "--output_dir", str(tmp_path / "trials")]
    stdout = _run("examples/tfparallel/hparam_search.py", argv, spark2, capsys)
    assert "4 trials on 2 independent TF nodes" in stdout
    trials = re.findall(r"node (\d+) \(.+, pid (\d+)\): learning_rate=([0-9.e-]+) held-out accuracy=([0-9.]+)", stdout)
    assert len(trials) == 4, stdout
    # Node i of 2 took learning rates i and i + 2, each in its own process (independent nodes).
    by_node = {node: sorted(float(rate) for n, _, rate, _ in trials if n == node) for node in ("0", "1")}
    assert by_node == {"0": [0.001, 0.05], "1": [0.01, 0.3]}, stdout
    assert len({(node, pid) for node, pid, _, _ in trials}) == 2 and len({pid for _, pid, _, _ in trials}) == 2
    assert sorted(p.name for p in (tmp_path / "trials").iterdir()) == ["node0.json", "node1.json"]
    best = re.search(r"best: learning_rate=([0-9.e-]+) held-out accuracy=([0-9.]+)", stdout)
    assert best and float(best.group(2)) == max(float(t[3]) for t in trials) > 0.85, stdout


def test_ps_strategy_example_trains_with_ps_chief_and_worker(spark3, tmp_path, capsys):
    # 2 epochs: Adam(1e-2) on the digits is past 0.9 held-out accuracy after one epoch (0.93-0.94 after two)
    argv = ["--epochs", "2", "--export_dir", str(tmp_path / "export")]
    stdout = _run("examples/ps_strategy/ps_digits.py", argv, spark3, capsys)
    assert "trained with ParameterServerStrategy on ps:0, chief:0, worker:0" in stdout
    assert (tmp_path / "export" / "saved_model.pb").exists()
    assert _accuracy(stdout) > 0.85


def test_pipeline_example_fits_saves_loads_and_transforms(spark2, tmp_path, capsys):
    stdout = _run(
        "examples/pipeline/digits_pipeline.py", ["--epochs", "5", "--work_dir", str(tmp_path)], spark2, capsys
    )
    assert "fitted the pipeline on 2 TF nodes from a 1437-row DataFrame" in stdout
    assert f"saved and reloaded the PipelineModel ({tmp_path / 'pipeline_model'})" in stdout
    assert (tmp_path / "export" / "saved_model.pb").exists()
    assert (tmp_path / "pipeline_model" / "stages").is_dir()
    assert _accuracy(stdout) > 0.85


def test_mnist_streaming_example_trains_from_a_dstream(spark2, tmp_path, capsys):
    argv = ["--files", "2", "--steps", "30", "--batch_interval", "1"]
    argv += ["--images_labels", str(tmp_path / "stream"), "--export_dir", str(tmp_path / "export")]
    stdout = _run("examples/mnist_streaming/mnist_spark_streaming.py", argv, spark2, capsys)
    # The nodes ended their feed after 30 batches each; shutdown(ssc) stopped the stream and returned.
    assert "trained on 2 TF nodes from a DStream (30 batches of 32 rows per node)" in stdout
    assert sorted(p.name for p in (tmp_path / "stream").iterdir())[:1] == ["part-00000.csv"]
    assert (tmp_path / "export" / "saved_model.pb").exists()
    assert _accuracy(stdout) > 0.8


def test_streaming_example_trains_from_landing_files_and_scores_with_each_new_version(spark2, tmp_path, capsys):
    stdout = _run(
        "examples/streaming/train_and_serve.py", ["--files", "2", "--work_dir", str(tmp_path)], spark2, capsys
    )
    landed = re.findall(
        r"landed (part-\d+)\.parquet: micro-batch (\d+) trained; (\d+) held-out rows scored by "
        r"version \[(\d+)\]: accuracy ([0-9.]+)",
        stdout,
    )
    # each landing is trained as its own micro-batch, and the next scoring batch uses the version it published
    assert [(name, int(batch), int(version)) for name, batch, _, version, _ in landed] == [
        ("part-0000", 0, 1),
        ("part-0001", 1, 2),
    ], stdout
    assert sum(int(rows) for _, _, rows, _, _ in landed) == 360  # every held-out row scored once
    assert float(landed[-1][4]) > 0.7
    assert sorted(os.listdir(tmp_path / "exports")) == ["1", "2"]


def test_images_example_trains_from_image_files_and_scores_them(spark2, tmp_path, capsys):
    # --partitions 4: Spark packs the 1797 small files into 57 partitions, and each of the run's
    # jobs (cache, feed, score) then pays 57 tasks; four show the same binaryFile -> feed -> decode path
    argv = ["--epochs", "5", "--partitions", "4", "--work_dir", str(tmp_path)]
    stdout = _run("examples/images/train_images.py", argv, spark2, capsys)
    match = re.search(r"trained on 2 TF nodes from (\d+) image files read with binaryFile", stdout)
    assert match, stdout
    scored = re.search(r"test accuracy \(distributed inference over (\d+) rows\): ([0-9.]+)", stdout)
    assert scored and int(match.group(1)) + int(scored.group(1)) == 1797, stdout  # every file, once
    assert float(scored.group(2)) > 0.85, stdout


def test_keras_estimator_example_tunes_saves_loads_and_scores(spark2, tmp_path, capsys):
    """The pipeline example in local mode (--cluster_size 0, to keep CI short: the 2-node path is
    test_keras_estimator.py's and the notebook's); CrossValidator over the whole Pipeline. One
    learning rate over two folds (--learning_rates): each fit costs about 6 s here whatever its
    epochs, and the notebook cross-validates the example's two rates with the same
    ``keras_digits`` functions. Without Spark ML's MLP beside it (--no_baseline, 8-14 s here): the
    notebook runs the same ``keras_digits.spark_ml_mlp`` on the same split and prints its accuracy."""
    argv = ["--cluster_size", "0", "--epochs", "8", "--learning_rates", "0.01", "--no_baseline"]
    stdout = _run(
        "examples/keras_estimator/digits_keras_pipeline.py", [*argv, "--work_dir", str(tmp_path)], spark2, capsys
    )
    assert "tuned on the driver (local mode): 1 learning rate x 2 folds + the final fit" in stdout
    rates = re.findall(r"learning_rate=([0-9.]+): cross-validated accuracy ([0-9.]+)", stdout)
    assert [rate for rate, _ in rates] == ["0.01"] and all(float(a) > 0.8 for _, a in rates), stdout
    difference = re.search(r"same predictions, max \|difference\| ([0-9.e+-]+)", stdout)
    assert difference and float(difference.group(1)) < 1e-5, stdout
    accuracy = re.search(r"test accuracy \(held-out 360 rows, the loaded PipelineModel\): ([0-9.]+)", stdout)
    assert accuracy and float(accuracy.group(1)) > 0.9, stdout
    assert "Spark ML MultilayerPerceptronClassifier" not in stdout, stdout  # --no_baseline skipped it
    assert (tmp_path / "pipeline_model" / "stages").is_dir()
