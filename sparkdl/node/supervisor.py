"""Entry point of a node's supervisor: ``python -m sparkdl.node.supervisor``.

One supervisor per TF node. It registers the node with the driver over the authenticated
channel, receives the cluster spec, starts TensorBoard when asked, starts the TF process (its
child, or forked by the executor's fork server, ``fork_server.py``; either way it dies with the
supervisor), and reports to the driver how it ended: exit code or signal, the
remote traceback and the tail of the node's log. It stops the TF process when the
driver says so, when the driver goes away, or when its anchor process (the Spark task that
launched it, or the executor JVM in SPARK input mode) disappears.

It never imports TensorFlow, so it starts fast and cannot be wedged by it.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from ..common import roles
from ..common.timeouts import C_DUMP_WAIT_S, PYTHON_DUMP_WAIT_S, STOP_GRACE_MIN_S, TENSORBOARD_START_TIMEOUT_S
from ..transport import protocol
from ..transport.channel import Channel, ChannelError, Endpoint, connect
from . import fork_server, keras_policy, watchdog
from .config import NodeConfig, ProcessConfig
from .console import ConsoleFilter
from .launch import FAILED, READY, executor_jvm_pid, user_root
from .log_mirror import LogMirror
from .logs import NodeLog, log_tail
from .ports import reserve_port


def wait_for_port(host: str, port: int, process: subprocess.Popen, timeout_s: float) -> bool:
    """Poll until ``host:port`` accepts connections, the process exits, or time runs out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with socket.create_connection((host, port), timeout=1):
                return True
        except OSError:
            time.sleep(0.2)  # TensorBoard gives no readiness signal but its open port
    return False


