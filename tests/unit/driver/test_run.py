"""``TFCluster.run``'s public signature: TensorFlowOnSpark's positional arguments as they were, sparkdl's
additions keyword-only, and nothing internal. Callers whose users name the node counts otherwise
(``KerasEstimator``) go through ``launch``, whose errors use their names."""

from __future__ import annotations

import inspect
import re

import pytest

from sparkdl import TFCluster
from sparkdl.common.errors import PreflightError
from sparkdl.driver import run as run_module
from sparkdl.storage import StoreSettings

pytestmark = pytest.mark.timeout(60)

#: TensorFlowOnSpark's ``TFCluster.run`` arguments, in its order.
TFOS_ARGUMENTS = [
    "sc",
    "map_fun",
    "tf_args",
    "num_executors",
    "num_ps",
    "tensorboard",
    "input_mode",
    "log_dir",
    "driver_ps_nodes",
    "master_node",
    "reservation_timeout",
    "queues",
    "eval_node",
    "release_port",
]


def test_run_keeps_tensorflowonspark_s_positional_arguments_and_takes_the_rest_by_keyword():
    parameters = inspect.signature(TFCluster.run).parameters
    positional = [p.name for p in parameters.values() if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
    assert positional == TFOS_ARGUMENTS
    additions = [p.name for p in parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY]
    assert len(positional) + len(additions) == len(parameters)
    assert {"num_gpus", "max_restarts", "min_executors", "return_results"} <= set(additions)
    assert not {"nodes_param", "min_nodes_param"} & set(parameters)  # internal: launch's CountNames


def test_every_addition_is_described_in_run_s_docstring():
    doc = inspect.getdoc(TFCluster.run)
    undocumented = [name for name in inspect.signature(TFCluster.run).parameters if not re.search(rf"``{name}\b", doc)]
    assert undocumented == []
    for group in ("Placement:", "Feeding:", "Recovery:", "Console:", "Results:"):
        assert f"\n{group} " in doc, group


class LocalSpark:
    """What ``run`` asks of Spark before its preflight refuses ``local[1]`` for two nodes."""

    connect = False
    master = "local[1]"
    sc = None

    def conf(self, key):
        return None

    def store_settings(self):
        return StoreSettings()


@pytest.mark.parametrize(
    ("names", "named"),
    [
        (run_module.CountNames(), "num_executors=2"),
        (run_module.CountNames("num_workers", "min_workers"), "num_workers=2"),
    ],
)
def test_launch_names_the_node_count_as_its_caller_does(monkeypatch, names, named):
    monkeypatch.setattr(run_module, "spark_access", lambda sc: LocalSpark())
    with pytest.raises(PreflightError, match=rf"^master 'local\[1\]' runs a single executor, but {named} TF nodes"):
        run_module.launch(names, None, print, {}, 2)


def test_run_itself_names_tensorflowonspark_s_argument(monkeypatch):
    monkeypatch.setattr(run_module, "spark_access", lambda sc: LocalSpark())
    with pytest.raises(PreflightError, match=r"but num_executors=2 TF nodes"):
        TFCluster.run(None, print, {}, 2)


def test_launch_takes_run_s_arguments_only():
    with pytest.raises(TypeError, match="nodes_param"):
        run_module.launch(run_module.CountNames(), None, print, {}, 2, nodes_param="num_workers")
