"""``DataFeed``: how ``map_fun`` reads the rows fed to its node (TensorFlowOnSpark's API, and tf.data).

A training run (one ``cluster.train`` call) gives this node ``rows_per_epoch`` rows per epoch of
each split (training, and validation when given). The first epoch is read from the feed
server's queues as Spark streams it in; later epochs come from the node's epoch cache when the
driver chose to replay it (a fresh permutation each epoch with ``shuffle``), else from the
queues again. The reader never reads past a run's planned rows, so every node reads the same
number of rows per epoch (MultiWorkerMirroredStrategy never waits on a node that ran out).
A streaming query's micro-batches are runs too, walked by ``micro_batches.py``. What reading has
reached, and the reads themselves, are the :class:`~sparkdl.feed.reader.FeedReader`'s, which
``dataset.py`` and ``micro_batches.py`` use too.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Sequence

import numpy as np

from ..columns.arrow_rows import ORIGIN, column_problems
from ..columns.readers import take
from ..common.timeouts import FEED_TIMEOUT_S
from ..transport import protocol
from .columns import bad_row_error
from .dataset import build_dataset, keeps_feed_order
from .elements import RowLayout, column_array
from .micro_batches import read_micro_batches
from .queues import Columns
from .reader import FeedReader
from .server import FeedServer
from .wire import TRAIN_SPLIT


class DataFeed:
    """TensorFlowOnSpark's DataFeed: read fed rows in a node; also as a ``tf.data.Dataset``.

    ``input_mapping`` (``{column: tensor_name}``) makes ``next_batch`` return a dict of numpy
    arrays keyed by tensor name; without it, ``next_batch`` returns a list of the elements as they
    were in the RDD (bare values, tuples, lists), or of row tuples for a DataFrame.
    """

    def __init__(
        self,
        server: FeedServer,
        train_mode: bool = True,
        qname_in: str = protocol.DEFAULT_QNAME,
        qname_out: str = "output",
        input_mapping: dict[str, str] | None = None,
        feed_timeout: float = FEED_TIMEOUT_S,
    ):
        self.train_mode = train_mode
        self.qname_in = qname_in
        self.qname_out = qname_out
        self.input_mapping = dict(input_mapping) if input_mapping else None
        self._reader = FeedReader(server, qname_in, feed_timeout)
        self._pending: deque[list] = deque()  # [stream, rows awaiting results]

    @property
    def reader(self) -> FeedReader:
        """How this feed reads its queue (sparkdl's own readers share it: ``as_dataset``, ``micro_batches``)."""
        return self._reader

    @property
    def read_timeout(self) -> float:
        """Each wait for the driver's plan, for rows, or for a feeding task to take results (``feed_timeout``)."""
        return self._reader.read_timeout

    @read_timeout.setter
    def read_timeout(self, seconds: float) -> None:
        self._reader.read_timeout = seconds

    # -- TensorFlowOnSpark API --

    def next_batch(self, batch_size: int):
        """Up to ``batch_size`` rows; fewer at the end of an inference partition, a training run
        (``cluster.train`` call) or the feed. Blocks until rows arrive or the feed ends.

        Without ``input_mapping``, a list of the RDD's elements with the structure they had: a
        number, string, list or array comes back bare (lists as lists of Python values, numpy
        arrays and scalars as numpy), a tuple as a tuple of the same length; a DataFrame's rows
        come back as tuples of numpy values (arrays for array and Vector columns, dense; bytes and
        strings as Python values, arrays of varying length as arrays of their own lengths). With
        ``input_mapping``, a dict of numpy arrays keyed by tensor name (an object array for bytes,
        strings and arrays of varying length). In a run fed with ``bad_rows="skip"`` the rows
        no tensor can take are left out (and counted); otherwise the feed refused them.
        """
        if self.train_mode or self._reader.training_run_next():
            session = self._reader.reading_session()
            return self._run_batch(session, batch_size) if session else self._as_batch({}, None, 0)
        columns, layout, count, stream = self._reader.read_partition(batch_size)
        if stream is not None:
            self._pending.append([stream, count])
        return self._as_batch(columns, layout, count)

    def _run_batch(self, session: int, batch_size: int):
        """``next_batch`` within training run ``session``: up to ``batch_size`` of its training rows,
        none once they are all read (it never moves on to the next run)."""
        columns, layout, count = self._reader.read_run(session, TRAIN_SPLIT, batch_size)
        plan = self._reader.known_plan(session)
        if count and plan is not None and plan.bad_rows == "skip":
            columns, count = self._skip_bad_rows(session, columns, layout.names, count)
        return self._as_batch(columns, layout, count)

    def _as_batch(self, columns: Columns, layout: RowLayout | None, count: int):
        """Rows read, as ``next_batch`` returns them (see its docstring)."""
        if self.input_mapping:
            return {
                tensor: column_array(columns[column]) if column in columns else np.empty((0,))
                for column, tensor in self.input_mapping.items()
            }
        return layout.rows(columns) if count else []

    def _skip_bad_rows(self, session: int, columns: dict, names, count: int) -> tuple[dict, int]:
        """``columns`` without the rows no tensor can take (reported to the driver), and how many are left."""
        bad = np.zeros(count, bool)
        first = ""
        for name in names:
            if not isinstance(columns[name], np.ndarray):
                for problem in column_problems(columns[name]):
                    if not first:
                        first = str(bad_row_error(name, problem, columns.get(ORIGIN)))
                    bad |= problem.mask
        if not bad.any():
            return columns, count
        self._reader.report_bad_rows(session, int(bad.sum()), first)
        keep = np.flatnonzero(~bad)
        return {name: take(column, keep) for name, column in columns.items()}, len(keep)

    def should_stop(self) -> bool:
        """True once the feed has ended (``cluster.shutdown``) and every row was read, or after ``terminate``."""
        return self._reader.at_end()

    def batch_results(self, results: Sequence[Any]) -> None:
        """Return inference results, one per row, in the order the rows were read.

        Each call answers whole batches: exactly the rows of the oldest unanswered batch (or of
        several, in order). Any other count raises ValueError at once, instead of shifting
        results onto the wrong rows. It waits at most ``cluster.inference``'s ``feed_timeout``
        for the feeding task to take them: a task that takes none for that long is dropped (its
        Spark task fails) and the rest of its partition's results are discarded.
        """
        if not isinstance(results, np.ndarray) and callable(getattr(results, "numpy", None)):
            results = results.numpy()  # a tf.Tensor: its rows, as numpy
        results = results if isinstance(results, np.ndarray) else list(results)
        if not len(results):  # an empty batch's answer (TensorFlowOnSpark's examples send one at the end)
            return
        self._check_result_count(len(results))
        start = 0
        while start < len(results):
            if not self._pending:
                raise ValueError(f"batch_results got {len(results) - start} more results than rows were read")
            stream, waiting = self._pending[0]
            part = results[start : start + waiting]
            stream.send_results(part)
            start += len(part)
            self._pending[0][1] -= len(part)
            if not self._pending[0][1]:
                self._pending.popleft()

    def _check_result_count(self, count: int) -> None:
        covered = 0
        for _, waiting in self._pending:
            covered += waiting
            if covered == count:
                return
            if covered > count:
                raise ValueError(
                    f"batch_results got {count} results for a batch of {self._pending[0][1]} rows: "
                    "return exactly one result per row read (whole batches, in order)"
                )
        raise ValueError(
            f"batch_results got {count - covered} more results than rows were read ({covered} rows await results)"
        )

    def terminate(self) -> None:
        """Stop feeding early: the rest of the feed is skipped and ``should_stop()`` becomes True."""
        self._reader.terminate()

    # -- sparkdl additions --

    def micro_batches(self, checkpoint=None):
        """``cluster.train_stream``'s micro-batches in order (``MicroBatch``: ``batch_id``, ``as_dataset``)
        until the feed ends. One counts as trained once the loop body for it returns: ``checkpoint``
        (``ctx.stream_checkpoint``) then saves the model with its id; batches it holds are skipped."""
        return read_micro_batches(self._reader, self._run_batch, self.as_dataset, checkpoint)

    @property
    def num_epochs(self) -> int:
        """The ``epochs`` to give ``model.fit`` for the current (or next) ``cluster.train`` call. After
        a relaunch that resumes (``ctx.backup_and_restore``), Keras restarts at :attr:`first_epoch`
        and runs up to this one: exactly the epochs fed."""
        plan = self._reader.current_plan()
        return plan.first_epoch + plan.epochs

    @property
    def first_epoch(self) -> int:
        """The first epoch (0-based) the current ``cluster.train`` call feeds (> 0 after a resuming relaunch)."""
        return self._reader.current_plan().first_epoch

    def steps_per_epoch(self, batch_size: int, split: str = TRAIN_SPLIT) -> int:
        """Batches ``as_dataset(batch_size, split=split)`` yields per epoch of the next ``cluster.train`` call.

        Equal on every node: sparkdl gives each node the same number of rows. Under
        MultiWorkerMirroredStrategy, Keras splits each batch across the workers (it treats it
        as the global batch), so ``model.fit`` runs ``num_workers`` times as many steps of
        ``batch_size / num_workers`` rows; let ``fit`` find the epoch's end by itself.
        """
        plan = self._reader.current_plan()
        return -(-self._reader.split_rows(plan, split, "steps_per_epoch") // batch_size)

    @staticmethod
    def keeps_feed_order(derived, source):
        """``derived`` (``source.map(f)``, row for row) told apart as ``as_dataset``'s ``source`` is,
        so Keras is told the same about it (see ``feed/dataset.py``, ``keeps_feed_order``)."""
        return keeps_feed_order(derived, source)

    def keras_steps_per_epoch(self, batch_size: int, strategy=None) -> int:
        """``model.fit``'s ``steps_per_epoch`` for ``as_dataset(batch_size, all_epochs=True)`` under ``strategy``
        (the model's; None: none): ``steps_per_epoch(batch_size)``, times the number of workers under
        MultiWorkerMirroredStrategy, where Keras splits each (global) batch and steps through every piece."""
        batches = self.steps_per_epoch(batch_size)
        if strategy is None:
            return batches
        local_replicas = max(1, len(strategy.extended.worker_devices))
        return batches * max(1, strategy.num_replicas_in_sync // local_replicas)

    def as_dataset(
        self,
        batch_size: int,
        features: str | int | list | dict | None = None,
        label: str | int | list | dict | None = None,
        shapes: dict | None = None,
        split: str = TRAIN_SPLIT,
        all_epochs: bool = False,
        sample_weight: str | int | list | dict | None = None,
        columns: dict | None = None,
    ):
        """A ``tf.data.Dataset`` over this node's rows of the next ``cluster.train`` call.

        Each iteration of the dataset (one Keras epoch) yields exactly one epoch of the node's
        rows of ``split`` in batches of ``batch_size`` (the last one smaller if the rows do not
        divide), the same number of batches on every node, so ``model.fit(ds, epochs=E)`` under
        MultiWorkerMirroredStrategy never waits on a node that ran out. ``split="validation"``
        reads the ``validation_data`` given to ``cluster.train`` (once per iteration, so
        ``model.fit(train_ds, validation_data=val_ds, epochs=E)`` works). An epoch's validation rows
        that are not read by the time it ends (Keras' ``validation_freq``) are dropped, so they never
        hold up the feed: pass ``ctx.progress_callback()`` to ``fit``, which says when an epoch ends
        (without it, a new iteration of a training dataset read one epoch per iteration says so).

        ``all_epochs=True`` (training split): one iteration yields every epoch the run has left,
        back to back, each epoch's batches as above; give Keras the epoch's length, ``model.fit(ds,
        epochs=feed.num_epochs, steps_per_epoch=feed.keras_steps_per_epoch(batch_size, strategy))``.
        Keras then keeps one iterator for the whole fit instead of building one per epoch, which
        under MultiWorkerMirroredStrategy costs about 2.4 s of idle time per epoch on CPU.

        Under MultiWorkerMirroredStrategy, Keras treats each batch as the *global* batch and
        splits it across the workers: pass ``batch_size = per_worker_batch * ctx.num_workers``
        to train ``per_worker_batch`` rows per worker per step.

        What it yields is what ``model.fit(x, y, sample_weight)`` takes: ``x``, ``(x, y)`` or
        ``(x, y, sample_weight)``. ``features``, ``label`` and ``sample_weight`` name columns
        (DataFrame names, or positions ``0, 1, ...`` for RDD tuples): one column gives a tensor;
        a dict ``{input or output name: column}`` gives a dict (several named inputs or
        outputs); a list gives, for ``features``, a dict keyed by column (or by
        ``input_mapping``) and, for ``label`` and ``sample_weight``, a tuple (outputs in order).
        Without any of them it yields a dict of every column.

        How each column becomes a tensor: numbers and equal-length arrays are dense (``shapes``
        reshapes them per row, e.g. ``{"image": (28, 28, 1)}``), ``pyspark.ml`` Vectors dense
        ``float64``, binary and string columns ``tf.string``, Spark's image struct ``uint8``
        images; ``columns={column: spec}`` (``sparkdl.columns.specs``) asks for another form:
        ``Image(height, width, channels)`` decodes image files (``binaryFile``'s ``content``),
        ``Sparse()`` gives ``tf.SparseTensor`` batches, ``Ragged()`` ``tf.RaggedTensor`` batches and
        ``Padded(length)`` dense ones. A row no tensor can take (a null, text that is not UTF-8,
        a corrupt image, an array longer than declared...) fails naming its column, Spark
        partition and row, or with ``cluster.train(..., bad_rows="skip")`` is left out of its
        batch and counted (the driver logs it, ``cluster.bad_rows``). Auto-sharding is off (each
        node already holds only its own rows) and tf.data autotuning is disabled.
        """
        return build_dataset(
            self._reader, self.input_mapping, batch_size, features, label, shapes, split, all_epochs, sample_weight,
            columns,
        )  # fmt: skip
