"""Warm node starts: TF processes forked from a process that imported TensorFlow once.

Importing TensorFlow costs a node process about 7 CPU-seconds, most of a small node's start-up.
Like PySpark's own ``pyspark.daemon``, which forks Python workers for the executor, a fork
server imports TensorFlow (and tf-keras when the node uses it) once, then forks one TF process
per request; each starts with TensorFlow already in memory. One server serves one executor
and one environment: its key is the Python interpreter, the working directory and the node's
whole environment but ``TF_CONFIG`` and MLflow's switch (:data:`PER_NODE_VARIABLES`), since what
a module reads from the environment at import time is fixed in the server (``TF_USE_LEGACY_KERAS``
counts as TensorFlow reads it: on or off, :func:`server_key`). It leaves when it has had no node
for :data:`IDLE_EXIT_S` seconds, or once its executor JVM exited and its last node ended (it
forks no more from then on: running nodes are their supervisors' to end).

The supervisor (``node/supervisor.py``) asks for its node with :func:`start_node`, which
starts the server first when none answers (one at a time per key: a lock file) and returns
a :class:`ForkedNode`, the part of ``subprocess.Popen`` the supervisor uses. The node is the
server's child: the server reaps it and sends its exit status to the supervisor; the node
watches its supervisor's pid and dies with it (``tf_process.main``) as a spawned one does.

Never used for a node given GPUs (CUDA must not be initialised in a process that forks), nor
where ``SPARKDL_NODE_FORK_SERVER=0`` is in the executor's or the node's environment
(``TFCluster.run(env=...)``): those nodes are started as fresh processes, as is every node
whose server cannot be reached (the reason goes to the supervisor's log).

The wire: an abstract Unix socket (Linux: no file, no stale path, no length limit from
``$TMPDIR``) named for the user and the key. Each side checks that its peer runs as this
user (``SO_PEERCRED``), so nobody else can ask for a node or pose as the server. A request is
one JSON message (argv, environment, working directory, supervisor pid; never pickle) with
the node's four descriptors passed as ``SCM_RIGHTS``; the server answers ``{"pid": ..., "fds":
...}`` (the node's pid and its numbers for those descriptors), then ``{"exit": ...}`` (a
``Popen.returncode``) when the node ends. Anything else (malformed, oversized, too deeply nested,
or not sent within :data:`REQUEST_TIMEOUT_S`) is refused alone: the connection is closed and the
server serves on. A supervisor that hangs up before its node ended (it gave up on the answer, or
died) has its node killed: no node runs that no supervisor holds. Every wait of a supervisor on
a server (connecting, the start lock, the start, the answer) has a deadline.
"""

from __future__ import annotations

import fcntl
import gc
import hashlib
import json
import math
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

from ..common.timeouts import (
    CONNECT_TIMEOUT_S,
    IDLE_EXIT_S,
    LOCK_POLL_S,
    REPLY_TIMEOUT_S,
    REQUEST_TIMEOUT_S,
    START_TIMEOUT_S,
)
from . import keras_policy, watchdog

try:
    from setproctitle import setproctitle
except ImportError:  # a platform without its wheel: forked nodes keep the server's command line
    setproctitle = None

SWITCH = "SPARKDL_NODE_FORK_SERVER"  # "0" in the node's or executor's environment: spawn every node
#: Set in each forked node from its request, not part of the server's key: each node's own
#: ``TF_CONFIG``, and MLflow's switch a KerasEstimator passes to its nodes (``keras/tracking.py``),
#: which only the node's own code reads, after it starts (none of :func:`_preload`'s modules).
PER_NODE_VARIABLES = ("TF_CONFIG", "MLFLOW_ALLOW_FILE_STORE")
MAX_PENDING = 64  # connections waiting for their request beyond which new ones are refused
MAX_MESSAGE_BYTES = 1 << 20
MAX_FDS = 8  # descriptors read with a request (one carries exactly 4)
READY = "sparkdl-fork-server-ready"
_CREDENTIALS = struct.Struct("3i")  # struct ucred: pid, uid, gid
_TIMEVAL = struct.Struct("ll")  # struct timeval: seconds, microseconds


