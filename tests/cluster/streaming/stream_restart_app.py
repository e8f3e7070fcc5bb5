"""A streaming-training application that test_stream_restart.py (beside it) runs three times, killing the first two.

It trains one TF node (``streaming_functions.counting_stream``) on one executor from a file-source
stream with ``cluster.train_stream``: ``--until killed`` runs until the test kills it (SIGKILL of the whole
application) where ``--hold-after-save``/``--hold-before-save`` hold the node; ``--until done``
trains every file available, stops the query and shuts down.
"""

from __future__ import annotations

import argparse
import logging
import sys

from pyspark.sql import SparkSession

from sparkdl import TFCluster

import streaming_functions as sf


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("--source", "--out", "--model-dir", "--query-dir"):
        parser.add_argument(name, required=True)
    parser.add_argument("--ids", type=int, required=True)
    parser.add_argument("--until", choices=("killed", "done"), required=True)
    parser.add_argument("--hold-after-save", type=int, help="the node holds once it saved this micro-batch")
    parser.add_argument("--hold-before-save", type=int, help="the node holds once it trained this micro-batch")
    args = parser.parse_args()
    logging.basicConfig(stream=sys.stdout, level=logging.WARNING, format="%(name)s %(message)s")
    logging.getLogger("sparkdl.driver.streaming").setLevel(logging.INFO)
    spark = (
        SparkSession.builder.master("local-cluster[1,1,1024]")  # one executor for the one node
        .appName(f"sparkdl-stream-restart-{args.until}")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    node_args = {"out": args.out, "model_dir": args.model_dir, "ids": args.ids}
    node_args.update(hold_after_save=args.hold_after_save, hold_before_save=args.hold_before_save)
    cluster = TFCluster.run(spark, sf.counting_stream, node_args, 1, input_mode=TFCluster.InputMode.SPARK)
    frame = spark.readStream.schema("id long, x array<double>, y double").option("maxFilesPerTrigger", 1)
    stream = cluster.train_stream(frame.json(args.source), args.query_dir)
    if args.until == "killed":
        stream.awaitTermination()
        sys.exit("the query ended before the test killed this application")
    stream.processAllAvailable()
    stream.stop()
    cluster.shutdown(timeout=120)
    print("TRAINING", stream.training, flush=True)


if __name__ == "__main__":
    main()
