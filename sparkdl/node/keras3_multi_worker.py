"""Keras 3's ``fit``, ``evaluate`` and ``predict`` under MultiWorkerMirroredStrategy: where sparkdl changes Keras.

Keras 3's TensorFlow trainer (``keras/src/backend/tensorflow/trainer.py``) has never run
multi-worker (keras-team/keras#20585), and its callbacks do not know about workers. On every node
of a cluster with more than one worker where Keras 3 is installed (``import keras`` is Keras 3 even
where ``TF_USE_LEGACY_KERAS=1`` makes ``tf.keras`` tf-keras), :func:`install` replaces four
behaviours, each only where MultiWorkerMirroredStrategy spans several workers (one process, one
worker, and tf-keras are untouched):

1. ``TensorFlowTrainer._maybe_symbolic_build`` takes the first batch of the distributed dataset and
   ``strategy.reduce("MEAN", batch, axis=None)``s it, only to learn its shapes and dtypes. Under
   MWMS that is a collective on the data (``ValueError: Attempt to convert a value
   (PerReplica...)``), and even where it works the batch is consumed from the iterator and lost: a
   sparkdl feed is read once, so a row would never be trained. The replacement builds the model
   from the dataset's ``element_spec`` (all ``_symbolic_build`` reads is shapes and dtypes), and
   consumes nothing.
2. ``reduce_per_replica`` (the step outputs: loss and metric values) reduces every output with
   ``strategy.reduce("MEAN", v, axis=0)``, which fails on scalars (``Invalid reduction dimension 0
   for input with 0 dimensions``) and collapses a vector metric's values (``F1Score(average=None)``).
   The replacement takes the element-wise mean over all replicas (``axis=None``), as one process's
   Keras does over its local ones, so every worker's batch logs are the same.
   The epoch's logs need no change: Keras reads them from its metrics' ``SUM`` ``ON_READ``
   variables, which MWMS all-reduces, so History holds the global values, equal on every worker.
3. ``BackupAndRestore`` writes ``latest.weights.h5`` and ``training_metadata.json`` into its
   ``backup_dir`` on every worker: with a directory every node sees (what a relaunch needs), the
   workers would write the same files at once. The chief writes them; every other worker saves to
   a private scratch directory that it then deletes (it still saves, at the chief's pace: reading
   a variable that is synchronized on read would take part in the workers' collectives). Every
   worker restores from the chief's files, so ``backup_dir`` must be storage every node sees
   (``ctx.backup_and_restore`` qualifies it), and only the chief deletes them at the end of ``fit``
   (``delete_checkpoint``): a worker that ends first would delete them under the chief's last save.
4. ``ModelCheckpoint`` likewise: the chief writes ``filepath``, every other worker a scratch copy
   that it deletes after each save.

One more change concerns only the datasets ``feed.as_dataset`` returns (``feed/dataset.py``,
``FeedDataset``), on any strategy; :func:`install_feed_hints` installs it alone on every other
node with Keras 3 (one worker, or none under a strategy), so no node warns about its feed:

5. ``EpochIterator`` (each ``fit``, ``evaluate`` and ``predict``) gets ``shuffle=False`` for a feed
   the driver shuffles (``cluster.train(shuffle=True)``, the default). ``fit``'s own default,
   ``shuffle=True``, otherwise warns on every node that it is ignored: the feed shuffles instead.
   And it does not warn "Your input ran out of data; interrupting training" when no
   ``steps_per_epoch`` was given. A feed's dataset does not know its length (under
   MultiWorkerMirroredStrategy a worker's steps per epoch are its batches split over the
   workers), so Keras runs each epoch to its end: that is how it learns the length, and nothing is
   interrupted. Keras 3.16 warns only where ``steps_per_epoch`` was given (keras-team/keras#23360);
   with it given, the warning stays.

Other Keras 3 callbacks that write files (``TensorBoard``, ``CSVLogger``) know nothing of workers
either: give them to the chief only (``ctx.is_chief``); they run no collectives. Set
``TF_USE_LEGACY_KERAS`` outside ``map_fun`` (``TFCluster.run(env=...)``, the driver's or the
executors' environment): TensorFlow and Keras are imported before ``map_fun`` runs.

Keras 3's trainer has no ParameterServerStrategy support at all (tf-keras drove it with a
``ClusterCoordinator``): ``fit``, ``evaluate`` and ``predict`` under it raise
:class:`ParameterServerUnsupported` at once, saying what to use instead, rather than fail deep inside.

Only the Keras releases listed in :data:`VERIFIED_RELEASES` were checked (two workers reach the
weights of one process trained on the same global batches, History equal on every worker); on
another release :func:`unverified_problem` says so, and the node refuses to start rather than risk
a wrong result.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from typing import Any

#: Keras 3 ``(major, minor)`` releases this layer was verified on (all their patch releases).
VERIFIED_RELEASES = ((3, 15),)

#: Set on each function this module installs, so a second ``install`` changes nothing.
_MARK = "_sparkdl_multi_worker"

PARAMETER_SERVER_MESSAGE = (
    "Keras 3's model.{method} does not support ParameterServerStrategy (its TensorFlow trainer has no "
    "ClusterCoordinator support). Train with tf-keras (TFCluster.run(..., env={{'TF_USE_LEGACY_KERAS': '1'}}) "
    "and tf.keras in map_fun), with MultiWorkerMirroredStrategy, or with a custom loop driven by "
    "tf.distribute.experimental.coordinator.ClusterCoordinator."
)


class ParameterServerUnsupported(ValueError):
    """Keras 3's ``fit``/``evaluate``/``predict`` was called under ParameterServerStrategy."""


