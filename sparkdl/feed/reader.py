"""``FeedReader``: a node's reading position in its feed server's queue, and the reads themselves.

One reader per ``DataFeed`` (one queue name). It holds what reading has reached: the training run
being read (``session``), the chunk being read per split, whether the feed has ended, the runs
released. ``DataFeed`` (TensorFlowOnSpark's API),
``dataset.py`` (``as_dataset``) and ``micro_batches.py`` (``feed.micro_batches()``) all read
through its public methods, so none of them reaches into another's state.

A training run (one ``cluster.train`` call) gives this node ``rows_per_epoch`` rows per epoch of
each split. The first epoch is read from the feed server's queues as Spark streams it in; later
epochs come from the node's epoch cache when the driver chose to replay it (a fresh permutation
each epoch with ``shuffle``), else from the queues again. The reader never reads past a run's
planned rows, so every node reads the same number of rows per epoch. A wait that runs out of the
feed's ``read_timeout`` raises :class:`~sparkdl.common.errors.FeedTimeout` naming what it waited for.
"""

from __future__ import annotations

import logging

import numpy as np

from ..common.errors import FeedTimeout
from ..transport import protocol
from .elements import RowLayout
from .queues import END, END_PARTITION, Chunk, Columns, join_columns, join_slices
from .server import FeedServer
from .wire import TRAIN_SPLIT, VALIDATION_SPLIT

logger = logging.getLogger(__name__)

#: A run fed without a plan (a feeder driven by hand) is read as one open-ended epoch of this many rows.
UNPLANNED_ROWS = 1 << 62


