"""Equality checks for values that cross the feed: equal, and of the same types all the way down."""

from __future__ import annotations

import numpy as np


def same(a, b):
    """Equal, with the same types all the way down (numpy arrays: same dtype and shape)."""
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b
