"""map_fun bodies for the streaming-training tests (cluster.train_stream), run in TF nodes.

Each writes what it did as JSON lines to ``<out>/events-<node>.jsonl`` so the test (or a restarted
application's test) can check every micro-batch and every id.
"""

from __future__ import annotations

import json
import os


def _event(args, ctx, **fields) -> None:
    with open(os.path.join(args["out"], f"events-{ctx.executor_id}.jsonl"), "a") as out:
        out.write(json.dumps(fields) + "\n")
        out.flush()
        os.fsync(out.fileno())


def counting_stream(args, ctx):
    """One model per node (no collective strategy) whose checkpointed state also counts every id trained.

    ``seen[id]`` is part of the same checkpoint as the model, so after any crash and restart it
    says how many times the *saved* model trained on each id: exactly once means all ones.
    """
    import numpy as np
    import tensorflow as tf

    model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1)])
    model.compile(tf.keras.optimizers.SGD(0.01), "mse")
    seen = tf.Variable(tf.zeros([args["ids"]], tf.int64), trainable=False)
    checkpoint = ctx.stream_checkpoint(args["model_dir"], model=model, optimizer=model.optimizer, seen=seen)
    if args.get("hold_after_save") is not None:
        checkpoint = HoldingCheckpoint(checkpoint, args["hold_after_save"])
    iterations = lambda: int(model.optimizer.iterations.numpy())  # noqa: E731
    _event(args, ctx, event="restored", batch=checkpoint.last_batch_id, iterations=iterations())
    feed = ctx.get_data_feed(input_mapping={"id": "id", "x": "x", "y": "y"})
    for batch in feed.micro_batches(checkpoint):
        if batch.batch_id == args.get("stop_at"):
            break  # map_fun ends mid-stream: this batch is neither saved nor committed
        rows = batch.next_batch(batch.rows)
        model.train_on_batch(rows["x"], rows["y"])
        seen.assign_add(np.bincount(rows["id"], minlength=args["ids"]).astype(np.int64))
        # written before the checkpoint saves this batch: a kill in between shows up as a batch
        # trained twice here, but once in the saved state
        _event(args, ctx, event="trained", batch=batch.batch_id, ids=rows["id"].tolist(), iterations=iterations())
        if batch.batch_id == args.get("hold_before_save"):
            _hold(f"micro-batch {batch.batch_id} trained, not saved")
    _event(args, ctx, event="end", seen=seen.numpy().tolist(), iterations=iterations(), batch=checkpoint.last_batch_id)


def counting_ids(args, ctx):
    """``counting_stream``'s loop without TensorFlow (no model, no checkpoint): counts how many times
    each id reached the loop body. For tests of what the feed delivers within one application
    (a retried feeding task, nodes that end their feed), where no restart needs a saved state."""
    import numpy as np

    seen, last = np.zeros(args["ids"], np.int64), None
    feed = ctx.get_data_feed(input_mapping={"id": "id", "x": "x", "y": "y"})
    for batch in feed.micro_batches():
        if batch.batch_id == args.get("stop_at"):
            break  # map_fun ends mid-stream: this batch is not committed
        rows = batch.next_batch(batch.rows)
        seen += np.bincount(rows["id"], minlength=args["ids"])
        last = batch.batch_id
        _event(args, ctx, event="trained", batch=batch.batch_id, ids=rows["id"].tolist())
    _event(args, ctx, event="end", seen=seen.tolist(), batch=last)


def elastic_ids(args, ctx):
    """``counting_ids`` on an elastic cluster, without TensorFlow: each node records, per attempt, the
    ids of every micro-batch it read. Node ``hold_node`` of attempt 0 stops in micro-batch
    ``hold_batch`` before reading it, says so (``held.json``: its Spark executor), and waits (bounded)
    for ``held-release``, so the test can take its executor away at a known point."""
    from pathlib import Path

    from elastic_functions import executor_id

    from node_functions import wait_for_file, write_whole

    out = Path(args["out"])
    feed = ctx.get_data_feed(input_mapping={"id": "id"})
    for batch in feed.micro_batches():
        if (ctx.attempt, ctx.executor_id, batch.batch_id) == (0, args["hold_node"], args["hold_batch"]):
            write_whole(out / "held.json", json.dumps({"executor": executor_id()}))
            wait_for_file(str(out / "held-release"), 180)
        rows = batch.next_batch(batch.rows)
        ids = rows["id"].tolist()
        _event(args, ctx, event="read", attempt=ctx.attempt, nodes=ctx.num_workers, batch=batch.batch_id, ids=ids)


