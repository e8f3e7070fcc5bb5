"""A real Azure Blob Storage server for the storage tests: Azurite, Microsoft's emulator, checking
Shared Key signatures as Azure does.

:class:`AzuriteServer` starts ``azurite-blob`` (installed by ``scripts/test.sh`` into
``$VENV/azurite``: :func:`executable`) on a free port of 127.0.0.1 with a workspace of its own,
and makes a container. Azurite serves one well-known account, ``devstoreaccount1`` with the key
:data:`ACCOUNT_KEY` (the same in every Azurite: it is no secret, and a test that checks no message
holds a key checks for it as if it were); a request signed with another key gets ``403``, one for a
missing container ``404 ContainerNotFound``, as on Azure. ``env`` holds
``AZURE_STORAGE_CONNECTION_STRING``, the standard variable a user would set to reach it; ``conftest.py``
puts it in ``os.environ`` for the session (executors inherit it), and ``client`` is a
``pyarrow.fs.AzureFileSystem`` with the good key, for tests that look at the store behind sparkdl's back.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from sparkdl.node import watchdog

ACCOUNT = "devstoreaccount1"
#: Azurite's one account key (published by Microsoft, the same in every Azurite).
ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
#: Seconds the server has to start listening, in all.
START_DEADLINE_S = 30.0
#: Seconds between two looks at a starting server.
POLL_INTERVAL_S = 0.05
#: Seconds a stopping server has to exit before it is killed.
STOP_DEADLINE_S = 10.0


def executable() -> Path:
    """Where ``scripts/test.sh`` installs ``azurite-blob``: ``$VENV/azurite`` (this interpreter's venv)."""
    return Path(sys.prefix) / "azurite" / "node_modules" / ".bin" / "azurite-blob"


def installed() -> bool:
    """Whether Azurite is installed where :func:`executable` says, and Node.js is there to run it."""
    return executable().is_file() and os.access(executable(), os.X_OK) and shutil.which("node") is not None


class AzuriteServer:
    """Azurite's Blob service on ``endpoint`` (``http://127.0.0.1:<port>/devstoreaccount1``), with a
    container ``container`` made at start. :meth:`stop` ends it and removes its workspace; so does the
    end of the thread that made it (the parent-death signal: make it on a thread that outlives its use)."""

    def __init__(self, container: str = "sparkdl-tests"):
        self.port = _free_port()
        self.authority = f"127.0.0.1:{self.port}"
        self.endpoint = f"http://{self.authority}/{ACCOUNT}"
        self.account, self.account_key = ACCOUNT, ACCOUNT_KEY
        self.env = {
            "AZURE_STORAGE_CONNECTION_STRING": (
                f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};"
                f"BlobEndpoint={self.endpoint};"
            )
        }
        self._workspace = tempfile.mkdtemp(prefix="sparkdl-azurite-")
        self._process = subprocess.Popen(
            [
                str(executable()),
                *("--blobHost", "127.0.0.1", "--blobPort", str(self.port), "--location", self._workspace),
                *("--skipApiVersionCheck", "--loose", "--silent", "--disableTelemetry"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=watchdog.die_with_parent,  # a test run killed outright leaves no server behind
        )
        try:
            self._wait_until_listening(time.monotonic() + START_DEADLINE_S)
            self.client = self._client(ACCOUNT_KEY)
            self.container = self.new_container(container)
        except BaseException:
            self.stop()
            raise

    def url(self, path: str, container: str | None = None) -> str:
        """``abfss://<container>@devstoreaccount1.dfs.core.windows.net/<path>`` (the default container
        unless ``container`` is given)."""
        return f"abfss://{container or self.container}@{ACCOUNT}.dfs.core.windows.net/{path.lstrip('/')}"

    def new_container(self, name: str | None = None) -> str:
        """Create a container (a fresh unique name when ``name`` is None) and return its name."""
        name = name or f"sparkdl-{uuid.uuid4().hex[:12]}"
        self.client.create_dir(name)
        return name

    def files_under(self, url: str) -> list[str]:
        """Every file (blob) under the ``abfss://`` directory ``url``, relative to it, as Azurite lists
        them (this server's own client, behind sparkdl's back)."""
        import pyarrow.fs as pafs

        container_and_account, _, key = url.split("://", 1)[1].partition("/")
        root = f"{container_and_account.split('@', 1)[0]}/{key}".rstrip("/")
        infos = self.client.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
        return sorted(info.path[len(root) + 1 :] for info in infos if info.type == pafs.FileType.File)

    def stop(self) -> None:
        """End the server (SIGTERM, then SIGKILL after :data:`STOP_DEADLINE_S`), reap it, remove its workspace."""
        try:
            if self._process.poll() is None:
                self._process.terminate()
                try:
                    self._process.wait(STOP_DEADLINE_S)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait(STOP_DEADLINE_S)
        finally:
            shutil.rmtree(self._workspace, ignore_errors=True)

    def _wait_until_listening(self, deadline: float) -> None:
        """Poll the port until the server accepts a connection."""
        while True:
            if self._process.poll() is not None:
                raise RuntimeError(f"azurite-blob exited with {self._process.returncode} before listening")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1.0).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    message = f"azurite-blob did not listen on {self.endpoint} within {START_DEADLINE_S} s"
                    raise RuntimeError(message) from None
                time.sleep(POLL_INTERVAL_S)  # a poll interval, not a synchronisation

    def _client(self, account_key: str):
        """A ``pyarrow.fs.AzureFileSystem`` of this server's account, signing with ``account_key``."""
        import pyarrow.fs as pafs

        return pafs.AzureFileSystem(
            ACCOUNT,
            account_key=account_key,
            blob_storage_authority=self.authority,
            dfs_storage_authority=self.authority,
            blob_storage_scheme="http",
            dfs_storage_scheme="http",
        )


def _free_port() -> int:
    """A port of 127.0.0.1 free right now (the server binds it a moment later)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
