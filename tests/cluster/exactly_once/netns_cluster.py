"""A standalone Spark cluster whose workers sit on hosts of their own, on one machine.

``local-cluster`` puts every executor on one host, and Spark never starts a speculative copy of a
task on a host already running an attempt of it, so speculation cannot be seen there. Here each
worker runs in a network namespace of its own, joined to a bridge by a veth pair: the master and
the driver use the bridge's address, each worker its namespace's. Every address is on a private
/24 that exists only inside what this module made; teardown kills the processes it started and
deletes the namespaces and the bridge. Needs root and ``ip`` (tests skip otherwise).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

SUBNET = "10.231.77"  # a /24 that only these namespaces and their bridge use
READY_TIMEOUT_S = 90.0


@dataclass(frozen=True)
class StandaloneCluster:
    """Where the driver finds the cluster and which address it must use itself; ``kill_host`` and
    ``start_worker`` take a worker's host away for good and bring a worker back on it."""

    master_url: str
    driver_host: str
    worker_hosts: tuple[str, ...]
    namespaces: tuple[str, ...] = ()
    work_dir: Path | None = None
    cores: int = 1
    memory_mb: int = 1024
    processes: list = field(default_factory=list)  # what teardown kills

    def kill_host(self, index: int) -> None:
        """Everything on worker ``index``'s host dies at once: its Worker, executors and TF nodes."""
        _kill_namespace(self.namespaces[index])

    def start_worker(self, index: int) -> None:
        """Start a Worker again on host ``index`` (it registers with the master in a few seconds)."""
        self.processes.append(_start_worker(self, index, f"worker{index}-again"))


def unavailable() -> str | None:
    """Why namespaced workers cannot be made here (None: they can)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "the ip command (iproute2) is missing"
    return None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


def _spark_class() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


def _alive_workers(web_url: str) -> int:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through a proxy
    try:
        with opener.open(f"{web_url}/json", timeout=5) as page:
            return int(json.load(page).get("aliveworkers", 0))
    except OSError:
        return 0


@contextlib.contextmanager
def namespaced_standalone(work_dir: Path, workers: int = 2, cores: int = 1, memory_mb: int = 1024):
    """Start a master on a bridge and ``workers`` workers, each in its own namespace; yield the
    :class:`StandaloneCluster`, then tear everything down, however the body ended."""
    tag = str(os.getpid() % 100000)
    bridge, driver_host = f"sdlbr{tag}", f"{SUBNET}.1"
    namespaces = [f"sdl{tag}w{i}" for i in range(workers)]
    hosts = tuple(f"{SUBNET}.{10 + i}" for i in range(workers))
    processes: list[subprocess.Popen] = []
    try:
        _ip("link", "add", bridge, "type", "bridge")
        _ip("addr", "add", f"{driver_host}/24", "dev", bridge)
        _ip("link", "set", bridge, "up")
        for index, (namespace, host) in enumerate(zip(namespaces, hosts)):
            outside, inside = f"sdl{tag}v{index}", f"sdl{tag}p{index}"
            _ip("netns", "add", namespace)
            _ip("link", "add", outside, "type", "veth", "peer", "name", inside)
            _ip("link", "set", inside, "netns", namespace)
            _ip("link", "set", outside, "master", bridge)
            _ip("link", "set", outside, "up")
            _ip("netns", "exec", namespace, "ip", "addr", "add", f"{host}/24", "dev", inside)
            _ip("netns", "exec", namespace, "ip", "link", "set", inside, "up")
            _ip("netns", "exec", namespace, "ip", "link", "set", "lo", "up")
        port, web_port = 7177, 8180
        master_log = open(work_dir / "master.log", "wb")
        processes.append(
            subprocess.Popen(
                [_spark_class(), "org.apache.spark.deploy.master.Master", "--host", driver_host]
                + ["--port", str(port), "--webui-port", str(web_port)],
                stdout=master_log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, "SPARK_LOCAL_IP": driver_host},
            )
        )
        master_url = f"spark://{driver_host}:{port}"
        cluster = StandaloneCluster(
            master_url, driver_host, hosts, tuple(namespaces), work_dir, cores, memory_mb, processes
        )
        for index in range(workers):
            processes.append(_start_worker(cluster, index, f"worker{index}"))
        deadline = time.monotonic() + READY_TIMEOUT_S
        while _alive_workers(f"http://{driver_host}:{web_port}") < workers:
            if time.monotonic() > deadline or any(p.poll() is not None for p in processes):
                raise RuntimeError(f"the namespaced Spark cluster did not start: see the logs in {work_dir}")
            time.sleep(0.5)  # polling the master's status page (a bounded wait for readiness)
        yield cluster
    finally:
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)  # the JVM and the executors it started
            process.wait(30)
        for namespace in namespaces:
            _kill_namespace(namespace)
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True, timeout=30)
        subprocess.run(["ip", "link", "del", bridge], capture_output=True, timeout=30)


def _start_worker(cluster: StandaloneCluster, index: int, name: str) -> subprocess.Popen:
    """A standalone Worker in host ``index``'s namespace, its files under ``work_dir/name``."""
    worker_dir = cluster.work_dir / name
    worker_dir.mkdir()
    log = open(cluster.work_dir / f"{name}.log", "wb")
    host = cluster.worker_hosts[index]
    return subprocess.Popen(
        ["ip", "netns", "exec", cluster.namespaces[index], _spark_class(), "org.apache.spark.deploy.worker.Worker"]
        + ["--host", host, "--cores", str(cluster.cores), "--memory", f"{cluster.memory_mb}M"]
        + ["--work-dir", str(worker_dir), cluster.master_url],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, "SPARK_LOCAL_IP": host},
    )


def _kill_namespace(namespace: str) -> None:
    """Kill what still runs inside ``namespace`` (an executor or TF node that outlived its worker)."""
    found = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True, timeout=10)
    for pid in found.stdout.split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
