"""Train the digits classifier from a Spark Streaming DStream, export it, score it.

TensorFlowOnSpark's streaming example (``examples/mnist/estimator/mnist_spark_streaming.py``)
ported to sparkdl: the Spark side is TFoS's (a DStream of CSV lines from
``ssc.textFileStream``, parsed into ``(pixels, label)`` → ``cluster.train(stream)`` →
``ssc.start()`` → ``cluster.shutdown(ssc)``) but for the import. Each RDD of the stream is fed
to the TF nodes as it arrives. The nodes train a Keras 3 model (tf.estimator is gone from
TensorFlow 2.16) with MultiWorkerMirroredStrategy from a ``next_batch`` generator until
``should_stop()``, or until they have trained ``--steps`` batches: then each ends its feed
(``terminate()``), which makes ``cluster.shutdown(ssc)`` stop the StreamingContext. The chief
exports a SavedModel, which the driver scores with a distributed ``mapInPandas`` job.

The data makes itself: once the stream runs, a thread writes scikit-learn's digits (the 80 %
training split, a new order per file) as ``label,pixel0,...,pixel63`` CSV files into the watched
folder, one file per batch interval, each moved in whole (as TFoS's README does with ``mv``).

Runs with no arguments on an embedded ``local-cluster[2,1,1024]``; pass ``--master`` or use
spark-submit for a real cluster (``--images_labels`` then on storage every executor can read).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mnist"))
import digits_common  # noqa: E402


def main_fun(args, ctx):
    """One TF node: train on the streamed rows as they arrive (MWMS), end the feed, export."""
    import keras
    import numpy as np
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    # TFoS: tf_feed = TFNode.DataFeed(ctx.mgr). A stream may stay quiet for a while: feed_timeout
    # bounds each wait for the next rows (sparkdl's default is 600 s).
    tf_feed = ctx.get_data_feed(feed_timeout=args.feed_timeout)

    def rdd_generator():
        # sparkdl gives every node the same number of rows of each RDD, so all nodes read the
        # same batches and run the same synchronous steps (TFoS needed asynchronous
        # ParameterServerStrategy here: its nodes got whatever partitions they were sent).
        for _ in range(args.steps):
            if tf_feed.should_stop():
                return
            batch = tf_feed.next_batch(args.batch_size)
            if len(batch) == 0:
                return
            pixels = np.array([row[0] for row in batch], dtype=np.float32) / 16.0
            labels = np.array([row[1] for row in batch], dtype=np.int64)
            yield pixels, labels

    signature = (tf.TensorSpec((None, 64), tf.float32), tf.TensorSpec((None,), tf.int64))
    options = tf.data.Options()
    # each node reads only its own rows already: no sharding
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    dataset = tf.data.Dataset.from_generator(rdd_generator, output_signature=signature).with_options(options)

    with strategy.scope():
        model = digits_common.build_model(keras)
    # Keras treats each batch as the global one: every node runs ctx.num_workers steps per batch.
    model.fit(dataset, epochs=1, verbose=2 if ctx.is_chief else 0, callbacks=[ctx.progress_callback()])
    tf_feed.terminate()  # enough: skip the rest of the stream; shutdown(ssc) then stops it
    digits_common.export(model, ctx, args.export_dir)


def write_stream_files(args, stream_dir: str, done: threading.Event) -> None:
    """Simulate arriving data: one CSV file of the training split per batch interval, moved in
    whole, until ``--files`` were written or ``done`` is set."""
    import numpy as np

    (train_x, train_y), _ = digits_common.load_digits_split()
    pixels = np.rint(train_x * 16).astype(int)  # back to the 0..16 integers the digits come as
    staging = tempfile.mkdtemp(prefix="sparkdl_stream_staging_")
    try:
        for number in range(args.files):
            if done.wait(args.batch_interval):  # pacing: a new file for each batch of the stream
                return
            order = np.random.default_rng(number).permutation(len(train_y))
            lines = (",".join(map(str, [train_y[i], *pixels[i]])) for i in order)
            path = os.path.join(staging, f"part-{number:05d}.csv")
            with open(path, "w") as out:
                out.write("\n".join(lines) + "\n")
            shutil.move(path, os.path.join(stream_dir, os.path.basename(path)))
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def parse_args(argv=None):
    """Command-line options; every one has a default (the smallest run that trains well)."""
    parser = digits_common.example_parser(__doc__, cluster_size=2)
    parser.add_argument("--batch_size", type=int, default=32, help="rows each node reads per batch")
    parser.add_argument("--steps", type=int, default=60, help="batches each node trains on before it stops")
    parser.add_argument(
        "--files", type=int, default=3, help="CSV files written to the stream (1437 rows each; 0: bring your own)"
    )
    parser.add_argument("--batch_interval", type=float, default=2.0, help="seconds per batch of the stream")
    parser.add_argument("--images_labels", default=None, help="the folder the stream watches (default: a new one)")
    parser.add_argument("--feed_timeout", type=float, default=600.0, help="how long a node waits for new rows")
    parser.add_argument("--export_dir", default=os.path.join(tempfile.gettempdir(), "sparkdl_mnist_streaming_export"))
    args = parser.parse_args(argv)
    train_rows = len(digits_common.load_digits_split()[0][1])  # 1437: the 80 % training split
    if args.files and args.steps * args.batch_size * args.cluster_size > args.files * train_rows:
        parser.error(
            f"--steps {args.steps} x --batch_size {args.batch_size} x {args.cluster_size} nodes needs more rows "
            f"than --files {args.files} bring ({args.files * train_rows}): the nodes would wait for more"
        )
    return args


def main(argv=None, spark=None) -> float:
    """Train from a DStream, export, score; returns the test accuracy.

    ``spark``: use this running session and leave it running (by default the example starts its own).
    """
    own_session = spark is None
    args = parse_args(argv)
    spark = digits_common.start_spark("mnist_spark_streaming", args.master, args.cluster_size, spark=spark)
    sc = spark.sparkContext
    from pyspark.streaming import StreamingContext

    from sparkdl import TFCluster

    ssc = StreamingContext(sc, args.batch_interval)
    own_folder = args.images_labels is None  # a scratch folder of ours, removed at the end
    args.images_labels = args.images_labels or tempfile.mkdtemp(prefix="sparkdl_stream_")
    os.makedirs(args.images_labels, exist_ok=True)

    # create RDD of input data
    def parse(ln):
        vec = [int(x) for x in ln.split(",")]
        return (vec[1:], vec[0])

    stream = ssc.textFileStream(args.images_labels)
    images_labels = stream.map(parse)

    started = time.time()
    cluster = TFCluster.run(
        sc,
        main_fun,
        args,
        args.cluster_size,
        num_ps=0,  # TFoS's example: num_ps=1 for its ParameterServerStrategy; MWMS needs none
        input_mode=TFCluster.InputMode.SPARK,
        master_node="chief",
    )
    cluster.train(images_labels, feed_timeout=86400)  # extend feed timeout to 24hrs for streaming data to arrive
    ssc.start()
    done = threading.Event()
    writer = threading.Thread(target=write_stream_files, args=(args, args.images_labels, done), daemon=True)
    writer.start()
    cluster.shutdown(ssc)  # returns once the nodes ended their feed and exported the model
    done.set()
    writer.join()
    if own_folder:
        shutil.rmtree(args.images_labels, ignore_errors=True)
    print(
        f"trained on {args.cluster_size} TF nodes from a DStream ({args.steps} batches of {args.batch_size} rows "
        f"per node) in {time.time() - started:.1f} s; model in {args.export_dir}"
    )
    accuracy = digits_common.test_accuracy(spark, args.export_dir, args.cluster_size)
    if own_session:
        spark.stop()
    return accuracy


if __name__ == "__main__":
    main()
