"""A real Spark standalone cluster: a Master and two Workers started from pip's pyspark, the demo
submitted to it with spark-submit, then everything stopped cleanly (the inference example is run
in ``test_inference.py``, on the suite's shared Spark).

This is what a user with a small cluster does (``scripts/demo.sh --master spark://HOST:7077``),
on one machine: every process binds 127.0.0.1, ports are chosen free, logs and work
directories live in the test's tmp_path. The cluster is stopped in a fixture finalizer, so a
failing test still leaves no JVM behind.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.cluster  # a Spark standalone master and workers of its own
ROOT = Path(__file__).resolve().parents[3]
START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 60.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _listening(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:port."""
    with socket.socket() as probe:
        probe.settimeout(2)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _spark_home() -> Path:
    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    assert (home / "bin" / "spark-class").exists(), f"pip's pyspark at {home} has no bin/spark-class"
    return home


class StandaloneCluster:
    """A Spark standalone Master and Workers as child processes of the test, on 127.0.0.1."""

    def __init__(self, base: Path, workers: int):
        self.base = base
        self.spark_home = _spark_home()
        self.port, self.webui_port = _free_port(), _free_port()
        self.worker_ports = [(_free_port(), _free_port()) for _ in range(workers)]  # (rpc, web UI)
        self.env = dict(
            os.environ,
            SPARK_HOME=str(self.spark_home),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_LOG_DIR=str(base / "logs"),
            SPARK_WORKER_DIR=str(base / "work"),
            PYSPARK_PYTHON=sys.executable,
            PYSPARK_DRIVER_PYTHON=sys.executable,
        )
        self.processes: dict[str, subprocess.Popen] = {}
        self._descendants: list[psutil.Process] = []

    @property
    def master_url(self) -> str:
        """``spark://127.0.0.1:<port>``."""
        return f"spark://127.0.0.1:{self.port}"

    @property
    def ports(self) -> list[int]:
        """Every port this cluster was told to listen on."""
        return [self.port, self.webui_port, *(port for pair in self.worker_ports for port in pair)]

    def _spawn(self, name: str, *args: str) -> None:
        (self.base / "logs").mkdir(parents=True, exist_ok=True)
        log = open(self.base / "logs" / f"{name}.out", "wb")  # noqa: SIM115 - the child owns it
        # spark-class execs the JVM, so this pid is the Master's or Worker's own.
        self.processes[name] = subprocess.Popen(
            [str(self.spark_home / "bin" / "spark-class"), *args],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()

    def start(self) -> None:
        """Start the Master, then the Workers (one core, 1 GiB each)."""
        self._spawn(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--webui-port",
            str(self.webui_port),
        )
        for index, (port, webui_port) in enumerate(self.worker_ports):
            work_dir = self.base / "work" / f"worker{index}"
            work_dir.mkdir(parents=True)
            self._spawn(
                f"worker{index}",
                "org.apache.spark.deploy.worker.Worker",
                self.master_url,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(webui_port),
                "--cores",
                "1",
                "--memory",
                "1g",
                "--work-dir",
                str(work_dir),
            )

    def state(self) -> dict:
        """The Master's JSON status page (workers, applications)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.webui_port}/json/", timeout=5) as response:
            return json.loads(response.read())

    def wait_for(self, predicate, what: str, timeout: float = START_TIMEOUT_S) -> dict:
        """Poll the Master's status page (bounded) until ``predicate(status)``; return that status."""
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            dead = {name: p.returncode for name, p in self.processes.items() if p.poll() is not None}
            assert not dead, f"exited while waiting for {what}: {dead}\n{self.logs()}"
            try:
                last = self.state()
                if predicate(last):
                    return last
            except OSError as exc:  # the web UI is not up yet
                last = exc
            time.sleep(0.5)
        raise AssertionError(f"no {what} within {timeout:.0f} s; last status: {last}\n{self.logs()}")

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> list[str]:
        """SIGTERM the Workers, then the Master; wait (bounded) for them and every process they
        started (executors, Python workers, TF nodes). SIGKILLs what is left and returns its
        description, so ``[]`` means a clean stop. Safe to call twice."""
        leftovers: list[str] = []
        for name in sorted(self.processes, key=lambda n: n == "master"):  # workers first
            process = self.processes[name]
            if process.poll() is not None:
                continue
            try:
                self._descendants += psutil.Process(process.pid).children(recursive=True)
            except psutil.NoSuchProcess:
                pass
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                leftovers.append(f"{name} (pid {process.pid}) ignored SIGTERM for {timeout:.0f} s")
                process.kill()
                process.wait(10)
        _, alive = psutil.wait_procs(self._descendants, timeout=timeout)
        for child in alive:
            try:
                leftovers.append(f"descendant pid {child.pid} {' '.join(child.cmdline())[:200]} still running")
                child.kill()
            except psutil.NoSuchProcess:
                pass
        self._descendants = []
        return leftovers

    def logs(self, tail: int = 3000) -> str:
        """The end of each daemon's console log, for failure messages."""
        return "\n".join(
            f"--- {path.name} ---\n{path.read_text(errors='replace')[-tail:]}"
            for path in sorted((self.base / "logs").glob("*.out"))
        )


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    """A running standalone cluster with two one-core Workers, shared by this module's tests;
    stopped at teardown (killed if need be), so a failing test leaves no process behind."""
    cluster = StandaloneCluster(tmp_path_factory.mktemp("standalone"), workers=2)
    try:
        cluster.start()
        cluster.wait_for(lambda status: sum(w["state"] == "ALIVE" for w in status["workers"]) == 2, "2 ALIVE workers")
        yield cluster
    finally:
        cluster.stop()


def _submit(cluster: StandaloneCluster, tmp_path: Path, script: str, *args: str) -> str:
    """spark-submit ``script`` to the standalone Master, one core per executor, two executors;
    returns its stdout after checking that the application ran there, an executor on each Worker."""
    before = {app["id"] for app in cluster.state()["completedapps"]}
    command = [
        str(Path(sys.executable).parent / "spark-submit"),
        "--master",
        cluster.master_url,
        "--conf",
        "spark.executor.cores=1",
        "--conf",
        "spark.cores.max=2",
        "--conf",
        "spark.task.cpus=1",
        "--conf",
        "spark.executor.memory=1g",
        "--conf",
        "spark.ui.enabled=false",
        str(ROOT / script),
        *args,
    ]
    result = subprocess.run(command, cwd=tmp_path, env=cluster.env, capture_output=True, text=True, timeout=480)
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-5000:]}\n{cluster.logs()}"
    # The application ran on this Master (not on a cluster the script made up), one executor per Worker.
    status = cluster.wait_for(
        lambda s: {a["id"] for a in s["completedapps"]} - before,
        "completed application on this Master (did the script keep spark-submit's --master?)",
        60,
    )
    (app,) = [a for a in status["completedapps"] if a["id"] not in before]
    assert app["state"] == "FINISHED", app
    executor_dirs = sorted((cluster.base / "work").glob(f"worker*/{app['id']}/*"))
    assert {d.parent.parent.name for d in executor_dirs} == {"worker0", "worker1"}, executor_dirs
    return result.stdout


