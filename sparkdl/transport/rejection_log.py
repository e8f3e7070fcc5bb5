"""Logging of refused connections that a flood of them cannot turn into a flood of log lines."""

from __future__ import annotations

import logging
import threading
import time

from ..common.timeouts import REJECTION_LOG_S


class RejectionLog:
    """Logs refused connections without flooding: the first at once, then at most one summary
    line per ``REJECTION_LOG_S`` seconds (how many, and the last reason), written when the
    period ends even if no other connection comes."""

    def __init__(self, name: str, logger: logging.Logger):
        self._name = name
        self._logger = logger
        self._lock = threading.Lock()
        self._last_logged = float("-inf")
        self._unlogged = 0
        self._last_reason = ""
        self._timer: threading.Timer | None = None

    def record(self, reason: str) -> None:
        """Count one refused connection, logging it now or in the period's summary."""
        with self._lock:
            now = time.monotonic()
            if now - self._last_logged >= REJECTION_LOG_S and not self._unlogged:
                self._last_logged = now
                first = True
            else:
                first = False
                self._unlogged += 1
                self._last_reason = reason
                if self._timer is None:
                    self._timer = threading.Timer(max(0.0, self._last_logged + REJECTION_LOG_S - now), self._flush)
                    self._timer.name, self._timer.daemon = f"sparkdl-{self._name}-rejections", True
                    self._timer.start()
        if first:
            self._logger.warning("%s: %s", self._name, reason)

    def _flush(self) -> None:
        with self._lock:
            count, reason, self._unlogged, self._timer = self._unlogged, self._last_reason, 0, None
            self._last_logged = time.monotonic()
        if count:
            self._logger.warning(
                "%s: refused %d more connection(s) in the last %.0f s; the last: %s",
                self._name,
                count,
                REJECTION_LOG_S,
                reason,
            )
