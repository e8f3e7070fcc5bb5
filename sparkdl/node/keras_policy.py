"""Which Keras a node uses, and what that Keras needs before ``map_fun`` runs.

A node's Keras is the one the user's own code gets on one machine. On TensorFlow 2.16+ that is
Keras 3 (``import keras``, and ``tf.keras`` too) unless ``TF_USE_LEGACY_KERAS=1`` makes
``tf.keras`` the legacy tf-keras package. sparkdl forces neither: the choice is read, in this
order, from ``TFCluster.run(env=...)``, the driver's environment (what the user's code there gets:
``TFCluster.run`` carries it to the nodes, :func:`cluster_env`), and the executors' environment
(``spark.executorEnv.TF_USE_LEGACY_KERAS``).

Keras 3's ``model.fit`` does not run under MultiWorkerMirroredStrategy on its own
(keras-team/keras#20585): on a node whose Keras is Keras 3 and whose cluster has several workers,
:func:`prepare_node` installs ``keras3_multi_worker`` (the one place sparkdl changes Keras), after
checking that the installed Keras is a release it was verified on. tf-keras needs nothing.
"""

from __future__ import annotations

import importlib.util
from typing import Mapping

LEGACY_KERAS_ENV = "TF_USE_LEGACY_KERAS"
#: ``SPARKDL_KERAS3_MULTI_WORKER=0`` leaves Keras 3 as it is (a custom loop that never calls fit).
MULTI_WORKER_ENV = "SPARKDL_KERAS3_MULTI_WORKER"

KERAS3_OFF_HINT = (
    f"{MULTI_WORKER_ENV}=0 leaves Keras 3 unchanged, and Keras 3's own model.fit fails under "
    "MultiWorkerMirroredStrategy (keras-team/keras#20585): unset it to let sparkdl make fit/evaluate/predict "
    f"work on several workers, or set {LEGACY_KERAS_ENV}=1 to train with tf-keras."
)


def legacy_keras_enabled(env: Mapping[str, str]) -> bool:
    """Whether ``env`` makes ``tf.keras`` resolve to tf-keras: exactly the values TensorFlow accepts."""
    return env.get(LEGACY_KERAS_ENV) in ("true", "True", "1")


def cluster_env(user_env: Mapping[str, str], driver_env: Mapping[str, str]) -> dict[str, str]:
    """The extra environment of a cluster's TF processes: ``user_env``, plus the driver's
    ``TF_USE_LEGACY_KERAS`` where the user gave none (the Keras the driver's own code gets)."""
    env = dict(user_env)
    if LEGACY_KERAS_ENV not in env and LEGACY_KERAS_ENV in driver_env:
        env[LEGACY_KERAS_ENV] = driver_env[LEGACY_KERAS_ENV]
    return env


def _keras3_layer_on(env: Mapping[str, str]) -> bool:
    return env.get(MULTI_WORKER_ENV, "1").strip() != "0"


def startup_problems(env: Mapping[str, str], num_workers: int) -> tuple[list[str], str | None]:
    """``(warnings, error)`` about the node's Keras, checked before ``map_fun`` runs (nothing imported)."""
    if legacy_keras_enabled(env):
        if importlib.util.find_spec("tf_keras") is None:
            return [], (
                "TF_USE_LEGACY_KERAS=1 but the tf-keras package is not installed on this "
                "executor: pip install 'tf-keras~=2.21.0' (it must match TensorFlow's version), "
                "or unset TF_USE_LEGACY_KERAS to train with Keras 3."
            )
        return [], None
    if num_workers > 1 and not _keras3_layer_on(env) and importlib.util.find_spec("keras") is not None:
        return [KERAS3_OFF_HINT], None
    if not _needs_keras3_layer(env, num_workers):
        return [], None
    from importlib.metadata import PackageNotFoundError, version

    from . import keras3_multi_worker

    try:
        installed = version("keras")
    except PackageNotFoundError:  # a keras module without the keras distribution (keras-nightly...)
        installed = "of unknown version"
    return [], keras3_multi_worker.unverified_problem(installed)


def prepare_node(env: Mapping[str, str], num_workers: int) -> tuple[list[str], str | None]:
    """Check the node's Keras (``startup_problems``) and, for Keras 3 on several workers, install
    ``keras3_multi_worker``; returns ``(warnings, error)``."""
    warnings, error = startup_problems(env, num_workers)
    if error is None and _needs_keras3_layer(env, num_workers):
        from . import keras3_multi_worker

        keras3_multi_worker.install()
    return warnings, error


def _needs_keras3_layer(env: Mapping[str, str], num_workers: int) -> bool:
    return (
        num_workers > 1
        and not legacy_keras_enabled(env)
        and _keras3_layer_on(env)
        and importlib.util.find_spec("keras") is not None
    )


def failure_hint(traceback_text: str, env: Mapping[str, str], num_workers: int) -> str:
    """A hint to append to a node failure that looks like Keras 3's own multi-worker problem."""
    if (
        num_workers > 1
        and not legacy_keras_enabled(env)
        and not _keras3_layer_on(env)
        and "keras/src/" in traceback_text
    ):
        return KERAS3_OFF_HINT
    return ""
