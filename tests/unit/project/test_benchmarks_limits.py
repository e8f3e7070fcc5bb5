"""benchmarks/limits.py without running a benchmark: the figures read from the steps' reports
(fixture JSON written with the scripts' own ``results_json.write_results``), the medians and
ratios of the alternating repetitions, the table rendered into docs/benchmarks-method.md, and the
refusal of a BEFORE tree that is not one (tests never time anything)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))
import limits  # noqa: E402
import render  # noqa: E402
from results_json import write_results  # noqa: E402

pytestmark = pytest.mark.timeout(120)


def written(tmp_path: Path, table, raw) -> dict:
    """A report as a script writes it with ``--json``, read back."""
    path = tmp_path / "report.json"
    write_results(path, config={}, table=table, ratios={}, raw=raw)
    return json.loads(path.read_text())


def train_feed_report(tmp_path: Path, epoch_seconds: list[list[float]]) -> dict:
    """``train_feed.py --parts abd --runs 1``'s report; ``epoch_seconds``: each node's epochs."""
    values = {
        limits.FEED_DF: 8522.0,
        limits.FEED_RDD: 19938.0,
        limits.FIT_FED: 11073.0,
        limits.FIT_FIRST: 9000.0,
        limits.FIT_MEMORY: 13881.0,
        limits.PASS_FIRST: 27000.0,
        limits.PASS_CACHED: 250000.0,
    }
    per_node = [[{"rows": 30000, "epoch_seconds": seconds, "rss_start": 1, "rss_peak": 2}] for seconds in epoch_seconds]
    return written(
        tmp_path, [(name, value, "rows/s") for name, value in values.items()], {"b_c": {"per_node": per_node}}
    )


def test_train_feed_figures_take_the_slower_node_of_each_epoch(tmp_path):
    report = train_feed_report(tmp_path, [[2.0, 0.34, 0.12, 0.14], [2.2, 0.30, 0.13, 0.11]])
    found = limits.train_feed_quantities(report)
    assert found["feed_df"] == 8522.0 and found["feed_rdd"] == 19938.0 and found["fit_memory"] == 13881.0
    assert found["epoch2_s"] == 0.34  # the slower node's epoch 2
    assert found["later_s"] == pytest.approx((0.13 + 0.14) / 2)  # the mean of the slower node's epochs 3..N


def test_train_feed_with_too_few_epochs_or_a_missing_figure_is_refused(tmp_path):
    with pytest.raises(ValueError, match="ran 2 epochs"):
        limits.train_feed_quantities(train_feed_report(tmp_path, [[2.0, 0.3], [2.1, 0.3]]))
    report = train_feed_report(tmp_path, [[2.0, 0.3, 0.1], [2.1, 0.3, 0.1]])
    del report["measurements"][limits.FEED_RDD]
    with pytest.raises(ValueError, match="no measurement.*next_batch rows, RDD"):
        limits.train_feed_quantities(report)


def test_inference_figures_come_from_its_rows_and_missing_ones_are_named(tmp_path):
    rows = [
        {"model": model, "variant": variant, "rows_per_s": rate}
        for model, variant, rate in (
            ("mlp", limits.ARROW, 48117.0),
            ("mlp", limits.SCAN, 54736.0),
            ("mlp", limits.SINGLE, 113604.0),
            ("cnn", limits.ARROW, 10103.0),
            ("cnn", limits.SINGLE, 11252.0),
        )
    ]
    found = limits.inference_quantities(written(tmp_path, [], {"results": rows}))
    assert found == {
        "cnn_arrow": 10103.0,
        "cnn_single": 11252.0,
        "mlp_arrow": 48117.0,
        "mlp_scan": 54736.0,
        "mlp_single": 113604.0,
    }
    with pytest.raises(ValueError, match="cnn: sparkdl mapInArrow"):
        limits.inference_quantities(written(tmp_path, [], {"results": rows[:3]}))


def test_figures_are_medians_of_the_repetitions_and_ratios_of_the_medians():
    keys = {key for figure in limits.FIGURES for key in (figure.quantity, *figure.ratio) if key}
    before = [{key: 1.0 for key in keys} | {"feed_df": df, "feed_rdd": rdd} for df, rdd in ((8, 20), (9, 10), (1, 30))]
    after = [{key: 2.0 for key in keys} | {"feed_df": 20.0, "feed_rdd": 20.0}] * 3
    rows = {row["figure"]: row for row in limits.figures({"before": before, "after": after})}
    assert [row["figure"] for row in rows.values()] == [figure.name for figure in limits.FIGURES]
    assert rows["(1) feed from a cached DataFrame, next_batch row tuples"]["before"] == 8  # median of 8, 9, 1
    ratio = rows["(1) DataFrame / RDD feed"]
    assert ratio["before"] == 8 / 20 and ratio["after"] == 1.0  # median 8 over median 20, not a median of ratios
    assert ratio["target"] == "≥ 1" and ratio["unit"] == "ratio"


def test_the_table_renders_one_line_per_figure_with_both_commits():
    rows = [
        {"figure": "(1) DataFrame / RDD feed", "unit": "ratio", "target": "≥ 1", "before": 0.427, "after": 1.04},
        {"figure": "(3) epoch 2 (from the cache)", "unit": "s", "target": "", "before": 0.341, "after": 0.13},
        {"figure": "(4) CNN: sparkdl mapInArrow", "unit": "rows/s", "target": "", "before": 10103.4, "after": 11000},
    ]
    report = {"config": {"before_commit": "7147caa", "after_commit": "abc1234"}, "raw": {"figures": rows}}
    record = {"label": "before (7147caa) and after", "report": report}
    lines = render.TABLES["limits.py"]([record], labelled=False)
    assert lines[0] == "| figure | before (`7147caa`) | after (`abc1234`) | target |"
    assert "| (1) DataFrame / RDD feed | **0.43** | **1.04** | ≥ 1 |" in lines
    assert "| (3) epoch 2 (from the cache) | 0.34 s | 0.13 s |  |" in lines
    assert "| (4) CNN: sparkdl mapInArrow | 10,103 rows/s | 11,000 rows/s |  |" in lines


def test_options_before_is_one_tree_and_quick_is_one_repetition():
    assert limits.parse_args([]).before_commit == limits.BEFORE_COMMIT
    assert limits.parse_args([]).repetitions == 3
    assert limits.parse_args(["--quick"]).repetitions == 1
    with pytest.raises(SystemExit):
        limits.parse_args(["--before", "/x", "--before-commit", "7147caa"])
    with pytest.raises(SystemExit):
        limits.parse_args(["--repetitions", "0"])


def test_a_before_that_is_no_checkout_or_commit_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="has no sparkdl: not a sparkdl checkout"):
        limits.before_side(limits.parse_args(["--before", str(tmp_path)]), tmp_path)
    with pytest.raises(SystemExit, match="not a commit of this repository"):
        limits.before_side(limits.parse_args(["--before-commit", "no-such-ref-xyz"]), tmp_path)


def test_before_commit_extracts_that_commits_sparkdl_and_benchmarks(tmp_path):
    side = limits.before_side(limits.parse_args(["--before-commit", limits.BEFORE_COMMIT]), tmp_path)
    assert side.commit.startswith(limits.BEFORE_COMMIT[:7]) and side.python == sys.executable
    assert (side.root / "sparkdl" / "__init__.py").exists()
    assert (side.root / "benchmarks" / "train_feed.py").exists()
    limits.check_sparkdl(side, tmp_path)  # its interpreter imports this extracted sparkdl, not the tree's


def test_a_side_whose_interpreter_imports_another_sparkdl_is_refused(tmp_path):
    (tmp_path / "benchmarks").mkdir()  # a root without sparkdl/: the import finds this checkout's instead
    side = limits.Side("before", tmp_path, sys.executable, None)
    with pytest.raises(SystemExit, match="imports sparkdl from .*, not from"):
        limits.check_sparkdl(side, tmp_path)


def test_a_tree_that_scores_packed_frames_apart_gets_a_session_of_its_own_for_them(tmp_path):
    """Scored in one session with the rest, the packed variants slowed the others (Spark's own scan
    pass too): where inference_udf.py has --packed, they run in a step of their own; a tree
    without it (7147caa) keeps its three steps."""
    this_tree = limits.steps(limits.Side("after", ROOT, sys.executable, None), limits.FULL, tmp_path)
    assert [step.name for step in this_tree] == ["train_feed", "scan", "inference_udf", "inference_udf packed"]
    base, packed = this_tree[2].command, this_tree[3].command
    assert base[base.index("--packed") + 1] == "skip" and packed[packed.index("--packed") + 1] == "only"
    (tmp_path / "old" / "benchmarks").mkdir(parents=True)
    (tmp_path / "old" / "benchmarks" / "inference_udf.py").write_text("# an inference_udf.py of 7147caa\n")
    old = limits.steps(limits.Side("before", tmp_path / "old", sys.executable, None), limits.FULL, tmp_path)
    assert [step.name for step in old] == ["train_feed", "scan", "inference_udf"]
    assert "--packed" not in old[2].command
