"""The driver never opens a path a node reported: node paths name files on the executor's host.

The suite's executors have a TMPDIR the driver does not use (``spark.executorEnv.TMPDIR``, set by
``SparkHolder`` for every Spark it starts), as on a real cluster. These tests watch every file the
driver process opens (a Python audit hook), so driver code that reads a node's files fails here
even though this machine could read them.
"""

from __future__ import annotations

import json
import os
import signal
import sys

import pytest
from cluster_watch import wait_for

from sparkdl import ClusterError, TFCluster

import cluster_functions as cluster_fns

pytestmark = pytest.mark.timeout(240)
_OPENED: list[str] = []  # paths the driver opened while a test watched (an audit hook cannot be removed)
_WATCH: dict[str, str] = {}


def _audit(event: str, args: tuple) -> None:
    if event == "open" and _WATCH and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.fsdecode(args[0])
        if path.startswith(_WATCH["root"]):
            _OPENED.append(path)


sys.addaudithook(_audit)


@pytest.fixture
def executor_tmp(sc2, spark_holder):
    """The shared SparkContext and its executors' own TMPDIR (watched)."""
    root = spark_holder.executor_tmpdir
    _OPENED.clear()
    _WATCH["root"] = root
    yield sc2, root
    _WATCH.clear()


def test_a_lost_node_is_reported_with_the_lines_it_forwarded_not_a_file_read_by_the_driver(
    executor_tmp, tmp_path, capsys
):
    sc, executor_root = executor_tmp
    args = {"out": str(tmp_path), "flag": str(tmp_path / "never")}
    cluster = TFCluster.run(sc, cluster_fns.print_then_wait, args, 2)
    ready = tmp_path / "node1-ready.json"
    wait_for(ready.exists, 120, "node 1 to print its marker line")
    assert cluster.cluster_info[1]["log_path"].startswith(str(executor_root)), (
        "the node's files are under the executors' TMPDIR"
    )
    shown: list[str] = []

    def driver_printed_the_marker() -> bool:  # the driver has the line once its console shows it
        shown.append(capsys.readouterr().out)
        return "[worker:0] marker line" in "".join(shown)

    wait_for(driver_printed_the_marker, 60, "the driver to print node 1's marker line")
    os.kill(json.loads(ready.read_text())["supervisor_pid"], signal.SIGKILL)  # its host "goes away": no report comes
    with pytest.raises(ClusterError) as caught:
        cluster.shutdown(timeout=120)
    failure = caught.value.failures[0]
    assert failure.label == "worker:0" and "lost contact with its supervisor" in failure.cause
    assert "marker line of worker:0 before the loss" in failure.log_tail
    assert _OPENED == [], f"the driver opened node files: {_OPENED}"
