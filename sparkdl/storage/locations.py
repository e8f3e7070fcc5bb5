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
``hdfs:/k``, ``hdfs:///k``, ``viewfs:/k``   ``hdfs``   the default name node (``fs.defaultFS``), ``/k``
==========================================  =========  ==================================================

A scheme is what Hadoop takes for one: ``^[A-Za-z][A-Za-z0-9+.-]*:``. Anything else with a scheme is
refused here, naming the schemes that work; so is an object store path written with one slash
(``s3:/b/k``), and one with credentials before its bucket (``s3a://KEY:SECRET@b/k``, never echoed).
"""

from __future__ import annotations

import os
import posixpath
import re
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
#: A URI scheme as Hadoop's Path (java.net.URI) reads one: ``hdfs:/p`` has one as much as ``hdfs://nn/p``.
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
#: How each store is reached without credentials in the path (named when a path holds some).
_CREDENTIALS = {
    "s3": "use fs.s3a.* or the AWS environment",
    "gcs": "use Google's credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud, the metadata server)",
    "hdfs": "use Hadoop's own (Kerberos, HADOOP_USER_NAME)",
}


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
            return f"{self.scheme}://{'' if self.bucket == 'default' else self.bucket}{self.key}"
        prefix = "s3" if self.store == "s3" else "gs"
        return f"{prefix}://{self.bucket}/{self.key}".rstrip("/")

    @property
    def name(self) -> str:
        """The last part of the path (a file's or directory's name)."""
        return posixpath.basename(self.key.rstrip("/"))

    def child(self, *parts: str) -> "Location":
        """This location with ``parts`` appended (its ``original`` spelled as the user spells the store)."""
        key = posixpath.join(self.key, *parts) if self.key else posixpath.join(*parts)
        return self._with_key(key)

    @property
    def parent(self) -> "Location":
        """The directory holding this location; a bucket's (container's, name node's, file system's)
        root is its own parent."""
        key = self.key.rstrip("/")
        if self.is_local and self.scheme == "dbfs" and key == "/dbfs":
            return self  # DBFS's root, as the user wrote it
        if key in ("", "/") or (self.store in ("local", "hdfs") and posixpath.dirname(key) == key):
            return self
        parent = posixpath.dirname(key)
        if self.store in ("local", "hdfs"):
            parent = parent or "/"
        return self._with_key(parent)

    def _with_key(self, key: str) -> "Location":
        """This location's store and bucket with ``key``, its ``original`` rebuilt from those fields."""
        return Location(self.store, self.bucket, key, self._spell(key), self.scheme, self.account)

    def _spell(self, key: str) -> str:
        """The path of ``key`` in this store, in the user's spelling of the scheme (``s3a://b/k``)."""
        if self.is_local:
            if self.scheme == "dbfs" and (key == "/dbfs" or key.startswith("/dbfs/")):
                return "dbfs:/" + key[len("/dbfs/") :]
            return f"file://{key}" if self.scheme == "file" else key
        if self.store == "azure":
            return f"{self.scheme}://{self.bucket}@{self.account}/{key}".rstrip("/")
        if self.store == "hdfs":
            return f"{self.scheme}://{'' if self.bucket == 'default' else self.bucket}{key or '/'}"
        return f"{self.scheme}://{self.bucket}/{key}".rstrip("/")

    def describe(self) -> str:
        """The store and path, for messages (never a credential: paths hold none)."""
        names = {"local": "local file system", "s3": "S3", "gcs": "GCS", "azure": "Azure (ABFS)", "hdfs": "HDFS"}
        return f"{self.original!r} ({names[self.store]})"