def verified(version: str) -> bool:
    """Whether Keras ``version`` (e.g. ``"3.15.1"``) is a release this layer was verified on."""
    try:
        major_minor = tuple(int(part) for part in version.split(".")[:2])
    except ValueError:
        return False
    return major_minor in VERIFIED_RELEASES


def unverified_problem(version: str) -> str | None:
    """None for a verified Keras ``version``; else the error a multi-worker node starts with."""
    if verified(version):
        return None
    releases = ", ".join(f"{major}.{minor}.x" for major, minor in VERIFIED_RELEASES)
    newest = max(VERIFIED_RELEASES)
    return (
        f"Keras {version} is installed on this executor, but sparkdl's support for Keras 3's model.fit under "
        f"MultiWorkerMirroredStrategy was verified only on Keras {releases}, and Keras 3's own trainer fails "
        f"multi-worker (keras-team/keras#20585). Install a verified Keras (pip install "
        f"'keras>={newest[0]}.{newest[1]},<{newest[0]}.{newest[1] + 1}'), or train with tf-keras "
        "(TFCluster.run(..., env={'TF_USE_LEGACY_KERAS': '1'}) and tf.keras or tf_keras in map_fun), or, for a "
        "custom training loop that never calls model.fit/evaluate/predict, set SPARKDL_KERAS3_MULTI_WORKER=0."
    )


def install() -> None:
    """Replace the five Keras 3 behaviours the module docstring lists (idempotent)."""
    from keras.callbacks import BackupAndRestore, ModelCheckpoint
    from keras.src.backend.tensorflow import trainer

    _replace(trainer.TensorFlowTrainer, "_maybe_symbolic_build", _symbolic_build_from_spec)
    for method in ("fit", "evaluate", "predict"):
        _replace(trainer.TensorFlowTrainer, method, _refused_under_parameter_servers)
    if not getattr(trainer.reduce_per_replica, _MARK, False):
        trainer.reduce_per_replica = _mark(_mean_across_replicas(trainer.reduce_per_replica))
    _replace(BackupAndRestore, "_save_model", _chief_writes_backup)
    _replace(BackupAndRestore, "on_train_end", _chief_deletes_backup)
    _replace(ModelCheckpoint, "_save_model", _chief_writes_checkpoint)
    install_feed_hints()


def install_feed_hints() -> None:
    """Replace only behaviour 5 (what Keras is told about a feed's dataset; idempotent)."""
    from keras.src.trainers.epoch_iterator import EpochIterator

    _replace(EpochIterator, "__init__", _told_about_feeds)


def _replace(cls: type, name: str, make) -> None:
    original = getattr(cls, name)
    if not getattr(original, _MARK, False):
        setattr(cls, name, _mark(make(original)))


def _mark(function):
    setattr(function, _MARK, True)
    return function


def _multi_worker(strategy) -> bool:
    import tensorflow as tf

    return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) and strategy.extended._in_multi_worker_mode()


