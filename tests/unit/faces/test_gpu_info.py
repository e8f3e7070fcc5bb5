"""sparkdl.gpu_info: TensorFlowOnSpark's ``get_gpus`` with a fake ``nvidia-smi``."""

from __future__ import annotations

import pytest

from sparkdl import gpu_info
from sparkdl.common.gpus import GPUSelectionError

from fake_nvidia_smi import fake_smi_on_path, write_fake_smi  # noqa: F401 - fixture; free GPUs 0 and 2; 1 and 3 busy

pytestmark = pytest.mark.timeout(120)


def test_get_gpus_picks_free_gpus_by_worker_index(fake_smi_on_path):
    assert gpu_info.is_gpu_available()
    assert gpu_info.get_gpus() in ("0", "2")  # worker_index=-1: at random among the free
    assert gpu_info.get_gpus(1, worker_index=0) == "0"
    assert gpu_info.get_gpus(1, worker_index=1) == "2"
    assert gpu_info.get_gpus(1, worker_index=2) == "0"  # wraps around the free GPUs
    assert gpu_info.get_gpus(2, 0) == "0,2"
    assert gpu_info.get_gpus(2, 0, format=gpu_info.AS_LIST) == ["0", "2"]
    assert gpu_info.get_gpus(0) == ""
    with pytest.raises(ValueError, match="format"):
        gpu_info.get_gpus(1, 0, format="tuple")


def test_get_gpus_asks_again_then_says_which_are_busy(fake_smi_on_path, tmp_path):
    with pytest.raises(GPUSelectionError, match=r"asked for 3 GPUs, only 2 of 4 free.*busy"):
        gpu_info.get_gpus(3, 0)
    queries = [line for line in (tmp_path / "calls.log").read_text().splitlines() if "--query-gpu" in line]
    assert len(queries) == gpu_info.MAX_RETRIES + 1


def test_no_nvidia_smi_means_no_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert gpu_info.is_gpu_available() is False
    with pytest.raises(GPUSelectionError, match="not found"):
        gpu_info.get_gpus(1)
    broken = write_fake_smi(tmp_path, script="#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
    assert gpu_info.is_gpu_available(broken) is False
