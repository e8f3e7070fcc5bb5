"""Distributed inference throughput: sparkdl's UDFs vs PySpark's predict_batch_udf vs one process.

One command prints one table::

    .venv/bin/python benchmarks/inference_udf.py            # 200k rows, MLP and CNN, 3 runs each
    .venv/bin/python benchmarks/inference_udf.py --json results.json   # the same, results also as JSON

Same models (a Keras 3 MLP and a small CNN on 28x28x1 input, saved as ``.keras``), same data (a
parquet file of ``id long, pixels array<float>`` with 784 values per row: scikit-learn's digits
upscaled to 28x28, repeated), same batch size, on ``local-cluster[2,1,1024]`` (two executor JVMs,
one task slot each). Each Spark variant scores every row and writes to Spark's ``noop`` sink, so
nothing is collected to the driver; the parquet scan is part of every Spark variant alike.

Variants:

- ``sparkdl mapInPandas``: ``sparkdl.inference.Predictor.transform(df, arrow=False)``, keeping ``id``.
- ``sparkdl mapInArrow``: the same with ``arrow=True`` (``transform``'s default).
- ``sparkdl predict_batch_udf``: sparkdl's pandas UDF form, ``select(id, udf(pixels))``.
- ``pyspark predict_batch_udf``: PySpark's, used as its documentation shows for TensorFlow
  (``make_predict_fn`` loads the model and returns ``model.predict``), with the same batch size
  passed to ``model.predict`` and ``input_tensor_shapes=[[28, 28, 1]]``.
- ``pyspark predict_batch_udf + tf.function``: PySpark's UDF calling the same traced function
  sparkdl uses, to separate the data path from the predict call.
- ``sparkdl TFModel.transform``: the Spark ML stage, which keeps every column (here ``id`` and
  the 784 pixels too, so it moves more data back than the others) and appends the predictions.
- ``spark scan + transfer only``: a mapInPandas that touches the pixels and returns ids: what
  moving the data between the JVM and Python costs, before any model.
- ``spark scan + transfer only, mapInArrow``: the same as a mapInArrow that only reads the
  batches (a view of the pixels' value buffer): the bound Spark itself sets on ``mapInArrow``.
- ``... packed binary``: the same frame written once with ``sparkdl.dfutil.pack_tensors`` (the
  pixels as one ``binary`` value a row, 784 float32 little-endian), scanned alone and scored by
  ``mapInArrow`` with ``columns={"pixels": Packed((28, 28, 1))}`` (sparkdl versions without
  ``Packed`` skip these variants); ``... in and out`` also writes the predictions packed
  (``Predictor(packed_outputs=True)``: 10 float32 a row as one ``binary`` value). ``--packed
  skip`` leaves them (and the packed frame) out, ``--packed only`` runs only them: a session with
  them is slower for the others too.
- ``single process model.predict``: ``model.predict(x, batch_size=B)`` on the same rows as one
  numpy array already in memory, in this (driver) process, using both cores.

Every Spark variant runs once untimed first (model loading and tracing happen then, in each
executor's Python worker, whose cache keeps the model), then ``--runs`` timed rounds, the variants
interleaved within each round so that background load hits them alike; the table shows medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

IMAGE_SHAPE = (28, 28, 1)


def digits_images(rows: int, seed: int = 0) -> np.ndarray:
    """``rows`` digits as float32 (rows, 784) in [0, 1]: 8x8 digits upscaled to 28x28, repeated."""
    from sklearn.datasets import load_digits

    small = (load_digits().images / 16.0).astype("float32")
    big = np.pad(np.kron(small, np.ones((1, 3, 3), dtype="float32")), ((0, 0), (2, 2), (2, 2)))
    order = np.random.default_rng(seed).integers(0, len(big), size=rows)
    return big[order].reshape(rows, -1)


def build_model(kind: str):
    """The benchmark's Keras 3 models (random weights: throughput does not depend on them)."""
    import keras

    keras.utils.set_random_seed(0)
    if kind == "mlp":
        layers = [keras.layers.Flatten(), keras.layers.Dense(128, activation="relu")]
    else:
        layers = [
            keras.layers.Conv2D(16, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(32, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dense(64, activation="relu"),
        ]
    return keras.Sequential(
        [keras.Input(IMAGE_SHAPE, name="image"), *layers, keras.layers.Dense(10, activation="softmax", name="probs")],
        name=kind,
    )


def write_data(spark, path: str, rows: int, partitions: int) -> None:
    """The parquet data set, generated on the executors (``id``, ``pixels``)."""

    def generate(batches):
        import pyarrow as pa

        for batch in batches:
            ids = batch.column(0).to_numpy()
            pixels = digits_images(len(ids), seed=int(ids[0]) if len(ids) else 0)
            values = pa.FixedSizeListArray.from_arrays(pa.array(pixels.reshape(-1)), pixels.shape[1])
            yield pa.RecordBatch.from_arrays([pa.array(ids), values.cast(pa.list_(pa.float32()))], ["id", "pixels"])

    (
        spark.range(rows, numPartitions=partitions)
        .mapInArrow(generate, "id long, pixels array<float>")
        .write.mode("overwrite")
        .parquet(path)
    )


def pyspark_make_predict_fn(path: str, batch_size: int):
    """PySpark's documented usage: load with Keras, return ``model.predict`` (same batch size)."""

    def make_predict_fn():
        import keras

        model = keras.saving.load_model(path, compile=False)

        def predict(inputs):
            return model.predict(inputs, batch_size=batch_size, verbose=0)

        return predict

    return make_predict_fn


def traced_make_predict_fn(path: str):
    """The model call sparkdl makes (a tf.function with a None batch axis), for PySpark's UDF."""

    def make_predict_fn():
        import keras
        import tensorflow as tf

        model = keras.saving.load_model(path, compile=False)
        serve = tf.function(
            lambda x: model(x, training=False), input_signature=[tf.TensorSpec((None, *IMAGE_SHAPE), tf.float32)]
        )

        def predict(inputs):
            return serve(inputs).numpy()

        return predict

    return make_predict_fn


def transfer_only(batches):
    """Touch every pixel (stack them, as any model input must be) and return the ids."""
    import pandas as pd

    for frame in batches:
        stacked = np.stack(frame["pixels"].to_numpy())
        yield pd.DataFrame({"id": frame["id"], "checksum": stacked[:, 0]})


def transfer_only_arrow(batches):
    """Read every batch's pixels as numpy (a view of Arrow's buffer: list or packed binary) and
    return the ids and one value a row."""
    import pyarrow as pa

    for batch in batches:
        pixels = batch.column(1)
        if pa.types.is_binary(pixels.type):
            values = np.frombuffer(pixels.buffers()[2], dtype="<f4")
        else:
            values = pixels.flatten().to_numpy()
        width = len(values) // max(1, batch.num_rows)
        checksum = pa.array(values[::width][: batch.num_rows] if width else np.zeros(batch.num_rows, "float32"))
        yield pa.RecordBatch.from_arrays([batch.column(0), checksum], ["id", "checksum"])


def packed_variants(df_packed, path: str, batch_size: int) -> dict:
    """The packed-binary variants, when this sparkdl has ``Packed`` (and ``packed_outputs``)."""
    import inspect

    try:
        from sparkdl.columns import Packed
    except ImportError:
        return {}
    from sparkdl.inference import Predictor

    settings = dict(
        input_mapping={"pixels": "image"},
        output_mapping="prediction",
        keep_columns=["id"],
        batch_size=batch_size,
        columns={"pixels": Packed(IMAGE_SHAPE)},
    )
    variants = {"sparkdl mapInArrow, packed binary": Predictor(path, **settings).transform(df_packed, arrow=True)}
    if "packed_outputs" in inspect.signature(Predictor).parameters:  # sparkdl versions since packed outputs
        both = Predictor(path, packed_outputs=True, **settings)
        variants["sparkdl mapInArrow, packed binary in and out"] = both.transform(df_packed, arrow=True)
    return {
        **variants,
        "spark scan + transfer only, mapInArrow, packed binary (no model)": df_packed.mapInArrow(
            transfer_only_arrow, "id long, checksum float"
        ),
    }


def spark_variants(spark, df, path: str, batch_size: int, df_packed=None) -> dict:
    """name -> DataFrame whose full evaluation is one timed run."""
    from pyspark.ml.functions import predict_batch_udf as pyspark_udf
    from pyspark.sql.types import ArrayType, FloatType

    from sparkdl.inference import Predictor, predict_batch_udf
    from sparkdl.ml import TFModel

    predictor = Predictor(
        path, input_mapping={"pixels": "image"}, output_mapping="prediction", keep_columns=["id"], batch_size=batch_size
    )
    ours_udf = predict_batch_udf(model=path, batch_size=batch_size, spark=spark)
    theirs = pyspark_udf(
        pyspark_make_predict_fn(path, batch_size),
        return_type=ArrayType(FloatType()),
        batch_size=batch_size,
        input_tensor_shapes=[list(IMAGE_SHAPE)],
    )
    theirs_traced = pyspark_udf(
        traced_make_predict_fn(path),
        return_type=ArrayType(FloatType()),
        batch_size=batch_size,
        input_tensor_shapes=[list(IMAGE_SHAPE)],
    )
    tf_model = TFModel(
        input_mapping={"pixels": "image"},
        output_mapping={"probs": "prediction"},
        export_dir=path,
        batch_size=batch_size,
    )
    return {
        "sparkdl mapInPandas": predictor.transform(df, arrow=False),
        "sparkdl mapInArrow": predictor.transform(df, arrow=True),
        "sparkdl predict_batch_udf": df.select("id", ours_udf("pixels").alias("prediction")),
        "pyspark predict_batch_udf": df.select("id", theirs("pixels").alias("prediction")),
        "pyspark predict_batch_udf + tf.function": df.select("id", theirs_traced("pixels").alias("prediction")),
        "sparkdl TFModel.transform (keeps pixels too)": tf_model.transform(df),
        "spark scan + transfer only (no model)": df.mapInPandas(transfer_only, "id long, checksum float"),
        "spark scan + transfer only, mapInArrow (no model)": df.mapInArrow(
            transfer_only_arrow, "id long, checksum float"
        ),
        **(packed_variants(df_packed, path, batch_size) if df_packed is not None else {}),
    }


def time_action(frame) -> float:
    """Seconds to evaluate ``frame`` completely (Spark's noop sink: nothing is collected)."""
    started = time.perf_counter()
    frame.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - started


def single_process(path: str, images: np.ndarray, batch_size: int, runs: int) -> list[float]:
    """Timed ``model.predict`` over the whole array in this process (after one warm-up call)."""
    import keras

    model = keras.saving.load_model(path, compile=False)
    x = images.reshape(-1, *IMAGE_SHAPE)
    model.predict(x[: batch_size * 2], batch_size=batch_size, verbose=0)  # trace + warm up
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        model.predict(x, batch_size=batch_size, verbose=0)
        times.append(time.perf_counter() - started)
    return times


def parse_args(argv=None):
    """Command-line options (all have defaults)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=3, help="timed runs per variant (median reported)")
    parser.add_argument("--models", default="mlp,cnn")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--master", default="local-cluster[2,1,1024]")
    parser.add_argument("--variants", default="", help="comma-separated substrings selecting Spark variants")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark setting")
    parser.add_argument(
        "--packed",
        choices=("also", "skip", "only"),
        default="also",
        help="the packed-binary variants: with the others (default), not at all (nor the packed frame "
        "written: a session of its own for the others), or only them",
    )
    parser.add_argument("--json", help="also write the results to this file")
    return parser.parse_args(argv)


def main(argv=None) -> list[dict]:
    """Run the benchmark and print the table; returns its rows."""
    args = parse_args(argv)
    # Executors run this interpreter (sparkdl and TensorFlow installed); this script's own
    # functions reach them pickled by value.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(args.master)
        .appName("sparkdl-inference-benchmark")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config(map=dict(item.split("=", 1) for item in args.conf))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    workdir = tempfile.mkdtemp(prefix="sparkdl-bench-")
    data_path = os.path.join(workdir, "digits.parquet")
    started = time.perf_counter()
    write_data(spark, data_path, args.rows, args.partitions)
    print(
        f"data: {args.rows} rows x 784 float32 in {data_path} ({time.perf_counter() - started:.1f} s); "
        f"batch size {args.batch_size}; {args.runs} timed runs per variant; master {args.master}",
        flush=True,
    )
    df = spark.read.parquet(data_path)
    df_packed = None
    try:
        from sparkdl.dfutil import pack_tensors
    except ImportError:  # a sparkdl without packed columns
        pack_tensors = None
    if pack_tensors is not None and args.packed != "skip":
        packed_path = os.path.join(workdir, "digits-packed.parquet")
        pack_tensors(df, "pixels").write.mode("overwrite").parquet(packed_path)
        df_packed = spark.read.parquet(packed_path)
    images = digits_images(args.rows)  # same construction as the parquet's, for the single process
    results = []
    for kind in [m.strip() for m in args.models.split(",") if m.strip()]:
        path = os.path.join(workdir, f"{kind}.keras")
        build_model(kind).save(path)
        variants = spark_variants(spark, df, path, args.batch_size, df_packed)
        if args.variants:
            keep = [v.strip() for v in args.variants.split(",")]
            variants = {k: v for k, v in variants.items() if any(s in k for s in keep)}
        if args.packed == "only":
            variants = {k: v for k, v in variants.items() if "packed binary" in k}
        for name, frame in variants.items():  # warm-up: load models into the workers' caches
            print(f"  [{kind}] warm-up {name}: {time_action(frame):.1f} s", flush=True)
        timings: dict[str, list[float]] = {name: [] for name in variants}
        for round_index in range(args.runs):
            for name, frame in variants.items():
                timings[name].append(time_action(frame))
            print(
                f"  [{kind}] round {round_index + 1}: "
                + ", ".join(f"{n.split(' (')[0]} {t[-1]:.1f}s" for n, t in timings.items()),
                flush=True,
            )
        timings["single process model.predict"] = single_process(path, images, args.batch_size, args.runs)
        medians = {name: statistics.median(ts) for name, ts in timings.items()}
        reference = {
            "pyspark": medians.get("pyspark predict_batch_udf"),
            "single": medians["single process model.predict"],
        }
        for name, seconds in medians.items():
            rate = args.rows / seconds
            results.append(
                {
                    "model": kind,
                    "variant": name,
                    "median_s": seconds,
                    "rows_per_s": rate,
                    "vs_pyspark": reference["pyspark"] / seconds if reference["pyspark"] else None,
                    "vs_single": reference["single"] / seconds,
                    "runs": " ".join(f"{t:.2f}" for t in timings[name]),
                }
            )
    spark.stop()
    print_table(results, args)
    if args.json:
        write_json(results, args)
    return results


def write_json(results: list[dict], args) -> None:
    """The results as results_json's JSON: rows/s per model and variant, ratios to both references."""
    from results_json import write_results  # beside this script

    reference = "pyspark predict_batch_udf"
    ratios = {
        f"{row['model']}: {row['variant']} / {reference}": row["vs_pyspark"]
        for row in results
        if row["variant"] != reference and row["vs_pyspark"]
    }
    ratios.update(
        {
            f"{row['model']}: {row['variant']} / single process model.predict": row["vs_single"]
            for row in results
            if row["variant"] != "single process model.predict"
        }
    )
    write_results(
        args.json,
        config={**vars(args), "cores": os.cpu_count()},
        table=[(f"{row['model']}: {row['variant']}", row["rows_per_s"], "rows/s") for row in results],
        ratios=ratios,
        notes=[f"load average after the run: {os.getloadavg()[0]:.1f}"],
        raw={"results": results},
    )


def print_table(results: list[dict], args) -> None:
    """The results as a Markdown table."""
    print(
        f"\n{args.rows} rows, batch size {args.batch_size}, {args.master}, median of {args.runs} runs "
        f"(load: {os.getloadavg()[0]:.1f})\n"
    )
    print("| model | variant | rows/s | x pyspark predict_batch_udf | x single process | runs (s) |")
    print("|---|---|---:|---:|---:|---|")
    for row in results:
        vs_pyspark = f"{row['vs_pyspark']:.2f}" if row["vs_pyspark"] else "-"
        print(
            f"| {row['model']} | {row['variant']} | {row['rows_per_s']:,.0f} | {vs_pyspark} | "
            f"{row['vs_single']:.2f} | {row['runs']} |"
        )


if __name__ == "__main__":
    main()
