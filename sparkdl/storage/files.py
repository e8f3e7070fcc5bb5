"""``Storage``: every file sparkdl reads or writes, on any store, never half a file.

Three kinds of write, each whole or absent on every store, renames or not:

- **one file** (:meth:`Storage.write_bytes`, :meth:`Storage.upload` of a file): a local file is
  written beside its target and renamed into place; an object is one PUT (or a multipart upload
  completed only at the end), which S3, GCS and Azure show whole or not at all. A process killed
  mid-upload leaves the previous object.
- **a directory** (:meth:`Storage.upload` of a directory, e.g. a SavedModel): its files are
  uploaded with the one that marks it complete last (``saved_model.pb`` for a SavedModel, which
  every loader and TF Serving looks for first; else :data:`COMPLETE_MARKER`), and
  :meth:`Storage.is_complete` is what readers ask.
- **a generation** (:meth:`Storage.publish`, :meth:`Storage.fetch`): a directory that is replaced
  as a whole, again and again (a Keras backup every epoch, a stream checkpoint every micro-batch).
  Each one is uploaded into a new ``gen-<number>-<id>/`` beside the last, then
  :data:`POINTER` (one small file, itself whole or absent) is pointed at it, then older
  generations are removed. A reader follows the pointer and checks every file's size against it,
  so it gets the last whole generation, never a part of one.

A ``Storage`` holds one client per bucket (account, name node) for its own life; make one where
the work is (a node, a task) from the :class:`~.settings.StoreSettings` the driver carried.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from typing import Iterator

from ..common.errors import StorageError
from . import backends
from .locations import Location, parse
from .settings import StoreSettings

#: The file written last into an uploaded directory that has no ``saved_model.pb``.
COMPLETE_MARKER = "_SPARKDL_COMPLETE"
#: A generation directory's pointer file: the generation readers take, and its files' sizes.
POINTER = "latest.json"
_GENERATION_PREFIX = "gen-"
#: Bytes read from a local file per write to an upload stream.
_UPLOAD_BUFFER = 32 * 1024 * 1024
#: A download's ranges: bytes per request, and requests in flight at once.
_RANGE_BYTES = 16 * 1024 * 1024
_RANGE_READERS = 4
#: Files that mark a directory complete when uploaded last, in order of preference.
_COMMIT_FILES = ("saved_model.pb", COMPLETE_MARKER)


class Storage:
    """Reads and writes paths on every store sparkdl supports (see :mod:`sparkdl.storage`)."""

    def __init__(self, settings: StoreSettings | None = None, attempts: int = backends.MAX_ATTEMPTS):
        self.settings = settings or StoreSettings()
        self._attempts = attempts
        self._clients: dict[tuple, object] = {}

    # -- clients --

    def client(self, location: Location):
        """``(pyarrow file system, the path it names location by)``: one client per bucket, kept."""
        key = (location.store, location.bucket, location.account)
        client = self._clients.get(key)
        if client is None:
            client, path = backends.filesystem(location, self.settings, self._attempts)
            self._clients[key] = client
            return client, path
        return client, backends.filesystem_path(location)

    def explain(self, location: Location, exc: BaseException, doing: str) -> StorageError:
        """A StorageError for ``exc``, raised while ``doing`` something with ``location`` (names the path,
        the store and the setting to change; never a secret)."""
        return backends.explain(location, self.settings, exc, doing)

    # -- questions --

    def info(self, path: str):
        """pyarrow's ``FileInfo`` of ``path`` (``type`` NotFound when nothing is there)."""
        location = parse(path)
        fs, target = self.client(location)
        try:
            return fs.get_file_info(target)
        except OSError as exc:
            raise self.explain(location, exc, "look at") from None

    def exists(self, path: str) -> bool:
        """Whether a file or directory is at ``path``."""
        import pyarrow.fs as pafs

        return self.info(path).type != pafs.FileType.NotFound

    def is_dir(self, path: str) -> bool:
        """Whether ``path`` is a directory (on an object store: a prefix holding objects)."""
        import pyarrow.fs as pafs

        return self.info(path).type == pafs.FileType.Directory

    def walk(self, path: str) -> Iterator[tuple[str, int, int]]:
        """``(relative path, size, mtime in ns)`` of every file under the directory ``path``."""
        import pyarrow.fs as pafs

        location = parse(path)
        fs, target = self.client(location)
        try:
            infos = fs.get_file_info(pafs.FileSelector(target, recursive=True, allow_not_found=True))
        except OSError as exc:
            raise self.explain(location, exc, "list") from None
        for info in infos:
            if info.type == pafs.FileType.File:
                relative = info.path[len(target) :].lstrip("/")
                yield relative, info.size or 0, info.mtime_ns or 0

    def listdir(self, path: str) -> list[tuple[str, bool]]:
        """``(name, is a directory)`` of each entry directly in ``path`` ([] when it does not exist)."""
        import pyarrow.fs as pafs

        location = parse(path)
        fs, target = self.client(location)
        # pyarrow's GCS lists one level as objects only, dropping the sub-prefixes no marker object
        # stands for (every directory sparkdl uploads): there the whole tree is listed and folded.
        whole = location.store == "gcs"
        try:
            infos = fs.get_file_info(pafs.FileSelector(target, recursive=whole, allow_not_found=True))
        except OSError as exc:
            raise self.explain(location, exc, "list") from None
        if not whole:
            return [(info.base_name, info.type == pafs.FileType.Directory) for info in infos]
        entries: dict[str, bool] = {}
        for info in infos:
            first, sep, _ = info.path[len(target) :].lstrip("/").partition("/")
            if first:
                entries[first] = entries.get(first, False) or bool(sep) or info.type == pafs.FileType.Directory
        return list(entries.items())

    def is_complete(self, path: str) -> bool:
        """Whether ``path`` is a whole file, or a directory whose upload finished (see the module)."""
        import pyarrow.fs as pafs

        kind = self.info(path).type
        if kind == pafs.FileType.File:
            return True
        if kind != pafs.FileType.Directory:
            return False
        location = parse(path)
        if location.is_local:
            return True  # written in place by the user, or renamed into place by sparkdl
        return any(self.exists(f"{path.rstrip('/')}/{name}") for name in _COMMIT_FILES)

    # -- one file --

    def read_bytes(self, path: str) -> bytes:
        """The bytes of the file at ``path`` (FileNotFoundError naming it when there is none)."""
        location = parse(path)
        fs, target = self.client(location)
        try:
            with fs.open_input_stream(target) as stream:
                return stream.read()
        except FileNotFoundError:
            raise FileNotFoundError(f"no file at {location.describe()}") from None
        except OSError as exc:
            raise self.explain(location, exc, "read") from None

    def read_text(self, path: str) -> str | None:
        """The UTF-8 text of the file at ``path``; None when there is none."""
        try:
            return self.read_bytes(path).decode("utf-8")
        except FileNotFoundError:
            return None

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write ``data`` to ``path``, replacing what was there, whole or not at all."""
        location = parse(path)
        if location.is_local:
            _write_local(location.key, data)
            return
        fs, target = self.client(location)
        try:
            with fs.open_output_stream(target) as stream:  # one PUT: the store shows it whole or not at all
                stream.write(data)
        except OSError as exc:
            raise self.explain(location, exc, "write") from None

    def write_text(self, path: str, text: str) -> None:
        """:meth:`write_bytes` of ``text`` in UTF-8."""
        self.write_bytes(path, text.encode("utf-8"))

    def delete(self, path: str) -> None:
        """Remove the file or directory at ``path`` (nothing if there is none)."""
        import pyarrow.fs as pafs

        location = parse(path)
        fs, target = self.client(location)
        try:
            kind = fs.get_file_info(target).type
            if kind == pafs.FileType.Directory:
                fs.delete_dir(target)
            elif kind == pafs.FileType.File:
                fs.delete_file(target)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise self.explain(location, exc, "delete") from None

    def mkdirs(self, path: str) -> None:
        """Create the directory ``path`` (local and HDFS; object stores have no directories)."""
        location = parse(path)
        if location.is_local:
            os.makedirs(location.key, exist_ok=True)
        elif location.store == "hdfs":
            fs, target = self.client(location)
            fs.create_dir(target, recursive=True)

    # -- files and directories between here and the store --

    def upload(self, local: str, path: str) -> None:
        """Copy the local file or directory ``local`` to ``path`` (replacing a file there; a directory
        goes into place whole, see the module). Only a finished upload is ever visible."""
        location = parse(path)
        if os.path.isdir(local):
            self._upload_dir(local, location)
        elif location.is_local:
            _copy_local_file(local, location.key)
        else:
            self._put_file(local, location)

    def download(self, path: str, local: str) -> None:
        """Copy the file or directory at ``path`` to the local path ``local`` (whose parent exists)."""
        location = parse(path)
        if not self.is_dir(path):
            self._get_file(location, local)
            return
        os.makedirs(local, exist_ok=True)
        for relative, _, _ in self.walk(path):
            target = os.path.join(local, *relative.split("/"))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            self._get_file(location.child(*relative.split("/")), target)

    def _put_file(self, local: str, location: Location) -> None:
        fs, target = self.client(location)
        try:
            # One stream (a multipart upload completed on close), not copy_files, which also writes
            # directory marker objects for every parent.
            with open(local, "rb") as source, fs.open_output_stream(target) as out:
                out.upload(source, buffer_size=_UPLOAD_BUFFER)
        except OSError as exc:
            raise self.explain(location, exc, "upload to") from None

    def _get_file(self, location: Location, local: str) -> None:
        if location.is_local:
            shutil.copyfile(location.key, local)
            return
        fs, target = self.client(location)
        try:
            with fs.open_input_file(target) as source:
                _download_ranges(source, local)
        except FileNotFoundError:
            raise FileNotFoundError(f"no file at {location.describe()}") from None
        except OSError as exc:
            raise self.explain(location, exc, "download") from None

    def _upload_dir(self, local: str, location: Location) -> None:
        files = sorted(_local_files(local))
        if location.is_local:
            _replace_local_dir(local, location.key)
            return
        commit = next((name for name in _COMMIT_FILES if name in files), None)
        if self.exists(location.original):
            self.delete(location.original)
        for relative in files:
            if relative != commit:
                self._put_file(os.path.join(local, relative), location.child(*relative.split("/")))
        if commit is not None:
            self._put_file(os.path.join(local, commit), location.child(commit))
        else:
            self.write_bytes(location.child(COMPLETE_MARKER).original, b"")

    def mirror(self, local_dir: str, path: str, sent: dict[str, tuple[int, int]]) -> int:
        """Upload each file under ``local_dir`` that is new or changed since ``sent`` (relative path ->
        (size, mtime) of what was uploaded, updated here) to the same place under ``path``; returns how
        many went up. For a directory that grows while it is read elsewhere (TensorBoard's log dir)."""
        uploaded = 0
        for relative in sorted(_local_files(local_dir)):
            source = os.path.join(local_dir, relative)
            try:
                stat = os.stat(source)
            except FileNotFoundError:  # removed since listed
                continue
            if sent.get(relative) == (stat.st_size, stat.st_mtime_ns):
                continue
            self.upload(source, parse(path).child(*relative.split("/")).original)
            sent[relative] = (stat.st_size, stat.st_mtime_ns)
            uploaded += 1
        return uploaded

    # -- generations --

    def publish(self, local_dir: str, path: str, **facts) -> str:
        """Upload ``local_dir`` as the new generation of ``path`` and point readers at it; returns its
        name. ``facts`` (JSON values, e.g. ``epoch=3``) are kept in the pointer for readers."""
        location = parse(path)
        previous = self._pointer(path)
        number = int(previous["number"]) + 1 if previous else 0
        name = f"{_GENERATION_PREFIX}{number:06d}-{uuid.uuid4().hex[:8]}"
        files = {}
        for relative in sorted(_local_files(local_dir)):
            source = os.path.join(local_dir, relative)
            files[relative] = os.path.getsize(source)
            target = location.child(name, *relative.split("/"))
            if target.is_local:
                os.makedirs(os.path.dirname(target.key), exist_ok=True)
                _copy_local_file(source, target.key)
            else:
                self._put_file(source, target)
        pointer = {"generation": name, "number": number, "files": files, "facts": facts}
        self.write_text(location.child(POINTER).original, json.dumps(pointer, indent=1, sort_keys=True))
        keep = {name, previous["generation"] if previous else None}
        for entry, is_dir in self.listdir(path):
            if is_dir and entry.startswith(_GENERATION_PREFIX) and entry not in keep:
                self.delete(location.child(entry).original)
        return name

    def fetch(self, path: str, local_dir: str) -> dict | None:
        """Download the generation ``path`` points at into ``local_dir`` (emptied first); returns the
        pointer's facts, or None (``local_dir`` left empty) when ``path`` holds no generation yet.
        StorageError when a file of it is missing or of another size than the pointer says."""
        pointer = self._pointer(path)
        shutil.rmtree(local_dir, ignore_errors=True)
        os.makedirs(local_dir, exist_ok=True)
        if pointer is None:
            return None
        location = parse(path).child(pointer["generation"])
        for relative, size in pointer["files"].items():
            target = os.path.join(local_dir, *relative.split("/"))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            self._get_file(location.child(*relative.split("/")), target)
            if os.path.getsize(target) != size:
                raise StorageError(
                    f"{location.child(relative).describe()} holds {os.path.getsize(target)} bytes, its generation "
                    f"says {size}: the store changed it after it was published"
                )
        return dict(pointer.get("facts", {}))

    def remove_generations(self, path: str) -> None:
        """Remove every generation of ``path`` and its pointer (the pointer first: readers then see none)."""
        location = parse(path)
        self.delete(location.child(POINTER).original)
        for entry, is_dir in self.listdir(path):
            if is_dir and entry.startswith(_GENERATION_PREFIX):
                self.delete(location.child(entry).original)

    def _pointer(self, path: str) -> dict | None:
        text = self.read_text(parse(path).child(POINTER).original)
        if text is None:
            return None
        try:
            pointer = json.loads(text)
            pointer["generation"], pointer["files"], pointer["number"]  # noqa: B018 - fields it must have
        except (ValueError, KeyError, TypeError) as exc:
            raise StorageError(
                f"{parse(path).child(POINTER).describe()} is not a pointer sparkdl wrote ({exc})"
            ) from None
        return pointer


def _download_ranges(source, local: str) -> None:
    """Copy the open remote file ``source`` to ``local`` in :data:`_RANGE_BYTES` ranges read by
    :data:`_RANGE_READERS` threads at once (pyarrow releases the GIL): one request per range, where a
    sequential copy would wait for one small ranged request after another."""
    from concurrent.futures import ThreadPoolExecutor

    size = source.size()
    descriptor = os.open(local, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.ftruncate(descriptor, size)

        def copy(offset: int) -> None:
            data = source.read_at(min(_RANGE_BYTES, size - offset), offset)
            os.pwrite(descriptor, memoryview(data), offset)

        offsets = range(0, size, _RANGE_BYTES)
        if len(offsets) <= 1:
            for offset in offsets:
                copy(offset)
        else:
            with ThreadPoolExecutor(min(_RANGE_READERS, len(offsets)), thread_name_prefix="sparkdl-download") as pool:
                list(pool.map(copy, offsets))
    finally:
        os.close(descriptor)


def _local_files(directory: str) -> Iterator[str]:
    """Every file under ``directory``, relative, with ``/`` separators."""
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        for name in files:
            yield os.path.relpath(os.path.join(root, name), directory).replace(os.sep, "/")


def _write_local(target: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
    descriptor, partial = tempfile.mkstemp(
        prefix=f".{os.path.basename(target)}.", suffix=".part", dir=os.path.dirname(target) or "."
    )
    try:
        with os.fdopen(descriptor, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, target)
    except BaseException:
        _remove(partial)
        raise


def _copy_local_file(source: str, target: str) -> None:
    """Copy ``source`` to ``target`` beside it first, then rename into place."""
    if os.path.abspath(source) == os.path.abspath(target):
        return
    os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
    partial = f"{target}.{uuid.uuid4().hex[:8]}.part"
    try:
        shutil.copyfile(source, partial)
        os.replace(partial, target)
    except BaseException:
        _remove(partial)
        raise


def _replace_local_dir(source: str, target: str) -> None:
    """Copy the directory ``source`` beside ``target``, then swap it into place."""
    if os.path.abspath(source) == os.path.abspath(target):
        return
    parent = os.path.dirname(target.rstrip("/")) or "."
    os.makedirs(parent, exist_ok=True)
    staged = os.path.join(parent, f".{os.path.basename(target.rstrip('/'))}.{uuid.uuid4().hex[:8]}.part")
    shutil.copytree(source, staged)
    old = None
    if os.path.lexists(target):
        old = f"{staged}.old"
        os.rename(target, old)
    os.rename(staged, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True) if os.path.isdir(old) else _remove(old)


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass
