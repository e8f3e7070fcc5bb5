"""The node's feed server: receives fed rows into bounded queues and keeps each run's plan and cache.

Feeding Spark tasks connect to the ``FeedServer`` in the TF process over the authenticated
channel and stream Arrow record batches into a bounded queue per (queue name, split): when
``map_fun`` consumes slowly, the queue fills, the server stops reading, TCP backs up, and the
feeding task blocks (backpressure, so memory stays bounded). The driver sends each training
run's plan first; during a run's first epoch the server also writes what it receives to the
run's epoch cache (``cache.py``), and the driver later tells it whether epochs 2..N come from
that cache. Reading is ``DataFeed``'s job (``data_feed.py``).

Every stream is bounded in time by the ``feed_timeout`` its feeder names (``streams.py``): a
silent feeder, or one that stops reading its results, is dropped and its Spark task fails;
``map_fun`` and the node's inference turn never wait on it.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
from pathlib import Path

import numpy as np

from ..columns.arrow_rows import origin_values
from ..common.timeouts import FIRST_MESSAGE_TIMEOUT_S
from ..transport import protocol
from ..transport.channel import Channel, ChannelError, ChannelServer, ChannelTimeout, Endpoint
from . import aligned
from .cache import RunCache, run_orders
from .columns import FeedDataError, batch_to_columns, check_rows, data_names
from .elements import RowLayout
from .ledger import DeliveryConflict, DeliveryLedger, frame_digest
from .queues import END, END_PARTITION, BoundedQueue, Chunk, copy_rows, describe_kind, same_kind, wait_with_heartbeat
from .session import RunState
from .streams import InferenceStream, send_notice, stream_timeout
from .wire import TRAIN_SPLIT, VALIDATION_SPLIT, decode_batch

logger = logging.getLogger(__name__)

DEFAULT_QUEUE_BYTES = 64 * 1024 * 1024
#: How many of a run's first rows the server keeps as its example (readers look for one without problems).
EXAMPLE_ROWS = 16


class FeedServer:
    """Receives feed streams for this node (one per TF process, InputMode.SPARK only).

    ``cache_dir`` is where training runs keep their epoch caches (a temporary directory when
    not given); it is removed by ``close()``.
    """

    def __init__(
        self,
        secret: bytes,
        host: str,
        max_queue_bytes: int = DEFAULT_QUEUE_BYTES,
        notify=None,
        cache_dir: str | Path | None = None,
        *,
        endpoint: Endpoint,
    ):
        self.max_queue_bytes = max_queue_bytes
        self.notify = notify or (lambda event: None)  # tells the driver a protocol.NODE_EVENTS event
        self.progress = lambda: None  # a heartbeat to the driver: the node reads its feed
        self.rows_received = 0  # rows queued by feeders so far (all training runs)
        self.rows_read = 0  # rows handed to map_fun so far
        self.terminated = threading.Event()
        self._cache_dir = Path(cache_dir) if cache_dir else Path(tempfile.mkdtemp(prefix="sparkdl-feed-cache-"))
        self._queues: dict[tuple[str, str], BoundedQueue] = {}
        self._runs: dict[tuple[str, int], RunState] = {}
        self._ledger = DeliveryLedger()  # which rows of each fed partition this node accepted (exactly once)
        self._ended = False
        # the driver's word on each epoch boundary, keyed (fit_begin, epoch): an elastic cluster's at
        # an epoch's end, a relaunched chief's as its first fit begins
        self._epoch_gates: dict[tuple[bool, int], bool] = {}
        self._warned: set[str] = set()  # the notices this node gave the driver (each said once)
        self._cond = threading.Condition()
        self._inference_turn = threading.Lock()  # one inference partition at a time per node
        #: What each kind of stream does, by its first message.
        self._handlers = {
            protocol.Plan: self._on_plan,
            protocol.CacheSeal: self._on_cache_seal,
            protocol.CacheUse: self._on_cache_use,
            protocol.End: self._on_end,
            protocol.EpochGate: self._on_epoch_gate,
            protocol.Train: self._on_train,
            protocol.Infer: self._on_infer,
        }
        self._server = ChannelServer(secret, self._handle, host=host, name="sparkdl-feed", endpoint=endpoint)

    @property
    def address(self) -> tuple[str, int]:
        """Where feeders connect."""
        return self._server.address

    @property
    def endpoint(self) -> Endpoint:
        """Who this server is (feeders name it when they connect)."""
        return self._server.endpoint

    @property
    def ended(self) -> bool:
        """Whether the driver said no more data will come (shutdown)."""
        return self._ended

    def queue(self, qname: str, split: str = TRAIN_SPLIT) -> BoundedQueue:
        """The queue of ``split`` rows for ``qname`` (created on first use)."""
        with self._cond:
            key = (qname, split)
            if key not in self._queues:
                self._queues[key] = BoundedQueue(self.max_queue_bytes)
                if self._ended:
                    self._queues[key].put(END)
            return self._queues[key]

    def warn_once(self, key: str, message: str) -> None:
        """Say ``message`` in this node's log and the driver's, the first time ``key`` comes up."""
        with self._cond:
            if key in self._warned:
                return
            self._warned.add(key)
        logger.warning("sparkdl: %s", message)
        self.notify(protocol.NodeWarning(message))

    def plan(self, qname: str, session: int, timeout: float | None) -> protocol.TrainingPlan | None:
        """The plan of ``session`` on ``qname``, waiting (bounded) for the driver to send it;
        None when the feed ended first."""
        with self._cond:
            # waiting for the driver is not a stall: heartbeat meanwhile
            if not wait_with_heartbeat(
                self._cond, lambda: (qname, session) in self._runs or self._ended, timeout, self.progress
            ):
                raise TimeoutError(
                    f"no feeding plan arrived within {timeout} s: has the driver called cluster.train()?"
                )
            run = self._runs.get((qname, session))
            return None if run is None else run.plan

    def known_plan(self, qname: str, session: int) -> protocol.TrainingPlan | None:
        """The plan of ``session`` if it has arrived (never waits)."""
        with self._cond:
            run = self._runs.get((qname, session))
            return None if run is None else run.plan

    def rows_read_of(self, qname: str, session: int, split: str = TRAIN_SPLIT) -> int:
        """Rows of ``split`` of training run ``session`` read so far."""
        with self._cond:
            run = self._runs.get((qname, session))
            return 0 if run is None else run.read.get(split, 0)

    def rows_left(self, qname: str, session: int, split: str = TRAIN_SPLIT) -> int | None:
        """Rows of training run ``session`` not yet read (None until its plan arrives)."""
        with self._cond:
            run = self._runs.get((qname, session))
            return None if run is None else run.plan.total_rows(split) - run.read.get(split, 0)

    def example(self, qname: str, session: int, timeout: float | None) -> tuple[dict[str, np.ndarray], list[str]]:
        """The first training row of ``session`` as columns, and the column names (waits for it;
        EOFError when the feed ends first, or a later run's plan comes: the driver gave this one up)."""
        with self._cond:
            run = lambda: self._runs.get((qname, session))  # noqa: E731
            given_up = lambda: any(q == qname and s > session for q, s in self._runs)  # noqa: E731
            ready = lambda: self._ended or (run() is not None and run().example is not None) or given_up()  # noqa: E731
            if not wait_with_heartbeat(self._cond, ready, timeout, self.progress):
                raise TimeoutError(f"no data arrived within {timeout} s")
            if run() is None or run().example is None:
                raise EOFError("the feed ended before any data arrived" if self._ended else "the run was given up")
            return run().example, run().names

    def count_read(self, qname: str, session: int, rows: int, split: str = TRAIN_SPLIT) -> None:
        """Count ``rows`` of ``split`` of training run ``session`` as read; once every split of the
        run is read in full, delete its cache and tell the driver (``cluster.train`` returns once
        every data node has read all of its rows)."""
        with self._cond:
            run = self._runs.get((qname, session))
            if run is None:
                return
            run.read[split] = run.read.get(split, 0) + rows
            consumed = _read_in_full(run)
        if consumed:
            self._consumed(qname, session, run)

    def fit_ended(self) -> None:
        """``model.fit`` returned (``ctx.progress_callback``'s ``on_train_end``): a run whose training
        rows are all read is over even if some validation epochs were not read (Keras'
        ``validation_freq`` skips them), so ``cluster.train`` returns instead of waiting on them."""
        with self._cond:
            done = [
                (key, run)
                for key, run in self._runs.items()
                if not run.consumed and run.read.get(TRAIN_SPLIT, 0) >= run.plan.total_rows(TRAIN_SPLIT)
            ]
        for (qname, session), run in done:
            self._consumed(qname, session, run)

    def epoch_ended(self, epoch: int) -> None:
        """Keras ended its epoch ``epoch`` (``ctx.progress_callback``'s ``on_epoch_end``, which comes
        after the epoch's validation, if any): the run it trains on skips the validation rows of that
        epoch and the earlier ones that were not read (``validation_freq`` left them out)."""
        with self._cond:
            runs = [(key, run) for key, run in self._runs.items() if run.plan.validation_rows and not run.released]
        for (qname, session), run in runs:
            done = epoch + 1 - run.plan.first_epoch  # the run's epochs Keras is done with
            if done > 0 and run.read.get(TRAIN_SPLIT, 0) >= done * run.plan.rows_per_epoch:  # the run it trains on
                self.skip_validation(qname, session, done)

    def skip_validation(self, qname: str, session: int, epochs: int) -> None:
        """The validation rows of the first ``epochs`` epochs of run ``session`` that were not read
        never will be: Keras is done with those epochs (``validation_freq`` skipped their validation).
        They count as read; those queued are dropped, and so are those still to come (epoch 1's are
        still cached), so their feeding tasks end instead of waiting on a queue nobody reads."""
        with self._cond:
            run = self._runs.get((qname, session))
            if run is None or not run.plan.validation_rows or run.released:
                return
            epochs = min(epochs, run.plan.epochs)
            unread = max(0, epochs * run.plan.validation_rows - run.read.get(VALIDATION_SPLIT, 0))
            if epochs <= run.validation_over and not unread:
                return
            run.validation_over = max(run.validation_over, epochs)
            run.read[VALIDATION_SPLIT] = run.read.get(VALIDATION_SPLIT, 0) + unread
            self.rows_read += unread  # done with, for the driver's progress
            consumed = _read_in_full(run)
        self._discard_queued(qname, session, VALIDATION_SPLIT, epochs)
        if unread:
            logger.info(
                "sparkdl: %d validation rows of training run %d were not read (validation_freq)", unread, session
            )
        if consumed:
            self._consumed(qname, session, run)

    def _discard_queued(self, qname: str, session: int, split: str, below_epoch: int | None = None) -> None:
        """Drop the queued rows of ``split`` of run ``session`` (of its epochs below ``below_epoch``),
        and wake the receiving threads waiting to queue more (their run says if it still wants them)."""
        with self._cond:
            queue = self._queues.get((qname, split))
        if queue is not None:
            queue.discard(
                lambda item: (
                    isinstance(item, Chunk)
                    and item.session == session
                    and (below_epoch is None or (item.epoch is not None and item.epoch < below_epoch))
                )
            )

    def _consumed(self, qname: str, session: int, run: RunState) -> None:
        with self._cond:
            if run.consumed:
                return
            run.consumed = True
        self.release_run(qname, session)
        read, received = self.rows_read, self.rows_received
        self.notify(protocol.FeedConsumed(qname=qname, session=session, rows_read=read, rows_received=received))

    def release_run(self, qname: str, session: int) -> None:
        """Forget a training run that will be read no more: delete its cache; later streams for it
        (a straggling speculative attempt) deliver nothing."""
        with self._cond:
            run = self._runs.get((qname, session))
            if run is None or run.released:
                return
            run.released = True
        self._ledger.close_run(qname, session)
        for split in run.plan.splits:  # nobody reads them: a feeding task waiting for queue space goes on
            self._discard_queued(qname, session, split)
        if run.cache is not None:
            run.cache.drop()

    def replay_decision(self, qname: str, session: int, timeout: float | None) -> bool:
        """Whether epochs 2..N of ``session`` come from the node's cache: yes once the node holds
        its whole share (``_cache_complete``), else as the driver decides (waits for either)."""
        with self._cond:
            run = self._runs[(qname, session)]
            if not run.plan.cache:
                return False
            if not wait_with_heartbeat(
                self._cond, lambda: run.replay is not None or self._ended, timeout, self.progress
            ):
                raise TimeoutError(
                    f"the driver did not say within {timeout} s whether training run {session} "
                    "is served from the node's cache"
                )
            return bool(run.replay)

    def run_cache(self, qname: str, session: int) -> RunCache:
        """The epoch cache of ``session`` (only once the driver chose to replay it)."""
        with self._cond:
            return self._runs[(qname, session)].cache

    def close(self) -> None:
        """Stop serving and delete every cache."""
        with self._cond:
            queues = list(self._queues.values())
        for queue in queues:  # nobody reads them any more: a feeder waiting for space must not wait on
            queue.drop_data()
        self._server.close()
        with self._cond:
            caches = [run.cache for run in self._runs.values() if run.cache is not None]
        for cache in caches:
            cache.drop()
        shutil.rmtree(self._cache_dir, ignore_errors=True)

    # -- streams --

    def _handle(self, channel: Channel) -> None:
        message = protocol.parse(channel.recv(timeout=FIRST_MESSAGE_TIMEOUT_S), *self._handlers)
        timeout = stream_timeout(message.timeout)
        channel.set_send_timeout(timeout)  # a peer that stops reading holds neither this thread nor map_fun
        self._handlers[type(message)](channel, message, timeout)

    def _on_plan(self, channel: Channel, message: protocol.Plan, timeout: float) -> None:
        if message.plan.shuffle and message.plan.seed is None:
            raise protocol.ProtocolError("a shuffled training plan must carry its seed")
        self._add_plan(message.plan)
        channel.send(protocol.Ack().wire())

    def _on_cache_seal(self, channel: Channel, message: protocol.CacheSeal, timeout: float) -> None:
        channel.send(protocol.CacheStatus(self._seal(message.qname, message.session)).wire())

    def _on_cache_use(self, channel: Channel, message: protocol.CacheUse, timeout: float) -> None:
        self._decide(message.qname, message.session, message.use)
        channel.send(protocol.Ack().wire())

    def _on_epoch_gate(self, channel: Channel, message: protocol.EpochGate, timeout: float) -> None:
        with self._cond:
            self._epoch_gates[(message.fit_begin, message.epoch)] = message.go_on
            self._cond.notify_all()
        channel.send(protocol.Ack().wire())

    def await_epoch_gate(self, epoch: int, timeout: float, fit_begin: bool = False) -> bool:
        """An elastic cluster's chief at the end of ``epoch`` (with ``fit_begin``: a relaunched chief
        as its first fit begins ``epoch``): wait (bounded) for the driver's word. True: go on. False:
        the driver relaunches the cluster and stops this node, so this waits for that (bounded) and
        the epoch never starts here. A word that does not come within ``timeout`` counts as going on."""
        key = (fit_begin, epoch)
        with self._cond:
            self._cond.wait_for(lambda: key in self._epoch_gates or self._ended, timeout)
            go_on = self._epoch_gates.pop(key, True)
            if not go_on:
                self._cond.wait_for(lambda: self._ended, timeout)
            return go_on

    def _on_end(self, channel: Channel, message: protocol.End, timeout: float) -> None:
        with self._cond:
            self._ended = True
            queues = list(self._queues.values())
            caches = [run.cache for run in self._runs.values() if run.cache is not None]
            self._cond.notify_all()
        for cache in caches:  # no training run can read them any more
            cache.drop()
        for queue in queues:
            queue.put(END)
        channel.send(protocol.Ack().wire())

    def _on_train(self, channel: Channel, message: protocol.Train, timeout: float) -> None:
        if message.split not in (TRAIN_SPLIT, VALIDATION_SPLIT):
            raise protocol.ProtocolError(f"unknown split {message.split!r}")
        try:
            self._receive_training(channel, message, timeout)
        except (ChannelTimeout, TimeoutError) as exc:  # the task went silent, or map_fun stopped reading
            where = f"partition {message.partition} (training run {message.session}, attempt {message.attempt})"
            why = (
                f"the feeding task of {where} sent nothing for {timeout:g} s (feed_timeout): the node dropped it"
                if isinstance(exc, ChannelTimeout)
                else f"map_fun read none of the queued rows for {timeout:g} s (feed_timeout): the node dropped {where}"
            )
            logger.warning("sparkdl: %s", why)
            send_notice(channel, why)
        except ChannelError as exc:  # e.g. Spark killed a speculative copy that lost the race
            logger.info(
                "sparkdl: the stream of partition %d (training run %d, epoch %d, %s, attempt %d) ended early: %s",
                message.partition,
                message.session,
                message.epoch + 1,
                message.split,
                message.attempt,
                exc,
            )

    def _on_infer(self, channel: Channel, message: protocol.Infer, timeout: float) -> None:
        with self._inference_turn:  # released however the stream ends, within its timeout
            stream = InferenceStream(channel)
            try:
                rows = self._receive(channel, self.queue(message.qname), timeout, stream, message.partition)
            except OSError as exc:  # the task went away mid-partition (e.g. take(n) had its rows), or silent
                stream.abandon(
                    exc,
                    f"the feeding task of inference partition {message.partition} sent "
                    f"nothing for {timeout:g} s (feed_timeout): the node dropped it"
                    if isinstance(exc, ChannelTimeout)
                    else None,
                )
                self.queue(message.qname).put(END_PARTITION)  # map_fun's batch ends with the rows that came
                return
            if rows is not None:
                self._await_results(stream)
            if stream.finished.is_set():  # answered in full: the driver counts it for its progress
                self.notify(
                    protocol.Inferred(
                        run=message.run, stage=message.stage, partition=message.partition, rows=stream.delivered
                    )
                )

    def _add_plan(self, plan: protocol.TrainingPlan) -> None:
        qname, cache = plan.qname, None
        if plan.cache and (plan.epochs > 1 or plan.deterministic):
            label = f"training run {plan.session}" + (f" of queue {qname!r}" if qname != protocol.DEFAULT_QNAME else "")
            cache = RunCache(
                self._cache_dir / f"{qname}-run{plan.session}",
                plan.cache_max_bytes,
                label,
                {split: plan.split_rows(split) for split in plan.splits},
                run_orders(plan.shuffle, plan.seed, plan.node, TRAIN_SPLIT),
                # the first cached epoch's first window, gathered while epoch 1 streams in
                (TRAIN_SPLIT, _first_cached_epoch(plan), tuple(plan.partition_rows)),
            )
        with self._cond:
            self._runs[(qname, plan.session)] = RunState(plan, cache)
            self._cond.notify_all()

    def _seal(self, qname: str, session: int) -> str | None:
        with self._cond:
            run = self._runs.get((qname, session))
        if run is None or run.cache is None:
            return "this node keeps no cache for the run"
        return run.cache.seal({s: run.plan.split_rows(s) for s in run.plan.splits})

    def _decide(self, qname: str, session: int, use: bool) -> None:
        with self._cond:
            run = self._runs[(qname, session)]
            if run.replay:  # its whole share was in first: it replays it (what the driver feeds again is dropped)
                return
            run.replay = use and run.cache is not None and run.cache.failure is None
            self._cond.notify_all()
        if not run.replay and run.cache is not None:
            run.cache.drop()

    def _check_schema(self, run: RunState, split: str, columns: dict, layout: RowLayout) -> None:
        """Record the run's first training rows; reject validation rows that do not match them (a
        DataFrame's list column is one kind at any width: ``RowLayout.widths_vary``)."""
        names = list(layout.names)
        with self._cond:
            if run.example is None and split == TRAIN_SPLIT:
                run.example = {n: copy_rows(c, EXAMPLE_ROWS) for n, c in columns.items()}
                run.names = list(names)
                self._cond.notify_all()
            example, expected = run.example, run.names
        if split != VALIDATION_SPLIT or example is None:
            return
        if list(names) != expected:
            missing = sorted(set(expected) - set(names)) or sorted(set(names) - set(expected)) or names
            raise FeedDataError(
                f"validation data has columns {list(names)} but the training data has {expected}"
                f" (column {missing[0]!r} differs)"
            )
        for name in names:
            want, got = example[name], columns[name]
            if not same_kind(want, got, layout.widths_vary):
                raise FeedDataError(
                    f"validation column {name!r} is {describe_kind(got)} but the training "
                    f"column is {describe_kind(want)}"
                )

    def _receive_training(self, channel: Channel, message: protocol.Train, timeout: float) -> None:
        """Queue (and, in epoch 1, cache) a training stream's rows that this node does not hold yet.

        Rows are numbered by their position in the stream; the partition's slot in the ledger
        (``ledger.py``) admits only frames past what an earlier or concurrent attempt delivered, so
        a retried or speculative feeding task adds no row twice and delivers the ones missing; a
        frame that overlaps the delivered rows must be the frame delivered there (same rows, same
        order), else the attempt is rejected.
        """
        qname, session, split = message.qname, message.session, message.split
        with self._cond:
            run = self._runs.get((qname, session))
        cache = run.cache if run is not None and message.epoch == 0 else None
        # deterministic: epoch 1 is read from the cache, in the seeded order, once it holds the whole share
        queue = None if cache is not None and run.plan.deterministic else self.queue(qname, split)
        slot = self._ledger.slot((qname, session, message.epoch, split, message.partition))
        position = 0
        while True:
            frame = channel.recv_any(timeout, allocate=aligned.pooled)
            if isinstance(frame, dict):
                done = protocol.parse(frame, protocol.Done)
                if self.terminated.is_set():
                    channel.send(protocol.Terminated().wire())
                    return
                try:
                    with slot.lock:
                        slot.finish(message.attempt, done.rows)
                except DeliveryConflict as exc:
                    channel.send(protocol.Rejected(self._conflict(message, exc)).wire())
                    return
                channel.send(protocol.Ack(position).wire())
                return
            if self.terminated.is_set():
                channel.send(protocol.Terminated().wire())
                self._drain(channel)
                return
            try:
                batch = decode_batch(frame)
                names, layout = data_names(batch.schema), RowLayout.of(batch.schema)
                columns = batch_to_columns(
                    batch, origin_values(message.partition, position + np.arange(batch.num_rows))
                )
                if run is None or run.plan.bad_rows == "fail":  # else the reader skips (and counts) them
                    check_rows(columns, names)
                if run is not None:
                    self._check_schema(run, split, columns, layout)
            except (FeedDataError, ValueError) as exc:
                channel.send(protocol.Rejected(str(exc)).wire())
                self._drain(channel)
                return
            digest = frame_digest(frame)
            complete = False  # whether this frame completed the node's cached share of epoch 1
            with slot.lock:  # held until the rows are queued: a racing attempt waits, in order
                try:
                    new = slot.admit(position, batch.num_rows, digest)
                except DeliveryConflict as exc:
                    channel.send(protocol.Rejected(self._conflict(message, exc)).wire())
                    self._drain(channel)
                    return
                if new:
                    if queue is not None and (run is None or run.wants(split, message.epoch)):
                        chunk = Chunk(columns, names, batch.num_rows, session, layout=layout, epoch=message.epoch)
                        unwanted = None if run is None else (lambda: not run.wants(split, message.epoch))
                        # bounded; twice the feeder's own limit, so its clearer error comes first
                        queue.put(chunk, nbytes=len(frame), timeout=2 * timeout, unless=unwanted)
                    # accepted only once queued: rows a full queue refused are delivered by the next attempt
                    slot.commit(position, batch.num_rows, digest)
                    complete = cache is not None and cache.append(split, message.partition, frame, batch.num_rows)
                    with self._cond:  # several feeders may deliver at once
                        self.rows_received += batch.num_rows
            if complete:
                self._cache_complete(run)
            position += batch.num_rows

    def _cache_complete(self, run: RunState) -> None:
        """The node holds its whole share of epoch 1 (every planned row of every split, each once):
        seal and open the cache (its frames were decoded as they were cached), read the first
        cached epoch's first window ahead unless it was gathered as the rows came in, and replay
        it, without waiting for Spark's feeding job to end and for the driver's word (the reader
        may still be draining epoch 1's queue meanwhile). Should another node fail to cache its
        share, the driver feeds the later epochs from Spark, and this node drops those rows."""
        plan, cache = run.plan, run.cache
        if cache.seal({split: plan.split_rows(split) for split in plan.splits}) is not None:
            return  # the driver learns why when it asks (cache_seal), and feeds from Spark
        for split in plan.splits:
            if plan.split_rows(split):
                cache.replay(split)  # opened now: the first cached epoch does not wait for it
        cache.replay(TRAIN_SPLIT).read_ahead(_first_cached_epoch(plan))  # unless gathered already
        with self._cond:
            if run.replay is None and not run.released and cache.failure is None:
                run.replay = True
                self._cond.notify_all()

    def _conflict(self, message: protocol.Train, exc: DeliveryConflict) -> str:
        """A rejection naming the partition and attempt whose rows differ from an earlier attempt's."""
        return (
            f"partition {message.partition}, attempt {message.attempt} (training run {message.session}, epoch "
            f"{message.epoch + 1}, {message.split}) does not match the rows an earlier attempt delivered: {exc}. The "
            "data differs between Spark task attempts (a partition recomputed out of a shuffle, e.g. a cached "
            "DataFrame whose blocks were lost with an executor, comes back in another order): give each partition "
            "a fixed order (sortWithinPartitions on a unique key), or checkpoint() the data to reliable storage, "
            "before cluster.train()."
        )

    def _receive(
        self, channel: Channel, queue: BoundedQueue, timeout: float, stream: InferenceStream, partition: int
    ) -> int | None:
        """Queue an inference feeder's data frames until its ``done``; returns the row count (None if
        cut short). Each frame must arrive within ``timeout`` (``ChannelTimeout``); waiting for queue
        space is not counted (backpressure holds the feeder, not the reverse)."""
        rows = 0
        while True:
            frame = channel.recv_any(timeout, allocate=aligned.pooled)
            if isinstance(frame, dict):
                protocol.parse(frame, protocol.Done)
                if self.terminated.is_set():
                    channel.send(protocol.Terminated().wire())
                    return None
                queue.put(END_PARTITION)
                stream.expected = rows
                stream.maybe_complete()
                return rows
            if self.terminated.is_set():
                channel.send(protocol.Terminated().wire())
                self._drain(channel)
                return None
            try:
                batch = decode_batch(frame)
                names = data_names(batch.schema)
                columns = batch_to_columns(batch, origin_values(partition, rows + np.arange(batch.num_rows)))
                check_rows(columns, names)  # an inference row is answered or the partition fails: no skipping
            except (FeedDataError, ValueError) as exc:
                channel.send(protocol.Rejected(str(exc)).wire())
                self._drain(channel)
                return None
            queue.put(
                Chunk(columns, names, batch.num_rows, None, stream, layout=RowLayout.of(batch.schema)),
                nbytes=len(frame),
                timeout=2 * timeout,  # bounded; twice the feeder's own limit, so its clearer error comes first
            )
            rows += batch.num_rows
            with self._cond:  # several feeders may deliver at once
                self.rows_received += batch.num_rows

    @staticmethod
    def _drain(channel: Channel, timeout: float = 60.0) -> None:
        """After an early reply, discard the feeder's frames until it closes: closing with unread
        data resets the connection, and a feeder blocked in a send would never see the reply."""
        try:
            while True:
                channel.recv_any(timeout)
        except OSError:  # ChannelError (EOF, timeout) or the server closing the channel
            pass

    def _await_results(self, stream: InferenceStream) -> None:
        """Hold this node's inference turn until the partition is answered or the run ends."""
        while not stream.finished.wait(0.5):
            if self.terminated.is_set() or self._ended:
                return


def _first_cached_epoch(plan: protocol.TrainingPlan) -> int:
    """The first epoch read from the cache: epoch 2, or epoch 1 itself with ``deterministic``."""
    return 0 if plan.deterministic else 1


def _read_in_full(run: RunState) -> bool:
    """Whether every split of ``run`` was read in full, and the driver not yet told."""
    return not run.consumed and all(run.read.get(s, 0) >= run.plan.total_rows(s) for s in run.plan.splits)
