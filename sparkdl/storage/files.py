"""``Storage``: every file sparkdl reads or writes, on any store, never half a file.

Three kinds of write, each whole or absent:

- **one file** (:meth:`Storage.write_bytes`, :meth:`Storage.upload` of a file). On a local path and on
  HDFS, whose renames are atomic, it is written to ``.<name>.<id>.part`` beside its target and moved
  into place (HDFS cannot rename onto a file: the old one is deleted just before the move, so for that
  instant readers find no file). On an object store it is one PUT, or a multipart upload completed
  only when the stream closes, which S3, GCS and Azure show whole or not at all: a process *killed*
  mid-upload leaves the previous object (the upload is never completed). pyarrow has no abort, so a
  stream closed after an *exception* (a failing local read, a ``KeyboardInterrupt``) completes a
  partial object: sparkdl deletes it at once and raises, as it does when the bytes sent or the size the
  store reports differ from the local size. The target is then absent: the previous object is lost
  in that case (a known limit, for want of an abort in pyarrow), but a truncated one is never left.
- **a directory** (:meth:`Storage.upload` of a directory, e.g. a SavedModel). A local one is copied
  beside its target and swapped into place. On a store its commit files (``saved_model.pb``,
  ``saved_model.pbtxt``; else :data:`COMPLETE_MARKER`) mark it complete, and
  :meth:`Storage.is_complete` is what readers ask: a replace first deletes the old commit files (from
  then on readers see "upload not finished", never a mix that counts as complete), uploads the new
  files over the old names, deletes the files the new directory does not have, and uploads the commit
  file last. Until that last file is up, the directory holds a mix of old and new files and is not
  complete; a killed uploader leaves it so. :meth:`Storage.download` of a directory checks that its
  listing and completeness did not change while it was read, and reads it again if they did.
- **a generation** (:meth:`Storage.publish`, :meth:`Storage.fetch`): a directory that is replaced
  as a whole, again and again (a Keras backup every epoch, a stream checkpoint every micro-batch).
  Each one is uploaded into a new ``gen-<number>-<id>/`` beside the last, then
  :data:`POINTER` (one small file, itself whole or absent) is pointed at it, then generations older
  than the newest :data:`KEEP_GENERATIONS` are removed. A reader follows the pointer, downloads into
  a directory beside its target and checks every file's size against the pointer; a file missing or of
  another size (a generation removed under a slow reader) makes it read the pointer again, and only a
  whole generation is swapped into place: it gets the last whole generation, never a part of one.

A ``Storage`` holds one client per bucket (account, name node) for its own life; make one where
the work is (a node, a task) from the :class:`~.settings.StoreSettings` the driver carried.
"""

from __future__ import annotations

import json
import os
import posixpath
import shutil
import stat
import tempfile
import uuid
from typing import BinaryIO, Iterable, Iterator

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
#: Files that mark a directory complete when uploaded last, in order of preference (TensorFlow's
#: loaders take ``saved_model.pb`` first, then ``saved_model.pbtxt``).
_COMMIT_FILES = ("saved_model.pb", "saved_model.pbtxt", COMPLETE_MARKER)
#: Generations :meth:`Storage.publish` keeps: the new one and the two before it, so a reader that read
#: the pointer up to two publishes ago still finds its files.
KEEP_GENERATIONS = 3
#: Attempts of a fetch or a directory download that finds the store changed under it.
_READ_ATTEMPTS = 3
#: Stores whose file system moves a file into place atomically: single files are written beside
#: their target and moved there.
_RENAMING_STORES = ("local", "hdfs")


