"""Security on a live cluster: peers must prove the cluster's secret before anything is parsed,
nothing is ever unpickled from a socket, sockets bind one deliberate address, the secret never
reaches logs or errors, and each cluster (and user) writes its files to its own place. (The user's
private root and the pruning of old clusters, without a cluster: tests/unit/node/test_launch.py.)"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import pickle
import shutil
import socket
import stat
import time
from pathlib import Path

import psutil
import pytest
from cluster_watch import cluster_processes, wait_for

from sparkdl import ClusterError, TFCluster
from sparkdl.feed.feeder import FeedTarget
from sparkdl.node.launch import user_root
from sparkdl.transport import rejection_log
from sparkdl.transport.channel import AuthenticationError, Endpoint, connect, new_secret

import cluster_functions as cluster_fns
import feed_functions as feed_fns
import node_functions as nf
from cluster_dirs import plant_cluster_dir as _plant_cluster_dir

pytestmark = pytest.mark.timeout(240)
SPARK = TFCluster.InputMode.SPARK


@pytest.fixture
def node_root(sc2, spark_holder) -> Path:
    """This user's node-file root on the executors: under their own TMPDIR (the suite's executors
    do not share the driver's, as on a real cluster), which this one machine lets the test read."""
    return user_root(spark_holder.executor_tmpdir)


