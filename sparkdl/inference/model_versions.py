"""Versioned model directories, laid out as TensorFlow Serving lays them out: train and serve.

A *base* directory holds one subdirectory per version, named by its integer version number::

    /models/digits/
        1/            a SavedModel (saved_model.pb, variables/): model.export(d), tf.saved_model.save
        2/model.keras or one Keras file (.keras, .h5, .hdf5) in the version directory

A version directory is a SavedModel when it holds ``saved_model.pb`` (TF Serving can serve such
a base as it is), otherwise it must hold exactly one Keras file; :func:`version_model_path` says
which path the loaders of :mod:`sparkdl.inference` then read. Names other than a plain decimal
number (``1``, ``42``; not ``007``, ``latest``, ``.tmp-...``) and plain files are ignored. The
largest number is the newest version. Versions are immutable: publish a new number instead of
rewriting one.

The training side (the chief, after each epoch or micro-batch) calls :func:`publish_version`,
which has ``write(path)`` write into a temporary sibling directory and then renames it into
place, so a reader never sees a half-written version. The scoring side calls
:func:`newest_version` (``sparkdl.inference`` does, through :class:`ModelVersions`). Paths are
local file system paths (a shared file system mounted on every executor, such as NFS, counts);
``hdfs://`` and cloud-store paths are not supported. No TensorFlow here.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import uuid
from dataclasses import dataclass
from typing import Callable

from ..common.errors import ModelVersionError as ModelVersionError  # re-exported: raised here

__all__ = ["ModelVersions", "ModelVersionError", "publish_version", "newest_version", "version_model_path"]

KERAS_SUFFIXES = (".keras", ".h5", ".hdf5")
_VERSION_NAME = re.compile(r"0|[1-9][0-9]*")
_TEMP_PREFIX = ".tmp-"


def _local_base(base: str | os.PathLike) -> str:
    base = os.fspath(base)
    if "://" in base:
        raise ModelVersionError(
            f"versioned model directories are local paths (a shared file system mounted on every "
            f"executor counts); {base!r} is not one"
        )
    return os.path.abspath(base)


@dataclass(frozen=True)
class ModelVersions:
    """A versioned model directory to score with, re-read for a newer version while scoring.

    Give it wherever :class:`sparkdl.inference.Predictor` (and ``map_in_pandas``,
    ``map_in_arrow``, ``predict_batch_udf``) takes a model path. Each Python worker lists
    ``base`` at most once every ``refresh_seconds`` (when an Arrow batch starts) and scores with
    the newest complete version, so every batch starting ``refresh_seconds`` or more after
    :func:`publish_version` returned is scored by that version or a newer one (plus the time a
    shared file system takes to show the new directory); 0 lists it for every batch. The switch
    happens between two Arrow batches, so one task (a partition of a streaming micro-batch) may
    score its rows with two versions: ``version_column`` tells which scored each row.
    """

    base: str
    refresh_seconds: float = 30.0

    def __post_init__(self):
        object.__setattr__(self, "base", _local_base(self.base))
        seconds = self.refresh_seconds
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds >= 0:
            raise ValueError(f"refresh_seconds must be a number >= 0, got {seconds!r}")
        object.__setattr__(self, "refresh_seconds", float(seconds))

    def newest(self) -> tuple[int, str]:
        """:func:`newest_version`, raising :class:`ModelVersionError` naming ``base`` if there is none."""
        found = newest_version(self.base)
        if found is None:
            state = "does not exist" if not os.path.isdir(self.base) else "holds no version yet"
            raise ModelVersionError(
                f"no model version in {self.base!r}: the directory {state} (on host {os.uname().nodename}); "
                f"publish one as {os.path.join(self.base, '<integer version>')} with "
                "sparkdl.model_versions.publish_version"
            )
        return found


def version_model_path(directory: str) -> str:
    """The path the model loaders read for one version directory: the directory itself when it is
    a SavedModel, else its one Keras file. Raises :class:`ModelVersionError` when it holds
    neither, or several Keras files."""
    if any(os.path.isfile(os.path.join(directory, n)) for n in ("saved_model.pb", "saved_model.pbtxt")):
        return directory
    try:
        names = sorted(os.listdir(directory))
    except OSError as exc:
        raise ModelVersionError(f"model version {directory!r} cannot be read: {exc}") from exc
    files = [n for n in names if n.endswith(KERAS_SUFFIXES) and os.path.isfile(os.path.join(directory, n))]
    if len(files) != 1:
        found = f"Keras files {files}" if files else f"no saved_model.pb and no Keras file (it holds {names[:10]})"
        raise ModelVersionError(
            f"model version {directory!r} holds {found}; a version is a SavedModel directory or a "
            f"directory with exactly one {'/'.join(KERAS_SUFFIXES)} file"
        )
    return os.path.join(directory, files[0])


def _versions(base: str) -> list[int]:
    """The complete versions in ``base``, ascending (temporary and other names left out)."""
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


def newest_version(base: str | os.PathLike) -> tuple[int, str] | None:
    """``(version, model path)`` of the newest complete version in ``base``, or None when there is
    none (or ``base`` does not exist). One directory listing; the model path is
    :func:`version_model_path`'s (raises :class:`ModelVersionError` if that version holds no model)."""
    base = _local_base(base)
    versions = _versions(base)
    if not versions:
        return None
    return versions[-1], version_model_path(os.path.join(base, str(versions[-1])))


def _fsync(path: str) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _fsync_tree(directory: str) -> None:
    """Flush a written version to disk before it becomes visible (a crash leaves no torn files)."""
    for root, _, files in os.walk(directory):
        for name in files:
            _fsync(os.path.join(root, name))
        _fsync(root)


def publish_version(base: str | os.PathLike, version: int, write: Callable[[str], object]) -> str:
    """Publish ``version`` of a model in ``base`` atomically; returns its model path.

    ``write(path)`` gets an empty directory (a temporary sibling of the version, whose name
    readers ignore) and writes the version into it: ``model.export(path)`` or
    ``tf.saved_model.save(model, path)`` (a SavedModel), or ``model.save(f"{path}/model.keras")``.
    The directory is then flushed to disk and renamed to ``base/<version>`` in one step, so
    :func:`newest_version` sees the whole version or nothing. ``base`` is created when missing.
    Raises ``FileExistsError`` if ``version`` exists already (versions are immutable) and
    :class:`ModelVersionError` if ``write`` wrote no model; either way nothing is published and
    the temporary directory is removed. Call it from one process (e.g. the chief:
    ``ctx.is_chief``), not from every node.
    """
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise ValueError(f"version must be an integer >= 0, got {version!r}")
    base = _local_base(base)
    final = os.path.join(base, str(version))
    if os.path.lexists(final):
        raise FileExistsError(errno.EEXIST, f"model version {version} exists already; versions are immutable", final)
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
                raise FileExistsError(
                    errno.EEXIST, f"model version {version} was published meanwhile; versions are immutable", final
                ) from exc
            raise
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    _fsync(base)  # the rename itself
    return final if model == temporary else os.path.join(final, os.path.basename(model))
