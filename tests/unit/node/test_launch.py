"""sparkdl.node.launch without Spark: where a node keeps its epoch cache (under Spark's local
directories as an executor sees them), the user's private root, and the pruning of old clusters'
directories; a launch task placed on an executor starts its node only when every task of the launch
runs where it was placed. The environment variables Spark sets in its Python workers are set here
to tmp_path directories."""

from __future__ import annotations

import getpass
import json
import os
import stat
import subprocess
import sys
import tempfile
import time

import pytest
from pyspark import BarrierTaskContext, TaskContext

from sparkdl.common.roles import NodeRole
from sparkdl.node import launch
from sparkdl.node.config import LaunchSpec, NodeSettings
from sparkdl.node.launch import prune_old_clusters, user_root

from cluster_dirs import plant_cluster_dir as _plant_cluster_dir


@pytest.fixture
def dirs(tmp_path, monkeypatch):
    """``tmp`` as $TMPDIR and three candidate local directories; no Spark variable set."""
    for name in ("tmp", "yarn1", "yarn2", "spark"):
        (tmp_path / name).mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.delenv("LOCAL_DIRS", raising=False)
    monkeypatch.delenv("SPARK_LOCAL_DIRS", raising=False)
    return tmp_path


def test_yarns_local_dirs_come_first_and_the_first_usable_one_is_taken(dirs, monkeypatch):
    (dirs / "a-file").write_text("not a directory")
    monkeypatch.setenv("LOCAL_DIRS", f"{dirs / 'missing'},{dirs / 'a-file'},{dirs / 'yarn1'},{dirs / 'yarn2'}")
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(dirs / "spark"))
    assert launch.spark_local_dir() == dirs / "yarn1"


def test_spark_local_dirs_when_yarn_names_none_usable(dirs, monkeypatch):
    monkeypatch.setenv("LOCAL_DIRS", str(dirs / "missing"))
    # What Spark sets in every Python worker: its block manager's directories under spark.local.dir.
    monkeypatch.setenv("SPARK_LOCAL_DIRS", f",{dirs / 'spark'},{dirs / 'yarn2'}")
    assert launch.spark_local_dir() == dirs / "spark"


def test_the_temporary_directory_when_spark_names_none(dirs, monkeypatch):
    assert launch.spark_local_dir() == dirs / "tmp"
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(dirs / "missing"))
    assert launch.spark_local_dir() == dirs / "tmp"


def _launch_spec() -> LaunchSpec:
    settings = NodeSettings(
        fn=b"pickled map_fun",
        roles=(NodeRole(0, "chief", 0),),
        feeds=True,
        set_tf_config=True,
        release_port=True,
        reservation_timeout=30.0,
        tensorboard_node=None,
        log_dir=None,
        num_gpus=None,
    )
    return LaunchSpec(settings, "dirtest", b"secret", ("127.0.0.1", 5000), "file://", attempt=1)


def test_a_nodes_cache_is_private_under_spark_local_dir_and_its_logs_stay_in_tmpdir(dirs, monkeypatch):
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(dirs / "spark"))
    config = launch.node_config(_launch_spec(), 0, None, "", anchor_pid=1)
    user = f"sparkdl-{getpass.getuser()}"
    assert config.node_dir == str(dirs / "tmp" / user / "dirtest" / "node0-chief0-attempt1")
    cache = dirs / "spark" / user / "dirtest" / "node0-chief0-attempt1" / "feed-cache"
    assert config.cache_dir == str(cache)
    for private in (dirs / "spark" / user, cache.parent.parent, cache.parent):
        assert stat.S_IMODE(private.stat().st_mode) == 0o700 and private.stat().st_uid == os.getuid()


def test_a_linked_private_directory_in_spark_local_dir_is_refused(dirs, monkeypatch):
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(dirs / "spark"))
    (dirs / "spark" / f"sparkdl-{getpass.getuser()}").symlink_to(dirs / "yarn1")
    with pytest.raises(PermissionError, match="not a directory owned by this user"):
        launch.node_config(_launch_spec(), 0, None, "", anchor_pid=1)


def test_old_caches_under_spark_local_dir_are_pruned_with_the_old_logs(dirs, monkeypatch):
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(dirs / "spark"))
    planted = []
    for root in (launch.user_root(), launch.user_root(dirs / "spark")):
        old = root / "old-cluster" / "node0-chief0"
        old.mkdir(parents=True)
        stamp = time.time() - 30 * 86400
        for path in (old, old.parent):
            os.utime(path, (stamp, stamp))
        planted.append(old.parent)
    launch.prune_node_files(7, current="dirtest")
    assert not any(path.exists() for path in planted)


