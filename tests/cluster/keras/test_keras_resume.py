"""A KerasEstimator fit with a run store, its application killed mid-fit, resumes in a new application
at the next epoch with the same run_id (issue 23, "Must show"); fitting a finished run trains nothing.
The run store is a local directory, or a bucket (``checkpoint_dir="s3a://..."``) of an S3-protocol server
(``s3_store``: moto) that both applications reach by the standard AWS environment alone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import keras_functions as kf

# Slow tier: two Spark applications, the first killed mid-fit (about 80 s here per store, nearly all of
# it the applications' and their TF node's start).
pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(600)]
EPOCHS, HOLD_AFTER = 4, 1  # application 1 trains epochs 0-1, application 2 epochs 2-3


def _app(tmp_path, checkpoint_dir: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        os.path.join(os.path.dirname(__file__), "keras_resume_app.py"),
        *("--data", str(tmp_path / "digits.parquet"), "--checkpoint_dir", checkpoint_dir),
        *("--run_id", "digits-1", "--out", str(tmp_path / "out"), "--epochs", str(EPOCHS), *extra),
    ]


def test_a_killed_fit_resumes_at_the_next_epoch_in_a_new_application(tmp_path):
    run_dir = tmp_path / "runs" / "digits-1"
    _killed_then_resumed(tmp_path, str(tmp_path / "runs"), lambda: json.loads((run_dir / "state.json").read_text()))
    assert sorted(p.name for p in run_dir.iterdir()) == ["backup", "model.keras", "state.json"]


def test_a_killed_fit_resumes_from_its_bucket_in_a_new_application(tmp_path, s3_store):
    prefix = f"runs-{uuid.uuid4().hex[:8]}"
    key = f"{prefix}/digits-1"

    def state() -> dict:
        return json.loads(s3_store.client.get_object(Bucket=s3_store.bucket, Key=f"{key}/state.json")["Body"].read())

    _killed_then_resumed(tmp_path, s3_store.url(prefix).replace("s3://", "s3a://"), state)
    listed = s3_store.client.list_objects_v2(Bucket=s3_store.bucket, Prefix=key + "/").get("Contents", [])
    names = {item["Key"][len(key) + 1 :].split("/", 1)[0] for item in listed}
    assert names == {"backup", "model.keras", "state.json"}, names
    assert not (tmp_path / "runs").exists()


def _killed_then_resumed(tmp_path, checkpoint_dir: str, read_state) -> None:
    """Application 1 killed (all of it) after epoch HOLD_AFTER, application 2 resuming: the checks both
    stores share. ``read_state()``: the run's state.json as the store holds it."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    table = pa.table({"x": pa.array(list((digits.data[:800] / 16.0).astype("float32"))), "label": digits.target[:800]})
    pq.write_table(table, tmp_path / "digits.parquet")
    (tmp_path / "out").mkdir()

    with open(tmp_path / "run1.err", "wb") as err:  # application 1: killed (all of it) while its node holds
        first = subprocess.Popen(
            _app(tmp_path, checkpoint_dir, "--hold_after", str(HOLD_AFTER)),
            stdout=subprocess.PIPE,
            stderr=err,
            start_new_session=True,
        )
        for line in first.stdout:  # the node's stdout, relayed by the driver's console
            if b"HOLDING" in line:
                os.killpg(first.pid, signal.SIGKILL)
                break
        first.wait(60)
    assert first.returncode == -signal.SIGKILL, (tmp_path / "run1.err").read_text()[-3000:]
    run1 = kf.read_epoch_logs(tmp_path / "out")
    state = read_state()

    second = subprocess.run(_app(tmp_path, checkpoint_dir), capture_output=True, text=True, timeout=400)  # app 2
    assert second.returncode == 0, second.stderr[-3000:]
    run2 = kf.read_epoch_logs(tmp_path / "out")[len(run1) :]
    history = json.loads(second.stdout.split("HISTORY ", 1)[1].splitlines()[0])
    print("epochs trained: application 1", [e["epoch"] for e in run1], "application 2", [e["epoch"] for e in run2])
    assert [e["epoch"] for e in run1] == [0, 1] and state["epochs_completed"] == 2 and not state["finished"]
    assert [e["epoch"] for e in run2] == [2, 3]  # resumed at the next epoch, in one node process
    assert len({e["pid"] for e in run1}) == 1 and len({e["pid"] for e in run2}) == 1
    np.testing.assert_allclose(history["loss"][:2], [e["loss"] for e in run1], rtol=1e-6)  # kept from application 1
    np.testing.assert_allclose(history["loss"][2:], [e["loss"] for e in run2], rtol=1e-6)
    assert history["loss"][-1] < history["loss"][0]
    again = second.stdout.split("AGAIN ", 1)[1].splitlines()[0]
    assert json.loads(again.rsplit(" ", 1)[0]) == history and again.endswith("True")  # finished: nothing trained
    assert len(kf.read_epoch_logs(tmp_path / "out")) == EPOCHS
