"""sparkdl over Spark Connect: scenarios run by one client process (``tests/cluster/connect/test_connect.py``).

``python connect_scenarios.py OUT_DIR [SCENARIO ...]`` starts a local Spark Connect server over
``local-cluster[2,1,1024]`` (two executor JVMs), runs the named scenarios (by default every one)
against it through the Connect client only (no SparkContext is used here), and writes
``OUT_DIR/results.json``: per scenario what it returned, or the error it raised. The test
asserts on that file and on what the nodes wrote under ``OUT_DIR/<scenario>/``. One process for
all scenarios: a Connect server takes a while to start, and a Python process holds one
SparkContext (the server's).
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import time
import traceback
from pathlib import Path

from sparkdl import TFCluster, TFParallel
from sparkdl.common.errors import ClusterError

import cluster_functions as cluster_fns
import feed_functions as feed_fns
import node_functions as nf

SPARK = TFCluster.InputMode.SPARK


def tensorflow_mode(spark, out: Path) -> dict:
    """InputMode.TENSORFLOW: two nodes, one per executor, each record their role and TF_CONFIG (a
    pure-Python map_fun: MWMS training across Connect-launched nodes is spark_mode_training's)."""
    cluster = TFCluster.run(spark, nf.describe_node, {"out": str(out)}, num_executors=2)
    nodes = cluster.cluster_info
    cluster.shutdown()
    return {"sc": repr(cluster.sc), "executors": sorted(n["spark_executor"] for n in nodes)}


def spark_mode_training(spark, out: Path) -> dict:
    """InputMode.SPARK: a DataFrame fed to two nodes for 2 epochs, progress shown from the nodes' events."""
    rows = [([float(i % 7), 1.0, -1.0, 0.5], float(i % 5)) for i in range(600)]
    frame = spark.createDataFrame(rows, "x array<float>, y double").repartition(3)
    cluster = TFCluster.run(
        spark,
        feed_fns.fit_from_feed,
        {"out": str(out), "batch": 32, "epochs": 2, "progress_callback": True},
        2,
        input_mode=SPARK,
        progress=True,
    )
    shown = io.StringIO()
    with cluster, contextlib.redirect_stdout(shown):
        history = cluster.train(frame, num_epochs=2)
    return {"history": history, "shown": shown.getvalue()}


def spark_mode_inference(spark, out: Path) -> dict:
    """cluster.inference on a DataFrame gives a DataFrame of results; wrong inputs are named."""
    cluster = TFCluster.run(spark, feed_fns.infer_times_ten, {"out": str(out)}, 2, input_mode=SPARK)
    frame = spark.range(0, 200, 1, numPartitions=5).selectExpr("cast(id as double) as v")
    errors = {}
    with cluster:
        for name, call in {
            "pandas_input": lambda: cluster.train(frame.limit(3).toPandas()),
            "no_result_schema": lambda: cluster.inference(frame),
        }.items():
            try:
                call()
            except TypeError as exc:
                errors[name] = str(exc)
        scored = cluster.inference(frame, result_schema="score double")
        values = sorted(row["score"] for row in scored.collect())
        columns = scored.columns
    return {"values": values, "columns": columns, "errors": errors}


def failure_report(spark, out: Path) -> dict:
    """A node that raises: shutdown() raises ClusterError naming it, with its traceback."""
    cluster = TFCluster.run(spark, cluster_fns.fail_on_worker, {"out": str(out)}, 2)
    try:
        cluster.shutdown()
    except ClusterError as exc:
        return {
            "error": str(exc),
            "failed": [f.label for f in exc.failures],
            "hosts": [f.host for f in exc.failures],
            "tracebacks": [f.traceback for f in exc.failures],
        }
    return {"error": None}


def parallel(spark, out: Path) -> dict:
    """TFParallel.run: independent nodes, one per executor."""
    TFParallel.run(spark, cluster_fns.parallel_task, {"out": str(out)}, 2)
    return {}


def estimator_and_model(spark, out: Path) -> dict:
    """TFEstimator.fit on a Connect DataFrame, then TFModel.transform of it (one node: the
    estimator's cluster is TFCluster's, whose multi-node training under Connect is
    spark_mode_training's; test_ml_cluster.py fits the same estimator on two nodes)."""
    import numpy as np

    import inference_models as im

    df, model = im.digits_estimator_fit(spark, str(out / "export"), cluster_size=1)
    model.setInputMapping({"pixels": "image"}).setOutputMapping({"output_0": "probabilities"})  # Keras 3 export
    scored = model.transform(df).select("label", "probabilities").toPandas()
    accuracy = (np.stack(scored["probabilities"].to_numpy()).argmax(axis=1) == scored["label"].to_numpy()).mean()
    exported = json.loads((out / "export" / "export_fn.json").read_text())
    return {"history": model.history, "accuracy": float(accuracy), "export_fn_pid": exported["pid"]}


def inference_udf(spark, out: Path) -> dict:
    """sparkdl.inference's map_in_pandas on a Connect DataFrame, against model.predict in this process."""
    import numpy as np

    from sparkdl.inference import map_in_pandas

    import inference_models as im

    path = out / "mlp.keras"
    model = im.mlp(seed=4)
    model.save(path)
    df = im.digits_frame(spark, 200)
    fn, schema = map_in_pandas(df, str(path), input_mapping="pixels", keep_columns=["id"])
    scored = df.mapInPandas(fn, schema).toPandas().sort_values("id")
    expected = np.asarray(model.predict(im.digits_28(200)[0], batch_size=256, verbose=0))
    return {"rows": len(scored), "max_error": float(np.abs(np.stack(scored["prediction"].to_numpy()) - expected).max())}


SCENARIOS = [
    tensorflow_mode,
    spark_mode_training,
    spark_mode_inference,
    failure_report,
    parallel,
    estimator_and_model,
    inference_udf,
]


def main(out_dir: str, names: list[str]) -> None:
    from pyspark.sql import SparkSession

    by_name = {scenario.__name__: scenario for scenario in SCENARIOS}
    unknown = sorted(set(names) - set(by_name))
    if unknown:
        raise SystemExit(f"unknown scenarios {unknown}; they are {sorted(by_name)}")
    scenarios = [by_name[name] for name in names] if names else SCENARIOS
    out = Path(out_dir)
    started = time.monotonic()
    spark = SparkSession.builder.remote("local-cluster[2,1,1024]").config("spark.ui.enabled", "false").getOrCreate()
    results = {
        "session_type": f"{type(spark).__module__}.{type(spark).__name__}",
        "server_start_seconds": round(time.monotonic() - started, 1),
    }
    try:
        for scenario in scenarios:
            directory = out / scenario.__name__
            directory.mkdir(parents=True, exist_ok=True)
            started = time.monotonic()
            try:
                results[scenario.__name__] = {"ok": True, **scenario(spark, directory)}
            except BaseException as exc:  # noqa: BLE001 - reported to the test, which names it
                results[scenario.__name__] = {
                    "ok": False,
                    "error": f"{type(exc).__name__}: {exc}",
                    "traceback": traceback.format_exc(),
                }
            results[scenario.__name__]["seconds"] = round(time.monotonic() - started, 1)  # where the time goes
            (out / "results.json").write_text(json.dumps(results, default=str))
    finally:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
