"""TensorBoard on the driver: it shows the cluster's log dir while the nodes train and after they end.

``TFCluster.start_tensorboard()`` starts a :class:`DriverTensorBoard`. It serves until
``stop_tensorboard()`` or until the driver process ends, so it outlives ``shutdown()``.
``TFCluster.run(tensorboard=True)`` is TensorFlowOnSpark's other TensorBoard: it runs on the
chief's executor and ends with the cluster.

The driver reads the log dir it chose (``TFCluster.run(log_dir=...)``, the nodes' ``ctx.log_dir``),
never a path a node reported. Both must reach it: a shared file system, or a store URL that
TensorBoard reads itself (``gs://``; ``s3://`` and ``hdfs://`` need ``tensorflow-io`` on the driver).

TensorBoard runs as ``python -m sparkdl.driver.tensorboard <driver pid> <TensorBoard's flags>``.
:func:`main` watches the driver's pid from inside TensorBoard's process, then runs
``tensorboard.main``. A parent-death signal would not do: it follows the thread that started the
process, and a notebook's or a caller's thread may end long before the driver.
"""

from __future__ import annotations

import collections
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

from ..common.errors import SparkDLError
from ..common.timeouts import DRIVER_TENSORBOARD_START_S, TENSORBOARD_STOP_WAIT_S, Deadline
from ..node.ports import reserve_port
from ..node.watchdog import watch_pid
from ..storage import parse

#: What is asked to see whether TensorBoard serves (any of its HTTP routes would do).
READY_PATH = "data/environment"
#: Lines of TensorBoard's own output kept for an error message.
OUTPUT_LINES = 20
#: TensorBoard reads these stores itself (``s3`` and ``hdfs`` through ``tensorflow-io``).
READABLE_STORES = ("local", "gcs", "s3", "hdfs")
#: Hosts that mean "every interface": the URL then names this host, the readiness probe loopback.
WILDCARD_HOSTS = ("", "0.0.0.0", "::")


def board_log_dir(log_dir: str | os.PathLike | None) -> str:
    """``log_dir`` as the driver's TensorBoard reads it: a local directory (created if missing) or a
    store URL. ValueError for none, a relative path, or a store TensorBoard cannot read."""
    if not log_dir:
        raise ValueError(
            "TensorBoard needs a log dir the nodes write and the driver reads: pass "
            "TFCluster.run(log_dir=...) (the nodes' ctx.log_dir) or start_tensorboard(log_dir=...)"
        )
    text = os.fspath(log_dir)
    location = parse(text)
    if location.is_local:
        if not (os.path.isabs(text) or text.startswith(("file:", "dbfs:"))):
            raise ValueError(
                f"log_dir {text!r} is relative: each node and the driver would resolve it in its own "
                "working directory; pass an absolute path on a file system they share"
            )
        os.makedirs(location.key, exist_ok=True)
        return location.key
    if location.store not in READABLE_STORES:
        raise ValueError(
            f"TensorBoard cannot read {location.describe()}: use a shared file system, gs://, or "
            "s3:// or hdfs:// with tensorflow-io installed on the driver"
        )
    return location.uri


