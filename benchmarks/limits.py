"""At the limits (issue 43): four figures, before (7147caa) and after, medians of 3 in one script.

Measures each figure on two trees of sparkdl: BEFORE (a checkout of the commit before the work,
``--before DIR`` with its own ``.venv``, or ``--before-commit REF``, extracted here with ``git
archive`` as ``feed_throughput.py --sparkdl-commit`` does) and AFTER (this tree). Each figure comes
from the existing benchmarks, run as subprocesses with ``--json`` and narrow options, each side
with its own tree's script, interpreter and sparkdl (the tree's root first on ``PYTHONPATH``, the
executors and nodes included), so a figure means here what it means in docs/benchmarks-method.md:

1. Feed of TFoS-style row tuples (``TFNode.DataFeed.next_batch``, 784 float32 a row) from a
   cached DataFrame and from a cached RDD, and the ratio DataFrame / RDD: ``train_feed.py`` (d).
   Beside it, Spark's own ``mapInArrow`` pass over that cached frame (a count in the task), with
   ``feed_throughput.py``'s ``make_frame`` and ``source_scan_seconds`` of the same tree.
2. Epoch 1: ``train_feed.py`` (a), the default ``cluster.train`` (``cache=True``) + MWMS
   ``model.fit`` at 3 epochs on 2 nodes against the same fit in memory; and epoch 1 alone.
3. Cached epochs: ``train_feed.py`` (b), nodes iterating ``as_dataset`` (4 epochs): epoch 2's
   time against the mean of epochs 3..N (from the JSON's per-node epoch times, the slower node's
   each epoch, as (b) counts them), and epochs 2..N's rate against epoch 1's.
4. Scoring: ``inference_udf.py``'s ``sparkdl mapInArrow`` against one process in memory
   (``model.predict``) for the CNN, and against ``spark scan + transfer only`` for the MLP.
   After 7147caa also the packed variants (AFTER only: the frame written with ``pack_tensors``,
   read with ``Packed``; and with ``packed_outputs`` too) against their own scan and against the
   ``array<float>`` scan: whether packing beats Spark's array conversion. They run in a session
   of their own (``--packed only``, the others ``--packed skip``): in one session with the rest
   they slowed the others, Spark's own scan-only pass included.

Every subprocess runs one timed run (``--runs 1``) after its own warm-up; the script repeats
them ``--repetitions`` times (3), BEFORE and AFTER alternating within each repetition (which side
goes first alternates too), and reports medians; ratios are of the medians, as in the other
scripts. Each subprocess gets a fresh ``TMPDIR``, removed after it. Full size: about 40 minutes on
2 quiet cores; ``--quick``: tiny sizes, one repetition, a few minutes, figures meaningless.

    .venv/bin/python benchmarks/limits.py --before /work/wt/before [--json results.json]
    .venv/bin/python benchmarks/limits.py --before-commit 7147caa
    .venv/bin/python benchmarks/limits.py --before-commit 7147caa --quick
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent
ROOT = BENCHMARKS.parent
sys.path.insert(0, str(BENCHMARKS))
import feed_throughput  # noqa: E402
import machine  # noqa: E402
import run_all  # noqa: E402
from results_json import print_report, write_results  # noqa: E402

#: The commit before issue 43's work: BEFORE when neither --before nor --before-commit is given.
BEFORE_COMMIT = "7147caa"
#: Seconds one subprocess may run before it (its Spark and TF processes with it) is stopped.
STEP_TIMEOUT_S = 1800
#: inference_udf.py's variant names (``--variants`` takes substrings of them).
ARROW, SCAN, SINGLE = "sparkdl mapInArrow", "spark scan + transfer only (no model)", "single process model.predict"
#: The packed-binary variants (``Packed`` inputs, ``packed_outputs``): after 7147caa only.
PACKED_IN, PACKED_OUT = "sparkdl mapInArrow, packed binary", "sparkdl mapInArrow, packed binary in and out"
PACKED_SCAN = "spark scan + transfer only, mapInArrow, packed binary (no model)"
#: train_feed.py (d)'s and (a)'s measurement names, the same at 7147caa and since.
FEED_DF = "(d) sparkdl first-epoch feed, next_batch rows, DataFrame"
FEED_RDD = "(d) sparkdl first-epoch feed, next_batch rows, RDD"
FIT_FED = "(a) MWMS fit fed by cluster.train, cache=True"
FIT_FIRST = "(a)   epoch 1 only (fed by Spark), median"
FIT_MEMORY = "(a) MWMS fit, in-memory tf.data (InputMode.TENSORFLOW)"
PASS_FIRST = "(b) as_dataset pass (eager), epoch 1 (fed from Spark)"
PASS_CACHED = "(b) as_dataset pass (eager), epochs 2..N (median, from the cache)"

#: Run in a side's interpreter: Spark's mapInArrow pass alone over the cached frame of (d), with
#: that tree's feed_throughput.py. argv: its benchmarks folder, rows, partitions, the JSON to write.
SCAN_CODE = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import feed_throughput as bench
spark = bench.start_local_spark("sparkdl-limits-scan")
frame = bench.make_frame(spark, int(sys.argv[2]), int(sys.argv[3])).cache()
rows = frame.count()
bench.source_scan_seconds(frame)  # untimed: the Python workers start
seconds = bench.source_scan_seconds(frame)
spark.stop()
Path(sys.argv[4]).write_text(json.dumps({"rows": rows, "seconds": seconds}))
"""


