"""What the storage tests' store servers share: a server process of this machine on a free port of 127.0.0.1.

:class:`LocalServer` picks the port, starts the server's command with the parent-death signal (a test
run killed outright leaves no server behind), polls the port until it listens (within
:data:`START_DEADLINE_S`), and :meth:`~LocalServer.stop` ends it (SIGTERM, then SIGKILL) and removes
its workspace, if it has one. ``s3_server.py``, ``azurite_server.py`` and ``gcs_server.py`` build on it,
each with what is its own: the command, what it makes once listening, and how to look at its store
behind sparkdl's back (``files_under``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator

from sparkdl.node import watchdog

#: Seconds a server has to start listening, in all.
START_DEADLINE_S = 30.0
#: Seconds between two looks at a starting server.
POLL_INTERVAL_S = 0.05
#: Seconds a stopping server has to exit before it is killed.
STOP_DEADLINE_S = 10.0


class LocalServer:
    """A server named ``name`` (in messages) on ``port`` of 127.0.0.1 (``authority``: ``127.0.0.1:<port>``),
    with a temporary ``workspace`` directory when asked. A subclass calls :meth:`_serving` with its
    command and makes what it needs inside it; :meth:`stop` ends it; so does the end of the thread that
    made it (the parent-death signal: make it on a thread that outlives its use)."""

    #: The secrets a test checks that no message holds (a key of the server's, however public).
    secrets: tuple[str, ...] = ()

    def __init__(self, name: str, workspace: bool = False):
        self.name = name
        self.port = free_port()
        self.authority = f"127.0.0.1:{self.port}"
        self.workspace = tempfile.mkdtemp(prefix="sparkdl-server-") if workspace else None
        self._process: subprocess.Popen | None = None

    @contextlib.contextmanager
    def _serving(self, command: list[str], env: dict[str, str] | None = None) -> Iterator[None]:
        """Start ``command`` (with ``env`` added to this environment) and wait until it listens; then
        the block makes what the server needs. Any failure, starting or in the block, stops the server."""
        try:
            self._process = subprocess.Popen(
                command,
                env={**os.environ, **(env or {})},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                preexec_fn=watchdog.die_with_parent,  # a test run killed outright leaves no server behind
            )
            self._wait_until_listening(time.monotonic() + START_DEADLINE_S)
            yield
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """End the server (SIGTERM, then SIGKILL after :data:`STOP_DEADLINE_S`), reap it, remove its workspace."""
        try:
            if self._process is not None and self._process.poll() is None:
                self._process.terminate()
                try:
                    self._process.wait(STOP_DEADLINE_S)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait(STOP_DEADLINE_S)
        finally:
            if self.workspace is not None:
                shutil.rmtree(self.workspace, ignore_errors=True)

    def _wait_until_listening(self, deadline: float) -> None:
        """Poll the port until the server accepts a connection (a bare TCP connection is no request:
        a server that counts its first requests, as moto's does, counts none)."""
        while True:
            if self._process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self._process.returncode} before listening")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1.0).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    message = f"{self.name} did not listen on {self.authority} within {START_DEADLINE_S} s"
                    raise RuntimeError(message) from None
                time.sleep(POLL_INTERVAL_S)  # a poll interval, not a synchronisation


def free_port() -> int:
    """A port of 127.0.0.1 free right now (the server binds it a moment later)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def unique_name() -> str:
    """A fresh bucket (or container) name: ``sparkdl-<12 hex digits>``."""
    return f"sparkdl-{uuid.uuid4().hex[:12]}"


def files_under(filesystem, root: str) -> list[str]:
    """Every file under ``root`` (a path of the pyarrow ``filesystem``: ``<bucket>/<key>``), relative to it."""
    import pyarrow.fs as pafs

    root = root.rstrip("/")
    infos = filesystem.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
    return sorted(info.path[len(root) + 1 :] for info in infos if info.type == pafs.FileType.File)