def failing_stream(args, ctx):
    """Reads each micro-batch in full (no TensorFlow); node 1 raises at micro-batch ``args['fail_at']``."""
    feed = ctx.get_data_feed()
    for batch in feed.micro_batches():
        if batch.batch_id == args["fail_at"] and ctx.executor_id == 1:
            raise RuntimeError(f"failing on micro-batch {batch.batch_id}, as the test asked")
        rows = batch.next_batch(batch.rows)
        _event(args, ctx, event="trained", batch=batch.batch_id, rows=len(rows))


def _hold(why: str) -> None:
    """Print a marker the test waits for (the driver's console relays it), then wait to be killed."""
    import threading

    print(f"HOLDING: {why}", flush=True)
    threading.Event().wait()


class HoldingCheckpoint:
    """A StreamCheckpoint that holds the node right after saving micro-batch ``hold``: the moment
    between the model's save and Spark's commit of the batch, where the test kills the application."""

    def __init__(self, checkpoint, hold: int):
        self._checkpoint, self._hold = checkpoint, hold

    @property
    def last_batch_id(self):
        return self._checkpoint.last_batch_id

    def restore_last(self):
        return self._checkpoint.restore_last()

    def before_batch(self):
        self._checkpoint.before_batch()

    def roll_back(self):
        self._checkpoint.roll_back()

    def save(self, batch_id: int) -> str:
        path = self._checkpoint.save(batch_id)
        if batch_id == self._hold:
            _hold(f"micro-batch {batch_id} saved, not committed")
        return path


def mwms_stream(args, ctx):
    """Keras ``fit`` per micro-batch under MultiWorkerMirroredStrategy, saving model and batch id together."""
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1)])
        model.compile(tf.keras.optimizers.SGD(0.01), "mse")
    checkpoint = ctx.stream_checkpoint(args["model_dir"], model=model)
    feed = ctx.get_data_feed()
    for batch in feed.micro_batches(checkpoint):
        if args.get("fail_at") == batch.batch_id and ctx.executor_id == 1:
            raise RuntimeError(f"failing on micro-batch {batch.batch_id}, as the test asked")
        dataset = batch.as_dataset(8, features="x", label="y")
        model.fit(dataset, epochs=1, verbose=0)
        steps = int(model.optimizer.iterations.numpy())
        _event(args, ctx, event="trained", batch=batch.batch_id, rows=batch.rows, steps=steps)
    _event(args, ctx, event="end", batch=checkpoint.last_batch_id, steps=int(model.optimizer.iterations.numpy()))


def read_events(directory) -> dict[int, list[dict]]:
    """Every node's events, keyed by node number, in the order written."""
    events = {}
    for name in sorted(os.listdir(directory)):
        if name.startswith("events-") and name.endswith(".jsonl"):
            with open(os.path.join(directory, name)) as lines:
                node = int(name[len("events-") : -len(".jsonl")])
                events[node] = [json.loads(line) for line in lines if line.strip()]
    return events


def flaky_rows(marker: str, fail_after: int, frame_rows: int):
    """A ``mapInPandas`` function that passes rows through in ``frame_rows``-row frames, and fails the
    first feeding task that reaches row ``fail_after`` of a partition (once: ``marker`` remembers it),
    after it has sent the rows before it: a micro-batch whose feeding task Spark must retry."""

    def passing(frames):
        from pyspark import TaskContext

        task = TaskContext.get()
        feeding = "sparkdl: feed" in (task.getLocalProperty("spark.job.description") or "")
        seen = 0
        for frame in frames:
            for start in range(0, len(frame), frame_rows):
                if feeding and seen >= fail_after and not os.path.exists(marker):
                    open(marker, "w").close()
                    raise RuntimeError(f"flaky source: failed after {seen} rows (once)")
                part = frame.iloc[start : start + frame_rows]
                seen += len(part)
                yield part

    return passing


def failing_while(flag: str, fail_after: int):
    """A ``mapInPandas`` function that passes frames through and, while ``flag`` exists, fails the
    feeding tasks: the first attempt once it has passed ``fail_after`` rows, its retries at once, so
    the micro-batch's query fails part-way. It raises FeedDataError (data the feed cannot take) so
    that the driver gives the batch up at once instead of first waiting for a node to report a cause."""

    def passing(frames):
        from pyspark import TaskContext

        from sparkdl.common.errors import FeedDataError

        task = TaskContext.get()
        feeding = "sparkdl: feed" in (task.getLocalProperty("spark.job.description") or "")
        limit = fail_after if task.attemptNumber() == 0 else 0
        seen = 0
        for frame in frames:
            if feeding and seen >= limit and os.path.exists(flag):
                raise FeedDataError(f"failing source: failed after {seen} rows, as the test asked")
            seen += len(frame)
            yield frame

    return passing
