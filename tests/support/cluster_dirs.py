"""Earlier clusters' node directories, planted for the pruning checks of
tests/unit/node/test_launch.py and tests/cluster/deployment/test_security.py."""

from __future__ import annotations

import os
import time
from pathlib import Path


def plant_cluster_dir(root: Path, cluster_id: str, age_days: float) -> Path:
    """A fake earlier cluster's node directory whose files were last changed ``age_days`` ago."""
    node = root / cluster_id / "node0-chief0"
    node.mkdir(parents=True)
    (node / "node.log").write_text("an earlier cluster's log\n")
    stamp = time.time() - age_days * 86400
    for path in (node / "node.log", node, node.parent):
        os.utime(path, (stamp, stamp))
    return node.parent