@dataclass(frozen=True)
class Side:
    """One tree measured: its root (first on PYTHONPATH), the interpreter that runs its scripts."""

    name: str
    root: Path
    python: str
    commit: str | None

    def env(self, tmpdir: Path) -> dict[str, str]:
        """The environment of its subprocesses: its sparkdl first, its interpreter on the executors."""
        path = os.pathsep.join(filter(None, [str(self.root), os.environ.get("PYTHONPATH")]))
        return dict(
            os.environ,
            PYTHONPATH=path,
            PYSPARK_PYTHON=self.python,
            PYSPARK_DRIVER_PYTHON=self.python,
            TMPDIR=str(tmpdir),
        )


@dataclass(frozen=True)
class Sizes:
    """The sizes of the steps (the defaults: the scripts' own); what is measured stays fixed."""

    train_rows: int = 60_000  # train_feed.py --rows: (a) and (b)
    feed_rows: int = 20_000  # train_feed.py --tfos_rows: (d), and the scan's frame
    cache_epochs: int = 4  # train_feed.py --cache_epochs: (b)
    inference_rows: int = 200_000  # inference_udf.py --rows
    partitions: int = 8  # both scripts' default

    def train_feed_args(self) -> tuple[str, ...]:
        """train_feed.py's options: (a) at 3 epochs, (b) and (d), one timed run each."""
        return _flags(
            {
                "--parts": "abd",
                "--runs": 1,
                "--epochs": 3,
                "--rows": self.train_rows,
                "--tfos_rows": self.feed_rows,
                "--cache_epochs": self.cache_epochs,
                "--partitions": self.partitions,
            }
        )

    def inference_args(self) -> tuple[str, ...]:
        """inference_udf.py's options: both models, mapInArrow and the scan (and the single process), one timed run."""
        return _flags(
            {
                "--runs": 1,
                "--models": "mlp,cnn",
                # substrings, comma-separated: ARROW selects PACKED_IN and PACKED_OUT too; the packed scan's
                # name has commas of its own, so its tail selects it
                "--variants": f"{ARROW},{SCAN},{PACKED_SCAN.rsplit(', ', 1)[-1]}",
                "--rows": self.inference_rows,
                "--partitions": self.partitions,
            }
        )


def _flags(options: dict) -> tuple[str, ...]:
    """``{"--rows": 10}`` as ``("--rows", "10")``."""
    return tuple(str(part) for option in options.items() for part in option)


FULL = Sizes()
QUICK = Sizes(train_rows=6000, feed_rows=2000, cache_epochs=3, inference_rows=2000)


@dataclass(frozen=True)
class Figure:
    """One line of the table: a median quantity, or the ratio of two (``ratio``)."""

    name: str
    unit: str  # "rows/s", "s", or "ratio"
    quantity: str = ""
    ratio: tuple[str, str] = ()
    target: str = ""


