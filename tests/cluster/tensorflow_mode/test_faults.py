"""Faults surface at the driver fast, with the cause, and leave nothing behind.

For each fault the test measures the time from the fault (recorded by the node, or by the
test when it kills something) to the exception at the driver, asserts it is under 10 s, and
that the exception names the node (role:index, node number, host, Spark executor) and carries
its traceback or exit status plus the tail of its log. After each: no process of the cluster
is left (process table), its ports are free, and the same SparkContext runs a new cluster (in
the tests that inject several faults in turn, the next fault's cluster, and a plain one after
the last).

Detection times are printed (``pytest -s``) and appended to ``$SPARKDL_FAULT_REPORT`` when set.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from pathlib import Path

import psutil
import pytest
from cluster_watch import cluster_processes, wait_for

from sparkdl import ClusterError, NodeStalled, TFCluster

import fault_functions as ff
import node_functions as nf

pytestmark = pytest.mark.timeout(240)
SPARK = TFCluster.InputMode.SPARK
DETECTION_LIMIT_S = 10.0


def _read(tmp_path: Path, name: str) -> dict:
    """A node's JSON record; {} while the node is still writing it (polled with wait_for)."""
    try:
        return json.loads((tmp_path / f"{name}.json").read_text())
    except ValueError:  # caught mid-write: a flake in CI killed the test's killer thread here
        return {}


def _report(case: str, seconds: float) -> None:
    line = f"fault detection: {case}: {seconds:.2f} s"
    print(line)
    if os.environ.get("SPARKDL_FAULT_REPORT"):
        with open(os.environ["SPARKDL_FAULT_REPORT"], "a") as out:
            out.write(line + "\n")


def _bindable(host: str, port: int) -> bool:
    """Whether a server could listen on the port now (SO_REUSEADDR, as servers use: TIME_WAIT
    remnants of closed connections are not a leak, a live listener is)."""
    probe = socket.socket()
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        probe.bind((host, port))
        probe.listen()
        return True
    except OSError:
        return False
    finally:
        probe.close()


def assert_nothing_left(cluster, sc, tmp_path: Path, new_cluster: bool = True) -> None:
    """No process of the cluster, its ports free, and (``new_cluster``) the SparkContext runs a new
    cluster. Without ``new_cluster`` the caller's next cluster is that proof."""
    cluster.shutdown(timeout=60)  # a no-op when the failure already stopped everything
    wait_for(
        lambda: not cluster_processes(cluster.cluster_id),
        15,
        f"the processes of cluster {cluster.cluster_id} to end: {cluster_processes(cluster.cluster_id)}",
    )
    nodes = cluster.cluster_info
    addresses = [(n["host"], n[port]) for n in nodes for port in ("port", "feed_port") if n[port]]
    addresses.append(cluster.coordinator_address)
    assert addresses
    wait_for(lambda: all(_bindable(h, p) for h, p in addresses), 15, f"ports {addresses} to be free")
    if not new_cluster:
        return
    out = tmp_path / "after"
    out.mkdir()
    TFCluster.run(sc, nf.describe_node, {"out": str(out)}, 2, executor_wait_timeout=90).shutdown(timeout=120)
    assert len(list(out.glob("node*.json"))) == 2


def assert_names_the_node(error: ClusterError, label: str) -> None:
    failure = error.failures[0]
    assert failure.label == label
    assert failure.host and failure.spark_executor, failure
    text = str(error)
    assert f"node {label} (node #{failure.node_number}) on host {failure.host}" in text
    assert f"Spark executor {failure.spark_executor}" in text
    assert failure.log_tail, "the error must quote the tail of the node's log"


def _feed_rdd(sc, rows: int = 200_000, partitions: int = 4):
    return sc.parallelize(range(rows), partitions).map(lambda i: ([float(i % 5), 1.0], float(i % 2)))


def _one_case(fault: str, check, *args, **kwargs) -> None:
    """Run ``check(*args, **kwargs)``, naming the fault case in any failure (the cases run in turn in one test)."""
    try:
        check(*args, **kwargs)
    except BaseException as error:
        error.add_note(f"(fault case: {fault})")
        raise


def test_node_fault_while_fed_is_raised_at_once(sc2, tmp_path):
    """raise, exit and SIGKILL in turn on the same SparkContext; each next cluster (and a plain one
    after the last) shows the one before left nothing that stops a new cluster."""
    faults = ["raise", "exit", "sigkill"]
    for fault in faults:
        out = tmp_path / fault
        out.mkdir()
        _one_case(fault, _fault_while_fed, sc2, out, fault, new_cluster=fault == faults[-1])


