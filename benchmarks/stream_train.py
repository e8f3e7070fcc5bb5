"""Structured Streaming training (``cluster.train_stream``): throughput against ``cluster.train``, and latency.

All on local-cluster[2,1,1024], 2 TF nodes (InputMode.SPARK), each fitting a small MLP
(``--features`` 64 float32 -> Dense 128 relu -> Dense 10, Adam) under
MultiWorkerMirroredStrategy with global batch ``--batch`` 256. The data are ``--files`` (20)
parquet files of ``--rows_per_file`` (10,000) rows (``x array<float>``, ``y long`` = row % 10),
written once with pyarrow into a template folder; a streaming run lands copies of them (copied into
a staging folder, then ``os.rename``d into the watched folder, so the file source never sees half a
file). Two clusters, one after the other (a node reads either ``feed.micro_batches`` or
``feed.as_dataset``, not both); ``time.time()`` stamps from the driver and the nodes are compared
directly (one machine, one clock).

(a) Throughput, streaming against batch, on the same rows. Streaming cluster: each node runs
    ``for batch in feed.micro_batches(ctx.stream_checkpoint(dir, model=model)):
    model.fit(batch.as_dataset(batch_size, features="x", label="y"), epochs=1)`` (``shuffle`` at its
    default, True, on both sides). One query checkpoint for the whole script: each run lands its
    ``--files`` copies while no query runs, then times ``cluster.train_stream(spark.readStream
    .schema(...).option("maxFilesPerTrigger", k).parquet(watched), checkpoint)`` until
    ``processAllAvailable()`` returns (driver wall: query start, every micro-batch's Spark job,
    feed, fit, checkpoint save and commit), then stops the query; the restarted query continues the
    batch ids and sees only the new files. Runs alternate over ``--max_files`` (1 and 5), after an
    untimed warm-up query per k on 2k files (TF start-up, MWMS set-up, tracing). Batch cluster:
    nodes fit ``feed.as_dataset(batch_size, ...)`` once per call; one untimed warm-up
    ``cluster.train`` on 2 of the files, then ``cluster.train(spark.read.parquet(template), 1)``
    timed on the driver (its row count, feed jobs, fit). rows/s = all rows (files x rows_per_file)
    / driver wall time, and / node fit time (the slowest node's summed ``model.fit`` seconds, its
    micro-batches summed for streaming). Ratio = streaming / batch, per k, medians of ``--runs``.
    Per micro-batch overhead: the wall time per micro-batch not spent fitting; on the nodes, the
    median gap from a node finishing its checkpoint save of one micro-batch to the first rows of the
    next (driver wait and Spark commit, next trigger, file listing, job start, feed), and the
    checkpoint save itself; from Spark's progress reports, triggerExecution - addBatch per
    micro-batch (the engine's own offset/commit logs, listing and planning outside ``foreachBatch``).
(b) Latency from a file landing to a model trained on it, on the streaming cluster after (a): a
    query with maxFilesPerTrigger 1 runs and is idle (``processAllAvailable()`` returned; default
    trigger: Spark polls the folder continuously). ``--landings`` (15) times (after one untimed
    landing): copy a file to the staging folder (untimed), ``os.rename`` it into the watched folder,
    take ``time.time()`` right after the rename returns, then call ``processAllAvailable()``. The
    nodes stamp ``time.time()`` when ``micro_batches`` yields the batch (its first rows are there),
    when ``fit`` returns, and when their ``StreamCheckpoint.save`` of that batch id returns (model +
    batch id on disk; ``micro_batches`` then reports the position, and the driver lets Spark commit).
    Reported, median and p95 over landings: landed -> saved on every node (the later node: the
    model holds the file and a restart would keep it), and landed -> ``processAllAvailable()``
    returned (adds the driver's wait for both positions, Spark's commit, and the trigger that
    finds no newer data); with medians of the parts: landed -> first rows on the later node
    (detection, Spark job, feed), fit, save, saved -> returned. No sleeps: a
    ``processAllAvailable()`` that returns before the landed file's micro-batch is committed (a
    trigger that listed the folder just before the rename) is called again, and counted in raw.

    .venv/bin/python benchmarks/stream_train.py [--runs 3] [--files 20] [--rows_per_file 10000]
                                                [--max_files 1,5] [--landings 15] [--json results.json]
    .venv/bin/python benchmarks/stream_train.py --files 4 --rows_per_file 200 --runs 1 --landings 3   # quick check
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

SCHEMA = "x array<float>, y long"
#: sparkdl clusters here: no progress display, node output stays in the node logs.
SPARKDL_RUN = {"progress": False, "log_to_driver": False}
SHUTDOWN_S = 900
#: Decimals of each unit in the printed table.
DIGITS = {"rows/s": 0, "ms": 1}


# -- node functions (module level: executors get them from this file) --


def _mlp(tf, features: int):
    """Dense 128 relu -> Dense 10 on ``features`` inputs, under MultiWorkerMirroredStrategy."""
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = tf.keras.Sequential(
            [tf.keras.Input((features,)), tf.keras.layers.Dense(128, activation="relu"), tf.keras.layers.Dense(10)]
        )
        model.compile(optimizer="adam", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


class TimedCheckpoint:
    """``ctx.stream_checkpoint``'s checkpoint, stamping each save; writes the micro-batch's record
    (``pending``, filled by the loop body) once the save returns, before ``micro_batches`` reports
    the position to the driver, so the record exists by the time the batch is committed."""

    def __init__(self, checkpoint, path: Path):
        self._checkpoint, self._path = checkpoint, path
        self.pending: dict = {}

    @property
    def last_batch_id(self):
        return self._checkpoint.last_batch_id

    def restore_last(self):
        return self._checkpoint.restore_last()

    def save(self, batch_id: int) -> str:
        started = time.time()
        path = self._checkpoint.save(batch_id)
        record = {**self.pending, "batch": int(batch_id), "save_start": started, "saved": time.time()}
        with open(self._path, "a") as out:
            out.write(json.dumps(record) + "\n")
        self.pending = {}
        return path


def stream_fit(args, ctx):
    """(a) and (b): fit every micro-batch once, stamping its arrival, fit and save."""
    import tensorflow as tf

    model = _mlp(tf, args["features"])
    feed = ctx.get_data_feed()
    path = Path(args["out"], f"stream{ctx.executor_id}.jsonl")
    checkpoint = TimedCheckpoint(ctx.stream_checkpoint(args["model_dir"], model=model), path)
    for batch in feed.micro_batches(checkpoint):
        got = time.time()
        started = time.perf_counter()
        model.fit(batch.as_dataset(args["batch"], features="x", label="y"), epochs=1, verbose=0)
        fit_s = time.perf_counter() - started
        checkpoint.pending = {"rows": batch.rows, "got": got, "fit_s": fit_s, "fit_end": time.time()}


def batch_fit(args, ctx):
    """(a) The reference: one ``model.fit(feed.as_dataset(...))`` per ``cluster.train`` call, the first a warm-up."""
    import tensorflow as tf

    model = _mlp(tf, args["features"])
    feed = ctx.get_data_feed()
    fits = []
    for _ in range(args["fits"] + 1):
        dataset = feed.as_dataset(args["batch"], features="x", label="y")  # waits for the first rows
        rows = feed.steps_per_epoch(1)
        started = time.perf_counter()
        model.fit(dataset, epochs=1, verbose=0)
        fits.append({"rows": rows, "fit_s": time.perf_counter() - started})
    Path(args["out"], f"batch{ctx.executor_id}.json").write_text(json.dumps(fits[1:]))


# -- driver --


def write_templates(folder: Path, files: int, rows: int, features: int) -> list[Path]:
    """``files`` parquet files of ``rows`` random rows each (pyarrow, on the driver)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True)
    paths = []
    for index in range(files):
        values = np.random.default_rng(index).random((rows, features), dtype=np.float32)
        offsets = pa.array(np.arange(0, values.size + 1, features, dtype=np.int32))
        x = pa.ListArray.from_arrays(offsets, pa.array(values.reshape(-1)))
        y = pa.array(np.arange(index * rows, (index + 1) * rows, dtype=np.int64) % 10)
        paths.append(folder / f"part-{index:03d}.parquet")
        pq.write_table(pa.table({"x": x, "y": y}), paths[-1])
    return paths


