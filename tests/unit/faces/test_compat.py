"""sparkdl.compat: importing it imports no TensorFlow."""

from __future__ import annotations

import sys

import pytest

pytestmark = pytest.mark.timeout(120)


def test_importing_compat_does_not_import_tensorflow():
    import subprocess

    code = (
        "import sys, sparkdl.compat, sparkdl.pipeline, sparkdl.gpu_info, sparkdl.util; "
        "print('tensorflow' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "False", result.stderr
