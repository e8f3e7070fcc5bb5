"""Versioned model directories, laid out as TensorFlow Serving lays them out: train and serve.

A *base* directory holds one subdirectory per version, named by its integer version number::

    /models/digits/               (or s3a://bucket/models/digits/, gs://..., abfss://..., hdfs://...)
        1/            a SavedModel (saved_model.pb, variables/): model.export(d), tf.saved_model.save
        2/model.keras or one Keras file (.keras, .h5, .hdf5) in the version directory

A version directory is a SavedModel when it holds ``saved_model.pb`` (TF Serving can serve such
a base as it is), otherwise it must hold exactly one Keras file; :func:`version_model_path` says
which path the loaders of :mod:`sparkdl.inference` then read. Names other than a plain decimal
number (``1``, ``42``; not ``007``, ``latest``, ``.tmp-...``) and plain files are ignored. The
largest number is the newest version. Versions are immutable: publish a new number instead of
rewriting one.

The training side (the chief, after each epoch or micro-batch) calls :func:`publish_version`;
the scoring side calls :func:`newest_version` (``sparkdl.inference`` does, through
:class:`ModelVersions`). A reader never sees a half-written version:

- **local paths** (a shared file system mounted on every executor, such as NFS, counts):
  ``write(path)`` writes into a temporary sibling directory, which is flushed to disk and then
  renamed into place in one step.
- **every other store sparkdl reads** (``s3://``/``s3a://``/``s3n://``, ``gs://``,
  ``abfs[s]://``, ``hdfs://``; :mod:`sparkdl.storage`): ``write(path)`` writes into a local
  temporary directory, which :meth:`sparkdl.storage.Storage.upload` copies to ``base/<version>``
  with ``saved_model.pb`` (or, for a Keras version, a completion marker) last. A version counts
  only once it is complete: a SavedModel version needs its ``saved_model.pb``, a Keras version is
  its one Keras file (one object, whole or absent by the store's own guarantee), so
  :func:`newest_version` passes over a version still being uploaded.

Remote paths are reached with the store settings given (``storage=``: a
:class:`~sparkdl.storage.Storage` or :class:`~sparkdl.storage.StoreSettings`), else those of the
active Spark session, if any, and each cloud SDK's own environment. Inside ``map_fun`` there is no
Spark session: pass ``storage=ctx.storage`` (the node's settings, the application's own). No
TensorFlow here.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from ..common.errors import ModelVersionError as ModelVersionError  # re-exported: raised here
from ..common.errors import StorageError
from ..storage.files import fsync

__all__ = ["ModelVersions", "ModelVersionError", "publish_version", "newest_version", "version_model_path"]

KERAS_SUFFIXES = (".keras", ".h5", ".hdf5")
_SAVED_MODEL_FILES = ("saved_model.pb", "saved_model.pbtxt")
_VERSION_NAME = re.compile(r"0|[1-9][0-9]*")
_TEMP_PREFIX = ".tmp-"


def _is_remote(path: str) -> bool:
    from ..storage import is_remote

    return is_remote(path)


def _normal_base(base: str | os.PathLike) -> str:
    """A local base as an absolute path; a remote one as written (without a trailing slash),
    :class:`ModelVersionError` for a scheme no store serves."""
    base = os.fspath(base)
    from ..storage import parse

    if not _is_remote(base):
        return parse(base).key if base.startswith(("file:", "dbfs:")) else os.path.abspath(base)

    try:
        parse(base)
    except StorageError as exc:
        raise ModelVersionError(f"{base!r} cannot hold model versions: {exc}") from None
    return base.rstrip("/")


def _storage(storage: Any = None):
    """A :class:`~sparkdl.storage.Storage` from ``storage`` (a Storage, StoreSettings, or None: the
    active Spark session's settings, if any)."""
    from ..storage import Storage, StoreSettings

    if isinstance(storage, Storage):
        return storage
    if isinstance(storage, StoreSettings):
        return Storage(storage)
    if storage is not None:
        raise TypeError(f"storage must be a sparkdl.storage.Storage or StoreSettings, got {type(storage).__name__}")
    from ..storage.spark_conf import from_spark

    return Storage(from_spark(None))


def _join(directory: str, name: str) -> str:
    return f"{directory.rstrip('/')}/{name}" if _is_remote(directory) else os.path.join(directory, name)


@dataclass(frozen=True)
class ModelVersions:
    """A versioned model directory to score with, re-read for a newer version while scoring.

    Give it wherever :class:`sparkdl.inference.Predictor` (and ``map_in_pandas``,
    ``map_in_arrow``, ``predict_batch_udf``) takes a model path; ``base`` is a local path or a
    path on any store of :mod:`sparkdl.storage` (``s3a://bucket/models``...). Each Python worker
    lists ``base`` at most once every ``refresh_seconds`` (when an Arrow batch starts) and scores
    with the newest complete version, so every batch starting ``refresh_seconds`` or more after
    :func:`publish_version` returned is scored by that version or a newer one (plus the time a
    shared file system takes to show the new directory); 0 lists it for every batch. The switch
    happens between two Arrow batches, so one task (a partition of a streaming micro-batch) may
    score its rows with two versions: ``version_column`` tells which scored each row.
    """

    base: str
    refresh_seconds: float = 30.0

    def __post_init__(self):
        object.__setattr__(self, "base", _normal_base(self.base))
        seconds = self.refresh_seconds
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds >= 0:
            raise ValueError(f"refresh_seconds must be a number >= 0, got {seconds!r}")
        object.__setattr__(self, "refresh_seconds", float(seconds))

    def newest(self, storage: Any = None) -> tuple[int, str]:
        """:func:`newest_version`, raising :class:`ModelVersionError` naming ``base`` if there is none
        (``storage``: see :func:`newest_version`)."""
        remote = _is_remote(self.base)
        store = _storage(storage) if remote else None
        found = newest_version(self.base, store)
        if found is None:
            if remote:
                state = "holds no complete version yet" if store.is_dir(self.base) else "does not exist"
                where = ""
            else:
                state = "does not exist" if not os.path.isdir(self.base) else "holds no version yet"
                where = f" (on host {os.uname().nodename})"
            raise ModelVersionError(
                f"no model version in {self.base!r}: the directory {state}{where}; "
                f"publish one as {_join(self.base, '<integer version>')} with "
                "sparkdl.model_versions.publish_version"
            )
        return found


def _pick_model(directory: str, names: list[str], files: set[str]) -> str:
    """The model path of a version ``directory`` holding ``names`` (``files``: those that are files)."""
    if any(n in files for n in _SAVED_MODEL_FILES):
        return directory
    keras = [n for n in names if n.endswith(KERAS_SUFFIXES) and n in files]
    if len(keras) != 1:
        found = f"Keras files {keras}" if keras else f"no saved_model.pb and no Keras file (it holds {names[:10]})"
        raise ModelVersionError(
            f"model version {directory!r} holds {found}; a version is a SavedModel directory or a "
            f"directory with exactly one {'/'.join(KERAS_SUFFIXES)} file"
        )
    return _join(directory, keras[0])


def version_model_path(directory: str, storage: Any = None) -> str:
    """The path the model loaders read for one version directory: the directory itself when it is
    a SavedModel, else its one Keras file. Raises :class:`ModelVersionError` when it holds
    neither, or several Keras files. ``storage`` reaches a remote directory (see
    :func:`newest_version`)."""
    directory = os.fspath(directory)
    if _is_remote(directory):
        names, files = _remote_entries(_storage(storage), directory)
        return _pick_model(directory, names, files)
    if any(os.path.isfile(os.path.join(directory, n)) for n in _SAVED_MODEL_FILES):
        return directory
    try:
        names = sorted(os.listdir(directory))
    except OSError as exc:
        raise ModelVersionError(f"model version {directory!r} cannot be read: {exc}") from exc
    return _pick_model(directory, names, {n for n in names if os.path.isfile(os.path.join(directory, n))})


def _remote_entries(store, directory: str) -> tuple[list[str], set[str]]:
    """``(sorted names, names of files)`` directly in the remote ``directory``."""
    entries = sorted(store.listdir(directory))
    return [name for name, _ in entries], {name for name, is_dir in entries if not is_dir}


def _versions(base: str) -> list[int]:
    """The complete versions in the local ``base``, ascending (temporary and other names left out)."""
    try:
        entries = list(os.scandir(base))
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = []
    for entry in entries:
        if _VERSION_NAME.fullmatch(entry.name):
            try:
                if entry.is_dir():
                    found.append(int(entry.name))
            except OSError:  # removed while listing
                continue
    return sorted(found)


def _newest_remote(store, base: str) -> tuple[int, str] | None:
    """The newest complete version in the remote ``base``: a version directory counts once it holds
    ``saved_model.pb``, the completion marker of :meth:`~sparkdl.storage.Storage.upload`, or a
    Keras file (one object: whole or absent); one listing of ``base``, one of each version looked at."""
    from ..storage.files import COMPLETE_MARKER

    numbers = sorted((int(name) for name, is_dir in store.listdir(base) if is_dir and _VERSION_NAME.fullmatch(name)))
    for number in reversed(numbers):
        directory = _join(base, str(number))
        names, files = _remote_entries(store, directory)
        markers = (*_SAVED_MODEL_FILES, COMPLETE_MARKER)
        if any(n in files for n in markers) or any(n.endswith(KERAS_SUFFIXES) for n in files):
            return number, _pick_model(directory, names, files)
    return None


def newest_version(base: str | os.PathLike, storage: Any = None) -> tuple[int, str] | None:
    """``(version, model path)`` of the newest complete version in ``base``, or None when there is
    none (or ``base`` does not exist). One directory listing; the model path is
    :func:`version_model_path`'s (raises :class:`ModelVersionError` if that version holds no model).

    A remote ``base`` is reached with ``storage`` (a :class:`~sparkdl.storage.Storage` or
    :class:`~sparkdl.storage.StoreSettings`; None: the active Spark session's settings, if any);
    a version still being uploaded is passed over for the newest complete one."""
    base = _normal_base(base)
    if _is_remote(base):
        return _newest_remote(_storage(storage), base)
    versions = _versions(base)
    if not versions:
        return None
    return versions[-1], version_model_path(os.path.join(base, str(versions[-1])))


def _fsync_tree(directory: str) -> None:
    """Flush a written version to disk before it becomes visible (a crash leaves no torn files)."""
    for root, _, files in os.walk(directory):
        for name in files:
            fsync(os.path.join(root, name))
        fsync(root)


def _exists_error(version: int, final: str, meanwhile: bool = False) -> FileExistsError:
    what = "was published meanwhile" if meanwhile else "exists already"
    return FileExistsError(errno.EEXIST, f"model version {version} {what}; versions are immutable", final)


def publish_version(base: str | os.PathLike, version: int, write: Callable[[str], object], storage: Any = None) -> str:
    """Publish ``version`` of a model in ``base`` atomically; returns its model path.

    ``write(path)`` gets an empty local directory and writes the version into it:
    ``model.export(path)`` or ``tf.saved_model.save(model, path)`` (a SavedModel), or
    ``model.save(f"{path}/model.keras")``. For a local ``base`` that directory is a temporary
    sibling of the version (whose name readers ignore), flushed to disk and then renamed to
    ``base/<version>`` in one step, so :func:`newest_version` sees the whole version or nothing;
    ``base`` is created when missing. For a remote ``base`` (``s3a://``, ``gs://``, ``abfss://``,
    ``hdfs://``; reached with ``storage``, see :func:`newest_version`) it is a local temporary
    directory, uploaded to ``base/<version>`` with the file that completes it last (see the
    module), then removed. Raises ``FileExistsError`` if ``version`` exists already (versions are
    immutable) and :class:`ModelVersionError` if ``write`` wrote no model; either way nothing is
    published and the temporary directory is removed. Call it from one process (e.g. the chief:
    ``ctx.is_chief``), not from every node.
    """
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise ValueError(f"version must be an integer >= 0, got {version!r}")
    base = _normal_base(base)
    if _is_remote(base):
        return _publish_remote(_storage(storage), base, version, write)
    final = os.path.join(base, str(version))
    if os.path.lexists(final):
        raise _exists_error(version, final)
    os.makedirs(base, exist_ok=True)
    temporary = os.path.join(base, f"{_TEMP_PREFIX}{version}-{uuid.uuid4().hex}")
    os.mkdir(temporary)
    try:
        write(temporary)
        model = version_model_path(temporary)
        _fsync_tree(temporary)
        try:
            os.rename(temporary, final)  # never replaces a non-empty directory: refused instead
        except OSError as exc:
            if exc.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
                raise _exists_error(version, final, meanwhile=True) from exc
            raise
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    fsync(base)  # the rename itself
    return final if model == temporary else os.path.join(final, os.path.basename(model))


def _publish_remote(store, base: str, version: int, write: Callable[[str], object]) -> str:
    """:func:`publish_version` on a remote store: written locally, then uploaded, completing file last."""
    final = _join(base, str(version))
    if store.exists(final):
        raise _exists_error(version, final)
    scratch = tempfile.mkdtemp(prefix=f"sparkdl-version-{version}-")
    try:
        local = os.path.join(scratch, str(version))
        os.mkdir(local)
        write(local)
        model = version_model_path(local)
        if store.exists(final):  # published by another process while this one wrote
            raise _exists_error(version, final, meanwhile=True)
        store.upload(local, final)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return final if model == local else _join(final, os.path.basename(model))
