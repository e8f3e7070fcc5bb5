"""InputMode.SPARK throughput: feeding, 2-worker MWMS training and inference, with references.

All on local-cluster[2,1,1024], rows of 784 float32 features + an int label, batch 128,
medians of ``--runs`` runs, in one run of this script:

1. feed rate into nodes that only drain (rows/s), RDD and DataFrame sources (generated in each
   feeding job); then both cached in Spark, read as columns (``input_mapping``) and as
   TensorFlowOnSpark's row tuples, with each cached source's own pass (a count in the feeding task);
2. 2-worker MultiWorkerMirroredStrategy MLP training (Dense 128 relu -> Dense 10) fed by sparkdl;
3. ``cluster.inference`` rows/s for a trivial model (a vectorised row sum);
4. references: single-process Keras 3 fit of the same MLP from an in-memory tf.data pipeline,
   and TensorFlowOnSpark 2.2.5 on the same data when it is installed
   (``pip install --no-deps tensorflowonspark==2.2.5``).

    .venv/bin/python benchmarks/feed_throughput.py [--runs 3] [--rows 200000] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FEATURES = 784
BATCH = 128


def start_local_spark(app_name: str):
    """The benchmarks' Spark: local-cluster[2,1,1024], quiet, executors on this interpreter."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    sys.path.insert(0, str(Path(__file__).parent))
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local-cluster[2,1,1024]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .appName(app_name)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.sparkContext.addPyFile(str(Path(__file__)))  # other scripts' nodes refer to this module
    return spark


def checkout_at(commit: str, *paths: str) -> Path:
    """A new temporary directory holding ``paths`` (folders of this repository) as of git ``commit``."""
    root = Path(__file__).resolve().parents[1]
    target = Path(tempfile.mkdtemp(prefix=f"sparkdl-{commit}-"))
    archive = subprocess.run(["git", "archive", commit, *paths], cwd=root, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target


def use_sparkdl_from(commit: str) -> None:
    """Put sparkdl as of git ``commit`` first on this process's and its children's Python path."""
    target = checkout_at(commit, "sparkdl")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(target), os.environ.get("PYTHONPATH")]))
    sys.path.insert(0, str(target))


def make_frame(spark, rows: int, partitions: int):
    """A DataFrame of random rows, generated with numpy inside the executors (no driver data)."""
    import numpy as np
    import pyarrow as pa

    def generate(batches):
        for batch in batches:
            ids = batch.column(0).to_numpy()
            rng = np.random.default_rng(int(ids[0]) if len(ids) else 0)
            values = rng.random((len(ids), FEATURES), dtype=np.float32)
            features = pa.ListArray.from_arrays(
                pa.array(np.arange(0, values.size + 1, FEATURES, dtype=np.int32)), pa.array(values.reshape(-1))
            )
            yield pa.RecordBatch.from_arrays([features, pa.array(ids % 10)], names=["features", "label"])

    return spark.range(0, rows, numPartitions=partitions).mapInArrow(generate, "features array<float>, label long")


def make_rdd(sc, rows: int, partitions: int):
    """An RDD of ``(numpy float32[784], label)`` tuples."""
    per_partition = rows // partitions

    def generate(index, _):
        import numpy as np

        rng = np.random.default_rng(index)
        values = rng.random((per_partition, FEATURES), dtype=np.float32)
        for i in range(per_partition):
            yield values[i], int(i % 10)

    return sc.parallelize(range(partitions), partitions).mapPartitionsWithIndex(generate)


# -- node functions (sparkdl) --


def drain(args, ctx):
    """Read every row as columns, do nothing with them."""
    feed = ctx.get_data_feed(input_mapping=args["mapping"])
    rows = 0
    while not feed.should_stop():
        rows += len(next(iter(feed.next_batch(BATCH).values())))
    Path(args["out"], f"drain{ctx.executor_id}.json").write_text(json.dumps({"rows": rows}))


def drain_rows(args, ctx):
    """Read every row with TensorFlowOnSpark's row API (next_batch without input_mapping: tuples)."""
    feed = ctx.get_data_feed()
    rows = 0
    while not feed.should_stop():
        rows += len(feed.next_batch(BATCH))
    Path(args["out"], f"drain{ctx.executor_id}.json").write_text(json.dumps({"rows": rows}))


