"""A node's log: the TF process's stdout and stderr, kept in ``node.log`` and forwarded to the driver.

The supervisor reads the TF process's output from a pipe and appends it to the node's log
file as it comes (so the file is complete whatever happens to the driver). A second thread
follows the file and forwards whole lines to the driver over the authenticated channel;
it never slows the node down (it reads the file, not the pipe), and before the supervisor
reports the node's end it forwards the rest, so the driver gets every line.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from pathlib import Path
from typing import Callable

READ_BYTES = 64 * 1024
FORWARD_BATCH_BYTES = 256 * 1024


def log_tail(path: Path, max_lines: int = 40, max_bytes: int = 16384) -> str:
    """The last lines of a log file ('' if it does not exist)."""
    try:
        with open(path, "rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - max_bytes))
            lines = log.read().decode(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(deque(lines, maxlen=max_lines))


class NodeLog:
    """Copies a pipe into the log file and (optionally) forwards its lines with ``send_lines``."""

    def __init__(self, path: Path, pipe_fd: int, send_lines: Callable[[list[str]], None] | None):
        self.path = path
        self._fd = pipe_fd
        self._send_lines = send_lines
        # Create the file now: the forwarder opens it as it starts, maybe before the copier's first write.
        path.touch()
        self._start_offset = path.stat().st_size
        self._new_data = threading.Event()
        self._eof = threading.Event()
        self._copier = threading.Thread(target=self._copy, name="node-log-copy", daemon=True)
        self._forwarder = threading.Thread(target=self._forward, name="node-log-forward", daemon=True)

    def start(self) -> None:
        """Start copying (and forwarding)."""
        self._copier.start()
        if self._send_lines is not None:
            self._forwarder.start()

    def _copy(self) -> None:
        with open(self.path, "ab") as out, os.fdopen(self._fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(READ_BYTES):
                out.write(chunk)
                out.flush()
                self._new_data.set()
        self._eof.set()
        self._new_data.set()

    def _forward(self) -> None:
        offset, partial = self._start_offset, b""
        with open(self.path, "rb") as log:
            while True:
                self._new_data.wait()
                self._new_data.clear()
                finished = self._eof.is_set()  # read after this, everything the copier wrote is in the file
                log.seek(offset)
                while data := log.read(FORWARD_BATCH_BYTES):
                    offset += len(data)
                    data = partial + data
                    cut = data.rfind(b"\n") + 1
                    partial = data[cut:]
                    if cut:
                        self._send(data[:cut])
                if finished:
                    if partial:
                        self._send(partial)
                    return

    def _send(self, data: bytes) -> None:
        try:
            self._send_lines(data.decode(errors="replace").splitlines())
        except Exception:  # noqa: BLE001 - the file keeps every line; the driver may be gone
            pass

    def finish(self, timeout: float = 30.0) -> None:
        """Wait (bounded) until everything the node wrote is in the file and forwarded."""
        self._copier.join(timeout)
        if self._forwarder.is_alive():
            self._forwarder.join(timeout)