class FeedReader:
    """Reads one queue of a node's feed server: training runs (whole or block by block) and
    inference partitions; ``read_timeout`` bounds each wait for the driver's plan or for rows."""

    def __init__(self, server: FeedServer, qname: str, read_timeout: float):
        self.qname = qname
        self.read_timeout = read_timeout
        self._server = server
        self._queue = server.queue(qname)
        self._chunks: dict[str, Chunk | None] = {}  # the queued chunk being read, per split
        self._stopped = False
        self._session = 1  # the training run (cluster.train call) being read, or next
        self._released = 0  # training runs up to this one were released (read no more)

    # -- the feed server, for this queue --

    @property
    def session(self) -> int:
        """The training run being read, or the next one once it was read in full."""
        return self._session

    @property
    def feed_ended(self) -> bool:
        """Whether the driver ended the feed (``cluster.shutdown``)."""
        return self._server.ended

    @property
    def terminated(self) -> bool:
        """Whether ``map_fun`` ended the feed early (``DataFeed.terminate``)."""
        return self._server.terminated.is_set()

    def plan(self, session: int, timeout: float | None) -> protocol.TrainingPlan | None:
        """Run ``session``'s plan, waiting up to ``timeout`` (None: no limit); None once the feed ended."""
        try:
            return self._server.plan(self.qname, session, timeout)
        except TimeoutError as exc:
            what = f"the plan of training run {session} (cluster.train call {session})"
            raise self._timed_out(what, timeout, " (has the driver called cluster.train()?)") from exc

    def known_plan(self, session: int) -> protocol.TrainingPlan | None:
        """Run ``session``'s plan if it has come, without waiting."""
        return self._server.known_plan(self.qname, session)

    def example(self, session: int, timeout: float | None) -> tuple[dict[str, np.ndarray], list[str]]:
        """Run ``session``'s first row (by column) and its column names, waiting for its first rows;
        EOFError when the feed ends or the driver gives the run up first."""
        try:
            return self._server.example(self.qname, session, timeout)
        except TimeoutError as exc:
            raise self._timed_out(f"the first rows of training run {session}", timeout) from exc

    def _timed_out(self, what: str, timeout: float | None, hint: str = "") -> FeedTimeout:
        """The error of a wait for ``what`` that ran out of ``timeout`` seconds."""
        waited = "its time limit" if timeout is None else f"{timeout:g} s (feed_timeout)"
        return FeedTimeout(
            f"sparkdl feed {self.qname!r}: this node waited {waited} for {what}{hint}; "
            "ctx.get_data_feed(feed_timeout=...) sets how long a read waits"
        )

    def rows_read(self, session: int, split: str = TRAIN_SPLIT) -> int:
        """Rows of ``split`` of run ``session`` read so far (every epoch)."""
        return self._server.rows_read_of(self.qname, session, split)

    def rows_left(self, session: int) -> int | None:
        """Training rows of run ``session`` still to read (None: no plan has come)."""
        return self._server.rows_left(self.qname, session)

    def notify(self, event: protocol.Message) -> None:
        """Send ``event`` to the driver (through the node's TF process)."""
        self._server.notify(event)

    def warn_once(self, key: str, message: str) -> None:
        """Log ``message`` on the driver, once per ``key`` for this node."""
        self._server.warn_once(key, message)

    def report_bad_rows(self, session: int, rows: int, example: str) -> None:
        """Tell the driver (and this node's log) that ``rows`` bad rows of run ``session`` were skipped."""
        logger.warning("sparkdl: skipped %d bad row(s) of training run %d; the first: %s", rows, session, example)
        self._server.notify(protocol.BadRows(qname=self.qname, session=session, rows=rows, example=example))

    # -- planning --

    def split_rows(self, plan: protocol.TrainingPlan, split: str, call: str) -> int:
        """``plan``'s rows per epoch of ``split``; ValueError naming ``feed.<call>`` for a split
        that is unknown, or validation that the run was not given."""
        if split not in (TRAIN_SPLIT, VALIDATION_SPLIT):
            raise ValueError(f"feed.{call}(split={split!r}): split must be {TRAIN_SPLIT!r} or {VALIDATION_SPLIT!r}")
        if split == VALIDATION_SPLIT and not plan.validation_rows:
            raise ValueError(
                f"feed.{call}(split='validation') needs validation data, but training run "
                f"{plan.session} (cluster.train call {plan.session}) was given none: pass "
                "cluster.train(..., validation_data=df_or_rdd)"
            )
        return plan.split_rows(split)

    def current_plan(self) -> protocol.TrainingPlan:
        """The plan of the training run being read (or about to be), waiting for it if needed."""
        self.advance_session()
        plan = self.plan(self._session, self.read_timeout)
        if plan is None:
            raise EOFError("the feed has ended (cluster.shutdown was called) before any more training data")
        return plan

    def advance_session(self) -> None:
        """Move on to the next training run once this one's training rows were all read."""
        left = self.rows_left(self._session)
        if left is not None and left <= 0:
            self._session += 1

    def finish_session(self, session: int) -> None:
        """Run ``session`` is over (a micro-batch read or given up): the next one is read next."""
        self._session = session + 1

    def reading_session(self) -> int | None:
        """The training run ``next_batch`` reads now (waiting for its plan); None once the feed ended."""
        while not (self._stopped or self.terminated):
            self.advance_session()
            if self.known_plan(self._session) is not None:
                return self._session
            item = self._next_training_item("the driver's next training run or its rows")
            if item == END:
                self._stopped = True
            elif not isinstance(item, Chunk) or (item.session or 0) < self._session:
                self._drop_training_item(item)
            else:  # rows that came without a plan (a feeder driven by hand): read them unbounded
                self._session = item.session or self._session
                return self._session
        return None

    def _drop_training_item(self, item) -> None:
        """Step over a marker, or rows of a run cut short."""
        if item is self._chunks.get(TRAIN_SPLIT):
            self._chunks[TRAIN_SPLIT] = None  # the rest of the chunk being read
        else:
            self._queue.get(0)

    def training_run_next(self) -> bool:
        """Whether the rows ``next_batch`` reads next belong to a training run (``cluster.train``),
        waiting for the feed's next item when no plan says so yet."""
        if self._stopped or self.terminated:
            return False
        self.advance_session()
        if self.known_plan(self._session) is not None:
            return True
        item = self._next_training_item("the feed's next rows (an inference partition's or a training run's)")
        return isinstance(item, Chunk) and item.session is not None

    def _next_training_item(self, what: str):
        """The training chunk being read, else the queue's next item, left in the queue (waits; a
        FeedTimeout names ``what`` it waited for)."""
        chunk = self._chunks.get(TRAIN_SPLIT)
        if chunk is not None and chunk.left:
            return chunk
        try:
            return self._queue.peek(self.read_timeout, self._server.progress)
        except TimeoutError as exc:
            raise self._timed_out(what, self.read_timeout) from exc

    # -- the end of the feed --

    def at_end(self) -> bool:
        """True once the feed has ended and every row was read, or after ``terminate``."""
        if self._stopped or self.terminated:
            return True
        chunk = self._chunks.get(TRAIN_SPLIT)
        if chunk is None or not chunk.left:
            try:
                item = self._queue.peek(timeout=0)
            except TimeoutError:
                return False
            if item == END:
                self._stopped = True
        return self._stopped

    def terminate(self) -> None:
        """End the feed early: tell the driver, and drop every queued row."""
        if not self.terminated:
            self._server.terminated.set()
            self._server.notify(protocol.FeedTerminated())
        self._queue.drop_data()
        self._server.queue(self.qname, VALIDATION_SPLIT).drop_data()
        self._chunks.clear()

    # -- reading a training run --

    def read_run(self, session: int, split: str, max_rows: int, check=None) -> tuple[Columns, RowLayout | None, int]:
        """Up to ``max_rows`` rows of ``split`` of training run ``session``, never past its plan;
        ``check(columns, rows)`` sees them before they count as read (it may raise)."""
        plan = self._plan_to_read(session, split)
        per_epoch = plan.split_rows(split)
        done = self.rows_read(session, split)
        max_rows = min(max_rows, plan.total_rows(split) - done)
        pieces: list[Columns] = []
        layout: RowLayout | None = None
        count = 0
        while count < max_rows and not self._stopped and not self.terminated:
            epoch, offset = divmod(done + count, per_epoch)
            wanted = min(max_rows - count, per_epoch - offset)
            try:
                columns, piece_layout, got = self._read_epoch_piece(plan, split, epoch, offset, wanted)
            except FeedTimeout:
                raise
            except TimeoutError as exc:
                rows = "rows" if split == TRAIN_SPLIT else f"{split} rows"
                read = f"{done + count} of its {plan.total_rows(split)} read"
                raise self._timed_out(f"more {rows} of training run {session} ({read})", self.read_timeout) from exc
            if not got:
                break
            pieces.append(columns)
            layout = layout or piece_layout
            count += got
        columns = join_columns(pieces, layout.names if layout else [])
        if count and check is not None:  # before the rows count as read: a bad row fails cluster.train too
            check(columns, count)
        self._count_read(session, split, count)
        return columns, layout, count

    def _plan_to_read(self, session: int, split: str) -> protocol.TrainingPlan:
        """Run ``session``'s plan (one open-ended epoch without one); releases the run before it
        once its training rows are read (its validation is over)."""
        if split == TRAIN_SPLIT and session - 1 > self._released:
            self._server.release_run(self.qname, session - 1)
            self._released = session - 1
        plan = self.known_plan(session)
        if plan is None:  # rows fed without a plan: one open-ended epoch
            plan = protocol.TrainingPlan(session=session, rows_per_epoch=UNPLANNED_ROWS, cache=False, shuffle=False)
        return plan

    def _read_epoch_piece(self, plan: protocol.TrainingPlan, split: str, epoch: int, offset: int, wanted: int):
        """Up to ``wanted`` rows of ``split`` within epoch ``epoch`` from ``offset``: from the cache
        when the driver replays it, else from the queue (fewer, or none, when the feed ends)."""
        from_cache = (epoch or plan.deterministic) and plan.cache
        if from_cache and self._replays(plan.session):
            replay = self._server.run_cache(self.qname, plan.session).replay(split)
            return replay.take_epoch(epoch, offset, wanted), replay.layout, wanted
        return self._from_queue(plan.session, split, wanted, epoch)

    def _replays(self, session: int) -> bool:
        """Whether the driver replays run ``session``'s later epochs from this node's cache (waits for its word)."""
        try:
            return self._server.replay_decision(self.qname, session, self.read_timeout)
        except TimeoutError as exc:
            what = f"the driver's word on whether training run {session}'s later epochs come from this node's cache"
            raise self._timed_out(what, self.read_timeout) from exc

    def _count_read(self, session: int, split: str, count: int) -> None:
        self._server.rows_read += count
        self._server.progress()
        if count:
            self._server.count_read(self.qname, session, count, split)

    def training_iteration_begins(self, session: int) -> None:
        """A new iteration of the training dataset begins (Keras: the next epoch, once the last one's
        validation, if any, is over): validation rows of the epochs before it that were not read
        never will be (``validation_freq``)."""
        plan = self.known_plan(session)
        if plan is None or not plan.validation_rows or not plan.rows_per_epoch:
            return
        done = self.rows_read(session) // plan.rows_per_epoch
        if done:
            self._server.skip_validation(self.qname, session, done)

    def _from_queue(
        self, session: int, split: str, max_rows: int, epoch: int = 0
    ) -> tuple[Columns, RowLayout | None, int]:
        """Up to ``max_rows`` queued rows of ``split`` of run ``session`` (0 once the feed ended),
        of its epoch ``epoch``: validation rows of an earlier epoch were skipped (``validation_freq``)."""
        queue = self._server.queue(self.qname, split)
        pieces: list[tuple[Chunk, int, int]] = []
        count = 0
        while count < max_rows and not self.terminated:
            chunk = self._current_chunk(queue, split)
            if chunk is END:
                break
            if chunk is END_PARTITION:
                continue
            if chunk.session is not None and chunk.session < session:
                self._chunks[split] = None  # rows of a run cut short
                continue
            if chunk.session != session:
                break  # a later run's rows: this run has no more queued rows
            if split == VALIDATION_SPLIT and chunk.epoch is not None and chunk.epoch < epoch:
                self._chunks[split] = None  # the rest of an epoch whose validation was skipped
                continue
            take = min(chunk.left, max_rows - count)
            pieces.append((chunk, chunk.offset, chunk.offset + take))
            chunk.offset += take
            count += take
        return join_slices(pieces)

    def _current_chunk(self, queue, split: str):
        """The chunk of ``split`` being read, else the queue's next item: a chunk (kept as the
        current one), ``END_PARTITION``, or ``END`` (left visible in the queue for later reads)."""
        chunk = self._chunks.get(split)
        if chunk is not None and chunk.left:
            return chunk
        item = queue.get(self.read_timeout, self._server.progress)
        if item == END:
            self._stopped = True
            queue.put(END)
            return END
        if item == END_PARTITION:
            return END_PARTITION
        self._chunks[split] = item
        return item

    # -- reading an inference partition --

    def read_partition(self, max_rows: int) -> tuple[Columns, RowLayout | None, int, object]:
        """Up to ``max_rows`` rows of the current inference partition (fewer at its end), and the
        stream that takes their results (None: none)."""
        pieces: list[tuple[Chunk, int, int]] = []
        count = 0
        while count < max_rows and not self._stopped and not self.terminated:
            try:
                chunk = self._current_chunk(self._queue, TRAIN_SPLIT)
            except TimeoutError as exc:
                what = f"more rows of an inference partition ({count} read)" if count else "inference rows"
                raise self._timed_out(what, self.read_timeout) from exc
            if chunk is END:
                break
            if chunk is END_PARTITION:
                if count:
                    break
                continue
            if pieces and chunk.stream is not pieces[0][0].stream:
                break
            take = min(chunk.left, max_rows - count)
            pieces.append((chunk, chunk.offset, chunk.offset + take))
            chunk.offset += take
            count += take
        self._server.rows_read += count
        self._server.progress()
        stream = pieces[0][0].stream if pieces else None
        return (*join_slices(pieces), stream)
