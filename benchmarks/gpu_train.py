"""GPU training: sparkdl's 2-node MultiWorkerMirroredStrategy fit against one TensorFlow process on a GPU.

Needs an NVIDIA GPU and TensorFlow with CUDA: install the ``gpu`` extra
(``pip install -e '.[gpu,dev]'``, i.e. ``tensorflow[and-cuda]``) in the venv first. Then::

    .venv/bin/python benchmarks/gpu_train.py [--rows 60000] [--epochs 5] [--batch-size 512] [--runs 3] [--json PATH]

Workload: a small CNN (Keras 3, as on sparkdl's nodes) on 28x28x1 images (scikit-learn's digits
upscaled, repeated to ``--rows``), ``--epochs`` epochs at global batch ``--batch-size``, the same in
both variants; each fit is timed after a two-batch warm-up fit that builds and traces the model.

- ``sparkdl 2-node MWMS``: ``TFCluster.run`` (InputMode.TENSORFLOW) on ``local-cluster[2,1,4096]``,
  each node on the GPU Spark assigned it (``benchmarks/gpu_spark.py``: its own GPU when the machine
  has two, else both share one, with ring collectives since NCCL refuses two ranks on one GPU); the
  chief's fit time, and the wall time of ``run()`` + ``shutdown()``.
- ``single process``: the same fit in one fresh TensorFlow process on the first GPU, no strategy.

Prints medians of ``--runs`` runs and their ratios; ``--json PATH`` also writes them
(``results_json.py``'s format).
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


def digits_28(rows: int, seed: int = 0):
    """``(images (rows, 28, 28, 1) float32, labels (rows,) int64)``: scikit-learn's digits upscaled, repeated."""
    import numpy as np
    from sklearn.datasets import load_digits

    digits = load_digits()
    big = np.kron((digits.images / 16.0).astype("float32"), np.ones((1, 3, 3), dtype="float32"))
    images = np.pad(big, ((0, 0), (2, 2), (2, 2)))[..., None]
    order = np.random.default_rng(seed).integers(0, len(images), size=rows)
    return images[order], digits.target.astype("int64")[order]


def fit(rows: int, epochs: int, batch_size: int, distributed: bool, ring: bool = False) -> dict:
    """The workload; returns the timed fit's seconds and rows/s, and where TensorFlow ran it."""
    import tensorflow as tf

    x, y = digits_28(rows)
    if distributed:
        implementation = (
            tf.distribute.experimental.CommunicationImplementation.RING
            if ring
            else tf.distribute.experimental.CommunicationImplementation.AUTO
        )
        strategy = tf.distribute.MultiWorkerMirroredStrategy(
            communication_options=tf.distribute.experimental.CommunicationOptions(implementation=implementation)
        )
    else:
        strategy = tf.distribute.get_strategy()
    options = tf.data.Options()
    options.autotune.enabled = False  # avoids a slow iterator teardown at the end of fit()
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch_size).prefetch(2).with_options(options)
    with strategy.scope():
        model = tf.keras.Sequential(
            [
                tf.keras.Input((28, 28, 1)),
                tf.keras.layers.Conv2D(32, 3, activation="relu"),
                tf.keras.layers.MaxPooling2D(),
                tf.keras.layers.Conv2D(64, 3, activation="relu"),
                tf.keras.layers.MaxPooling2D(),
                tf.keras.layers.Flatten(),
                tf.keras.layers.Dense(128, activation="relu"),
                tf.keras.layers.Dense(10, activation="softmax"),
            ]
        )
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    model.fit(dataset.take(2), epochs=1, verbose=0)  # build and trace outside the timing
    started = time.perf_counter()
    model.fit(dataset, epochs=epochs, verbose=0)
    seconds = time.perf_counter() - started
    return {
        "fit_s": seconds,
        "rows_per_s": rows * epochs / seconds,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "tf_gpus": len(tf.config.list_physical_devices("GPU")),
        "weights_on": model.weights[0].device,
    }


def node_main(args, ctx):
    """map_fun: every node runs the workload under MWMS; the chief writes its timing."""
    result = fit(args["rows"], args["epochs"], args["batch_size"], distributed=True, ring=args["ring"])
    if ctx.job_name == "chief":
        Path(args["out"]).write_text(json.dumps(result))