def _accuracy(stdout: str, rows: int) -> float:
    match = re.search(rf"test accuracy \(distributed inference over {rows} rows\): ([0-9.]+)", stdout)
    assert match, stdout
    return float(match.group(1))


@pytest.mark.timeout(540)
def test_the_demo_trains_two_tf_nodes_on_the_standalone_cluster(standalone, tmp_path):
    """The demo (scripts/demo.sh's job) as spark-submit runs it on a real cluster, with Spark ML's
    MLP beside it; the suite's one run of the demo as users start it (test_packaging runs it from an
    installed wheel with its embedded defaults)."""
    status = standalone.state()
    assert status["status"] == "ALIVE" and status["url"] == standalone.master_url
    assert sorted(w["cores"] for w in status["workers"]) == [1, 1]
    stdout = _submit(
        standalone, tmp_path, "examples/mnist/mnist_tf.py", "--epochs", "3", "--export_dir", str(tmp_path / "export")
    )
    assert "trained on 2 TF nodes" in stdout
    assert (tmp_path / "export" / "saved_model.pb").exists()
    assert _accuracy(stdout, 360) > 0.8
    # Spark ML's best built-in fit for the task, on the same split, printed beside sparkdl's CNN.
    assert re.search(r"sparkdl, CNN on 2 TF nodes: +accuracy 0\.\d{4}", stdout), stdout
    assert re.search(r"Spark ML, MLP 64-128-10: +accuracy 0\.\d{4}", stdout), stdout
    # The console is for people: TensorFlow's C++ and INFO lines stay in the node logs.
    assert not re.search(r"^\[\w+:\d\] [IWE]\d{4} \d\d:|INFO tensorflow:|absl::InitializeLog", stdout, re.M), stdout


@pytest.mark.timeout(180)
def test_the_standalone_cluster_stops_cleanly(standalone):
    """SIGTERM stops the Workers and the Master, their children too, and frees every port."""
    assert {p.poll() for p in standalone.processes.values()} == {None}  # all running until now
    assert standalone.stop() == []
    assert all(p.poll() is not None for p in standalone.processes.values())
    assert [port for port in standalone.ports if _listening(port)] == []
