"""Which Keras a node uses, so ``MultiWorkerMirroredStrategy`` + ``model.fit`` just works.

TensorFlow 2.16+ ships Keras 3 as ``tf.keras``, and Keras 3's ``model.fit`` fails under
MultiWorkerMirroredStrategy (keras-team/keras#20585), while tf-keras (Keras 2) and custom
loops with ``strategy.run`` work. sparkdl therefore starts every node with
``TF_USE_LEGACY_KERAS=1`` (``tf.keras`` is then tf-keras) unless the user chose otherwise,
either in ``TFCluster.run(env=...)`` or in the executors' environment
(``spark.executorEnv.TF_USE_LEGACY_KERAS``).
"""

from __future__ import annotations

import importlib.util
from typing import Mapping

LEGACY_KERAS_ENV = "TF_USE_LEGACY_KERAS"

KERAS3_MWMS_WARNING = (
    "TF_USE_LEGACY_KERAS is off, so tf.keras is Keras 3, whose model.fit fails under "
    "MultiWorkerMirroredStrategy (keras-team/keras#20585). Use a custom training loop with "
    "strategy.run, or leave TF_USE_LEGACY_KERAS=1 (sparkdl's default) to train with tf-keras."
)


def legacy_keras_enabled(env: Mapping[str, str]) -> bool:
    """Whether ``env`` makes ``tf.keras`` resolve to tf-keras."""
    return env.get(LEGACY_KERAS_ENV, "").strip().lower() in ("1", "true", "yes")


def node_keras_env(user_env: Mapping[str, str], inherited: Mapping[str, str]) -> dict[str, str]:
    """The Keras-related variables to set in a node: legacy Keras unless explicitly chosen."""
    if LEGACY_KERAS_ENV in user_env or LEGACY_KERAS_ENV in inherited:
        return {}
    return {LEGACY_KERAS_ENV: "1"}


def startup_problems(env: Mapping[str, str], num_workers: int) -> tuple[list[str], str | None]:
    """``(warnings, error)`` about the Keras choice, checked in the node before ``map_fun`` runs."""
    warnings = []
    if legacy_keras_enabled(env):
        if importlib.util.find_spec("tf_keras") is None:
            return warnings, (
                "TF_USE_LEGACY_KERAS=1 but the tf-keras package is not installed on this "
                "executor: pip install 'tf-keras~=2.21.0' (it must match TensorFlow's version), "
                "or set TF_USE_LEGACY_KERAS=0 and train with a custom loop."
            )
    elif num_workers > 1:
        warnings.append(KERAS3_MWMS_WARNING)
    return warnings, None


def failure_hint(traceback_text: str, env: Mapping[str, str], num_workers: int) -> str:
    """A hint to append to a node failure that looks like the Keras 3 + MWMS problem."""
    if num_workers > 1 and not legacy_keras_enabled(env) and "keras/src/" in traceback_text:
        return KERAS3_MWMS_WARNING
    return ""
