"""Load: clusters in a row in one driver leak nothing; large and many-partition feeds stay in bounded memory
(those two are the slow tier: ``scripts/test.sh --slow``).

Counts and peak RSS figures are printed (``pytest -s``) for the reliability report.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from sparkdl import TFCluster

import feed_functions as feed_fns
import node_functions as nf

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from feed_memory import RssSampler  # noqa: E402  (the benchmark's sampler, reused)

pytestmark = pytest.mark.timeout(600)
# Five clusters in a row: a leak of one fd, socket or thread per cluster exceeds the margins below.
CLUSTERS = 5
SPARK = TFCluster.InputMode.SPARK
MiB = 2**20


def _sparkdl_processes(fork_servers: bool = False) -> list[psutil.Process]:
    """sparkdl's live node processes (supervisors, TF processes) on the machine, or its fork
    servers (``node/fork_server.py``: one per executor and environment, meant to outlive clusters)."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        try:
            command = " ".join(process.info["cmdline"] or [])
            if (
                "sparkdl.node." in command
                and ("sparkdl.node.fork_server" in command) == fork_servers
                and process.info["status"] != psutil.STATUS_ZOMBIE
            ):
                found.append(process)
        except psutil.Error:
            continue
    return found


def _sparkdl_threads(known: frozenset = frozenset()) -> list[threading.Thread]:
    """sparkdl's threads in this driver, but those in ``known``."""
    return [t for t in threading.enumerate() if t.name.startswith(("sparkdl", "watch-pid")) and t not in known]


def _snapshot(known_threads: frozenset = frozenset()) -> dict:
    """Threads, fds, sockets of this driver and node processes on the machine, once nodes exited
    and the driver's threads (but ``known_threads``) ended: a leak is one still there 15 s after
    shutdown."""
    deadline = time.monotonic() + 15
    while (_sparkdl_processes() or _sparkdl_threads(known_threads)) and time.monotonic() < deadline:
        # Bounded poll: supervisors exit right after their last report, and the driver's
        # display threads once their last line is written.
        time.sleep(0.1)
    me = psutil.Process()
    return {
        "threads": threading.active_count(),
        "sparkdl threads": sorted(t.name for t in _sparkdl_threads(known_threads)),
        "open fds": me.num_fds(),
        "inet sockets": len(me.net_connections(kind="inet")),
        "node processes": len(_sparkdl_processes()),
        "fork servers": sorted(process.pid for process in _sparkdl_processes(fork_servers=True)),
    }


def _one_cluster(sc, tmp_path: Path, index: int) -> None:
    out = tmp_path / f"c{index}"
    out.mkdir()
    if index % 2:
        cluster = TFCluster.run(sc, feed_fns.count_feed, {"out": str(out)}, 2, input_mode=SPARK)
        cluster.train(sc.parallelize([([1.0], 1.0)] * 200, 2), 1)
    else:
        cluster = TFCluster.run(sc, nf.describe_node, {"out": str(out)}, 2)
    cluster.shutdown(timeout=120)
    assert len(list(out.glob("node*.json"))) == 2


def test_clusters_in_a_row_leak_no_threads_sockets_or_processes(sc2, tmp_path):
    # A thread an earlier test left behind is that test's failure, not these clusters' leak.
    earlier = frozenset(_sparkdl_threads())
    _one_cluster(sc2, tmp_path, 99)  # warm-up: Spark's own pools and connections settle
    before = _snapshot(earlier)
    for index in range(CLUSTERS):
        _one_cluster(sc2, tmp_path, index)
    after = _snapshot(earlier)
    print(f"\n{CLUSTERS} clusters in a row: before {before}\n                     after  {after}")
    assert after["sparkdl threads"] == [], after
    assert before["node processes"] == after["node processes"] == 0
    # The clusters' nodes were forked by the servers the warm-up found or started (one per
    # executor): no cluster started another. (Servers of earlier tests' environments may leave meanwhile.)
    servers_before, servers_after = set(before["fork servers"]), set(after["fork servers"])
    assert len(servers_before) >= 2 and servers_after <= servers_before, (before, after)
    assert after["threads"] <= before["threads"] + 1, (before, after)
    assert after["open fds"] <= before["open fds"] + 4, (before, after)
    assert after["inet sockets"] <= before["inet sockets"] + 2, (before, after)


def _frame(spark, rows: int, partitions: int, width: int):
    from pyspark.sql import functions as F

    values = F.array(*[(F.col("id") % (k + 3)).cast("float") for k in range(width)])
    return spark.range(0, rows, numPartitions=partitions).select(values.alias("x"), (F.col("id") % 2).alias("y"))


@pytest.mark.slow  # a gigabyte through 2 nodes, and 400 partitions: scale is what it tests
@pytest.mark.parametrize(
    "rows,partitions,width", [(1_000_000, 4, 256), (200_000, 400, 16)], ids=["1M-rows", "400-partitions"]
)
def test_large_feeds_complete_in_bounded_memory(sc2, tmp_path, rows, partitions, width):
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()
    frame = _frame(spark, rows, partitions, width)
    queue_bytes = 16 * MiB
    args = {"out": str(tmp_path), "mapping": {"x": "x", "y": "y"}, "label_key": "y", "batch": 2048}
    cluster = TFCluster.run(sc2, feed_fns.count_feed, args, 2, input_mode=SPARK, feed_queue_bytes=queue_bytes)
    with RssSampler() as sampler:
        started = time.monotonic()
        cluster.train(frame, 1)
        cluster.shutdown(timeout=300)
        seconds = time.monotonic() - started
    nodes = [json.loads(p.read_text()) for p in tmp_path.glob("node*.json")]
    data_mib = rows * width * 4 / MiB
    print(
        f"\n{rows:,} rows x {width} float32 ({data_mib:,.0f} MiB) in {partitions} partitions fed in {seconds:.1f} s; "
        f"peak RSS: TF nodes {[round(n['peak_rss_mib']) for n in nodes]} MiB, "
        + ", ".join(f"{kind} {peak / MiB:,.0f} MiB" for kind, peak in sampler.peaks.items())
    )
    assert sorted(n["rows"] for n in nodes) == [rows // 2, rows // 2]
    # With backpressure a node's memory stays near its queue bound, whatever the data size.
    assert all(n["peak_rss_mib"] < 200 + 4 * queue_bytes / MiB for n in nodes), nodes
