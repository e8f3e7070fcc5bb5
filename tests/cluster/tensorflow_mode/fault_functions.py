"""``map_fun``s that inject faults into running TF nodes, for the reliability tests.

Each victim records when it injects its fault (``fault.json``: wall-clock time, pid) so the
test can measure how long the driver took to raise. Nodes that are not victims keep
"training" until sparkdl stops them; they give up by themselves after a bounded time so a
bug cannot leave them running forever.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import cluster_functions as cluster_fns
from node_functions import supervisor_pid, wait_for_file, write_whole

GIVE_UP_S = 120.0
STEP_S = 0.02


def _record(args, name: str, **fields) -> None:
    write_whole(Path(args["out"]) / f"{name}.json", json.dumps({"time": time.time(), "pid": os.getpid(), **fields}))


def _inject(args, ctx) -> None:
    fault = args["fault"]
    _record(args, "fault", fault=fault, node=f"{ctx.job_name}:{ctx.task_index}")
    if fault == "raise":
        raise RuntimeError(f"injected fault in {ctx.job_name}:{ctx.task_index} (sentinel c0ffee)")
    if fault == "exit":
        os._exit(1)
    if fault == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    if fault == "hang":
        stuck_inside_a_training_step()
    if fault == "hang_deaf":  # as a node wedged in C code, whose Python-level handlers never run
        signal.signal(signal.SIGUSR2, signal.SIG_IGN)
        stuck_inside_a_training_step()
    if fault == "hang_dies_dumping":  # as a node whose stack dump crashed it (seen once in CI)
        signal.signal(signal.SIGUSR2, _dump_a_little_then_crash)
        stuck_inside_a_training_step()


def _dump_a_little_then_crash(signum, frame) -> None:
    os.write(2, b"Thread 0x1 (partial stack dump, sentinel 7d1f)\n")
    os.kill(os.getpid(), signal.SIGSEGV)


def stuck_inside_a_training_step() -> None:
    """Sleep 'forever' (bounded), as a node wedged in a collective or an I/O call would."""
    time.sleep(GIVE_UP_S * 10)


def fault_during_training(args, ctx):
    """Train-like loop on every node; the node numbered ``args['victim']`` injects ``args['fault']``.

    InputMode.SPARK (``args['spark']``): the loop reads the feed, and the victim faults after
    its first batches. InputMode.TENSORFLOW: the loop heartbeats (``ctx.heartbeat()``).
    ``fault='none'`` injects nothing but writes ``ready-<node>.json`` once training is under
    way, for faults the test injects from outside (killing an executor JVM).
    """
    feed = ctx.get_data_feed() if args.get("spark") else None
    victim = ctx.executor_id == args["victim"]
    deadline = time.monotonic() + GIVE_UP_S
    steps = 0
    while time.monotonic() < deadline:
        if feed is not None:
            if feed.should_stop():
                return
            feed.next_batch(32)
        else:
            ctx.heartbeat()
            time.sleep(STEP_S)  # a stand-in for a training step
        steps += 1
        if steps == 5:
            _record(args, f"ready-{ctx.executor_id}", tf_pid=os.getpid(), supervisor_pid=supervisor_pid(ctx))
            if victim and args["fault"] != "none":
                _inject(args, ctx)


def raise_on_the_first_attempt(args, ctx):
    """Node ``args['victim']`` raises on attempt 0 once the other node is under way; on the relaunch
    every node records ``done-attempt<k>-node<N>.json`` and returns (pure Python: no TensorFlow)."""
    if ctx.attempt == 0:
        if ctx.executor_id == args["victim"]:
            wait_for_file(str(Path(args["out"], "other-started")), GIVE_UP_S)
            raise RuntimeError(f"injected fault in {ctx.job_name}:{ctx.task_index} on attempt 0 (sentinel 5eed)")
        Path(args["out"], "other-started").touch()
        stuck_inside_a_training_step()  # until the failure stops this node
    _record(args, f"done-attempt{ctx.attempt}-node{ctx.executor_id}")


def parameter_server_training(args, ctx):
    """ParameterServerStrategy: ps and worker serve; the chief trains long and marks when it started."""
    if ctx.job_name in ("ps", "worker"):
        _record(args, f"ready-{ctx.executor_id}", tf_pid=os.getpid(), job=ctx.job_name)
        ctx.serve()
        return
    import tensorflow as tf

    _, model, data = cluster_fns.parameter_server_model(0.01)

    class MarkTraining(tf.keras.callbacks.Callback):  # epoch-level: PSStrategy refuses batch hooks
        def on_epoch_end(self, epoch, logs=None):
            if epoch == 0:
                _record(args, "chief-training")

    # Short epochs: the test kills the ps once the first one ends, and waits for that.
    model.fit(data, epochs=4000, steps_per_epoch=5, verbose=0, callbacks=[MarkTraining()])


def resumable_fit(args, ctx):
    """MWMS model.fit with ``ctx.backup_and_restore``; on the first attempt worker:0 dies mid-training.

    Every node records the epoch it starts at on each attempt (``start-attempt<k>-node<N>.json``),
    so the test can see the relaunch resume from the saved epoch instead of epoch 0.
    """
    import tensorflow as tf

    _, model, dataset = cluster_fns.mwms_classifier(rows=256, hidden=8)
    fit_epochs = args["epochs"]
    if args.get("from_feed"):  # InputMode.SPARK: rows of 8 floats "x" and an int label "y"
        feed = ctx.get_data_feed()
        fit_epochs = feed.num_epochs  # what the feed says to give fit, as a user would
        record = {"epochs": feed.num_epochs, "first_epoch": feed.first_epoch}
        _record(args, f"plan-attempt{ctx.attempt}-node{ctx.executor_id}", **record)
        dataset = feed.as_dataset(64, features="x", label="y")
    crash_after = args["crash_after_epoch"]
    backup_dir = args["backup_dir"]

    class Observe(tf.keras.callbacks.Callback):
        started = None

        def on_epoch_begin(self, epoch, logs=None):
            if Observe.started is None:
                Observe.started = epoch
                keras = tf.keras.__name__.split(".")[0]  # the nodes' Keras: Keras 3 ("keras") unless chosen
                _record(args, f"start-attempt{ctx.attempt}-node{ctx.executor_id}", epoch=epoch, keras=keras)

        def on_epoch_end(self, epoch, logs=None):
            _record(args, f"epoch-attempt{ctx.attempt}-node{ctx.executor_id}", epoch=epoch)
            if ctx.attempt == 0 and epoch == crash_after and ctx.job_name == "worker":
                # Die only once the chief has backed up this epoch (bounded wait).
                _wait_for_epoch_record(args, f"epoch-attempt0-node{args['chief']}", epoch)
                _record(args, "fault", fault="exit", node=f"{ctx.job_name}:{ctx.task_index}")
                os._exit(1)

    # BackupAndRestore must run before Observe (and the driver's progress report) at each epoch
    # end, so the backup exists first.
    callbacks = [ctx.backup_and_restore(backup_dir), ctx.progress_callback(), Observe()]
    model.fit(dataset, epochs=fit_epochs, verbose=0, callbacks=callbacks)
    _record(args, f"done-attempt{ctx.attempt}-node{ctx.executor_id}")


def _wait_for_epoch_record(args, name: str, epoch: int, timeout_s: float = 60.0) -> None:
    """Poll (bounded) until another node recorded the end of ``epoch``."""
    path = Path(args["out"]) / f"{name}.json"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if json.loads(path.read_text())["epoch"] >= epoch:
                return
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.05)


def fit_without_backup(args, ctx):
    """MWMS model.fit from the feed with ``ctx.progress_callback()`` but no backup, so a relaunched
    fit starts again at epoch 0 with fresh weights. On attempt 0 worker:0 is SIGKILLed after the first
    batch of epoch ``args['crash_in_epoch']``.

    Each node records, per attempt, what the feed planned (``plan-attempt<k>-node<N>.json``) and what
    its fit ran (``fit-attempt<k>-node<N>.json``: each epoch's batches and loss; an epoch fed no rows
    runs none: Keras' "Your input ran out of data", which Keras 3 also says at every epoch end of a
    dataset of unknown length, so the batches tell)."""
    import tensorflow as tf

    _, model, _ = cluster_fns.mwms_classifier(rows=256, hidden=8)
    feed = ctx.get_data_feed()
    where = f"attempt{ctx.attempt}-node{ctx.executor_id}"
    _record(args, f"plan-{where}", epochs=feed.num_epochs, first_epoch=feed.first_epoch)
    dataset = feed.as_dataset(64, features="x", label="y")
    crash_in = args["crash_in_epoch"]
    ran: dict[int, dict] = {}

    class Observe(tf.keras.callbacks.Callback):
        epoch = 0

        def on_epoch_begin(self, epoch, logs=None):
            Observe.epoch = epoch
            ran[epoch] = {"batches": 0}

        def on_train_batch_end(self, batch, logs=None):
            ran[Observe.epoch]["batches"] += 1
            if ctx.attempt == 0 and ctx.job_name == "worker" and Observe.epoch == crash_in:
                _record(args, "fault", fault="sigkill", node=f"{ctx.job_name}:{ctx.task_index}")
                os.kill(os.getpid(), signal.SIGKILL)

        def on_epoch_end(self, epoch, logs=None):
            ran[epoch]["loss"] = float((logs or {}).get("loss", float("nan")))

    model.fit(dataset, epochs=feed.num_epochs, verbose=0, callbacks=[ctx.progress_callback(), Observe()])
    _record(args, f"fit-{where}", epochs={str(e): ran[e] for e in sorted(ran)})
