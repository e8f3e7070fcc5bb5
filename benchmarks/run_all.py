"""Run every benchmark, one after another, and rewrite the tables of docs/benchmarks-method.md.

Each section of docs/benchmarks-method.md between ``<!-- generated: NAME -->`` and
``<!-- end generated -->`` is written from the JSON of that section's runs (each script's
``--json`` report, saved as ``benchmarks/results/<run>.json`` with the command, the date, the
machine, the software and the load); the prose around the markers is left as it is. The scripts
run one at a time, never in parallel, since they are timings; a section is saved and rewritten
only when all of its runs succeeded, so the doc always matches the JSON beside it.

    .venv/bin/python benchmarks/run_all.py                         # everything (about 50 min on 2 cores)
    .venv/bin/python benchmarks/run_all.py --only cluster_overhead,feed_memory
    .venv/bin/python benchmarks/run_all.py --from-json benchmarks/results   # re-render only, no runs
    .venv/bin/python benchmarks/run_all.py --quick                 # smoke run, tiny sizes, into a temp copy
    .venv/bin/python benchmarks/run_all.py --list                  # the sections, runs and commands

``--quick`` never writes docs/benchmarks-method.md or benchmarks/results/: its figures mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import machine  # noqa: E402
import render  # noqa: E402

BENCHMARKS = Path(__file__).resolve().parent
ROOT = BENCHMARKS.parent
DEFAULT_DOC = ROOT / "docs" / "benchmarks-method.md"
DEFAULT_RESULTS = BENCHMARKS / "results"
#: Seconds a script may run before it is stopped (with its process group); the longest takes ~25 min.
DEFAULT_TIMEOUT_S = 3600
#: What each saved record holds besides its section and run names (load() checks them).
RECORD_KEYS = frozenset({"label", "script", "command", "started", "duration_s", "load_before", "machine", "report"})
#: How long a run waits for the machine to settle (see wait_for_quiet) before it starts anyway.
SETTLE_WAIT_S = 180
QUICK_TRAIN_FEED = ("--rows", "6000", "--tfos_rows", "2000", "--runs", "1")


@dataclass(frozen=True)
class Run:
    """One script invocation; its results are saved as ``<name>.json``."""

    name: str
    script: str
    args: tuple[str, ...] = ()
    quick_args: tuple[str, ...] = ()
    label: str = "defaults"


@dataclass(frozen=True)
class Section:
    """One generated section of the doc, and the runs its tables come from."""

    name: str
    runs: tuple[Run, ...]


def _sparse_memory_run(name: str, rows: int, read: str, what: str, commit: str | None = None) -> Run:
    """``feed_memory.py`` fed a 2^18-wide sparse column: ``rows`` rows (a tenth for ``--quick``),
    read ``dense`` or ``sparse``, on this checkout or on ``commit``."""
    extra = ("--sparkdl-commit", commit) if commit else ()

    def args(count: int) -> tuple[str, ...]:
        return ("--source", "sparse", "--rows", str(count), "--read", read, *extra)

    return Run(
        name,
        "feed_memory.py",
        args(rows),
        args(max(rows // 100, 400)),
        f"2^18-wide sparse column, {what}",
    )


SECTIONS = (
    Section(
        "train_feed",
        (
            Run("train_feed", "train_feed.py", (), QUICK_TRAIN_FEED, "defaults"),
            Run(
                "train_feed_10_epochs",
                "train_feed.py",
                ("--epochs", "10", "--parts", "a", "--runs", "1"),
                ("--epochs", "2", "--parts", "a", *QUICK_TRAIN_FEED),
                "10 epochs",
            ),
            Run(
                "train_feed_per_epoch",
                "train_feed.py",
                ("--fit", "per_epoch", "--parts", "a", "--runs", "2"),
                ("--fit", "per_epoch", "--parts", "a", "--epochs", "2", *QUICK_TRAIN_FEED),
                "per-epoch iterator",
            ),
            Run(
                "train_feed_graph",
                "train_feed.py",
                ("--consume", "graph", "--parts", "b"),
                ("--consume", "graph", "--parts", "b", "--cache_epochs", "2", *QUICK_TRAIN_FEED),
                "graph-mode read",
            ),
            Run(
                "train_feed_exactly_once",
                "train_feed.py",
                ("--parts", "abe"),
                ("--parts", "e", "--cache_epochs", "2", *QUICK_TRAIN_FEED),
                "exactly-once feed, deterministic epoch 1",
            ),
        ),
    ),
    Section(
        "stream_train",
        (
            Run(
                "stream_train",
                "stream_train.py",
                (),
                ("--files", "4", "--rows_per_file", "200", "--runs", "1", "--landings", "3"),
            ),
        ),
    ),
    Section(
        "feed_throughput",
        (Run("feed_throughput", "feed_throughput.py", (), ("--rows", "4000", "--tfos_rows", "1000", "--runs", "1")),),
    ),
    Section("inference_udf", (Run("inference_udf", "inference_udf.py", (), ("--rows", "2000", "--runs", "1")),)),
    Section(
        "cluster_overhead", (Run("cluster_overhead", "cluster_overhead.py", (), ("--runs", "1", "--epochs", "1")),)
    ),
    Section("feed_memory", (Run("feed_memory", "feed_memory.py", (), ("--rows", "20000")),)),
    Section(
        "columns",
        (
            Run("image_train", "image_train.py", (), ("--images", "300", "--runs", "1", "--epochs", "2"), "images"),
            _sparse_memory_run(
                "sparse_memory_before", 4000, "dense", "before (7eaae0c: made dense on arrival)", "7eaae0c"
            ),
            _sparse_memory_run("sparse_memory_dense_read", 4000, "dense", "read dense (next_batch)"),
            _sparse_memory_run("sparse_memory", 4000, "sparse", "read as tf.SparseTensor"),
            _sparse_memory_run("sparse_memory_200k", 200000, "sparse", "200,000 rows, read as tf.SparseTensor"),
        ),
    ),
    Section(
        "keras_estimator",
        (
            Run(
                "keras_estimator",
                "keras_estimator.py",
                (),
                ("--runs", "1", "--epochs", "1", "--repeat", "2", "--side_epochs", "2"),
            ),
        ),
    ),
    Section(
        "keras3_train",
        (Run("keras3_train", "keras3_train.py", (), ("--runs", "1", "--rows", "3000", "--epochs", "1")),),
    ),
    Section("storage", (Run("storage", "storage.py", (), ("--quick",)),)),
    Section(
        "limits",
        (
            Run(
                "limits",
                "limits.py",
                ("--before-commit", "7147caa"),
                ("--before-commit", "7147caa", "--quick"),
                "before (7147caa) and after",
            ),
        ),
    ),
)
SECTIONS_BY_NAME = {section.name: section for section in SECTIONS}


def parse_args(argv=None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--only", help="comma-separated sections to regenerate (default: all): " + ", ".join(SECTIONS_BY_NAME)
    )
    parser.add_argument(
        "--from-json", metavar="DIR", type=Path, help="re-render the sections from the JSON saved in DIR; runs nothing"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run with tiny sizes, into a temporary copy of the doc and a temporary results "
        "directory (unless --doc/--results name others)",
    )
    parser.add_argument(
        "--doc", type=Path, help=f"the Markdown file to rewrite (default: {DEFAULT_DOC.relative_to(ROOT)})"
    )
    parser.add_argument(
        "--results", type=Path, help=f"where each run's JSON is kept (default: {DEFAULT_RESULTS.relative_to(ROOT)})"
    )
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds one script may run")
    parser.add_argument("--list", action="store_true", help="print the sections, runs and commands; run nothing")
    opts = parser.parse_args(argv)
    if opts.quick and opts.from_json:
        parser.error("--quick runs the benchmarks and --from-json runs none: give one of them")
    if opts.from_json and not opts.from_json.is_dir():
        parser.error(f"--from-json: {opts.from_json} is not a directory")
    names = [n.strip() for n in (opts.only or "").split(",") if n.strip()]
    unknown = [n for n in names if n not in SECTIONS_BY_NAME]
    if unknown:
        parser.error(
            f"--only: no section {', '.join(map(repr, unknown))}; the sections are " + ", ".join(SECTIONS_BY_NAME)
        )
    opts.sections = [SECTIONS_BY_NAME[n] for n in names] if names else list(SECTIONS)
    if opts.quick:
        for given, real in ((opts.doc, DEFAULT_DOC), (opts.results, DEFAULT_RESULTS)):
            if given is not None and given.resolve() == real.resolve():
                parser.error(
                    f"--quick would write its meaningless figures into {real.relative_to(ROOT)}; "
                    "leave --doc/--results out or point them elsewhere"
                )
        if not opts.list and (opts.doc is None or opts.results is None):
            scratch = Path(tempfile.mkdtemp(prefix="sparkdl-bench-quick-"))
            opts.results = opts.results or scratch / "results"
            if opts.doc is None:
                opts.doc = scratch / DEFAULT_DOC.name
                shutil.copyfile(DEFAULT_DOC, opts.doc)
    opts.doc = opts.doc or DEFAULT_DOC
    opts.results = opts.results or DEFAULT_RESULTS
    return opts


def command_line(run: Run, args: tuple[str, ...]) -> str:
    """How the run is shown in the doc: relative to the repository root."""
    python = Path(sys.executable)
    shown = os.path.relpath(python, ROOT) if python.is_relative_to(ROOT) else "python"
    return " ".join([shown, f"benchmarks/{run.script}", *args])


def run_bounded(command: list[str], timeout: float, cwd: Path = ROOT, env: dict | None = None) -> str | None:
    """Run ``command`` (in ``cwd``, with ``env`` or this process's environment) in its own process
    group, output to this terminal; None, or why it failed.

    On timeout or Ctrl-C the whole group (the script, its Spark JVMs, its TF nodes) is stopped.
    """
    process = subprocess.Popen(command, cwd=cwd, env=env, start_new_session=True)
    try:
        status = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop_group(process)
        return f"stopped after {timeout:.0f} s (--timeout)"
    except KeyboardInterrupt:
        _stop_group(process)
        raise
    return None if status == 0 else f"exited with status {status}"


def _stop_group(process: subprocess.Popen) -> None:
    for sig, grace in ((signal.SIGTERM, 30), (signal.SIGKILL, 30)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def wait_for_quiet(limit: float, patience_s: float = SETTLE_WAIT_S) -> float:
    """Wait (at most ``patience_s``) for the 1-minute load average to fall to ``limit``; returns it.

    The previous benchmark's own processes keep the average high for a minute or two after they
    end; waiting them out keeps its load from being recorded as the next run's."""
    deadline = time.monotonic() + patience_s
    while (load := machine.load_average()) > limit and time.monotonic() < deadline:
        time.sleep(5)
    return load


def execute(run: Run, section: Section, description: dict, opts) -> tuple[dict | None, str | None]:
    """Run one script with ``--json``; ``(record, None)`` or ``(None, why it failed)``."""
    args = run.quick_args if opts.quick else run.args
    shown = command_line(run, args)
    with tempfile.TemporaryDirectory(prefix="sparkdl-bench-") as scratch:
        report_path = Path(scratch) / "report.json"
        print(f"\n== run_all: {run.name}: {shown}", flush=True)
        # A --quick run's figures mean nothing: it never waits.
        load_before = wait_for_quiet(0.5 * (os.cpu_count() or 1), 0 if opts.quick else SETTLE_WAIT_S)
        if load_before > 0.5 * (os.cpu_count() or 1):
            print(
                f"== run_all: warning: load average {load_before} before {run.name}: other work is running, "
                "its timings will be off (the doc states the load)",
                flush=True,
            )
        started = datetime.now(timezone.utc)
        clock = time.perf_counter()
        failure = run_bounded(
            [sys.executable, str(BENCHMARKS / run.script), *args, "--json", str(report_path)], opts.timeout
        )
        duration = time.perf_counter() - clock
        if failure is None and not report_path.exists():
            failure = "it wrote no --json file"
        if failure:
            return None, f"{run.name} ({shown}): {failure}"
        report = json.loads(report_path.read_text())
    print(f"== run_all: {run.name} took {duration / 60:.1f} min", flush=True)
    return {
        "section": section.name,
        "run": run.name,
        "label": run.label,
        "script": run.script,
        "args": list(args),
        "command": shown,
        "started": started.strftime("%Y-%m-%d %H:%M UTC"),
        "duration_s": round(duration, 1),
        "quick": opts.quick,
        "load_before": load_before,
        "machine": description,
        "report": report,
    }, None


def save(records: list[dict], results: Path) -> None:
    """Each record as ``results/<run>.json`` (written whole, then renamed into place)."""
    results.mkdir(parents=True, exist_ok=True)
    for record in records:
        target = results / f"{record['run']}.json"
        partial = target.with_suffix(".json.part")
        partial.write_text(json.dumps(record, indent=2) + "\n")
        os.replace(partial, target)


def load(section: Section, results: Path) -> tuple[list[dict] | None, list[str]]:
    """The section's records from ``results``, in run order; ``(None, missing files)`` if any is missing."""
    records, missing = [], []
    for run in section.runs:
        path = results / f"{run.name}.json"
        if not path.exists():
            missing.append(str(path))
            continue
        try:
            record = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise SystemExit(f"run_all: {path} is not valid JSON ({exc}); re-run --only {section.name}") from None
        absent = RECORD_KEYS - set(record)
        if absent:
            raise SystemExit(
                f"run_all: {path} lacks {sorted(absent)}: it was not written by run_all.py; "
                f"re-run --only {section.name}"
            )
        records.append(record)
    return (None if missing else records), missing


def shown_path(path: Path) -> str:
    """``path`` relative to the repository when inside it."""
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def rewrite(doc: Path, section: Section, records: list[dict], results: Path) -> None:
    """Replace the section's content in ``doc`` (read afresh: others may have edited its prose meanwhile)."""
    source = f"{shown_path(results)}/ ({', '.join(r['run'] + '.json' for r in records)})"
    text = render.replace_sections(doc.read_text(), {section.name: render.render_section(records, source)})
    partial = doc.with_name(doc.name + ".part")
    partial.write_text(text)
    os.replace(partial, doc)


def main(argv=None) -> int:
    """Run (or, with --from-json, only re-render) the selected sections; the exit status."""
    opts = parse_args(argv)
    if opts.list:
        for section in opts.sections:
            print(f"{section.name}:")
            for run in section.runs:
                print(f"  {run.name}: {command_line(run, run.args)}\n    --quick: {command_line(run, run.quick_args)}")
        return 0
    try:  # before running anything: a 50-minute run must not end on a missing marker
        spans = render.find_sections(opts.doc.read_text())
    except (OSError, render.MarkerError) as exc:
        raise SystemExit(f"run_all: {opts.doc}: {exc}") from None
    missing = [s.name for s in opts.sections if s.name not in spans]
    if missing:
        raise SystemExit(
            f"run_all: {opts.doc} has no generated section for {', '.join(missing)} "
            f"(add <!-- generated: NAME --> ... {render.END} where its tables belong)"
        )
    if opts.from_json:
        return rerender(opts)

    description = machine.describe()
    failures, written = [], []
    for section in opts.sections:
        records = []
        for run in section.runs:
            record, failure = execute(run, section, description, opts)
            if failure:
                failures.append(failure)
                break
            records.append(record)
        if len(records) == len(section.runs):
            save(records, opts.results)
            rewrite(opts.doc, section, records, opts.results)
            written.append(section.name)
    print(f"\nrun_all: rewrote {', '.join(written) or 'no section'} in {opts.doc}; JSON in {opts.results}")
    for failure in failures:
        print(f"run_all: FAILED {failure}; its section was left as it was", file=sys.stderr)
    return 1 if failures else 0


def rerender(opts) -> int:
    """--from-json: rewrite the selected sections from saved JSON; one explicitly asked for must be there."""
    explicit = bool(opts.only)
    written = []
    for section in opts.sections:
        records, missing = load(section, opts.from_json)
        if records is None:
            if explicit:
                raise SystemExit(f"run_all: no JSON for section {section.name}: missing {', '.join(missing)}")
            print(f"run_all: skipped {section.name}: missing {', '.join(missing)}")
            continue
        rewrite(opts.doc, section, records, opts.from_json)
        written.append(section.name)
    print(f"run_all: rewrote {', '.join(written) or 'no section'} in {opts.doc} from {opts.from_json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
