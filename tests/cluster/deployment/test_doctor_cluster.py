"""``python -m sparkdl --check-tf``: the stack report imports TensorFlow as a node does and lists its
devices. (The report without TensorFlow: tests/unit/project/test_doctor.py.)"""

from __future__ import annotations

import os
import re

import pytest

from doctor_report import run_doctor as _doctor

pytestmark = pytest.mark.timeout(180)


@pytest.mark.cluster  # TensorFlow, started as a node starts it
def test_check_tf_imports_tensorflow_like_a_node_and_lists_devices(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    report = _doctor("--check-tf", tmp_path=tmp_path, env=env)
    # a node's Keras where nothing chooses another: Keras 3, as on one machine
    assert re.search(r"^tf check: tensorflow 2\.\d+\.\S+ imported; tf\.keras is keras 3\.", report, re.M), report
    assert re.search(r"^tf check: \d+ device\(s\): .*/physical_device:CPU:0 \(CPU\)", report, re.M), report