class DriverTensorBoard:
    """A TensorBoard process of the driver's; :meth:`start` one, :meth:`stop` it."""

    def __init__(self, process: subprocess.Popen, host: str, port: int, log_dir: str, output: collections.deque):
        self.process = process  #: the TensorBoard process (its own process group)
        self.host = host  #: the interface it listens on
        self.port = port  #: its port
        self.log_dir = log_dir  #: the directory or URL it reads
        self._output = output  # the last lines it printed

    @property
    def url(self) -> str:
        """Where it serves, e.g. ``http://127.0.0.1:10234/`` (this host's name when it listens on every interface)."""
        return f"http://{socket.getfqdn() if self.host in WILDCARD_HOSTS else self.host}:{self.port}/"

    @classmethod
    def start(
        cls,
        log_dir: str | os.PathLike | None,
        port: int = 0,
        host: str = "127.0.0.1",
        timeout: float = DRIVER_TENSORBOARD_START_S,
    ) -> "DriverTensorBoard":
        """Start TensorBoard on ``log_dir`` (see :func:`board_log_dir`) and return once it answers
        HTTP. ``port`` 0 picks a free one. SparkDLError when it exits or does not answer within
        ``timeout`` seconds (with the tail of its output); ImportError without TensorBoard."""
        if importlib.util.find_spec("tensorboard") is None:
            raise ImportError(
                "TensorBoard is not installed in the driver's environment: pip install tensorboard "
                "(sparkdl's cpu and gpu extras bring it with TensorFlow)"
            )
        log_dir = board_log_dir(log_dir)
        if not port:
            with reserve_port(host) as sock:
                port = sock.getsockname()[1]
        flags = ["--logdir", log_dir, "--host", host, "--port", str(port)]
        # It imports this module, wherever the driver found sparkdl (an installed wheel or a path).
        package_root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
        process = subprocess.Popen(
            [sys.executable, "-m", __name__, str(os.getpid()), *flags],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,  # its own group: stop() reaches its data server too
        )
        output: collections.deque = collections.deque(maxlen=OUTPUT_LINES)
        threading.Thread(target=_drain, args=(process.stdout, output), name="sparkdl-tensorboard", daemon=True).start()
        board = cls(process, host, port, log_dir, output)
        probe = f"http://{'127.0.0.1' if host in WILDCARD_HOSTS else host}:{port}/{READY_PATH}"
        if not board._wait_until_serving(probe, timeout):
            exited = process.poll() is not None
            board.stop()
            why = f"exited with code {process.returncode}" if exited else f"did not answer within {timeout:g} s"
            raise SparkDLError(f"TensorBoard on {log_dir} {why}; its output:\n" + "\n".join(output))
        return board

    def _wait_until_serving(self, probe: str, timeout: float) -> bool:
        """Whether ``probe`` answered before the process exited or ``timeout`` ran out."""
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through a proxy
        deadline = Deadline(timeout)
        while not deadline.expired():
            try:
                with opener.open(probe, timeout=max(0.1, min(1.0, deadline.remaining()))):
                    return True
            except (OSError, urllib.error.URLError):
                pass
            try:
                self.process.wait(0.25)  # TensorBoard gives no readiness signal but its answer
                return False  # it exited
            except subprocess.TimeoutExpired:
                continue
        return False

    @property
    def pid(self) -> int:
        """TensorBoard's process id."""
        return self.process.pid

    @property
    def running(self) -> bool:
        """Whether TensorBoard's process is still running."""
        return self.process.poll() is None

    @property
    def output(self) -> list[str]:
        """The last lines TensorBoard printed (its warnings and errors)."""
        return list(self._output)

    def stop(self, wait_s: float = TENSORBOARD_STOP_WAIT_S) -> None:
        """End TensorBoard and its data server: SIGTERM, then SIGKILL after ``wait_s`` seconds."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if self.process.poll() is not None:
                return  # ended (its data server ends with it: its stdin closes)
            try:
                os.killpg(self.process.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.process.wait(wait_s)
            except subprocess.TimeoutExpired:
                continue


def _drain(stream, output: collections.deque) -> None:
    """Keep the last lines of TensorBoard's output (a full pipe would stall it), until it ends."""
    with stream:
        for line in stream:
            output.append(line.rstrip())


def main(argv: list[str] | None = None) -> None:
    """TensorBoard's process: ``<driver pid> <TensorBoard's flags>``. It exits once the driver's pid
    is gone, however the driver ended."""
    argv = list(sys.argv[1:] if argv is None else argv)
    driver_pid = int(argv.pop(0))
    watch_pid(driver_pid, lambda: os._exit(0))
    from tensorboard import main as tensorboard_main

    sys.argv = ["tensorboard", *argv]
    tensorboard_main.run_main()


if __name__ == "__main__":
    main()
