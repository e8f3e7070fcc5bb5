"""Which Keras a node uses, and what that Keras needs before ``map_fun`` runs.

A node's Keras is the one the user's own code gets on one machine. On TensorFlow 2.16+ that is
Keras 3 (``import keras``, and ``tf.keras`` too) unless ``TF_USE_LEGACY_KERAS=1`` makes
``tf.keras`` the legacy tf-keras package. sparkdl forces neither: the choice is read, in this
order, from ``TFCluster.run(env=...)``, the driver's environment (what the user's code there gets:
``TFCluster.run`` carries it to the nodes, :func:`cluster_env`), and the executors' environment
(``spark.executorEnv.TF_USE_LEGACY_KERAS``).

Keras 3's ``model.fit`` does not run under MultiWorkerMirroredStrategy on its own
(keras-team/keras#20585): on every node of a cluster with several workers where Keras 3 is
installed, :func:`prepare_node` installs ``keras3_multi_worker`` (the one place sparkdl changes
Keras 3; tf-keras needs nothing). Where the node's Keras is Keras 3, an unverified release refuses
to start; on a tf-keras node (where ``import keras`` still gives Keras 3) it is only left alone.

A node that fails on Keras 3 refusing Keras 2 code (``keras2_code``) gets a hint naming
``TF_USE_LEGACY_KERAS=1``, which runs that code unchanged (:func:`failure_hint`).
"""

from __future__ import annotations

import importlib.util
from typing import Mapping

from . import keras2_code

LEGACY_KERAS_ENV = "TF_USE_LEGACY_KERAS"
#: ``SPARKDL_KERAS3_MULTI_WORKER=0`` leaves Keras 3 as it is (a custom loop that never calls fit).
MULTI_WORKER_ENV = "SPARKDL_KERAS3_MULTI_WORKER"

KERAS3_OFF_HINT = (
    f"{MULTI_WORKER_ENV}=0 leaves Keras 3 unchanged, and Keras 3's own model.fit fails under "
    "MultiWorkerMirroredStrategy (keras-team/keras#20585): unset it to let sparkdl make fit/evaluate/predict "
    f"work on several workers, or set {LEGACY_KERAS_ENV}=1 to train with tf-keras."
)
#: Appended to a node failure where Keras 3 refused Keras 2 code (``keras2_code``), the node on Keras 3.
KERAS2_CODE_HINT = (
    "This node runs Keras 3 (TensorFlow 2.16+ ships it as tf.keras), and Keras 3 refused Keras 2 code. "
    f"Keras 2 code that uses tf.keras runs unchanged with {LEGACY_KERAS_ENV}=1: pass "
    f"env={{'{LEGACY_KERAS_ENV}': '1'}} to TFCluster.run, or set it in the driver's or the executors' environment. "
    "The executors then need tf-keras (the sparkdl-tf[tf-keras] extra). "
    "`import keras` stays Keras 3: use `import tf_keras as keras`. "
    "Or port the code to Keras 3 (sparkdl's docs/migration.md)."
)
#: The same, on a node where TF_USE_LEGACY_KERAS=1 already made tf.keras tf-keras.
KERAS2_CODE_LEGACY_HINT = (
    f"Keras 3 refused Keras 2 code. {LEGACY_KERAS_ENV}=1 makes only tf.keras tf-keras (Keras 2): "
    "`import keras` stays Keras 3. Use tf.keras or `import tf_keras as keras` in this code, "
    "or port it to Keras 3 (sparkdl's docs/migration.md)."
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
                "executor: install the sparkdl-tf[tf-keras] extra (tf-keras must match TensorFlow's version; "
                "a bare `pip install tf-keras` beside tensorflow-cpu adds a second TensorFlow), "
                "or unset TF_USE_LEGACY_KERAS to train with Keras 3."
            )
        return [], None  # tf.keras is tf-keras: an unverified Keras 3 (import keras) is left alone
    if num_workers > 1 and not _keras3_layer_on(env) and importlib.util.find_spec("keras") is not None:
        return [KERAS3_OFF_HINT], None
    if not _needs_keras3_layer(env, num_workers):
        return [], None
    from . import keras3_multi_worker

    return [], keras3_multi_worker.unverified_problem(_keras_version())


def prepare_node(env: Mapping[str, str], num_workers: int) -> tuple[list[str], str | None]:
    """Check the node's Keras (``startup_problems``) and, on several workers, install
    ``keras3_multi_worker`` wherever Keras 3 is installed: also on tf-keras nodes, where ``import
    keras`` still gives Keras 3 (there only on a verified release); on one worker, only its
    feed-dataset change. Returns ``(warnings, error)``."""
    warnings, error = startup_problems(env, num_workers)
    if error is None and _keras3_layer_on(env) and importlib.util.find_spec("keras") is not None:
        from . import keras3_multi_worker

        if keras3_multi_worker.verified(_keras_version()):
            if num_workers > 1:
                keras3_multi_worker.install()
            else:  # one worker: only what Keras is told about the feed's datasets (no false warnings)
                keras3_multi_worker.install_feed_hints()
    return warnings, error


def _needs_keras3_layer(env: Mapping[str, str], num_workers: int) -> bool:
    return num_workers > 1 and _keras3_layer_on(env) and importlib.util.find_spec("keras") is not None


def _keras_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("keras")
    except PackageNotFoundError:  # a keras module without the keras distribution (keras-nightly...)
        return "of unknown version"


def failure_hint(traceback_text: str, env: Mapping[str, str], num_workers: int) -> str:
    """A hint to append to a node failure: Keras 3 refusing Keras 2 code, or (the multi-worker
    layer turned off) what looks like Keras 3's own multi-worker problem; else ""."""
    if keras2_code.is_keras2_code_error(traceback_text):
        return KERAS2_CODE_LEGACY_HINT if legacy_keras_enabled(env) else KERAS2_CODE_HINT
    if (
        num_workers > 1
        and not legacy_keras_enabled(env)
        and not _keras3_layer_on(env)
        and "keras/src/" in traceback_text
    ):
        return KERAS3_OFF_HINT
    return ""
