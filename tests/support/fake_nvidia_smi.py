"""A FAKE ``nvidia-smi`` for tests on machines with no GPU: a small shell script that prints
canned CSV depending on its arguments (there is no GPU here to ask)."""

from __future__ import annotations

import os
import stat

import pytest

from sparkdl.common import gpus

# GPU 1 is busy through a compute process, GPU 3 through memory use; GPU 2
# reports "[N/A]" memory. Free: 0 and 2.
GPUS_CSV = """\
0, NVIDIA H100 80GB HBM3, GPU-00000000-aaaa, 3, 81559
1, NVIDIA H100 80GB HBM3, GPU-11111111-bbbb, 200, 81559
2, Tesla V100-SXM2-16GB, GPU-22222222-cccc, [N/A], [N/A]
3, NVIDIA A100-SXM4-80GB, GPU-33333333-dddd, 40000, 81920
"""
APPS_CSV = "GPU-11111111-bbbb\nGPU-11111111-bbbb\n"

SCRIPT = """#!/bin/sh
echo "$*" >> "{dir}/calls.log"
case "$1" in
  --query-gpu=*) cat "{dir}/gpus.csv" ;;
  --query-compute-apps=*) cat "{dir}/apps.csv" ;;
  *) echo "unexpected args: $*" >&2; exit 2 ;;
esac
"""


def write_fake_smi(directory, gpus=GPUS_CSV, apps=APPS_CSV, script=None):
    """Write an executable fake ``nvidia-smi`` into ``directory``; return its path."""
    (directory / "gpus.csv").write_text(gpus)
    (directory / "apps.csv").write_text(apps)
    path = directory / "nvidia-smi"
    path.write_text(script or SCRIPT.format(dir=directory))
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(path)


@pytest.fixture
def fake_smi_on_path(tmp_path, monkeypatch):
    """The fake ``nvidia-smi`` first on PATH, asked again without a pause; its path."""
    path = write_fake_smi(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(gpus, "RETRY_WAIT_S", 0.0)
    return path
