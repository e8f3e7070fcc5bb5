"""Which Keras a node uses (the driver's: Keras 3 unless TF_USE_LEGACY_KERAS=1), and what it checks at start."""

import importlib.util

import pytest

from sparkdl.node import keras_policy
from sparkdl.node.keras_policy import (
    KERAS3_OFF_HINT,
    LEGACY_KERAS_ENV,
    MULTI_WORKER_ENV,
    cluster_env,
    failure_hint,
    legacy_keras_enabled,
    startup_problems,
)

pytestmark = pytest.mark.timeout(60)


LEGACY_ON, LEGACY_OFF = {LEGACY_KERAS_ENV: "1"}, {LEGACY_KERAS_ENV: "0"}


LAYER_OFF = {MULTI_WORKER_ENV: "0"}


KERAS3_TRACEBACK = 'File ".../site-packages/keras/src/trainers/trainer.py", line 1, in fit\nValueError: boom'


@pytest.fixture
def tf_keras(monkeypatch):
    """Pretend tf_keras is (True) or is not (False) importable, leaving other modules alone."""
    real = importlib.util.find_spec

    def install(present):
        def find_spec(name, *args, **kwargs):
            if name == "tf_keras":
                return real("json") if present else None  # any non-None spec will do
            return real(name, *args, **kwargs)

        monkeypatch.setattr(keras_policy.importlib.util, "find_spec", find_spec)

    return install


@pytest.fixture
def keras_version(monkeypatch):
    """Pretend the installed Keras 3 has another version (the check reads the distribution's metadata)."""
    import importlib.metadata

    real = importlib.metadata.version

    def install(version):
        monkeypatch.setattr(importlib.metadata, "version", lambda name: version if name == "keras" else real(name))

    return install


def test_nodes_get_the_drivers_keras_unless_the_user_chose():
    assert cluster_env({}, {}) == {}  # TensorFlow's default: Keras 3
    assert cluster_env({"OTHER": "x"}, {LEGACY_KERAS_ENV: "1"}) == {"OTHER": "x", LEGACY_KERAS_ENV: "1"}
    assert cluster_env(LEGACY_OFF, LEGACY_ON) == LEGACY_OFF  # TFCluster.run(env=...) wins
    assert cluster_env({}, {"PATH": "/bin"}) == {}


@pytest.mark.parametrize(
    "value, enabled",
    [("1", True), ("true", True), ("True", True), (" TRUE ", False), ("yes", False), ("0", False), ("", False)],
)
def test_legacy_keras_enabled_exactly_where_tensorflow_is(value, enabled):
    """TensorFlow reads exactly "true", "True" and "1" (tensorflow/python/util/lazy_loader.py)."""
    assert legacy_keras_enabled({LEGACY_KERAS_ENV: value}) is enabled
    assert legacy_keras_enabled({}) is False


@pytest.mark.parametrize("workers", [1, 4])
def test_legacy_with_tf_keras_installed_is_fine(tf_keras, workers):
    tf_keras(True)
    assert startup_problems(LEGACY_ON, workers) == ([], None)


def test_legacy_without_tf_keras_is_an_error(tf_keras):
    tf_keras(False)
    warnings, error = startup_problems(LEGACY_ON, 2)
    assert warnings == []
    assert error and "tf-keras" in error and "pip install" in error


@pytest.mark.parametrize("env", [LEGACY_OFF, {}])
def test_a_verified_keras3_on_several_workers_starts_quietly(env, keras_version):
    keras_version("3.15.1")
    assert startup_problems(env, 2) == ([], None)


@pytest.mark.parametrize("version", ["3.16.0", "3.14.2", "4.0.0", "3.15rc-odd"])
def test_an_unverified_keras3_on_several_workers_fails_at_node_start_naming_the_version(version, keras_version):
    keras_version(version)
    warnings, error = startup_problems({}, 2)
    assert warnings == []
    assert f"Keras {version} is installed" in error
    assert "verified only on Keras 3.15.x" in error and "pip install 'keras>=3.15,<3.16'" in error
    assert "TF_USE_LEGACY_KERAS': '1'" in error and f"{MULTI_WORKER_ENV}=0" in error
    assert startup_problems({}, 1) == ([], None), "one worker needs no change of Keras"
    assert startup_problems(LAYER_OFF, 2) == ([KERAS3_OFF_HINT], None), "the user turned the layer off"


def test_a_keras_module_without_its_distributions_metadata_is_unverified(monkeypatch):
    import importlib.metadata

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    warnings, error = startup_problems({}, 2)
    assert "Keras of unknown version is installed" in error


def test_failure_hint_only_where_the_layer_was_turned_off():
    assert failure_hint(KERAS3_TRACEBACK, LAYER_OFF, 2) == KERAS3_OFF_HINT
    assert failure_hint(KERAS3_TRACEBACK, {}, 2) == ""
    assert failure_hint(KERAS3_TRACEBACK, {**LAYER_OFF, **LEGACY_ON}, 2) == ""
    assert failure_hint(KERAS3_TRACEBACK, LAYER_OFF, 1) == ""
    assert failure_hint("Traceback ...\nValueError: in user code", LAYER_OFF, 2) == ""