FIGURES = (
    Figure("(1) feed from a cached DataFrame, next_batch row tuples", "rows/s", "feed_df"),
    Figure("(1) feed from a cached RDD, next_batch row tuples", "rows/s", "feed_rdd"),
    Figure("(1) DataFrame / RDD feed", "ratio", ratio=("feed_df", "feed_rdd"), target="≥ 1"),
    Figure("(1) Spark's mapInArrow pass alone over that cached DataFrame", "rows/s", "scan_df"),
    Figure("(1) DataFrame feed / Spark's mapInArrow pass alone", "ratio", ratio=("feed_df", "scan_df")),
    Figure("(2) MWMS fit, 3 epochs, 2 nodes, fed by cluster.train (cache=True)", "rows/s", "fit_fed"),
    Figure("(2) the same fit in memory (InputMode.TENSORFLOW)", "rows/s", "fit_memory"),
    Figure("(2) fit fed by cluster.train / in memory", "ratio", ratio=("fit_fed", "fit_memory"), target="≥ 0.9"),
    Figure("(2) epoch 1 alone (fed by Spark) / in memory", "ratio", ratio=("fit_first", "fit_memory")),
    Figure("(3) as_dataset pass, epoch 1 (fed by Spark)", "rows/s", "pass_first"),
    Figure("(3) epoch 2 (from the cache)", "s", "epoch2_s"),
    Figure("(3) epochs 3..N (from the cache), mean", "s", "later_s"),
    Figure("(3) epoch 2 / epochs 3..N, time", "ratio", ratio=("epoch2_s", "later_s"), target="≤ 1"),
    Figure("(3) cached epochs (2..N) / epoch 1, rows/s", "ratio", ratio=("pass_cached", "pass_first"), target="≥ 10"),
    Figure("(4) CNN: sparkdl mapInArrow", "rows/s", "cnn_arrow"),
    Figure("(4) CNN: one process in memory (model.predict)", "rows/s", "cnn_single"),
    Figure("(4) CNN: mapInArrow / one process", "ratio", ratio=("cnn_arrow", "cnn_single"), target="≥ 0.95"),
    Figure("(4) MLP: sparkdl mapInArrow", "rows/s", "mlp_arrow"),
    Figure("(4) MLP: Spark's scan + transfer only (no model)", "rows/s", "mlp_scan"),
    Figure("(4) MLP: mapInArrow / scan + transfer only", "ratio", ratio=("mlp_arrow", "mlp_scan"), target="≥ 0.9"),
    Figure("(4) MLP: one process in memory (model.predict)", "rows/s", "mlp_single"),
    Figure("(4) MLP: mapInArrow / one process", "ratio", ratio=("mlp_arrow", "mlp_single")),
    # Packed binary tensor columns (after 7147caa only): the input, and the input and the output.
    Figure("(4) MLP, packed input: sparkdl mapInArrow", "rows/s", "mlp_packed"),
    Figure("(4) MLP, packed input: Spark's scan + transfer only", "rows/s", "mlp_packed_scan"),
    Figure(
        "(4) MLP, packed input: mapInArrow / its scan + transfer only", "ratio", ratio=("mlp_packed", "mlp_packed_scan")
    ),
    Figure(
        "(4) MLP, packed input: mapInArrow / array<float> scan + transfer only",
        "ratio",
        ratio=("mlp_packed", "mlp_scan"),
    ),
    Figure("(4) MLP, packed input and output: sparkdl mapInArrow", "rows/s", "mlp_packed_out"),
    Figure("(4) CNN, packed input: sparkdl mapInArrow", "rows/s", "cnn_packed"),
    Figure("(4) CNN, packed input: mapInArrow / one process", "ratio", ratio=("cnn_packed", "cnn_single")),
)


# -- what each step's report yields --


def _value(report: dict, name: str) -> float:
    try:
        return float(report["measurements"][name]["value"])
    except KeyError:
        raise ValueError(f"the report has no measurement {name!r}") from None


