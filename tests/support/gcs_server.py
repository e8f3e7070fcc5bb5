"""A real GCS JSON-API server for the storage tests: gcp-storage-emulator, a pure-Python emulator from PyPI.

:class:`GcsServer` starts ``python -m gcp_storage_emulator start --in-memory`` on a free port of
127.0.0.1 (``local_server.py``) and makes a bucket. The emulator checks no credentials (a GCS client
reaches an emulator anonymously), so the tests here are of sparkdl's file layer on GCS, not of Google's
credential chain; a missing bucket gets ``404``, as on GCS. ``env`` holds ``STORAGE_EMULATOR_HOST``,
Google's standard variable for an emulator's address; ``conftest.py`` puts it in ``os.environ`` for the
session (executors inherit it), and ``client`` is a ``pyarrow.fs.GcsFileSystem`` of the server with a
project id (which creating a bucket needs), for tests that look at the store behind sparkdl's back.
"""

from __future__ import annotations

import importlib.util
import sys

import local_server
from local_server import LocalServer, unique_name

PROJECT = "sparkdl-tests"


def installed() -> bool:
    """Whether gcp-storage-emulator is installed (from the ``dev`` extra)."""
    return importlib.util.find_spec("gcp_storage_emulator") is not None


class GcsServer(LocalServer):
    """gcp-storage-emulator on ``endpoint`` (``http://127.0.0.1:<port>``), in memory, with a bucket
    ``bucket`` made at start."""

    def __init__(self, bucket: str = "sparkdl-tests"):
        super().__init__("gcp-storage-emulator")
        self.endpoint = f"http://{self.authority}"
        self.env = {"STORAGE_EMULATOR_HOST": self.endpoint}
        command = [sys.executable, "-m", "gcp_storage_emulator", "start"]
        with self._serving(command + ["--host", "127.0.0.1", "--port", str(self.port), "--in-memory", "--quiet"]):
            self.client = self._client()
            self.bucket = self.new_bucket(bucket)

    def url(self, key: str, bucket: str | None = None) -> str:
        """``gs://<bucket>/<key>`` (the default bucket unless ``bucket`` is given)."""
        return f"gs://{bucket or self.bucket}/{key.lstrip('/')}"

    def new_bucket(self, name: str | None = None) -> str:
        """Create a bucket (a fresh unique name when ``name`` is None) and return its name."""
        name = name or unique_name()
        self.client.create_dir(name)
        return name

    def files_under(self, url: str) -> list[str]:
        """Every object under the ``gs://`` directory ``url``, relative to it, as the emulator lists
        them (this server's own client, behind sparkdl's back)."""
        return local_server.files_under(self.client, url.split("://", 1)[1])

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