def single_process(rows: int, epochs: int, batch_size: int) -> dict:
    """The reference: the same workload in one fresh TensorFlow process on the first GPU."""
    code = (
        "import json, sys; sys.path.insert(0, %r); import gpu_train as b; "
        "print(json.dumps(b.fit(%d, %d, %d, False)))" % (str(Path(__file__).parent), rows, epochs, batch_size)
    )
    env = dict(
        os.environ,
        CUDA_VISIBLE_DEVICES="0",
        CUDA_DEVICE_ORDER="PCI_BUS_ID",
        TF_FORCE_GPU_ALLOW_GROWTH="true",
    )
    env.pop("TF_USE_LEGACY_KERAS", None)  # the nodes' Keras: Keras 3
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["wall_s"] = time.perf_counter() - started
    return result


def parse_args(argv=None):
    """Command-line options (all have defaults)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=60_000)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=512, help="global batch size")
    parser.add_argument("--runs", type=int, default=3, help="runs per variant (median reported)")
    parser.add_argument("--json", help="also write the results to this file")
    return parser.parse_args(argv)


def main(argv=None) -> list[tuple[str, float, str, float]]:
    """Run both variants, print medians and ratios; returns the measures."""
    opts = parse_args(argv)
    sys.path.insert(0, str(Path(__file__).parent))
    from gpu_spark import MASTER, gpu_conf, gpu_count

    gpus = gpu_count()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from sparkdl import TFCluster

    workdir = tempfile.mkdtemp(prefix="sparkdl-gpu-train-")
    spark = (
        SparkSession.builder.master(MASTER)
        .appName("sparkdl-gpu-train-benchmark")
        .config("spark.ui.enabled", "false")
        .config(map=gpu_conf(workdir, gpus))
        .getOrCreate()
    )
    sc = spark.sparkContext
    sc.setLogLevel("ERROR")
    node_args = {"rows": opts.rows, "epochs": opts.epochs, "batch_size": opts.batch_size, "ring": gpus < 2}
    reference, cluster_fit, cluster_wall = [], [], []
    for run in range(opts.runs):
        reference.append(single_process(opts.rows, opts.epochs, opts.batch_size))
        out = Path(workdir) / f"chief{run}.json"
        started = time.perf_counter()
        cluster = TFCluster.run(
            sc, node_main, {**node_args, "out": str(out)}, 2, env={"TF_FORCE_GPU_ALLOW_GROWTH": "true"}
        )
        cluster.shutdown(timeout=3600)
        cluster_wall.append(time.perf_counter() - started)
        cluster_fit.append(json.loads(out.read_text()))
        print(
            f"  run {run + 1}: single process {reference[-1]['rows_per_s']:,.0f} rows/s, "
            f"sparkdl 2-node MWMS {cluster_fit[-1]['rows_per_s']:,.0f} rows/s",
            flush=True,
        )
    spark.stop()

    med = statistics.median
    ref_rows = med(r["rows_per_s"] for r in reference)
    mwms_rows = med(r["rows_per_s"] for r in cluster_fit)
    ref_wall = med(r["wall_s"] for r in reference)
    measures = [
        ("single-process tf.keras fit on 1 GPU (reference)", ref_rows, "rows/s", 1.0),
        ("sparkdl 2-node MWMS fit (chief's fit time)", mwms_rows, "rows/s", mwms_rows / ref_rows),
        ("reference wall time (python start + TF import + fit)", ref_wall, "s", 1.0),
        ("sparkdl run() + shutdown() wall time", med(cluster_wall), "s", med(cluster_wall) / ref_wall),
    ]
    layout = "one GPU shared by both nodes (ring collectives)" if gpus < 2 else "a GPU per node"
    print(
        f"\nmedians of {opts.runs} runs, {opts.rows} rows x {opts.epochs} epochs, global batch {opts.batch_size}, "
        f"{MASTER} with {layout}; {gpus} GPU(s) on this machine"
    )
    width = max(len(m[0]) for m in measures)
    print(f"{'measure'.ljust(width)}  {'value':>14}  ratio")
    for name, value, unit, ratio in measures:
        shown = f"{value:,.0f} rows/s" if unit == "rows/s" else f"{value:.1f} s"
        print(f"{name.ljust(width)}  {shown:>14}  {ratio:>5.2f}")
    if opts.json:
        from results_json import write_results

        write_results(
            opts.json,
            config={**vars(opts), "master": MASTER, "gpus": gpus, "layout": layout},
            table=[(name, value, unit) for name, value, unit, _ in measures],
            ratios={
                "sparkdl 2-node MWMS fit / single-process fit (rows/s)": measures[1][3],
                "sparkdl run() + shutdown() / reference wall time": measures[3][3],
            },
            raw={"reference": reference, "cluster_fit": cluster_fit, "cluster_wall_s": cluster_wall},
        )
    return measures


if __name__ == "__main__":
    main()
