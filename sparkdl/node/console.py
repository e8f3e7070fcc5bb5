"""Which lines of a node's output reach the driver's console.

A TensorFlow process writes dozens of lines a person running a job does not need: its C++
start-up INFO lines (``cudart_stub``, ``cpu_feature_guard``, ``port.cc``), absl's
``InitializeLog`` notice, the INFO lines of its Python logging ("Collective all_reduce
tensors", "Enabled multi-worker collective ops") and a few well-known start-up errors that
only say a machine has no GPU. ``node.log`` keeps every line; the driver's console gets the
rest: sparkdl's lines, the user's prints and logging, Keras' epoch lines, and TensorFlow's
warnings and errors. Once ``map_fun`` has failed, only the line saying so (:data:`FAILURE_LINE`)
reaches the console: its traceback, which follows in ``node.log``, reaches the driver once, in
the error it raises. ``TFCluster.run(..., verbose=True)`` (or ``SPARKDL_VERBOSE=1``) forwards
everything.
"""

from __future__ import annotations

import re

#: absl's C++ log prefix: level letter, MMDD, time, thread id, ``file.cc:line]``.
_CPP_LINE = re.compile(r"^([IWEF])\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ [\w.\-/]+:\d+\] ")
#: The node's Python logging format (``tf_process``): INFO and DEBUG of the frameworks' loggers.
_FRAMEWORK_INFO = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO) (tensorflow|absl|tf_keras|keras|h5py)[\w.]*: "
)
#: Warnings and errors TensorFlow prints on every start of a process on a machine without a
#: GPU (or without TensorRT); they say nothing about the job.
_BENIGN_CPP = re.compile(
    r"failed call to cuInit|Unable to register cu(DNN|FFT|BLAS) factory|computation placer already registered"
    r"|Could not find TensorRT|Skipping loop optimization"
    # every dataset built with from_generator (as_dataset's) says this once per node
    r"|GeneratorDatasetOp::Dataset will not be optimized"
)
_PLAIN_CHATTER = (
    re.compile(r"^WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR$"),
    # cpu_feature_guard's INFO line goes on for a second line without a prefix
    re.compile(r"^To enable the following instructions: .* rebuild TensorFlow with the appropriate compiler flags"),
    re.compile(r"^/job:\w+/replica:\d+/task:\d+$"),  # a device name TensorFlow prints on its own at start-up
)


def is_framework_chatter(line: str) -> bool:
    """Whether ``line`` is TensorFlow's start-up or INFO output rather than something to show."""
    cpp = _CPP_LINE.match(line)
    if cpp:
        return cpp.group(1) == "I" or bool(_BENIGN_CPP.search(line))
    if _FRAMEWORK_INFO.match(line):
        return True
    return any(pattern.match(line) for pattern in _PLAIN_CHATTER)


#: How the TF process's line saying that ``map_fun`` failed starts (``tf_process``); its traceback follows.
FAILURE_LINE = "sparkdl: map_fun failed: "


def console_lines(lines: list[str]) -> list[str]:
    """The lines of ``lines`` to show on the driver's console (framework chatter left out)."""
    return [line for line in lines if not is_framework_chatter(line)]


class ConsoleFilter:
    """Which of one node's lines, in the order it wrote them, reach the driver's console: those
    :func:`console_lines` keeps, up to and including the :data:`FAILURE_LINE` (with ``verbose``,
    every line)."""

    def __init__(self, verbose: bool = False):
        self.verbose = verbose
        self.failed = False  # map_fun's failure was seen: what follows is its traceback

    def __call__(self, lines: list[str]) -> list[str]:
        if self.verbose:
            return lines
        shown = []
        for line in lines:
            if self.failed:
                break
            if line.startswith(FAILURE_LINE):
                self.failed = True
                shown.append(line)
            elif not is_framework_chatter(line):
                shown.append(line)
        return shown
