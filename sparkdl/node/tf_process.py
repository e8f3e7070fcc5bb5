"""Entry point of the TensorFlow node process: ``python -m sparkdl.node.tf_process``.

Started by the node supervisor with the environment already final (TF_CONFIG,
CUDA_VISIBLE_DEVICES, TF_USE_LEGACY_KERAS), so TensorFlow sees the right devices and Keras
when ``map_fun`` first imports it; or forked by a fork server (``fork_server.py``), which calls
:func:`main` in the forked process. Reads its ProcessConfig (node/config.py) from stdin (a pipe from its
supervisor, never a socket), runs ``map_fun(args, ctx)``, sends its return value to the driver
when asked (``return_value.py``), and on failure writes the traceback as JSON to the file the
supervisor named before exiting with status 1.
"""

from __future__ import annotations

import faulthandler
import json
import logging
import os
import pickle
import signal
import socket
import sys
import threading
import traceback

from ..transport import protocol
from . import keras_policy, return_value, watchdog
from .config import ProcessConfig
from .console import FAILURE_LINE
from .context import NodeContext


def _status_writer(fd: int):
    """A thread-safe writer of node events (protocol.NODE_EVENTS), one JSON line each, to the
    supervisor (called from map_fun and tf.data threads)."""
    stream = os.fdopen(fd, "w", buffering=1)
    lock = threading.Lock()

    def write(event: protocol.Message) -> None:
        line = json.dumps(event.wire(), default=str) + "\n"
        with lock:
            try:
                stream.write(line)
            except (BrokenPipeError, ValueError):
                pass  # the supervisor is gone; the parent watch ends this process

    return write


def _dump_stacks_and_end(signum, frame) -> None:
    """Write every thread's Python stack to stderr (the node log), then end the process by
    ``signum``: SIGUSR2's handler, asked for only by the supervisor of a stalled node.

    A Python-level handler holds the GIL, so unlike faulthandler it never reads a running
    thread's state (faulthandler's all-threads dump can crash the node when other threads run,
    e.g. the feed server decoding batches). It runs as soon as the main thread executes
    bytecode or is in an interruptible wait (sleep, lock, I/O). Ending the process is how the
    supervisor learns that the dump is complete.
    """
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    parts = []
    for ident, top in sys._current_frames().items():
        parts.append(f"Thread {ident:#x} ({names.get(ident, 'unnamed')}, most recent call last):\n")
        parts.extend(traceback.format_stack(top))
    # os.write, not sys.stderr: the interrupted code may be inside a write to sys.stderr.
    dump = memoryview("".join(parts).encode(errors="replace"))
    while dump:
        dump = dump[os.write(2, dump) :]
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _write_error(path: str, text: str, exc: BaseException) -> None:
    with open(path, "w") as out:
        json.dump({"traceback": text, "type": type(exc).__name__}, out)


def configure_logging() -> None:
    """The node's Python logging: INFO and up to stderr (the node log, and the driver's console
    through the supervisor's filter) in one format, that of every logger, TensorFlow's included.

    Called before anything imports TensorFlow: in :func:`main`, and by a fork server before its
    preload. TensorFlow's logger takes a handler of its own (``INFO:tensorflow:...``, a format
    the console filter does not know) when it is first used while the root logger has none.
    """
    if not logging.getLogger().handlers:  # map_fun's logging reaches the node log (and the driver)
        logging.basicConfig(
            level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )


def main(supervisor_pid: int | None = None) -> int:
    """Run one node's ``map_fun``; the exit status says whether it succeeded.

    ``supervisor_pid``: the node's supervisor when that is not its parent (a node forked by
    ``fork_server.py``, whose parent is the server); the node dies with either.
    """
    watchdog.die_with_parent()
    watchdog.watch_pid(supervisor_pid or os.getppid(), lambda: os._exit(70))
    # A stalled node is asked for every thread's Python stack in its log: SIGUSR2 first (safe), then
    # SIGUSR1 (faulthandler, from C, so even a node wedged in C code with the main thread never
    # returning to Python answers) if SIGUSR2 got no answer. Either ends the process once its dump
    # is written (faulthandler chains to SIGUSR1's default action), which tells the supervisor so.
    signal.signal(signal.SIGUSR2, _dump_stacks_and_end)
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True, chain=True)
    configure_logging()

    config = pickle.load(sys.stdin.buffer)  # a pipe from our supervisor (never a socket)
    if not isinstance(config, ProcessConfig):
        raise SystemExit(f"sparkdl: expected a ProcessConfig on stdin, got {type(config).__name__}")
    launch = config.node.launch
    try:
        from pyspark import cloudpickle  # the same pickler Spark used to ship map_fun

        map_fun, tf_args = cloudpickle.loads(launch.settings.fn)
        tmp_socket = socket.socket(fileno=config.socket_fd)  # the node's TF port, reserved until released
        feed_server = None
        if launch.settings.feeds:
            from ..feed.server import FeedServer
            from ..transport.channel import Endpoint

            feed_server = FeedServer(
                launch.secret,
                config.host,
                launch.settings.feed_queue_bytes,
                cache_dir=config.node.cache_dir,
                endpoint=Endpoint.feed(launch.cluster_id, config.node.node_number),
            )
        ctx = NodeContext.from_config(config, tmp_socket, _status_writer(config.status_fd), feed_server)
        if feed_server is not None:
            feed_server.notify = ctx.report
            feed_server.progress = lambda: ctx.report_progress(
                rows_received=feed_server.rows_received, rows_read=feed_server.rows_read
            )
            ctx.report(protocol.FeedReady(feed_server.address[1]))
        warnings, error = keras_policy.prepare_node(os.environ, ctx.num_workers)
        for warning in warnings:
            print(f"sparkdl: WARNING: {warning}", file=sys.stderr, flush=True)
        if error:
            raise RuntimeError(error)
        if launch.settings.release_port:
            ctx.release_port()
        print(f"sparkdl: starting map_fun on {ctx!r}", flush=True)
        result = map_fun(tf_args, ctx)
        if launch.settings.return_results == "all" or ctx.is_chief:
            ctx.report(protocol.Result(return_value.as_json(result)))
    except BaseException as exc:  # noqa: BLE001 - everything must reach the driver
        text = traceback.format_exc()
        # One line for the driver's console, then the traceback, for node.log: the driver shows
        # the traceback once, in the error it raises (node/console.py).
        error = traceback.format_exception_only(exc)[-1].strip()
        print(f"{FAILURE_LINE}{error} (its traceback is in this node's log)", file=sys.stderr)
        print(text, file=sys.stderr, flush=True)
        _write_error(config.error_path, text, exc)
        return 1
    return 0


if __name__ == "__main__":
    code = main()
    # os._exit skips interpreter teardown, where TensorFlow's background threads (e.g. tf.data
    # autotuning, gRPC) can stall a finished node for tens of seconds.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
