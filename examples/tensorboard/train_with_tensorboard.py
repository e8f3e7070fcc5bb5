"""Watch the nodes train in TensorBoard on the driver, and read their scalars back after shutdown().

Two TF nodes train the digits MLP with MultiWorkerMirroredStrategy (InputMode.TENSORFLOW). The
chief writes each epoch's metrics as TensorBoard summaries under ``ctx.log_dir``, the ``--log_dir``
given to ``TFCluster.run``. The driver starts TensorBoard with ``cluster.start_tensorboard()`` and
prints its URL. It reads TensorBoard's HTTP API as soon as the first epoch shows, and again after
``shutdown()``: TensorBoard keeps serving until ``cluster.stop_tensorboard()`` or the driver's exit.

Runs with no arguments on an embedded ``local-cluster[2,1,1024]``. On a real cluster, ``--log_dir``
must be a directory the executors write and the driver reads: a shared file system, or ``gs://``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mnist"))
import digits_common  # noqa: E402


def summary_callbacks(ctx) -> list:
    """The chief's Keras callback that writes each epoch's metrics to ``<ctx.log_dir>/train`` (one
    writer per run: the other nodes get none)."""
    if not ctx.is_chief:
        return []
    import keras
    import tensorflow as tf

    class EpochSummaries(keras.callbacks.Callback):
        def __init__(self, log_dir: str):
            super().__init__()
            self.writer = tf.summary.create_file_writer(log_dir)

        def on_epoch_end(self, epoch, logs=None):
            with self.writer.as_default(step=epoch + 1):  # the step: epochs done
                for name, value in (logs or {}).items():
                    tf.summary.scalar(f"epoch_{name}", value)
            # On disk now, so TensorBoard shows the epoch while the next one trains. (Keras'
            # TensorBoard callback works too, but writes out every 10 summaries or 2 minutes.)
            self.writer.flush()

    return [EpochSummaries(os.path.join(ctx.log_dir, "train"))]


def main_fun(args, ctx):
    """One TF node: its own shard of the digits, MWMS, the chief's summaries."""
    import keras
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    (train_x, train_y), _ = digits_common.load_digits_split()
    dataset = digits_common.sharded_dataset(tf, ctx, train_x, train_y, args.batch_size)
    with strategy.scope():
        model = digits_common.build_model(keras)
    model.fit(dataset, epochs=args.epochs, verbose=0, callbacks=[*summary_callbacks(ctx), ctx.progress_callback()])


def scalar_tags(url: str) -> dict[str, list[str]]:
    """TensorBoard's scalar tags by run, from its HTTP API: ``{"train": ["epoch_accuracy", ...]}``."""
    with urllib.request.urlopen(f"{url}data/plugin/scalars/tags", timeout=10) as answer:
        return {run: sorted(tags) for run, tags in json.load(answer).items()}


def losses(url: str) -> list[tuple[int, float]]:
    """``(epoch, loss)`` of each epoch TensorBoard shows for the chief's run."""
    if "epoch_loss" not in scalar_tags(url).get("train", []):
        return []
    query = urllib.parse.urlencode({"run": "train", "tag": "epoch_loss"})
    with urllib.request.urlopen(f"{url}data/plugin/scalars/scalars?{query}", timeout=10) as answer:
        return [(int(step), float(value)) for _, step, value in json.load(answer)]


def wait_for_scalars(url: str, epochs: int, timeout: float) -> list[tuple[int, float]]:
    """:func:`losses` once TensorBoard shows ``epochs`` epochs (it reloads its log dir every 5 s);
    TimeoutError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while len(shown := losses(url)) < epochs:
        if time.monotonic() > deadline:
            raise TimeoutError(f"TensorBoard showed {len(shown)} of {epochs} epochs in {timeout:g} s")
        time.sleep(1)  # polling TensorBoard, which tells no one when it reloaded
    return shown


def parse_args(argv=None):
    """Command-line options; every one has a default."""
    parser = digits_common.example_parser(__doc__, cluster_size=2, epochs=20)
    parser.add_argument(
        "--batch_size", type=int, default=32, help="per-worker batch: rows each node trains per step (global: x nodes)"
    )
    parser.add_argument(
        "--log_dir",
        default=None,
        help="TensorBoard's log dir, on storage the nodes and the driver share (default: a new temporary one)",
    )
    parser.add_argument("--wait", type=float, default=300.0, help="seconds to wait for TensorBoard to show an epoch")
    return parser.parse_args(argv)


def main(argv=None, spark=None):
    """Train while TensorBoard watches; returns the cluster, shut down, its TensorBoard still serving.

    ``spark``: use this running session and leave it running (by default the example starts its own).
    """
    own_session = spark is None
    args = parse_args(argv)
    args.log_dir = args.log_dir or tempfile.mkdtemp(prefix="sparkdl_tensorboard_")
    spark = digits_common.start_spark("sparkdl-tensorboard", args.master, args.cluster_size, spark=spark)
    from sparkdl import TFCluster

    cluster = TFCluster.run(
        spark.sparkContext,
        main_fun,
        args,
        args.cluster_size,
        input_mode=TFCluster.InputMode.TENSORFLOW,
        log_dir=args.log_dir,  # the nodes' ctx.log_dir, and the log dir of the driver's TensorBoard
    )
    url = cluster.start_tensorboard()
    print(f"TensorBoard: {url} (log dir {args.log_dir})", flush=True)
    first = wait_for_scalars(url, 1, args.wait)
    print(
        f"while the nodes train, TensorBoard shows {len(first)} of {args.epochs} epochs of {scalar_tags(url)}: "
        f"loss {first[-1][1]:.4f}",
        flush=True,
    )
    cluster.shutdown()
    shown = wait_for_scalars(url, args.epochs, args.wait)
    print(
        f"after shutdown(), TensorBoard shows {len(shown)} epochs of {scalar_tags(url)}: "
        f"loss {shown[0][1]:.4f} -> {shown[-1][1]:.4f}"
    )
    if own_session:
        spark.stop()
    return cluster


if __name__ == "__main__":
    trained = main()
    if sys.stdin.isatty():
        input("TensorBoard keeps serving; press Enter to stop it. ")
    trained.stop_tensorboard()
