"""Errors before work: every store path a run will use is checked before any node starts.

:func:`check` reaches each remote path's store once, with one attempt and a short connection
timeout: the bucket (container, name node) must exist, and the credentials must let sparkdl list
it and write beside the path (a probe object, removed at once). What fails is raised as one
:class:`~sparkdl.common.errors.StorageError` naming the path, the store and the setting to change.
:func:`paths_in` finds the store paths in ``TFCluster.run``'s ``tf_args`` (a dict, an argparse
``Namespace``, lists of them), so that a ``map_fun`` writing to ``s3://`` fails at ``run``.
"""

from __future__ import annotations

import uuid
from typing import Any, Iterable

from ..common.errors import StorageError
from .files import Storage
from .locations import SCHEMES, UNSERVED_SCHEMES, is_remote, parse
from .settings import StoreSettings

#: The probe object's name prefix (written beside a checked path, then deleted).
PROBE_PREFIX = "_sparkdl_preflight_"


def paths_in(args: Any, limit: int = 64) -> list[str]:
    """The strings among ``args`` (dict values, attributes of a Namespace, list items, nested) that
    name a remote store sparkdl serves (``s3a://...``), in order, without duplicates."""
    found: list[str] = []
    seen_ids: set[int] = set()

    def visit(value: Any, depth: int) -> None:
        if len(found) >= limit or depth > 4 or id(value) in seen_ids:
            return
        seen_ids.add(id(value))
        if isinstance(value, str):
            scheme = value.partition(":")[0].lower()
            stored = scheme in UNSERVED_SCHEMES or (SCHEMES.get(scheme, "local") != "local" and is_remote(value))
            if ":/" in value and stored and value not in found:
                found.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                visit(item, depth + 1)
        elif isinstance(value, (list, tuple, set)):
            for item in value:
                visit(item, depth + 1)
        elif hasattr(value, "__dict__") and type(value).__name__ == "Namespace":
            for item in vars(value).values():
                visit(item, depth + 1)

    visit(args, 0)
    return found


def check(paths: Iterable[str], settings: StoreSettings | None = None, write: bool = True) -> None:
    """Reach the store of each remote path in ``paths`` (local ones are the nodes' to check): raise
    :class:`StorageError` naming the first one that cannot be used. ``write``: also write and delete
    a probe object beside each path (credentials that may read but not write fail here)."""
    storage = Storage(settings, attempts=1)
    checked: set[tuple] = set()
    for path in paths:
        location = parse(path)  # an unknown scheme or a missing bucket name fails here
        if location.is_local:
            continue
        key = (location.store, location.bucket, location.account, location.parent.key if write else "")
        if key in checked:
            continue
        checked.add(key)
        _check_one(storage, location, write)


def _check_one(storage: Storage, location, write: bool) -> None:
    import pyarrow.fs as pafs

    root = type(location)(location.store, location.bucket, "", location.original, location.scheme, location.account)
    fs, bucket_path = storage.client(root)
    try:
        bucket = fs.get_file_info(bucket_path if location.store != "hdfs" else "/")
    except OSError as exc:
        raise storage.explain(location, exc, "reach the store of") from None
    if bucket.type == pafs.FileType.NotFound:
        what = {"s3": "bucket", "gcs": "bucket", "azure": "container", "hdfs": "name node"}[location.store]
        raise storage.explain(location, FileNotFoundError(f"the {what} {location.bucket!r} does not exist"), "use")
    if not write:
        return
    probe = location.parent.child(f"{PROBE_PREFIX}{uuid.uuid4().hex[:12]}")
    try:
        storage.write_bytes(probe.original, b"")
        storage.delete(probe.original)
    except StorageError as exc:
        raise StorageError(f"{location.describe()} cannot be written: {exc}") from None
