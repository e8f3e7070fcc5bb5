"""``TFCluster.run``'s arguments: the input modes, and the checks that run before anything starts."""

from __future__ import annotations

import numbers
import os
import re
from dataclasses import dataclass, replace

from ..common.roles import ClusterLayout
from ..common.timeouts import RESERVATION_TIMEOUT_S, check_feed_timeout
from ..transport.protocol import TrainingPlan
from .lifecycle import MAX_LOST_EXECUTOR_RELAUNCHES, NodeRange

#: A queue name as it may appear in the nodes' file names: no path separator, no leading dot.
_QNAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}")


class InputMode:
    """How nodes get their data (TensorFlowOnSpark's values)."""

    TENSORFLOW = 0  #: nodes read their own data (files, generators)
    SPARK = 1  #: Spark feeds RDD/DataFrame partitions to the nodes


@dataclass(frozen=True, kw_only=True)
class RunLimits:
    """``TFCluster.run``'s timeouts, counts and limits, checked once, when built (ValueError naming
    the argument)."""

    reservation_timeout: float = RESERVATION_TIMEOUT_S
    stall_timeout: float | None = None
    max_restarts: int = 0
    max_lost_executor_relaunches: int = MAX_LOST_EXECUTOR_RELAUNCHES
    keep_node_files_days: float | None = 7
    num_gpus: int | None = None

    def __post_init__(self) -> None:
        if not self.reservation_timeout or self.reservation_timeout <= 0:
            raise ValueError(f"reservation_timeout must be positive, got {self.reservation_timeout!r}")
        if self.stall_timeout is not None and not self.stall_timeout > 0:
            raise ValueError(f"stall_timeout must be positive seconds or None, got {self.stall_timeout!r}")
        if not isinstance(self.max_restarts, int) or self.max_restarts < 0:
            raise ValueError(f"max_restarts must be a non-negative integer, got {self.max_restarts!r}")
        budget = self.max_lost_executor_relaunches
        if not isinstance(budget, int) or isinstance(budget, bool) or budget < 0:
            raise ValueError(f"max_lost_executor_relaunches must be a non-negative integer, got {budget!r}")
        if self.keep_node_files_days is not None and not self.keep_node_files_days > 0:
            raise ValueError(f"keep_node_files_days must be positive days or None, got {self.keep_node_files_days!r}")
        if self.num_gpus is not None and (not isinstance(self.num_gpus, int) or self.num_gpus < 0):
            raise ValueError(f"num_gpus must be a non-negative integer or None, got {self.num_gpus!r}")


def check_run(map_fun, input_mode: int, layout: ClusterLayout, limits: RunLimits, *, return_results="chief") -> None:
    """Raise ValueError naming what cannot work in ``TFCluster.run``'s arguments beyond each group's
    own checks (``ClusterLayout``, ``RunLimits``): the function, the input mode, which nodes return
    their value, and how they combine."""
    validate_return_results(return_results)
    if not callable(map_fun):
        raise ValueError(f"map_fun must be callable, got {type(map_fun).__name__}")
    if input_mode not in (InputMode.TENSORFLOW, InputMode.SPARK):
        raise ValueError(f"input_mode must be InputMode.TENSORFLOW or InputMode.SPARK, got {input_mode!r}")
    if layout.eval_node and input_mode == InputMode.SPARK:
        raise ValueError(
            "eval_node=True is not supported with input_mode=InputMode.SPARK: the evaluator "
            "would receive no data; use InputMode.TENSORFLOW for an evaluator"
        )
    if limits.max_restarts and layout.driver_ps_nodes:
        raise ValueError("max_restarts cannot relaunch ps nodes hosted by the driver (driver_ps_nodes=True)")


def node_range(layout: ClusterLayout, min_executors: int | None) -> NodeRange:
    """``TFCluster.run``'s node range: ``min_executors`` (None: ``num_executors``, a fixed cluster)
    up to ``num_executors``; ValueError naming ``min_executors`` when the smallest cluster would
    lack a role, or when its nodes could not be relaunched (ps nodes on the driver)."""
    if min_executors is None:
        return NodeRange(layout.num_executors, layout.num_executors)
    if not isinstance(min_executors, int) or isinstance(min_executors, bool):
        raise ValueError(f"min_executors must be an integer or None, got {min_executors!r}")
    nodes = NodeRange(min_executors, layout.num_executors)
    try:
        replace(layout, num_executors=min_executors)
    except ValueError as exc:
        raise ValueError(f"min_executors={min_executors} is too few: {exc}") from None
    if nodes.elastic and layout.driver_ps_nodes:
        raise ValueError("min_executors cannot relaunch ps nodes hosted by the driver (driver_ps_nodes=True)")
    return nodes


#: Whose ``map_fun`` return value reaches the driver (``TFCluster.run(return_results=...)``).
RETURN_RESULTS = ("chief", "all")


def validate_return_results(return_results) -> None:
    """Raise ValueError unless ``return_results`` is one of :data:`RETURN_RESULTS`."""
    if return_results not in RETURN_RESULTS:
        raise ValueError(
            f"return_results must be 'chief' (shutdown() returns the chief's map_fun value) or 'all' "
            f"(cluster.results lists every node's), got {return_results!r}"
        )


def check_feed_arguments(qname, feed_timeout, seed=None) -> None:
    """Raise ValueError naming the first of ``cluster.train``'s or ``cluster.inference``'s feed
    arguments that cannot work: checked on the driver, where the message reaches the user."""
    check_qname(qname)
    check_feed_timeout(feed_timeout)
    check_seed(seed)


def check_qname(qname) -> None:
    """``qname`` names files on the nodes (``{qname}-run{session}``): 1 to 64 of ``A-Za-z0-9_.-``,
    not starting with a dot, so that it can never leave its directory or hide."""
    if not isinstance(qname, str) or not _QNAME.fullmatch(qname):
        raise ValueError(
            f"qname must be 1 to 64 of the characters A-Z a-z 0-9 _ . - not starting with '.', got {qname!r}"
        )


def check_training_plan(plan: TrainingPlan) -> None:
    """Raise ValueError naming the first of ``cluster.train``'s arguments (a ``TrainingPlan``'s
    fields) that cannot work, before any Spark job runs."""
    check_feed_arguments(plan.qname, plan.feed_timeout, plan.seed)
    if not _is_integer(plan.epochs) or plan.epochs < 1:
        raise ValueError(f"num_epochs must be a positive integer, got {plan.epochs!r}")
    if plan.cache_max_bytes is not None and not (_is_integer(plan.cache_max_bytes) and plan.cache_max_bytes > 0):
        raise ValueError(f"cache_max_bytes must be a positive number of bytes or None, got {plan.cache_max_bytes!r}")
    if plan.deterministic and not plan.cache:
        raise ValueError("cluster.train(deterministic=True) reads epoch 1 from the nodes' caches: it needs cache=True")


def check_seed(seed) -> None:
    """``seed`` is None (a new one per call) or an integer in ``[0, 2**63)``: the nodes' int64."""
    if seed is not None and not (_is_integer(seed) and 0 <= seed < 2**63):
        raise ValueError(f"seed must be None or an integer from 0 to 2**63 - 1, got {seed!r}")


def _is_integer(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)  # numpy ints too


def verbose_logs(verbose: bool | None) -> bool:
    """``verbose``, or when None, whether ``SPARKDL_VERBOSE`` is set to something other than 0/false/empty."""
    if verbose is not None:
        return bool(verbose)
    return os.environ.get("SPARKDL_VERBOSE", "").strip().lower() not in ("", "0", "false", "no")