def test_user_root_is_private_and_refuses_a_foreign_or_linked_directory(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    root = user_root()
    root.chmod(0o777)
    assert stat.S_IMODE(user_root().stat().st_mode) == 0o700, "a too-open directory is tightened"
    root.rmdir()
    (tmp_path / "elsewhere").mkdir()
    root.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(PermissionError, match="not a directory owned by this user"):
        user_root()
    root.unlink()
    if os.getuid() == 0:  # only root can hand a directory to another user to show the refusal
        root.mkdir()
        os.chown(root, 65534, 65534)
        with pytest.raises(PermissionError, match="not a directory owned by this user"):
            user_root()


def test_old_cluster_directories_are_pruned_and_recent_or_live_ones_kept(tmp_path):
    root = tmp_path / "sparkdl-user"
    old, recent = _plant_cluster_dir(root, "old", 30), _plant_cluster_dir(root, "recent", 1)
    live = _plant_cluster_dir(root, "live", 30)
    (live / "node0-chief0" / "node.log").write_text("still writing\n")  # a running node keeps its cluster
    current = _plant_cluster_dir(root, "current", 30)
    assert prune_old_clusters(root, None, "current") == [] and old.exists()
    assert prune_old_clusters(root, 7, "current") == ["old"]
    assert not old.exists() and recent.exists() and live.exists() and current.exists()


# -- placement: a launch beside another sparkdl cluster's nodes (no Spark: a stand-in barrier task context) --


class Context(BarrierTaskContext):
    """A barrier task context: partition ``partition``; ``others`` are the executor ids the other
    tasks run on (None: a task that cannot tell)."""

    def __new__(cls, *args, **kwargs):  # TaskContext's own keeps one per process
        return object.__new__(cls)

    def __init__(self, partition: int, others: list[str | None]):
        self.partition, self.others, self.gathered = partition, others, []

    def partitionId(self):  # noqa: N802 - Spark's names
        return self.partition

    def attemptNumber(self):  # noqa: N802
        return 0

    def cpus(self):
        return 1

    def resources(self):
        return {}

    def allGather(self, message=""):  # noqa: N802
        self.gathered.append(message)
        return [message, *(json.dumps(executor) for executor in self.others)]

    def getTaskInfos(self):  # noqa: N802
        return [type("Info", (), {"address": f"host:{i}"})() for i in range(1 + len(self.others))]


@pytest.fixture
def started(monkeypatch):
    """The nodes the launcher started (``launch_node`` replaced), and the executor it runs on: "1"."""
    nodes = []
    monkeypatch.setattr(launch, "launch_node", lambda spec, number, *args, **kw: nodes.append(number) or {})
    monkeypatch.setattr(launch, "executor_id", lambda: "1")
    return nodes


def run(monkeypatch, context: Context, placement=()) -> list[dict]:
    monkeypatch.setattr(TaskContext, "get", classmethod(lambda cls: context))
    spec = LaunchSpec(None, "c", b"s", ("h", 1), "file://", placement=tuple(placement))
    return list(launch.spark_partition_launcher(spec)(iter([])))


def test_a_task_on_its_executor_starts_its_node_when_every_task_is_on_its_own(monkeypatch, started):
    context = Context(0, others=["2"])
    assert run(monkeypatch, context, placement=("1", "2")) == [{"task_cpus": 1, "executor_id": "1"}]
    assert started == [0] and context.gathered == ['"1"']


def test_tasks_spark_swapped_between_the_placed_executors_start_their_nodes(monkeypatch, started):
    context = Context(1, others=["2"])  # partition 1 was placed on "2", partition 0 on "1": swapped
    assert run(monkeypatch, context, placement=("2", "1")) == [{"task_cpus": 1, "executor_id": "1"}]
    assert started == [1]


def test_a_task_off_its_executor_starts_no_node(monkeypatch, started):
    context = Context(1, others=["2"])
    records = run(monkeypatch, context, placement=("2", "3"))
    assert records == [{"node_number": 1, "misplaced": True, "executor_id": "1"}] and started == []


def test_no_task_starts_a_node_when_another_task_is_off_its_executor(monkeypatch, started):
    records = run(monkeypatch, Context(0, others=["3"]), placement=("1", "2"))
    assert records == [{"node_number": 0, "misplaced": False, "executor_id": "1"}] and started == []


def test_two_tasks_on_one_placed_executor_start_no_node(monkeypatch, started):
    records = run(monkeypatch, Context(0, others=["1"]), placement=("1", "2"))
    assert records == [{"node_number": 0, "misplaced": True, "executor_id": "1"}] and started == []


def test_without_a_placement_the_tasks_do_not_gather(monkeypatch, started):
    context = Context(0, others=["3"])
    assert run(monkeypatch, context) == [{"task_cpus": 1, "executor_id": "1"}]
    assert started == [0] and context.gathered == []


def test_the_executor_id_is_read_from_the_executor_jvms_command_line(monkeypatch):
    command = [sys.executable, "-c", "import sys; sys.stdin.read()", "--executor-id", "7"]
    jvm = subprocess.Popen(command, stdin=subprocess.PIPE)  # stands for the executor JVM
    try:
        monkeypatch.setattr(launch, "executor_jvm_pid", lambda: jvm.pid)
        assert launch.executor_id() == "7"
        monkeypatch.setattr(launch, "executor_jvm_pid", os.getpid)
        assert launch.executor_id() is None  # this process has no --executor-id
    finally:
        jvm.stdin.close()
        jvm.wait(10)
