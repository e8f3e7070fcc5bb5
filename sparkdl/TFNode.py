"""TensorFlowOnSpark-compatible node helpers: ``from sparkdl import TFNode``."""

from __future__ import annotations

from .common.errors import InputModeError
from .common.paths import hdfs_path as _qualify
from .node.context import NodeContext
from .transport.protocol import DEFAULT_QNAME


def hdfs_path(ctx: NodeContext, path: str) -> str:
    """Qualify ``path`` against the node's default filesystem, with TensorFlowOnSpark's rules."""
    return _qualify(ctx.defaultFS, ctx.working_dir, path)


def start_cluster_server(ctx: NodeContext, num_gpus: int = 1, rdma: bool = False):
    """Start this node's ``tf.distribute.Server``; returns ``(tf.train.ClusterSpec, server)``.

    Same as ``ctx.start_cluster_server(num_gpus, rdma)``; see
    :meth:`sparkdl.node.context.NodeContext.start_cluster_server`.
    """
    return ctx.start_cluster_server(num_gpus, rdma)


def release_port(ctx: NodeContext) -> None:
    """Free the node's reserved TF port (same as ``ctx.release_port()``)."""
    ctx.release_port()


def DataFeed(
    mgr,
    train_mode: bool = True,
    qname_in: str = DEFAULT_QNAME,
    qname_out: str = "output",
    input_mapping: dict[str, str] | None = None,
):
    """TensorFlowOnSpark's ``TFNode.DataFeed(ctx.mgr, ...)``: the node's data feed (InputMode.SPARK).

    Same as ``ctx.get_data_feed(...)``; see :class:`sparkdl.feed.data_feed.DataFeed`.
    """
    from .feed.data_feed import DataFeed as _DataFeed
    from .feed.server import FeedServer

    if not isinstance(mgr, FeedServer):
        raise InputModeError("TFNode.DataFeed(ctx.mgr) needs TFCluster.run(..., input_mode=InputMode.SPARK)")
    return _DataFeed(mgr, train_mode, qname_in, qname_out, input_mapping)


__all__ = ["DataFeed", "NodeContext", "hdfs_path", "release_port", "start_cluster_server"]