def train_feed_quantities(report: dict) -> dict[str, float]:
    """Figures 1 (the feeds), 2 and 3 from one ``train_feed.py --parts abd --runs 1`` report."""
    per_node = report["raw"]["b_c"]["per_node"]  # each node's runs, each with its epochs' seconds
    runs = list(zip(*per_node))
    if len(runs) != 1:
        raise ValueError(f"expected one run of (b), got {len(runs)}")
    epochs = [max(seconds) for seconds in zip(*(node["epoch_seconds"] for node in runs[0]))]  # the slower node's
    if len(epochs) < 3:
        raise ValueError(f"(b) ran {len(epochs)} epochs: epoch 2 against epochs 3..N needs 3 or more")
    return {
        "feed_df": _value(report, FEED_DF),
        "feed_rdd": _value(report, FEED_RDD),
        "fit_fed": _value(report, FIT_FED),
        "fit_first": _value(report, FIT_FIRST),
        "fit_memory": _value(report, FIT_MEMORY),
        "pass_first": _value(report, PASS_FIRST),
        "pass_cached": _value(report, PASS_CACHED),
        "epoch2_s": epochs[1],
        "later_s": statistics.mean(epochs[2:]),
    }


def _rates(report: dict) -> dict[tuple[str, str], float]:
    """An ``inference_udf.py`` report's rows/s by (model, variant)."""
    return {(row["model"], row["variant"]): float(row["rows_per_s"]) for row in report["raw"]["results"]}


def inference_quantities(report: dict) -> dict[str, float]:
    """Figure 4 from one ``inference_udf.py`` report (MLP and CNN, mapInArrow and the scan)."""
    rates = _rates(report)
    wanted = {
        "cnn_arrow": ("cnn", ARROW),
        "cnn_single": ("cnn", SINGLE),
        "mlp_arrow": ("mlp", ARROW),
        "mlp_scan": ("mlp", SCAN),
        "mlp_single": ("mlp", SINGLE),
    }
    missing = [f"{model}: {variant}" for model, variant in wanted.values() if (model, variant) not in rates]
    if missing:
        raise ValueError(f"the report has no rows for {missing}")
    return {**{key: rates[where] for key, where in wanted.items()}, **packed_quantities(report)}


def packed_quantities(report: dict) -> dict[str, float]:
    """Figure 4's packed variants from an ``inference_udf.py --packed only`` report."""
    rates = _rates(report)
    wanted = {
        "mlp_packed": ("mlp", PACKED_IN),
        "mlp_packed_scan": ("mlp", PACKED_SCAN),
        "mlp_packed_out": ("mlp", PACKED_OUT),
        "cnn_packed": ("cnn", PACKED_IN),
    }
    return {key: rates[where] for key, where in wanted.items() if where in rates}


def scan_quantities(result: dict) -> dict[str, float]:
    """Figure 1's reference from the scan step's JSON."""
    return {"scan_df": result["rows"] / result["seconds"]}


def figures(repetitions: dict[str, list[dict[str, float]]]) -> list[dict]:
    """Each figure's median (or ratio of medians) per side: ``[{figure, unit, target, before, after}]``;
    None where a side has no such quantity (the packed variants before they existed)."""
    medians = {
        side: {key: statistics.median(rep[key] for rep in reps) for key in reps[0]}
        for side, reps in repetitions.items()
    }
    rows = []
    for figure in FIGURES:
        row = {"figure": figure.name, "unit": figure.unit, "target": figure.target}
        for side, values in medians.items():
            keys = figure.ratio or (figure.quantity,)
            if any(key not in values for key in keys):
                row[side] = None
            elif figure.ratio:
                numerator, denominator = (values[key] for key in figure.ratio)
                row[side] = numerator / denominator
            else:
                row[side] = values[figure.quantity]
        rows.append(row)
    return rows


# -- running the steps --


@dataclass
class Step:
    """One benchmark subprocess of one side: the command (its JSON path last) and how to read it."""

    name: str
    command: list[str]
    read: Callable[[dict], dict[str, float]]  # the report -> its quantities
    durations: list[float] = field(default_factory=list)


