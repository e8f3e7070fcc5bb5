"""``TFCluster.run``'s arguments: the input modes, and the checks that run before anything starts."""

from __future__ import annotations

import os

from .. import roles as roles_mod


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


def verbose_logs(verbose: bool | None) -> bool:
    """``verbose``, or when None, whether ``SPARKDL_VERBOSE`` is set to something other than 0/false/empty."""
    if verbose is not None:
        return bool(verbose)
    return os.environ.get("SPARKDL_VERBOSE", "").strip().lower() not in ("", "0", "false", "no")
