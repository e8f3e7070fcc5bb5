"""What the driver shows while ``cluster.train`` feeds (the epoch, its rows fed and read, partitions,
the chief's loss) and while an action runs on an RDD from ``cluster.inference`` (partitions and rows scored).

In a terminal it is a tqdm progress bar; anywhere else (Jupyter, spark-submit logs redirected
to a file) it is one plain, readable line every ``interval_s`` seconds and at the end of each
epoch, with no widgets. The figures come from the nodes' own progress reports (rows their feed
server received and rows their ``DataFeed`` handed to ``map_fun``, at most once a second;
step/loss and each epoch's end from ``ctx.progress_callback()``), from the driver's feeding (an
epoch whose Spark job ended was received whole) and, with a classic SparkContext, from Spark's
status tracker (partitions of the feeding job; a Spark Connect client has no status tracker, and
the line leaves the partitions out). An epoch the nodes replay from their caches runs no Spark
job: its line says ``from cache``, with the rows read. Turn it off with ``TFCluster.run(...,
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
    """Shows one ``cluster.train`` call's progress until closed (a context manager).

    A line shows the call's share of rows read, then the epoch the nodes are at (the furthest one
    rows were fed or read for): an epoch fed from Spark with its rows fed and read, one the nodes
    replay from their caches ``from cache`` with its rows read. Plain lines come every
    ``interval_s`` seconds, at the end of each epoch's feeding job and, for the epochs replayed from
    the caches, as the chief reports each one's end (``ctx.progress_callback()``; not the last epoch,
    which the final line shows).
    """

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
        self.epochs = max(1, epochs)
        self.per_epoch = total_rows // self.epochs  # the data nodes' rows of one epoch, every split
        self.epoch = 0  # epochs whose feeding job ended: every row of them reached the nodes
        self.replayed_from: int | None = None  # the first epoch (0-based) the nodes replay from their caches
        self.history = history  # the chief's epoch logs, one line per epoch when the call succeeds
        self._reports_before = history.reports if history is not None else 0
        self._reports_shown = self._reports_before  # the chief's epoch-end reports looked at (_show_ended_epochs)
        self._lock = threading.Lock()
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
        """(fed, read) during this call: rows Spark fed the data nodes and rows their map_funs read
        (fed, or from their caches), as the nodes last reported them (at most once a second), and
        at least what the driver knows: the feeding job of an ended epoch delivered it whole, and
        before the chief ends an epoch it read the epoch whole (every node, under
        MultiWorkerMirroredStrategy)."""
        fed, read = self._reported()
        ended = 0
        if self.history is not None:
            ended = min(self.history.reports - self._reports_before, self.epochs)
        return max(fed, ended * self.per_epoch), max(read, ended * self.per_epoch)

    def _reported(self) -> tuple[int, int]:
        """(fed, read) as the nodes reported them, and at least the epochs whose feeding job ended."""
        received = sum(int(n.metrics.get("rows_received", 0)) - self._base[n.role.node_number][0] for n in self.nodes)
        read = sum(int(n.metrics.get("rows_read", 0)) - self._base[n.role.node_number][1] for n in self.nodes)
        fed = max(received, min(self.epoch, self.epochs) * self.per_epoch)
        return min(fed, self.total_rows), min(read, self.total_rows)

    def epoch_rows(self) -> tuple[int, int, int]:
        """(epoch, fed, read): the furthest epoch (0-based) rows were fed or read for, and its rows
        fed from Spark and read."""
        fed, read = self.rows()
        if not self.per_epoch:
            return 0, fed, read
        epoch = min((max(fed, read, 1) - 1) // self.per_epoch, self.epochs - 1)
        within = lambda rows: min(max(rows - epoch * self.per_epoch, 0), self.per_epoch)  # noqa: E731
        return epoch, within(fed), within(read)

    def from_cache(self, epoch: int) -> bool:
        """Whether the nodes replay ``epoch`` (0-based) from their caches: the driver said so, or it
        begins past the rows Spark fed, which the nodes read beyond (a node reads a fed row only once
        it has it; a node holding its whole share replays without waiting for the driver's word)."""
        if self.replayed_from is not None and epoch >= self.replayed_from:
            return True
        fed, read = self._reported()
        return read > fed and epoch * self.per_epoch >= fed

    def partitions(self) -> tuple[int, int] | None:
        """(completed, total) tasks of the latest feeding job; None when Spark cannot tell (Connect)."""
        return self._partitions() if self._partitions is not None else None

    def chief_metrics(self) -> dict:
        """The latest step and loss (and other metrics) the first data node reported; not its Keras
        epoch, which counts from 0 (the line shows the epoch from 1)."""
        metrics = dict(self.nodes[0].metrics) if self.nodes else {}
        for key in ("rows_read", "rows_received", "epoch", "epoch_end", "fit_begin", "awaits_word", "fit_end"):
            metrics.pop(key, None)
        return metrics

    def describe(self) -> str:
        """The status line (without the bar): the epoch and its rows, partitions, the chief's metrics."""
        return self._epoch_line(*self.epoch_rows())

    def describe_ended(self, epoch: int) -> str:
        """The line of ``epoch`` (0-based) once the chief reported its end (read whole, see :meth:`rows`)."""
        fed, _ = self.rows()
        fed_in = min(max(fed - epoch * self.per_epoch, 0), self.per_epoch)
        return self._epoch_line(epoch, fed_in, self.per_epoch)

    def summary(self) -> str:
        """The last line, once the call fed every row: rows fed (those the caches replayed among
        them) and read, the last epoch, partitions, the chief's metrics."""
        _, read = self.rows()
        replayed = 0
        if self.replayed_from is not None:
            replayed = min(read, (self.epochs - self.replayed_from) * self.per_epoch)
        cached = f" ({replayed:,} from the nodes' caches)" if replayed else ""
        rows = f"{self.total_rows:,}/{self.total_rows:,} rows fed{cached}, {read:,} read"
        return " · ".join([rows, f"epoch {self.epochs}/{self.epochs}", *self._details()])

    def _epoch_line(self, epoch: int, fed: int, read: int) -> str:
        if self.from_cache(epoch):
            rows = f"from cache: {read:,}/{self.per_epoch:,} rows read"
        else:  # fed from Spark: every row read was fed
            rows = f"{max(fed, read):,}/{self.per_epoch:,} rows fed, {read:,} read"
        return " · ".join([f"epoch {epoch + 1}/{self.epochs}", rows, *self._details()])

    def _details(self) -> list[str]:
        parts = []
        partitions = self.partitions()
        if partitions is not None:
            parts.append(f"partitions {partitions[0]}/{partitions[1]}")
        chief = self.chief_metrics()
        if chief:
            shown = ", ".join(
                f"{key} {value:.4g}" if isinstance(value, float) else f"{key} {value}" for key, value in chief.items()
            )
            parts.append(f"{self.nodes[0].role.label}: {shown}")
        return parts

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
        if self._bar is not None or self.history is None:
            while not self._stop.wait(self.interval_s):
                self.render()
            return
        due = time.monotonic() + self.interval_s
        while not self._stop.is_set():
            # Wake at each epoch end the chief reports (or soon, while one waits for the driver to
            # know how its epoch was fed), and for the periodic line.
            wait = min(BAR_INTERVAL_S, max(0.0, due - time.monotonic()))
            if self._show_ended_epochs():
                self.history.wait_for_reports(self._reports_shown + 1, wait)
            else:
                self._stop.wait(wait)
            if time.monotonic() >= due:
                self.render()
                due = time.monotonic() + self.interval_s

    def _show_ended_epochs(self) -> bool:
        """A line for each epoch replayed from the caches whose end the chief reported since the
        last call, but the last epoch (the final line shows it); whether every reported epoch was
        looked at (False: one waits until the driver knows whether it was fed or replayed)."""
        with self._lock:
            reports = self.history.reports if self.history is not None else self._reports_shown
            while self._reports_shown < reports:
                epoch = self._reports_shown - self._reports_before  # the call's epochs, counted from 0
                replayed = self.from_cache(epoch)
                if not (replayed or epoch < self.epoch or epoch >= self.epochs):
                    return False
                if replayed and epoch < self.epochs - 1:
                    read = max(self.rows()[1], (epoch + 1) * self.per_epoch)
                    self._print(self._percent(read), self.describe_ended(epoch))
                self._reports_shown += 1
            return True

    def render(self, final: bool = False) -> None:
        """Draw the bar (rows read), or print a plain line."""
        read = self.total_rows if final else self.rows()[1]
        text = self.summary() if final else self.describe()
        if self._bar is not None:
            self._bar.n = read
            self._bar.set_postfix_str(text, refresh=True)
            return
        self._print("fed" if final else self._percent(read), text)

    def _percent(self, read: int) -> str:
        return f"{100.0 * read / self.total_rows if self.total_rows else 100.0:.0f}%"

    def _print(self, state: str, text: str) -> None:
        elapsed = time.monotonic() - self._started
        print(f"sparkdl train [{state}]: {text} · {elapsed:.0f} s", file=self.stream, flush=True)

    def epoch_done(self, epoch: int) -> None:
        """Note the end of feeding epoch ``epoch`` (0-based) and show it at once."""
        self.epoch = epoch + 1
        if self._bar is None and self.epoch < self.epochs:
            self.render()

    def replaying(self, first_epoch: int) -> None:
        """Note that the nodes replay the epochs from ``first_epoch`` (0-based) on from their caches:
        no Spark job feeds them."""
        self.replayed_from = first_epoch

    def close(self, succeeded: bool) -> None:
        """Stop the display; when the call succeeded, a final line (or bar refresh), then the
        chief's metrics of each epoch if a ``history`` was given."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
        if succeeded:
            if self._bar is None:
                self._show_ended_epochs()  # those reported since the thread last looked
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