def wanted(env: dict[str, str], gpus: str | None) -> bool:
    """Whether a node with environment ``env`` and GPUs ``gpus`` starts from a fork server."""
    return sys.platform.startswith("linux") and not gpus and env.get(SWITCH, "1") != "0"


def server_key(env: dict[str, str], cwd: str) -> str:
    """The key of the server that may fork a node with ``env`` in ``cwd`` (see the module docstring).

    ``TF_USE_LEGACY_KERAS`` counts by what TensorFlow makes of it at import, on or off: a node where
    it is unset (``TFCluster.run``'s default) and one where it is ``0`` (a Keras 3 model's
    ``KerasEstimator``) share a server, instead of each executor importing TensorFlow once more."""
    legacy = keras_policy.LEGACY_KERAS_ENV
    shared = sorted((name, value) for name, value in env.items() if name not in (*PER_NODE_VARIABLES, legacy))
    blob = json.dumps([sys.executable, cwd, shared, keras_policy.legacy_keras_enabled(env)]).encode()
    return hashlib.sha256(blob).hexdigest()[:24]


def socket_name(key: str) -> bytes:
    """The abstract Unix socket name of the server with ``key`` for this user."""
    return f"\0sparkdl-fork-server-{os.getuid()}-{key}".encode()


def _peer_is_this_user(sock: socket.socket) -> bool:
    _pid, uid, _gid = _CREDENTIALS.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CREDENTIALS.size))
    return uid == os.getuid()


# -- the supervisor's side ---------------------------------------------------------------------


class ForkedNode:
    """A node forked by a fork server: the part of ``subprocess.Popen`` the supervisor uses.

    ``returncode`` follows Popen's convention (negative: the signal that ended it). If the
    server goes away before reporting, the node's process group is killed (it cannot be reaped
    by anyone who reports) and it counts as killed by SIGKILL.
    """

    def __init__(self, connection: socket.socket, pid: int):
        self.pid = pid
        self.returncode: int | None = None
        self.server_lost = False  # its server went away before reporting the node's end
        self._connection = connection
        self._ended = threading.Event()
        threading.Thread(target=self._await_exit, name=f"fork-server-exit-{pid}", daemon=True).start()

    def _await_exit(self) -> None:
        code = None
        try:
            self._connection.settimeout(None)
            message = json.loads(self._connection.recv(MAX_MESSAGE_BYTES) or b"null")
            if isinstance(message, dict) and isinstance(message.get("exit"), int):
                code = message["exit"]
        except (OSError, ValueError):
            pass
        finally:
            self._connection.close()
        if code is None:  # the server is gone: nobody will reap or report the node
            self.server_lost = True
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            code = -signal.SIGKILL
        self.returncode = code
        self._ended.set()

    def poll(self) -> int | None:
        """The exit status, or None while the node runs."""
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the node to end; raises ``subprocess.TimeoutExpired`` after ``timeout`` seconds."""
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(f"sparkdl TF process {self.pid}", timeout)
        return self.returncode


def start_node(
    argv: list[str],
    env: dict[str, str],
    cwd: str,
    fds: dict[str, int],
    *,
    supervisor_pid: int,
    lifetime_pid: int,
    log_dir: str,
) -> tuple[ForkedNode, dict[str, int]]:
    """Fork a node from the server for ``env`` and ``cwd`` (starting that server if needed).

    ``fds`` (``stdin``, ``output``, ``socket``, ``status``) are the node's descriptors; returns
    the node and the numbers they have in it. ``lifetime_pid`` is the executor JVM a new server
    lives and dies with; ``log_dir`` (in a private directory) holds the servers' logs and lock
    files, ``<key>.log`` and ``<key>.lock``. Every wait is bounded (:data:`START_TIMEOUT_S` to
    find or start the server, :data:`REPLY_TIMEOUT_S` for its answer). Raises OSError (or
    RuntimeError) when no server answers in time: the caller spawns instead.
    """
    key = server_key(env, cwd)
    connection = _connect(key) or _connect_or_start(key, env, cwd, lifetime_pid, log_dir)
    try:
        names = sorted(fds)
        request = {"argv": argv, "env": env, "cwd": cwd, "supervisor_pid": supervisor_pid, "fds": names}
        connection.settimeout(REPLY_TIMEOUT_S)
        socket.send_fds(connection, [json.dumps(request).encode()], [fds[name] for name in names])
        reply = json.loads(connection.recv(MAX_MESSAGE_BYTES) or b"null")
        child_fds = reply.get("fds") if isinstance(reply, dict) else None
        if not (
            isinstance(child_fds, dict)  # so the reply is a dict too
            and isinstance(reply.get("pid"), int)
            and all(isinstance(child_fds.get(name), int) for name in names)
        ):
            raise RuntimeError(f"the fork server answered {reply!r}")
    except BaseException:
        connection.close()  # the server kills a node whose supervisor hung up before it ended
        raise
    return ForkedNode(connection, reply["pid"]), child_fds


def _connect(key: str) -> socket.socket | None:
    """A connection to this user's running server for ``key``, or None when none listens.

    Bounded by :data:`CONNECT_TIMEOUT_S` (a server whose backlog is full makes ``connect`` wait):
    raises BlockingIOError then.
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    # A blocking connect waits while the server's backlog is full; the send timeout bounds that wait
    # (a socket timeout would not: a non-blocking connect to a full backlog fails at once).
    seconds = int(CONNECT_TIMEOUT_S)
    timeout = _TIMEVAL.pack(seconds, int((CONNECT_TIMEOUT_S - seconds) * 1e6))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeout)
    try:
        sock.connect(socket_name(key))
    except (ConnectionRefusedError, FileNotFoundError):
        sock.close()
        return None
    except BaseException:
        sock.close()
        raise
    if not _peer_is_this_user(sock):
        sock.close()
        raise PermissionError(f"the fork server socket for key {key} is held by another user")
    return sock