class Storage:
    """Reads and writes paths on every store sparkdl supports (see :mod:`sparkdl.storage`)."""

    def __init__(self, settings: StoreSettings | None = None, attempts: int = backends.MAX_ATTEMPTS):
        self.settings = settings or StoreSettings()
        self._attempts = attempts
        self._clients: dict[tuple, object] = {}

    # -- clients --

    def client(self, location: Location):
        """``(pyarrow file system, the path it names location by)``: one client per bucket, kept."""
        key = backends.client_key(location)
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
        """Write ``data`` to ``path``, replacing what was there, whole or not at all (see the module:
        on an object store a failed write leaves no object)."""
        self._write(parse(path), [data] if data else [], len(data), "write")

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
        else:
            self._put_file(local, location)

    def download(self, path: str, local: str) -> None:
        """Copy the file or directory at ``path`` to the local path ``local`` (whose parent exists).
        A directory is listed, downloaded, then listed again: when its files (names, sizes, times) or
        its completeness changed meanwhile (another writer replaced it), it is downloaded again, up to
        :data:`_READ_ATTEMPTS` times, then StorageError."""
        location = parse(path)
        if not self.is_dir(path):
            self._get_file(location, local)
            return
        written: set[str] = set()
        for _ in range(_READ_ATTEMPTS):
            complete = self.is_complete(path)
            listing = sorted(self.walk(path))
            names = {relative for relative, _, _ in listing}
            for stale in written - names:  # downloaded by the attempt before, gone from the store since
                _remove(os.path.join(local, *stale.split("/")))
            written = set()
            os.makedirs(local, exist_ok=True)
            try:
                for relative, _, _ in listing:
                    target = os.path.join(local, *relative.split("/"))
                    os.makedirs(os.path.dirname(target), exist_ok=True)
                    written.add(relative)
                    self._get_file(location.child(*relative.split("/")), target)
            except FileNotFoundError:  # deleted since listed
                continue
            if self.is_complete(path) == complete and sorted(self.walk(path)) == listing:
                return
        raise StorageError(
            f"{location.describe()} changed while it was read, {_READ_ATTEMPTS} times: another writer is "
            "replacing it; read it when that writer is done"
        )

    def _put_file(self, local: str, location: Location) -> None:
        """Upload the local file ``local`` to ``location`` (its first bytes up to the size it had when
        opened: a file that grows meanwhile, e.g. a log, goes up as it was then; a pipe, to its end)."""
        if location.is_local and os.path.abspath(local) == os.path.abspath(location.key):
            return
        with open(local, "rb") as source:
            status = os.fstat(source.fileno())
            size = status.st_size if stat.S_ISREG(status.st_mode) else None
            self._write(location, _read_chunks(source, size), size, "upload to")

    def _write(self, location: Location, chunks: Iterable[bytes], size: int | None, doing: str) -> None:
        """Write ``chunks`` (``size`` bytes in all; None: unknown, as many as come) to ``location``,
        whole or not at all (see the module).

        One stream (on an object store a multipart upload completed on close), written chunk by chunk
        here: pyarrow's ``NativeFile.upload`` swallows a failing write in its thread, and its
        ``__exit__`` closes, hence completes, the stream even on an exception. Not ``copy_files``,
        which also writes directory marker objects for every parent."""
        fs, target = self.client(location)
        staged = location.store in _RENAMING_STORES
        written = target
        if staged:
            parent, name = posixpath.split(target)
            written = posixpath.join(parent, f".{name}.{uuid.uuid4().hex}.part")
        opened = False
        try:
            if staged:
                fs.create_dir(parent, recursive=True)
            sent = 0
            out = fs.open_output_stream(written)
            opened = True
            try:
                for chunk in chunks:
                    out.write(chunk)
                    sent += len(chunk)
            except BaseException:
                _close_quietly(out)  # on an object store this completes the upload: removed below
                raise
            out.close()
            size = sent if size is None else size
            stored = fs.get_file_info(written).size
            if sent != size or stored != size:
                raise StorageError(
                    f"cannot {doing} {location.describe()}: {sent} of its {size} bytes were sent and the store "
                    f"holds {stored}; the partial file was removed"
                )
            if staged:
                if location.is_local:
                    fsync(written)
                elif fs.get_file_info(target).type != _file_type("NotFound"):
                    fs.delete_file(target)  # HDFS renames onto no file: readers find none for this instant
                fs.move(written, target)
        except BaseException as exc:
            if opened:  # the stream was closed, so on an object store an object may be there: remove it
                _discard(fs, written)
            if isinstance(exc, OSError) and not isinstance(exc, StorageError):
                raise self.explain(location, exc, doing) from None
            raise

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
        """Replace the directory at ``location`` by the local one, in the order the module gives: the
        old commit files go first, the new commit file comes last. Every file under ``location`` that
        the local directory does not have is deleted (``location`` is the directory itself, not a
        base holding others)."""
        import pyarrow.fs as pafs

        files = sorted(_local_files(local))
        if location.is_local:
            _replace_local_dir(local, location.key)
            return
        commits = [name for name in _COMMIT_FILES if name in files]  # the preferred one goes up last
        if self.info(location.original).type == pafs.FileType.File:
            self.delete(location.original)  # a file where the directory goes
        for name in _COMMIT_FILES:  # from here on readers see an unfinished upload
            self.delete(location.child(name).original)
        for relative in files:
            if relative not in commits:
                self._put_file(os.path.join(local, relative), location.child(*relative.split("/")))
        keep = set(files)
        for relative, _, _ in list(self.walk(location.original)):
            if relative not in keep:
                self.delete(location.child(*relative.split("/")).original)
        for name in reversed(commits):
            self._put_file(os.path.join(local, name), location.child(name))
        if not commits:
            self.write_bytes(location.child(COMPLETE_MARKER).original, b"")

    def mirror(self, local_dir: str, path: str, sent: dict[str, tuple[int, int]], recursive: bool = True) -> int:
        """Upload each file under ``local_dir`` (directly in it unless ``recursive``) that is new or
        changed since ``sent`` (relative path -> (size, mtime) of what was uploaded, updated here) to
        the same place under ``path``; returns how many went up. For a directory that grows while it is
        read elsewhere (TensorBoard's log dir, a node's logs)."""
        uploaded = 0
        names = _local_files(local_dir) if recursive else _top_files(local_dir)
        for relative in sorted(names):
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
            self._put_file(source, location.child(name, *relative.split("/")))
        # the generations before this one, newest first: kept, so that slow readers still find them
        older = [previous["generation"], *previous.get("older", [])] if previous else []
        older = older[: KEEP_GENERATIONS - 1]
        pointer = {"generation": name, "number": number, "files": files, "facts": facts, "older": older}
        self.write_text(location.child(POINTER).original, json.dumps(pointer, indent=1, sort_keys=True))
        keep = {name, *older}
        for entry, is_dir in self.listdir(path):
            if is_dir and entry.startswith(_GENERATION_PREFIX) and entry not in keep:
                self.delete(location.child(entry).original)
        return name

    def fetch(self, path: str, local_dir: str) -> dict | None:
        """Download the generation ``path`` points at into ``local_dir`` (its content replaced); returns
        the pointer's facts, or None (``local_dir`` left empty) when ``path`` holds no generation yet.

        The generation is downloaded beside ``local_dir`` and swapped into place only when whole. A
        file of it missing or of another size than the pointer says (the generation was removed, or
        changed, while it was read) makes the pointer be read again: after :data:`_READ_ATTEMPTS`
        attempts, StorageError naming the file, ``local_dir`` left as it was."""
        local_dir = os.path.abspath(local_dir)
        parent = os.path.dirname(local_dir)
        failure = ""
        for _ in range(_READ_ATTEMPTS):
            pointer = self._pointer(path)
            os.makedirs(parent, exist_ok=True)
            staged = tempfile.mkdtemp(prefix=f".{os.path.basename(local_dir)}.", suffix=".part", dir=parent)
            try:
                if pointer is not None:
                    failure = self._fetch_generation(parse(path).child(pointer["generation"]), pointer, staged)
                    if failure:
                        continue
                _swap_into_place(staged, local_dir)
                return None if pointer is None else dict(pointer.get("facts", {}))
            finally:
                shutil.rmtree(staged, ignore_errors=True)  # nothing left there once swapped into place
        raise StorageError(f"{failure} (the pointer was read {_READ_ATTEMPTS} times)")

    def _fetch_generation(self, location: Location, pointer: dict, local_dir: str) -> str:
        """Download the generation at ``location`` into ``local_dir``: "" when it is whole, else what is
        wrong with it."""
        for relative, size in pointer["files"].items():
            target = os.path.join(local_dir, *relative.split("/"))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            source = location.child(*relative.split("/"))
            try:
                self._get_file(source, target)
            except FileNotFoundError:
                return f"{source.describe()} is missing from its generation: removed after it was published"
            if os.path.getsize(target) != size:
                return (
                    f"{source.describe()} holds {os.path.getsize(target)} bytes, its generation says {size}: the "
                    "store changed it after it was published"
                )
        return ""

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
            _check_pointer(pointer)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StorageError(
                f"{parse(path).child(POINTER).describe()} is not a pointer sparkdl wrote ({exc})"
            ) from None
        return pointer


