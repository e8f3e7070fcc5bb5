"""What the user sees at the driver, without a cluster: the progress bars a terminal gets for
``cluster.train`` and ``cluster.inference``, and the plain lines elsewhere (the epoch, its rows fed
and read, or read from the nodes' caches). (Node output, progress and job names on a live cluster:
tests/cluster/console/test_driver_view.py.)"""

from __future__ import annotations

import io
import re

import pytest

from sparkdl.common.roles import NodeRole
from sparkdl.driver.coordinator import NodeState
from sparkdl.driver.history import TrainingHistory
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


#: The quickstart's figures: 1,797 digits over two nodes, 899 rows each per epoch (one repeated), 10 epochs.
SHARE, EPOCHS = 899, 10
PER_EPOCH, TOTAL = 2 * SHARE, 2 * SHARE * EPOCHS


def _quickstart_nodes() -> list[NodeState]:
    return [
        NodeState(NodeRole(number, job, 0), metrics={"rows_received": 0, "rows_read": 0})
        for number, job in enumerate(("chief", "worker"))
    ]


def _report(nodes: list[NodeState], received: int, read: int, **chief) -> None:
    """Each node's latest progress report: rows its feed server received and its map_fun read."""
    for node in nodes:
        node.metrics.update(rows_received=received, rows_read=read)
    nodes[0].metrics.update(chief)


def _plain(nodes, history=None) -> TrainProgress:
    """A display writing plain lines (not a terminal), none of them periodic, Spark's partitions known."""
    return TrainProgress(
        nodes, TOTAL, EPOCHS, io.StringIO(), interval_s=600, history=history, partitions=lambda: (2, 2)
    )


def _shown(progress: TrainProgress) -> list[str]:
    """The lines printed, without the seconds they end with."""
    return [re.sub(r" · \d+ s$", "", line) for line in progress.stream.getvalue().splitlines()]


def test_the_line_at_the_end_of_a_feeding_job_shows_that_epoch_fed_before_the_nodes_report_it():
    """The nodes report their rows at most once a second: as epoch 1's feeding job ends they may not
    have. Every row of it reached them, and they train epoch 1 (the line said '0/17,980 rows fed,
    0 read · epoch 2/10')."""
    nodes = _quickstart_nodes()
    progress = _plain(nodes)
    _report(nodes, 0, 0, fit_begin=True, epoch=0)  # the chief began its fit: Keras' epoch counts from 0
    progress.epoch_done(0)
    assert _shown(progress) == ["sparkdl train [0%]: epoch 1/10 · 1,798/1,798 rows fed, 0 read · partitions 2/2"]


def test_an_epoch_fed_from_spark_shows_its_rows_fed_and_read():
    nodes = _quickstart_nodes()
    progress = _plain(nodes)
    _report(nodes, 500, 450, step=7, loss=2.25, epoch=0)
    assert (
        progress.describe()
        == "epoch 1/10 · 1,000/1,798 rows fed, 900 read · partitions 2/2 · chief:0: step 7, loss 2.25"
    )
    progress.epoch_done(0)
    _report(nodes, SHARE + 300, SHARE)  # without a cache, epoch 2 is fed while the nodes train epoch 1
    assert progress.describe().startswith("epoch 2/10 · 600/1,798 rows fed, 0 read · ")


def test_an_epoch_replayed_from_the_caches_shows_its_rows_read():
    nodes = _quickstart_nodes()
    progress = _plain(nodes)
    progress.epoch_done(0)
    _report(nodes, SHARE, SHARE + 600, step=45, epoch=1, loss=1.5)
    # no Spark job feeds epoch 2, and the nodes read past what Spark fed: their caches replay it,
    # even before the driver has said so (a node holding its whole share replays without its word)
    expected = "epoch 2/10 · from cache: 1,200/1,798 rows read · partitions 2/2 · chief:0: step 45, loss 1.5"
    assert progress.describe() == expected
    progress.replaying(1)
    assert progress.describe() == expected
    _report(nodes, SHARE, 2 * SHARE)  # epoch 2 read whole, epoch 3 not begun: still epoch 2
    assert progress.describe().startswith("epoch 2/10 · from cache: 1,798/1,798 rows read · ")
    _report(nodes, SHARE, 4 * SHARE + 1)
    assert progress.describe().startswith("epoch 5/10 · from cache: 2/1,798 rows read · ")


