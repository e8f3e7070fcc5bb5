"""What the user sees at the driver: node output with role:index prefixes (every line, in order),
progress of ``cluster.train`` (rows, epochs, partitions, the chief's loss), and Spark jobs named
after what sparkdl does. (The progress bars a terminal gets, without a cluster:
tests/unit/driver/test_progress.py.)"""

from __future__ import annotations

import re

import pytest

from sparkdl import TFCluster

import cluster_functions as cluster_fns
import feed_functions as feed_fns

pytestmark = pytest.mark.timeout(300)
SPARK = TFCluster.InputMode.SPARK
LINES = 3000


def _node_lines(text: str, label: str) -> list[str]:
    prefix = f"[{label}] "
    return [line[len(prefix) :] for line in text.splitlines() if line.startswith(prefix)]


def test_every_line_of_node_output_reaches_the_driver_with_its_role_prefix(sc2, tmp_path, capsys):
    cluster = TFCluster.run(sc2, cluster_fns.chatty, {"out": str(tmp_path), "lines": LINES}, 2)
    cluster.shutdown(timeout=120)
    printed = capsys.readouterr().out
    for label in ("chief:0", "worker:0"):
        lines = _node_lines(printed, label)
        for stream in ("stdout", "stderr"):
            numbered = [line for line in lines if line.startswith(f"{stream} line ")]
            assert numbered == [f"{stream} line {i} of {label}" for i in range(LINES)], f"{label} {stream}"
        assert any(re.search(rf"INFO user: logging line of {label}$", line) for line in lines), (
            "Python logging in map_fun reaches the driver"
        )
        assert lines[-1] == f"last words of {label} (no newline)"
    for node in cluster.cluster_info:  # the node's log file keeps everything too
        assert open(node["log_path"]).read().count(" line ") >= 2 * LINES


def test_node_output_can_stay_in_the_node_logs(sc2, tmp_path, capsys):
    cluster = TFCluster.run(sc2, cluster_fns.chatty, {"out": str(tmp_path), "lines": 10}, 2, log_to_driver=False)
    cluster.shutdown(timeout=120)
    assert "[chief:0]" not in capsys.readouterr().out
    assert "stdout line 9 of chief:0" in open(cluster.cluster_info[0]["log_path"]).read()


def test_train_shows_rows_epochs_partitions_and_the_chief_loss(sc2, tmp_path, capsys):
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()
    frame = spark.createDataFrame(
        [([float(i % 3), 1.0, 0.5, -1.0], float(i % 3)) for i in range(2000)], "x array<float>, y double"
    ).repartition(4)
    args = {"out": str(tmp_path), "batch": 32, "epochs": 3, "progress_callback": True}
    cluster = TFCluster.run(sc2, feed_fns.fit_from_feed, args, 2, input_mode=SPARK, progress=True)
    cluster.train(frame, num_epochs=3)
    cluster.shutdown(timeout=180)
    printed = capsys.readouterr().out
    lines = [line for line in printed.splitlines() if line.startswith("sparkdl train")]
    assert lines[-1].startswith("sparkdl train [fed]: 6,000/6,000 rows fed"), lines
    assert any("epoch 2/3" in line for line in lines) and "epoch 3/3" in lines[-1]
    assert all(re.search(r"partitions \d+/\d+", line) for line in lines)
    # train() returns once everything is fed, possibly before the chief's first step; the figures
    # the display shows for the chief are its progress_callback reports, which must have arrived:
    chief = cluster.cluster_info[0]["metrics"]
    assert chief["step"] > 0 and chief["loss"] > 0 and chief["epoch"] == 2, chief


def test_inference_shows_partitions_and_rows_scored_for_each_action(sc2, tmp_path, capsys):
    cluster = TFCluster.run(sc2, feed_fns.infer_times_ten, {"out": str(tmp_path)}, 2, input_mode=SPARK, progress=True)
    results = cluster.inference(sc2.parallelize([[float(i)] for i in range(1000)], 5))
    assert len(results.collect()) == 1000
    assert results.count() == 1000  # a second action on the same RDD is a second pass
    cluster.shutdown(timeout=120)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("sparkdl inference")]
    finals = [line for line in lines if line.startswith("sparkdl inference: 5/5 partitions, 1,000 rows scored")]
    assert len(finals) == 2, lines
    assert all(re.match(r"sparkdl inference: [1-5]/5 partitions, [\d,]+ rows scored", line) for line in lines)


def test_progress_can_be_turned_off_and_spark_jobs_are_named_after_what_sparkdl_does(
    sc2, tmp_path, capsys, monkeypatch
):
    """One cluster for both: SPARKDL_PROGRESS=0 (and no ``progress`` argument) silences the progress
    display of ``cluster.train``, and the Spark jobs it ran are named after what they do."""
    monkeypatch.setenv("SPARKDL_PROGRESS", "0")
    cluster = TFCluster.run(sc2, feed_fns.count_feed, {"out": str(tmp_path)}, 2, input_mode=SPARK)
    cluster.train(sc2.parallelize([([1.0], 1.0)] * 100, 2), 2, cache=False)  # every epoch a Spark job
    cluster.shutdown(timeout=120)
    assert "sparkdl train" not in capsys.readouterr().out
    store = sc2._jsc.sc().statusStore()
    jobs = store.jobsList(None)
    described = {}
    for i in range(jobs.size()):
        job = jobs.apply(i)
        group = job.jobGroup()
        if group.isDefined() and cluster.cluster_id in group.get():
            described[job.jobId()] = (group.get(), job.description().get() if job.description().isDefined() else "")
    texts = [f"{group} | {text}" for group, text in described.values()]
    assert any(
        f"sparkdl-{cluster.cluster_id} | sparkdl: run 2 TensorFlow nodes (cluster {cluster.cluster_id})" in t
        for t in texts
    ), texts
    assert any("sparkdl: count rows per partition" in t for t in texts), texts
    assert any("sparkdl: feed epoch 2/2 to 2 TF nodes" in t for t in texts), texts
