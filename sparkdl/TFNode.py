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
    addressable = {job: hosts for job, hosts in ctx.cluster_spec.items() if job != "evaluator"}
    return tf.train.ClusterSpec(addressable), server


def release_port(ctx: NodeContext) -> None:
    """Free the node's reserved TF port (same as ``ctx.release_port()``)."""
    ctx.release_port()


def DataFeed(mgr, train_mode: bool = True, qname_in: str = "input", qname_out: str = "output",
             input_mapping: dict[str, str] | None = None):
    """TensorFlowOnSpark's ``TFNode.DataFeed(ctx.mgr, ...)``: the node's data feed (InputMode.SPARK).

    Same as ``ctx.get_data_feed(...)``; see :class:`sparkdl.feed.data_feed.DataFeed`.
    """
    from .feed.data_feed import DataFeed as _DataFeed
    from .feed.server import FeedServer

    if not isinstance(mgr, FeedServer):
        raise RuntimeError("TFNode.DataFeed(ctx.mgr) needs TFCluster.run(..., input_mode=InputMode.SPARK)")
    return _DataFeed(mgr, train_mode, qname_in, qname_out, input_mapping)


__all__ = ["DataFeed", "NodeContext", "hdfs_path", "release_port", "start_cluster_server"]
