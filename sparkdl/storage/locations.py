"""Where a path points: which store, which bucket (or account, or name node), which key. Pure.

Every spelling a Spark user writes is accepted and mapped to one store:

==========================================  =========  ==================================================
path                                        store      bucket / key
==========================================  =========  ==================================================
``/data/m``, ``m`` (relative), ``file:``    ``local``  the absolute local path
``s3://b/k``, ``s3a://b/k``, ``s3n://b/k``  ``s3``     ``b``, ``k`` (one bucket whatever the spelling)
``gs://b/k``                                ``gcs``    ``b``, ``k``
``abfs[s]://container@account.dfs.../k``    ``azure``  ``container`` in ``account``, ``k`` (also
                                                       ``wasb[s]://container@account.blob...``)
``hdfs://namenode:8020/k``, ``viewfs://``   ``hdfs``   the name node, ``/k``
``dbfs:/k`` (Databricks)                    ``local``  ``/dbfs/k``, where Databricks mounts DBFS
==========================================  =========  ==================================================

Anything else with a scheme is refused here, naming the schemes that work.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass

from ..common.errors import StorageError

#: Each accepted URI scheme and the store it names.
SCHEMES = {
    "s3": "s3",
    "s3a": "s3",
    "s3n": "s3",
    "gs": "gcs",
    "abfs": "azure",
    "abfss": "azure",
    "wasb": "azure",
    "wasbs": "azure",
    "hdfs": "hdfs",
    "viewfs": "hdfs",
    "file": "local",
    "dbfs": "local",  # Databricks: DBFS is mounted at /dbfs on the driver and every worker
}
#: Hadoop stores sparkdl does not serve: a path on one is refused with the list of those it does.
UNSERVED_SCHEMES = ("adl", "oss", "swift", "cos", "cosn", "obs", "ks3", "jfs", "alluxio", "ofs", "o3fs")


@dataclass(frozen=True)
class Location:
    """One path, taken apart: ``store`` (local, s3, gcs, azure, hdfs), ``bucket`` (the S3/GCS bucket,
    Azure container, HDFS name node; "" for local), ``key`` (the path inside it, no leading slash
    for object stores; absolute for local and HDFS), ``account`` (Azure's storage account) and the
    path as the user wrote it (``original``), which error messages name."""

    store: str
    bucket: str
    key: str
    original: str
    scheme: str = ""
    account: str = ""

    @property
    def is_local(self) -> bool:
        """Whether the path is on this machine's file system (a mounted shared one included)."""
        return self.store == "local"

    @property
    def uri(self) -> str:
        """The path in its canonical spelling (``s3a://`` and ``s3n://`` become ``s3://``)."""
        if self.is_local:
            return self.key
        if self.store == "azure":
            return f"{self.scheme}://{self.bucket}@{self.account}/{self.key}".rstrip("/")
        if self.store == "hdfs":
            return f"{self.scheme}://{self.bucket}{self.key}"
        prefix = "s3" if self.store == "s3" else "gs"
        return f"{prefix}://{self.bucket}/{self.key}".rstrip("/")

    @property
    def name(self) -> str:
        """The last part of the path (a file's or directory's name)."""
        return posixpath.basename(self.key.rstrip("/"))

    def child(self, *parts: str) -> "Location":
        """This location with ``parts`` appended."""
        key = posixpath.join(self.key, *parts) if self.key else posixpath.join(*parts)
        original = "/".join([self.original.rstrip("/"), *parts])
        return Location(self.store, self.bucket, key, original, self.scheme, self.account)

    @property
    def parent(self) -> "Location":
        """The directory holding this location."""
        key = posixpath.dirname(self.key.rstrip("/"))
        original = self.original.rstrip("/").rsplit("/", 1)[0]
        return Location(self.store, self.bucket, key, original, self.scheme, self.account)

    def describe(self) -> str:
        """The store and path, for messages (never a credential: paths hold none)."""
        names = {"local": "local file system", "s3": "S3", "gcs": "GCS", "azure": "Azure (ABFS)", "hdfs": "HDFS"}
        return f"{self.original!r} ({names[self.store]})"


def parse(path: str | os.PathLike) -> Location:
    """The :class:`Location` of ``path``; :class:`StorageError` for a scheme no store serves, or a
    URI without its bucket. A path without a scheme is local (relative to the working directory)."""
    original = os.fspath(path)
    if not isinstance(original, str) or not original:
        raise StorageError(f"a storage path must be a non-empty string, got {path!r}")
    scheme, sep, rest = original.partition("://")
    if not sep:
        if original.startswith("file:"):  # file:/a/b (Hadoop's spelling of a local path)
            return Location("local", "", os.path.abspath(original[len("file:") :]), original, "file")
        if original.startswith("dbfs:"):
            return Location(
                "local", "", os.path.normpath("/dbfs/" + original[len("dbfs:") :].lstrip("/")), original, "dbfs"
            )
        return Location("local", "", os.path.abspath(original), original)
    scheme = scheme.lower()
    store = SCHEMES.get(scheme)
    if store is None:
        known = ", ".join(f"{name}://" for name in SCHEMES)
        raise StorageError(
            f"{original!r}: sparkdl cannot read or write {scheme}:// paths; it reads and writes local paths and {known}"
        )
    if store == "local" and scheme == "dbfs":
        return Location("local", "", os.path.normpath("/dbfs/" + rest.lstrip("/")), original, "dbfs")
    if store == "local":
        return Location("local", "", os.path.abspath("/" + rest.lstrip("/")), original, "file")
    authority, _, key = rest.partition("/")
    if not authority:
        if store == "hdfs":  # hdfs:///path: the default name node (fs.defaultFS)
            return Location("hdfs", "default", "/" + key, original, scheme)
        raise StorageError(f"{original!r} names no bucket: write {scheme}://<bucket>/<path>")
    key = posixpath.normpath("/" + key).lstrip("/") if key else ""
    if store == "hdfs":
        return Location("hdfs", authority, "/" + key, original, scheme)
    if store == "azure":
        container, at, account = authority.partition("@")
        if not at or not container or not account:
            raise StorageError(
                f"{original!r}: an ABFS path names its container and account, as "
                f"{scheme}://<container>@<account>.dfs.core.windows.net/<path>"
            )
        return Location("azure", container, key, original, scheme, account)
    return Location(store, authority, key, original, scheme)


def is_remote(path: str | os.PathLike) -> bool:
    """Whether ``path`` names a store other than the local file system (no parsing errors raised:
    an unknown scheme counts as remote, and :func:`parse` then names the problem)."""
    text = os.fspath(path)
    if "://" not in text:
        return False
    return not text.lower().startswith(("file://", "dbfs://"))


def qualify(path: str | os.PathLike, default_fs: str | None = "file://") -> str:
    """``path`` as Spark resolves it: a path with a scheme as it is; one without, on Hadoop's default
    file system (``fs.defaultFS``: local when that is ``file://``, else e.g. ``hdfs://nn:8020/path``)."""
    text = os.fspath(path)
    if "://" in text or text.startswith("file:"):
        return text
    default_fs = (default_fs or "file://").rstrip("/")
    if default_fs in ("file:", "file:/", "file://", ""):
        return os.path.abspath(text)
    return f"{default_fs}/{text.lstrip('/')}" if text.startswith("/") else f"{default_fs}/user/{_user()}/{text}"


def _user() -> str:
    import getpass

    return getpass.getuser()