def _check_pointer(pointer: dict) -> None:
    """ValueError (KeyError, TypeError) unless ``pointer`` is one :meth:`Storage.publish` writes: its
    fields, a generation name of one part, and relative paths that stay inside the generation."""
    generation, files = pointer["generation"], pointer["files"]
    int(pointer["number"])
    if not isinstance(generation, str) or not _safe_relative(generation) or "/" in generation:
        raise ValueError(f"generation {generation!r} is not a directory name")
    for relative, size in files.items():
        if not _safe_relative(relative):
            raise ValueError(f"file {relative!r} is not a path inside the generation")
        if not isinstance(size, int):
            raise TypeError(f"file {relative!r} has size {size!r}")
    for name in pointer.get("older", []):
        if not isinstance(name, str) or not _safe_relative(name) or "/" in name:
            raise ValueError(f"generation {name!r} is not a directory name")


def _safe_relative(relative) -> bool:
    """Whether ``relative`` is a relative ``/``-separated path with no empty, ``.`` or ``..`` part and
    no backslash (nothing that could lead out of the directory it is joined to)."""
    return (
        isinstance(relative, str)
        and bool(relative)
        and "\\" not in relative
        and "\x00" not in relative
        and not relative.startswith("/")
        and all(part not in ("", ".", "..") for part in relative.split("/"))
    )


