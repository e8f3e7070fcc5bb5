"""What every scenario's ``map_fun`` shares: reading its args, writing what it saw, waiting for
a flag file, and ``describe_node`` (the node's view of its cluster).

Node functions live in plain modules beside the tests (on the executors' PYTHONPATH, see
conftest), so node processes import only them, not pytest; each writes what it observed as
JSON into the directory named by its args, for the test to assert on at the driver. This one,
which every scenario uses, is in tests/support/; the scenario families have their own, in their
folder of tests/cluster/: ``cluster_functions.py`` and ``fault_functions.py`` in
``tensorflow_mode/`` (lifecycle, roles, strategies, console, faults), ``feed_functions.py`` in
``spark_mode/`` (feeding and reading), ``streaming_functions.py`` in ``streaming/``,
``column_functions.py`` in ``columns/``, ...; other folders import them by name too.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path


def _arg(args, name):
    """Read ``name`` from a Namespace, a dict or an argv list (``--name value``)."""
    if isinstance(args, dict):
        return args[name]
    if isinstance(args, list):
        return args[args.index(f"--{name}") + 1]
    return getattr(args, name)


def write_whole(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` under another name first, then rename it: a test that waits for
    the file to exist never reads it half-written."""
    partial = Path(f"{path}.partial")
    partial.write_text(text)
    partial.replace(path)


def _write(args, ctx, record: dict, suffix: str = "") -> None:
    out = Path(_arg(args, "out"))
    write_whole(out / f"node{ctx.executor_id}{suffix}.json", json.dumps(record))


def wait_for_file(path: str, timeout_s: float = 120.0) -> bool:
    """Poll for a flag file the test creates (bounded)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if os.path.exists(path):
            return True
        time.sleep(0.05)
    return False


def supervisor_pid(ctx) -> int:
    """The pid of this node's supervisor: its parent, unless a fork server forked the node."""
    import psutil

    label = f"{ctx.job_name}:{ctx.task_index}"
    for process in psutil.process_iter(["cmdline"]):
        command = process.info["cmdline"] or []
        if "sparkdl.node.supervisor" in command and ctx.cluster_id in command and label in command:
            return process.pid
    raise RuntimeError(f"no supervisor process for {label} of cluster {ctx.cluster_id}")


def describe_node(args, ctx):
    """Record ctx fields, the args as received, and the environment sparkdl set."""
    _write(
        args,
        ctx,
        {
            "args_type": type(args).__name__,
            "args_out": _arg(args, "out"),
            "executor_id": ctx.executor_id,
            "worker_num": ctx.worker_num,
            "job_name": ctx.job_name,
            "task_index": ctx.task_index,
            "num_workers": ctx.num_workers,
            "cluster_spec": ctx.cluster_spec,
            "defaultFS": ctx.defaultFS,
            "working_dir": ctx.working_dir,
            "cwd": os.getcwd(),
            "absolute_rel": ctx.absolute_path("models/m1"),
            "absolute_abs": ctx.absolute_path("/data/x"),
            "tf_config": os.environ.get("TF_CONFIG"),
            "legacy_keras": os.environ.get("TF_USE_LEGACY_KERAS"),
            "host": ctx.host,
            "port": ctx.port,
            "pid": os.getpid(),
            "ppid": os.getppid(),
        },
    )
