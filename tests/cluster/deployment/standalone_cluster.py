"""A real Spark standalone cluster for ``test_packaging.py`` (beside it): a Master and Workers
started from pip's pyspark as child processes of the test.

What a user with a small cluster runs, on one machine: every process binds 127.0.0.1, ports are
chosen free, logs and work directories live under the directory it is given. ``stop()`` SIGTERMs
the daemons and waits (bounded) for every process they started, killing what is left; the test's
fixture calls it at teardown, so a failing test still leaves no JVM behind.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import psutil

START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 60.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def listening(port: int) -> bool:
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

    def __init__(self, base: Path, workers: int, environ: dict[str, str]):
        """``environ``: the daemons' environment (their executors and Python workers inherit it),
        to which this adds Spark's own settings; ``self.env`` is the result."""
        self.base = base
        self.spark_home = _spark_home()
        self.port, self.webui_port = _free_port(), _free_port()
        self.worker_ports = [(_free_port(), _free_port()) for _ in range(workers)]  # (rpc, web UI)
        self.env = dict(
            environ,
            SPARK_HOME=str(self.spark_home),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_LOG_DIR=str(base / "logs"),
            SPARK_WORKER_DIR=str(base / "work"),
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
