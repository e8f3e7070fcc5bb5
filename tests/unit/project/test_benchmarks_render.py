"""benchmarks/run_all.py's rendering: tables from saved JSON into the generated sections of a
Markdown file, the hand-written prose around them kept byte for byte.

Renders small fixture JSON (written with the scripts' own ``results_json.write_results``) into a
temporary Markdown file; no benchmark runs here (tests never time anything).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))
import render  # noqa: E402
import run_all  # noqa: E402
from results_json import write_results  # noqa: E402

pytestmark = pytest.mark.timeout(120)

MACHINE = {
    "cpu": "Test CPU 9000",
    "logical_cores": 2,
    "physical_cores": 1,
    "memory_gib": 23.5,
    "os": "Linux-6.1-x86_64",
    "commit": "abc1234",
    "stack": {
        "sparkdl": "0.1.0",
        "python": "3.11.7",
        "pyspark": "4.3.0",
        "tensorflow": "tensorflow 2.21.0",
        "tf-keras": "2.21.0",
        "keras": "3.15.1",
        "java": 'openjdk version "17.0.15" 2025-04-15',
        "gpus": "no NVIDIA GPU visible (nvidia-smi not found); CUDA_VISIBLE_DEVICES unset",
        "tensorflowonspark": "2.2.5",
    },
}

DOC = """# Benchmarks

Hand-written introduction, kept as it is.

## Training

<!-- generated: train_feed -->
| old | table |
|---|---|
| stale train_feed figure | 1,111 rows/s |
<!-- end generated -->

Prose between the sections, with `<!-- an ordinary comment -->` in it.

<!-- generated: inference_udf -->
stale inference figure 2,222
<!-- end generated -->

<!-- generated: cluster_overhead -->
Not generated yet: this placeholder stays.
<!-- end generated -->
<!-- generated: feed_throughput -->
<!-- end generated -->
<!-- generated: feed_memory --><!-- end generated -->
<!-- generated: stream_train --><!-- end generated -->
<!-- generated: columns --><!-- end generated -->
<!-- generated: keras_estimator --><!-- end generated -->
<!-- generated: keras3_train --><!-- end generated -->
<!-- generated: storage --><!-- end generated -->
<!-- generated: limits --><!-- end generated -->

Closing prose.
"""


def skeleton(text: str) -> str:
    """``text`` with every generated section's content cut out: the prose and the markers."""
    for start, end in sorted(render.find_sections(text).values(), reverse=True):
        text = text[:start] + text[end:]
    return text


def make_record(tmp_path: Path, section: str, run: run_all.Run, table, ratios, notes=(), raw=None, quick=False) -> dict:
    """What run_all.execute returns for one run, its report written by write_results."""
    report = tmp_path / f"{run.name}-report.json"
    write_results(
        report, config={"runs": 3, "rows": 60000, "json": str(report)}, table=table, ratios=ratios, notes=notes, raw=raw
    )
    return {
        "section": section,
        "run": run.name,
        "label": run.label,
        "script": run.script,
        "args": list(run.args),
        "command": run_all.command_line(run, run.args),
        "started": "2026-12-01 10:00 UTC",
        "duration_s": 312.0,
        "quick": quick,
        "load_before": 0.1,
        "machine": MACHINE,
        "report": json.loads(report.read_text()),
    }


