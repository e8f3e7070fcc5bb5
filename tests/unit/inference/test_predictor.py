"""sparkdl.inference.predictor without Spark or TensorFlow: a Predictor's options are checked, and
the driver side imports no TensorFlow."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sparkdl.inference import Predictor


@pytest.mark.timeout(60)
def test_importing_the_driver_side_does_not_import_tensorflow():
    code = "import sys, sparkdl.inference, sparkdl.ml; print('tensorflow' in sys.modules, 'keras' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=50)
    assert result.stdout.split() == ["False", "False"], result.stderr[-2000:]


@pytest.mark.timeout(30)
def test_sources_and_options_are_validated():
    with pytest.raises(ValueError, match="exactly one"):
        Predictor(input_mapping="x")
    with pytest.raises(ValueError, match="batch_size"):
        Predictor("m.keras", input_mapping="x", batch_size=0)
    with pytest.raises(ValueError, match="gpus"):
        Predictor("m.keras", input_mapping="x", gpus="all")
    with pytest.raises(ValueError, match="input_mapping is required"):
        Predictor("m.keras")