def test_every_replayed_epoch_gets_a_line_as_the_chief_ends_it_and_the_last_line_counts_the_cache():
    """Plain lines: epoch 1 as its feeding job ends, each cached epoch as the chief reports its end
    (ctx.progress_callback), but the last, which the final line shows; then the chief's epoch lines."""
    history = TrainingHistory()
    nodes = _quickstart_nodes()
    progress = _plain(nodes, history).start()
    progress.epoch_done(0)
    progress.replaying(1)
    for epoch in range(EPOCHS):
        history.record({"epoch": epoch, "epoch_end": True, "loss": 1.0 / (epoch + 1)})
    _report(nodes, SHARE, EPOCHS * SHARE, step=300, loss=0.1)
    progress.close(succeeded=True)
    lines = _shown(progress)
    assert lines[0].startswith("sparkdl train [0%]: epoch 1/10 · 1,798/1,798 rows fed, 0 read · partitions 2/2"), lines
    cached = [re.sub(r"^sparkdl train \[\d+%\]: ", "", line).split(" · partitions")[0] for line in lines[1:9]]
    assert cached == [f"epoch {n}/10 · from cache: 1,798/1,798 rows read" for n in range(2, 10)], lines
    assert lines[9] == (
        "sparkdl train [fed]: 17,980/17,980 rows fed (16,182 from the nodes' caches), 17,980 read · epoch 10/10"
        " · partitions 2/2 · chief:0: step 300, loss 0.1"
    )
    assert lines[10:] == [f"epoch {n}/10: loss {1.0 / n:.4f}" for n in range(1, 11)]


def test_an_epoch_the_chief_ends_before_its_feeding_job_ends_is_not_called_cached():
    """The chief may report an epoch's end before the driver sees its feeding job end: the line for
    it waits for the driver, which then knows the epoch was fed (its own line says so)."""
    history = TrainingHistory()
    nodes = _quickstart_nodes()
    progress = TrainProgress(nodes, 2 * PER_EPOCH, 2, io.StringIO(), interval_s=600, history=history).start()
    history.record({"epoch": 0, "epoch_end": True, "loss": 1.0})
    progress.epoch_done(0)
    _report(nodes, 2 * SHARE, 2 * SHARE)
    progress.epoch_done(1)
    history.record({"epoch": 1, "epoch_end": True, "loss": 0.5})
    progress.close(succeeded=True)
    lines = _shown(progress)
    assert lines[:2] == [
        "sparkdl train [50%]: epoch 1/2 · 1,798/1,798 rows fed, 1,798 read",  # the chief read what it ended
        "sparkdl train [fed]: 3,596/3,596 rows fed, 3,596 read · epoch 2/2",
    ], lines
    assert "cache" not in progress.stream.getvalue()


def test_the_line_is_never_behind_the_epochs_the_chief_ended():
    """The nodes' rows are reported at most once a second, the chief's epoch ends at once: a line
    after the chief ended epoch 3 shows epoch 3 read whole, not epoch 2 half read."""
    history = TrainingHistory()
    nodes = _quickstart_nodes()
    progress = _plain(nodes, history)
    progress.epoch_done(0)
    progress.replaying(1)
    _report(nodes, SHARE, SHARE + SHARE // 2)
    for epoch in range(3):
        history.record({"epoch": epoch, "epoch_end": True, "loss": 1.0})
    assert progress.describe() == "epoch 3/10 · from cache: 1,798/1,798 rows read · partitions 2/2"
