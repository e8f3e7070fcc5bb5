"""Bounded memory while feeding: 1,000,000 rows of 784 float32 (about 3 GB) into drain-only nodes.

Samples the resident memory (RSS) of every process of the run while the feed runs and reports
the peak of each kind: executor JVMs, Spark's Python workers (the feeding tasks), sparkdl
supervisors and TF node processes. With backpressure, the node peak stays near its queue bound
(64 MiB) plus TensorFlow's own footprint, whatever the data size.

``--source sparse``: a 2^18-wide ``HashingTF`` column (``pyspark.ml`` sparse Vectors, about 50
non-zeros a row, made by Spark ML from 50 random words a row), cached in Spark before the feed.
The nodes read it ``--read sparse`` (``as_dataset(columns={"vec": Sparse()})``: ``tf.SparseTensor``
batches of 256) or ``--read dense`` (``next_batch(64)`` with ``input_mapping``: dense rows, the only
form before sparse columns were kept sparse). ``--sparkdl-commit REF`` runs the whole benchmark
(driver, executors, nodes) on sparkdl as of git commit REF (``git archive``, first on
``PYTHONPATH``): the "before" of a change, measured by the same script.

    .venv/bin/python benchmarks/feed_memory.py [--rows 1000000] [--source dataframe|rdd|sparse] [--json results.json]
    .venv/bin/python benchmarks/feed_memory.py --source sparse --rows 1000 --read dense --sparkdl-commit 7eaae0c
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

KINDS = {
    "TF node processes": "sparkdl.node.tf_process",
    "sparkdl supervisors": "sparkdl.node.supervisor",
    "Spark Python workers (feeders)": "pyspark.daemon",
    "executor JVMs": "org.apache.spark.executor",
}


def classify(process: psutil.Process) -> str | None:
    """Which kind of process this is, by its command line."""
    try:
        cmdline = " ".join(process.cmdline())
    except psutil.Error:
        return None
    for kind, marker in KINDS.items():
        if marker in cmdline:
            return kind
    return None


class RssSampler:
    """Records the peak RSS per process kind until stopped (measurement, not synchronisation)."""

    def __init__(self, interval_s: float = 0.2):
        self.peaks: dict[str, int] = {}
        self.peak_totals: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(interval_s,), daemon=True)

    def _run(self, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            totals: dict[str, int] = {}
            for process in psutil.process_iter():
                kind = classify(process)
                if kind is None:
                    continue
                try:
                    rss = process.memory_info().rss
                except psutil.Error:
                    continue
                self.peaks[kind] = max(self.peaks.get(kind, 0), rss)
                totals[kind] = totals.get(kind, 0) + rss
            for kind, total in totals.items():
                self.peak_totals[kind] = max(self.peak_totals.get(kind, 0), total)

    def __enter__(self) -> "RssSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)


SPARSE_WIDTH = 1 << 18  # HashingTF's default numFeatures
SPARSE_WORDS = 50


def drain_sparse(args, ctx):
    """Read every row of the sparse column: as tf.SparseTensor batches, or dense with next_batch.
    TensorFlow is imported first either way, and the process's RSS then is its baseline, so the
    growth while reading is the feed's (and the batches'), not TensorFlow's own footprint."""
    import tensorflow  # noqa: F401

    baseline = _rss_mib()
    peak = baseline
    if args["read"] == "sparse":
        from sparkdl.columns import Sparse

        feed = ctx.get_data_feed()
        rows = 0
        for batch in feed.as_dataset(256, features="vec", columns={"vec": Sparse()}):
            rows += int(batch.dense_shape[0])
            peak = max(peak, _rss_mib())
    else:
        feed = ctx.get_data_feed(input_mapping={"vec": "x"})
        rows = 0
        while not feed.should_stop():
            rows += len(feed.next_batch(64)["x"])
            peak = max(peak, _rss_mib())
    record = {"rows": rows, "baseline_mib": baseline, "peak_after_batch_mib": peak}
    Path(args["out"], f"drain{ctx.executor_id}.json").write_text(__import__("json").dumps(record))


