"""The program every TF node of a ``KerasEstimator`` fit runs: ``main_fun(job, ctx)``.

For each run of the job (one per param map), in the order the driver feeds them (one
``cluster.train`` call each): build the model inside the strategy's scope (a shipped ``.keras``
file loaded in safe mode, or the user's function called), compile it with the run's overrides,
read the fed rows as ``tf.data`` (every epoch in one iterator, ``batch_size`` rows per worker per
step), fit with the run's callbacks and ``ctx.progress_callback()`` (the driver's progress and
history), read whatever the fit left of the fed rows (an early stop, or an epoch the backup
already held), and save the model where the driver said (the chief keeps it; ``ctx.export_path`` uploads it to a
store). Every file goes through ``ctx.storage`` (the application's store settings). It returns every
run's history to the driver (``TFCluster.shutdown()``'s value): the model stays a file.
"""

from __future__ import annotations

import gc
import json
import shutil
import tempfile

from ..common.tf_compat import save_keras_file
from ..common.timeouts import FEED_TIMEOUT_S
from . import training
from .layout import batch_mapper
from .shipping import build
from .spec import RunSpec, TrainingJob

#: Rows read per call when the node reads what a fit left of its feed.
DRAIN_ROWS = 65536


def main_fun(job: TrainingJob, ctx) -> dict:
    """Train every run of ``job`` on this node; the chief's return value reaches the driver."""
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy() if ctx.num_workers > 1 else tf.distribute.get_strategy()
    feed = ctx.get_data_feed(qname_in=job.qname)
    runs = _named_runs(job, ctx) if job.named_runs else job.runs[_first_run(job, ctx) :]
    outcomes = []
    for session, run in enumerate(runs, start=1):  # feed sessions count this attempt's train calls
        # The node's private local files of a run in a store (backup, best.keras), removed after the run.
        scratch = tempfile.mkdtemp(prefix=f"sparkdl-keras-{ctx.job_name}{ctx.task_index}-")
        try:
            outcomes.append(_train(job, run, ctx, feed, strategy, session, scratch))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return {"runs": outcomes}


def _first_run(job: TrainingJob, ctx) -> int:
    """The run the driver feeds first to this attempt: 0, or after a relaunch the one it named."""
    if ctx.attempt == 0 or job.current_run_path is None:
        return 0
    text = ctx.storage.read_text(job.current_run_path)
    if text is None:
        raise FileNotFoundError(f"relaunched, this node finds no marker of the run being fed at {job.current_run_path}")
    index = int(json.loads(text)["index"])
    return next(position for position, run in enumerate(job.runs) if run.index == index)


def _named_runs(job: TrainingJob, ctx):
    """The run of each train call, as the driver named it before feeding it, until the feed ends."""
    session = 1
    while ctx.mgr.plan(job.qname, session, FEED_TIMEOUT_S) is not None:  # None: the driver ended the feed
        text = ctx.storage.read_text(job.current_run_path)
        if text is None:
            raise FileNotFoundError(f"this node finds no marker of the run being fed at {job.current_run_path}")
        index = int(json.loads(text)["index"])
        yield next(run for run in job.runs if run.index == index)
        session += 1


def _train(job: TrainingJob, run: RunSpec, ctx, feed, strategy, session: int, scratch: str) -> dict:
    from .compiling import compile_model

    training.set_seed(job.model.flavour, run.seed)  # before a model function draws its initial weights
    with strategy.scope():
        model = build(job.model)
        keras = training.keras_of(model)
        compile_model(model, run.compile, keras)
    global_batch = run.batch_size * ctx.num_workers  # Keras treats a dataset's batch as the global batch
    to_keras = batch_mapper(job.layout)
    fed = feed.as_dataset(global_batch, all_epochs=True)
    train = feed.keeps_feed_order(fed.map(to_keras), fed)
    steps = feed.keras_steps_per_epoch(global_batch, strategy if ctx.num_workers > 1 else None)
    validation = None
    if job.validation:  # Keras runs it to its end each epoch: told so, it gives no "ran out of data" warning
        fed_validation = feed.as_dataset(global_batch, split="validation")
        validation = feed.keeps_feed_order(fed_validation.map(to_keras), fed_validation)
    private = lambda kind: tempfile.mkdtemp(prefix=f"{kind}-", dir=scratch)  # noqa: E731
    keeper, callbacks = training.run_callbacks(keras, run, ctx.is_chief, ctx.storage, private)
    callbacks.append(ctx.progress_callback())  # after the backup: a relaunch is fed only the epochs not done
    if job.epoch_gate and ctx.is_chief:  # after the report: the driver's word to go on, or stop here
        callbacks.append(training.epoch_gate(keras, ctx.mgr))
    model.fit(
        train,
        validation_data=validation,
        epochs=run.epochs,
        steps_per_epoch=steps,
        callbacks=callbacks,
        verbose=run.verbose if ctx.is_chief else 0,
        shuffle=False,  # the feed shuffles (cluster.train's shuffle); Keras 3 would warn it cannot
    )
    del train, validation
    _read_the_rest(feed, ctx, job.qname, session)
    with ctx.export_path(run.paths.export_path) as target:  # every node saves (MWMS); the chief keeps it
        save_keras_file(model, target)
    return training.finish(run, keeper, ctx.is_chief, ctx.storage)


def _read_the_rest(feed, ctx, qname: str, session: int) -> None:
    """Read the rows of this run that the fit left unread, so ``cluster.train`` can return: an
    early stop (e.g. Keras' EarlyStopping), or a resumed epoch the backup already held.

    Keras' iterator over the feed is gone once fit returns (collected below), so nothing else
    reads the run meanwhile; ``fit_ended`` then lets the driver's train call end even when
    validation epochs were left unread.
    """
    gc.collect()
    server = ctx.mgr  # the node's feed server (TensorFlowOnSpark's ctx.mgr)
    left = server.rows_left(qname, session) or 0
    while left > 0:
        if not feed.next_batch(min(left, DRAIN_ROWS)):
            break
        left = server.rows_left(qname, session) or 0
    server.fit_ended()