@pytest.fixture
def saved(tmp_path):
    """Fixture JSON for every run of the train_feed and inference_udf sections, saved as run_all saves."""
    results = tmp_path / "results"
    train_runs = run_all.SECTIONS_BY_NAME["train_feed"].runs
    records = [
        make_record(
            tmp_path,
            "train_feed",
            run,
            table=[
                ("(a) MWMS fit fed by cluster.train, cache=True", 9249.4 + i, "rows/s"),
                ("(a)   wall time of cluster.train (cache=True)", 21.26, "s"),
            ],
            ratios={"(a) SPARK-fed fit / in-memory fit, cache=True (goal >= 0.9)": 0.891 + i / 100},
            notes=[f"epoch cache used by run {i}"],
        )
        for i, run in enumerate(train_runs)
    ]
    run_all.save(records, results)
    inference = run_all.SECTIONS_BY_NAME["inference_udf"].runs[0]
    rows = [
        {
            "model": "cnn",
            "variant": "sparkdl mapInArrow",
            "median_s": 16.2,
            "rows_per_s": 12345.6,
            "vs_pyspark": 1.5,
            "vs_single": 0.61,
            "runs": "16.20 16.90 15.80",
        },
        {
            "model": "cnn",
            "variant": "pyspark predict_batch_udf",
            "median_s": 24.3,
            "rows_per_s": 8230.4,
            "vs_pyspark": 1.0,
            "vs_single": 0.41,
            "runs": "24.30 24.00 25.10",
        },
    ]
    run_all.save(
        [
            make_record(
                tmp_path,
                "inference_udf",
                inference,
                table=[(f"{r['model']}: {r['variant']}", r["rows_per_s"], "rows/s") for r in rows],
                ratios={"cnn: sparkdl mapInArrow / pyspark predict_batch_udf": 1.5},
                raw={"results": rows},
            )
        ],
        results,
    )
    doc = tmp_path / "benchmarks.md"
    doc.write_text(DOC)
    return results, doc


def test_from_json_rewrites_the_sections_and_keeps_the_prose(saved):
    results, doc = saved
    status = run_all.main(["--from-json", str(results), "--doc", str(doc), "--only", "train_feed,inference_udf"])
    text = doc.read_text()
    assert status == 0
    assert skeleton(text) == skeleton(DOC)  # every byte outside the sections, markers included
    assert "stale train_feed figure" not in text and "stale inference figure" not in text
    assert "Not generated yet: this placeholder stays." in text  # a section not asked for is untouched
    train = text[slice(*render.find_sections(text)["train_feed"])]
    for expected in (
        "9,249 rows/s",
        "9,252 rows/s",
        "21.3 s",
        "**0.89**",
        "**0.92**",
        "epoch cache used by run 3",
        "Test CPU 9000, 2 cores (1 physical), 23.5 GiB",
        "Python 3.11.7",
        "PySpark 4.3.0",
        "tensorflow 2.21.0",
        "Java 17.0.15 (openjdk)",
        "TensorFlowOnSpark 2.2.5",
        "commit `abc1234`",
        "2026-12-01 10:00 UTC",
        "5.2 min",
        "benchmarks/train_feed.py --epochs 10 --parts a --runs 1",
        "| 10 epochs | (a) MWMS fit fed by cluster.train, cache=True | 9,250 rows/s |",
    ):
        assert expected in train, expected
    assert "Quick smoke run" not in train
    inference = text[slice(*render.find_sections(text)["inference_udf"])]
    assert "| cnn | sparkdl mapInArrow | 12,346 | **1.50** | **0.61** | 16.20 16.90 15.80 |" in inference
    assert "| run |" not in inference  # one run: no run column


def test_rendering_again_from_the_same_json_changes_nothing(saved):
    results, doc = saved
    run_all.main(["--from-json", str(results), "--doc", str(doc)])
    once = doc.read_text()
    run_all.main(["--from-json", str(results), "--doc", str(doc)])
    assert doc.read_text() == once


def test_sections_without_json_are_skipped_unless_asked_for(saved, capsys):
    results, doc = saved
    assert run_all.main(["--from-json", str(results), "--doc", str(doc)]) == 0
    assert "skipped cluster_overhead: missing" in capsys.readouterr().out
    assert "Not generated yet: this placeholder stays." in doc.read_text()
    before = doc.read_text()
    with pytest.raises(SystemExit, match="no JSON for section cluster_overhead: missing .*cluster_overhead.json"):
        run_all.main(["--from-json", str(results), "--doc", str(doc), "--only", "cluster_overhead"])
    assert doc.read_text() == before


