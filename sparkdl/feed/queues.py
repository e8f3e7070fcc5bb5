"""The node's bounded queues of fed rows, the chunks of rows they hold, and joining slices of chunks.

A ``BoundedQueue`` holds at most ``max_bytes`` of received rows: ``put`` blocks while it is
full (up to its ``timeout``), which stops the feed server reading its socket, which backs TCP up to the feeding task
(backpressure). Readers wait with :func:`wait_with_heartbeat`, which keeps telling the driver
that the node is alive (waiting for data is not a stall).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..common.timeouts import WAIT_HEARTBEAT_S
from . import aligned
from .columns import FeedDataError
from .elements import RowLayout
from .streams import InferenceStream

Columns = dict  # one batch's rows, column by column: numpy arrays, or Arrow arrays (see columns.py)

END = "end"  # no more data will ever come (shutdown)
END_PARTITION = "end-partition"


@dataclass
class Chunk:
    """Rows received from a feeder, as dense numpy columns."""

    columns: dict[str, np.ndarray]
    names: list[str]
    rows: int
    session: int | None = None
    stream: InferenceStream | None = None
    offset: int = 0
    layout: RowLayout | None = None  # how to rebuild the RDD's elements (next_batch)
    epoch: int | None = None  # the training run's epoch the rows belong to

    @property
    def left(self) -> int:
        """Rows not yet handed out."""
        return self.rows - self.offset


def wait_with_heartbeat(cond: threading.Condition, ready, timeout: float | None, heartbeat=None) -> bool:
    """``cond.wait_for(ready, timeout)`` (lock held) that calls ``heartbeat`` about once a second
    while it waits; returns whether ``ready()`` became true."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while not ready():
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            return False
        if not cond.wait(WAIT_HEARTBEAT_S if remaining is None else min(remaining, WAIT_HEARTBEAT_S)) and heartbeat:
            heartbeat()
    return True


class BoundedQueue:
    """A FIFO bounded by bytes: ``put`` blocks while it is full (backpressure)."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._items: deque = deque()
        self._bytes = 0
        self._dropping = False
        self._cond = threading.Condition()

    def put(self, item, nbytes: int = 0, timeout: float | None = None, unless=None) -> None:
        """Append, waiting while the queue holds ``max_bytes`` or more (markers never wait); raises
        TimeoutError if it stays full for ``timeout`` seconds (None: as long as it takes). Nothing is
        appended once ``unless()`` is true (the rows are wanted no more: :meth:`discard` wakes the wait)."""
        unwanted = (lambda: False) if unless is None else unless
        with self._cond:
            if not self._cond.wait_for(
                lambda: self._bytes < self.max_bytes or self._dropping or nbytes == 0 or unwanted(), timeout
            ):
                raise TimeoutError(
                    f"the queue stayed full ({self._bytes} of {self.max_bytes} bytes) for {timeout} s: "
                    "nobody is reading it"
                )
            if (self._dropping and nbytes) or unwanted():
                return
            self._items.append((item, nbytes))
            self._bytes += nbytes
            self._cond.notify_all()

    def discard(self, unwanted) -> None:
        """Remove the queued items ``unwanted(item)`` picks, and wake every ``put`` to check its own
        ``unless`` (call it after making that true)."""
        with self._cond:
            self._items = deque((item, nbytes) for item, nbytes in self._items if not unwanted(item))
            self._bytes = sum(nbytes for _, nbytes in self._items)
            self._cond.notify_all()

    def get(self, timeout: float | None = None, while_waiting=None):
        """Pop the oldest item; raises TimeoutError after ``timeout`` seconds without one.

        ``while_waiting`` is called about once a second during the wait (a heartbeat: waiting
        for data is not a stall).
        """
        with self._cond:
            self._wait_for_item(timeout, while_waiting)
            item, nbytes = self._items.popleft()
            self._bytes -= nbytes
            self._cond.notify_all()
            return item

    def peek(self, timeout: float | None = None, while_waiting=None):
        """The oldest item without removing it (waits like ``get``)."""
        with self._cond:
            self._wait_for_item(timeout, while_waiting)
            return self._items[0][0]

    def _wait_for_item(self, timeout: float | None, while_waiting) -> None:
        if not wait_with_heartbeat(self._cond, lambda: self._items, timeout, while_waiting):
            raise TimeoutError(f"no data arrived within {timeout} s")

    def drop_data(self) -> None:
        """Discard queued data and accept no more (after ``terminate()``); markers stay."""
        with self._cond:
            self._dropping = True
            self._items = deque((item, 0) for item, nbytes in self._items if not nbytes)
            self._bytes = 0
            self._cond.notify_all()

    @property
    def nbytes(self) -> int:
        """Bytes currently queued."""
        return self._bytes


def join_slices(pieces: list[tuple[Chunk, int, int]]) -> tuple[Columns, RowLayout | None, int]:
    """The rows ``[start, stop)`` of each chunk, joined into columns, and the first chunk's layout."""
    if not pieces:
        return {}, None, 0
    first = pieces[0][0]
    parts = [{n: column[start:stop] for n, column in chunk.columns.items()} for chunk, start, stop in pieces]
    return (
        join_columns(parts),
        first.layout or RowLayout(tuple(first.names)),
        sum(stop - start for _, start, stop in pieces),
    )