def steps(side: Side, sizes: Sizes, out: Path) -> list[Step]:
    """A side's steps (three; four where its inference_udf.py scores packed frames apart), writing
    their JSON to ``out``."""
    scripts = side.root / "benchmarks"
    packed = "--packed" in (scripts / "inference_udf.py").read_text()
    return [
        Step(
            "train_feed",
            [
                side.python,
                str(scripts / "train_feed.py"),
                *sizes.train_feed_args(),
                *("--json", str(out / "train_feed.json")),
            ],
            train_feed_quantities,
        ),
        Step(
            "scan",
            [
                side.python,
                "-c",
                SCAN_CODE,
                str(scripts),
                str(sizes.feed_rows),
                str(sizes.partitions),
                str(out / "scan.json"),
            ],
            scan_quantities,
        ),
        Step(
            "inference_udf",
            [
                side.python,
                str(scripts / "inference_udf.py"),
                *sizes.inference_args(),
                *(("--packed", "skip") if packed else ()),
                *("--json", str(out / "inference_udf.json")),
            ],
            inference_quantities,
        ),
        # Scored in the same session, the packed variants (a second frame written, three more
        # variants warmed) slowed the others there, Spark's own scan included: a session of their own.
        *(
            [
                Step(
                    "inference_udf packed",
                    [
                        side.python,
                        str(scripts / "inference_udf.py"),
                        *sizes.inference_args(),
                        *("--packed", "only"),
                        *("--json", str(out / "inference_udf_packed.json")),
                    ],
                    packed_quantities,
                )
            ]
            if packed
            else []
        ),
    ]


def run_step(side: Side, step: Step, scratch: Path, timeout: float, where: str = "") -> dict[str, float]:
    """Run ``step`` of ``side`` in a fresh TMPDIR; its quantities. SystemExit when it fails."""
    tmpdir = Path(tempfile.mkdtemp(prefix=f"{side.name}-{step.name}-", dir=scratch))
    report = Path(step.command[-1])
    report.unlink(missing_ok=True)
    shown = shlex.join(step.command[:2] + ["SCAN_CODE", *step.command[3:]] if step.command[1] == "-c" else step.command)
    print(f"\n== limits: {where}{side.name}: {step.name}: {shown}", flush=True)
    started = time.perf_counter()
    try:
        failure = run_all.run_bounded(step.command, timeout, cwd=side.root, env=side.env(tmpdir))
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    step.durations.append(round(time.perf_counter() - started, 1))
    if failure is None and not report.exists():
        failure = "it wrote no JSON"
    if failure:
        raise SystemExit(f"limits: {side.name} {step.name} failed: {failure}")
    return step.read(json.loads(report.read_text()))


def check_sparkdl(side: Side, scratch: Path) -> None:
    """Refuse a side whose interpreter would import another tree's sparkdl."""
    out = subprocess.run(
        [side.python, "-c", "import sparkdl; print(sparkdl.__file__)"],
        cwd=side.root,
        env=side.env(scratch),
        capture_output=True,
        text=True,
        timeout=300,
    )
    found = Path(out.stdout.strip() or "/").resolve()
    if out.returncode != 0 or not found.is_relative_to(side.root.resolve()):
        raise SystemExit(
            f"limits: {side.name}: {side.python} imports sparkdl from {found} ({out.stderr.strip()[-300:]}), "
            f"not from {side.root}"
        )


def measure(sides: list[Side], sizes: Sizes, repetitions: int, scratch: Path, timeout: float) -> dict:
    """Every step of every side, ``repetitions`` times, alternating: per-repetition quantities and durations."""
    plans = {side.name: steps(side, sizes, scratch / side.name) for side in sides}
    for side in sides:
        (scratch / side.name).mkdir(parents=True, exist_ok=True)
        check_sparkdl(side, scratch)
    quantities: dict[str, list[dict]] = {side.name: [] for side in sides}
    for repetition in range(repetitions):
        order = sides if repetition % 2 == 0 else sides[::-1]  # who goes first alternates too
        found: dict[str, dict] = {side.name: {} for side in sides}
        for index in range(max(len(plan) for plan in plans.values())):
            for side in order:
                if index < len(plans[side.name]):  # a side without the packed step has one fewer
                    where = f"repetition {repetition + 1}/{repetitions}, "
                    found[side.name].update(run_step(side, plans[side.name][index], scratch, timeout, where))
        for side in sides:
            quantities[side.name].append(found[side.name])
    durations = {name: {step.name: step.durations for step in plan} for name, plan in plans.items()}
    return {"repetitions": quantities, "durations_s": durations}


# -- the sides, the options, the report --


