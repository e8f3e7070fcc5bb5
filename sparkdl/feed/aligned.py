"""Numpy buffers aligned for TensorFlow, so handing them to ``tf.data`` costs no copy.

TensorFlow adopts a numpy array's memory as a tensor's (no copy) only when the data starts on a
64-byte boundary (Eigen's alignment); otherwise every block ``as_dataset``'s generator yields is
copied into a fresh tensor, which halved the rate of a cached epoch on a 2-core machine. numpy's
own large allocations start 16 bytes into a page, so blocks built here are allocated by hand,
from Arrow's memory pool (``raw`` says why).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

#: TensorFlow's required alignment for a zero-copy tensor (EIGEN_MAX_ALIGN_BYTES).
ALIGNMENT = 64


def is_aligned(array: np.ndarray) -> bool:
    """Whether ``array`` is C-contiguous and starts on an ``ALIGNMENT``-byte boundary."""
    return array.flags.c_contiguous and array.ctypes.data % ALIGNMENT == 0


def empty(shape: tuple, dtype) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts on an ``ALIGNMENT``-byte boundary."""
    dtype = np.dtype(dtype)
    if dtype.hasobject:  # object arrays (strings) hold pointers: TensorFlow copies them anyway
        return np.empty(shape, dtype=dtype)
    return view(raw(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize), shape, dtype)


def raw(nbytes: int) -> np.ndarray:
    """Uninitialised bytes that hold an aligned array of ``nbytes`` (``view`` makes it).

    Taken from Arrow's memory pool, not numpy's: TensorFlow's ``from_generator`` sets glibc's
    ``M_TRIM_THRESHOLD`` in the node's process, which pins glibc's mmap threshold at 128 KiB, so
    every large numpy array there is fresh pages, faulted in and zeroed on first touch (a cache
    window's gather took twice as long). Arrow's pool hands out memory freed shortly before
    again (the last block's, a frame's), so a stream of same-sized arrays does not fault.
    """
    return pooled(nbytes + ALIGNMENT)


def pooled(nbytes: int) -> np.ndarray:
    """``nbytes`` uninitialised writable bytes from Arrow's memory pool (see ``raw``): what the
    feed server receives frames into."""
    return np.frombuffer(pa.allocate_buffer(nbytes), dtype=np.uint8)


def view(buffer: np.ndarray, shape: tuple, dtype) -> np.ndarray:
    """An aligned C-contiguous array of ``shape`` and ``dtype`` over the bytes ``buffer`` (from
    ``raw``, at least that large): its base is ``buffer``, as is every view's made from it."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    skip = -buffer.ctypes.data % ALIGNMENT
    return buffer[skip : skip + nbytes].view(dtype).reshape(shape)


def concatenate(parts: list[np.ndarray]) -> np.ndarray:
    """``np.concatenate(parts)`` into an aligned array (raises ValueError as numpy does)."""
    first = parts[0]
    tails = {part.shape[1:] for part in parts}
    if len(tails) > 1 or any(part.ndim != first.ndim for part in parts):
        raise ValueError(f"pieces of different shapes {sorted(tails)}")
    out = empty((sum(len(part) for part in parts), *first.shape[1:]), np.result_type(*parts))
    return np.concatenate(parts, out=out)


def ensure(array: np.ndarray) -> np.ndarray:
    """``array`` itself when aligned (or of objects), else an aligned copy of it."""
    if array.dtype.hasobject or is_aligned(array):
        return array
    out = empty(array.shape, array.dtype)
    out[...] = array
    return out