def join_columns(parts: list[Columns], names=None) -> Columns:
    """Concatenate per-column pieces, every column of the first piece (no copy for a single piece)."""
    if not parts:
        return {}
    if len(parts) == 1:
        return parts[0]
    return {n: concatenate(n, [part[n] for part in parts]) for n in parts[0]}


def concatenate(name: str, parts: list) -> np.ndarray | pa.Array:
    """Join one column's pieces: numpy arrays into one aligned array, else (some piece kept in Arrow:
    bytes, Vectors, images, arrays of varying length, nulls) into one Arrow array."""
    if all(isinstance(part, np.ndarray) for part in parts):
        if len({part.shape[1:] for part in parts}) == 1:
            return aligned.concatenate(parts)
    arrays = [_as_arrow(part) for part in parts]
    kinds = {array.type for array in arrays}
    if len(kinds) > 1:  # e.g. a fixed-size list from numpy beside a list from Spark: one list type
        target = next((k for k in kinds if not pa.types.is_fixed_size_list(k)), None) or pa.list_(
            arrays[0].type.value_type
        )
        try:
            arrays = [array.cast(target) for array in arrays]
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise FeedDataError(f"column {name!r} has rows of types {sorted(map(str, kinds))} in one batch") from exc
    return pa.concat_arrays(arrays)


def _as_arrow(column) -> pa.Array:
    """A numpy column as Arrow: scalars as they are, ``(rows, *shape)`` as nested lists (views)."""
    if not isinstance(column, np.ndarray):
        return column
    if column.ndim == 1:
        return pa.array(column)
    flat = pa.array(np.ascontiguousarray(column).reshape(-1))
    for width in reversed(column.shape[1:]):
        flat = pa.FixedSizeListArray.from_arrays(flat, width)
    return flat.cast(_listed(flat.type))


def _listed(kind: pa.DataType) -> pa.DataType:
    """``kind`` with every fixed-size list level made a plain list."""
    return pa.list_(_listed(kind.value_type)) if pa.types.is_fixed_size_list(kind) else kind


def _loose(kind: pa.DataType) -> pa.DataType:
    """``kind`` with every list level a plain list and every nested field nullable: what two columns'
    Arrow types are compared by (each row's nulls are checked as it is read, whatever is declared)."""
    if pa.types.is_list(kind) or pa.types.is_fixed_size_list(kind):
        return pa.list_(_loose(kind.value_type))
    if pa.types.is_large_list(kind):
        return pa.large_list(_loose(kind.value_type))
    if pa.types.is_struct(kind):
        return pa.struct([pa.field(field.name, _loose(field.type)) for field in kind])
    return kind


def copy_rows(column, rows: int):
    """The first ``rows`` rows of a column, copied (so they do not hold the frame they came in)."""
    if isinstance(column, np.ndarray):
        return column[:rows].copy()
    return column.take(pa.array(np.arange(min(rows, len(column)), dtype=np.int64)))


def describe_kind(column) -> str:
    """A column's type as error messages name it: ``float32[5]`` (numpy) or its Arrow type."""
    if isinstance(column, np.ndarray):
        return f"{column.dtype}{list(column.shape[1:])}"
    return str(column.type)


def same_kind(want, got, widths_vary: bool = False) -> bool:
    """Whether two columns can be read alike: the same numpy dtype and row shape, the same Arrow
    type, or a numpy array and an Arrow array of the same values at the same depth (a batch with
    nulls, or with arrays of varying length, stays in Arrow). With ``widths_vary`` (a DataFrame's
    ``array<...>`` columns: ``RowLayout.widths_vary``), two numpy arrays need the same dtype and
    depth only: each batch's width is that batch's, not the column's."""
    if isinstance(want, np.ndarray) and isinstance(got, np.ndarray):
        if widths_vary:
            return want.dtype == got.dtype and want.ndim == got.ndim
        return want.dtype == got.dtype and want.shape[1:] == got.shape[1:]
    if not isinstance(want, np.ndarray) and not isinstance(got, np.ndarray):
        return _loose(want.type) == _loose(got.type)
    array, dense = (got, want) if isinstance(want, np.ndarray) else (want, got)
    kind, depth = array.type, 0
    while pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        kind, depth = kind.value_type, depth + 1
    try:
        dtype = np.dtype(kind.to_pandas_dtype())
    except (NotImplementedError, TypeError):
        return False
    return dtype == dense.dtype and depth == dense.ndim - 1
