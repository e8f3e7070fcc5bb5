"""A real GCS JSON-API server for the storage tests: gcp-storage-emulator, a pure-Python emulator from PyPI.

:class:`GcsServer` starts ``python -m gcp_storage_emulator start --in-memory`` on a free port of
127.0.0.1 and makes a bucket. The emulator checks no credentials (a GCS client reaches an emulator
anonymously), so the tests here are of sparkdl's file layer on GCS, not of Google's credential chain;
a missing bucket gets ``404``, as on GCS. ``env`` holds ``STORAGE_EMULATOR_HOST``, Google's standard
variable for an emulator's address; ``conftest.py`` puts it in ``os.environ`` for the session
(executors inherit it), and ``client`` is a ``pyarrow.fs.GcsFileSystem`` of the server with a project
id (which creating a bucket needs), for tests that look at the store behind sparkdl's back.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid

from sparkdl.node import watchdog

PROJECT = "sparkdl-tests"
#: Seconds the server has to start listening, in all.
START_DEADLINE_S = 30.0
#: Seconds between two looks at a starting server.
POLL_INTERVAL_S = 0.05
#: Seconds a stopping server has to exit before it is killed.
STOP_DEADLINE_S = 10.0


class GcsServer:
    """gcp-storage-emulator on ``endpoint`` (``http://127.0.0.1:<port>``), in memory, with a bucket
    ``bucket`` made at start. :meth:`stop` ends it; so does the end of the thread that made it (the
    parent-death signal: make it on a thread that outlives its use)."""

    def __init__(self, bucket: str = "sparkdl-tests"):
        self.port = _free_port()
        self.authority = f"127.0.0.1:{self.port}"
        self.endpoint = f"http://{self.authority}"
        self.env = {"STORAGE_EMULATOR_HOST": self.endpoint}
        self._process = subprocess.Popen(
            [sys.executable, "-m", "gcp_storage_emulator", "start"]
            + ["--host", "127.0.0.1", "--port", str(self.port), "--in-memory", "--quiet"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=watchdog.die_with_parent,  # a test run killed outright leaves no server behind
        )
        try:
            self._wait_until_listening(time.monotonic() + START_DEADLINE_S)
            self.client = self._client()
            self.bucket = self.new_bucket(bucket)
        except BaseException:
            self.stop()
            raise

    def url(self, key: str, bucket: str | None = None) -> str:
        """``gs://<bucket>/<key>`` (the default bucket unless ``bucket`` is given)."""
        return f"gs://{bucket or self.bucket}/{key.lstrip('/')}"

    def new_bucket(self, name: str | None = None) -> str:
        """Create a bucket (a fresh unique name when ``name`` is None) and return its name."""
        name = name or f"sparkdl-{uuid.uuid4().hex[:12]}"
        self.client.create_dir(name)
        return name

    def files_under(self, url: str) -> list[str]:
        """Every object under the ``gs://`` directory ``url``, relative to it, as the emulator lists
        them (this server's own client, behind sparkdl's back)."""
        import pyarrow.fs as pafs

        root = url.split("://", 1)[1].rstrip("/")
        infos = self.client.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
        return sorted(info.path[len(root) + 1 :] for info in infos if info.type == pafs.FileType.File)

    def stop(self) -> None:
        """End the server (SIGTERM, then SIGKILL after :data:`STOP_DEADLINE_S`) and reap it."""
        if self._process.poll() is not None:
            return
        self._process.terminate()
        try:
            self._process.wait(STOP_DEADLINE_S)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(STOP_DEADLINE_S)

    def _wait_until_listening(self, deadline: float) -> None:
        """Poll the port until the server accepts a connection."""
        while True:
            if self._process.poll() is not None:
                raise RuntimeError(f"gcp-storage-emulator exited with {self._process.returncode} before listening")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1.0).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    message = f"gcp-storage-emulator did not listen on {self.endpoint} within {START_DEADLINE_S} s"
                    raise RuntimeError(message) from None
                time.sleep(POLL_INTERVAL_S)  # a poll interval, not a synchronisation

    def _client(self):
        """A ``pyarrow.fs.GcsFileSystem`` of this server (anonymous, over http, with a project id)."""
        import datetime

        import pyarrow.fs as pafs

        return pafs.GcsFileSystem(
            anonymous=True,
            endpoint_override=self.authority,
            scheme="http",
            project_id=PROJECT,
            retry_time_limit=datetime.timedelta(seconds=10),
        )


def _free_port() -> int:
    """A port of 127.0.0.1 free right now (the server binds it a moment later)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
