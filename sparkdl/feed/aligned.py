"""Numpy buffers aligned for TensorFlow, so handing them to ``tf.data`` costs no copy.

TensorFlow adopts a numpy array's memory as a tensor's (no copy) only when the data starts on a
64-byte boundary (Eigen's alignment); otherwise every block ``as_dataset``'s generator yields is
copied into a fresh tensor, which halved the rate of a cached epoch on a 2-core machine. numpy's
own large allocations start 16 bytes into a page, so blocks built here are allocated by hand.
"""

from __future__ import annotations

import numpy as np

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
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + ALIGNMENT, dtype=np.uint8)
    skip = -raw.ctypes.data % ALIGNMENT
    return raw[skip : skip + nbytes].view(dtype).reshape(shape)


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