def _rss_mib() -> float:
    """This process's resident memory (VmRSS), MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def sparse_frame(spark, rows: int, partitions: int):
    """``vec``: HashingTF(2^18) of SPARSE_WORDS random words a row, cached and counted."""
    from pyspark.ml.feature import HashingTF
    from pyspark.sql import functions as F

    words = spark.range(0, rows, numPartitions=partitions).select(
        F.expr(f"transform(sequence(1, {SPARSE_WORDS}), i -> concat('w', cast(xxhash64(id, i) as string)))").alias(
            "words"
        )
    )
    frame = HashingTF(inputCol="words", outputCol="vec", numFeatures=SPARSE_WIDTH).transform(words).select("vec")
    frame = frame.cache()
    frame.count()
    return frame


def main() -> None:
    """Feed, sample, print."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--source", choices=["dataframe", "rdd", "sparse"], default="dataframe")
    parser.add_argument("--read", choices=["sparse", "dense"], default="sparse", help="how nodes read --source sparse")
    parser.add_argument("--sparkdl-commit", help="run on sparkdl as of this git commit (e.g. the base of a change)")
    parser.add_argument("--json", help="also write the results to this file")
    opts = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    import feed_throughput as bench

    if opts.sparkdl_commit:
        bench.use_sparkdl_from(opts.sparkdl_commit)

    from sparkdl import TFCluster

    spark = bench.start_local_spark("sparkdl-feed-memory")
    sc = spark.sparkContext
    node, args = bench.drain, {}
    if opts.source == "dataframe":
        data, mapping = bench.make_frame(spark, opts.rows, opts.partitions), {"features": "x", "label": "y"}
    elif opts.source == "rdd":
        data, mapping = bench.make_rdd(sc, opts.rows, opts.partitions), {"0": "x", "1": "y"}
    else:
        sc.addPyFile(str(Path(__file__)))
        data, mapping, node, args = (
            sparse_frame(spark, opts.rows, opts.partitions),
            None,
            drain_sparse,
            {"read": opts.read},
        )
    out = Path(tempfile.mkdtemp())
    cluster = TFCluster.run(
        sc, node, {"out": str(out), "mapping": mapping, **args}, 2, input_mode=TFCluster.InputMode.SPARK
    )
    with RssSampler() as sampler:
        started = time.perf_counter()
        cluster.train(data, 1)
        seconds = time.perf_counter() - started
    cluster.shutdown(timeout=600)
    nodes = [__import__("json").loads(p.read_text()) for p in out.glob("drain*.json")]
    fed = sum(int(node["rows"]) for node in nodes)
    baseline = max((node.get("baseline_mib", 0.0) for node in nodes), default=0.0)  # sparse: TF imported
    spark.stop()
    data_gb = opts.rows * bench.FEATURES * 4 / 1e9
    what = (
        f"a 2^18-wide sparse Vector of ~{SPARSE_WORDS} non-zeros a row, read {opts.read}"
        if opts.source == "sparse"
        else f"{data_gb:.1f} GB of float32"
    )
    print(f"\nfed {fed:,} rows ({what}) from a {opts.source} in {seconds:.1f} s ({fed / seconds:,.0f} rows/s)")
    print(f"{'process kind':34} {'peak RSS, one process':>22} {'peak RSS, all of kind':>22}")
    for kind in KINDS:
        if kind in sampler.peaks:
            peak, total = sampler.peaks[kind] / 2**20, sampler.peak_totals[kind] / 2**20
            print(f"{kind:34} {peak:>18,.0f} MiB {total:>18,.0f} MiB")
    if baseline:
        growth = sampler.peaks.get("TF node processes", 0) / 2**20 - baseline
        print(f"TF node RSS before reading (TF imported): {baseline:,.0f} MiB; growth while fed: {growth:,.0f} MiB")
    if opts.json:
        write_json(opts, fed, seconds, sampler, baseline)


def write_json(opts, fed: int, seconds: float, sampler: RssSampler, baseline: float = 0.0) -> None:
    """The run's figures as results_json's JSON. There is no reference process to compare with:
    the ratios are against the size of the data fed (bounded memory: they shrink as it grows)."""
    import feed_throughput as bench
    from results_json import write_results

    if opts.source == "sparse":  # what the rows would take dense (float64), and as fed (12 bytes a non-zero)
        data_mib = fed * SPARSE_WIDTH * 8 / 2**20
        sizes = [
            ("the rows made dense (float64)", data_mib, "MiB"),
            ("their non-zeros (int32 + float64)", fed * SPARSE_WORDS * 12 / 2**20, "MiB"),
        ]
    else:
        data_mib = fed * bench.FEATURES * 4 / 2**20
        sizes = [("float32 features fed", data_mib, "MiB")]
    table = [
        ("rows fed", fed, "rows"),
        *sizes,
        ("feed wall time (cluster.train)", seconds, "s"),
        ("feed rate", fed / seconds, "rows/s"),
    ]
    for kind in KINDS:
        if kind in sampler.peaks:
            table += [
                (f"{kind}: peak RSS, one process", sampler.peaks[kind] / 2**20, "MiB"),
                (f"{kind}: peak RSS, all of kind", sampler.peak_totals[kind] / 2**20, "MiB"),
            ]
    ratios = {
        f"{kind}: peak RSS, one process / data fed": sampler.peaks[kind] / 2**20 / data_mib
        for kind in ("TF node processes", "Spark Python workers (feeders)")
        if kind in sampler.peaks and fed
    }
    if opts.source == "sparse" and "TF node processes" in sampler.peaks:
        growth = sampler.peaks["TF node processes"] / 2**20 - baseline
        table += [
            ("TF node: RSS before reading (TensorFlow imported)", baseline, "MiB"),
            ("TF node: RSS growth while fed (peak - that)", growth, "MiB"),
        ]
        ratios["TF node RSS growth / its share of the rows made dense"] = growth / (data_mib / 2)
    write_results(
        opts.json,
        config={**vars(opts), "cores": os.cpu_count(), "master": "local-cluster[2,1,1024]"},
        table=table,
        ratios=ratios,
        notes=["no reference process: the ratios are peak memory against the size of the data fed"],
        raw={"peak_rss_bytes": sampler.peaks, "peak_rss_total_bytes": sampler.peak_totals},
    )


if __name__ == "__main__":
    main()
