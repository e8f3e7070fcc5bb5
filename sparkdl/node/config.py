"""Everything a node knows, typed: what the driver decides, and what each hop on the way adds.

A node's settings cross three processes. Each hop wraps what it was given, adds only what it
alone knows, and copies nothing::

    NodeSettings    the user's TFCluster.run arguments that reach the nodes   driver (cluster.py)
    LaunchSpec      + one launch attempt: cluster id, secret, coordinator     driver (attempt.py),
                      address, default file system                            in Spark's task closure
    NodeConfig      + one node: its number, GPUs, environment, directories,   launch task (launch.py),
                      the process it lives and dies with                      pickled on the supervisor's stdin
    ProcessConfig   + the formed cluster: spec, this node's host and TF port,  supervisor, pickled on
                      and the descriptors the TF process inherits             the TF process's stdin

Every class is a frozen dataclass: a mistyped field name fails where it is written (and in
``tests/unit/node/test_config.py``, which builds all four hops), not in a child process. Pickle is
used only on those two local pipes, each written by the process that starts the next hop (the TF
process's by its supervisor, also when a fork server forks it), never on a socket.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..common.roles import NodeRole
from ..storage import StoreSettings


@dataclass(frozen=True)
class NodeSettings:
    """What ``TFCluster.run`` was asked that every node needs, the same for every node and attempt."""

    fn: bytes = field(repr=False)  # cloudpickled (map_fun, tf_args)
    roles: tuple[NodeRole, ...]
    feeds: bool  # InputMode.SPARK: the node serves a feed and outlives its launch task
    set_tf_config: bool
    release_port: bool
    reservation_timeout: float
    tensorboard_node: int | None  # the node number that runs TensorBoard, if any
    log_dir: str | None  # TensorBoard's log directory (None: one per cluster, next to the node log)
    num_gpus: int | None
    feed_queue_bytes: int = 64 * 1024 * 1024
    stream_logs: bool = True  # forward the node's output to the driver
    verbose_logs: bool = False  # forward all of it, TensorFlow's INFO lines included (node/console.py)
    env: dict[str, str] = field(default_factory=dict)  # extra environment of the TF processes
    keep_node_files_days: float | None = 7  # see launch.prune_old_clusters
    return_results: str = "chief"  # whose map_fun return value goes to the driver: the chief's, or "all"
    # InputMode.SPARK under dynamic allocation: the launch task waits for its node, so that Spark
    # never releases the node's executor as idle (a running task keeps it).
    hold_executor: bool = False
    elastic: bool = False  # TFCluster.run(min_executors=...): the node count may change between attempts
    storage: StoreSettings = StoreSettings()  # the Spark application's store settings (secrets: never in a repr)


@dataclass(frozen=True)
class LaunchSpec:
    """One launch attempt of a cluster: shipped from the driver inside Spark's task closure."""

    settings: NodeSettings
    cluster_id: str
    secret: bytes = field(repr=False)  # never in logs or error messages
    driver_address: tuple[str, int]  # the coordinator's
    default_fs: str
    attempt: int = 0  # relaunch number (TFCluster.run(max_restarts=N))
    # the Spark executor id each launch task must run on (another sparkdl cluster holds the
    # others, driver/node_groups.py); empty: anywhere
    placement: tuple[str, ...] = ()


@dataclass(frozen=True)
class NodeConfig:
    """One node, as its launch task starts it: what the supervisor reads on its stdin."""

    launch: LaunchSpec
    node_number: int
    spark_executor: str  # the executor's address in barrier mode, else ""
    anchor_pid: int  # the Spark task or executor JVM the node lives and dies with
    env: dict[str, str]  # the TF process's extra environment, final (user, Keras policy, GPUs)
    tensorboard: bool  # this node's supervisor runs TensorBoard
    log_dir: str | None  # TensorBoard's log directory (ctx.log_dir), final
    gpus: str | None  # CUDA_VISIBLE_DEVICES chosen for the node
    working_dir: str
    node_dir: str  # the node's private directory (logs, status)
    cache_dir: str  # its epoch caches' private directory, under Spark's local directory (launch.feed_cache_dir)
    pythonpath: str
    log_store: str | None = None  # a store log_dir (s3://...) the local log_dir is copied to (node/log_mirror.py)

    @property
    def role(self) -> NodeRole:
        """This node's role (job name, task index)."""
        return self.launch.settings.roles[self.node_number]

    @property
    def settings(self) -> NodeSettings:
        """The cluster's settings."""
        return self.launch.settings


@dataclass(frozen=True)
class ProcessConfig:
    """One node once the cluster formed: what the TF process reads on its stdin."""

    node: NodeConfig
    cluster_spec: dict[str, list[str]]
    host: str  # the address the node registered with
    port: int  # its reserved TF port
    socket_fd: int  # the socket holding that port, inherited
    status_fd: int  # where the TF process writes its events for the supervisor
    error_path: str  # where it writes its traceback if map_fun fails
