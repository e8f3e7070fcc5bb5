"""Reading a Structured Streaming query's micro-batches in a node: ``feed.micro_batches()``.

``cluster.train_stream`` feeds each micro-batch as one training run whose plan carries the
query's batch id. This module walks those runs in order: it yields one :class:`MicroBatch` per
run, and once the loop body for it returns it saves the model with that batch id (when given a
:class:`~sparkdl.node.stream_checkpoint.StreamCheckpoint`) and reports the position to the
driver, which holds back the query's commit of the batch until every data node has reported.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Iterator

from ..transport import protocol
from .columns import FeedDataError
from .reader import FeedReader
from .wire import TRAIN_SPLIT

logger = logging.getLogger(__name__)


class MicroBatch:
    """One micro-batch of a streaming query, as this node receives it (its share of the rows)."""

    def __init__(
        self, plan: protocol.TrainingPlan, read_batch: Callable[[int, int], Any], as_dataset: Callable[..., Any]
    ):
        self._plan = plan
        self._read_batch = read_batch  # (session, batch_size): DataFeed.next_batch's rows, within one run
        self._as_dataset = as_dataset  # DataFeed.as_dataset

    @property
    def batch_id(self) -> int:
        """Spark's id of the micro-batch (``foreachBatch``'s ``batch_id``)."""
        return self._plan.batch_id

    @property
    def rows(self) -> int:
        """This node's rows of the micro-batch (the same on every data node)."""
        return self._plan.rows_per_epoch

    def as_dataset(self, batch_size: int, features=None, label=None, shapes: dict | None = None, **options):
        """A ``tf.data.Dataset`` of this micro-batch's rows: ``DataFeed.as_dataset``'s arguments and rules
        (``sample_weight``, ``columns`` among ``options``)."""
        return self._as_dataset(batch_size, features, label, shapes, **options)

    def next_batch(self, batch_size: int):
        """Up to ``batch_size`` rows of this micro-batch, as ``DataFeed.next_batch`` returns them: fewer
        at its end, then empty batches (``[]``, or zero-length arrays with ``input_mapping``); it never
        reads past the micro-batch. Empty too once the batch was cut short (a later run's rows came)."""
        return self._read_batch(self._plan.session, batch_size)

    def __repr__(self) -> str:
        return f"MicroBatch(batch_id={self.batch_id}, rows={self.rows})"


def read_micro_batches(
    reader: FeedReader, read_batch: Callable[[int, int], Any], as_dataset: Callable[..., Any], checkpoint=None
) -> Iterator[MicroBatch]:
    """The micro-batches ``reader`` reads, in order, until ``cluster.shutdown`` ends the feed; each
    one's ``next_batch`` is ``read_batch(session, batch_size)``, its ``as_dataset`` ``as_dataset``."""
    qname = reader.qname
    position = checkpoint.last_batch_id if checkpoint is not None else None
    if position is not None:
        logger.info("stream %r: the restored model holds micro-batches up to %d", qname, position)
    reader.notify(protocol.StreamPosition(qname=qname, batch_id=position))
    while True:
        # Between micro-batches the wait has no limit: a stream may idle for hours (heartbeats go on).
        reader.advance_session()  # past a run read in full before the stream (cluster.train)
        plan = reader.plan(reader.session, None)
        if plan is None:
            return
        if plan.batch_id is None:
            raise FeedDataError(
                f"feed.micro_batches() got training run {plan.session} from cluster.train, which is not a "
                "stream: read cluster.train's data with feed.as_dataset or next_batch"
            )
        new = position is None or plan.batch_id > position
        trained = False
        if new and _rows_arrive(reader, plan):
            if checkpoint is not None:
                checkpoint.before_batch()
            trained = True
            yield MicroBatch(plan, read_batch, as_dataset)
        complete = _drain(reader, plan)  # reads what the loop body left (it broke off, or skipped the batch)
        reader.finish_session(plan.session)
        if not complete:
            # The driver gave the batch up (its query failed) or the feed ended: the model may hold part
            # of it, which no checkpoint may record. Spark replays the batch when its query restarts.
            logger.warning("micro-batch %d was cut short; the model goes back to its state before it", plan.batch_id)
            if checkpoint is not None and trained:
                checkpoint.roll_back()
            if reader.feed_ended:
                return
            continue
        if new:
            position = plan.batch_id
            if checkpoint is not None:
                checkpoint.save(position)
        reader.notify(protocol.StreamPosition(qname=qname, batch_id=position))


def _rows_arrive(reader: FeedReader, plan: protocol.TrainingPlan) -> bool:
    """Wait for the micro-batch's first rows: False when the feed ends first, or the driver gives the
    batch up (its query failed before any rows came) and plans a later one."""
    try:
        reader.example(plan.session, None)
    except EOFError:
        return False
    return True


def _drain(reader: FeedReader, plan: protocol.TrainingPlan) -> bool:
    """Read what is left of ``plan``'s run (so the driver sees it read in full); whether all of it came."""
    left = reader.rows_left(plan.session) or 0
    if left > 0:
        logger.warning("micro-batch %d: %d of this node's rows were not read; skipping them", plan.batch_id, left)
    while left > 0:
        _, _, count = reader.read_run(plan.session, TRAIN_SPLIT, left)
        if not count:
            return False
        left -= count
    return True