class Landing:
    """Copies template files into the watched folder: written in staging, then renamed into place."""

    def __init__(self, work: Path, templates: list[Path]):
        self.templates, self.staging, self.watched = templates, work / "staging", work / "watched"
        self.staging.mkdir()
        self.watched.mkdir()
        self._names = itertools.count()

    def stage(self, template: Path) -> Path:
        staged = self.staging / f"{next(self._names):05d}-{template.name}"
        shutil.copyfile(template, staged)
        return staged

    def land(self, staged: Path) -> float:
        """Rename ``staged`` into the watched folder; ``time.time()`` once it is there."""
        os.rename(staged, self.watched / staged.name)
        return time.time()

    def land_files(self, count: int) -> None:
        for index in range(count):
            self.land(self.stage(self.templates[index % len(self.templates)]))


def _progress_field(progress, name: str):
    """A field of a StreamingQueryProgress (an object in PySpark 4, a dict before)."""
    return progress[name] if isinstance(progress, dict) else getattr(progress, name)


def engine_overheads(stream) -> list[float]:
    """Spark's triggerExecution - addBatch (s) of each micro-batch with rows in the query's recent progress."""
    seconds = []
    for progress in stream.recentProgress:
        durations = _progress_field(progress, "durationMs") or {}
        if _progress_field(progress, "numInputRows") and "addBatch" in durations:
            seconds.append((durations["triggerExecution"] - durations["addBatch"]) / 1000)
    return seconds


