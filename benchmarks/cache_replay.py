"""The node's epoch cache replayed on its own: sparkdl's ``CacheReplay`` against numpy in memory.

No Spark and no TensorFlow: the rows a node caches in epoch 1 (``--rows`` of 784 float32 and a
label, in Arrow IPC frames of 2,500 rows from 8 partitions, as the feed server writes them) are
sealed, and each later epoch takes them in a new seeded order in batches of ``--batch``, as
``as_dataset`` and ``next_batch`` do. The reference, in the same script: the same gather from one
numpy array held in memory (``features[order[start:start + batch]]``), the floor of any replay.
To measure a tree of another commit, put its root first on ``PYTHONPATH`` (``git archive REF
sparkdl | tar -x -C DIR``).

    .venv/bin/python benchmarks/cache_replay.py [--rows 30000] [--epochs 6] [--as-in-a-node] [--json results.json]
    PYTHONPATH=DIR .venv/bin/python benchmarks/cache_replay.py
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).parent))
from results_json import finish  # noqa: E402

WIDTH, PARTITIONS, FRAME_ROWS, SEED = 784, 8, 2500, 5


def write_cache(directory: Path, rows: int):
    """A sealed run cache of ``rows`` random rows, written frame by frame as the feed server does."""
    from sparkdl.feed.cache import RunCache
    from sparkdl.feed.wire import encode_batch

    cache = RunCache(directory, None, "cache_replay benchmark")
    rng = np.random.default_rng(0)
    per_partition = rows // PARTITIONS
    for partition in range(PARTITIONS):
        for first in range(0, per_partition, FRAME_ROWS):
            count = min(FRAME_ROWS, per_partition - first)
            values = rng.random((count, WIDTH), dtype=np.float32)
            offsets = pa.array(np.arange(0, values.size + 1, WIDTH, dtype=np.int32))
            batch = pa.RecordBatch.from_arrays(
                [pa.ListArray.from_arrays(offsets, pa.array(values.reshape(-1))), pa.array(np.arange(count) % 10)],
                names=["features", "label"],
            )
            cache.append("train", partition, encode_batch(batch), count)
    refused = cache.seal({"train": per_partition * PARTITIONS})
    if refused:
        raise SystemExit(f"cache_replay: the cache was not sealed: {refused}")
    return cache


def epoch_seconds(take, rows: int, batch: int, epoch: int) -> float:
    """One epoch: every row in epoch ``epoch``'s seeded order, ``batch`` rows a call."""
    from sparkdl.feed.cache import epoch_order

    order = epoch_order(rows, SEED, 0, epoch)
    started = time.perf_counter()
    for start in range(0, rows, batch):
        take(order, start, min(batch, rows - start))
    return time.perf_counter() - started


def main() -> None:
    """Replay and reference, epochs interleaved; medians of the epochs after the first."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=30_000, help="rows of one node's share")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument(
        "--as-in-a-node",
        action="store_true",
        help="first build one tf.data.Dataset.from_generator, as a node's as_dataset does: TensorFlow then "
        "sets glibc's M_TRIM_THRESHOLD, which pins its mmap threshold at 128 KiB (every large numpy "
        "array is fresh pages from then on)",
    )
    opts = parser.parse_args()
    if opts.as_in_a_node:
        import tensorflow as tf

        for _ in tf.data.Dataset.from_generator(lambda: iter([np.zeros(1)]), output_types=tf.float64):
            pass  # the patch is applied when the generator first runs

    cache = write_cache(Path(tempfile.mkdtemp(prefix="sparkdl-cache-replay-")) / "run", opts.rows)
    try:
        replay = cache.replay("train")
        rows = replay.rows
        features = np.concatenate([frame["features"] for frame in replay.columns])  # the same rows, in memory
        labels = np.concatenate([frame["label"] for frame in replay.columns])

        def in_memory(order, start, count):
            picked = order[start : start + count]
            return {"features": features[picked], "label": labels[picked]}

        seconds: dict[str, list[float]] = {"replay": [], "memory": []}
        for epoch in range(1, opts.epochs + 1):
            seconds["replay"].append(epoch_seconds(replay.take, rows, opts.batch, epoch))
            seconds["memory"].append(epoch_seconds(in_memory, rows, opts.batch, epoch))
    finally:
        cache.drop()
    rates = {name: rows / statistics.median(values[1:]) for name, values in seconds.items()}
    table = [
        ("cache replay (CacheReplay.take, mmap + windows)", rates["replay"], "rows/s"),
        ("numpy gather from memory (the floor)", rates["memory"], "rows/s"),
    ]
    ratios = {"cache replay / numpy gather from memory": rates["replay"] / rates["memory"]}
    finish(
        opts,
        f"{rows} rows x {WIDTH} float32, batches of {opts.batch}, medians of epochs 2..{opts.epochs}",
        table,
        ratios,
        raw={"epoch_seconds": seconds},
        master="none (no Spark)",
    )


if __name__ == "__main__":
    main()
