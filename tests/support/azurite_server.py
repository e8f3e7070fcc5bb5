"""A real Azure Blob Storage server for the storage tests: Azurite, Microsoft's emulator, checking
Shared Key signatures as Azure does.

:class:`AzuriteServer` starts ``azurite-blob`` (installed by ``scripts/test.sh`` into
``$VENV/azurite``: :func:`executable`) on a free port of 127.0.0.1 (``local_server.py``) with a
workspace of its own, and makes a container. Azurite serves one well-known account,
``devstoreaccount1`` with the key :data:`ACCOUNT_KEY` (the same in every Azurite: it is no secret, and
a test that checks no message holds a key checks for it as if it were); a request signed with another
key gets ``403``, one for a missing container ``404 ContainerNotFound``, as on Azure. ``env`` holds
``AZURE_STORAGE_CONNECTION_STRING``, the standard variable a user would set to reach it; ``conftest.py``
puts it in ``os.environ`` for the session (executors inherit it), and ``client`` is a
``pyarrow.fs.AzureFileSystem`` with the good key, for tests that look at the store behind sparkdl's back.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import local_server
from local_server import LocalServer, unique_name

ACCOUNT = "devstoreaccount1"
#: Azurite's one account key (published by Microsoft, the same in every Azurite).
ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def executable() -> Path:
    """Where ``scripts/test.sh`` installs ``azurite-blob``: ``$VENV/azurite`` (this interpreter's venv)."""
    return Path(sys.prefix) / "azurite" / "node_modules" / ".bin" / "azurite-blob"


def installed() -> bool:
    """Whether Azurite is installed where :func:`executable` says, and Node.js is there to run it."""
    return executable().is_file() and os.access(executable(), os.X_OK) and shutil.which("node") is not None


class AzuriteServer(LocalServer):
    """Azurite's Blob service on ``endpoint`` (``http://127.0.0.1:<port>/devstoreaccount1``), with a
    container ``container`` made at start; :meth:`stop` also removes its workspace."""

    secrets = (ACCOUNT_KEY,)

    def __init__(self, container: str = "sparkdl-tests"):
        super().__init__("azurite-blob", workspace=True)
        self.endpoint = f"http://{self.authority}/{ACCOUNT}"
        self.account, self.account_key = ACCOUNT, ACCOUNT_KEY
        self.env = {
            "AZURE_STORAGE_CONNECTION_STRING": (
                f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};"
                f"BlobEndpoint={self.endpoint};"
            )
        }
        command = [
            str(executable()),
            *("--blobHost", "127.0.0.1", "--blobPort", str(self.port), "--location", self.workspace),
            *("--skipApiVersionCheck", "--loose", "--silent", "--disableTelemetry"),
        ]
        with self._serving(command):
            self.client = self._client(ACCOUNT_KEY)
            self.container = self.new_container(container)

    def url(self, path: str, container: str | None = None) -> str:
        """``abfss://<container>@devstoreaccount1.dfs.core.windows.net/<path>`` (the default container
        unless ``container`` is given)."""
        return f"abfss://{container or self.container}@{ACCOUNT}.dfs.core.windows.net/{path.lstrip('/')}"

    def new_container(self, name: str | None = None) -> str:
        """Create a container (a fresh unique name when ``name`` is None) and return its name."""
        name = name or unique_name()
        self.client.create_dir(name)
        return name

    #: A container is Azure's bucket: the name the tests of every store call.
    new_bucket = new_container

    def files_under(self, url: str) -> list[str]:
        """Every file (blob) under the ``abfss://`` directory ``url``, relative to it, as Azurite lists
        them (this server's own client, behind sparkdl's back)."""
        container_and_account, _, key = url.split("://", 1)[1].partition("/")
        return local_server.files_under(self.client, f"{container_and_account.split('@', 1)[0]}/{key}")

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