def _connect_or_start(key: str, env: dict[str, str], cwd: str, lifetime_pid: int, log_dir: str) -> socket.socket:
    """A connection to the server for ``key``, which this call starts unless another starts it
    first (one start per key: the lock file); TimeoutError after :data:`START_TIMEOUT_S`."""
    deadline = time.monotonic() + START_TIMEOUT_S
    os.makedirs(log_dir, mode=0o700, exist_ok=True)
    with open(os.path.join(log_dir, f"{key}.lock"), "w") as lock:
        # Not a blocking flock: a starter that hangs must not hang every later node with it.
        while not _try_lock(lock):
            connection = _connect(key)  # the starter holding the lock may have finished
            if connection is not None:
                return connection
            if time.monotonic() >= deadline:
                raise TimeoutError(f"no fork server for key {key} started within {START_TIMEOUT_S:g} s")
            time.sleep(LOCK_POLL_S)  # flock has no timed wait
        return _connect(key) or _start_server(key, env, cwd, lifetime_pid, log_dir, deadline)


def _try_lock(lock) -> bool:
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _start_server(
    key: str, env: dict[str, str], cwd: str, lifetime_pid: int, log_dir: str, deadline: float
) -> socket.socket:
    server_env = {name: value for name, value in env.items() if name not in PER_NODE_VARIABLES}
    with open(os.path.join(log_dir, f"{key}.log"), "ab") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "sparkdl.node.fork_server", key, str(lifetime_pid)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            cwd=cwd,
            env=server_env,
            start_new_session=True,  # outlives this node's supervisor, not the executor
        )
    with server.stdout:  # READY once it listens; nothing (EOF) if it failed
        line = _first_line(server.stdout.fileno(), deadline)
    if line != READY:
        server.kill()
        server.wait()
        raise RuntimeError(f"the fork server did not start (see {log.name})")
    connection = _connect(key)
    if connection is None:
        raise RuntimeError(f"the fork server said it listens but does not (see {log.name})")
    return connection