def source_scan_seconds(data) -> float:
    """Seconds for one pass over a cached source, as the feeding job reads it (Arrow batches of a
    DataFrame through mapInArrow, rows of an RDD through mapPartitions), counting only."""
    import pyarrow as pa
    from pyspark.sql import DataFrame

    started = time.perf_counter()
    if isinstance(data, DataFrame):

        def count(batches):
            yield pa.RecordBatch.from_pydict({"n": [sum(batch.num_rows for batch in batches)]})

        data.mapInArrow(count, "n long").collect()
    else:
        data.mapPartitions(lambda rows: [sum(1 for _ in rows)]).collect()
    return time.perf_counter() - started


def build_mlp(tf):
    """The benchmark model: Dense 128 relu -> Dense 10."""
    model = tf.keras.Sequential(
        [tf.keras.Input((FEATURES,)), tf.keras.layers.Dense(128, activation="relu"), tf.keras.layers.Dense(10)]
    )
    model.compile(optimizer="adam", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def train_mlp(args, ctx):
    """One model.fit per cluster.train call; records each fit's time."""
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = build_mlp(tf)
    feed = ctx.get_data_feed()
    times = []
    for _ in range(args["runs"]):
        # Keras treats the dataset's batch as the global batch: BATCH rows per worker per step.
        dataset = feed.as_dataset(BATCH * ctx.num_workers, features="features", label="label")
        rows = feed.steps_per_epoch(1)
        started = time.perf_counter()
        model.fit(dataset, epochs=1, verbose=0)
        times.append((rows, time.perf_counter() - started))
    Path(args["out"], f"train{ctx.executor_id}.json").write_text(json.dumps(times))


def infer_sum(args, ctx):
    """A trivial vectorised model: the sum of each row's features."""
    feed = ctx.get_data_feed(train_mode=False, input_mapping={"features": "x"})
    while not feed.should_stop():
        batch = feed.next_batch(BATCH)["x"]
        if len(batch):
            feed.batch_results(batch.sum(axis=1))


# -- node functions (TensorFlowOnSpark 2.2.5) --


def tfos_drain(args, ctx):
    """TFoS: read every row with next_batch."""
    from tensorflowonspark import TFNode

    feed = TFNode.DataFeed(ctx.mgr, True)
    while not feed.should_stop():
        feed.next_batch(BATCH)


def tfos_infer(args, ctx):
    """TFoS: the same trivial model, built from TFoS's row lists."""
    import numpy as np
    from tensorflowonspark import TFNode

    feed = TFNode.DataFeed(ctx.mgr, False)
    while not feed.should_stop():
        batch = feed.next_batch(BATCH)
        if batch:
            feed.batch_results(list(np.asarray([row[0] for row in batch]).sum(axis=1)))


def single_process_reference(rows: int) -> float:
    """rows/s of one Keras 3 process fitting the MLP from an in-memory tf.data pipeline."""
    code = f"""
import os, time, json, sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
import numpy as np, tensorflow as tf
import feed_throughput as b
x = np.random.default_rng(0).random(({rows}, b.FEATURES), dtype=np.float32)
y = np.arange({rows}) % 10
ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(b.BATCH).prefetch(2)
model = b.build_mlp(tf)
model.fit(ds.take(2), epochs=1, verbose=0)
started = time.perf_counter(); model.fit(ds, epochs=1, verbose=0)
print(json.dumps({rows} / (time.perf_counter() - started)))
"""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("TF_USE_LEGACY_KERAS", None)  # the nodes' Keras: Keras 3
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def timed(action) -> float:
    """Seconds taken by ``action()``."""
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def main() -> None:
    """Run every measurement and print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--tfos_rows", type=int, default=20_000, help="TFoS is slow: fewer rows, same rate")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--sparkdl-commit", help="run on sparkdl as of this git commit (e.g. the base of a change)")
    parser.add_argument("--json", help="also write the results to this file")
    opts = parser.parse_args()
    if opts.sparkdl_commit:
        use_sparkdl_from(opts.sparkdl_commit)
    spark = start_local_spark("sparkdl-feed-bench")
    sc = spark.sparkContext
    from sparkdl import TFCluster

    out = Path(tempfile.mkdtemp())
    spark_mode = TFCluster.InputMode.SPARK
    rows, med = opts.rows, statistics.median
    table: list[tuple[str, float, str]] = []
    raw: dict[str, list] = {}  # the timings behind the medians, for --json

    frame = make_frame(spark, rows, opts.partitions)
    rdd = make_rdd(sc, rows, opts.partitions)

    # 1. drain-only feed rates
    for name, data, mapping in (
        ("DataFrame", frame, {"features": "x", "label": "y"}),
        ("RDD", rdd, {"0": "x", "1": "y"}),
    ):
        cluster = TFCluster.run(sc, drain, {"out": str(out), "mapping": mapping}, 2, input_mode=spark_mode)
        seconds = [timed(lambda c=cluster, d=data: c.train(d, 1)) for _ in range(opts.runs)]
        cluster.shutdown(timeout=600)
        table.append((f"sparkdl feed, drain-only nodes, {name} source", rows / med(seconds), "rows/s"))
        raw[f"drain_{name}_s"] = seconds

    # 1b. cached sources (what a DataFrame from parquet or cache() is), each read as columns and as
    # TFoS's row tuples; and each source's own pass, to see where the time goes
    cached = {"DataFrame": frame.cache(), "RDD": rdd.cache()}
    for data in cached.values():
        data.count()
    for name, data in cached.items():
        seconds = [source_scan_seconds(data) for _ in range(opts.runs)]
        table.append((f"cached {name}: Spark's pass alone (count in the feeding task)", rows / med(seconds), "rows/s"))
        raw[f"scan_cached_{name}_s"] = seconds
    for read, node in (("columns", drain), ("TFoS rows", drain_rows)):
        for name, data, mapping in (
            ("DataFrame", cached["DataFrame"], {"features": "x", "label": "y"}),
            ("RDD", cached["RDD"], {"0": "x", "1": "y"}),
        ):
            cluster = TFCluster.run(sc, node, {"out": str(out), "mapping": mapping}, 2, input_mode=spark_mode)
            seconds = [timed(lambda c=cluster, d=data: c.train(d, 1)) for _ in range(opts.runs)]
            cluster.shutdown(timeout=600)
            table.append((f"sparkdl feed, cached {name}, read as {read}", rows / med(seconds), "rows/s"))
            raw[f"drain_cached_{name}_{read}_s"] = seconds
    for data in cached.values():
        data.unpersist()

    # 2. MWMS training fed by sparkdl, and the single-process reference
    train_rows = min(rows, 100_000)
    train_frame = make_frame(spark, train_rows, opts.partitions)
    cluster = TFCluster.run(sc, train_mlp, {"out": str(out), "runs": opts.runs}, 2, input_mode=spark_mode)
    feed_seconds = [timed(lambda: cluster.train(train_frame, 1)) for _ in range(opts.runs)]
    cluster.shutdown(timeout=900)
    fits = [json.loads((out / f"train{i}.json").read_text()) for i in (0, 1)]
    fit_rates = [(r0 + r1) / max(t0, t1) for (r0, t0), (r1, t1) in zip(*fits)]
    table.append(("sparkdl 2-worker MWMS MLP fit (DataFrame feed)", med(fit_rates), "rows/s"))
    table.append(("  same, wall time of cluster.train incl. counting", train_rows / med(feed_seconds), "rows/s"))
    references = [single_process_reference(train_rows) for _ in range(opts.runs)]
    reference = med(references)
    table.append(("single-process Keras fit, in-memory tf.data", reference, "rows/s"))
    raw.update(fit_rows_per_s=fit_rates, train_wall_s=feed_seconds, single_process_rows_per_s=references)

    # 3. inference
    cluster = TFCluster.run(sc, infer_sum, {}, 2, input_mode=spark_mode)
    infer_seconds = [timed(lambda: cluster.inference(frame).count()) for _ in range(opts.runs)]
    cluster.shutdown(timeout=600)
    table.append(("sparkdl cluster.inference, trivial model (DataFrame)", rows / med(infer_seconds), "rows/s"))
    raw["inference_s"] = infer_seconds

    # 4. TensorFlowOnSpark 2.2.5, same data shape (RDD source: TFoS feeds RDDs)
    try:
        from tensorflowonspark import TFCluster as TFoSCluster
    except ImportError:
        TFoSCluster = None
    if TFoSCluster is not None:
        tfos_rdd = make_rdd(sc, opts.tfos_rows, opts.partitions)
        cluster = TFoSCluster.run(sc, tfos_drain, {}, 2, 0, False, TFoSCluster.InputMode.SPARK)
        seconds = [timed(lambda: cluster.train(tfos_rdd, 1)) for _ in range(opts.runs)]
        cluster.shutdown()
        table.append(("TFoS 2.2.5 feed, drain-only nodes, RDD source", opts.tfos_rows / med(seconds), "rows/s"))
        raw["tfos_drain_s"] = seconds
        cluster = TFoSCluster.run(sc, tfos_infer, {}, 2, 0, False, TFoSCluster.InputMode.SPARK)
        seconds = [timed(lambda: cluster.inference(tfos_rdd).count()) for _ in range(opts.runs)]
        cluster.shutdown()
        table.append(("TFoS 2.2.5 cluster.inference, trivial model", opts.tfos_rows / med(seconds), "rows/s"))
        raw["tfos_inference_s"] = seconds
    spark.stop()

    values = {name: value for name, value, _ in table}
    print(
        f"\nlocal-cluster[2,1,1024], {os.cpu_count()} cores, {rows} rows x {FEATURES} float32 (training: "
        f"{train_rows}), batch {BATCH}, medians of {opts.runs} runs"
    )
    width = max(len(name) for name, _, _ in table)
    for name, value, unit in table:
        print(f"{name.ljust(width)}  {value:>12,.0f} {unit}")
    print("\nratios")
    ratios, notes = {}, []
    fit = values["sparkdl 2-worker MWMS MLP fit (DataFrame feed)"]
    print(f"  SPARK-mode 2-worker training / single-process fit: {fit / reference:.2f}  (target >= 0.7)")
    ratios["SPARK-mode 2-worker training / single-process fit (target >= 0.7)"] = fit / reference
    for read in ("columns", "TFoS rows"):
        frame_rate = values[f"sparkdl feed, cached DataFrame, read as {read}"]
        rdd_rate = values[f"sparkdl feed, cached RDD, read as {read}"]
        print(f"  cached DataFrame / cached RDD feed, read as {read}: {frame_rate / rdd_rate:.2f}  (target >= 1)")
        ratios[f"cached DataFrame / cached RDD feed, read as {read} (target >= 1)"] = frame_rate / rdd_rate
    tfos_feed = values.get("TFoS 2.2.5 feed, drain-only nodes, RDD source")
    if tfos_feed:
        for name in ("DataFrame", "RDD"):
            rate = values[f"sparkdl feed, drain-only nodes, {name} source"]
            print(f"  feed ({name}) / TFoS feed: {rate / tfos_feed:.1f}x  (target >= 20)")
            ratios[f"feed ({name}) / TFoS feed (target >= 20)"] = rate / tfos_feed
        infer = values["sparkdl cluster.inference, trivial model (DataFrame)"]
        tfos_infer_rate = values["TFoS 2.2.5 cluster.inference, trivial model"]
        print(f"  inference / TFoS inference: {infer / tfos_infer_rate:.1f}x  (target >= 10)")
        ratios["inference / TFoS inference (target >= 10)"] = infer / tfos_infer_rate
    else:
        notes.append(
            "TensorFlowOnSpark is not installed: no TFoS rows (pip install --no-deps tensorflowonspark==2.2.5)"
        )
    if opts.json:
        from results_json import write_results

        write_results(
            opts.json,
            config={
                **vars(opts),
                "cores": os.cpu_count(),
                "master": "local-cluster[2,1,1024]",
                "train_rows": train_rows,
                "batch": BATCH,
            },
            table=table,
            ratios=ratios,
            notes=notes,
            raw=raw,
        )


if __name__ == "__main__":
    main()
