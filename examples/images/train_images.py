"""Train a CNN from a folder of image files read with Spark's ``binaryFile`` source, then score
the held-out files with sparkdl's inference UDF.

A folder of PNG files, one sub-folder per class (``<images>/<label>/<name>.png``; scikit-learn's
digits, rendered to 32x32 grey PNGs when the folder does not exist yet), is read with
``spark.read.format("binaryFile")``: a DataFrame of raw file bytes (``content``) and paths. The
label comes from the path. ``cluster.train`` sends the bytes to the TF nodes as they are;
each node decodes them in its ``tf.data`` pipeline (``columns={"content": Image(32, 32, 1)}``:
decoded and resized in parallel) and trains with MultiWorkerMirroredStrategy. The chief saves the
model; ``Predictor(..., columns={"content": Image(32, 32, 1)})`` then decodes and scores the
held-out files on the executors, and Spark computes the accuracy.

Runs with no arguments on an embedded ``local-cluster[2,1,1024]``; pass ``--master`` or use
spark-submit for a real cluster (then ``--images`` and ``--model`` must be on storage every
executor can read).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

SIZE = 32


def render_digits(folder: Path) -> int:
    """scikit-learn's 1797 digits as 32x32 grey PNGs in ``folder/<label>/`` (no download); how many."""
    import numpy as np
    from PIL import Image
    from sklearn.datasets import load_digits

    digits = load_digits()
    for index, (image, label) in enumerate(zip(digits.images, digits.target)):
        target = folder / str(label)
        target.mkdir(parents=True, exist_ok=True)
        pixels = (image * (255 / 16)).astype(np.uint8)
        Image.fromarray(pixels, "L").resize((SIZE, SIZE), Image.BILINEAR).save(target / f"digit{index:04d}.png")
    return len(digits.target)


def main_fun(args, ctx):
    """One TF node: decode the fed image files in tf.data and fit a CNN with MWMS; save it."""
    import keras
    import tensorflow as tf

    from sparkdl.columns import Image

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    feed = ctx.get_data_feed()
    # Keras treats the dataset's batch as the global batch: per-node batch x number of nodes.
    dataset = feed.as_dataset(
        args.batch_size * ctx.num_workers,
        features="content",
        label="label",
        columns={"content": Image(SIZE, SIZE, channels=1)},  # PNG bytes -> uint8 (32, 32, 1)
    )
    with strategy.scope():
        model = keras.Sequential(
            [
                keras.Input((SIZE, SIZE, 1), dtype="uint8", name="image"),
                keras.layers.Rescaling(1 / 255),
                keras.layers.Conv2D(16, 3, activation="relu"),
                keras.layers.MaxPooling2D(),
                keras.layers.Conv2D(32, 3, activation="relu"),
                keras.layers.MaxPooling2D(),
                keras.layers.Flatten(),
                keras.layers.Dense(10, activation="softmax", name="probs"),
            ]
        )
        model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(dataset, epochs=args.epochs, verbose=2 if ctx.is_chief else 0)
    with ctx.export_path(args.model) as target:  # every MWMS node saves; the chief's copy is kept
        model.save(target)


def parse_args(argv=None):
    """Command-line options; every one has a default."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--master", default=None, help="Spark master URL (default: spark-submit's, else local-cluster)")
    parser.add_argument("--cluster_size", type=int, default=2, help="number of TF nodes (one per executor)")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--batch_size", type=int, default=32, help="images per node per step")
    parser.add_argument("--partitions", type=int, default=None, help="partitions of the files (default: Spark's split)")
    parser.add_argument("--images", default=None, help="folder of <label>/<file>.png (default: digits, rendered)")
    parser.add_argument("--model", default=None, help="where the .keras model is saved (default: in --work_dir)")
    parser.add_argument("--work_dir", default=None, help="for the rendered images and the model (default: a temp dir)")
    return parser.parse_args(argv)


def main(argv=None, spark=None) -> float:
    """Train from the image folder, score the held-out files; returns the test accuracy.

    ``spark``: use this running session and leave it running (by default the example starts its own).
    """
    own_session = spark is None
    args = parse_args(argv)
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="sparkdl-images-"))
    images = Path(args.images) if args.images else work / "digits"
    if not images.exists():
        print(f"rendered {render_digits(images)} digit images into {images}")
    args.model = args.model or str(work / "digits.keras")

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # executors run this interpreter
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from sparkdl import TFCluster
    from sparkdl.columns import Image
    from sparkdl.inference import Predictor

    if own_session:
        builder = SparkSession.builder.appName("sparkdl-images")
        if args.master:
            builder = builder.master(args.master)
        elif "PYSPARK_GATEWAY_PORT" not in os.environ:  # plain python: an embedded cluster
            builder = builder.master(f"local-cluster[{args.cluster_size},1,1024]")
        spark = builder.config("spark.ui.showConsoleProgress", "false").getOrCreate()
        spark.sparkContext.setLogLevel("WARN")

    files = (
        spark.read.format("binaryFile")
        .option("pathGlobFilter", "*.png")
        .option("recursiveFileLookup", "true")
        .load(str(images))
        .select("path", "content", F.regexp_extract("path", r"/(\d+)/[^/]+$", 1).cast("long").alias("label"))
    )
    if args.partitions:  # many small files: Spark makes a partition of every few dozen
        files = files.coalesce(args.partitions)
    held_out = F.abs(F.hash("path")) % 5 == 0  # a fifth of the files, the same every run
    train, test = files.filter(~held_out).cache(), files.filter(held_out).cache()

    started = time.time()
    cluster = TFCluster.run(spark.sparkContext, main_fun, args, args.cluster_size, input_mode=TFCluster.InputMode.SPARK)
    cluster.train(train, num_epochs=args.epochs)
    cluster.shutdown()
    print(
        f"trained on {args.cluster_size} TF nodes from {train.count()} image files read with binaryFile in "
        f"{time.time() - started:.1f} s; model in {args.model}"
    )

    predictor = Predictor(
        args.model,
        input_mapping={"content": "image"},
        output_mapping="probs",
        keep_columns=["label"],
        columns={"content": Image(SIZE, SIZE, channels=1)},  # decoded on the executors as in training
    )
    scored = predictor.transform(test).withColumn("prediction", F.array_position("probs", F.array_max("probs")) - 1)
    # one job scores every file once and counts both
    rows, right = scored.agg(F.count("*"), F.sum((F.col("prediction") == F.col("label")).cast("long"))).first()
    accuracy = right / rows
    print(f"test accuracy (distributed inference over {rows} rows): {accuracy:.4f}")
    train.unpersist()
    test.unpersist()
    if own_session:
        spark.stop()
    return accuracy


if __name__ == "__main__":
    main()