def wait_until(stream, done, limit_s: float = 600) -> int:
    """``processAllAvailable()`` until ``done(stream.training)``: a call may return early when a trigger
    listed the folder just before the files landed. Returns the number of calls."""
    deadline = time.monotonic() + limit_s
    for calls in itertools.count(1):
        stream.processAllAvailable()
        if done(stream.training):
            return calls
        if time.monotonic() > deadline:
            raise TimeoutError(f"streaming query: {stream.training} after {calls} processAllAvailable() calls")
    raise AssertionError("unreachable")


def node_records(out: Path) -> list[dict[int, dict]]:
    """Each streaming node's records, keyed by micro-batch id."""
    nodes = []
    for path in sorted(out.glob("stream*.jsonl")):
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        nodes.append({record["batch"]: record for record in records})
    return nodes


def measure_stream(spark, sc, opts, ks: list[int], work: Path, templates: list[Path]) -> dict:
    """(a)'s streaming runs and (b)'s landings, on one streaming cluster."""
    from sparkdl import TFCluster

    out = work / "nodes"
    out.mkdir()
    args = {"out": str(out), "model_dir": str(work / "model"), "features": opts.features, "batch": opts.batch}
    cluster = TFCluster.run(sc, stream_fit, args, 2, input_mode=TFCluster.InputMode.SPARK, **SPARKDL_RUN)
    landing = Landing(work, templates)
    query_checkpoint = str(work / "query")
    last = -1  # the last micro-batch id trained so far (ids continue across the restarted queries)

    def query(k: int):
        frame = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", k).parquet(str(landing.watched))
        return cluster.train_stream(frame, query_checkpoint)

    def run_query(k: int, files: int, rows: int) -> dict:
        nonlocal last
        landing.land_files(files)  # while no query runs: every run starts from the same backlog
        started, clock = time.time(), time.perf_counter()
        stream = query(k)
        wait_until(stream, lambda t: t["rows_trained"] >= rows)
        wall = time.perf_counter() - clock
        training, overheads = stream.training, engine_overheads(stream)
        stream.stop()
        first, last = last + 1, training["last_batch_id"]
        return {"k": k, "started": started, "wall_s": wall, "batches": [first, last], "engine_s": overheads, **training}

    rows = opts.files * opts.rows_per_file
    warmups = [run_query(k, 2 * k, 2 * k * opts.rows_per_file) for k in ks]
    runs = [run_query(k, opts.files, rows) for _ in range(opts.runs) for k in ks]

    stream = query(1)  # (b): idle after processAllAvailable, then one file at a time
    stream.processAllAvailable()
    landings = []
    for index in range(opts.landings + 1):
        staged = landing.stage(templates[index % len(templates)])
        landed = landing.land(staged)
        calls = wait_until(stream, lambda t, expected=last + 1: t["last_batch_id"] == expected)
        returned = time.time()
        last += 1
        if index:  # the first is a warm-up
            landings.append({"batch": last, "landed": landed, "returned": returned, "waits": calls})
    stream.stop()
    cluster.shutdown(timeout=SHUTDOWN_S)
    return {"warmups": warmups, "runs": runs, "landings": landings, "nodes": node_records(out)}


