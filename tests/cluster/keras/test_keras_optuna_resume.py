"""An Optuna study of KerasEstimator fits whose driver is SIGKILLed while a trial trains: run again, it
finishes the study without running finished trials again, and the killed trial resumes from its last epoch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

import keras_functions as kf

pytest.importorskip("optuna")

# Slow tier: two Spark applications, the first killed mid-study (about 120 s here, nearly all of it the
# applications' and their trials' TF nodes starting).
pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(600)]

TRIALS = 3


def _app(tmp_path, *extra: str) -> list[str]:
    return [
        sys.executable,
        os.path.join(os.path.dirname(__file__), "keras_optuna_app.py"),
        *("--db", str(tmp_path / "study.db"), "--checkpoint_dir", str(tmp_path / "runs")),
        *("--out", str(tmp_path / "out"), "--trials", str(TRIALS), *extra),
    ]


def test_a_killed_study_goes_on_without_running_finished_trials_again(tmp_path):
    (tmp_path / "out").mkdir()
    started = time.perf_counter()
    with open(tmp_path / "run1.err", "wb") as err:  # application 1: killed while trial 1's nodes hold
        first = subprocess.Popen(_app(tmp_path, "--hold_trial", "1"), stdout=subprocess.PIPE, stderr=err,
                                 start_new_session=True)  # fmt: skip
        for line in first.stdout:  # the nodes' stdout, relayed by the driver's console
            if b"HOLDING" in line:
                os.killpg(first.pid, signal.SIGKILL)
                break
        first.wait(60)
    assert first.returncode == -signal.SIGKILL, (tmp_path / "run1.err").read_text()[-3000:]
    fits1 = [json.loads(line) for line in (tmp_path / "out" / "fits.jsonl").read_text().splitlines()]
    second = subprocess.run(_app(tmp_path), capture_output=True, text=True, timeout=300)  # application 2
    assert second.returncode == 0, second.stderr[-3000:]
    elapsed = time.perf_counter() - started
    fits = [json.loads(line) for line in (tmp_path / "out" / "fits.jsonl").read_text().splitlines()]
    fits2 = fits[len(fits1) :]
    trials = [json.loads(line.split("TRIAL ", 1)[1]) for line in second.stdout.splitlines() if "TRIAL " in line]
    print(f"two applications in {elapsed:.0f} s; fits {fits}; trials {trials}")
    assert [(f["trial"], f["run_id"]) for f in fits1] == [(0, "digits-trial-0"), (1, "digits-trial-1")]
    # application 2: the killed trial retried (same run), then one new trial; trial 0 never again
    assert [(f["trial"], f["run_id"]) for f in fits2] == [(2, "digits-trial-1"), (3, "digits-trial-3")]
    states = [(number, state) for number, state, _ in trials]
    assert states == [(0, "COMPLETE"), (1, "FAIL"), (2, "COMPLETE"), (3, "COMPLETE")]
    # the retried trial resumed from its last epoch: epoch 0 trained once (by each node), in application 1
    epochs = sorted(e["epoch"] for e in kf.read_epoch_logs(tmp_path / "out" / "digits-trial-1"))
    assert epochs == [0, 0, 1, 1, 2, 2], epochs
    state = json.loads((tmp_path / "runs" / "digits-trial-1" / "state.json").read_text())
    assert state["finished"] and state["epochs_completed"] == 3
