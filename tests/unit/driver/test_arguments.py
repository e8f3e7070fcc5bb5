"""``cluster.train``'s and ``cluster.inference``'s feed arguments are checked on the driver before
anything runs: a ``qname`` becomes part of file names on the nodes, a ``seed`` and a
``feed_timeout`` travel in control messages that the nodes refuse out of range."""

from __future__ import annotations

import numpy as np
import pytest

from sparkdl.driver import arguments


@pytest.mark.parametrize("seed", [None, 0, 7, 2**63 - 1, np.int64(3)])
def test_a_seed_is_none_or_a_non_negative_64_bit_integer(seed):
    arguments.check_feed_arguments("input", 600, seed)


@pytest.mark.parametrize("seed", [-1, True, False, 1.5, 2.0, "7", 2**63])
def test_any_other_seed_is_refused_naming_seed(seed):
    with pytest.raises(ValueError, match=r"^seed must be .*got"):
        arguments.check_feed_arguments("input", 600, seed)


@pytest.mark.parametrize("qname", ["input", "Q_2", "a.b-c", "x" * 64, "0", "_"])
def test_a_file_name_safe_qname_is_accepted(qname):
    arguments.check_feed_arguments(qname, 600)


@pytest.mark.parametrize(
    "qname",
    ["", ".", "..", ".hidden", "../etc", "a/b", "a\\b", "a b", "a\nb", "a\x00b", "é", "x" * 65, None, 3, b"input"],
)
def test_a_qname_that_could_leave_its_file_name_is_refused_naming_qname(qname):
    with pytest.raises(ValueError, match=r"^qname must be .*got"):
        arguments.check_feed_arguments(qname, 600)


@pytest.mark.parametrize("feed_timeout", [0, -1, float("nan"), float("inf"), True, "600", None])
def test_a_feed_timeout_must_be_positive_and_finite(feed_timeout):
    with pytest.raises(ValueError, match=r"^feed_timeout must be .*got"):
        arguments.check_feed_arguments("input", feed_timeout)


def test_run_s_settings_are_checked_once_by_keyword_and_in_groups():
    """``TFCluster.run``'s arguments keep TensorFlowOnSpark's signature; inside they become a
    ``ClusterLayout`` and ``RunLimits``, each checked once, when built, naming the argument."""
    from sparkdl.common.roles import ClusterLayout

    layout = ClusterLayout(num_executors=3, num_ps=1, driver_ps_nodes=True)
    limits = arguments.RunLimits(max_restarts=1)
    with pytest.raises(ValueError, match="^max_restarts cannot relaunch ps nodes hosted by the driver"):
        arguments.check_run(print, arguments.InputMode.TENSORFLOW, layout, limits)
    with pytest.raises(ValueError, match="^eval_node=True is not supported"):
        arguments.check_run(print, arguments.InputMode.SPARK, ClusterLayout(num_executors=2, eval_node=True), limits)
    with pytest.raises(ValueError, match="^map_fun must be callable"):
        arguments.check_run(None, arguments.InputMode.SPARK, ClusterLayout(num_executors=1), limits)
    for name, value in [
        ("reservation_timeout", 0),
        ("stall_timeout", -1),
        ("max_restarts", 1.5),
        ("max_lost_executor_relaunches", -1),
        ("keep_node_files_days", 0),
        ("num_gpus", -1),
    ]:
        with pytest.raises(ValueError, match=f"^{name} must be"):
            arguments.RunLimits(**{name: value})
    with pytest.raises(TypeError):
        arguments.RunLimits(600)  # keyword only
