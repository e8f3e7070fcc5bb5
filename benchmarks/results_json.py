"""The JSON every benchmark script writes with ``--json PATH`` (read back by ``run_all.py``).

One object::

    {"config":       {option: value, ..., "cores": N, "master": "local-cluster[2,1,1024]"},
     "measurements": {name: {"value": number, "unit": "rows/s" | "s" | "MiB" | ...}, ...},
     "ratios":       {name: number, ...},   # each against a reference measured in the same run
     "notes":        [text, ...],
     "raw":          {...}}                 # per-run data behind the medians, free-form per script

Driver-side only: the scripts import it inside their ``main``/report functions, because
executors import the scripts that ship node functions (train_feed.py, feed_throughput.py)
without this directory on their path.
"""

from __future__ import annotations

import json
from pathlib import Path


def _plain(value):
    """numpy scalars (which ``json`` refuses) as Python numbers."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def write_results(
    path: str | Path,
    *,
    config: dict,
    table: list[tuple[str, float, str]],
    ratios: dict[str, float],
    notes: list[str] | tuple[str, ...] = (),
    raw: dict | None = None,
) -> None:
    """Write one benchmark run's results to ``path``; ``table`` is ``[(name, value, unit), ...]``."""
    names = [name for name, _, _ in table]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"measurement names must be unique, repeated: {duplicates}")
    Path(path).write_text(
        json.dumps(
            {
                "config": config,
                "measurements": {name: {"value": value, "unit": unit} for name, value, unit in table},
                "ratios": ratios,
                "notes": list(notes),
                "raw": raw or {},
            },
            indent=2,
            default=_plain,
        )
    )