def test_a_doc_without_the_section_is_refused_before_anything_runs(saved):
    results, doc = saved
    doc.write_text(DOC.replace("<!-- generated: cluster_overhead -->", "<!-- generated: renamed -->"))
    with pytest.raises(SystemExit, match="has no generated section for cluster_overhead"):
        run_all.main(["--doc", str(doc), "--only", "cluster_overhead"])  # would run the benchmark otherwise


def test_a_quick_run_is_marked_and_a_failed_reference_says_so(tmp_path):
    run = run_all.SECTIONS_BY_NAME["feed_throughput"].runs[0]
    record = make_record(
        tmp_path,
        "feed_throughput",
        run,
        table=[("sparkdl feed, RDD source", 31111.0, "rows/s")],
        ratios={},
        notes=["TensorFlowOnSpark is not installed"],
        quick=True,
    )
    text = render.render_section([record], "results/feed_throughput.json")
    assert "Quick smoke run (`--quick`)" in text
    assert "No ratios: the references did not run" in text and "- TensorFlowOnSpark is not installed" in text
    assert "| sparkdl feed, RDD source | 31,111 rows/s |" in text
    assert "settings: runs 3, rows 60000." in text  # the --json path is not a setting


@pytest.mark.parametrize(
    "text, message",
    [
        ("<!-- generated: a -->\nx\n", "line 1: section 'a' has no <!-- end generated -->"),
        (
            "<!-- generated: a -->\n<!-- generated: b -->\n<!-- end generated -->\n",
            "line 2: section 'b' begins before section 'a' \\(line 1\\)",
        ),
        ("text\n<!-- end generated -->\n", "line 2: <!-- end generated --> without"),
        (
            "<!-- generated: a -->\n<!-- end generated -->\n<!-- generated: a -->\n<!-- end generated -->\n",
            "line 3: a second section named 'a'",
        ),
    ],
)
def test_unbalanced_or_repeated_markers_are_named_with_their_line(text, message):
    with pytest.raises(render.MarkerError, match=message):
        render.find_sections(text)


def test_replacing_a_section_the_file_lacks_says_which_marker_to_add():
    with pytest.raises(render.MarkerError, match="add <!-- generated: feed_memory -->"):
        render.replace_sections("<!-- generated: a -->\n<!-- end generated -->\n", {"feed_memory": "x"})


def test_bad_option_combinations_are_refused_and_quick_never_touches_the_real_files():
    with pytest.raises(SystemExit):
        run_all.parse_args(["--quick", "--doc", str(run_all.DEFAULT_DOC)])
    with pytest.raises(SystemExit):
        run_all.parse_args(["--quick", "--results", str(run_all.DEFAULT_RESULTS)])
    with pytest.raises(SystemExit):
        run_all.parse_args(["--quick", "--from-json", "somewhere"])
    with pytest.raises(SystemExit):
        run_all.parse_args(["--only", "train_feed,no_such_section"])
    with pytest.raises(SystemExit):
        run_all.parse_args(["--from-json", "/no/such/directory"])


def test_measurement_names_must_be_unique(tmp_path):
    with pytest.raises(ValueError, match="repeated: \\['x'\\]"):
        write_results(tmp_path / "r.json", config={}, table=[("x", 1, "s"), ("x", 2, "s")], ratios={})


def test_the_real_doc_has_a_well_formed_section_for_every_benchmark():
    sections = render.find_sections(run_all.DEFAULT_DOC.read_text())
    assert set(run_all.SECTIONS_BY_NAME) <= set(sections)


def test_every_script_run_all_calls_accepts_json():
    for script in sorted({run.script for section in run_all.SECTIONS for run in section.runs}):
        out = subprocess.run(
            [sys.executable, str(run_all.BENCHMARKS / script), "--help"], capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0 and "--json" in out.stdout, (script, out.stderr[-500:])
