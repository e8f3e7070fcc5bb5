"""sparkdl.inference.worker without Spark or TensorFlow: GPU visibility and the model's fingerprint."""

from __future__ import annotations

import pytest

from sparkdl.inference import ModelLoadError, worker


@pytest.mark.timeout(30)
def test_gpu_visibility_follows_spark_resources():
    assert worker.plan_visible_devices("spark", [], None) == ""  # no GPU from Spark: CPU
    assert worker.plan_visible_devices("spark", ["1"], None) == "1"
    assert worker.plan_visible_devices("spark", ["1"], "4,5") == "5"  # an ordinal into the executor's list
    assert worker.plan_visible_devices("visible", ["1"], None) is None  # leave the worker as it is
    assert worker.plan_visible_devices("none", ["1"], None) == ""
    setup = {"mode": "spark", "visible": ["5"], "gpus": 1}
    assert worker.task_device(setup, ["1"], "4,5") == ("/GPU:0", None)
    device, warning = worker.task_device(setup, ["0"], "4,5")  # another GPU than the worker's
    assert device == "/GPU:0" and "Spark assigned GPU 4" in warning
    assert worker.task_device({"mode": "spark", "visible": [], "gpus": 0}, ["0"], None) == ("/CPU:0", None)


@pytest.mark.timeout(60)
def test_fingerprint_changes_when_the_model_is_rewritten(tmp_path):
    path = tmp_path / "m.keras"
    path.write_bytes(b"one")
    first = worker.fingerprint(str(path))
    path.write_bytes(b"two!")
    assert worker.fingerprint(str(path)) != first
    with pytest.raises(ModelLoadError, match="does not exist"):
        worker.fingerprint(str(tmp_path / "missing"))
