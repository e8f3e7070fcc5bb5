"""Images from a folder of files: sparkdl (Spark's ``binaryFile`` source, decoded on the node by
``as_dataset(columns={"content": Image(...)})``) against tf.data reading the same files in one process.

``--images`` (10,000: enough that a Spark job's start does not dominate) JPEG files of ``--size``
(128x128) RGB, written to a temporary folder once,
labelled by their file name; decoded and resized to ``--target`` (64x64x3); batch ``--batch`` (64);
medians of ``--runs`` runs; all in this one script:

(a) Read and decode, no model. Reference: one TensorFlow process, ``list_files -> read_file ->
    decode_image -> resize`` mapped with ``num_parallel_calls`` = cores, batched, prefetched; rows/s
    of a full pass after an untimed one. sparkdl: a one-node cluster (a single TF process, like the
    reference), ``cluster.train(spark.read.format("binaryFile").load(folder), num_epochs=E)``, the
    node iterating ``as_dataset`` once per epoch: epoch 1 is fed by Spark (files read by the
    executors, sent as Arrow binary, decoded on the node), epochs 2..E come from the node's epoch
    cache (the encoded bytes; decoding is the same). Ratios: each against the reference (goal
    >= 0.8).
(b) Training: a small CNN (Rescaling, 2 conv/pool blocks, 10 classes) fitted for one epoch from each
    pipeline, in the same one-node set-up; rows/s of the fit (after an untimed warm-up fit: the
    reference on two batches, the node on a first, small ``cluster.train``). Ratio sparkdl / reference.

    .venv/bin/python benchmarks/image_train.py [--images 10000] [--runs 3] [--json results.json]
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

sys.path.insert(0, str(Path(__file__).parent))
import feed_throughput as shared  # noqa: E402  (its start_local_spark ships this directory's scripts)


def write_images(folder: Path, count: int, size: int) -> None:
    """``count`` JPEGs of ``size``x``size`` RGB (smooth shapes plus noise, so they compress like
    photographs rather than like noise), named ``img<index>-<label>.jpg``."""
    import numpy as np
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:size, 0:size] / size
    for index in range(count):
        label = index % 10
        base = np.stack([np.sin(x * (label + 1) * 3), np.cos(y * (label + 2)), x * y], axis=2)
        pixels = np.clip((base * 0.5 + 0.5) * 230 + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)
        Image.fromarray(pixels, "RGB").save(folder / f"img{index:05d}-{label}.jpg", quality=90)


def build_cnn(tf, target: int):
    """The benchmark model: uint8 images in, 10 classes out."""
    model = tf.keras.Sequential(
        [
            tf.keras.Input((target, target, 3), dtype="uint8"),
            tf.keras.layers.Rescaling(1 / 255),
            tf.keras.layers.Conv2D(16, 3, activation="relu"),
            tf.keras.layers.MaxPooling2D(),
            tf.keras.layers.Conv2D(32, 3, activation="relu"),
            tf.keras.layers.MaxPooling2D(),
            tf.keras.layers.Flatten(),
            tf.keras.layers.Dense(10),
        ]
    )
    model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


# -- the node (sparkdl) --


def node_images(args, ctx):
    """Every cluster.train call: time one as_dataset pass per epoch, or (``fit``) a one-epoch fit."""
    import tensorflow as tf

    from sparkdl.columns import Image

    feed = ctx.get_data_feed()
    spec = Image(args["target"], args["target"], 3)
    model = build_cnn(tf, args["target"]) if args["mode"] == "fit" else None
    call = 0
    while not feed.should_stop():
        call += 1
        try:
            dataset = feed.as_dataset(args["batch"], features="content", label="label", columns={"content": spec})
        except EOFError:
            break
        rows, epochs, times = feed.steps_per_epoch(1), feed.num_epochs, []  # before the run is read
        if model is not None:  # the first call (a small frame) is the warm-up: tracing
            started = time.perf_counter()
            model.fit(dataset, epochs=1, verbose=0)
            times.append(time.perf_counter() - started)
        else:
            for _ in range(epochs):
                started = time.perf_counter()
                for _batch in dataset:
                    pass
                times.append(time.perf_counter() - started)
        Path(args["out"], f"call{call}.json").write_text(json.dumps({"times": times, "rows": rows}))


# -- the reference: tf.data in one process --


def reference(folder: Path, opts, fit: bool) -> float:
    """rows/s of one TensorFlow process reading and decoding the files (and fitting, with ``fit``)."""
    code = f"""
import json, os, sys, time
sys.path.insert(0, {str(Path(__file__).parent)!r})
import tensorflow as tf
import image_train as b
target = {opts.target}
def load(path):
    image = tf.io.decode_image(tf.io.read_file(path), channels=3, dtype=tf.uint8, expand_animations=False)
    image = tf.saturate_cast(tf.round(tf.image.resize(image, [target, target])), tf.uint8)
    label = tf.strings.to_number(tf.strings.regex_replace(path, r".*-(\\d)\\.jpg$", r"\\1"), tf.int64)
    return tf.ensure_shape(image, [target, target, 3]), label
