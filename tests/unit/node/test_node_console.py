"""What of a node's output reaches the driver's console: TensorFlow's start-up and INFO chatter
stays in node.log unless verbose; the user's lines and TensorFlow's warnings always come through.
Which lines are chatter, without a cluster (the driver's console on a live cluster:
tests/cluster/console/test_console_filter_cluster.py)."""

from __future__ import annotations

import pytest

from sparkdl.node.console import FAILURE_LINE, ConsoleFilter, console_lines, is_framework_chatter

pytestmark = pytest.mark.timeout(300)


# Lines as TensorFlow 2.21 prints them on this project's machines.
CHATTER = [
    "I0000 00:00:1795431352.260693   22649 cudart_stub.cc:31] Could not find cuda drivers on your machine, "
    "GPU will not be used.",
    "I0000 00:00:1795431355.432182   22649 cpu_feature_guard.cc:210] This TensorFlow binary is optimized to use "
    "available CPU instructions in performance-critical operations.",
    "To enable the following instructions: AVX2 FMA, in other operations, rebuild TensorFlow with the appropriate "
    "compiler flags.",
    "E0000 00:00:1795431358.200287   22649 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: "
    "Failed call to cuInit: UNKNOWN ERROR (303)",
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "2026-11-23 10:57:10,398 INFO tensorflow: Collective all_reduce tensors: 1 all_reduces, num_devices = 1, "
    "group_size = 2, implementation = CommunicationImplementation.AUTO, num_packs = 1",
    "/job:worker/replica:0/task:0",
    "W0000 00:00:1795434435.941374    1772 dataset.cc:997] Input of GeneratorDatasetOp::Dataset will not be "
    "optimized because the dataset does not implement the AsGraphDefInternal() method needed to apply optimizations.",
]


SHOWN = [
    "sparkdl: starting map_fun on NodeContext(chief:0, node_number=0, num_workers=2)",
    "Epoch 1/3",
    "118/118 - 3s - loss: 0.4211 - accuracy: 0.8750 - 3s/epoch - 25ms/step",
    "2026-11-23 10:57:32,180 WARNING tensorflow: Your input ran out of data; interrupting training.",
    "W0000 00:00:1795431358.200287   22649 some_op.cc:12] a C++ warning",
    "E0000 00:00:1795431358.200287   22649 collective_ops.cc:99] a real C++ error",
    "2026-11-23 10:57:10,398 INFO user: a user's INFO logging line",
    "Traceback (most recent call last):",
]


@pytest.mark.parametrize("line", CHATTER)
def test_tensorflow_chatter_is_recognised(line):
    assert is_framework_chatter(line)


@pytest.mark.parametrize("line", SHOWN)
def test_what_a_person_needs_is_shown(line):
    assert not is_framework_chatter(line)
    assert console_lines(CHATTER + [line]) == [line]


def test_after_map_fun_failed_only_the_line_saying_so_reaches_the_console():
    """The traceback that follows the failure line is the driver's error's to show (once); node.log keeps it."""
    failure = f"{FAILURE_LINE}ValueError: boom (its traceback is in this node's log)"
    traceback = ["Traceback (most recent call last):", '  File "job.py", line 1', "ValueError: boom"]
    output = ["Epoch 1/2", CHATTER[0], failure, *traceback]
    shown = ConsoleFilter()
    assert shown(output[:3]) == ["Epoch 1/2", failure]
    assert shown(output[3:]) == [], "the traceback arrives in later batches too"
    assert ConsoleFilter(verbose=True)(output) == output, "verbose forwards every line"
