"""Watching a cluster from a test: wait for a condition (bounded), list the cluster's processes."""

from __future__ import annotations

import time

import psutil

POLL_S = 0.05


def wait_for(predicate, timeout_s: float, what: str):
    """Poll ``predicate`` until it returns something true (returned), or fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(POLL_S)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def cluster_processes(cluster_id: str) -> list[psutil.Process]:
    """Every live process started for this cluster (supervisors and TF processes carry its id)."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        try:
            if cluster_id in " ".join(process.info["cmdline"] or []) and process.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(process)
        except psutil.Error:
            continue
    return found