def _fault_while_fed(sc2, tmp_path: Path, fault: str, new_cluster: bool) -> None:
    args = {"out": str(tmp_path), "victim": 1, "fault": fault, "spark": True}
    cluster = TFCluster.run(sc2, ff.fault_during_training, args, 2, input_mode=SPARK)
    with pytest.raises(ClusterError) as caught:
        cluster.train(_feed_rdd(sc2), num_epochs=5, feed_timeout=300)
    detected = time.time() - _read(tmp_path, "fault")["time"]
    _report(f"SPARK mode, map_fun {fault}", detected)
    assert detected < DETECTION_LIMIT_S
    assert_names_the_node(caught.value, "worker:0")
    failure = caught.value.failures[0]
    if fault == "raise":
        assert "injected fault in worker:0 (sentinel c0ffee)" in failure.traceback
    elif fault == "exit":
        assert failure.exit_code == 1 and "exited with code 1" in str(caught.value)
    else:
        assert failure.signal == "SIGKILL" and "killed by SIGKILL" in str(caught.value)
    assert_nothing_left(cluster, sc2, tmp_path, new_cluster=new_cluster)


def test_map_fun_raising_in_tensorflow_mode_is_raised_at_once(sc2, tmp_path):
    args = {"out": str(tmp_path), "victim": 1, "fault": "raise"}
    cluster = TFCluster.run(sc2, ff.fault_during_training, args, 2)
    with pytest.raises(ClusterError) as caught:
        cluster.shutdown(timeout=120)
    detected = time.time() - _read(tmp_path, "fault")["time"]
    _report("TENSORFLOW mode, map_fun raises", detected)
    assert detected < DETECTION_LIMIT_S
    assert_names_the_node(caught.value, "worker:0")
    assert "injected fault in worker:0 (sentinel c0ffee)" in caught.value.failures[0].traceback
    assert_nothing_left(cluster, sc2, tmp_path)


def test_node_that_stops_reading_its_feed_is_stopped_by_feed_timeout(sc2, tmp_path):
    args = {"out": str(tmp_path), "victim": 1, "fault": "hang", "spark": True}
    cluster = TFCluster.run(sc2, ff.fault_during_training, args, 2, input_mode=SPARK)
    feed_timeout = 5  # only needs to fire (the node never reads again); not less: see STALL_TIMEOUT_S
    with pytest.raises(NodeStalled) as caught:
        cluster.train(_feed_rdd(sc2, rows=2_000_000, partitions=8), num_epochs=3, feed_timeout=feed_timeout)
    late = time.time() - _read(tmp_path, "fault")["time"] - feed_timeout
    _report(f"SPARK mode, node hangs (after feed_timeout={feed_timeout} s)", late)
    assert late < DETECTION_LIMIT_S
    assert_names_the_node(caught.value, "worker:0")
    failure = caught.value.failures[0]
    assert "made no progress for" in failure.cause and "feed_timeout" in failure.cause
    assert "stuck_inside_a_training_step" in failure.traceback, "the stall report must show the node's stack"
    # The feed server thread is busy decoding batches: only the GIL-holding Python-level dump is
    # safe then (faulthandler's all-threads dump once crashed such a node with SIGSEGV in CI).
    assert "(MainThread, most recent call last)" in failure.traceback
    assert_nothing_left(cluster, sc2, tmp_path)


HANG_DUMPS = {  # fault -> what the stall report's traceback must show
    "hang": ["stuck_inside_a_training_step", "(MainThread, most recent call last)"],
    # ignores SIGUSR2, as a node wedged in C code cannot run Python-level signal handlers: the
    # supervisor falls back to faulthandler's dump, written from C
    "hang_deaf": ["stuck_inside_a_training_step", "most recent call first"],
    # dies (SIGSEGV) half-way through its dump: still a stall, with the part that was written
    "hang_dies_dumping": ["sentinel 7d1f"],
}


STALL_TIMEOUT_S = 5  # only needs to fire (the victim never reports progress again); not less: the
# other node must report within it from its start on a loaded 2-core CI machine


def test_hung_node_is_stopped_by_stall_timeout_in_tensorflow_mode(sc2, tmp_path):
    """Each way of hanging in turn on the same SparkContext; each next cluster (and a plain one
    after the last) shows the one before left nothing that stops a new cluster."""
    faults = list(HANG_DUMPS)
    for fault in faults:
        out = tmp_path / fault
        out.mkdir()
        _one_case(fault, _hung_node, sc2, out, fault, new_cluster=fault == faults[-1])


