"""``TFCluster.run``'s arguments: the input modes, and the checks that run before anything starts."""

from __future__ import annotations

import math
import numbers
import os
import re

from .. import roles as roles_mod

#: A queue name as it may appear in the nodes' file names: no path separator, no leading dot.
_QNAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}")


class InputMode:
    """How nodes get their data (TensorFlowOnSpark's values)."""

    TENSORFLOW = 0  #: nodes read their own data (files, generators)
    SPARK = 1  #: Spark feeds RDD/DataFrame partitions to the nodes


def validate_layout(map_fun, num_executors: int, num_ps: int, input_mode: int, master_node, eval_node: bool) -> None:
    """Raise ValueError naming the first of ``TFCluster.run``'s layout arguments that cannot work."""
    if not callable(map_fun):
        raise ValueError(f"map_fun must be callable, got {type(map_fun).__name__}")
    roles_mod.validate_layout(num_executors, num_ps, master_node, eval_node)
    if input_mode not in (InputMode.TENSORFLOW, InputMode.SPARK):
        raise ValueError(f"input_mode must be InputMode.TENSORFLOW or InputMode.SPARK, got {input_mode!r}")
    if eval_node and input_mode == InputMode.SPARK:
        raise ValueError(
            "eval_node=True is not supported with input_mode=InputMode.SPARK: the evaluator "
            "would receive no data; use InputMode.TENSORFLOW for an evaluator"
        )


def validate_limits(
    reservation_timeout, driver_ps_nodes: bool, num_ps: int, stall_timeout, max_restarts, keep_node_files_days, num_gpus
) -> None:
    """Raise ValueError naming the first of ``TFCluster.run``'s timeouts, counts and limits that cannot work."""
    if not reservation_timeout or reservation_timeout <= 0:
        raise ValueError(f"reservation_timeout must be positive, got {reservation_timeout!r}")
    if driver_ps_nodes and num_ps == 0:
        raise ValueError("driver_ps_nodes=True needs num_ps > 0")
    if stall_timeout is not None and not stall_timeout > 0:
        raise ValueError(f"stall_timeout must be positive seconds or None, got {stall_timeout!r}")
    if not isinstance(max_restarts, int) or max_restarts < 0:
        raise ValueError(f"max_restarts must be a non-negative integer, got {max_restarts!r}")
    if max_restarts and driver_ps_nodes:
        raise ValueError("max_restarts cannot relaunch ps nodes hosted by the driver (driver_ps_nodes=True)")
    if keep_node_files_days is not None and not keep_node_files_days > 0:
        raise ValueError(f"keep_node_files_days must be positive days or None, got {keep_node_files_days!r}")
    if num_gpus is not None and (not isinstance(num_gpus, int) or num_gpus < 0):
        raise ValueError(f"num_gpus must be a non-negative integer or None, got {num_gpus!r}")


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


def check_feed_timeout(feed_timeout) -> None:
    """``feed_timeout`` is a positive, finite number of seconds (the nodes refuse any other)."""
    if not _is_number(feed_timeout) or not math.isfinite(feed_timeout) or feed_timeout <= 0:
        raise ValueError(f"feed_timeout must be a positive, finite number of seconds, got {feed_timeout!r}")


def check_seed(seed) -> None:
    """``seed`` is None (a new one per call) or an integer in ``[0, 2**63)``: the nodes' int64."""
    if seed is not None and not (_is_integer(seed) and 0 <= seed < 2**63):
        raise ValueError(f"seed must be None or an integer from 0 to 2**63 - 1, got {seed!r}")


def _is_integer(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)  # numpy ints too


def _is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def verbose_logs(verbose: bool | None) -> bool:
    """``verbose``, or when None, whether ``SPARKDL_VERBOSE`` is set to something other than 0/false/empty."""
    if verbose is not None:
        return bool(verbose)
    return os.environ.get("SPARKDL_VERBOSE", "").strip().lower() not in ("", "0", "false", "no")