def parse(path: str | os.PathLike) -> Location:
    """The :class:`Location` of ``path``; :class:`StorageError` for a scheme no store serves, a URI
    without its bucket, an object store path with one slash (``s3:/b/k``) or with credentials in it.
    A path without a scheme is local (relative to the working directory)."""
    original = os.fspath(path)
    if not isinstance(original, str) or not original:
        raise StorageError(f"a storage path must be a non-empty string, got {path!r}")
    match = _SCHEME.match(original)
    if match is None:
        return Location("local", "", os.path.abspath(original), original)
    scheme, rest = match.group(1).lower(), original[match.end() :]
    store = SCHEMES.get(scheme)
    if store is None:
        known = ", ".join(f"{name}://" for name in SCHEMES)
        raise StorageError(
            f"{_shown(original)!r}: sparkdl cannot read or write {scheme}:// paths; it reads and writes local "
            f"paths and {known}"
        )
    if scheme == "dbfs":  # dbfs:/k, dbfs:///k: Databricks mounts DBFS at /dbfs on every node
        return Location("local", "", os.path.normpath("/dbfs/" + rest.lstrip("/")), original, "dbfs")
    if scheme == "file":
        if rest.startswith("//"):  # file:///a/b (file://host/a/b: the host is this one)
            return Location("local", "", os.path.abspath("/" + rest[2:].lstrip("/")), original, "file")
        return Location("local", "", os.path.abspath(rest), original, "file")  # file:/a/b, Hadoop's spelling
    if not rest.startswith("//"):
        if store == "hdfs" and rest.startswith("/"):  # hdfs:/path: the default name node, as Hadoop reads it
            return Location("hdfs", "default", posixpath.normpath("/" + rest.lstrip("/")), original, scheme)
        form = {
            "hdfs": f"{scheme}:///<path> (the default name node) or {scheme}://<namenode>/<path>",
            "azure": f"{scheme}://<container>@<account>.dfs.core.windows.net/<path>",
        }.get(store, f"{scheme}://<bucket>/<path>")
        raise StorageError(f"{_shown(original)!r}: a {scheme}: path takes two slashes: write {form}")
    authority, _, key = rest[2:].partition("/")
    if store in _CREDENTIALS and _holds_credentials(store, authority):
        raise StorageError(
            f"a {scheme}:// path holds credentials before its {'name node' if store == 'hdfs' else 'bucket'}: "
            f"credentials in the path are not supported: {_CREDENTIALS[store]}"
        )
    if not authority:
        if store == "hdfs":  # hdfs:///path: the default name node (fs.defaultFS)
            return Location("hdfs", "default", posixpath.normpath("/" + key), original, scheme)
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


def _holds_credentials(store: str, authority: str) -> bool:
    """Whether the authority of an S3, GCS or HDFS URI holds a user (``KEY:SECRET@bucket``; a secret
    with a ``/`` in it ends the authority early, leaving ``KEY:SEC``, which no bucket name is)."""
    if "@" in authority:
        return True
    if store != "hdfs":
        return ":" in authority  # bucket names hold no colon
    host, colon, port = authority.rpartition(":")
    return bool(colon) and not port.isdigit() and not authority.endswith("]")  # nn:8020, [::1]:8020


def _shown(text: str) -> str:
    """``text`` with any ``user:password@`` after its scheme hidden (for messages)."""
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*:/*)[^/@]*@", r"\1***@", text)


def is_remote(path: str | os.PathLike) -> bool:
    """Whether ``path`` names a store other than the local file system, as :func:`parse` reads it
    (``hdfs:/x`` is remote; ``file:/x`` and ``dbfs:/x`` are not). No parsing errors are raised: an
    unknown scheme counts as remote, and :func:`parse` then names the problem."""
    match = _SCHEME.match(os.fspath(path))
    if match is None:
        return False
    return SCHEMES.get(match.group(1).lower()) != "local"


def qualify(path: str | os.PathLike, default_fs: str | None = "file://") -> str:
    """``path`` as Spark resolves it: a path with a scheme (``s3a://``, ``hdfs:/``, ``dbfs:``...) as it
    is; one without, on Hadoop's default file system (``fs.defaultFS``): local when that is
    ``file://``; ``dbfs:/path`` on Databricks (whose working directory is DBFS's root); else e.g.
    ``hdfs://nn:8020/path``, a relative path in the user's home (``/user/<user>/path``)."""
    text = os.fspath(path)
    if _SCHEME.match(text):
        return text
    default_fs = (default_fs or "file://").rstrip("/")
    if default_fs in ("file:", "file:/", "file://", ""):
        return os.path.abspath(text)
    if default_fs.lower() == "dbfs:":  # dbfs:/, dbfs:, dbfs:///
        return f"dbfs:/{text.lstrip('/')}"
    return f"{default_fs}/{text.lstrip('/')}" if text.startswith("/") else f"{default_fs}/user/{_user()}/{text}"


def _user() -> str:
    import getpass

    return getpass.getuser()
