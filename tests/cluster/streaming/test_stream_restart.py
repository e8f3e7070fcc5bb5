"""Exactly-once streaming training across crashes: an application killed mid-stream, twice, and restarted.

The application (``stream_restart_app.py``) trains one TF node from a file-source stream of 5
files, one micro-batch each, every row with an id; the node's checkpointed state counts how often
it trained each id. Run 1 is killed (SIGKILL of the whole application) after the model saved
micro-batch 1 but before Spark committed it (batch 0 was committed): run 2 must skip the replayed
batch 1. Run 2 saves batch 2 and is killed after training micro-batch 3 but before saving it: run 3
must restore batch 2's state, train batch 3 again, then the last batch. In the end the saved state
holds every id exactly once and the step counter never went back.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

import streaming_functions as sf

# Slow tier: three Spark applications, each started, killed or ended, as a user's restarts are
# (about 95 s here, nearly all of it the applications' and their TF node's start).
pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(600)]
FILES, ROWS_PER_FILE = 5, 10


def app(tmp_path, until: str, *hold: str) -> list[str]:
    model_dir = (
        (tmp_path / "model-dir.txt").read_text() if (tmp_path / "model-dir.txt").exists() else tmp_path / "model"
    )
    return [
        sys.executable,
        os.path.join(os.path.dirname(__file__), "stream_restart_app.py"),
        *("--source", str(tmp_path / "source"), "--out", str(tmp_path / "out")),
        *("--model-dir", str(model_dir), "--query-dir", str(tmp_path / "query")),
        *("--ids", str(FILES * ROWS_PER_FILE), "--until", until, *hold),
    ]


def run_until_held(tmp_path, name: str, *hold: str) -> None:
    """Start the application and SIGKILL all of it (driver, JVMs, TF node) once its node holds."""
    with open(tmp_path / f"{name}.err", "wb") as err:
        proc = subprocess.Popen(
            app(tmp_path, "killed", *hold), stdout=subprocess.PIPE, stderr=err, start_new_session=True
        )
        for line in proc.stdout:  # the node's stdout, relayed by the driver's console
            if b"HOLDING" in line:
                os.killpg(proc.pid, signal.SIGKILL)
                break
        proc.wait(60)
    assert proc.returncode == -signal.SIGKILL, (tmp_path / f"{name}.err").read_text()[-3000:]


def split_runs(events: list[dict]) -> list[list[dict]]:
    """The node's events, one list per application run (each run starts with a restore)."""
    runs: list[list[dict]] = []
    for event in events:
        if event["event"] == "restored":
            runs.append([])
        runs[-1].append(event)
    return runs


def test_killed_applications_restart_and_train_every_id_exactly_once(tmp_path):
    check_restarts(tmp_path)


def test_a_stream_checkpoint_in_a_bucket_survives_killed_applications_exactly_once(tmp_path, s3_store):
    """The same three runs with ``ctx.stream_checkpoint`` in a bucket (``s3_store``, reached through the
    AWS environment the applications inherit); Spark's own query checkpoint stays local (Spark's
    S3A needs hadoop-aws on its classpath, which this machine's PySpark lacks)."""
    (tmp_path / "model-dir.txt").write_text(s3_store.url(f"stream-{tmp_path.name}/model"))
    check_restarts(tmp_path)


def check_restarts(tmp_path) -> None:
    """Kill the application twice, as the module docstring says, and check what each run trained."""
    source = tmp_path / "source"
    source.mkdir()
    (tmp_path / "out").mkdir()
    for index in range(FILES):
        ids = range(index * ROWS_PER_FILE, (index + 1) * ROWS_PER_FILE)
        rows = [{"id": i, "x": [float(i % 7), 1.0], "y": float(i % 3)} for i in ids]
        (source / f"part-{index:02d}.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(source / f"part-{index:02d}.json", (index, index))  # the file source takes them in this order

    run_until_held(tmp_path, "run1", "--hold-after-save", "1")
    run_until_held(tmp_path, "run2", "--hold-before-save", "3")
    last = subprocess.run(app(tmp_path, "done"), capture_output=True, text=True, timeout=300)
    assert last.returncode == 0, last.stderr[-3000:]

    runs = split_runs(sf.read_events(tmp_path / "out")[0])
    trained = [[e["batch"] for e in run if e["event"] == "trained"] for run in runs]
    restored = [run[0]["batch"] for run in runs]
    print("micro-batches trained per run:", trained, "restored at:", restored)
    assert trained == [[0, 1], [2, 3], [3, 4]]  # batch 1 skipped on replay, 3 trained again
    assert restored == [None, 1, 2]
    assert "'batches_skipped': 0" in last.stdout  # run 3: batch 3 was replayed and trained, not skipped
    # The step counter resumes from the saved state: run 2 from batch 1's, run 3 from batch 2's.
    steps = {(n, e["batch"]): e["iterations"] for n, run in enumerate(runs) for e in run if e["event"] == "trained"}
    assert runs[1][0]["iterations"] == steps[(0, 1)] == 2
    assert runs[2][0]["iterations"] == steps[(1, 2)] == 3
    end = runs[2][-1]
    assert end["event"] == "end" and end["batch"] == FILES - 1 and end["iterations"] == FILES
    assert end["seen"] == [1] * (FILES * ROWS_PER_FILE)  # every id in the saved state exactly once
