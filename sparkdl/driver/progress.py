"""What the driver shows while ``cluster.train`` feeds (rows fed and read, epochs, partitions, the
chief's loss) and while an action runs on an RDD from ``cluster.inference`` (partitions and rows scored).

In a terminal it is a tqdm progress bar; anywhere else (Jupyter, spark-submit logs redirected
to a file) it is one plain, readable line every ``interval_s`` seconds and at the end of each
epoch, with no widgets. The figures come from the nodes' own progress reports (rows their
feed server received and rows their ``DataFeed`` handed to ``map_fun``; step/loss from
``ctx.progress_callback()``) and, with a classic SparkContext, from Spark's status tracker
(partitions of the feeding job; a Spark Connect client has no status tracker, and the line
leaves the partitions out). Turn it off with ``TFCluster.run(...,
progress=False)`` or ``SPARKDL_PROGRESS=0``.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Callable, TextIO

from ..common.timeouts import BAR_INTERVAL_S, PLAIN_INTERVAL_S
from ..transport import protocol
from .coordinator import NodeState
from .history import TrainingHistory


def progress_enabled(requested: bool | None) -> bool:
    """The caller's choice, else ``SPARKDL_PROGRESS`` (on unless it is 0/false/no/off)."""
    if requested is not None:
        return bool(requested)
    return os.environ.get("SPARKDL_PROGRESS", "1").strip().lower() not in ("0", "false", "no", "off")


def _in_jupyter() -> bool:
    """Whether this driver runs in a Jupyter kernel (where a redrawn bar would need widgets)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    return type(shell).__name__ == "ZMQInteractiveShell"


def is_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is a terminal, where progress is a redrawn bar (not in Jupyter)."""
    try:
        return stream.isatty() and not _in_jupyter()
    except (AttributeError, ValueError):
        return False


