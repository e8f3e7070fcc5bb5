"""The exactly-once ledger's frame digest (``feed/ledger.py``, ``frame_digest``): its cost, alone
and on the node's receiving path.

A node digests every training frame it receives (to recognise a retried task's frames), so the
digest's speed is part of the feed's. Two figures, both in MiB per CPU-second (``process_time``
of this one process, so a loaded machine's waits do not count):

1. **Receive path**: over real sockets on 127.0.0.1, in one process, a feeding task
   (``feed_training_partition``) streams ``--mib`` MiB of float32 rows (784 a row) to a node's
   ``FeedServer``, and a reader (``DataFeed.next_batch`` with ``input_mapping``) drains them. The
   process's CPU time covers the feeder (Arrow IPC, the channel's HMAC), the server (the HMAC
   check, Arrow's validation, the digest, the queue) and the reader. Run with the digest in place,
   and with it replaced by a constant (``--no-digest`` reference: the digest's share).
2. **Digest alone**: ``frame_digest`` over the same ~4 MiB frames, and for comparison the
   standard library's hashes it could be built on.

Each figure is the median of ``--runs`` runs; the receive path is also run with SHA-256 in place
of the digest, for comparison. The multilinear hash that XXH3 replaced (it collided on words that
differ only in their top bits) measured 312 MiB per CPU-second on the receive path when introduced.

    .venv/bin/python benchmarks/frame_digest.py [--mib 256] [--runs 4] [--json results.json]
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

ROW_FLOATS = 784
BATCH_ROWS = 10_000
READ_ROWS = 10_000


def _batches(rows: int):
    """``rows`` rows of ROW_FLOATS float32 (column ``x``), in BATCH_ROWS batches, as Spark sends them."""
    rng = np.random.default_rng(0)
    block = rng.standard_normal((BATCH_ROWS, ROW_FLOATS), dtype=np.float32)
    for start in range(0, rows, BATCH_ROWS):
        count = min(BATCH_ROWS, rows - start)
        values = pa.array(block[:count].reshape(-1))
        yield pa.RecordBatch.from_arrays([pa.FixedSizeListArray.from_arrays(values, ROW_FLOATS)], names=["x"])


def receive_path(mib: int, digest=None) -> float:
    """MiB per CPU-second of one feeder -> feed server -> reader pass of ``mib`` MiB; with
    ``digest``, the server digests frames with it instead of ``ledger.frame_digest``."""
    from sparkdl.feed import feeder
    from sparkdl.feed import server as feed_server
    from sparkdl.feed.data_feed import DataFeed
    from sparkdl.feed.shares import balanced_shares
    from sparkdl.transport import protocol
    from sparkdl.transport.channel import Endpoint, connect, new_secret

    rows = mib * (1 << 20) // (ROW_FLOATS * 4)
    secret = new_secret()
    node = feed_server.FeedServer(secret, "127.0.0.1", endpoint=Endpoint.feed("digest-bench", 0))
    original = feed_server.frame_digest
    if digest is not None:
        feed_server.frame_digest = digest  # a benchmark's switch, restored below
    try:
        plan = protocol.TrainingPlan(session=1, epochs=1, rows_per_epoch=rows, cache=False, shuffle=False)
        with connect(node.address, secret, timeout=10, endpoint=node.endpoint) as channel:
            channel.send(protocol.Plan(plan).wire())
            channel.recv(10)
        target = feeder.FeedTarget(secret, (node.address,), (node.endpoint,), ("worker:0",), 60.0, "input")
        failure: list[BaseException] = []

        def feed() -> None:
            try:
                feeder.feed_training_partition(target, 1, 0, 0, balanced_shares([rows], 1), _batches(rows))
            except BaseException as exc:  # noqa: BLE001 - reported by the main thread
                failure.append(exc)

        reader = DataFeed(node, feed_timeout=60, input_mapping={"x": "x"})
        started = time.process_time()
        sender = threading.Thread(target=feed, daemon=True)
        sender.start()
        read = 0
        while read < rows:
            got = len(reader.next_batch(READ_ROWS)["x"])
            if not got:
                break
            read += got
        sender.join(120)
        cpu = time.process_time() - started
        if failure or read != rows:
            raise RuntimeError(f"the feed failed: read {read} of {rows} rows ({failure})")
        return mib / cpu
    finally:
        feed_server.frame_digest = original
        node.terminated.set()
        node.close()


def digest_alone(mib: int, digest) -> float:
    """MiB per CPU-second of ``digest`` over ``mib`` MiB of ~4 MiB Arrow IPC frames."""
    from sparkdl.feed.wire import encode_batch

    frames = [encode_batch(batch) for batch in _batches(4 * (1 << 20) // (ROW_FLOATS * 4))]
    size = sum(len(frame) for frame in frames) / (1 << 20)
    passes = max(1, round(mib / size))
    started = time.process_time()
    for _ in range(passes):
        for frame in frames:
            digest(frame)
    return passes * size / (time.process_time() - started)


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from results_json import finish

    from sparkdl.feed.ledger import frame_digest

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=256, help="MiB fed per run")
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--json", help="write the results here")
    opts = parser.parse_args()

    alternatives = {
        "frame_digest": frame_digest,
        "sha256": lambda frame: hashlib.sha256(frame).digest(),
        "blake2b-8": lambda frame: hashlib.blake2b(frame, digest_size=8).digest(),
        "sha1": lambda frame: hashlib.sha1(frame).digest(),
    }
    sha256 = alternatives["sha256"]
    raw: dict[str, list[float]] = {
        "receive path, frame_digest": [],
        "receive path, sha256": [],
        "receive path, no digest": [],
    }
    raw.update({f"digest alone, {name}": [] for name in alternatives})
    receive_path(8)  # warm-up: imports, first connections, Arrow's first allocations
    for _ in range(opts.runs):  # alternating, so drift in the machine's load hits both alike
        raw["receive path, frame_digest"].append(receive_path(opts.mib))
        raw["receive path, sha256"].append(receive_path(opts.mib, digest=lambda frame: sha256(frame)[:8]))
        raw["receive path, no digest"].append(receive_path(opts.mib, digest=lambda frame: b"\0" * 8))
        for name, digest in alternatives.items():
            raw[f"digest alone, {name}"].append(digest_alone(opts.mib, digest))
    table = [(name, statistics.median(values), "MiB/CPU-s") for name, values in raw.items()]
    medians = {name: value for name, value, _ in table}
    ratios = {
        "receive path: with digest / without": medians["receive path, frame_digest"]
        / medians["receive path, no digest"]
    }
    finish(opts, f"frame digest: {opts.mib} MiB, median of {opts.runs} runs", table, ratios, raw=raw, master="none")


if __name__ == "__main__":
    main()
