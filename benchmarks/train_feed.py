"""InputMode.SPARK training with the node-side epoch cache, against in-memory MWMS and TFoS 2.2.5.

All on local-cluster[2,1,1024], 2 TF nodes, rows of 784 float32 features + an int label
(``--rows`` 60,000, ``--partitions`` 8, global batch ``--batch`` 256), medians of ``--runs``
runs, every reference measured in this same script:

(a) Fit fed from a cached DataFrame vs in-memory MWMS. Both nodes run the feed_throughput MLP
    under MultiWorkerMirroredStrategy for ``--epochs`` epochs, after an untimed warm-up fit (TF
    start-up, MWMS set-up, tracing), training every row of every epoch:
    - SPARK-fed, fed by ``cluster.train(frame, num_epochs=E)`` from a DataFrame cached and
      materialised in Spark beforehand, with ``cache=True`` (epochs 2..E from the nodes' epoch
      caches) and ``cache=False`` (every epoch fed from Spark: the behaviour before the cache),
      alternating on one cluster (its warm-up: a first ``cluster.train`` of a small frame).
      ``--fit all_epochs`` (default): ``model.fit(feed.as_dataset(batch, ..., all_epochs=True),
      epochs=E, steps_per_epoch=feed.keras_steps_per_epoch(batch, strategy))``, one dataset
      iterator for the whole fit; ``--fit per_epoch``: ``model.fit(feed.as_dataset(batch, ...),
      epochs=E)``, one iteration per epoch (Keras rebuilds its iterator every epoch);
    - in-memory: InputMode.TENSORFLOW, each node generates its half of the rows with numpy and
      fits ``from_tensor_slices(...).batch(batch).repeat()`` with auto-sharding and autotuning
      off (as ``as_dataset``) and ``steps_per_epoch`` = batches x workers: under MWMS each worker
      steps through both halves of every batch, and without it Keras takes the epoch's length
      from the dataset's cardinality and trains half the rows per epoch (the reference of the
      first version of this script did, which made it look twice as fast).
    rows/s = all nodes' rows x E / the slowest node's time from the start of ``model.fit`` to the
    end of its last epoch (``fit``'s own return can lag by tens of seconds at random while
    TensorFlow tears its iterators down, on either side; the JSON keeps it), timed in the nodes
    (``as_dataset`` returns once the feed's first rows are there, so the counting job and the
    first feed job's start are outside it, but inside the driver's wall time of
    ``cluster.train``, also reported); ratio (a) = SPARK-fed / in-memory (goal >= 0.9); also
    epochs 2..N alone (the epochs the cache serves) and epoch 1 alone (fed by Spark) against the
    in-memory rate. The JSON's raw data has every node's per-epoch fit times.
(b) Epochs 2..N vs epoch 1 from the cache. Nodes only iterate ``as_dataset`` (no model) for
    ``--cache_epochs`` (4) epochs of one ``cluster.train`` (after a warm-up call); each epoch's
    rows/s is both nodes' rows / the slower node's time for one full pass. Epoch 1's clock starts
    when the node gets the run's plan (sent just before the feed job starts), so it includes the
    feed job's start. Ratio = median of epochs 2..N / epoch 1 (goal >= 10x). ``--consume eager``
    (default) reads each batch in a Python ``for`` loop, whose own cost per batch (about what an
    in-memory ``from_tensor_slices`` dataset costs to iterate this way) bounds the cached epochs;
    ``--consume graph`` reads with ``Dataset.reduce`` in TensorFlow's runtime, as a compiled
    training loop does.
(c) Memory of a node serving from its cache, in (b)'s node function: the TF process's RSS at the
    start of epoch 2 and its peak during epochs 2..N (VmRSS sampled after every batch), reported
    as peak - start in MiB (the largest over nodes and runs) next to ``feed_queue_bytes`` (64 MiB)
    and one batch's size; ratio = growth / (queue + 4 batches) (goal <= 1: within the queue
    bound plus a few batches).
(d) First-epoch feed vs TensorFlowOnSpark 2.2.5 with the same node code: one function reads every
    row with TFoS's row API, ``TFNode.DataFeed(ctx.mgr, True).next_batch(batch)`` (row tuples,
    no input_mapping), and takes ``TFNode`` from sparkdl or from tensorflowonspark by a name
    passed in its args. rows/s = ``--tfos_rows`` (20,000; TFoS is slow) / wall time of a 1-epoch
    ``cluster.train`` (after a warm-up call; sparkdl's includes its counting job), for an RDD of
    (numpy row, label) tuples and for a DataFrame (sparkdl: the DataFrame itself, as Arrow; TFoS
    2.2.5's ``train`` only takes RDDs and DStreams, so it gets ``df.rdd``, which is what its own
    TFEstimator feeds). Both sources are cached in Spark first. Skipped, saying how to install
    it, when ``import tensorflowonspark`` fails (``pip install --no-deps tensorflowonspark==2.2.5``).
(e) The cost of a reproducible epoch 1: (b)'s drain-only nodes, ``cluster.train(frame,
    num_epochs=--cache_epochs)`` alternating ``deterministic=False`` (epoch 1 streams in as Spark
    delivers it) and ``deterministic=True`` (each node reads epoch 1 from its cache, in the
    seeded order, once its whole share arrived). Ratios: epoch 1's rate and the call's wall time,
    deterministic / streaming.

    .venv/bin/python benchmarks/train_feed.py [--runs 3] [--rows 60000] [--epochs 3] [--fit per_epoch]
                                              [--parts abcd] [--json results.json]
    .venv/bin/python benchmarks/train_feed.py --rows 6000 --tfos_rows 2000 --runs 1   # quick check
    .venv/bin/python benchmarks/train_feed.py --parts b --spark_nice 19   # the nodes' cost apart from Spark's
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
# The shared helpers; start_local_spark ships feed_throughput.py to the executors (addPyFile), where
# the node functions below import build_mlp and FEATURES from it.
from feed_throughput import FEATURES, build_mlp, make_frame, make_rdd, start_local_spark  # noqa: E402

MIB = 1 << 20
#: (d): where each library's TFoS-style ``TFNode`` module lives; node code picks one by name.
TFNODE_MODULES = {"sparkdl": "sparkdl.TFNode", "tfos": "tensorflowonspark.TFNode"}
TFOS_INSTALL = "pip install --no-deps tensorflowonspark==2.2.5"
#: sparkdl clusters here: no progress display, node output stays in the node logs (failures still
#: raise with the node's traceback; the cache decisions are read from the driver's log, see CacheLog).
SPARKDL_RUN = {"progress": False, "log_to_driver": False}


# -- node functions (module level: executors get them from this file) --


def _mlp(tf):
    """The feed_throughput MLP under MultiWorkerMirroredStrategy, and the strategy."""
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        return build_mlp(tf), strategy


def _timed_fit(tf, model, dataset, epochs: int, steps_per_epoch: int | None) -> tuple[float, list[float]]:
    """``model.fit(dataset, epochs, steps_per_epoch)``: its seconds, and each epoch's (for the JSON's raw data)."""
    ends: list[float] = []
    record = tf.keras.callbacks.LambdaCallback(on_epoch_end=lambda *_: ends.append(time.perf_counter()))
    started = time.perf_counter()
    model.fit(dataset, epochs=epochs, steps_per_epoch=steps_per_epoch, verbose=0, callbacks=[record])
    seconds = time.perf_counter() - started
    return seconds, [b - a for a, b in zip([started, *ends], ends)]


def fit_spark_fed(args, ctx):
    """(a) One ``model.fit(feed.as_dataset(...), epochs=E)`` per ``cluster.train`` call, timed.

    The first call (a small frame, untimed) warms up: TF start-up, MWMS set-up and tracing.
    """
    import tensorflow as tf

    model, strategy = _mlp(tf)
    feed = ctx.get_data_feed()
    fits = []
    for run in range(args["fits"] + 1):
        # Keras under MWMS treats a dataset batch as the global batch (batch / 2 rows per node per step).
        dataset = feed.as_dataset(
            args["batch"],
            features="features",
            label="label",  # waits for the first rows
            all_epochs=args["all_epochs"],
        )
        epochs, rows = feed.num_epochs, feed.steps_per_epoch(1)
        steps = feed.keras_steps_per_epoch(args["batch"], strategy) if args["all_epochs"] else None
        seconds, per_epoch = _timed_fit(tf, model, dataset, epochs, steps)
        if run:
            fits.append({"rows": rows * epochs, "seconds": seconds, "epoch_seconds": per_epoch})
    Path(args["out"], f"fit_spark{ctx.executor_id}.json").write_text(json.dumps(fits))


def fit_in_memory(args, ctx):
    """(a) The reference: the same MWMS fit from this node's half of the rows, held in numpy."""
    import numpy as np
    import tensorflow as tf

    model, _ = _mlp(tf)
    rows = args["rows"] // ctx.num_workers
    x = np.random.default_rng(ctx.executor_id).random((rows, FEATURES), dtype=np.float32)
    y = np.arange(rows, dtype=np.int64) % 10
    options = tf.data.Options()  # as as_dataset's
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    options.autotune.enabled = False
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(args["batch"]).with_options(options)
    model.fit(dataset.take(4), epochs=1, verbose=0)  # warm-up, as the SPARK-fed nodes' first call
    # Every row every epoch: under MWMS each worker steps through both halves of every batch, but
    # Keras takes the epoch's length from this dataset's cardinality (its batches, half the steps)
    # and would train half the rows per epoch; hence repeat() and the true steps_per_epoch.
    dataset, steps = dataset.repeat(), -(-rows // args["batch"]) * ctx.num_workers
    fits = []
    for _ in range(args["fits"]):
        seconds, per_epoch = _timed_fit(tf, model, dataset, args["epochs"], steps)
        fits.append({"rows": rows * args["epochs"], "seconds": seconds, "epoch_seconds": per_epoch})
    Path(args["out"], f"fit_memory{ctx.executor_id}.json").write_text(json.dumps(fits))


def iterate_epochs(args, ctx):
    """(b) and (c): time each epoch's full pass over ``as_dataset``; sample RSS per batch from epoch 2.

    Epoch 1's clock starts once the run's plan has arrived (the driver has counted the rows and
    starts the feed job), so it includes the feed job's start. The first call is a warm-up.
    """
    import psutil
    import tensorflow as tf  # imported here, outside the timings

    process = psutil.Process()
    feed = ctx.get_data_feed()
    runs = []
    for run in range(args["fits"] + 1):
        epochs, rows = feed.num_epochs, feed.steps_per_epoch(1)  # wait for the run's plan
        started = time.perf_counter()
        dataset = feed.as_dataset(args["batch"], features="features", label="label")  # waits for the first rows
        seconds, rss_start, rss_peak = [], 0, 0
        for epoch in range(epochs):
            if epoch:
                rss_start = rss_start or process.memory_info().rss
                rss_peak = max(rss_peak, rss_start)
                started = time.perf_counter()
            if args["consume"] == "graph":  # one tf.data pass in TensorFlow's runtime, no Python per batch
                dataset.reduce(tf.constant(0, tf.int64), lambda n, batch: n + tf.shape(batch[1], out_type=tf.int64)[0])
            else:
                for _ in dataset:
                    if epoch:
                        rss_peak = max(rss_peak, process.memory_info().rss)
            seconds.append(time.perf_counter() - started)
        if run:
            runs.append({"rows": rows, "epoch_seconds": seconds, "rss_start": rss_start, "rss_peak": rss_peak})
    Path(args["out"], f"epochs{ctx.executor_id}.json").write_text(json.dumps(runs))


def read_rows(args, ctx):
    """(d) Read every row with TFoS's row API; the same body runs under sparkdl and TFoS 2.2.5."""
    TFNode = importlib.import_module(TFNODE_MODULES[args["library"]])
    feed = TFNode.DataFeed(ctx.mgr, True)
    while not feed.should_stop():
        feed.next_batch(args["batch"])


# -- driver --


class CacheLog(logging.Handler):
    """Counts the driver's "epochs 2+ ... served from the nodes' caches" decisions (and refusals)."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.used = 0
        self.refused: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "served from the nodes' caches" in message:
            self.used += 1
        elif "could cache its rows" in message:
            self.refused.append(message)


def node_results(out: Path, stem: str) -> list[list[dict]]:
    """Each node's list of per-run records."""
    return [json.loads(path.read_text()) for path in sorted(out.glob(f"{stem}*.json"))]


def fit_rates(per_node: list[list[dict]]) -> list[float]:
    """rows/s of each run: all nodes' rows / the slowest node's time from the start of ``fit`` to
    the end of its last epoch (what follows, TensorFlow tearing its iterators down, can add up
    to tens of seconds at random to either side; it is in the JSON as ``seconds``)."""
    return [sum(r["rows"] for r in run) / max(sum(r["epoch_seconds"]) for r in run) for run in zip(*per_node)]


def timed(action) -> float:
    """Seconds taken by ``action()``."""
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def measure_fits(sc, opts, frame, warm_frame, out: Path, cache_log: CacheLog) -> dict:
    """(a): SPARK-fed fits (cache on and off, alternating) and the in-memory reference."""
    from sparkdl import TFCluster

    args = {
        "out": str(out),
        "batch": opts.batch,
        "fits": 2 * opts.runs,
        "rows": opts.rows,
        "epochs": opts.epochs,
        "all_epochs": opts.fit == "all_epochs",
    }
    cluster = TFCluster.run(sc, fit_spark_fed, args, 2, input_mode=TFCluster.InputMode.SPARK, **SPARKDL_RUN)
    cluster.train(warm_frame, 1)  # the nodes' warm-up fit: keeps TF start-up out of the timed calls
    walls: dict[bool, list[float]] = {True: [], False: []}
    used_before = cache_log.used
    for _ in range(opts.runs):
        for cache in (True, False):
            walls[cache].append(timed(lambda c=cache: cluster.train(frame, num_epochs=opts.epochs, cache=c)))
    cluster.shutdown(timeout=900)
    cached_fits = cache_log.used - used_before
    spark_fits = node_results(out, "fit_spark")
    spark_rates = fit_rates(spark_fits)
    args["fits"] = opts.runs
    cluster = TFCluster.run(sc, fit_in_memory, args, 2, **SPARKDL_RUN)  # InputMode.TENSORFLOW
    cluster.shutdown(timeout=900)
    memory_fits = node_results(out, "fit_memory")
    med = statistics.median
    cached_runs = list(zip(*spark_fits))[0::2]
    cached_later = [
        sum(node["rows"] for node in run)
        * (opts.epochs - 1)
        / opts.epochs
        / max(sum(node["epoch_seconds"][1:]) for node in run)
        for run in cached_runs
    ]
    cached_first = [
        sum(node["rows"] for node in run) / opts.epochs / max(node["epoch_seconds"][0] for node in run)
        for run in cached_runs
    ]  # epoch 1, fed by Spark
    return {
        "cached": med(spark_rates[0::2]),
        "cached_later": med(cached_later),
        "cached_first": med(cached_first),
        "uncached": med(spark_rates[1::2]),
        "memory": med(fit_rates(memory_fits)),
        "wall_cached": med(walls[True]),
        "wall_uncached": med(walls[False]),
        "cache_used": f"{cached_fits}/{opts.runs}",
        "raw": {
            "spark_fed_per_node": spark_fits,
            "in_memory_per_node": memory_fits,
            "train_wall_s": {"cache": walls[True], "no_cache": walls[False]},
        },
    }


def measure_epochs(sc, opts, frame, warm_frame, out: Path, cache_log: CacheLog) -> dict:
    """(b) and (c): per-epoch rates of drain-only nodes, and their RSS while serving from the cache."""
    from sparkdl import TFCluster

    args = {"out": str(out), "batch": opts.batch, "fits": opts.runs, "consume": opts.consume}
    cluster = TFCluster.run(sc, iterate_epochs, args, 2, input_mode=TFCluster.InputMode.SPARK, **SPARKDL_RUN)
    cluster.train(warm_frame, 1)  # warm-up
    used_before = cache_log.used
    for _ in range(opts.runs):
        cluster.train(frame, num_epochs=opts.cache_epochs)
    cluster.shutdown(timeout=900)
    per_node = node_results(out, "epochs")
    firsts, laters, growth = [], [], []
    for run in zip(*per_node):
        rows = sum(node["rows"] for node in run)
        rates = [rows / max(seconds) for seconds in zip(*(node["epoch_seconds"] for node in run))]
        firsts.append(rates[0])
        laters.append(statistics.median(rates[1:]))
        growth += [(node["rss_peak"] - node["rss_start"]) / MIB for node in run]
    return {
        "first": statistics.median(firsts),
        "later": statistics.median(laters),
        "rss_growth_mib": max(growth),
        "cache_used": f"{cache_log.used - used_before}/{opts.runs}",
        "raw": {"per_node": per_node},
    }


def measure_deterministic(sc, opts, frame, warm_frame, out: Path) -> dict:
    """(e): epoch 1 and the whole call, streaming vs ``deterministic=True``, alternating on one cluster."""
    from sparkdl import TFCluster

    args = {"out": str(out), "batch": opts.batch, "fits": 2 * opts.runs, "consume": opts.consume}
    cluster = TFCluster.run(sc, iterate_epochs, args, 2, input_mode=TFCluster.InputMode.SPARK, **SPARKDL_RUN)
    cluster.train(warm_frame, 1)  # warm-up
    walls: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(opts.runs):
        for deterministic in (False, True):
            call = lambda d=deterministic: cluster.train(frame, num_epochs=opts.cache_epochs, seed=1, deterministic=d)
            walls[deterministic].append(timed(call))
    cluster.shutdown(timeout=900)
    per_node = node_results(out, "epochs")
    first_rates = []
    for run in zip(*per_node):
        rows = sum(node["rows"] for node in run)
        first_rates.append(rows / max(node["epoch_seconds"][0] for node in run))
    med = statistics.median
    return {
        "streaming_first": med(first_rates[0::2]),
        "deterministic_first": med(first_rates[1::2]),
        "wall_streaming": med(walls[False]),
        "wall_deterministic": med(walls[True]),
        "raw": {"per_node": per_node, "train_wall_s": {"streaming": walls[False], "deterministic": walls[True]}},
    }


def measure_row_feed(sc, spark, opts) -> dict:
    """(d): 1-epoch ``cluster.train`` wall time of the same row-reading nodes, sparkdl and TFoS."""
    from sparkdl import TFCluster

    rdd = make_rdd(sc, opts.tfos_rows, opts.partitions).cache()
    frame = make_frame(spark, opts.tfos_rows, opts.partitions).cache()
    warm_rdd = make_rdd(sc, 2 * opts.batch, 2)
    rows = rdd.count()
    frame.count()
    result: dict = {"rows": rows}
    cluster = TFCluster.run(
        sc,
        read_rows,
        {"library": "sparkdl", "batch": opts.batch},
        2,
        input_mode=TFCluster.InputMode.SPARK,
        **SPARKDL_RUN,
    )
    cluster.train(warm_rdd, 1)  # warm-up: the nodes are up and reading
    seconds = {"rdd": [], "df": []}
    for _ in range(opts.runs):
        seconds["rdd"].append(timed(lambda: cluster.train(rdd, 1)))
        seconds["df"].append(timed(lambda: cluster.train(frame, 1)))
    cluster.shutdown(timeout=600)
    result.update({f"sparkdl_{k}": rows / statistics.median(v) for k, v in seconds.items()})
    result["raw"] = {"sparkdl_train_wall_s": seconds}
    try:
        from tensorflowonspark import TFCluster as TFoSCluster
    except ImportError as exc:
        result["tfos_skipped"] = f"tensorflowonspark is not importable ({exc}); install it with: {TFOS_INSTALL}"
        return result
    try:
        cluster = TFoSCluster.run(
            sc,
            read_rows,
            {"library": "tfos", "batch": opts.batch},
            2,
            0,
            False,
            TFoSCluster.InputMode.SPARK,
            reservation_timeout=300,
        )
        cluster.train(warm_rdd, 1)
        seconds = {"rdd": [], "df": []}
        for _ in range(opts.runs):
            seconds["rdd"].append(timed(lambda: cluster.train(rdd, 1)))
            # TFoS 2.2.5's train() does sc.union([dataRDD] * num_epochs): it takes RDDs (and
            # DStreams), not DataFrames, so the DataFrame goes in as df.rdd (pyspark Rows, which
            # are tuples), as TFoS's own TFEstimator feeds it (dataset.select(cols).rdd).
            seconds["df"].append(timed(lambda: cluster.train(frame.rdd, 1)))
        cluster.shutdown()
        result.update({f"tfos_{k}": rows / statistics.median(v) for k, v in seconds.items()})
        result["raw"]["tfos_train_wall_s"] = seconds
    except Exception as exc:  # TFoS 2.2.5 predates Spark 4 and TF 2.21: say why, keep the other results
        result["tfos_skipped"] = f"TFoS 2.2.5 failed on this stack: {type(exc).__name__}: {exc}"
    return result


def run_spark_niced(nice: int) -> None:
    """Move this process (and so the Spark it starts) into a new session whose autogroup has ``nice``.

    Linux schedules each session's autogroup as one: the CPU is shared between groups first, and a
    niceness only counts within its group. sparkdl starts each SPARK-fed node's supervisor in a
    session of its own, so only a session-wide niceness sets Spark's processes below the nodes'.
    (The InputMode.TENSORFLOW nodes of (a)'s in-memory reference stay in this session: nothing of
    Spark's runs beside them.) A process group leader cannot start a session: it runs again under
    ``setsid --wait``.
    """
    switch = Path("/proc/sys/kernel/sched_autogroup_enabled")
    if not switch.exists() or switch.read_text().strip() != "1":
        raise SystemExit("--spark_nice needs Linux's scheduler autogroups (kernel.sched_autogroup_enabled=1)")
    if os.getsid(0) != os.getpid():
        try:
            os.setsid()
        except PermissionError:  # a process group leader, e.g. started by an interactive shell
            os.execvp("setsid", ["setsid", "--wait", sys.executable, *sys.argv])
    Path("/proc/self/autogroup").write_text(str(nice))


def main() -> None:
    """Run (a)-(d), print the table and ratios, write JSON if asked."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rows", type=int, default=60_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--batch", type=int, default=256, help="global batch (as_dataset's batch_size)")
    parser.add_argument("--epochs", type=int, default=3, help="epochs of the fits in (a)")
    parser.add_argument("--cache_epochs", type=int, default=4, help="epochs of (b) and (c)")
    parser.add_argument("--tfos_rows", type=int, default=20_000, help="rows of (d), for both libraries")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument(
        "--fit",
        choices=("all_epochs", "per_epoch"),
        default="all_epochs",
        help="(a)'s fit, the same on both sides: one dataset iterator for all epochs "
        "(as_dataset(all_epochs=True) / dataset.repeat(), with steps_per_epoch), or one per epoch",
    )
    parser.add_argument(
        "--consume",
        choices=("eager", "graph"),
        default="eager",
        help="how (b)'s nodes read as_dataset: a Python for loop (and (c) samples RSS per "
        "batch), or Dataset.reduce in TensorFlow's runtime (no (c))",
    )
    parser.add_argument("--parts", default="abcd", help="which measurements to run, e.g. 'ab' ((c) comes with (b))")
    parser.add_argument(
        "--spark_nice",
        type=int,
        help="a diagnostic (Linux, scheduler autogroups): run Spark (this driver, its JVMs and Python "
        "workers) in a session of its own whose autogroup has this nice value; the SPARK-fed nodes, "
        "each started in a session of its own, keep theirs. With 19, Spark gets the CPU the nodes "
        "leave, which sets the nodes' own cost apart from Spark's on shared cores",
    )
    opts = parser.parse_args()
    if opts.spark_nice is not None:
        run_spark_niced(opts.spark_nice)
    spark = start_local_spark("sparkdl-train-feed-bench")
    sc = spark.sparkContext
    sc.addPyFile(str(Path(__file__)))
    cache_log = CacheLog()
    feeding_log = logging.getLogger("sparkdl.driver.feeding")
    feeding_log.setLevel(logging.INFO)
    feeding_log.addHandler(cache_log)

    frame = make_frame(spark, opts.rows, opts.partitions).cache()
    frame.count()  # materialised in Spark's cache before any timing
    warm_frame = make_frame(spark, 4 * opts.batch, 2).cache()  # for the nodes' untimed first call
    warm_frame.count()
    fits = measure_fits(sc, opts, frame, warm_frame, Path(tempfile.mkdtemp()), cache_log) if "a" in opts.parts else None
    epochs = (
        measure_epochs(sc, opts, frame, warm_frame, Path(tempfile.mkdtemp()), cache_log)
        if set("bc") & set(opts.parts)
        else None
    )
    rows_feed = measure_row_feed(sc, spark, opts) if "d" in opts.parts else None
    ordered = (
        measure_deterministic(sc, opts, frame, warm_frame, Path(tempfile.mkdtemp())) if "e" in opts.parts else None
    )
    spark.stop()
    report(opts, fits, epochs, rows_feed, cache_log, ordered)


def report(
    opts,
    fits: dict | None,
    epochs: dict | None,
    rows_feed: dict | None,
    cache_log: CacheLog,
    ordered: dict | None = None,
) -> None:
    """Print the table and the ratios of the parts that ran; write them as JSON if asked."""
    batch_mib = opts.batch * (FEATURES * 4 + 8) / MIB
    fed_rows = opts.rows * opts.epochs
    table, ratios, notes, raw = [], {}, [], {}
    if fits:
        table += [
            ("(a) MWMS fit fed by cluster.train, cache=True", fits["cached"], "rows/s"),
            ("(a)   wall time of cluster.train (cache=True)", fits["wall_cached"], "s"),
            ("(a)   same, rows x epochs / wall time (cache=True)", fed_rows / fits["wall_cached"], "rows/s"),
            ("(a)   epochs 2..N only (from the cache), median", fits["cached_later"], "rows/s"),
            ("(a)   epoch 1 only (fed by Spark), median", fits["cached_first"], "rows/s"),
            ("(a) MWMS fit fed by cluster.train, cache=False", fits["uncached"], "rows/s"),
            ("(a)   wall time of cluster.train (cache=False)", fits["wall_uncached"], "s"),
            ("(a)   same, rows x epochs / wall time (cache=False)", fed_rows / fits["wall_uncached"], "rows/s"),
            ("(a) MWMS fit, in-memory tf.data (InputMode.TENSORFLOW)", fits["memory"], "rows/s"),
        ]
        ratios["(a) SPARK-fed fit / in-memory fit, cache=True (goal >= 0.9)"] = fits["cached"] / fits["memory"]
        ratios["(a)   epochs 2..N only (from the cache) / in-memory"] = fits["cached_later"] / fits["memory"]
        ratios["(a)   epoch 1 only (fed by Spark) / in-memory"] = fits["cached_first"] / fits["memory"]
        ratios["(a) SPARK-fed fit / in-memory fit, cache=False (before the cache)"] = fits["uncached"] / fits["memory"]
        notes.append(f"epoch cache used by (a)'s {fits['cache_used']} cache=True calls")
        raw["a"] = fits["raw"]
    if epochs:
        table += [
            (f"(b) as_dataset pass ({opts.consume}), epoch 1 (fed from Spark)", epochs["first"], "rows/s"),
            (f"(b) as_dataset pass ({opts.consume}), epochs 2..N (median, from the cache)", epochs["later"], "rows/s"),
        ]
        ratios[f"(b) epochs 2..N / epoch 1, {opts.consume} (goal >= 10)"] = epochs["later"] / epochs["first"]
        if opts.consume == "eager":
            table += [
                ("(c) node RSS growth while serving epochs 2..N (max)", epochs["rss_growth_mib"], "MiB"),
                ("(c)   feed_queue_bytes (default)", 64.0, "MiB"),
                ("(c)   one batch of features + labels", batch_mib, "MiB"),
            ]
            ratios["(c) RSS growth / (feed_queue_bytes + 4 batches) (goal <= 1)"] = epochs["rss_growth_mib"] / (
                64 + 4 * batch_mib
            )
        notes.append(f"epoch cache used by (b)'s {epochs['cache_used']} calls")
        raw["b_c"] = epochs["raw"]
    if rows_feed:
        table += [
            ("(d) sparkdl first-epoch feed, next_batch rows, RDD", rows_feed["sparkdl_rdd"], "rows/s"),
            ("(d) sparkdl first-epoch feed, next_batch rows, DataFrame", rows_feed["sparkdl_df"], "rows/s"),
        ]
        if "tfos_rdd" in rows_feed:
            table += [
                ("(d) TFoS 2.2.5 first-epoch feed, next_batch rows, RDD", rows_feed["tfos_rdd"], "rows/s"),
                ("(d) TFoS 2.2.5 first-epoch feed, DataFrame as df.rdd", rows_feed["tfos_df"], "rows/s"),
            ]
            ratios["(d) sparkdl / TFoS, RDD"] = rows_feed["sparkdl_rdd"] / rows_feed["tfos_rdd"]
            ratios["(d) sparkdl / TFoS, DataFrame"] = rows_feed["sparkdl_df"] / rows_feed["tfos_df"]
        if "tfos_skipped" in rows_feed:
            notes.append(f"(d) TFoS skipped: {rows_feed['tfos_skipped']}")
        raw["d"] = rows_feed["raw"]
    if ordered:
        table += [
            ("(e) epoch 1, streaming (deterministic=False)", ordered["streaming_first"], "rows/s"),
            ("(e) epoch 1, deterministic=True", ordered["deterministic_first"], "rows/s"),
            ("(e) wall time of cluster.train, streaming", ordered["wall_streaming"], "s"),
            ("(e) wall time of cluster.train, deterministic=True", ordered["wall_deterministic"], "s"),
        ]
        ratios["(e) epoch 1 rate, deterministic / streaming"] = (
            ordered["deterministic_first"] / ordered["streaming_first"]
        )
        ratios["(e) call wall time, deterministic / streaming"] = (
            ordered["wall_deterministic"] / ordered["wall_streaming"]
        )
        raw["e"] = ordered["raw"]
    notes += [f"driver: {message}" for message in cache_log.refused]

    from results_json import finish  # here: executors import this module without it

    finish(
        opts,
        f"local-cluster[2,1,1024], {os.cpu_count()} cores, 2 TF nodes, {opts.rows} rows x {FEATURES} float32 "
        f"+ label, {opts.partitions} partitions, global batch {opts.batch}, (a) {opts.epochs} epochs, (b)/(c) "
        f"{opts.cache_epochs} epochs, (d) {opts.tfos_rows} rows, medians of {opts.runs} runs",
        table,
        ratios,
        notes,
        raw,
        lambda unit: 1 if unit in ("s", "MiB") else 0,
    )


if __name__ == "__main__":
    main()
