"""The driver's console is best effort (issue: an unwritable console cost every node and hung the
driver): a closed pipe or an encoding that cannot show a line never costs a node, and any
unexpected error in the driver's handling of a node's message becomes that node's recorded
failure instead of a silently dropped channel. (A slow console, the printer alone:
tests/unit/driver/test_driver_console.py.)"""

from __future__ import annotations

import io
import logging
import sys

import pytest

from sparkdl import ClusterError, TFCluster
from sparkdl.driver.console import NodeOutputPrinter

import cluster_functions as cluster_fns
from conftest import read_json_files

pytestmark = pytest.mark.timeout(240)


class ClosedPipe(io.TextIOBase):
    """stdout after ``| head -1`` exited: every write raises BrokenPipeError."""

    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")


def test_a_closed_console_pipe_costs_no_node(sc2, tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    caplog.set_level(logging.WARNING, logger="sparkdl.driver.console")
    cluster = TFCluster.run(
        sc2, cluster_fns.print_text, {"out": str(tmp_path), "text": "a line for a closed pipe", "times": 200}, 2
    )
    cluster.shutdown(timeout=120)  # before: nodes killed, no end recorded, shutdown waited it out
    assert set(read_json_files(tmp_path)) == {"node0", "node1"}, "both nodes ran map_fun to its end"
    assert "stopped printing node output on the console (BrokenPipeError" in caplog.text


def test_a_console_that_cannot_encode_a_line_shows_it_replaced(sc2, tmp_path, monkeypatch):
    console = io.TextIOWrapper(io.BytesIO(), encoding="ascii")  # e.g. LANG=C
    monkeypatch.setattr(sys, "stdout", console)
    cluster = TFCluster.run(sc2, cluster_fns.print_text, {"out": str(tmp_path), "text": "naïve café ✓"}, 2)
    cluster.shutdown(timeout=120)
    console.flush()
    shown = console.buffer.getvalue().decode("ascii")
    assert "[chief:0] na?ve caf? ?" in shown and "[worker:0] na?ve caf? ?" in shown
    assert set(read_json_files(tmp_path)) == {"node0", "node1"}


def test_an_unexpected_error_handling_a_node_message_is_that_nodes_recorded_failure(sc2, tmp_path, monkeypatch):
    def broken_printer(self, node, lines):
        raise RuntimeError("a bug in the driver's console")

    monkeypatch.setattr(NodeOutputPrinter, "__call__", broken_printer)
    cluster = TFCluster.run(sc2, cluster_fns.print_text, {"out": str(tmp_path), "text": "hello"}, 2)
    with pytest.raises(
        ClusterError,
        match=r"the driver failed handling its 'log' message "
        r"\(RuntimeError: a bug in the driver's console\)",
    ):
        cluster.shutdown(timeout=120)
