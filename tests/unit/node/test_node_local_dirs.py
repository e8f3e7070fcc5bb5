"""Where a node keeps its epoch cache (``node/launch.py``): under Spark's local directories as an
executor sees them, never in ``$TMPDIR`` when Spark names a place for its spills. No Spark: the
environment variables Spark sets in its Python workers are set here to tmp_path directories."""

from __future__ import annotations

import getpass
import os
import stat
import tempfile
import time

import pytest

from sparkdl.common.roles import NodeRole
from sparkdl.node import launch
from sparkdl.node.config import LaunchSpec, NodeSettings


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
