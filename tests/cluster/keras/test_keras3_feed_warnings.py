"""Keras 3's ``model.fit`` on a feed's ``as_dataset`` (a real feed server, in this process) warns
nothing about it, and trains every epoch whole: ``node/keras3_multi_worker.py`` tells Keras that the
feed shuffles, and that an epoch of unknown length ends where the feed ends it. Every other dataset,
and a ``steps_per_epoch`` the data cannot fill, keep Keras' own warnings."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from feed_servers import driver_send, feed_rows, make_server, secret, server, target  # noqa: F401 - fixtures

from sparkdl.feed.data_feed import DataFeed
from sparkdl.transport import protocol

pytestmark = [pytest.mark.timeout(180), pytest.mark.cluster]  # imports TensorFlow and Keras

ROWS, BATCH, EPOCHS = 96, 32, 3
#: The two warnings Keras 3.15 gives on every node for a feed's dataset (left alone, as a substring of each).
SHUFFLE_IGNORED = "`shuffle=True` was passed, but will be ignored"
RAN_OUT = "Your input ran out of data"


def _feed(server, secret, shuffle: bool) -> DataFeed:  # noqa: F811 - the fixtures, passed on
    """A node's feed holding a training run of ``EPOCHS`` epochs of ``ROWS`` rows, as the driver plans and feeds it."""
    plan = protocol.TrainingPlan(
        session=1, epochs=EPOCHS, rows_per_epoch=ROWS, cache=False, shuffle=shuffle, seed=7 if shuffle else None
    )
    driver_send(server, secret, protocol.Plan(plan).wire())
    rng = np.random.default_rng(0)
    x = rng.normal(size=(ROWS, 4)).astype("float32")
    rows = [(features, float(features.sum() > 0)) for features in x]
    tgt = target(secret, server)
    for epoch in range(EPOCHS):
        feed_rows(tgt, rows, epoch=epoch)
    return DataFeed(server, feed_timeout=30)


def _fit(dataset, **fit_args) -> tuple[list[str], list[int]]:
    """Keras 3's ``model.fit(dataset, epochs=EPOCHS)`` with sparkdl's changes installed: every
    warning it gives, and the steps of each epoch."""
    import keras

    from sparkdl.node import keras3_multi_worker

    keras3_multi_worker.install()
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, "sigmoid")])
    model.compile("sgd", "binary_crossentropy")
    steps: list[int] = []
    count = keras.callbacks.LambdaCallback(
        on_epoch_begin=lambda epoch, logs: steps.append(0),
        on_train_batch_end=lambda batch, logs: steps.__setitem__(-1, steps[-1] + 1),
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(dataset, epochs=EPOCHS, verbose=0, callbacks=[count], **fit_args)
    return [str(warning.message) for warning in caught], steps


def _keras_warnings(caught: list[str]) -> list[str]:
    return [message for message in caught if SHUFFLE_IGNORED in message or RAN_OUT in message]


def test_a_shuffled_feeds_dataset_trains_every_epoch_whole_without_a_keras_warning(server, secret):  # noqa: F811
    feed = _feed(server, secret, shuffle=True)
    caught, steps = _fit(feed.as_dataset(BATCH, features=0, label=1))
    assert _keras_warnings(caught) == [], caught
    assert steps == [ROWS // BATCH] * EPOCHS


def test_an_unshuffled_feed_and_other_datasets_keep_keras_warnings(server, secret):  # noqa: F811
    feed = _feed(server, secret, shuffle=False)
    dataset = feed.as_dataset(BATCH, features=0, label=1)
    caught, steps = _fit(dataset)
    # cluster.train(shuffle=False): the rows come in Spark's order, and fit's shuffle=True is ignored
    assert [m for m in _keras_warnings(caught) if SHUFFLE_IGNORED in m] and not [m for m in caught if RAN_OUT in m]
    assert steps == [ROWS // BATCH] * EPOCHS
    # the user's own dataset of unknown length: Keras' own warnings, both
    import tensorflow as tf

    x, y = np.ones((ROWS, 4), "float32"), np.ones(ROWS, "float32")
    own = tf.data.Dataset.from_generator(
        lambda: ((x[i : i + BATCH], y[i : i + BATCH]) for i in range(0, ROWS, BATCH)),
        output_signature=(tf.TensorSpec((None, 4), tf.float32), tf.TensorSpec((None,), tf.float32)),
    )
    caught, _ = _fit(own)
    assert any(SHUFFLE_IGNORED in m for m in caught) and any(RAN_OUT in m for m in caught), caught


def test_a_steps_per_epoch_the_feed_cannot_fill_still_warns(server, secret):  # noqa: F811
    feed = _feed(server, secret, shuffle=True)
    dataset = feed.as_dataset(BATCH, features=0, label=1, all_epochs=True)
    caught, _ = _fit(dataset, steps_per_epoch=ROWS // BATCH + 1)
    assert any(RAN_OUT in m for m in caught), caught


def test_a_one_worker_node_gets_the_feed_change_alone():
    """A one-worker node (one TF node, or none under a strategy) gets only what Keras is told about
    the feed's datasets: its quickstart warns nothing either, and Keras' trainer stays as it is."""
    import subprocess
    import sys

    probe = (
        "from sparkdl.node import keras_policy\n"
        "assert keras_policy.prepare_node({}, 1) == ([], None)\n"
        "from keras.src.backend.tensorflow import trainer\n"
        "from keras.src.trainers.epoch_iterator import EpochIterator\n"
        "print(hasattr(EpochIterator.__init__, '__wrapped__'),"
        " hasattr(trainer.TensorFlowTrainer._maybe_symbolic_build, '__wrapped__'))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split()[-2:] == ["True", "False"], out.stdout + out.stderr
