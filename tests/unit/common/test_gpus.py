"""Tests for sparkdl.common.gpus.

There is no GPU on the machine that runs these tests, so they use fake Spark
resource addresses and a FAKE ``nvidia-smi``: a small shell script written into
``tmp_path`` that prints canned CSV depending on its arguments. Its path is
passed through the ``nvidia_smi`` argument, or ``tmp_path`` is put first on
``PATH`` to exercise the default command name.
"""

from __future__ import annotations

import os

import pytest

from sparkdl.common.gpus import (
    GPUAssignment,
    GPUInfo,
    GPUSelectionError,
    choose_free_gpus,
    map_spark_addresses,
    parse_compute_apps,
    parse_gpu_csv,
    query_nvidia_smi,
    select_gpus,
)

from fake_nvidia_smi import write_fake_smi

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def fake_smi(tmp_path):
    return write_fake_smi(tmp_path)


@pytest.fixture
def broken_smi(tmp_path):
    """A fake nvidia-smi that fails like it does when the driver is missing."""
    return write_fake_smi(
        tmp_path,
        script=(
            "#!/bin/sh\necho \"NVIDIA-SMI has failed because it couldn't communicate "
            'with the NVIDIA driver." >&2\nexit 9\n'
        ),
    )


def gpu(index, busy=False):
    return GPUInfo(index, "NVIDIA H100 80GB HBM3", f"GPU-{index}", 0, 81559, busy)


def test_query_parses_current_gpu_names(fake_smi, tmp_path):
    gpus = query_nvidia_smi(fake_smi)
    assert [g.name for g in gpus] == [
        "NVIDIA H100 80GB HBM3",
        "NVIDIA H100 80GB HBM3",
        "Tesla V100-SXM2-16GB",
        "NVIDIA A100-SXM4-80GB",
    ]
    assert gpus[0] == GPUInfo(0, "NVIDIA H100 80GB HBM3", "GPU-00000000-aaaa", 3, 81559, False)
    # "[N/A]" memory counts as 0 rather than breaking the parse.
    assert (gpus[2].memory_used_mib, gpus[2].memory_total_mib) == (0, 0)
    assert (tmp_path / "calls.log").read_text().splitlines() == [
        "--query-gpu=index,name,uuid,memory.used,memory.total --format=csv,noheader,nounits",
        "--query-compute-apps=gpu_uuid --format=csv,noheader",
    ]


def test_busy_detection_by_compute_apps_and_memory(fake_smi):
    busy = {g.index: g.busy for g in query_nvidia_smi(fake_smi)}
    assert busy == {0: False, 1: True, 2: False, 3: True}


def test_parse_helpers_directly():
    assert parse_compute_apps("GPU-a\n\nGPU-b\nGPU-a\n") == {"GPU-a", "GPU-b"}
    assert parse_compute_apps("") == set()
    gpus = parse_gpu_csv(
        "1, Tesla V100-SXM2-16GB, GPU-x, [Not Supported], 16160\n0, NVIDIA H100 80GB HBM3, GPU-y, 600, 81559\n",
        busy_memory_mib=1000,
    )
    assert [(g.index, g.memory_used_mib, g.busy) for g in gpus] == [(0, 600, False), (1, 0, False)]
    assert parse_gpu_csv("0, N, GPU-y, 600, 81559\n", busy_memory_mib=500)[0].busy


@pytest.mark.parametrize(
    "text", ["garbage\n", "x, NVIDIA H100 80GB HBM3, GPU-a, 1, 2\n", "0, NVIDIA H100 80GB HBM3, GPU-a, lots, 2\n"]
)
def test_unparsable_output_raises(text):
    with pytest.raises(GPUSelectionError, match="cannot parse nvidia-smi"):
        parse_gpu_csv(text)


