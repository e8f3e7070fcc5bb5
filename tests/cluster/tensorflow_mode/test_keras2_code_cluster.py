"""Keras 2 code (TensorFlowOnSpark's examples) on a Keras 3 node: the failure names the setting
that runs it unchanged, and with that setting it trains and saves.

TensorFlow 2.16+ ships Keras 3 as ``tf.keras``. Keras 3 refuses Keras 2's saving calls, and its
messages never mention ``TF_USE_LEGACY_KERAS=1``: the node's failure hint does
(``sparkdl/node/keras2_code.py``, ``keras_policy.failure_hint``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparkdl import ClusterError, TFCluster
from sparkdl.node.keras_policy import KERAS2_CODE_HINT, LEGACY_KERAS_ENV, failure_hint

import keras2_functions
from conftest import read_json_files

pytestmark = pytest.mark.timeout(240)
TENSORFLOW = TFCluster.InputMode.TENSORFLOW


def _args(tmp_path: Path) -> dict:
    return {"out": str(tmp_path), "model_dir": str(tmp_path / "mnist_model"), "export_dir": str(tmp_path / "export")}


def test_tfos_style_saving_on_keras3_fails_naming_the_setting(sc2, tmp_path):
    cluster = TFCluster.run(
        sc2, keras2_functions.tfos_style_keras, _args(tmp_path), 2, input_mode=TENSORFLOW, master_node="chief"
    )
    with pytest.raises(ClusterError) as caught:
        cluster.shutdown(timeout=120)
    failure = caught.value.failures[0]
    assert "save_weights_only=True` in `ModelCheckpoint`" in failure.traceback, failure.traceback
    assert failure.hint == KERAS2_CODE_HINT
    text = str(caught.value)  # what the driver's console shows
    assert f"hint: {KERAS2_CODE_HINT}" in text
    assert "This node runs Keras 3" in text and "TF_USE_LEGACY_KERAS=1" in text
    assert "env={'TF_USE_LEGACY_KERAS': '1'}" in text


def test_tfos_style_saving_runs_unchanged_with_legacy_keras(sc2, tmp_path):
    args = _args(tmp_path)
    cluster = TFCluster.run(
        sc2,
        keras2_functions.tfos_style_keras,
        args,
        2,
        input_mode=TENSORFLOW,
        master_node="chief",
        env={LEGACY_KERAS_ENV: "1"},
    )
    cluster.shutdown(timeout=180)
    nodes = read_json_files(tmp_path)
    assert sorted(n["job_name"] for n in nodes.values()) == ["chief", "worker"], nodes
    assert all(n["model_module"].startswith("tf_keras.") for n in nodes.values()), nodes
    checkpoints = sorted(p.name for p in Path(args["model_dir"]).glob("weights-*.index"))
    assert checkpoints == ["weights-0001.index", "weights-0002.index"]
    assert (Path(args["export_dir"]) / "saved_model.pb").is_file(), "model.save without an extension: a SavedModel"


def _run_keras2_calls(directory: Path, legacy: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k != LEGACY_KERAS_ENV}
    if legacy:
        env[LEGACY_KERAS_ENV] = "1"
    script = keras2_functions.__file__
    done = subprocess.run(
        [sys.executable, script, str(directory)], env=env, capture_output=True, text=True, timeout=150
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.cluster  # no Spark, but two TensorFlow processes
@pytest.mark.slow  # matters when Keras or tf-keras is upgraded (both are pinned)
def test_every_recognised_keras3_error_is_keras2_code_that_tf_keras_runs(tmp_path):
    """Against the installed Keras 3 and tf-keras: each Keras 2 call runs on tf-keras, and Keras 3's
    refusal of it gets the hint (the loads read what the tf-keras run saved)."""
    on_tf_keras = _run_keras2_calls(tmp_path, legacy=True)
    assert on_tf_keras and all(trace is None for trace in on_tf_keras.values()), on_tf_keras
    on_keras3 = _run_keras2_calls(tmp_path, legacy=False)
    assert on_keras3.keys() == on_tf_keras.keys()
    missed = {name: (trace or "ran")[-300:] for name, trace in on_keras3.items() if not trace}
    missed |= {
        name: trace[-300:]
        for name, trace in on_keras3.items()
        if trace and failure_hint(trace, {}, 1) != KERAS2_CODE_HINT
    }
    assert not missed, missed