def _refused_under_parameter_servers(original):
    @functools.wraps(original)
    def method(self, *args, **kwargs):
        import tensorflow as tf

        if isinstance(self.distribute_strategy, tf.distribute.experimental.ParameterServerStrategy):
            raise ParameterServerUnsupported(PARAMETER_SERVER_MESSAGE.format(method=original.__name__))
        return original(self, *args, **kwargs)

    return method


def _symbolic_build_from_spec(original):
    @functools.wraps(original)
    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        strategy = self._distribute_strategy
        if iterator is None or strategy is None or not _multi_worker(strategy):
            return original(self, iterator=iterator, data_batch=data_batch)
        with strategy.scope():
            self._symbolic_build(data_batch=_spec_batch(iterator._distributed_dataset.element_spec))

    return _maybe_symbolic_build


def _spec_batch(element_spec):
    """A stand-in batch with the shapes and dtypes of ``element_spec`` (what ``_symbolic_build`` reads)."""
    import tensorflow as tf
    from keras.src import tree
    from tensorflow.python.distribute.values import PerReplicaSpec  # what MWMS wraps each element in

    def stand_in(spec):
        if isinstance(spec, PerReplicaSpec):  # one spec per local replica, all alike
            spec = spec._value_specs[0]
        if isinstance(spec, tf.OptionalSpec):  # an absent part (e.g. no sample weights): None to Keras
            return None
        return spec

    return tree.map_structure(stand_in, element_spec)


def _mean_across_replicas(original):
    @functools.wraps(original)
    def reduce_per_replica(values, strategy, reduction):
        if reduction not in ("auto", "mean") or not _multi_worker(strategy):
            return original(values, strategy, reduction)
        from keras.src import tree

        # The element-wise mean over every replica of every worker, what one process's Keras
        # computes over its local replicas (tf.reduce_mean(local results, axis=0)).
        return tree.map_structure(lambda value: strategy.reduce("MEAN", value, axis=None), values)

    return reduce_per_replica


def _is_chief(strategy) -> bool:
    return not _multi_worker(strategy) or strategy.extended.should_checkpoint


def _chief_writes_backup(original):
    @functools.wraps(original)
    def _save_model(self):
        if _is_chief(self.model.distribute_strategy):
            return original(self)
        paths = (
            "backup_dir",
            "_weights_path",
            "_training_metadata_path",
            "_prev_weights_path",
            "_prev_training_metadata_path",
        )
        shared = {name: getattr(self, name) for name in paths}
        scratch = tempfile.mkdtemp(prefix="sparkdl-worker-backup-")
        try:
            for name, path in shared.items():
                setattr(self, name, scratch if name == "backup_dir" else os.path.join(scratch, os.path.basename(path)))
            return original(self)
        finally:
            for name, path in shared.items():
                setattr(self, name, path)
            shutil.rmtree(scratch, ignore_errors=True)

    return _save_model


def _chief_deletes_backup(original):
    @functools.wraps(original)
    def on_train_end(self, logs=None):
        if _is_chief(self.model.distribute_strategy):
            return original(self, logs)
        return None  # the chief's backup is the chief's to delete (a worker that ends first would race it)

    return on_train_end


def _chief_writes_checkpoint(original):
    @functools.wraps(original)
    def _save_model(self, *args: Any, **kwargs: Any):
        if _is_chief(self.model.distribute_strategy):
            return original(self, *args, **kwargs)
        shared = self.filepath
        scratch = tempfile.mkdtemp(prefix="sparkdl-worker-checkpoint-")
        self.filepath = os.path.join(scratch, os.path.basename(shared))  # its {epoch} etc. still filled in
        try:
            return original(self, *args, **kwargs)
        finally:
            self.filepath = shared
            shutil.rmtree(scratch, ignore_errors=True)

    return _save_model


def _told_about_feeds(original):
    from ..feed.dataset import feed_dataset  # here: the driver's checks import this module, without a feed

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        feed = feed_dataset(kwargs["x"] if "x" in kwargs else args[0] if args else None)
        if feed is not None and feed.shuffled and kwargs.get("shuffle"):
            kwargs["shuffle"] = False  # the feed shuffles: Keras would warn that it ignores shuffle=True
        original(self, *args, **kwargs)
        if feed is not None and not self.steps_per_epoch:
            self._interrupted_warning = _length_learned  # this instance only; Keras' own warning otherwise

    return __init__


def _length_learned() -> None:
    """An epoch of unknown length ran to its end, which is how Keras learns the length: no warning."""
