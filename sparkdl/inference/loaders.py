"""Executor side: load a model (``.keras``/``.h5`` file, SavedModel directory, ``make_predict_fn``)
into a :class:`~.model.LoadedModel` that scores numpy batches; fingerprint model files.

**Keras.** This module never uses ``tf.keras`` and never sets ``TF_USE_LEGACY_KERAS`` (which
would leak into later tasks of the worker). ``.keras`` files are loaded by the Keras that wrote
them, read from the archive's ``metadata.json`` (``keras_version`` 3.x: ``keras``; 2.x:
``tf_keras``); ``.h5`` files by ``tf_keras``; SavedModel directories by
``tf.saved_model.load``, which needs no Keras at all. In safe mode (the default) a Keras file's
config is checked by :mod:`.model_safety` before any Keras code runs.

**Where models are read.** A model path is local (on every executor: a shared file system
mounted there) or on any store of :mod:`sparkdl.storage`: ``s3://``/``s3a://``/``s3n://``,
``gs://``, ``abfs[s]://``, ``hdfs://``. A remote model is read through
:class:`sparkdl.storage.Storage` (``pyarrow.fs``; TensorFlow's own file systems reach only local
paths and ``gs://``), made by :mod:`.worker` from the settings the driver put in
:attr:`.model.ModelSource.storage`: it is downloaded whole into a private temporary directory
first, so that the bytes safe mode checks are the bytes Keras or TensorFlow load. In safe mode a
local (or mounted) Keras model is copied the same way (:func:`private_copy`), so that whoever can
write its path cannot replace it between the check and Keras' load. A remote
directory whose upload has not finished (:meth:`~sparkdl.storage.Storage.is_complete`: no
``saved_model.pb``, nor the completion marker of ``Storage.upload``) is refused, never half loaded.

TensorFlow is handed in (``tf``) by :mod:`.worker`, which imports it once per Python worker with
the task's devices.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
import tempfile
import weakref
import zipfile
from typing import Any

from ..storage import Storage, is_remote, parse
from . import model_safety
from .model import LoadedModel, ModelLoadError, ModelSource, TensorInfo

#: Bytes read and written at a time when a local model is copied for safe mode.
COPY_CHUNK_BYTES = 1 << 20
# Non-blocking: opening a named pipe for reading would wait for a writer (regular files ignore it).
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK


def _is_remote(path: str) -> bool:
    return is_remote(path)


def _local(path: str) -> str:
    """A local model path as this machine's file system names it (``file:``/``dbfs:`` spellings too)."""
    return parse(path).key if path.startswith(("file:", "dbfs:")) else path


def _store(storage: Storage | None) -> Storage:
    return storage if storage is not None else Storage()


def _remote_kind(path: str, storage: Storage) -> tuple[str, Any]:
    """``("file" or "dir", pyarrow FileInfo)``: what is at the remote ``path``; ModelLoadError naming
    it when there is nothing, or a directory whose upload has not finished."""
    import pyarrow.fs as pafs

    info = storage.info(path)
    kind = info.type
    if kind == pafs.FileType.File:
        return "file", info
    if kind != pafs.FileType.Directory:
        raise ModelLoadError(
            f"model path {path!r} does not exist (nothing there, as seen from host {os.uname().nodename}); "
            "check the path and that the model was uploaded"
        )
    if not storage.is_complete(path):
        raise ModelLoadError(
            f"model directory {path!r}: upload not finished (it holds no saved_model.pb, nor the "
            "_SPARKDL_COMPLETE marker that sparkdl.storage.Storage.upload writes last), so it is not "
            "loaded: a part of a model would load as a broken one. Upload it whole, saved_model.pb last"
        )
    return "dir", info


def fingerprint(path: str, storage: Storage | None = None) -> str:
    """A digest of a model file or directory's files (relative path, size, mtime): it changes
    when the model is overwritten. Remote paths (``s3a://``, ``gs://``, ``hdfs://``...) are listed
    through ``storage`` (:class:`sparkdl.storage.Storage`); a remote directory whose upload has
    not finished is refused (ModelLoadError naming it)."""
    entries = []
    if _is_remote(path):
        storage = _store(storage)
        kind, info = _remote_kind(path, storage)
        if kind == "file":
            entries.append(("", info.size or 0, info.mtime_ns or 0))
        else:
            entries.extend(storage.walk(path))
    else:
        local = _local(path)
        if not os.path.exists(local):
            raise ModelLoadError(
                f"model path {path!r} does not exist on this executor (host "
                f"{os.uname().nodename}); executors need a path they can all read "
                "(a shared file system, HDFS, or a cloud store)"
            )
        if os.path.isfile(local):
            stat = os.stat(local)
            entries.append(("", stat.st_size, stat.st_mtime_ns))
        else:
            for root, dirs, files in os.walk(local):
                dirs.sort()
                for name in sorted(files):
                    full = os.path.join(root, name)
                    stat = os.stat(full)
                    entries.append((os.path.relpath(full, local), stat.st_size, stat.st_mtime_ns))
    return hashlib.sha256(json.dumps(sorted(entries)).encode()).hexdigest()[:16]


