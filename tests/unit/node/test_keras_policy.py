"""Which Keras a node uses: legacy tf-keras by default, explained when it cannot work."""

import importlib.util

import pytest

from sparkdl.node import keras_policy
from sparkdl.node.keras_policy import (
    KERAS3_MWMS_WARNING,
    LEGACY_KERAS_ENV,
    failure_hint,
    legacy_keras_enabled,
    node_keras_env,
    startup_problems,
)

pytestmark = pytest.mark.timeout(60)

LEGACY_ON, LEGACY_OFF = {LEGACY_KERAS_ENV: "1"}, {LEGACY_KERAS_ENV: "0"}
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


def test_node_env_defaults_to_legacy_keras():
    assert node_keras_env({}, {}) == {LEGACY_KERAS_ENV: "1"}
    assert node_keras_env({"OTHER": "x"}, {"PATH": "/bin"}) == {LEGACY_KERAS_ENV: "1"}


@pytest.mark.parametrize(
    "user, inherited",
    [
        (LEGACY_OFF, {}),
        (LEGACY_ON, {}),
        ({}, LEGACY_OFF),
        ({}, {LEGACY_KERAS_ENV: ""}),
        (LEGACY_OFF, LEGACY_ON),
    ],
)
def test_node_env_respects_an_explicit_choice(user, inherited):
    assert node_keras_env(user, inherited) == {}


@pytest.mark.parametrize(
    "value, enabled",
    [
        ("1", True),
        ("true", True),
        (" TRUE ", True),
        ("yes", True),
        ("0", False),
        ("false", False),
        ("", False),
        ("no", False),
    ],
)
def test_legacy_keras_enabled(value, enabled):
    assert legacy_keras_enabled({LEGACY_KERAS_ENV: value}) is enabled


def test_legacy_keras_disabled_when_unset():
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


def test_keras3_with_several_workers_warns(tf_keras):
    tf_keras(False)  # tf_keras is irrelevant when legacy Keras is off
    warnings, error = startup_problems(LEGACY_OFF, 2)
    assert error is None
    assert len(warnings) == 1 and "keras-team/keras#20585" in warnings[0]


@pytest.mark.parametrize("env", [LEGACY_OFF, {}])
def test_keras3_with_one_worker_is_quiet(env):
    assert startup_problems(env, 1) == ([], None)


def test_failure_hint_only_for_keras3_multi_worker_keras_src_tracebacks():
    assert failure_hint(KERAS3_TRACEBACK, LEGACY_OFF, 2) == KERAS3_MWMS_WARNING
    assert failure_hint(KERAS3_TRACEBACK, {}, 3) == KERAS3_MWMS_WARNING
    assert failure_hint(KERAS3_TRACEBACK, LEGACY_ON, 2) == ""
    assert failure_hint(KERAS3_TRACEBACK, LEGACY_OFF, 1) == ""
    assert failure_hint("Traceback ...\nValueError: in user code", LEGACY_OFF, 2) == ""