def before_side(opts, scratch: Path) -> Side:
    """BEFORE: the checkout ``--before`` names (its ``.venv`` if it has one), or ``--before-commit`` extracted."""
    if opts.before:
        root = opts.before.resolve()
        for needed in ("sparkdl", "benchmarks/train_feed.py", "benchmarks/inference_udf.py"):
            if not (root / needed).exists():
                raise SystemExit(f"limits: --before {root} has no {needed}: not a sparkdl checkout")
        venv = root / ".venv" / "bin" / "python"
        return Side("before", root, str(venv) if venv.exists() else sys.executable, machine.git_commit(root))
    commit = opts.before_commit
    short = subprocess.run(
        ["git", "rev-parse", "--short", f"{commit}^{{commit}}"], cwd=ROOT, capture_output=True, text=True
    )
    if short.returncode != 0:
        raise SystemExit(f"limits: --before-commit {commit}: not a commit of this repository")
    root = feed_throughput.checkout_at(commit, "sparkdl", "benchmarks")
    shutil.move(str(root), scratch / "before-tree")  # removed with the scratch folder
    return Side("before", scratch / "before-tree", sys.executable, short.stdout.strip())


def parse_args(argv=None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--before", type=Path, metavar="DIR", help="BEFORE: a checkout with its own .venv")
    where.add_argument(
        "--before-commit",
        metavar="REF",
        help=f"BEFORE: this commit, extracted with git archive, on this interpreter (default {BEFORE_COMMIT})",
    )
    parser.add_argument("--repetitions", type=int, help="alternating repetitions (default 3; --quick: 1)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one repetition: a smoke run")
    parser.add_argument("--timeout", type=float, default=STEP_TIMEOUT_S, help="seconds one subprocess may run")
    parser.add_argument("--json", help="also write the results to this file")
    opts = parser.parse_args(argv)
    if not opts.before:
        opts.before_commit = opts.before_commit or BEFORE_COMMIT
    if opts.repetitions is None:
        opts.repetitions = 1 if opts.quick else 3
    if opts.repetitions < 1:
        parser.error("--repetitions must be 1 or more")
    return opts


def report(opts, sides: list[Side], sizes: Sizes, measured: dict) -> None:
    """Print the figures; with ``--json``, write them (``raw``: the figures and every repetition)."""
    rows = figures(measured["repetitions"])
    table, ratios = [], {}
    for row in rows:
        for side in sides:
            label = f"{side.name}: {row['figure']}"
            if row[side.name] is None:
                continue  # a quantity this side cannot measure
            if row["unit"] == "ratio":
                ratios[label + (f" (target {row['target']})" if row["target"] else "")] = row[side.name]
            else:
                table.append((label, row[side.name], row["unit"]))
    commits = {side.name: side.commit for side in sides}
    source = f"the checkout {opts.before}" if opts.before else "git archive of the commit, on this interpreter"
    notes = [
        f"before: commit {commits['before']} ({source}); after: commit {commits['after']} (this tree)",
        "each step one timed run after its own warm-up; BEFORE and AFTER alternate within each repetition",
    ]
    header = (
        f"before {commits['before']} against after {commits['after']}, medians of {opts.repetitions} "
        f"alternating repetitions, {os.cpu_count()} cores"
    )
    print_report(header, table, ratios, notes, lambda unit: 2 if unit == "s" else 0)
    if opts.json:
        config = {
            "repetitions": opts.repetitions,
            "quick": opts.quick,
            "before": str(opts.before) if opts.before else None,
            "before_commit": commits["before"],
            "after_commit": commits["after"],
            "train_feed": " ".join(sizes.train_feed_args()),
            "inference_udf": " ".join(sizes.inference_args()),
            "scan_rows": sizes.feed_rows,
            "cores": os.cpu_count(),
            "master": "local-cluster[2,1,1024]",
        }
        write_results(
            opts.json, config=config, table=table, ratios=ratios, notes=notes, raw={"figures": rows, **measured}
        )


def main(argv=None) -> None:
    """Measure both sides and report."""
    opts = parse_args(argv)
    sizes = QUICK if opts.quick else FULL
    scratch = Path(tempfile.mkdtemp(prefix="sparkdl-limits-"))
    try:
        sides = [before_side(opts, scratch), Side("after", ROOT, sys.executable, machine.git_commit())]
        measured = measure(sides, sizes, opts.repetitions, scratch, opts.timeout)
        report(opts, sides, sizes, measured)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
