"""Tie a process's life to another's: a node must never outlive what started it."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
from typing import Callable

PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """Ask Linux to send ``sig`` to this process when its parent exits (no-op elsewhere)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
        except (OSError, AttributeError):
            pass


def pid_alive(pid: int) -> bool:
    """Whether a process with ``pid`` exists (zombies count as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie still answers kill(0); /proc tells the truth on Linux
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().split(b") ", 1)[1][:1] != b"Z"
    except (OSError, IndexError):
        return True


def watch_pid(pid: int, on_death: Callable[[], None], interval_s: float = 0.5) -> threading.Event:
    """Call ``on_death`` from a daemon thread once ``pid`` is gone; set the returned event to stop."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(interval_s):
            if not pid_alive(pid):
                on_death()
                return

    threading.Thread(target=loop, name=f"watch-pid-{pid}", daemon=True).start()
    return stop
