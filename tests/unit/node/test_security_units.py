"""Each user's node files in a private place, without a cluster: ``user_root`` is private and refuses
a directory it does not own, and old clusters' directories are pruned while recent or live ones are
kept. (Security on a live cluster: tests/cluster/deployment/test_security.py.)"""

from __future__ import annotations

import os
import stat
import tempfile

import pytest

from sparkdl.node.launch import prune_old_clusters, user_root

from cluster_dirs import plant_cluster_dir as _plant_cluster_dir

pytestmark = pytest.mark.timeout(240)


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