def _hung_node(sc2, tmp_path: Path, fault: str, new_cluster: bool) -> None:
    args = {"out": str(tmp_path), "victim": 0, "fault": fault}
    cluster = TFCluster.run(sc2, ff.fault_during_training, args, 2, stall_timeout=STALL_TIMEOUT_S)
    with pytest.raises(NodeStalled) as caught:
        cluster.shutdown(timeout=120)
    late = time.time() - _read(tmp_path, "fault")["time"] - STALL_TIMEOUT_S
    _report(f"TENSORFLOW mode, node hangs ({fault}, after stall_timeout={STALL_TIMEOUT_S} s)", late)
    assert late < DETECTION_LIMIT_S
    assert_names_the_node(caught.value, "chief:0")
    failure = caught.value.failures[0]
    assert f"stall_timeout={STALL_TIMEOUT_S} s" in failure.cause and failure.stalled
    for shown in HANG_DUMPS[fault]:
        assert shown in failure.traceback, failure.traceback
    assert_nothing_left(cluster, sc2, tmp_path, new_cluster=new_cluster)


def _executor_jvm_at(address: str) -> psutil.Process:
    """The executor JVM that Spark names by ``host:port`` (``cluster_info[i]["spark_executor"]``,
    a barrier task's executor address: its end of its connection to the driver), the JVM a
    SPARK-mode node lives and dies with."""
    port = int(address.rsplit(":", 1)[1])
    for process in psutil.process_iter(["name"]):
        try:
            if (process.info["name"] or "").startswith("java") and any(
                c.laddr and c.laddr.port == port for c in process.net_connections("tcp")
            ):
                return process
        except psutil.Error:
            continue
    raise AssertionError(f"no JVM has a connection from {address}")


def _executor_jvm(pid: int) -> psutil.Process:
    for parent in psutil.Process(pid).parents():
        if parent.name().startswith("java"):
            return parent
    raise AssertionError(f"no executor JVM above pid {pid}")


@pytest.mark.parametrize("mode", ["SPARK", "TENSORFLOW"])
def test_executor_lost_during_training_is_raised_at_once(sc2, tmp_path, mode):
    spark_mode = mode == "SPARK"
    args = {"out": str(tmp_path), "victim": -1, "fault": "none", "spark": spark_mode}
    cluster = TFCluster.run(sc2, ff.fault_during_training, args, 2, input_mode=SPARK if spark_mode else 0)
    killed = {}

    def kill_executor_of_node_1() -> None:
        ready = wait_for(
            lambda: (tmp_path / "ready-1.json").exists() and _read(tmp_path, "ready-1"), 60, "node 1 to be training"
        )
        jvm = (
            _executor_jvm(ready["supervisor_pid"])  # the TF process's parent may be a fork server
            if not spark_mode
            else _executor_jvm_at(cluster.cluster_info[1]["spark_executor"])
        )
        assert jvm.name().startswith("java")
        killed["time"] = time.time()
        jvm.send_signal(signal.SIGKILL)

    killer = threading.Thread(target=kill_executor_of_node_1, daemon=True)
    killer.start()
    with pytest.raises(ClusterError) as caught:
        if spark_mode:
            cluster.train(_feed_rdd(sc2, rows=4_000_000, partitions=8), num_epochs=5, feed_timeout=300)
        else:
            cluster.shutdown(timeout=120)
    killer.join(60)
    detected = time.time() - killed["time"]
    _report(f"{mode} mode, executor JVM killed", detected)
    assert detected < DETECTION_LIMIT_S
    failure = caught.value.failures[0]
    assert failure.label == "worker:0" and failure.host and failure.spark_executor
    # The node's supervisor either saw its anchor (task or JVM) die, or died with it.
    assert "executor" in failure.cause and "lost" in failure.cause, failure
    assert_nothing_left(cluster, sc2, tmp_path)  # Spark replaces the lost executor; the new cluster waits for it


def test_parameter_server_death_under_ps_strategy_is_raised_at_once(sc3, tmp_path):
    args = {"out": str(tmp_path)}
    # Keras 3's trainer cannot drive ParameterServerStrategy: the test's model.fit runs on tf-keras
    cluster = TFCluster.run(sc3, ff.parameter_server_training, args, 3, num_ps=1, env={"TF_USE_LEGACY_KERAS": "1"})
    wait_for(lambda: (tmp_path / "chief-training.json").exists(), 120, "the chief to be training")
    ps_pid = _read(tmp_path, "ready-0")["pid"]
    assert cluster.cluster_info[0]["job_name"] == "ps"
    killed_at = time.time()
    os.kill(ps_pid, signal.SIGKILL)
    with pytest.raises(ClusterError) as caught:
        cluster.shutdown(timeout=120)
    detected = time.time() - killed_at
    _report("TENSORFLOW mode, ps killed under ParameterServerStrategy", detected)
    assert detected < DETECTION_LIMIT_S
    failure = caught.value.failures[0]
    assert failure.label == "ps:0" and failure.signal == "SIGKILL" and failure.spark_executor
    assert_nothing_left(cluster, sc3, tmp_path)