class Supervisor:
    """Runs one node from registration to its reported end. See the module docstring."""

    def __init__(self, config: NodeConfig):
        self.cfg = config
        self.role = config.role
        self.node_dir = Path(config.node_dir)
        self.log_path = self.node_dir / "node.log"
        self.error_path = self.node_dir / "error.json"
        self.child: subprocess.Popen | fork_server.ForkedNode | None = None
        self.tensorboard: subprocess.Popen | None = None
        self.log_mirror: LogMirror | None = None
        self.node_log: NodeLog | None = None
        self.status_relay: threading.Thread | None = None
        self.channel: Channel | None = None
        self.stop_requested = threading.Event()
        self.failure_cause: str | None = None  # why this supervisor killed the node, if it was a failure
        self.executor_lost = False  # the node's anchor (its executor JVM or Spark task) went away
        self.stalled = False
        self.reported = False  # the end was reported to the driver
        self.lost_driver = False  # the driver went away before that
        self.stack_dump_offset = 0  # where a stalled node's stack dump starts in its log

    # -- talking to the launching task (stdout) and to the driver (channel) --

    @staticmethod
    def announce(line: str) -> None:
        """Tell the launching Spark task how start-up went (it may have stopped listening)."""
        try:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
        except (BrokenPipeError, ValueError):
            pass

    def send(self, message: protocol.Message) -> None:
        """Send to the driver; a lost driver is handled by the receive loop, not here."""
        try:
            self.channel.send(message.wire())
        except (OSError, ChannelError):
            pass

    # -- lifecycle --

    def run(self) -> int:
        """Register, run the node, report; returns the supervisor's exit status."""
        launch = self.cfg.launch
        watchdog.watch_pid(self.cfg.anchor_pid, self.on_anchor_exit)
        try:
            self.channel = connect(
                launch.driver_address, launch.secret, endpoint=Endpoint.coordinator(launch.cluster_id)
            )
        except (OSError, ChannelError) as exc:
            self.announce(f"{FAILED} cannot reach the sparkdl driver at {launch.driver_address}: {exc}")
            return 2
        host = self.channel.local_address
        tf_socket = reserve_port(host)
        tb_socket = reserve_port(host) if self.cfg.tensorboard else None
        self.send(
            protocol.Register(
                node_number=self.role.node_number,
                host=host,
                port=tf_socket.getsockname()[1],
                pid=os.getpid(),
                anchor_pid=self.cfg.anchor_pid,
                spark_executor=self.cfg.spark_executor,
                gpus=self.cfg.gpus,
                log_path=str(self.log_path),
            )
        )
        try:
            reply = protocol.parse(
                self.channel.recv(timeout=launch.settings.reservation_timeout + 30),
                protocol.ClusterSpec,
                protocol.Abort,
            )
        except ChannelError as exc:  # ProtocolError included
            self.announce(f"{FAILED} no cluster spec from the driver: {exc}")
            return 3
        if isinstance(reply, protocol.Abort):
            self.announce(f"{FAILED} registration refused: {reply.reason}")
            return 3
        cluster_spec = reply.cluster_spec
        if tb_socket is not None:
            self.start_tensorboard(host, tb_socket)
        self.start_child(cluster_spec, host, tf_socket)
        if self.cfg.log_store and self.cfg.log_dir:
            Path(self.cfg.log_dir).mkdir(parents=True, exist_ok=True)
            kept = f"{self.cfg.log_store.rstrip('/')}/sparkdl-nodes/{self.cfg.launch.cluster_id}/{self.node_dir.name}"
            self.log_mirror = LogMirror(
                self.cfg.log_dir, self.cfg.log_store, self.cfg.settings.storage, (str(self.node_dir), kept)
            ).start()
        tf_socket.close()  # the child holds its own copy until it releases the port
        self.send(protocol.Started(self.child.pid))
        self.announce(READY)
        sys.stdout.close()
        threading.Thread(target=self.receive_loop, name="driver-commands", daemon=True).start()
        return self.wait_child(cluster_spec)

    def start_tensorboard(self, host: str, tb_socket: socket.socket) -> None:
        """Start TensorBoard on the reserved port and tell the driver its URL once it answers."""
        port = tb_socket.getsockname()[1]
        log_dir = self.cfg.log_dir
        if "://" not in log_dir:  # a local directory; TensorBoard reads remote URLs itself
            Path(log_dir).mkdir(parents=True, exist_ok=True)
        tb_socket.close()
        with open(self.node_dir / "tensorboard.log", "ab") as tb_log:
            self.tensorboard = subprocess.Popen(
                [sys.executable, "-m", "tensorboard.main", "--logdir", log_dir, "--host", host, "--port", str(port)],
                stdout=tb_log,
                stderr=subprocess.STDOUT,
                preexec_fn=watchdog.die_with_parent,
                env=self.child_env({}),
            )
        if wait_for_port(host, port, self.tensorboard, TENSORBOARD_START_TIMEOUT_S):
            self.send(protocol.TensorBoard(f"http://{host}:{port}"))
        else:
            tail = log_tail(self.node_dir / "tensorboard.log", 10)
            self.send(protocol.NodeWarning(f"TensorBoard did not start: {tail}"))

    def child_env(self, extra: dict) -> dict:
        """The environment of processes this supervisor starts."""
        env = dict(os.environ)
        env.update(self.cfg.env)
        env.update(extra)
        env["PYTHONPATH"] = self.cfg.pythonpath
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def start_child(self, cluster_spec: dict, host: str, tf_socket: socket.socket) -> None:
        """Start the TF process with its final environment and hand it the launch payload:
        forked from this executor's fork server (``fork_server.py``) where one may serve it,
        else a fresh process."""
        extra = {}
        if self.cfg.settings.set_tf_config:
            extra["TF_CONFIG"] = roles.tf_config(cluster_spec, self.role.job_name, self.role.task_index)
        env = self.child_env(extra)
        # The arguments only label the process for `ps`: which cluster and node it is.
        argv = [sys.executable, "-m", "sparkdl.node.tf_process", "--cluster", self.cfg.launch.cluster_id]
        argv += ["--node", self.role.label]
        status_read, status_write = os.pipe()
        output_read, output_write = os.pipe()
        fds = {"socket": tf_socket.fileno(), "status": status_write}
        # From here on, ``fds`` holds the numbers the TF process has these descriptors under.
        self.child, payload, fds = self._fork_child(argv, env, fds, output_write) or self._spawn_child(
            argv, env, fds, output_write
        )
        os.close(status_write)
        os.close(output_write)
        config = ProcessConfig(
            node=self.cfg,
            cluster_spec=cluster_spec,
            host=host,
            port=tf_socket.getsockname()[1],
            socket_fd=fds["socket"],
            status_fd=fds["status"],
            error_path=str(self.error_path),
        )
        forward = self.forward_lines if self.cfg.settings.stream_logs else None
        self.console_filter = ConsoleFilter(self.cfg.settings.verbose_logs)  # one per TF process: it keeps state
        self.node_log = NodeLog(self.log_path, output_read, forward)
        self.node_log.start()
        with payload:
            payload.write(pickle.dumps(config))
        self.status_relay = threading.Thread(
            target=self.relay_status, args=(status_read,), name="node-status", daemon=True
        )
        self.status_relay.start()

    def _spawn_child(self, argv: list[str], env: dict, fds: dict[str, int], output: int):
        """A fresh TF process: (process, its stdin, its descriptor numbers)."""
        child = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=output,
            stderr=subprocess.STDOUT,
            cwd=self.cfg.working_dir,
            env=env,
            pass_fds=tuple(fds.values()),
            process_group=0,
        )
        return child, child.stdin, fds

    def _fork_child(self, argv: list[str], env: dict, fds: dict[str, int], output: int):
        """A TF process forked by the fork server (same result as ``_spawn_child``), or None
        when the node may not use one or none answers (the reason goes to this log)."""
        if not fork_server.wanted(env, self.cfg.gpus):
            return None
        stdin_read, stdin_write = os.pipe()
        try:
            # The executor JVM, which a server outlives nodes to serve (in SPARK mode, the anchor).
            lifetime_pid = self.cfg.anchor_pid if self.cfg.settings.feeds else executor_jvm_pid()
            child, child_fds = fork_server.start_node(
                argv,
                env,
                self.cfg.working_dir,
                {**fds, "stdin": stdin_read, "output": output},
                supervisor_pid=os.getpid(),
                lifetime_pid=lifetime_pid,
                log_dir=str(user_root() / "fork-servers"),  # pruned as a cluster directory is
            )
        except (OSError, RuntimeError, ValueError) as exc:
            print(f"sparkdl supervisor: no fork server ({exc}); starting the TF process afresh", file=sys.stderr)
            os.close(stdin_write)
            return None
        finally:
            os.close(stdin_read)
        return child, os.fdopen(stdin_write, "wb"), child_fds

    def forward_lines(self, lines: list[str]) -> None:
        """Send the TF process's lines to the driver's console, TensorFlow's chatter (and the
        traceback the driver's error shows) left out unless verbose (``console.ConsoleFilter``)."""
        lines = self.console_filter(lines)
        if lines:
            self.send(protocol.Log(lines))

    def relay_status(self, fd: int) -> None:
        """Forward the TF process's events (protocol.NODE_EVENTS, e.g. Serving) to the driver."""
        with os.fdopen(fd) as events:
            for line in events:
                try:
                    event = protocol.parse(json.loads(line), *protocol.NODE_EVENTS)
                except (ValueError, ChannelError) as exc:  # map_fun's process wrote it: relay only sparkdl's events
                    print(f"sparkdl supervisor: ignored a malformed node event: {exc}", file=sys.stderr, flush=True)
                    continue
                self.send(event)

    def receive_loop(self) -> None:
        """Obey the driver's 'stop' and 'stall'; treat a lost driver as a stop too."""
        while True:
            try:
                message = self.channel.recv()
            except ChannelError:
                if not self.reported:
                    self.lost_driver = not self.stop_requested.is_set()  # a stop in progress is not a loss
                    self.kill_child("lost the connection to the sparkdl driver")
                return
            try:
                command = protocol.parse(message, protocol.Stop, protocol.Stall)
            except ChannelError as exc:
                print(f"sparkdl supervisor: ignored a message from the driver: {exc}", file=sys.stderr, flush=True)
                continue
            if isinstance(command, protocol.Stop):
                self.stop_child(command.grace_s)
            else:
                self.end_stalled_child(command.reason)

    def on_anchor_exit(self) -> None:
        """The Spark task or executor JVM that hosted this node is gone: end the node as failed."""
        what = "Spark executor JVM" if self.cfg.settings.feeds else "Spark task process"
        self.executor_lost = True
        self.kill_child(
            f"its {what} (pid {self.cfg.anchor_pid}) exited: the executor was lost or the task was killed",
            failure=True,
        )

    def end_stalled_child(self, reason: str) -> None:
        """Have the stalled node dump its Python stacks into its log, then end it (a reported failure).

        The node's dump handlers end the process once the dump is written (tf_process), so its
        exit says the dump is complete; ``wait_child`` reads it once the log has drained. A node
        that answers neither signal in time is killed without one.
        """
        child = self.child
        if child is None or child.poll() is not None:
            return
        self.stalled = True
        self.failure_cause = self.failure_cause or reason  # even if the node dies during the dump
        self.stack_dump_offset = self._log_size()
        for sig, wait_s in ((signal.SIGUSR2, PYTHON_DUMP_WAIT_S), (signal.SIGUSR1, C_DUMP_WAIT_S)):
            if child.poll() is not None:
                break
            try:
                os.kill(child.pid, sig)
                child.wait(timeout=wait_s)
                break
            except ProcessLookupError:
                break
            except subprocess.TimeoutExpired:
                continue
        self.kill_child(reason, failure=True)

    def _read_log_from(self, offset: int, max_bytes: int = 16384) -> str:
        try:
            with open(self.log_path, "rb") as log:
                log.seek(offset)
                return log.read(max_bytes).decode(errors="replace")
        except OSError:
            return ""

    def _log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def stop_child(self, grace_s: float) -> None:
        """SIGTERM the TF process group, then SIGKILL after the grace period."""
        self.stop_requested.set()
        child = self.child
        if child is None or child.poll() is not None:
            return
        self._signal_group(signal.SIGTERM)
        try:
            child.wait(timeout=max(grace_s, STOP_GRACE_MIN_S))
        except subprocess.TimeoutExpired:
            self._signal_group(signal.SIGKILL)

    def kill_child(self, reason: str, failure: bool = False) -> None:
        """Kill the TF process group at once (its anchor or the driver is gone, or it stalled).

        ``failure`` makes the report say the node failed, with ``reason`` as the cause.
        """
        print(f"sparkdl supervisor: {reason}; killing the TF process", file=sys.stderr, flush=True)
        if failure:
            self.failure_cause = self.failure_cause or reason
        else:
            self.stop_requested.set()
        self._signal_group(signal.SIGKILL)
        if self.tensorboard is not None:
            self.tensorboard.kill()
        if self.child is None:
            os._exit(4)

    def _signal_group(self, sig: int) -> None:
        if self.child is not None and self.child.poll() is None:
            try:
                os.killpg(self.child.pid, sig)
            except ProcessLookupError:
                pass

    def wait_child(self, cluster_spec: dict) -> int:
        """Wait for the TF process, report how it ended, and clean up."""
        code = self.child.wait()
        if isinstance(self.child, fork_server.ForkedNode) and self.child.server_lost:  # its server killed it
            lost = "the fork server that forked it exited first (see its log in sparkdl's fork-servers/ directory)"
            self.failure_cause = self.failure_cause or lost
        # Reap the rest of the node's process group: nothing it started may outlive it.
        try:
            os.killpg(self.child.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        shutil.rmtree(self.cfg.cache_dir, ignore_errors=True)  # however the node ended
        if self.tensorboard is not None:
            self.tensorboard.terminate()
        self.node_log.finish()  # every line in the file and at the driver before the end is reported
        if self.log_mirror is not None:
            self.log_mirror.stop()  # the last summaries and the whole node log reach the store before the end
        self.status_relay.join(5)  # and every status event (e.g. the last progress report)
        failed = self.failure_cause is not None or (code != 0 and not self.stop_requested.is_set())
        failure = {}
        if failed:
            try:
                trace = json.loads(self.error_path.read_text())["traceback"]
            except (OSError, ValueError, KeyError):
                dump = self._read_log_from(self.stack_dump_offset) if self.stalled else ""  # all of it: the log drained
                trace = f"Python stacks of the node when it was stopped:\n{dump}" if dump else ""
            failure = {
                "traceback": trace,
                "log_tail": log_tail(self.log_path),
                "hint": keras_policy.failure_hint(trace, self.child_env({}), roles.count_workers(cluster_spec)),
            }
        report = protocol.Exited(
            exit_code=code if code >= 0 else None,
            signal=signal.Signals(-code).name if code < 0 else None,
            stopped=not failed,
            failed=failed,
            cause=self.failure_cause or "",
            stalled=self.stalled,
            log_path=str(self.log_path),
            executor_lost=self.executor_lost and failed,
            **failure,
        )
        self.reported = True
        self.send(report)
        self.channel.close()
        # A supervisor that lost its driver did not finish its job: say so to whoever watches it.
        return 1 if failed or self.lost_driver else 0


def main() -> int:
    """Read the launch config from stdin (a pipe from the launching task) and supervise."""
    config = pickle.load(sys.stdin.buffer)  # from the launching task, our parent (never a socket)
    sys.stdin.close()
    if not isinstance(config, NodeConfig):
        print(f"sparkdl supervisor: expected a NodeConfig on stdin, got {type(config).__name__}", file=sys.stderr)
        return 2
    return Supervisor(config).run()


if __name__ == "__main__":
    sys.exit(main())