def _first_line(fd: int, deadline: float) -> str:
    """The first line written to the pipe ``fd``, or what came before EOF or ``deadline``."""
    data = b""
    with selectors.DefaultSelector() as ready:
        ready.register(fd, selectors.EVENT_READ)
        while b"\n" not in data:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not ready.select(remaining):
                break
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
    return data.split(b"\n", 1)[0].decode(errors="replace").strip()


# -- the server --------------------------------------------------------------------------------


def _preload() -> None:
    """Import what every node imports, TensorFlow above all (a node without it still works)."""
    from pyspark import cloudpickle  # noqa: F401 - map_fun's unpickler

    from . import tf_process

    tf_process.configure_logging()  # before TensorFlow: else its logger gets a handler of its own
    try:
        import tensorflow  # noqa: F401

        if keras_policy.legacy_keras_enabled(os.environ):
            import tf_keras  # noqa: F401
    except ImportError as exc:
        print(f"sparkdl fork server: nodes will import TensorFlow themselves: {exc}", file=sys.stderr, flush=True)


def _valid_request(message: object, fds: list[int]) -> bool:
    if not isinstance(message, dict) or set(message) != {"argv", "env", "cwd", "supervisor_pid", "fds"}:
        return False
    argv, env, names = message["argv"], message["env"], message["fds"]
    return (
        isinstance(argv, list)
        and all(isinstance(arg, str) for arg in argv)
        and isinstance(env, dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
        and isinstance(message["cwd"], str)
        and isinstance(message["supervisor_pid"], int)
        and names == ["output", "socket", "status", "stdin"]
        and len(fds) == len(names)
    )


def _read_request(connection: socket.socket) -> tuple[dict, list[int]]:
    """The request waiting on ``connection`` and the descriptors it carries; ValueError (with the
    descriptors closed) for anything but exactly what a supervisor sends: an empty, truncated
    (oversized) or unparsable message, too deeply nested JSON, or the wrong fields or descriptors."""
    data, fds, flags, _addr = socket.recv_fds(connection, MAX_MESSAGE_BYTES, MAX_FDS)
    try:
        if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
            raise ValueError(f"a request over {MAX_MESSAGE_BYTES} bytes or {MAX_FDS} descriptors")
        if not data:
            raise ValueError("a connection closed before its request")
        try:
            message = json.loads(data)
        except RecursionError:  # json's parser recurses once per level of nesting
            raise ValueError("a request nested too deeply") from None
        if not _valid_request(message, fds):
            raise ValueError("a malformed request")
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return message, fds


class _Server:
    """One server's state: its listener, the connections waiting for their request (each with a
    deadline), and its nodes (each with its supervisor's connection, None once that is gone).

    One thread serves everything from one selector, and nothing in it waits on a peer: a request
    is read when it has arrived, whole (one ``SOCK_SEQPACKET`` message), and a connection that
    sends none within :data:`REQUEST_TIMEOUT_S` is closed. Whatever a request holds, it is
    refused alone (the reason in the server's log) and the server goes on serving.
    """

    def __init__(self, key: str, lifetime_pid: int):
        self.key = key
        self.lifetime_pid = lifetime_pid
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.selector = selectors.DefaultSelector()
        self.pending: dict[socket.socket, float] = {}  # connection -> when its request is due
        self.children: dict[int, socket.socket | None] = {}  # pid -> its supervisor's connection
        self.last_active = time.monotonic()

    def serve(self) -> None:
        self.listener.bind(socket_name(self.key))
        self.listener.listen(16)
        self.listener.setblocking(False)
        print(READY, flush=True)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)  # the starting supervisor stops reading
        os.close(devnull)
        # A node's end must reach its supervisor at once (the first failure reported is the
        # cause the driver names): SIGCHLD wakes the loop through a self-pipe.
        self.wakeup_read, self.wakeup_write = os.pipe()
        os.set_blocking(self.wakeup_write, False)
        signal.set_wakeup_fd(self.wakeup_write)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        self.selector.register(self.listener, selectors.EVENT_READ, self.accept)
        self.selector.register(self.wakeup_read, selectors.EVENT_READ, self.wake)
        accepting = True
        while True:
            for event, _ in self.selector.select(self.wait_s()):
                event.data(event.fileobj)
            self.expire_pending()
            self.reap()
            if accepting and not watchdog.pid_alive(self.lifetime_pid):
                # The executor is gone: fork no more, but leave the running nodes to their
                # supervisors, which end them and report why (this server's exit would kill them first).
                self.selector.unregister(self.listener)
                self.listener.close()
                for connection in list(self.pending):
                    self.refuse(connection, "the executor is gone")
                accepting = False
            if self.children:
                self.last_active = time.monotonic()
            elif not accepting or time.monotonic() - self.last_active > IDLE_EXIT_S:
                return

    def wait_s(self) -> float:
        """How long the loop may wait for an event: until the next request is due, at most 0.5 s."""
        due = min(self.pending.values(), default=math.inf) - time.monotonic()
        return max(0.0, min(0.5, due))

    def wake(self, fileobj) -> None:
        os.read(self.wakeup_read, 4096)

    def accept(self, fileobj) -> None:
        """Take a new connection; its request is read once it arrives (:meth:`answer`)."""
        try:
            connection, _ = self.listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:  # out of descriptors or memory: the next try may succeed
            print(f"sparkdl fork server: cannot accept a connection: {exc}", file=sys.stderr, flush=True)
            return
        self.last_active = time.monotonic()
        try:
            this_user = _peer_is_this_user(connection)
        except OSError as exc:
            self.refuse(connection, f"no peer credentials: {exc}")
            return
        if not this_user:
            self.refuse(connection, "a request from another user")
        elif len(self.pending) >= MAX_PENDING:
            self.refuse(connection, f"{MAX_PENDING} connections already wait to send their request")
        else:
            connection.setblocking(False)
            self.pending[connection] = time.monotonic() + REQUEST_TIMEOUT_S
            self.selector.register(connection, selectors.EVENT_READ, self.answer)

    def answer(self, connection: socket.socket) -> None:
        """Read the request that arrived on ``connection``; fork its node, or refuse it."""
        self.selector.unregister(connection)
        del self.pending[connection]
        try:
            request, fds = _read_request(connection)
        except (BlockingIOError, InterruptedError):  # woken for nothing: wait on
            self.pending[connection] = time.monotonic() + REQUEST_TIMEOUT_S
            self.selector.register(connection, selectors.EVENT_READ, self.answer)
            return
        except Exception as exc:  # noqa: BLE001 - whatever a request holds, it is refused alone
            self.refuse(connection, f"{type(exc).__name__}: {exc}")
            return
        try:
            self.start(request, dict(zip(request["fds"], fds)), connection)
        except OSError as exc:  # fork failed (EAGAIN, ENOMEM)
            self.refuse(connection, f"cannot fork: {exc}")
        finally:
            for fd in fds:  # the node has its copies
                os.close(fd)

    def refuse(self, connection: socket.socket, why: object) -> None:
        """Close ``connection`` without an answer (its supervisor starts its node afresh)."""
        print(f"sparkdl fork server: refused a request: {why}", file=sys.stderr, flush=True)
        if connection in self.pending:
            self.selector.unregister(connection)
            del self.pending[connection]
        connection.close()

    def expire_pending(self) -> None:
        now = time.monotonic()
        for connection, due in list(self.pending.items()):
            if now >= due:
                self.refuse(connection, f"no request within {REQUEST_TIMEOUT_S:g} s")

    def start(self, request: dict, fds: dict[str, int], connection: socket.socket) -> None:
        """Fork the node and tell its supervisor; a node whose supervisor cannot be told is killed."""
        pid = self.fork(request, fds, connection)
        self.children[pid] = connection  # tracked from here on: reaped whatever happens next
        try:
            # The node's numbers for its descriptors: the same as the server's received copies.
            connection.send(json.dumps({"pid": pid, "fds": fds}).encode())
        except OSError as exc:
            print(f"sparkdl fork server: killed node {pid}, its supervisor is gone: {exc}", file=sys.stderr, flush=True)
            self.abandon(pid)
            return
        # A supervisor never sends more: the connection becomes readable when it hangs up.
        self.selector.register(connection, selectors.EVENT_READ, self.hung_up)

    def hung_up(self, connection: socket.socket) -> None:
        """A node's supervisor closed its connection (gave up on the answer, or died): nobody
        would take the node's exit status, so the node is killed."""
        pid = next(pid for pid, held in self.children.items() if held is connection)
        try:
            if connection.recv(MAX_MESSAGE_BYTES):
                return  # not a hang-up (a supervisor sends nothing more; ignore what it did)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            pass
        print(f"sparkdl fork server: killed node {pid}, its supervisor hung up", file=sys.stderr, flush=True)
        self.abandon(pid)

    def abandon(self, pid: int) -> None:
        """Kill node ``pid``'s process group and drop its connection; it stays tracked until reaped."""
        connection = self.children[pid]
        self.children[pid] = None
        if connection is not None:
            self.release(connection)
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def release(self, connection: socket.socket) -> None:
        try:
            self.selector.unregister(connection)
        except KeyError:  # not registered (yet)
            pass
        connection.close()

    def fork(self, request: dict, fds: dict[str, int], connection: socket.socket) -> int:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            self.become_node(request, fds, connection)  # never returns
        try:
            os.setpgid(pid, pid)  # also done by the child: whichever runs first, the group exists
        except (PermissionError, ProcessLookupError):
            pass
        return pid

    def become_node(self, request: dict, fds: dict[str, int], connection: socket.socket) -> None:
        code = 1
        try:
            os.setpgid(0, 0)  # its own process group, which the supervisor signals
            signal.set_wakeup_fd(-1)  # a fresh process's signal handling, not the server's
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            os.close(self.wakeup_read)
            os.close(self.wakeup_write)
            # `ps` (and whoever looks for a node) sees the node, not the server. Set before
            # os.environ changes: setproctitle relocates the environment on its first call.
            if setproctitle is not None:
                setproctitle(" ".join(request["argv"]))
            # The server's sockets are not the node's: its supervisor must see EOF when the server goes.
            held = [self.listener, connection, *self.pending, *self.children.values()]
            for sock in held:
                if sock is not None:
                    sock.close()
            self.selector.close()
            os.dup2(fds["stdin"], 0)
            os.dup2(fds["output"], 1)
            os.dup2(fds["output"], 2)
            for name in ("stdin", "output"):
                os.close(fds[name])
            for fd in (fds["socket"], fds["status"]):
                os.set_inheritable(fd, False)
            os.environ.clear()
            os.environ.update(request["env"])
            os.chdir(request["cwd"])
            sys.argv = list(request["argv"])
            if sys.path and sys.path[0] != request["cwd"]:
                sys.path[0] = request["cwd"]  # as for ``python -m`` started there
            if "numpy" in sys.modules:  # forked nodes must not share the server's random state
                sys.modules["numpy"].random.seed()
            from . import tf_process

            code = tf_process.main(supervisor_pid=request["supervisor_pid"])
        except BaseException:  # noqa: BLE001 - reported by the exit status and the node log
            import traceback

            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

    def reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            connection = self.children.pop(pid, None)
            if connection is not None:
                code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
                try:
                    connection.send(json.dumps({"exit": code}).encode())
                except OSError:
                    pass
                self.release(connection)
            self.last_active = time.monotonic()


def main() -> int:
    """``python -m sparkdl.node.fork_server KEY LIFETIME_PID``: import, listen, fork nodes until idle."""
    key, lifetime_pid = sys.argv[1], int(sys.argv[2])
    _preload()
    # What the imports made lives as long as the nodes: out of the cyclic collector's reach, a
    # node's full collections no longer walk TensorFlow's ~400k objects (0.24-0.32 s each, in the
    # middle of an epoch) nor write to their headers, so fewer pages are copied after the fork
    # (CPython's advice for a process that forks: gc.freeze()). Import-time garbage goes first.
    gc.collect()
    gc.freeze()
    _Server(key, lifetime_pid).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
