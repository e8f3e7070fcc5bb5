"""Score a DataFrame of digit images with a TensorFlow model: sparkdl's distributed inference.

Builds a DataFrame ``id long, pixels array<float> (784 values), label long`` of digits
(scikit-learn's 8x8 digits upscaled to 28x28, repeated to ``--rows``), scores it with
``sparkdl.inference.Predictor`` (``mapInArrow``, or ``mapInPandas`` with ``--pandas``; one
model per Python worker) and prints the accuracy, computed by Spark. Without ``--model`` it first
trains a small Keras CNN in the driver and saves it as a ``.keras`` file.

Runs with no arguments on an embedded ``local-cluster[2,1,1024]``; pass ``--master`` or use
spark-submit for a real cluster (then ``--model`` and ``--work_dir`` must be on storage every
executor can read).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np


def digits_28():
    """Digits as (1797, 28, 28, 1) float32 images in [0, 1] and int64 labels."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    small = (digits.images / 16.0).astype("float32")
    images = np.pad(np.kron(small, np.ones((1, 3, 3), "float32")), ((0, 0), (2, 2), (2, 2)))[..., None]
    return images, digits.target.astype("int64")


def train_model(path: str, epochs: int) -> str:
    """Train a small Keras 3 CNN on the digits in this process and save it to ``path``."""
    import keras

    images, labels = digits_28()
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((28, 28, 1), name="image"),
            keras.layers.Conv2D(16, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(10, activation="softmax", name="probs"),
        ]
    )
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    model.fit(images, labels, epochs=epochs, batch_size=64, verbose=0)
    model.save(path)
    return path


def digits_frame(spark, rows: int, partitions: int):
    """The digits repeated to ``rows`` rows, as a DataFrame with ``partitions`` partitions."""
    import pandas as pd

    images, labels = digits_28()
    index = np.arange(rows) % len(labels)
    frame = pd.DataFrame(
        {"id": np.arange(rows), "pixels": list(images.reshape(len(labels), -1)[index]), "label": labels[index]}
    )
    return spark.createDataFrame(frame, "id long, pixels array<float>, label long").repartition(partitions)


def parse_args(argv=None):
    """Command-line options; every one has a default."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--master",
        default=None,
        help="Spark master URL (default: the one spark-submit set, else local-cluster[2,1,1024])",
    )
    parser.add_argument("--model", default=None, help=".keras file or SavedModel directory (default: train one)")
    parser.add_argument("--work_dir", default=None, help="where a trained model and --output go (default: a temp dir)")
    parser.add_argument("--epochs", type=int, default=5, help="epochs when training the model")
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--batch_size", type=int, default=1024, help="rows per model call")
    parser.add_argument("--pandas", action="store_true", help="use mapInPandas instead of mapInArrow")
    parser.add_argument("--output", default=None, help="also write the predictions as parquet here")
    return parser.parse_args(argv)


def main(argv=None, spark=None) -> float:
    """Score the digits and return the accuracy (``spark``: use this session and leave it running)."""
    args = parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # executors run this interpreter
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from sparkdl.inference import Predictor

    own_session = spark is None
    if own_session:
        builder = SparkSession.builder.appName("sparkdl-inference-digits")
        if args.master:
            builder = builder.master(args.master)
        # spark-submit starts the JVM first and hands it over through PYSPARK_GATEWAY_PORT; its
        # --master is in that JVM, not yet in a Python SparkConf(). Plain python: embedded cluster.
        elif "PYSPARK_GATEWAY_PORT" not in os.environ:
            builder = builder.master("local-cluster[2,1,1024]")
        spark = builder.config("spark.ui.showConsoleProgress", "false").getOrCreate()
        spark.sparkContext.setLogLevel("WARN")
    work_dir = args.work_dir or tempfile.mkdtemp(prefix="sparkdl-inference-")
    os.makedirs(work_dir, exist_ok=True)
    model_path = args.model or train_model(os.path.join(work_dir, "digits.keras"), args.epochs)

    df = digits_frame(spark, args.rows, args.partitions)
    predictor = Predictor(
        model_path,
        input_mapping={"pixels": "image"},
        output_mapping="probabilities",
        keep_columns=["id", "label"],
        batch_size=args.batch_size,
    )
    scored = predictor.transform(df, arrow=not args.pandas).withColumn(
        "prediction", F.array_position("probabilities", F.array_max("probabilities")) - 1
    )
    started = time.time()
    if args.output:
        scored.write.mode("overwrite").parquet(args.output)
        scored = spark.read.parquet(args.output)
    correct = scored.filter("prediction = label").count()
    accuracy = correct / args.rows
    print(f"scored {args.rows} rows with {model_path} in {time.time() - started:.1f} s")
    print(f"test accuracy (distributed inference over {args.rows} rows): {accuracy:.4f}")
    if own_session:
        spark.stop()
    return accuracy


if __name__ == "__main__":
    main()
