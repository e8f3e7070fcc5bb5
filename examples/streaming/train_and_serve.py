"""Train a model continuously from files landing in a folder, and score a second stream with the newest model.

Two Structured Streaming queries share one Spark application:

- **training**: ``cluster.train_stream`` feeds every micro-batch of a file-source stream
  (``--landing`` folder, ``maxFilesPerTrigger=1``) to a 2-node MultiWorkerMirroredStrategy cluster;
  each node fits it, saves the model with the micro-batch id (``ctx.stream_checkpoint``, so a
  restarted application goes on exactly where the saved model stopped), and the chief publishes
  a new model version every ``--export_every`` micro-batches (``sparkdl.model_versions``);
- **scoring**: a second file-source stream of held-out rows, scored by ``sparkdl.inference.Predictor``
  on ``ModelVersions(export_dir, refresh_seconds=...)``: it picks up each new version without a
  restart, and its ``model_version`` column says which version scored each row.

The data are scikit-learn's 8x8 digits (64 pixels, 10 classes), split into ``--files`` training
files that land one at a time, each followed by a file of held-out rows to score; the script
prints, per landing, the micro-batch trained, the version that scored and its accuracy. Run it
again with the same ``--work_dir`` and it resumes: the model from its checkpoint, both queries
from their offsets.

    python examples/streaming/train_and_serve.py                 # embedded local-cluster[2,1,1024]
    spark-submit --master 'local-cluster[2,1,1024]' examples/streaming/train_and_serve.py --files 12
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

SCHEMA = "pixels array<float>, label long"


def node_main(args, ctx):
    """Each node: fit every micro-batch; the chief also publishes a model version now and then."""
    import keras
    import tensorflow as tf

    from sparkdl.model_versions import publish_version

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        keras.utils.set_random_seed(0)
        model = keras.Sequential(
            [
                keras.Input((64,), name="pixels"),
                keras.layers.Dense(64, activation="relu"),
                keras.layers.Dense(10, activation="softmax", name="probs"),
            ]
        )
        model.compile(keras.optimizers.Adam(0.01), "sparse_categorical_crossentropy", metrics=["accuracy"])
    checkpoint = ctx.stream_checkpoint(args["model_dir"], model=model)
    feed = ctx.get_data_feed()
    for batch in feed.micro_batches(checkpoint):
        # each micro-batch a few passes: the stream is small, and every row arrives once
        dataset = batch.as_dataset(32 * ctx.num_workers, features="pixels", label="label")
        dataset = dataset.cache().repeat(args["passes"])  # the feed hands each row over once: cache to repeat
        model.fit(dataset, epochs=1, verbose=0)
        if batch.batch_id % args["export_every"] == 0:
            # under MWMS every node saves (a collective); only the chief's copy is published
            if ctx.is_chief:
                try:
                    publish_version(  # storage=: the application's store settings, for a store export_dir
                        args["export_dir"], batch.batch_id + 1, lambda d: model.save(f"{d}/model.keras"), ctx.storage
                    )
                except FileExistsError:  # published before a crash that came ahead of the checkpoint
                    pass
            else:
                with ctx.export_path(os.path.join(args["export_dir"], "model.keras")) as scratch:
                    model.save(scratch)


def land(frame, folder: str, name: str) -> None:
    """Write ``frame`` (pandas) as one parquet file into ``folder`` atomically (a stream never sees half)."""
    staging = os.path.join(os.path.dirname(folder), ".staging")
    os.makedirs(staging, exist_ok=True)
    frame.to_parquet(os.path.join(staging, name), index=False)
    os.rename(os.path.join(staging, name), os.path.join(folder, name))


def digits_files(files: int):
    """Training rows split into ``files`` pandas frames, and as many frames of held-out rows."""
    import pandas as pd
    from sklearn.datasets import load_digits

    digits = load_digits()
    order = np.random.default_rng(7).permutation(len(digits.target))
    pixels, labels = (digits.data / 16.0).astype("float32")[order], digits.target.astype("int64")[order]
    split = int(0.8 * len(labels))

    def frames(rows: slice, parts: int):
        chunks = np.array_split(np.arange(rows.start, rows.stop), parts)
        return [pd.DataFrame({"pixels": list(pixels[c]), "label": labels[c]}) for c in chunks]

    return frames(slice(0, split), files), frames(slice(split, len(labels)), files)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--master", default=None, help="default: spark-submit's, else local-cluster[2,1,1024]")
    parser.add_argument("--work_dir", default=None, help="folders, checkpoints and model versions (default: temp)")
    parser.add_argument("--files", type=int, default=6, help="training files that land, one micro-batch each")
    parser.add_argument("--passes", type=int, default=5, help="passes over each micro-batch's rows")
    parser.add_argument("--export_every", type=int, default=1, help="publish a version every N micro-batches")
    parser.add_argument("--refresh_seconds", type=float, default=0.0, help="how often scoring looks for a version")
    return parser.parse_args(argv)


def main(argv=None, spark=None) -> list[dict]:
    """Run the example; returns one record per landing (batch trained, version scored, accuracy).

    ``spark``: use this running session and leave it running (by default the example starts its own).
    """
    args = parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # executors run this interpreter
    from pyspark.sql import SparkSession

    from sparkdl import TFCluster
    from sparkdl.inference import Predictor
    from sparkdl.model_versions import ModelVersions

    own_session = spark is None
    if own_session:
        builder = SparkSession.builder.appName("sparkdl-streaming-train-and-serve")
        if args.master:
            builder = builder.master(args.master)
        elif "PYSPARK_GATEWAY_PORT" not in os.environ:  # plain python: an embedded cluster
            builder = builder.master("local-cluster[2,1,1024]")
        spark = builder.config("spark.ui.showConsoleProgress", "false").getOrCreate()
        spark.sparkContext.setLogLevel("WARN")
    work = args.work_dir or tempfile.mkdtemp(prefix="sparkdl-streaming-")
    paths = {name: os.path.join(work, name) for name in ("landing", "to_score", "model", "exports", "queries")}
    for name in ("landing", "to_score"):
        os.makedirs(paths[name], exist_ok=True)
    node_args = {"model_dir": paths["model"], "export_dir": paths["exports"]}
    node_args.update(passes=args.passes, export_every=args.export_every)

    cluster = TFCluster.run(spark, node_main, node_args, 2, input_mode=TFCluster.InputMode.SPARK)
    reader = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1)
    training = cluster.train_stream(reader.parquet(paths["landing"]), os.path.join(paths["queries"], "train"))
    scores, scoring, records = [], None, []
    train_files, score_files = digits_files(args.files)
    first = len(os.listdir(paths["landing"]))  # a resumed run lands the next files
    for index, (train_rows, score_rows) in enumerate(zip(train_files, score_files)):
        name = f"part-{first + index:04d}.parquet"
        land(train_rows, paths["landing"], name)
        training.processAllAvailable()  # the micro-batch is trained and saved (and a version published)
        if scoring is None:  # the scoring query plans its schema from the first published version
            predictor = Predictor(
                ModelVersions(paths["exports"], refresh_seconds=args.refresh_seconds),
                input_mapping={"pixels": "pixels"},
                output_mapping="probs",
                keep_columns=["label"],
                version_column="model_version",
            )
            scored = predictor.transform(reader.parquet(paths["to_score"]))
            scoring = (
                scored.writeStream.foreachBatch(lambda frame, _: scores.append(frame.toPandas()))
                .option("checkpointLocation", os.path.join(paths["queries"], "score"))
                .start()
            )
        land(score_rows, paths["to_score"], name)
        scoring.processAllAvailable()
        if scores:
            batch = scores.pop()
            accuracy = float(np.mean(np.argmax(np.stack(batch["probs"]), axis=1) == batch["label"]))
            record = {
                "micro_batch": training.training["last_batch_id"],
                "model_version": sorted(set(batch["model_version"].tolist())),
                "rows": len(batch),
                "accuracy": round(accuracy, 3),
            }
            records.append(record)
            print(
                f"landed {name}: micro-batch {record['micro_batch']} trained; {record['rows']} held-out rows "
                f"scored by version {record['model_version']}: accuracy {record['accuracy']:.3f}",
                flush=True,
            )
    scoring.stop()
    training.stop()
    cluster.shutdown()
    print("training:", training.training, flush=True)
    if own_session:
        spark.stop()
    return records


if __name__ == "__main__":
    main()
