"""TensorFlowOnSpark-compatible node helpers: ``from sparkdl import TFNode``."""

from __future__ import annotations

from .node.context import NodeContext
from .paths import hdfs_path as _qualify


def hdfs_path(ctx: NodeContext, path: str) -> str:
    """Qualify ``path`` against the node's default filesystem, with TensorFlowOnSpark's rules."""
    return _qualify(ctx.defaultFS, ctx.working_dir, path)


def start_cluster_server(ctx: NodeContext, num_gpus: int = 1, rdma: bool = False):
    """Start this node's ``tf.distribute.Server``; returns ``(tf.train.ClusterSpec, server)``.

    ``num_gpus`` and ``rdma`` are accepted for compatibility: sparkdl pins GPUs before the node
    starts, and gRPC is the only protocol TensorFlow 2 ships.
    """
    import tensorflow as tf

    server = ctx.start_server()
    return tf.train.ClusterSpec(ctx.cluster_spec and {k: v for k, v in ctx.cluster_spec.items()
                                                       if k != "evaluator"}), server


__all__ = ["NodeContext", "hdfs_path", "start_cluster_server"]
