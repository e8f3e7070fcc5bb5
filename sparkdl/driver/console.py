"""The driver's console for node output: best effort, and never on the control path.

Nodes forward their lines over their control channels; the coordinator's handler threads hand
them to ``NodeOutputPrinter`` and go straight back to the channel. One writer thread prints
them, prefixed with the node's role; in a terminal, above ``cluster.train``'s progress bar, which
is redrawn below them (``progress.py``). Whatever the console does (a pipe closed early, as in
``spark-submit job.py | head``; an encoding that cannot show a character; a reader that stops
reading), no node waits for it or fails because of it: a line the console's encoding cannot
show is printed with replacement characters, lines beyond ``MAX_PENDING_LINES`` waiting for a
slow console are dropped (and counted in the next line printed), and a console that fails is
given up with one warning in the driver's log. Every line stays in the node's ``node.log``.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from collections import deque
from typing import TextIO

from .coordinator import NodeState
from .progress import is_terminal

logger = logging.getLogger(__name__)

#: Lines waiting for the console beyond which new lines are dropped rather than queued.
MAX_PENDING_LINES = 100_000


def _above_progress_bars(stream: TextIO):
    """A context in which lines written to ``stream`` go above the progress bars drawn in its
    terminal (``progress.py``'s tqdm bars: cleared, then redrawn below the lines), not into them."""
    if not is_terminal(stream):
        return contextlib.nullcontext()
    from tqdm import tqdm

    return tqdm.external_write_mode(file=stream)


class NodeOutputPrinter:
    """Prints the lines nodes forward to the driver, each prefixed with the node's role:index.

    ``printer(node, lines)`` queues and returns at once; each batch is written in one piece, in
    the order batches arrived. ``flush(timeout)`` waits (bounded) for the queue to be written;
    ``close(timeout)`` flushes and ends the writer thread (a later line starts a new one).
    """

    def __init__(self, stream: TextIO | None = None, max_pending_lines: int = MAX_PENDING_LINES):
        self.stream = stream
        self.max_pending_lines = max_pending_lines
        self.dropped = 0  #: lines dropped because the console could not keep up
        self.failure = ""  #: why the console was given up ('' while it works)
        self._cond = threading.Condition()
        self._batches: deque[tuple[str, int]] = deque()  # (text, lines), oldest first
        self._pending_lines = 0  # queued or being written
        self._unreported_drops = 0
        self._writer: threading.Thread | None = None
        self._closing = False

    def __call__(self, node: NodeState, lines: list[str]) -> None:
        """Queue ``lines`` from ``node`` for the console."""
        if not lines or self.failure:
            return
        prefix = f"[{node.role.label}] "
        text = "".join(prefix + line + "\n" for line in lines)
        with self._cond:
            if self._pending_lines + len(lines) > self.max_pending_lines:
                self.dropped += len(lines)
                self._unreported_drops += len(lines)
                return
            self._batches.append((text, len(lines)))
            self._pending_lines += len(lines)
            if self._writer is None:
                self._writer = threading.Thread(target=self._write_loop, name="sparkdl-node-output", daemon=True)
                self._writer.start()
            self._cond.notify_all()

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every queued line is written (or the console was given up); False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._pending_lines == 0 or self.failure, timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Write what is queued (bounded by ``timeout``), then end the writer thread."""
        self.flush(timeout)
        with self._cond:
            writer, self._closing = self._writer, True
            self._cond.notify_all()
        if writer is not None:
            writer.join(timeout)

    def _write_loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._batches or self._closing)
                if not self._batches:  # closing, and nothing left to write
                    self._writer, self._closing = None, False
                    return
                text, count = self._batches.popleft()
                drops, self._unreported_drops = self._unreported_drops, 0
            if drops:
                text = (
                    f"[sparkdl] {drops} lines of node output were not shown: the console could not keep "
                    "up (every line is in the nodes' logs)\n"
                ) + text
            self._write(text)
            with self._cond:
                self._pending_lines -= count
                if self.failure:
                    self._batches.clear()
                    self._pending_lines = 0
                self._cond.notify_all()

    def _write(self, text: str) -> None:
        stream = self.stream or sys.stdout  # looked up late: notebooks swap sys.stdout per cell
        try:
            with _above_progress_bars(stream):
                try:
                    stream.write(text)
                except UnicodeEncodeError:  # a console whose encoding cannot show a character
                    encoding = getattr(stream, "encoding", None) or "ascii"
                    stream.write(text.encode(encoding, errors="replace").decode(encoding))
                stream.flush()
        except Exception as exc:  # noqa: BLE001 - a closed pipe or stream must never cost a node
            self.failure = f"{type(exc).__name__}: {exc}"
            logger.warning(
                "sparkdl: stopped printing node output on the console (%s); every line is in the "
                "nodes' logs (cluster.cluster_info[i]['log_path'])",
                self.failure,
            )