class _Canary:
    """Unpickling this creates a file: proof that a peer's bytes were (or were not) unpickled."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _send_raw(address, payload: bytes) -> bytes:
    """Connect, send bytes without any handshake, return whatever comes back before the close."""
    with socket.create_connection(address, timeout=15) as sock:
        sock.sendall(payload)
        # The server may already have refused the bytes and closed (ENOTCONN here); its reply,
        # the challenge it sent first, is still in this socket's buffer.
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_WR)
        received = b""
        try:
            while chunk := sock.recv(4096):
                received += chunk
        except OSError:
            pass
        return received


def test_unauthenticated_and_pickled_input_is_rejected_and_never_unpickled(sc2, tmp_path, caplog, monkeypatch):
    # The coordinator runs in this process: its summary of refused connections comes after 1 s, not 10.
    monkeypatch.setattr(rejection_log, "REJECTION_LOG_S", 1.0)
    canary = tmp_path / "canary"
    out = tmp_path / "out"
    out.mkdir()
    cluster = TFCluster.run(sc2, feed_fns.count_feed, {"out": str(out)}, 2, input_mode=SPARK)
    servers = [(cluster.coordinator_address, Endpoint.coordinator(cluster.cluster_id))] + [
        ((n["host"], n["feed_port"]), Endpoint.feed(cluster.cluster_id, n["executor_id"])) for n in cluster.cluster_info
    ]
    assert len(servers) == 3
    for address, endpoint in servers:
        reply = _send_raw(address, pickle.dumps(_Canary(str(canary))))
        assert b"SPARKDL" in reply[:16], "the peer only ever gets the server's challenge"
        with pytest.raises(AuthenticationError):
            connect(address, new_secret(), timeout=10, endpoint=endpoint)
    cluster.train(sc2.parallelize([([1.0], 1.0)] * 100, 2), 1)  # the cluster is unharmed
    cluster.shutdown(timeout=120)
    # The coordinator refused both of its peers: the first in a line of its own, the second in the
    # summary that ends the period (a flood of refused connections cannot flood the log).
    wait_for(
        lambda: "sparkdl-coordinator: refused 1 more connection(s)" in caplog.text,
        15,
        "the coordinator's summary of refused connections",
    )
    assert caplog.text.count("sparkdl-coordinator: rejected a connection") == 1
    assert not canary.exists(), "bytes from an unauthenticated peer were unpickled"
    assert sorted(json.loads(p.read_text())["rows"] for p in out.glob("node*.json")) == [50, 50]
    for node in cluster.cluster_info:  # each node's feed server logged the first rejection; later ones
        # within 10 s are summarised in one line when the next comes (a flood cannot flood the log)
        lines = [line for line in open(node["log_path"]) if "rejected a connection" in line]
        assert len([line for line in lines if "refused" not in line]) == 1, lines  # at most a summary besides


def test_listening_sockets_bind_one_deliberate_address(sc2, tmp_path):
    flag_out = tmp_path / "out"
    flag_out.mkdir()
    cluster = TFCluster.run(sc2, feed_fns.count_feed, {"out": str(flag_out)}, 2, input_mode=SPARK)
    try:
        listening = []
        for process in cluster_processes(cluster.cluster_id):
            listening += [c.laddr for c in process.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN]
        assert len(listening) >= 2, "each node runs a feed server"
        assert all(addr.ip not in ("0.0.0.0", "::") for addr in listening), listening
        host, port = cluster.coordinator_address
        bound = [
            c.laddr
            for c in psutil.Process().net_connections(kind="tcp")
            if c.status == psutil.CONN_LISTEN and c.laddr.port == port
        ]
        assert [addr.ip for addr in bound] == [host], "the coordinator binds the address it gives its nodes"
    finally:
        cluster.shutdown(timeout=120)


def test_tensorflow_listens_on_all_interfaces_on_its_cluster_spec_port_and_nothing_else_does(sc2, tmp_path):
    """TensorFlow 2.21's gRPC server binds "0.0.0.0:<port>" (gRPC makes that [::], every interface)
    and has no setting for one address; the docs say so and name the port to firewall: the node's
    port in the cluster spec. Everything else binds the node's interface (feed servers, TensorBoard)
    or loopback (the data server TensorBoard starts)."""
    out, flag = tmp_path / "out", tmp_path / "flag"
    out.mkdir()
    cluster = TFCluster.run(
        sc2, cluster_fns.serve_until_flag, {"out": str(out), "flag": str(flag)}, 2, input_mode=SPARK, tensorboard=True
    )
    try:
        deadline = time.monotonic() + 120
        while len(list(out.glob("node*.json"))) < 2:  # every node's TF server started (bounded)
            assert time.monotonic() < deadline, "the nodes' TF servers did not start"
            time.sleep(0.1)
        assert cluster.tensorboard_url()
        listening = []
        for process in cluster_processes(cluster.cluster_id):
            listening += [c.laddr for c in process.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN]
        spec = cluster.cluster_spec
        tf_ports = {int(address.rsplit(":", 1)[1]) for addresses in spec.values() for address in addresses}
        hosts = {node["host"] for node in cluster.cluster_info}
        everywhere = [addr for addr in listening if addr.ip in ("0.0.0.0", "::")]
        assert {addr.port for addr in everywhere} == tf_ports and len(everywhere) == len(tf_ports), listening
        on_node = [addr for addr in listening if addr.ip in hosts]
        assert len(on_node) >= 3, "each node's feed server and the chief's TensorBoard bind the node's address"
        loopback = [addr for addr in listening if addr.ip in ("127.0.0.1", "::1")]  # TensorBoard's data server
        assert len(everywhere) + len(on_node) + len(loopback) == len(listening), (listening, hosts)
    finally:
        flag.touch()
        cluster.shutdown(timeout=120)
    # TensorBoard's node (only it) logs to a default log dir of its cluster's own, never shared
    log_dirs = [json.loads(path.read_text())["log_dir"] for path in sorted(out.glob("node*.json"))]
    assert log_dirs[1] is None and cluster.cluster_id in log_dirs[0], log_dirs
    deployment = (Path(__file__).resolve().parents[3] / "docs" / "deployment.md").read_text()
    assert "TensorFlow's gRPC server listens on all interfaces" in deployment, "the docs must say what is true"


def test_the_secret_never_appears_in_logs_or_errors(sc2, node_root, tmp_path, caplog, monkeypatch):
    import pyspark

    from sparkdl.driver import attempt

    # sparkdl shows the secret to no one, so the test sees each one as it is made.
    made: list[bytes] = []
    monkeypatch.setattr(attempt, "new_secret", lambda: made.append(new_secret()) or made[-1])
    caplog.set_level("DEBUG", logger="sparkdl")
    cluster = TFCluster.run(sc2, feed_fns.fail_after_first_batch, {"out": str(tmp_path)}, 2, input_mode=SPARK)
    [secret] = made
    with pytest.raises(ClusterError) as caught:
        cluster.train(sc2.parallelize([([1.0], 1.0)] * 1000, 2), 1)
    texts = {
        "error": str(caught.value),
        "driver log": caplog.text,
        "cluster repr": repr(vars(cluster)),
        "feed target repr": repr(
            FeedTarget(secret, (("h", 1),), (Endpoint.feed("c", 0),), ("worker:0",), 1.0, "input")
        ),
    }
    for path in (node_root / cluster.cluster_id).rglob("*"):
        if path.is_file():
            texts[str(path)] = path.read_bytes().decode("latin-1")
    spark_work = Path(pyspark.__file__).parent / "work" / sc2.applicationId
    for path in spark_work.rglob("std*"):  # the executors' stdout/stderr
        texts[str(path)] = path.read_bytes().decode("latin-1")
    assert any("node.log" in name for name in texts) and any("supervisor.log" in name for name in texts)
    forms = {
        "hex": secret.hex(),
        "raw": secret.decode("latin-1"),
        "repr": repr(secret)[2:-1],
        "base64": base64.b64encode(secret).decode(),
    }
    for where, text in texts.items():
        for form, value in forms.items():
            assert value not in text, f"the cluster secret ({form}) appears in {where}"


def test_concurrent_clusters_write_to_their_own_private_directories(sc2, node_root, tmp_path):
    clusters, flags = [], []
    for name in ("a", "b"):
        out, flag = tmp_path / name, tmp_path / f"flag-{name}"
        out.mkdir()
        flags.append(flag)
        clusters.append(TFCluster.run(sc2, cluster_fns.wait_for_flag, {"out": str(out), "flag": str(flag)}, 1))
    try:
        logs = [Path(c.cluster_info[0]["log_path"]) for c in clusters]
        assert logs[0].parent != logs[1].parent
        for cluster, log in zip(clusters, logs):
            assert log.is_relative_to(node_root / cluster.cluster_id)
            assert stat.S_IMODE(log.parent.stat().st_mode) == 0o700
    finally:
        for flag in flags:
            flag.touch()
        for cluster in clusters:
            cluster.shutdown(timeout=120)
    assert stat.S_IMODE(node_root.stat().st_mode) == 0o700


def test_a_starting_cluster_prunes_this_users_old_node_directories(sc2, node_root, tmp_path):
    planted = _plant_cluster_dir(node_root, f"old{os.getpid()}", 30)
    kept = _plant_cluster_dir(node_root, f"kept{os.getpid()}", 1)
    try:
        TFCluster.run(sc2, nf.describe_node, {"out": str(tmp_path)}, 2).shutdown(timeout=120)
        assert not planted.exists(), "nodes remove earlier clusters' directories older than keep_node_files_days"
        assert kept.exists()
        with pytest.raises(ValueError, match="keep_node_files_days"):
            TFCluster.run(sc2, nf.describe_node, {"out": str(tmp_path)}, 2, keep_node_files_days=0)
    finally:
        shutil.rmtree(kept, ignore_errors=True)
        shutil.rmtree(planted, ignore_errors=True)
