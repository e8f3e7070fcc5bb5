"""The driver's console is best effort: a slow console drops lines instead of holding up the nodes
(the printer alone, no cluster). A closed pipe, an encoding that cannot show a line and an error in
the driver's handling of a node's message, on a live cluster:
tests/cluster/console/test_console_best_effort.py."""

from __future__ import annotations

import io
import re

import pytest

from sparkdl.driver.console import NodeOutputPrinter

pytestmark = pytest.mark.timeout(240)


def test_a_slow_console_drops_lines_instead_of_holding_up_the_nodes():
    """Unit: the printer queues and returns at once; past its bound it counts drops and says so."""
    import threading

    from sparkdl.common.roles import NodeRole

    release = threading.Event()

    class Stuck(io.StringIO):
        def write(self, text):
            release.wait(30)
            return super().write(text)

    node = type("Node", (), {"role": NodeRole(0, "chief", 0)})()
    stream = Stuck()
    printer = NodeOutputPrinter(stream, max_pending_lines=10)
    try:
        for i in range(5):
            printer(node, [f"line {i}a", f"line {i}b", f"line {i}c"])  # returns although the console is stuck
        release.set()
        assert printer.flush(timeout=10)
        printer(node, ["after"])
        assert printer.flush(timeout=10)
    finally:
        release.set()
        printer.close(timeout=10)  # a cluster's shutdown does this: no writer thread outlives it
    text = stream.getvalue()
    assert printer.dropped > 0
    # Each notice counts the lines dropped since the one before (the writer may take the first
    # batch before or after the first drop), so together they count every dropped line.
    notices = re.findall(r"^\[sparkdl\] (\d+) lines of node output were not shown", text, re.M)
    assert notices and sum(map(int, notices)) == printer.dropped, text
    assert text.rstrip().endswith("[chief:0] after")
    assert not [t for t in threading.enumerate() if t.name == "sparkdl-node-output"]
