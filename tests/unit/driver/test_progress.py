"""What the user sees at the driver, without a cluster: the progress bars a terminal gets for
``cluster.train`` and ``cluster.inference``. (Node output, progress and job names on a live cluster:
tests/cluster/console/test_driver_view.py.)"""

from __future__ import annotations

import io

import pytest

from sparkdl.driver.progress import InferenceProgress, TrainProgress
from sparkdl.transport.protocol import Inferred

pytestmark = pytest.mark.timeout(300)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_a_progress_bar():
    """TrainProgress draws a tqdm bar on a terminal; a fake tty stands in for one (no real
    terminal exists under pytest). The nodes here are the cluster's real NodeState objects."""
    from sparkdl.common.roles import NodeRole
    from sparkdl.driver.coordinator import NodeState

    node = NodeState(NodeRole(0, "chief", 0), metrics={"rows_received": 0, "rows_read": 0})
    stream = _Terminal()
    progress = TrainProgress(
        nodes=[node], total_rows=1000, epochs=2, stream=stream, partitions=lambda: (3, 4)
    )  # as Spark's status tracker would say
    progress.start()
    node.metrics.update(rows_received=400, rows_read=300, step=7, loss=0.25)
    progress.render()
    progress.close(succeeded=True)
    drawn = stream.getvalue()
    assert "sparkdl train" in drawn and "1.00k/1.00k" in drawn, drawn
    assert "chief:0: step 7, loss 0.25" in drawn
    assert "partitions 3/4" in drawn


def test_a_terminal_gets_an_inference_bar_per_action():
    """InferenceProgress on a fake tty (no real terminal under pytest): one bar per Spark stage."""
    progress = InferenceProgress(stream=_Terminal())
    progress.watch("run1", partitions=2)
    for stage in (7, 9):
        for partition in (0, 1):
            progress(None, Inferred(run="run1", stage=stage, partition=partition, rows=50))
    progress(None, Inferred(run="unknown", stage=1, partition=0, rows=5))  # not watched: ignored
    progress.close()
    drawn = progress.stream.getvalue()
    # A bar redraws itself after \r and ends its line when closed: two lines, each last drawn complete.
    finals = [bar.rsplit("\r", 1)[-1] for bar in drawn.rstrip("\n").split("\n")]
    assert len(finals) == 2 and all("2/2" in bar and "100 rows scored" in bar for bar in finals), drawn
    assert "5 rows" not in drawn


def test_node_lines_go_above_the_progress_bar_not_into_it():
    """In a terminal, a node's line printed while the bar is drawn starts a line of its own and
    the bar is drawn again below it (a fake tty: no real terminal under pytest)."""
    from sparkdl.common.roles import NodeRole
    from sparkdl.driver.console import NodeOutputPrinter
    from sparkdl.driver.coordinator import NodeState

    node = NodeState(NodeRole(0, "chief", 0), metrics={"rows_received": 0, "rows_read": 0})
    stream = _Terminal()
    progress = TrainProgress(nodes=[node], total_rows=1000, epochs=1, stream=stream)
    printer = NodeOutputPrinter(stream)
    progress.start()
    try:
        node.metrics.update(rows_received=400, rows_read=300)
        progress.render()
        printer(node, ["Epoch 1/1", "a node line"])
        assert printer.flush(timeout=30)
        drawn = stream.getvalue()
    finally:
        printer.close()
        progress.close(succeeded=True)
    lines = drawn.split("\n")
    node_lines = [line.rsplit("\r", 1)[-1] for line in lines if "[chief:0]" in line]
    assert node_lines == ["[chief:0] Epoch 1/1", "[chief:0] a node line"], drawn
    after = drawn.rsplit("[chief:0] a node line\n", 1)[1]
    assert "sparkdl train" in after, "the bar is drawn again below the node's lines"
