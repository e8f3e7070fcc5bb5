"""TensorFlowOnSpark's ``pipeline`` helpers for code that runs TensorFlow inside a Spark task.

``single_node_env(args)`` prepares this process from a stage's ``tf_args``; ``yield_batch`` cuts a
partition's rows into per-tensor batches. Users import them from :mod:`sparkdl.pipeline`.
"""

from __future__ import annotations

import sys
from typing import Any, Iterable, Iterator

from ..common import single_node


def single_node_env(args: Any) -> None:
    """Prepare this process for single-node TensorFlow from ``tf_args``: an argv list (or a
    ``Namespace`` holding one) becomes ``sys.argv``; ``args.num_gpus`` (default 1) GPUs are
    chosen with :func:`sparkdl.util.single_node_env`."""
    if isinstance(args, list):
        sys.argv = args
    elif getattr(args, "argv", None):
        sys.argv = args.argv
    num_gpus = getattr(args, "num_gpus", None) if not isinstance(args, list) else None
    single_node.single_node_env(1 if num_gpus is None else num_gpus)


def yield_batch(iterable: Iterable, batch_size: int, num_tensors: int = 1) -> Iterator[list[list]]:
    """Batches of up to ``batch_size`` rows from ``iterable`` (e.g. a partition's rows), each as
    ``num_tensors`` lists: item ``i`` of every row in list ``i`` (a ``bytearray``, Spark's binary
    type, as ``bytes``). A ``None`` row ends the iteration."""
    tensors: list[list] = [[] for _ in range(num_tensors)]
    for item in iterable:
        if item is None:
            break
        for i in range(num_tensors):
            tensors[i].append(bytes(item[i]) if isinstance(item[i], bytearray) else item[i])
        if len(tensors[0]) >= batch_size:
            yield tensors
            tensors = [[] for _ in range(num_tensors)]
    if tensors[0]:
        yield tensors


__all__ = ["single_node_env", "yield_batch"]