def _read_chunks(source: BinaryIO, size: int | None) -> Iterator[bytes]:
    """The first ``size`` bytes (None: all) of the open local file ``source``, :data:`_UPLOAD_BUFFER`
    at a time (fewer when it shrank meanwhile)."""
    left = size
    while left is None or left > 0:
        chunk = source.read(_UPLOAD_BUFFER if left is None else min(_UPLOAD_BUFFER, left))
        if not chunk:
            return
        if left is not None:
            left -= len(chunk)
        yield chunk


def _file_type(name: str):
    import pyarrow.fs as pafs

    return getattr(pafs.FileType, name)


def _close_quietly(stream) -> None:
    """Close ``stream`` while another error is raised (which is the one to report)."""
    try:
        stream.close()
    except Exception:  # noqa: BLE001 - the caller raises the error that matters
        pass


def _discard(fs, path: str) -> None:
    """Delete the file ``path`` if it is there (nothing more can be done when that fails)."""
    try:
        fs.delete_file(path)
    except Exception:  # noqa: BLE001 - the caller raises the error that matters
        pass


def fsync(path: str) -> None:
    """Flush the local file or directory ``path`` to disk (before it is renamed into sight)."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


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


def _top_files(directory: str) -> list[str]:
    """The files directly in ``directory``."""
    try:
        return [entry.name for entry in os.scandir(directory) if entry.is_file()]
    except FileNotFoundError:
        return []


def _local_files(directory: str) -> Iterator[str]:
    """Every file under ``directory``, relative, with ``/`` separators."""
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        for name in files:
            yield os.path.relpath(os.path.join(root, name), directory).replace(os.sep, "/")


def _replace_local_dir(source: str, target: str) -> None:
    """Copy the directory ``source`` beside ``target``, then swap it into place."""
    if os.path.abspath(source) == os.path.abspath(target):
        return
    parent = os.path.dirname(target.rstrip("/")) or "."
    os.makedirs(parent, exist_ok=True)
    staged = os.path.join(parent, f".{os.path.basename(target.rstrip('/'))}.{uuid.uuid4().hex[:8]}.part")
    try:
        shutil.copytree(source, staged)
        _swap_into_place(staged, target)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise


def _swap_into_place(staged: str, target: str) -> None:
    """Rename the directory ``staged`` to ``target``, replacing what was there (a moment with none)."""
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