def _numpy_dtype(dtype: Any) -> str | None:
    if dtype is None:
        return None
    name = getattr(dtype, "name", None) or str(dtype)
    return "str" if name == "string" else name


def _shape_info(shape: Any) -> tuple[tuple[int | None, ...] | None, int | None]:
    """``(per-row shape, fixed batch size or None)`` of a TensorShape or tuple (None if unknown)."""
    if shape is None:
        return None, None
    if hasattr(shape, "rank"):
        if shape.rank is None:
            return None, None
        shape = shape.as_list()
    dims = list(shape)
    if not dims:
        return (), None
    return tuple(dims[1:]), dims[0]


def _layer_name(tensor: Any, index: int) -> str:
    """The name of the layer producing a Keras output tensor (what users named it)."""
    history = getattr(tensor, "_keras_history", None)
    layer = getattr(history, "operation", None) or getattr(history, "layer", None)
    return getattr(layer, "name", None) or f"output_{index}"


_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def _is_hdf5(local: str) -> bool:
    """Whether HDF5's signature is where HDF5 looks for it: offset 0, 512, 1024, 2048... (a user
    block of any size may come first, which is how a file can be both HDF5 and something else)."""
    with open(local, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        offset = 0
        while offset + len(_HDF5_SIGNATURE) <= size:
            handle.seek(offset)
            if handle.read(len(_HDF5_SIGNATURE)) == _HDF5_SIGNATURE:
                return True
            offset = max(512, offset * 2)
    return False


def _is_hdf5_file(path: str, local: str) -> bool:
    """Whether the local model file is HDF5; ModelLoadError if it is a zip archive too.

    Keras picks its loader from the file's content as well as its name (tf-keras reads any HDF5
    file as .h5), so a file that is both could pass the checks of one format and load as the other.
    """
    hdf5 = os.path.isfile(local) and _is_hdf5(local)
    if hdf5 and zipfile.is_zipfile(local):
        raise ModelLoadError(
            f"model {path!r} is both a zip archive and an HDF5 file: refusing a file whose format is "
            "ambiguous; save the model again as a .keras or .h5 file"
        )
    return hdf5


def _h5_config(local: str) -> Any:
    """The ``model_config`` attribute of an HDF5 file (None for a weights-only file)."""
    import h5py

    with h5py.File(local, "r") as handle:
        return handle.attrs.get("model_config")


def _keras_format_config(path: str, local: str) -> tuple[Any, Any]:
    """``(metadata, config)`` of a Keras-format model, raw (None where absent): a ``.keras`` zip
    archive or a directory holding its files, read as Keras reads them."""
    if os.path.isdir(local):
        found = {}
        for name in ("metadata.json", "config.json"):
            if os.path.isfile(os.path.join(local, name)):
                with open(os.path.join(local, name), "rb") as handle:
                    found[name] = handle.read()
        return found.get("metadata.json"), found.get("config.json")
    try:
        with zipfile.ZipFile(local) as archive:
            names = archive.namelist()
            for name in ("metadata.json", "config.json"):
                if names.count(name) > 1:  # zip readers differ on which copy they read
                    raise ModelLoadError(f"model {path!r} holds {name} twice: refusing an ambiguous archive")
            return tuple(archive.read(n) if n in names else None for n in ("metadata.json", "config.json"))
    except (OSError, zipfile.BadZipFile):
        return None, None


def _keras_version(metadata: Any) -> str:
    try:
        version = json.loads(metadata).get("keras_version", "") if metadata is not None else ""
    except (ValueError, AttributeError):
        return ""
    return version if isinstance(version, str) else ""


def check_keras_file(path: str, local: str, safe_mode: bool) -> str:
    """Which Keras loads the model file at ``local`` (a private copy of ``path``:
    :func:`private_copy`): ``"tf_keras"`` (``.h5``, a ``.keras`` file of Keras 2) or ``"keras"``
    (Keras 3). In safe mode, ModelLoadError unless the model's config,
    read from the bytes that Keras will read, names only what runs no code of the file's
    (:mod:`.model_safety`): checked here, before any Keras code runs."""
    # Before any Keras code: the format as the file's bytes say it, whatever its name.
    hdf5 = _is_hdf5_file(path, local)
    if hdf5 or path.endswith((".h5", ".hdf5")):
        if safe_mode:
            raw = _h5_config(local)
            if raw is not None:  # weights only: tf-keras builds no model from it
                model_safety.refuse_code(path, model_safety.parse_config(path, raw, "model_config"), "tf_keras")
        return "tf_keras"
    metadata, raw = _keras_format_config(path, local)
    flavour = "tf_keras" if _keras_version(metadata).startswith("2.") else "keras"
    if safe_mode:
        if raw is None:
            raise ModelLoadError(
                f"model {path!r} is not a .keras archive (no config.json), so whether it holds code cannot "
                "be checked. Load it only if you trust who wrote the file: pass safe_mode=False"
            )
        model_safety.refuse_code(path, model_safety.parse_config(path, raw, "config.json"), flavour)
    return flavour


def _download(path: str, storage: Storage | None) -> tuple[str, str]:
    """``(local copy, its private scratch directory)`` of the remote model file or directory
    ``path``, downloaded whole through ``storage`` (refused when its upload has not finished)."""
    storage = _store(storage)
    _remote_kind(path, storage)
    scratch = tempfile.mkdtemp(prefix="sparkdl-model-")
    try:
        local = os.path.join(scratch, os.path.basename(path.rstrip("/")) or "model")
        storage.download(path, local)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return local, scratch


def _copy_local(path: str) -> tuple[str, str]:
    """``(copy, its private scratch directory)`` of the local model file or directory ``path``,
    named as ``path`` is (Keras goes by the name too): each file read once, through the one
    descriptor whose type was checked (a regular file: a pipe or a device is refused, never
    waited on)."""
    local = _local(path)
    source = os.path.realpath(local)  # a link to the model (``latest`` -> a version) is followed
    scratch = tempfile.mkdtemp(prefix="sparkdl-model-")
    try:
        target = os.path.join(scratch, os.path.basename(local.rstrip("/")) or "model")
        if not _copy_file(path, source, target):
            os.mkdir(target, 0o700)
            for root, dirs, files, root_fd in os.fwalk(source):
                here = os.path.join(target, os.path.relpath(root, source))
                for name in dirs:
                    if stat.S_ISLNK(os.stat(name, dir_fd=root_fd, follow_symlinks=False).st_mode):
                        raise ModelLoadError(
                            f"model {path!r} holds a link to a directory, {os.path.join(root, name)!r}: "
                            "put what it points to in the model directory"
                        )
                    os.mkdir(os.path.join(here, name), 0o700)
                for name in files:
                    _copy_file(path, os.path.join(root, name), os.path.join(here, name), root_fd)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return target, scratch


def _copy_file(path: str, source: str, target: str, dir_fd: int | None = None) -> bool:
    """Copy the regular file ``source`` (with ``dir_fd``: its name in that directory) to
    ``target`` (mode 0600) through one descriptor; False if the model ``path`` itself is a
    directory; ModelLoadError naming ``path`` if ``source`` is neither."""
    try:
        descriptor = os.open(os.path.basename(source) if dir_fd is not None else source, _READ_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        where = f"model path {path!r}" if dir_fd is None else f"{source!r} of model {path!r} (a broken link?)"
        raise ModelLoadError(f"{where} does not exist on this executor (host {os.uname().nodename})") from None
    try:
        kind = os.fstat(descriptor).st_mode
        if stat.S_ISDIR(kind) and dir_fd is None:
            return False
        if not stat.S_ISREG(kind):
            raise ModelLoadError(f"model {path!r}: {source!r} is not a regular file or a directory")
        with (
            os.fdopen(descriptor, "rb", closefd=False) as reader,
            open(target, "xb", opener=lambda name, flags: os.open(name, flags, 0o600)) as writer,
        ):
            shutil.copyfileobj(reader, writer, COPY_CHUNK_BYTES)
    finally:
        os.close(descriptor)
    return True


@contextlib.contextmanager
def private_copy(path: str, storage: Storage | None = None):
    """A private copy of the model file or directory at ``path``, removed afterwards: a remote
    model downloaded whole through ``storage``, a local (or mounted) one copied, into a new
    directory that only this process's user can enter (``tempfile.mkdtemp``, mode 0700).

    What safe mode checks and what Keras then loads is this copy: whoever can write ``path``
    cannot replace the model between the check and the load (Keras' import alone takes seconds)."""
    local, scratch = _download(path, storage) if _is_remote(path) else _copy_local(path)
    try:
        yield local
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _read_keras_model(tf, path: str, device: str, safe_mode: bool, storage: Storage | None = None):
    """The Keras model at ``path``, refused in safe mode when it may run code of its own: checked
    and loaded from one private copy (:func:`private_copy`; a trusted local file is read in place)."""
    in_place = not safe_mode and not _is_remote(path)  # trusted: no copy to pay for
    copy = contextlib.nullcontext(_local(path)) if in_place else private_copy(path, storage)
    with copy as local:
        flavour = check_keras_file(path, local, safe_mode)
        if flavour == "tf_keras":
            import tf_keras as module
        else:
            import keras as module
        with tf.device(device), _tf_keras_safe_mode(flavour == "tf_keras" and safe_mode):
            try:
                return module.models.load_model(local, compile=False, safe_mode=safe_mode)
            except ValueError as exc:
                if safe_mode and "safe_mode" in str(exc):  # Keras refused code of the file
                    raise ModelLoadError(f"model {path!r}: {exc}") from exc
                raise


@contextlib.contextmanager
def _tf_keras_safe_mode(on: bool):
    """tf-keras' own safe mode, also around its .h5 loader, which does not set it: a second guard
    after sparkdl's check (its Lambda layer and RNN cell wrappers then refuse marshalled Python)."""
    if not on:
        yield
        return
    from tf_keras.src.saving import serialization_lib

    with serialization_lib.SafeModeScope(True):
        yield


def _load_keras(tf, path: str, device: str, safe_mode: bool = True, storage: Storage | None = None) -> LoadedModel:
    model = _read_keras_model(tf, path, device, safe_mode, storage)
    inputs = []
    for tensor in model.inputs:
        shape, batch = _shape_info(tensor.shape)
        name = getattr(tensor, "name", None) or f"input_{len(inputs)}"
        inputs.append(TensorInfo(name, _numpy_dtype(tensor.dtype), shape, batch, _form(tf, tensor)))
    names = [t.name.split(":")[0] for t in inputs]
    try:
        structure = model.input
    except (AttributeError, ValueError):  # a Sequential model that was never called
        structure = None
    output_names = [_layer_name(t, i) for i, t in enumerate(model.outputs)]
    if len(set(output_names)) != len(output_names):
        output_names = [f"output_{i}" for i in range(len(output_names))]

    def arrange(xs):
        by_name = dict(zip(names, xs))
        if isinstance(structure, dict):
            return {key: by_name[getattr(value, "name", key).split(":")[0]] for key, value in structure.items()}
        if isinstance(structure, (list, tuple)) and len(names) > 1:
            return [by_name[getattr(value, "name", "").split(":")[0]] for value in structure]
        return xs[0]

    # One trace for every batch size: the batch axis is None in the signature.
    specs = [_input_spec(tf, t) for t in inputs]

    @tf.function(input_signature=specs)
    def serve(*xs):
        result = model(arrange(list(xs)), training=False)
        if isinstance(result, dict):
            return dict(result)
        if isinstance(result, (list, tuple)):
            return dict(zip(output_names, result))
        return {output_names[0]: result}

    # The traced function's own output structure gives names, dtypes and shapes as returned.
    returned = serve.get_concrete_function().structured_outputs
    outputs = []
    for name in returned:
        shape, batch = _shape_info(returned[name].shape)
        outputs.append(TensorInfo(name, _numpy_dtype(returned[name].dtype), shape, None))

    def call(arrays):
        with tf.device(device):
            return {name: value.numpy() for name, value in serve(*arrays).items()}

    return LoadedModel("keras", inputs, outputs, call, keep_alive=model, traced=serve)


def _form(tf, tensor: Any) -> str:
    """``"sparse"``, ``"ragged"`` or ``"dense"``: what a Keras input takes (Keras 3 and tf-keras)."""
    if getattr(tensor, "sparse", False) is True:
        return "sparse"
    if getattr(tensor, "ragged", False) is True:
        return "ragged"
    spec = getattr(tensor, "type_spec", None)
    if isinstance(spec, tf.SparseTensorSpec):
        return "sparse"
    return "ragged" if isinstance(spec, tf.RaggedTensorSpec) else "dense"


def _input_spec(tf, info: TensorInfo):
    """The traced function's spec of one input: dense, sparse or ragged, the batch axis free."""
    shape = None if info.shape is None else (info.batch or None, *info.shape)
    dtype = tf.string if info.dtype == "str" else info.dtype
    if info.form == "sparse":
        return tf.SparseTensorSpec(shape, dtype)
    if info.form == "ragged":
        return tf.RaggedTensorSpec(shape, dtype, ragged_rank=1)
    return tf.TensorSpec(shape, dtype)


def _load_saved_model(tf, path: str, source: ModelSource, device: str, storage: Storage | None = None) -> LoadedModel:
    local, scratch = _download(path, storage) if _is_remote(path) else (_local(path), None)
    try:
        with tf.device(device):
            loaded = tf.saved_model.load(local, tags=list(source.tags) if source.tags else None)
    except BaseException:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
        raise
    if scratch is not None:  # assets (vocabulary files...) stay readable while the model lives
        try:
            weakref.finalize(loaded, shutil.rmtree, scratch, True)
        except TypeError:  # an object without weak references: its variables are loaded already
            shutil.rmtree(scratch, ignore_errors=True)
    signatures = dict(loaded.signatures)
    if source.signature not in signatures:
        raise ModelLoadError(
            f"SavedModel {path!r} has no signature {source.signature!r}; it has "
            f"{sorted(signatures) or 'none'} (export it with model.export() or "
            "tf.saved_model.save(..., signatures=...))"
        )
    function = signatures[source.signature]
    input_specs = function.structured_input_signature[1]
    # Keep the signature's own order when it is stable: sorted by name (SavedModel stores a map).
    inputs = []
    for name in sorted(input_specs):
        shape, batch = _shape_info(input_specs[name].shape)
        inputs.append(TensorInfo(name, _numpy_dtype(input_specs[name].dtype), shape, batch))
    outputs = []
    for name in sorted(function.structured_outputs):
        spec = function.structured_outputs[name]
        shape, batch = _shape_info(spec.shape)
        outputs.append(TensorInfo(name, _numpy_dtype(spec.dtype), shape, batch))
    names = [t.name for t in inputs]

    def call(arrays):
        with tf.device(device):
            result = function(**{name: tf.constant(array) for name, array in zip(names, arrays)})
        return {name: value.numpy() for name, value in result.items()}

    return LoadedModel("saved_model", inputs, outputs, call, keep_alive=loaded)


def _load_function(tf, source: ModelSource, device: str | None) -> LoadedModel:
    if device is None:
        predict = source.make_predict_fn()
        return LoadedModel("function", None, None, lambda arrays: predict(*arrays))
    with tf.device(device):
        predict = source.make_predict_fn()

    def call(arrays):
        with tf.device(device):
            return predict(*arrays)

    return LoadedModel("function", None, None, call)


def model_kind(path: str, storage: Storage | None = None) -> str:
    """``"keras"`` or ``"saved_model"``: how the model at ``path`` loads (raises when neither;
    a remote path is looked at through ``storage``)."""
    if path.endswith((".keras", ".h5", ".hdf5")):
        return "keras"
    if _is_remote(path):
        if _remote_kind(path, _store(storage))[0] == "file":
            return "keras"  # a Keras archive under another name: its bytes decide (see check_keras_file)
        return "saved_model"
    local = _local(path)
    if os.path.isdir(local):
        if os.path.exists(os.path.join(local, "saved_model.pb")) or os.path.exists(
            os.path.join(local, "saved_model.pbtxt")
        ):
            return "saved_model"
        raise ModelLoadError(
            f"{path!r} is a directory without saved_model.pb; give a SavedModel directory "
            "(model.export(path) or tf.saved_model.save) or a .keras file"
        )
    if os.path.isfile(local) and zipfile.is_zipfile(local):
        return "keras"
    raise ModelLoadError(f"cannot tell what kind of model {path!r} is: use a .keras/.h5 file or a SavedModel directory")


def load(tf, source: ModelSource, kind: str, device: str | None, storage: Storage | None = None) -> LoadedModel:
    """Load ``source`` (of ``kind``: ``keras``, ``saved_model`` or ``function``) onto ``device``
    (a remote path through ``storage``, else one made from ``source.storage``)."""
    if source.path is not None and _is_remote(source.path) and storage is None:
        storage = Storage(source.storage)
    if kind == "keras":
        return _load_keras(tf, source.path, device, source.safe_mode, storage)
    if kind == "saved_model":
        return _load_saved_model(tf, source.path, source, device, storage)
    return _load_function(tf, source, device)