class TrainProgress:
    """Shows one ``cluster.train`` call's progress until closed (a context manager)."""

    def __init__(
        self,
        nodes: list[NodeState],
        total_rows: int,
        epochs: int,
        stream: TextIO | None = None,
        interval_s: float | None = None,
        *,
        history: TrainingHistory | None = None,
        partitions: Callable[[], "tuple[int, int] | None"] | None = None,
    ):
        self.nodes = nodes
        self._partitions = partitions  # (completed, total) tasks of the latest feeding job, or None
        self.total_rows = total_rows
        self.epochs = epochs
        self.epoch = 0
        self.history = history  # the chief's epoch logs, one line per epoch when the call succeeds
        self.stream = stream or sys.stdout
        self.terminal = is_terminal(self.stream)
        self.interval_s = interval_s or (BAR_INTERVAL_S if self.terminal else PLAIN_INTERVAL_S)
        self._base = {
            n.role.node_number: (int(n.metrics.get("rows_received", 0)), int(n.metrics.get("rows_read", 0)))
            for n in nodes
        }
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._bar = None
        self._thread = threading.Thread(target=self._run, name="sparkdl-progress", daemon=True)

    # -- figures --

    def rows(self) -> tuple[int, int]:
        """(fed, read) during this call: rows the data nodes received, and rows their map_funs read."""
        fed = sum(int(n.metrics.get("rows_received", 0)) - self._base[n.role.node_number][0] for n in self.nodes)
        read = sum(int(n.metrics.get("rows_read", 0)) - self._base[n.role.node_number][1] for n in self.nodes)
        return fed, read

    def partitions(self) -> tuple[int, int] | None:
        """(completed, total) tasks of the latest feeding job; None when Spark cannot tell (Connect)."""
        return self._partitions() if self._partitions is not None else None

    def chief_metrics(self) -> dict:
        """The latest step/epoch/loss (and other metrics) the first data node reported."""
        metrics = dict(self.nodes[0].metrics) if self.nodes else {}
        for key in ("rows_read", "rows_received", "epoch_end", "fit_begin", "awaits_word", "fit_end"):
            metrics.pop(key, None)
        return metrics

    def describe(self) -> str:
        """The status line (without the bar)."""
        # Epochs replayed from the nodes' caches run no Spark job: count them by the rows read.
        per_epoch = self.total_rows // self.epochs if self.epochs else 0
        epoch = max(self.epoch, self.rows()[1] // per_epoch if per_epoch else 0)
        parts = [f"epoch {min(epoch + 1, self.epochs)}/{self.epochs}"]
        partitions = self.partitions()
        if partitions is not None:
            parts.append(f"partitions {partitions[0]}/{partitions[1]}")
        chief = self.chief_metrics()
        if chief:
            shown = ", ".join(
                f"{key} {value:.4g}" if isinstance(value, float) else f"{key} {value}" for key, value in chief.items()
            )
            parts.append(f"{self.nodes[0].role.label}: {shown}")
        return " · ".join(parts)

    # -- display --

    def start(self) -> "TrainProgress":
        """Begin showing progress."""
        if self.terminal:
            from tqdm import tqdm

            self._bar = tqdm(
                total=self.total_rows,
                unit="rows",
                unit_scale=True,
                desc="sparkdl train",
                file=self.stream,
                dynamic_ncols=True,
            )
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.render()

    def render(self, final: bool = False) -> None:
        """Draw the bar, or print a plain line."""
        fed, read = self.rows()
        fed = max(fed, read)  # rows replayed from a node's cache were delivered without feeding
        fed = self.total_rows if final else min(fed, self.total_rows)
        if self._bar is not None:
            self._bar.n = fed
            self._bar.set_postfix_str(f"{read:,} read · {self.describe()}", refresh=True)
            return
        percent = 100.0 * fed / self.total_rows if self.total_rows else 100.0
        elapsed = time.monotonic() - self._started
        state = "fed" if final else f"{percent:.0f}%"
        print(
            f"sparkdl train [{state}]: {fed:,}/{self.total_rows:,} rows fed, {read:,} read · {self.describe()} · "
            f"{elapsed:.0f} s",
            file=self.stream,
            flush=True,
        )

    def epoch_done(self, epoch: int) -> None:
        """Note the end of feeding epoch ``epoch`` (0-based) and show it at once."""
        self.epoch = epoch + 1
        if self._bar is None and self.epoch < self.epochs:
            self.render()

    def close(self, succeeded: bool) -> None:
        """Stop the display; when the call succeeded, a final line (or bar refresh), then the
        chief's metrics of each epoch if a ``history`` was given."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
        if succeeded:
            self.render(final=True)
        if self._bar is not None:
            self._bar.close()
        if succeeded and self.history is not None:
            for line in self.history.epoch_lines(self.epochs):
                print(line, file=self.stream, flush=True)

    def __enter__(self) -> "TrainProgress":
        return self.start()

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(exc_type is None)


class InferenceProgress:
    """Shows how far actions on the RDDs returned by ``cluster.inference`` have got.

    Those RDDs are lazy: their partitions are scored whenever the user runs an action, in the
    user's own Spark job. So this display has no thread of its own; it is driven by the nodes,
    which report each inference partition they have answered in full, with the Spark stage
    that asked (``watch`` registers a ``cluster.inference`` call and its partition count). Each
    stage is one pass over the partitions: in a terminal a tqdm bar, elsewhere a plain line on
    the first partition, at most every ``interval_s`` seconds after that, and on the last.
    """

    def __init__(self, stream: TextIO | None = None, interval_s: float | None = None):
        self.stream = stream
        self.interval_s = interval_s
        self._partitions: dict[str, int] = {}
        self._passes: dict[tuple[str, int], _InferencePass] = {}
        self._lock = threading.Lock()

    def watch(self, run: str, partitions: int | None) -> None:
        """Follow the partitions of the ``cluster.inference`` call identified by ``run`` (None: unknown)."""
        with self._lock:
            self._partitions[run] = partitions

    def __call__(self, node: NodeState, event: protocol.Inferred) -> None:
        """A node answered one partition in full."""
        with self._lock:
            if event.run not in self._partitions:
                return
            key = (event.run, event.stage)
            if key not in self._passes:
                self._passes[key] = _InferencePass(self._partitions[event.run])
            self._passes[key].add(event.partition, event.rows, self.stream or sys.stdout, self.interval_s)

    def close(self) -> None:
        """Close any bar still open (an action that did not read every partition)."""
        with self._lock:
            for current in self._passes.values():
                current.close()
            self._passes.clear()
            self._partitions.clear()


class _InferencePass:
    """One Spark stage's pass over the partitions of an inference RDD."""

    def __init__(self, partitions: int | None):
        self.partitions = partitions  # None: a DataFrame's, unknown until it has run
        self.rows: dict = {}  # rows answered per partition (a retried task counts once)
        self._started = time.monotonic()
        self._printed_at: float | None = None
        self._bar = None

    def add(self, partition, rows: int, stream: TextIO, interval_s: float | None) -> None:
        self.rows[partition] = rows
        done, scored = len(self.rows), sum(self.rows.values())
        complete = self.partitions is not None and done >= self.partitions
        if is_terminal(stream):
            if self._bar is None:
                from tqdm import tqdm

                self._bar = tqdm(
                    total=self.partitions, unit="partitions", desc="sparkdl inference", file=stream, dynamic_ncols=True
                )
            self._bar.n = done
            self._bar.set_postfix_str(f"{scored:,} rows scored", refresh=True)
            if complete:
                self.close()
            return
        now = time.monotonic()
        if self._printed_at is None or complete or now - self._printed_at >= (interval_s or PLAIN_INTERVAL_S):
            self._printed_at = now
            of = f"/{self.partitions}" if self.partitions is not None else ""
            print(
                f"sparkdl inference: {done}{of} partitions, {scored:,} rows scored · {now - self._started:.0f} s",
                file=stream,
                flush=True,
            )

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