files = tf.data.Dataset.list_files({str(folder)!r} + "/*.jpg", shuffle=False)
dataset = files.map(load, num_parallel_calls=os.cpu_count()).batch({opts.batch}).prefetch(2)
rows = len(os.listdir({str(folder)!r}))
if {fit}:
    model = b.build_cnn(tf, target)
    model.fit(dataset.take(2), epochs=1, verbose=0)
    started = time.perf_counter(); model.fit(dataset, epochs=1, verbose=0)
else:
    for _ in dataset: pass
    started = time.perf_counter()
    for _ in dataset: pass
print(json.dumps(rows / (time.perf_counter() - started)))
"""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("TF_USE_LEGACY_KERAS", None)  # the nodes' Keras: Keras 3
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    """Write the images, run both sides, report."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=10000)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--target", type=int, default=64)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=3, help="epochs of the read pass (epoch 1 from Spark)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--json", help="also write the results to this file")
    opts = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="sparkdl-images-")) / "images"
    write_images(folder, opts.images, opts.size)
    data_mib = sum(p.stat().st_size for p in folder.iterdir()) / 2**20

    spark = shared.start_local_spark("sparkdl-image-bench")
    spark.sparkContext.addPyFile(str(Path(__file__)))
    from pyspark.sql import functions as F

    from sparkdl import TFCluster

    files = (
        spark.read.format("binaryFile")
        .load(str(folder))
        .select("content", F.regexp_extract("path", r"-(\d)\.jpg$", 1).cast("long").alias("label"))
        .repartition(opts.partitions)
    )
    raw: dict[str, list] = {}
    med = statistics.median
    for mode in ("read", "fit"):
        out = Path(tempfile.mkdtemp())
        args = {"out": str(out), "batch": opts.batch, "target": opts.target, "mode": mode}
        cluster = TFCluster.run(spark.sparkContext, node_images, args, 1, input_mode=TFCluster.InputMode.SPARK)
        epochs = opts.epochs if mode == "read" else 1
        cluster.train(files.limit(4 * opts.batch), num_epochs=epochs)  # warm-up: TF start, tracing
        walls = []
        for _ in range(opts.runs):
            started = time.perf_counter()
            cluster.train(files, num_epochs=epochs)
            walls.append(time.perf_counter() - started)
        cluster.shutdown(timeout=600)
        calls = [json.loads((out / f"call{i + 2}.json").read_text()) for i in range(opts.runs)]
        raw[f"{mode}_node_times_s"] = [c["times"] for c in calls]
        raw[f"{mode}_train_wall_s"] = walls
    spark.stop()
    raw["reference_read_rows_per_s"] = [reference(folder, opts, False) for _ in range(opts.runs)]
    raw["reference_fit_rows_per_s"] = [reference(folder, opts, True) for _ in range(opts.runs)]

    rows = opts.images
    epoch1 = med(rows / times[0] for times in raw["read_node_times_s"])
    cached = med(rows / t for times in raw["read_node_times_s"] for t in times[1:])
    fit = med(rows / times[0] for times in raw["fit_node_times_s"])
    ref_read, ref_fit = med(raw["reference_read_rows_per_s"]), med(raw["reference_fit_rows_per_s"])
    table = [
        ("image files", rows, "files"),
        ("their size on disk", data_mib, "MiB"),
        ("(a) tf.data in one process: read + decode + resize", ref_read, "rows/s"),
        ("(a) sparkdl, binaryFile -> 1 node, epoch 1 (fed by Spark)", epoch1, "rows/s"),
        ("(a) sparkdl, epochs 2.. (from the node's cache)", cached, "rows/s"),
        ("(b) tf.data in one process: CNN fit, 1 epoch", ref_fit, "rows/s"),
        ("(b) sparkdl, binaryFile -> 1 node: CNN fit, 1 epoch", fit, "rows/s"),
        ("(b)   wall time of cluster.train (count job, feed, fit)", med(raw["fit_train_wall_s"]), "s"),
    ]
    ratios = {
        "(a) epoch 1 fed by Spark / tf.data (goal >= 0.8)": epoch1 / ref_read,
        "(a) cached epochs / tf.data (goal >= 0.8)": cached / ref_read,
        "(b) CNN fit / tf.data fit (goal >= 0.8)": fit / ref_fit,
    }
    from results_json import finish

    finish(
        opts,
        f"{rows} JPEGs of {opts.size}x{opts.size} -> {opts.target}x{opts.target}x3, batch {opts.batch}, "
        f"medians of {opts.runs} runs, {os.cpu_count()} cores",
        table,
        ratios,
        notes=[f"sparkdl: one node (one TF process) on local-cluster[2,1,1024], {opts.partitions} partitions"],
        raw=raw,
        digits=lambda unit: 1 if unit in ("MiB", "s") else 0,
    )


if __name__ == "__main__":
    main()