def test_query_uses_default_name_on_path(tmp_path, monkeypatch):
    write_fake_smi(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    assert [g.index for g in query_nvidia_smi()] == [0, 1, 2, 3]


def test_query_returns_none_without_nvidia_smi(tmp_path, monkeypatch):
    assert query_nvidia_smi(str(tmp_path / "nvidia-smi")) is None
    monkeypatch.setenv("PATH", str(tmp_path))
    assert query_nvidia_smi() is None


def test_failing_nvidia_smi_quotes_stderr(broken_smi):
    with pytest.raises(GPUSelectionError) as e:
        query_nvidia_smi(broken_smi)
    assert "status 9" in str(e.value)
    assert "couldn't communicate with the NVIDIA driver" in str(e.value)


def test_hanging_nvidia_smi_times_out(tmp_path):
    smi = write_fake_smi(tmp_path, script="#!/bin/sh\nexec sleep 30\n")
    with pytest.raises(GPUSelectionError, match="timed out"):
        query_nvidia_smi(smi, timeout=0.5)


def test_choice_is_deterministic_and_skips_busy():
    gpus = [gpu(3), gpu(0, busy=True), gpu(2), gpu(1)]
    assert choose_free_gpus(gpus, 2) == [1, 2]
    assert choose_free_gpus(list(reversed(gpus)), 2) == [1, 2]
    assert choose_free_gpus(gpus, 0) == []


def test_slot_rotates_start_and_wraps():
    gpus = [gpu(i) for i in range(4)] + [gpu(4, busy=True)]
    assert [choose_free_gpus(gpus, 1, slot=s) for s in range(5)] == [[0], [1], [2], [3], [0]]
    assert [choose_free_gpus(gpus, 2, slot=s) for s in range(3)] == [[0, 1], [2, 3], [0, 1]]
    # 3 of 4 free GPUs starting at (1*3) % 4 = 3, wrapping around.
    assert choose_free_gpus(gpus, 3, slot=1) == [3, 0, 1]


def test_not_enough_free_message():
    gpus = [gpu(0, busy=True), gpu(1, busy=True), gpu(2), gpu(3, busy=True)]
    with pytest.raises(GPUSelectionError) as e:
        choose_free_gpus(gpus, 2, slot=1, node_label="worker:1 on host h")
    msg = str(e.value)
    assert "asked for 2 GPUs for worker:1 on host h, only 1 of 4 free: [2]" in msg
    assert "busy: [0 (NVIDIA H100 80GB HBM3" in msg


@pytest.mark.parametrize("inherited", [None, "", " "])
def test_spark_addresses_verbatim_without_inherited(inherited):
    assert map_spark_addresses(["3", "1", "3"], inherited) == ["3", "1"]


def test_spark_addresses_members_of_inherited_are_verbatim():
    assert map_spark_addresses(["5", "6"], "4,5,6") == ["5", "6"]
    assert map_spark_addresses(["GPU-b"], "GPU-a,GPU-b") == ["GPU-b"]


def test_spark_addresses_mapped_by_index_into_inherited():
    assert map_spark_addresses(["2", "0"], "4, 5, 6") == ["6", "4"]


def test_spark_addresses_invalid_mapping_names_both_lists():
    with pytest.raises(GPUSelectionError) as e:
        map_spark_addresses(["7"], "4,5")
    assert "['7']" in str(e.value) and "['4', '5']" in str(e.value)


def test_select_uses_spark_addresses_without_nvidia_smi(broken_smi):
    a = select_gpus(2, ["1", "0"], "2,3", nvidia_smi=broken_smi)
    assert a == GPUAssignment("3,2", "spark", ("3", "2"))
    assert select_gpus(None, ["0"], None, nvidia_smi=broken_smi).cuda_visible_devices == "0"


def test_select_spark_gave_fewer_than_asked():
    with pytest.raises(GPUSelectionError) as e:
        select_gpus(2, ["0"], None, node_label="worker:0 on host h")
    assert "asked for 2 GPUs for worker:0 on host h" in str(e.value)
    assert "spark.task.resource.gpu.amount" in str(e.value)


def test_select_zero_gpus_hides_all(broken_smi):
    assert select_gpus(0, None, "0,1", nvidia_smi=broken_smi) == GPUAssignment("", "cpu", ())


def test_select_without_nvidia_smi_leaves_env(tmp_path):
    missing = str(tmp_path / "nvidia-smi")
    assert select_gpus(None, None, None, nvidia_smi=missing) == GPUAssignment(None, "none", ())
    assert select_gpus(None, [], "0", nvidia_smi=missing).source == "none"


def test_select_without_nvidia_smi_but_gpus_asked_raises(tmp_path):
    with pytest.raises(GPUSelectionError) as e:
        select_gpus(2, None, None, node_label="ps:0 on host h", nvidia_smi=str(tmp_path / "x"))
    msg = str(e.value)
    assert "asked for 2 GPUs for ps:0 on host h" in msg
    assert "nvidia-smi was not found" in msg and "spark.task.resource.gpu.amount" in msg


def test_select_from_nvidia_smi_default_one_and_slots(fake_smi):
    assert select_gpus(None, None, None, nvidia_smi=fake_smi) == GPUAssignment("0", "nvidia-smi", ("0",))
    assert select_gpus(1, None, None, slot=1, nvidia_smi=fake_smi).cuda_visible_devices == "2"
    assert select_gpus(2, None, None, nvidia_smi=fake_smi).devices == ("0", "2")


def test_select_from_nvidia_smi_not_enough_free(fake_smi):
    with pytest.raises(
        GPUSelectionError,
        match=r"asked for 3 GPUs for worker:1 on host h, "
        r"only 2 of 4 free: \[0, 2\]",
    ):
        select_gpus(3, None, None, node_label="worker:1 on host h", nvidia_smi=fake_smi)


def test_select_failing_nvidia_smi_raises(broken_smi):
    with pytest.raises(GPUSelectionError, match="couldn't communicate"):
        select_gpus(1, None, None, nvidia_smi=broken_smi)


def test_inherited_cuda_visible_devices_restricts_candidates(fake_smi):
    # GPU 3 is busy, so of "2,3" only 2 is left; UUIDs are matched too.
    assert select_gpus(None, None, "2,3", nvidia_smi=fake_smi).devices == ("2",)
    assert select_gpus(None, None, "GPU-22222222-cccc", nvidia_smi=fake_smi).devices == ("2",)
    with pytest.raises(GPUSelectionError, match=r"only 1 of 2 free: \[2\]"):
        select_gpus(2, None, "2,3", nvidia_smi=fake_smi)
    with pytest.raises(GPUSelectionError, match=r"inherited CUDA_VISIBLE_DEVICES \['7'\]"):
        select_gpus(None, None, "7", nvidia_smi=fake_smi)


def test_select_rejects_negative_num_gpus(fake_smi):
    with pytest.raises(ValueError, match="num_gpus must be >= 0"):
        select_gpus(-1, None, None, nvidia_smi=fake_smi)