def measure_batch(spark, sc, opts, work: Path, templates: list[Path]) -> dict:
    """(a)'s reference: 1-epoch ``cluster.train`` of the template folder, driver wall and node fit times."""
    from sparkdl import TFCluster

    out = work / "batch"
    out.mkdir()
    args = {"out": str(out), "features": opts.features, "batch": opts.batch, "fits": opts.runs}
    cluster = TFCluster.run(sc, batch_fit, args, 2, input_mode=TFCluster.InputMode.SPARK, **SPARKDL_RUN)
    warm = spark.read.schema(SCHEMA).parquet(*(str(p) for p in templates[:2]))
    cluster.train(warm, 1)  # warm-up: TF start-up, MWMS set-up, tracing
    frame = spark.read.schema(SCHEMA).parquet(str(templates[0].parent))
    walls = []
    for _ in range(opts.runs):
        clock = time.perf_counter()
        cluster.train(frame, 1)
        walls.append(time.perf_counter() - clock)
    cluster.shutdown(timeout=SHUTDOWN_S)
    per_node = [json.loads(p.read_text()) for p in sorted(out.glob("batch*.json"))]
    fits = [max(node["fit_s"] for node in run) for run in zip(*per_node)]
    return {"wall_s": walls, "fit_s": fits, "per_node": per_node}


