"""sparkdl.keras.spec: what the driver hands the node program, and what it shows of itself."""

from __future__ import annotations

import dataclasses

import pytest

from sparkdl.keras.compiling import CompileSpec
from sparkdl.keras.layout import plan_layout
from sparkdl.keras.run_store import RunPaths
from sparkdl.keras.shipping import ModelPayload
from sparkdl.keras.spec import RunSpec, TrainingJob

from keras_settings import info

pytestmark = pytest.mark.timeout(30)


def run(index: int = 0, **changes) -> RunSpec:
    spec = RunSpec(
        index=index,
        epochs=2,
        batch_size=8,
        compile=CompileSpec(),
        seed=1,
        shuffle=True,
        paths=RunPaths(f"/runs/{index}"),
        config={},
        backup=False,
    )
    return dataclasses.replace(spec, **changes)


def job(*runs: RunSpec) -> TrainingJob:
    layout = plan_layout(info([("x", (2,))], [("y", (1,))]), ["a", "b"], ["y"], None, {"a": 1, "b": 1, "y": 1})
    return TrainingJob(ModelPayload("keras", file_bytes=b"PK"), layout, validation=False, runs=runs)


def test_a_job_is_fed_on_the_default_queue_and_cannot_change_on_its_way():
    training = job(run(0), run(1, epochs=5))
    assert training.qname == "input"  # cluster.train's default qname
    assert [r.epochs for r in training.runs] == [2, 5] and training.current_run_path is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        training.runs = ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        training.runs[0].epochs = 3


def test_a_run_s_defaults_and_its_repr_leave_out_the_pickled_callbacks():
    spec = run(callbacks=b"\x80\x05" + b"x" * 10_000)
    assert (spec.monitor, spec.mode, spec.verbose) == (None, "auto", 0)
    assert "callbacks" not in repr(spec) and "xxxx" not in repr(spec)
    assert "ModelPayload(file, Keras 3, 2 bytes)" in repr(job(spec))
