"""The node-side epoch cache: a training run's rows kept on the executor's disk after epoch 1.

While the first epoch of a ``cluster.train`` call streams in, the node's feed server appends
every Arrow IPC frame it receives to a file in the node's private cache directory, under Spark's
local directory (``node/launch.py``; one file per split, whatever the partition count, so the
cache holds a few file descriptors, not two per partition; its feeder threads' frames are
appended one at a time, under the run's lock). Each file is memory-mapped as it grows and each
frame decoded from the mapping as it is written, zero-copy, into numpy views (``cache_file.py``),
and the first cached epoch's first window is gathered from the frames as they come in
(``first_window.py``). Once the node holds its whole share of epoch 1 (every planned row of every
split, each admitted once by the ledger), it seals the cache and serves the next epoch from it at once, while the reader
still drains epoch 1's queue: epoch 2 waits neither for Spark's feeding job to end, nor for the
driver's round trips, nor for a decode, nor (when its columns are dense tensors and the plan
says where each partition's rows fall) for a gather. Epochs 2..N are served from these files
instead of new Spark jobs: rows are copied out a window (``WINDOW_BYTES``) at a time in file
order, the next window gathered by a reader thread while the current one is consumed, into
memory the node touched before (``WindowBuffers``: the windows' memory is made ready during
epoch 1). The pages a gather touched are dropped from the process (``MADV_DONTNEED``; they stay
in the kernel's page cache), so a node serving from its cache holds a few windows of it (at most
``WindowBuffers.KEEP`` large buffers and a scratch window per column), not the whole share.

Rows are numbered in a canonical order (partition, then arrival within the partition), which
is the same run after run for the same data, so a seeded per-epoch permutation of that order is
reproducible whatever order Spark's tasks delivered the first epoch in.

Bounded: a run's cache stops (files deleted, one log line) once it would pass its byte limit or
leave less than ``MIN_FREE_BYTES`` free on the disk, or a write fails (a full disk, a quota);
the driver then feeds that run from Spark every epoch, as without a cache.

Columns that are not dense tensors (bytes, strings, images, ``pyspark.ml`` Vectors, arrays of
varying length, a list column whose frames came at several widths) are cached as Spark sent them,
and a replay gathers them as Arrow arrays (``take``): a sparse Vector stays sparse until a reader
asks for it dense, one block at a time.
"""

from __future__ import annotations

import errno
import logging
import mmap
import shutil
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Callable

import numpy as np

from ..columns.readers import take
from . import aligned
from .cache_file import CacheFile
from .elements import RowLayout
from .first_window import FirstWindow
from .queues import concatenate

logger = logging.getLogger(__name__)

#: A cache never leaves less than this free on its disk (nor 5% of it, whichever is larger).
MIN_FREE_BYTES = 1 << 30
#: Drop the mapped pages from the process after a gather went over about this many bytes.
RELEASE_EVERY_BYTES = 16 << 20
#: Rows are copied out of the cache about this many bytes at a time (a window of the epoch's order);
#: the next window is gathered while this one is read, so a replay holds a few (``WindowBuffers``).
WINDOW_BYTES = 16 << 20
#: Windows whose memory is made ready during epoch 1: the one read, the one read ahead, and the
#: ones whose last batches TensorFlow still holds (its prefetch: with one, a first cached epoch
#: still faulted a fourth window in, 0.04-0.08 s of a node's CPU, in a third of the runs measured).
READY_WINDOWS = 4

#: ``(split, epoch, rows)`` -> the permutation a cached epoch is read in (None: the cached order).
EpochOrders = Callable[[str, int, int], "np.ndarray | None"]