def stream_summary(run: dict, nodes: list[dict[int, dict]]) -> dict:
    """One streaming run's node-side figures: summed fit (slowest node), save, inter-batch gaps."""
    ids = range(run["batches"][0], run["batches"][1] + 1)
    fit = max(sum(node[i]["fit_s"] for i in ids) for node in nodes)
    saves = [node[i]["saved"] - node[i]["save_start"] for node in nodes for i in ids]
    gaps = [min(node[i + 1]["got"] for node in nodes) - max(node[i]["saved"] for node in nodes) for i in ids[:-1]]
    first_rows = max(node[ids[0]]["got"] for node in nodes) - run["started"]
    return {"fit_s": fit, "save_s": saves, "gap_s": gaps, "start_to_first_rows_s": first_rows}


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile, linear between the closest ranks (numpy's default)."""
    import numpy as np

    return float(np.percentile(values, q))


def main() -> None:
    """Run (a) and (b), print the table and ratios, write JSON if asked."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--rows_per_file", type=int, default=10_000)
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--batch", type=int, default=256, help="global batch (as_dataset's batch_size)")
    parser.add_argument("--max_files", default="1,5", help="maxFilesPerTrigger values of (a), comma-separated")
    parser.add_argument("--landings", type=int, default=15, help="files landed one at a time in (b)")
    parser.add_argument("--json", help="also write the results to this file")
    opts = parser.parse_args()
    ks = [int(k) for k in opts.max_files.split(",")]
    sys.path.insert(0, str(Path(__file__).parent))
    from feed_throughput import start_local_spark

    spark = start_local_spark("sparkdl-stream-train-bench")
    sc = spark.sparkContext
    sc.addPyFile(str(Path(__file__)))
    work = Path(tempfile.mkdtemp(prefix="sparkdl-stream-bench-"))
    try:
        templates = write_templates(work / "template", opts.files, opts.rows_per_file, opts.features)
        streaming = measure_stream(spark, sc, opts, ks, work, templates)
        batch = measure_batch(spark, sc, opts, work, templates)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    report(opts, ks, streaming, batch)


def report(opts, ks: list[int], streaming: dict, batch: dict) -> None:
    """Print the table and ratios; write them as JSON if asked."""
    med = statistics.median
    rows = opts.files * opts.rows_per_file
    nodes = streaming["nodes"]
    batch_rate, batch_fit_rate = rows / med(batch["wall_s"]), rows / med(batch["fit_s"])
    table, ratios, notes = [], {}, []
    raw: dict = {"batch": batch, "stream_warmups": streaming["warmups"], "stream_runs": [], "landings": []}
    for k in ks:
        runs = [run for run in streaming["runs"] if run["k"] == k]
        summaries = [stream_summary(run, nodes) for run in runs]
        raw["stream_runs"] += [{**run, "nodes": summary} for run, summary in zip(runs, summaries)]
        wall, fit = med(run["wall_s"] for run in runs), med(s["fit_s"] for s in summaries)
        batches = med(run["batches_trained"] for run in runs)
        gaps = [gap for s in summaries for gap in s["gap_s"]]
        engine = [seconds for run in runs for seconds in run["engine_s"]]
        name = f"(a) streaming, maxFilesPerTrigger={k}"
        start_ms = 1000 * med(s["start_to_first_rows_s"] for s in summaries)
        saves_ms = 1000 * med(x for s in summaries for x in s["save_s"])
        table += [
            (f"{name}: rows / driver wall", rows / wall, "rows/s"),
            (f"{name}: driver wall, train_stream() to processAllAvailable()", wall, "s"),
            (f"{name}: rows / summed node fit time (slowest node)", rows / fit, "rows/s"),
            (f"{name}: wall not spent fitting, per micro-batch", 1000 * (wall - fit) / batches, "ms"),
            (f"{name}: query start to first rows on the nodes", start_ms, "ms"),
        ]
        if gaps:
            table.append(
                (f"{name}: node gap, micro-batch saved to next one's first rows, median", 1000 * med(gaps), "ms")
            )
        if engine:
            table.append(
                (f"{name}: Spark triggerExecution - addBatch per micro-batch, median", 1000 * med(engine), "ms")
            )
        table.append((f"{name}: checkpoint save per micro-batch, median", saves_ms, "ms"))
        ratios[f"(a) streaming / batch rows/s (driver wall), maxFilesPerTrigger={k}"] = (rows / wall) / batch_rate
        ratios[f"(a) streaming / batch rows/s (node fit time), maxFilesPerTrigger={k}"] = (rows / fit) / batch_fit_rate
    table += [
        ("(a) batch cluster.train(spark.read.parquet), 1 epoch: rows / driver wall", batch_rate, "rows/s"),
        ("(a) batch: driver wall of cluster.train", med(batch["wall_s"]), "s"),
        ("(a) batch: rows / node fit time (slowest node)", batch_fit_rate, "rows/s"),
    ]
    parts: dict[str, list[float]] = {key: [] for key in ("saved", "returned", "first_rows", "fit", "save", "commit")}
    for landing in streaming["landings"]:
        records = [node[landing["batch"]] for node in nodes]
        saved = max(r["saved"] for r in records)
        parts["saved"].append(saved - landing["landed"])
        parts["returned"].append(landing["returned"] - landing["landed"])
        parts["first_rows"].append(max(r["got"] for r in records) - landing["landed"])
        parts["fit"].append(max(r["fit_s"] for r in records))
        parts["save"].append(max(r["saved"] - r["save_start"] for r in records))
        parts["commit"].append(landing["returned"] - saved)
        raw["landings"].append({**landing, "nodes": records})
    if streaming["landings"]:
        table += [
            (f"(b) file landed -> {what}, {stat}", 1000 * fn(parts[key]), "ms")
            for key, what in (
                ("saved", "its micro-batch saved on every node"),
                ("returned", "processAllAvailable() returned"),
            )
            for stat, fn in (("median", med), ("p95", lambda v: percentile(v, 95)))
        ]
        table += [
            ("(b)   landed -> first rows on the later node, median", 1000 * med(parts["first_rows"]), "ms"),
            ("(b)   model.fit of the file's micro-batch (slower node), median", 1000 * med(parts["fit"]), "ms"),
            ("(b)   checkpoint save (slower node), median", 1000 * med(parts["save"]), "ms"),
            ("(b)   saved -> processAllAvailable() returned, median", 1000 * med(parts["commit"]), "ms"),
        ]
        ratios["(b) share of landed -> saved spent in model.fit, median"] = med(
            f / s for f, s in zip(parts["fit"], parts["saved"])
        )
        extra = sum(landing["waits"] - 1 for landing in streaming["landings"])
        if extra:
            notes.append(f"(b) processAllAvailable() returned before the landed file's micro-batch {extra} time(s)")
    notes.append(
        f"(a) each run: {opts.files} files x {opts.rows_per_file} rows; streaming micro-batches per run: "
        + ", ".join(f"k={run['k']}: {run['batches_trained']}" for run in streaming["runs"])
    )

    from results_json import finish  # here: executors import this module without it

    finish(
        opts,
        f"local-cluster[2,1,1024], {os.cpu_count()} cores, 2 TF nodes (MWMS), {opts.files} files x "
        f"{opts.rows_per_file} rows x {opts.features} float32 + label, global batch {opts.batch}, "
        f"medians of {opts.runs} runs, {opts.landings} landings",
        table,
        ratios,
        notes,
        raw,
        lambda unit: DIGITS.get(unit, 3),
    )


if __name__ == "__main__":
    main()