def free_bytes_floor(path: Path) -> int:
    """Bytes that must stay free on ``path``'s disk."""
    return max(MIN_FREE_BYTES, shutil.disk_usage(path).total // 20)


class RunCache:
    """The cached rows of one training run (one ``cluster.train`` call) on one node.

    Written by the feed server's receiving threads during epoch 1 (``append``), then either
    dropped or opened for replay (``replay``): as soon as it holds ``rows_per_epoch`` of every
    split, or when the driver decides. ``orders`` gives each cached epoch's permutation, so the
    replay can read the next epoch's first window ahead; with ``first_window`` (a split, the first
    cached epoch of it, and the rows each partition sends: ``TrainingPlan.partition_rows``), that
    epoch's first window is gathered from the frames as they are appended (``FirstWindow``).
    Thread-safe.
    """

    def __init__(
        self,
        directory: Path,
        max_bytes: int | None,
        label: str,
        rows_per_epoch: dict[str, int] | None = None,
        orders: EpochOrders | None = None,
        first_window: tuple[str, int, tuple[int, ...]] | None = None,
    ):
        self.directory = directory
        self.max_bytes = max_bytes
        self.label = label  # names the run in log lines, e.g. "training run 2"
        self.rows_per_epoch = {s: r for s, r in (rows_per_epoch or {}).items() if r}  # the node's share
        self.orders = orders
        self.failure: str | None = None  # why this run is not cached (said once in the log)
        self.bytes = 0
        self.rows: dict[str, int] = {}
        self._floor: int | None = None  # bytes to leave free on the cache's disk (free_bytes_floor)
        self._files: dict[str, CacheFile] = {}  # each split's
        self._replays: dict[str, CacheReplay] = {}
        self._lock = threading.Lock()
        self.buffers = WindowBuffers()  # the replay's windows, made ready while epoch 1 streams in
        self.preparing: threading.Thread | None = None  # allocating the first windows' memory
        self._first_plan = first_window if first_window and sum(first_window[2]) else None
        self._first: FirstWindow | None = None  # being gathered (while _first_plan stands)
        self._dropped = False  # drop() ran: a later frame (a straggling or speculative task) is not cached

    def append(self, split: str, partition: int, frame, rows: int) -> bool:
        """Keep one received frame (the raw Arrow IPC bytes) of ``split`` from ``partition``;
        whether it completed the share (``rows_per_epoch`` of every split: true for one append only)."""
        with self._lock:
            if self.failure is not None or self._dropped:
                return False
            try:
                reason = self._refusal(len(frame))
            except OSError as exc:  # the directory is gone or unreadable: fall back to Spark, never fail the feed
                reason = f"checking the free space of {self.directory} failed: {_explained(exc)}"
            if reason:
                self._fail(reason)
                return False
            if split not in self._files:
                self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
                path = self.directory / f"{split}.arrows"
                try:
                    self._files[split] = CacheFile(path)
                except OSError as exc:
                    self._fail(f"creating {path} failed: {_explained(exc)}")
                    return False
            part = self._files[split]
            try:
                part.append(partition, frame, rows)
            except (OSError, ValueError) as exc:  # a full or failing disk: fall back to Spark, never fail the feed
                self._fail(f"writing {part.path} failed: {_explained(exc)}")
                return False
            if self.preparing is None:
                self._prepare_windows(len(frame) / max(rows, 1))
            try:
                self._gather_first(split, partition, part.columns[-1], rows)
            except Exception:  # noqa: BLE001 (an optimisation: never the reason a frame is not cached)
                logger.debug("sparkdl: %s gathers its first cached window when it is read", self.label, exc_info=True)
                self._first_plan = self._first = None
            part.release_pages(last_region=True)  # what the decode and the gather read leaves the RSS
            self.bytes += len(frame)
            self.rows[split] = self.rows.get(split, 0) + rows
            # each row is appended once (the ledger admits it once), so the counts reach the share exactly once
            return split in self.rows_per_epoch and self.rows == self.rows_per_epoch

    def _prepare_windows(self, row_bytes: float) -> None:
        """Allocate and touch the first windows' memory in a thread of its own (at the first
        frame: its bytes per row size them), so the first cached epoch does not fault it in."""
        nbytes = int(min(WINDOW_BYTES, sum(self.rows_per_epoch.values()) * row_bytes))
        count = READY_WINDOWS if nbytes >= WindowBuffers.SMALL_BYTES else 0  # small windows: cheap anyway
        if self._first_plan is not None:
            count = max(0, count - 1)  # the first window takes its own as it fills
        self.preparing = threading.Thread(
            target=self.buffers.prepare, args=(count, nbytes), name="sparkdl-cache-prepare", daemon=True
        )
        self.preparing.start()

    def _gather_first(self, split: str, partition: int, columns: dict, rows: int) -> None:
        """Copy a frame's rows of the first cached epoch's first window (``FirstWindow``); give
        the window up when the frame cannot take part (the replay then gathers it)."""
        if self._first_plan is None or split != self._first_plan[0]:
            return
        _, epoch, partition_rows = self._first_plan
        if self._first is None and FirstWindow.dense(columns):
            total = self.rows_per_epoch.get(split, 0)
            order = self.orders(split, epoch, total) if self.orders is not None else None
            if total == sum(partition_rows) and (order is None or len(order) == total):
                window_rows = min(total, _window_rows(columns))  # the replay's, so it adopts the window
                self._first = FirstWindow(order, window_rows, partition_rows, columns, self.buffers.take)
        if self._first is None or not self._first.add(partition, columns, rows):
            self._first_plan = self._first = None

    def _refusal(self, incoming: int) -> str | None:
        if self.max_bytes is not None and self.bytes + incoming > self.max_bytes:
            return f"this node's share is more than the cache limit of {self.max_bytes:,} bytes (cache_max_bytes)"
        if self._floor is None:  # the disk's size does not change: its floor is worked out once
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._floor = free_bytes_floor(self.directory)
        if shutil.disk_usage(self.directory).free - incoming < self._floor:
            return f"caching it would leave less than {self._floor:,} bytes free on {self.directory}"
        return None

    def _fail(self, reason: str) -> None:
        self.failure = reason
        logger.warning(
            "sparkdl: not caching %s on this node: %s; its epochs are fed from Spark each time", self.label, reason
        )
        self._remove_files()

    def seal(self, rows_per_epoch: dict[str, int]) -> str | None:
        """Close the files once epoch 1 is in; returns why the cache is incomplete, or None.

        A file that cannot be closed (cut back to its frames) drops the cache with a warning, and
        the run is fed from Spark, as for any write error.
        """
        with self._lock:
            errors = [error for error in map(_close, self._files.values()) if error]
            if errors and self.failure is None:
                self._fail(errors[0])
            if self.failure is None:
                for split, rows in rows_per_epoch.items():
                    if rows and self.rows.get(split, 0) != rows:
                        self._fail(f"it holds {self.rows.get(split, 0)} of the {rows} {split} rows of an epoch")
            return self.failure

    def replay(self, split: str) -> "CacheReplay":
        """The reader over ``split``'s cached rows (made on first use, from the frames decoded as
        they were cached), holding the first window gathered during epoch 1 if any."""
        with self._lock:
            if split not in self._replays:
                orders = None
                if self.orders is not None:
                    orders = lambda epoch, of=self.orders: of(split, epoch, self.rows.get(split, 0))  # noqa: E731
                replay = self._replays[split] = CacheReplay(self._files.get(split), orders=orders, buffers=self.buffers)
                first, plan = self._first, self._first_plan
                if first is not None and plan is not None and plan[0] == split and first.complete:
                    replay.start_with(plan[1], first.order, first.window())
                if plan is not None and plan[0] == split:
                    self._first_plan = self._first = None  # the replay holds it now, or gathers it
            return self._replays[split]

    def file(self, split: str) -> CacheFile | None:
        """The file ``split``'s frames are cached in (None before its first frame)."""
        with self._lock:
            return self._files.get(split)

    def drop(self) -> None:
        """Delete the files (the run ended, the driver chose not to use them, or shutdown). A frame
        that arrives later (a straggling or speculative feeding task) is not cached."""
        with self._lock:
            self._dropped = True
            self._remove_files()

    def _remove_files(self) -> None:
        self._first_plan = self._first = None
        for replay in self._replays.values():
            replay.close()  # first: its reader thread may be gathering from the mappings
        self._replays.clear()
        for part in self._files.values():
            _close(part)  # a file that cannot be closed is deleted all the same
            part.path.unlink(missing_ok=True)  # mapped pages stay readable until unmapped
            part.unmap()
        self._files.clear()
        self.buffers.close()
        shutil.rmtree(self.directory, ignore_errors=True)


def _close(part: CacheFile) -> str | None:
    """Close ``part``'s file; why that failed, or None."""
    try:
        part.close()
    except OSError as exc:
        return f"writing {part.path} failed: {_explained(exc)}"
    return None


def _explained(exc: OSError) -> str:
    """``exc`` as a cache failure names it, with what to do when the process ran out of descriptors."""
    if exc.errno in (errno.EMFILE, errno.ENFILE):
        return f"{exc} (the executor's limit of open files, ulimit -n, is too low)"
    return str(exc)


def gathered_in_arrow(frames: list[dict]) -> set[str]:
    """The columns of ``frames`` a replay gathers as Arrow arrays (``take``), not into a dense window:
    those some frame keeps in Arrow (bytes, Vectors, images, nulls, lists of varying length), and
    those whose frames differ in dtype or row shape. A feeder sends a list column as a fixed-size list
    whenever a frame's rows agree in length, so one ``array<float>`` column can be cached as frames
    of shape (n, 3) and (n, 5): its kind is the column's, over all its frames, not the first frame's.
    A column of one dtype and row shape in every frame stays dense (the fast path)."""
    arrow: set[str] = set()
    dense: dict[str, set] = {}
    for frame in frames:
        for name, column in frame.items():
            if isinstance(column, np.ndarray):
                dense.setdefault(name, set()).add((column.dtype, column.shape[1:]))
            else:
                arrow.add(name)
    return arrow | {name for name, kinds in dense.items() if len(kinds) > 1}


def _discard(future: Future) -> None:
    """Let go of a window read ahead that is not wanted: cancel it, or wait for it to end (its
    error, if any, is the next gather's too)."""
    if not future.cancel():
        wait([future])


def _row_bytes(column) -> int:
    """Bytes of one row of a numpy or Arrow column."""
    if isinstance(column, np.ndarray):
        return column.itemsize * int(np.prod(column.shape[1:], dtype=np.int64))
    return max(1, column.nbytes // max(1, len(column)))


def _window_rows(columns: dict, window_bytes: int | None = None) -> int:
    """Rows of a window of about ``window_bytes`` (``WINDOW_BYTES``) of rows shaped as ``columns``'."""
    row_bytes = sum(_row_bytes(c) for c in columns.values())
    return max(1, (window_bytes or WINDOW_BYTES) // max(row_bytes, 1))


class WindowBuffers:
    """The memory a run's windows are gathered into, reused once nothing refers to it any more.

    Fresh memory costs its pages' first-touch faults and zeroing, which made a gather up to five
    times as slow as one into memory touched before: every window of a node's first cached
    epoch paid it. So a run keeps up to ``KEEP`` large buffers (one per large column of a window:
    the window read, the one read ahead, batches TensorFlow still holds), ``prepare`` allocates
    and touches the first ones while epoch 1 streams in (the node mostly waits on Spark then),
    and a window's column takes a buffer that nothing refers to any more. Every array made from
    a buffer (the window's column, a batch sliced from it, a tensor TensorFlow adopted without a
    copy, holding a reference) is a view whose base is that buffer, so a buffer is free once
    CPython counts no reference to it but the pool's. What "no other reference" reads as is
    measured once, in the very expression the test uses (``_references``), not assumed.
    Columns under ``SMALL_BYTES`` a window (labels) and object columns get memory of their own.
    Thread-safe; ``close`` lets the memory go.
    """

    KEEP = 4
    SMALL_BYTES = 1 << 20

    def __init__(self):
        self._lock = threading.Lock()
        self._closed = False
        self._buffers: list[np.ndarray] = [aligned.raw(0)]  # raw bytes (aligned.raw), smallest first
        self._unreferenced = self._references(0)  # a buffer only this list holds
        self._buffers = []

    def _references(self, index: int) -> int:
        return sys.getrefcount(self._buffers[index])

    def prepare(self, count: int, nbytes: int) -> None:
        """Allocate ``count`` buffers for windows of ``nbytes`` and touch every page of them."""
        for _ in range(count):
            buffer = aligned.raw(nbytes)
            buffer[:: mmap.PAGESIZE] = 0  # one byte a page faults the page in
            with self._lock:
                if self._closed or len(self._buffers) >= self.KEEP:
                    return
                self._keep(buffer)

    def take(self, shape: tuple, dtype) -> np.ndarray:
        """A writable aligned array of ``shape`` and ``dtype``, for one column of a window."""
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if dtype.hasobject or nbytes < self.SMALL_BYTES:
            return aligned.empty(shape, dtype)
        with self._lock:
            for index in range(len(self._buffers)):
                if len(self._buffers[index]) >= nbytes + aligned.ALIGNMENT and (
                    self._references(index) == self._unreferenced
                ):
                    return aligned.view(self._buffers[index], shape, dtype)
            buffer = aligned.raw(nbytes)
            if not self._closed and len(self._buffers) < self.KEEP:
                self._keep(buffer)
            return aligned.view(buffer, shape, dtype)

    def _keep(self, buffer: np.ndarray) -> None:
        self._buffers.append(buffer)
        self._buffers.sort(key=len)

    @property
    def kept(self) -> int:
        """How many buffers the pool holds."""
        with self._lock:
            return len(self._buffers)

    def close(self) -> None:
        """Let the memory go (arrays still in use keep theirs until they are freed)."""
        with self._lock:
            self._closed = True
            self._buffers = []


class CacheReplay:
    """Serves cached rows: ``take(order, start, count)`` gives rows ``order[start:start+count]``;
    ``take_epoch(epoch, start, count)`` the same in epoch ``epoch``'s order (``orders``).

    Every frame was decoded into numpy views over its file's mapping (no copy) as it was cached
    (``CacheFile``). Rows are copied out a window at a time: the window's rows of ``order``
    are gathered frame by frame in file order (sequential reads, so the kernel's read-ahead and
    fault-around work for us rather than against us; a split's file holds its partitions' frames
    as they arrived, interleaved) into one buffer of about ``window_bytes``, laid out in
    ``order``'s order, and batches are slices of it. While a window is read, a reader thread
    gathers the next one (the next epoch's first, at an epoch's end, when ``take_epoch`` reads),
    so TensorFlow seldom waits on a gather. Mapped pages are dropped from the process as the
    gather moves on, so a node holds a few windows (``WindowBuffers``), not its whole share.
    """

    def __init__(
        self,
        file: CacheFile | None,
        window_bytes: int | None = None,
        orders: Callable[[int], np.ndarray | None] | None = None,
        buffers: WindowBuffers | None = None,
    ):
        self._orders_of = orders or (lambda epoch: None)
        self._orders: dict[int, np.ndarray | None] = {}  # this epoch's and the next one's
        self._ahead: tuple[object, int, Future] | None = None  # (order, first row, the window being read)
        self._following: tuple[object, int] | None = None  # (an epoch's order, the next epoch)
        self._loader: ThreadPoolExecutor | None = None
        self._file = file if file is not None and file.size else None
        order = self._file.canonical() if self._file is not None else []  # frames by partition, then arrival
        self.columns: list[dict] = [file.columns[index] for index in order]
        sizes = [file.frames[index].rows for index in order]
        self._file_order = np.argsort([file.frames[index].offset for index in order], kind="stable")  # of columns
        self.starts = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
        self.rows = int(self.starts[-1])
        self.names: list[str] = self._file.names if self._file is not None else []
        self.layout: RowLayout | None = self._file.layout if self._file is not None else None  # for next_batch
        self.window_rows = _window_rows(self.columns[0] if self.columns else {}, window_bytes)
        self.started_with: int | None = None  # the epoch whose first window came gathered (start_with)
        self._frame_bytes = [sum(c.nbytes for c in frame.values()) for frame in self.columns]
        self._arrow = gathered_in_arrow(self.columns)  # gathered with take(), not into a dense window
        self._window: tuple[object, int, dict] | None = None  # (order, first row, columns)
        self._owns_buffers = buffers is None
        self._buffers = WindowBuffers() if buffers is None else buffers  # shared by the run's splits
        self._scratch: dict[str, np.ndarray] = {}  # this replay's own: one gather at a time uses it

    def start_with(self, epoch: int, order: np.ndarray | None, window: dict) -> bool:
        """Serve epoch ``epoch``'s first window from ``window``, gathered in ``order`` as epoch 1 came
        in (``FirstWindow``), instead of gathering it; False, changing nothing, if it does not fit."""
        size = min(self.window_rows, self.rows)
        if epoch in self._orders or self._ahead is not None or any(len(c) != size for c in window.values()):
            return False
        if order is not None and len(order) != self.rows:
            return False
        self._orders[epoch] = order
        served: Future = Future()
        served.set_result(window)
        self._ahead = (order, 0, served)
        self.started_with = epoch
        return True

    def order(self, epoch: int) -> np.ndarray | None:
        """Epoch ``epoch``'s permutation of the cached rows (None: the cached order), made once."""
        if epoch not in self._orders:
            self._orders = {e: o for e, o in self._orders.items() if e > epoch - 2}
            order = self._orders_of(epoch)
            if order is not None and len(order) != self.rows:  # a window would hold rows never gathered
                raise RuntimeError(f"epoch {epoch}'s order has {len(order)} rows, the cache {self.rows}")
            self._orders[epoch] = order
        return self._orders[epoch]

    def take_epoch(self, epoch: int, start: int, count: int) -> dict[str, np.ndarray]:
        """Rows ``start..start+count`` of epoch ``epoch`` (in its order), as columns; at the epoch's
        last window the next epoch's first is read ahead."""
        order = self.order(epoch)
        self._following = (order, epoch + 1)
        return self.take(order, start, count)

    def read_ahead(self, epoch: int) -> None:
        """Start gathering epoch ``epoch``'s first window (before the epoch is read)."""
        self._read_ahead(self.order(epoch), 0)

    def take(self, order: np.ndarray | None, start: int, count: int) -> dict[str, np.ndarray]:
        """Rows ``start..start+count`` of ``order`` (a permutation; None: the cached order), as columns."""
        pieces = []
        count = min(count, self.rows - start)
        while count > 0:
            first = start - start % self.window_rows
            window = self._window_at(order, first)
            take = min(count, first + self.window_rows - start)
            pieces.append({n: c[start - first : start - first + take] for n, c in window.items()})
            start, count = start + take, count - take
        if len(pieces) == 1:
            return pieces[0]
        return {n: concatenate(n, [p[n] for p in pieces]) for n in pieces[0]}

    def _window_at(self, order: np.ndarray | None, first: int) -> dict[str, np.ndarray]:
        """The window of ``order`` from row ``first``: the current one, the one read ahead, or
        gathered now; then the one after it is read ahead."""
        if self._window is not None and self._window[0] is order and self._window[1] == first:
            return self._window[2]
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead[0] is order and ahead[1] == first:
            columns = ahead[2].result()
        else:
            if ahead is not None:
                _discard(ahead[2])  # never two gathers at once
            self._window = None  # let the previous window go before this one fills
            columns = self._load(order, first)
        self._window = (order, first, columns)
        if first + self.window_rows < self.rows:
            self._read_ahead(order, first + self.window_rows)
        elif self._following is not None and self._following[0] is order:
            self._read_ahead(self.order(self._following[1]), 0)
        return columns

    def _read_ahead(self, order: np.ndarray | None, first: int) -> None:
        """Gather the window of ``order`` from ``first`` in the reader thread (unless it is there)."""
        if not self.rows or (self._ahead is not None and self._ahead[0] is order and self._ahead[1] == first):
            return
        if self._window is not None and self._window[0] is order and self._window[1] == first:
            return
        if self._ahead is not None:
            _discard(self._ahead[2])
        if self._loader is None:
            self._loader = ThreadPoolExecutor(1, thread_name_prefix="sparkdl-cache-read")
        self._ahead = (order, first, self._loader.submit(self._load, order, first))

    def _load(self, order: np.ndarray | None, first: int) -> dict[str, np.ndarray]:
        """The window of rows ``order[first:first + window_rows]``, gathered in file order."""
        last = min(first + self.window_rows, self.rows)
        wanted = np.arange(first, last, dtype=np.int64) if order is None else order[first:last]
        by_position = np.argsort(wanted, kind="stable")
        ordered = wanted[by_position]
        frame_of = np.searchsorted(self.starts, ordered, side="right") - 1
        bounds = np.searchsorted(frame_of, np.arange(len(self.columns) + 1))
        # aligned, so the batches sliced from it reach TensorFlow without another copy
        window = {
            n: self._buffers.take((last - first, *c.shape[1:]), c.dtype)
            for n, c in self.columns[0].items()
            if n not in self._arrow
        }
        gathered: dict[str, dict[int, object]] = {n: {} for n in self._arrow}  # pieces by frame
        traversed = 0
        for frame in self._file_order:
            low, high = bounds[frame], bounds[frame + 1]
            if low == high:
                continue
            local, positions = ordered[low:high] - self.starts[frame], by_position[low:high]
            for name, column in self.columns[frame].items():
                if name in gathered:
                    gathered[name][frame] = take(column, local)
                else:  # file order into a reused scratch buffer ("clip": not buffered again), then the window's order
                    rows = self._scratch_rows(name, len(local), column)
                    window[name][positions] = np.take(column, local, axis=0, out=rows, mode="clip")
            traversed += self._frame_bytes[frame]
            if traversed >= RELEASE_EVERY_BYTES:
                self.release_pages()
                traversed = 0
        if gathered:  # joined in the cache's order (that of ``ordered``), then put in the window's order
            back = np.argsort(by_position, kind="stable")
            for name, pieces in gathered.items():
                window[name] = take(concatenate(name, [pieces[frame] for frame in sorted(pieces)]), back)
        self.release_pages()
        for column in window.values():  # a window serves every epoch of one order (no shuffle): never edited
            if isinstance(column, np.ndarray):
                column.flags.writeable = False
        return window

    def _scratch_rows(self, name: str, count: int, column: np.ndarray) -> np.ndarray:
        """``count`` rows shaped as ``column``'s, in this replay's scratch memory for ``name``
        (the same memory every gather: never two gathers of one replay at once)."""
        kept = self._scratch.get(name)
        if kept is None or kept.shape[1:] != column.shape[1:] or kept.dtype != column.dtype or len(kept) < count:
            kept = self._scratch[name] = np.empty((max(count, self.window_rows), *column.shape[1:]), column.dtype)
        return kept[:count]

    def release_pages(self) -> None:
        """Drop the mapped pages from this process (the kernel's page cache keeps them)."""
        if self._file is not None:
            self._file.release_pages()

    def close(self) -> None:
        """Stop the reader thread and forget the views (the run's cache unmaps its files)."""
        if self._loader is not None:  # a gather in flight reads the mappings: let it end first
            self._loader.shutdown(wait=True, cancel_futures=True)
            self._loader = None
        self.columns = []
        self._window = self._ahead = None
        self._scratch = {}
        if self._owns_buffers:
            self._buffers.close()


def epoch_order(rows: int, seed: int, node: int, epoch: int) -> np.ndarray:
    """The row permutation of one epoch on one node: the same for the same seed, run after run."""
    return np.random.default_rng([seed, node, epoch]).permutation(rows)


def run_orders(shuffle: bool, seed: int, node: int, shuffled_split: str) -> EpochOrders:
    """How a run reads its cached epochs: with ``shuffle``, ``shuffled_split`` in a fresh
    permutation each epoch (``epoch_order``); every other split, and every split without it, in
    the cached order."""

    def order(split: str, epoch: int, rows: int) -> np.ndarray | None:
        return epoch_order(rows, seed, node, epoch) if shuffle and split == shuffled_split else None

    return order
