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
import os
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


def print_report(
    header: str,
    table: list[tuple[str, float, str]],
    ratios: dict[str, float],
    notes: list[str] | tuple[str, ...] = (),
    digits=lambda unit: 0,
) -> None:
    """Print a run's results for a person: ``header``, the table (``digits(unit)`` decimals per
    value), the ratios and the notes."""
    print(f"\n{header}")
    width = max(len(name) for name, _, _ in table)
    for name, value, unit in table:
        print(f"{name.ljust(width)}  {value:>12,.{digits(unit)}f} {unit}")
    print("\nratios")
    for name, value in ratios.items():
        print(f"  {name}: {value:.2f}")
    for note in notes:
        print(f"note: {note}")


def finish(opts, header: str, table, ratios, notes=(), raw=None, digits=lambda unit: 0, **config) -> None:
    """Print the report and, with ``--json`` (``opts.json``), write it: the config is every option,
    the machine's cores, the master (local-cluster[2,1,1024] unless ``config`` says otherwise) and ``config``."""
    print_report(header, table, ratios, notes, digits)
    if opts.json:
        settings = {**vars(opts), "cores": os.cpu_count(), "master": "local-cluster[2,1,1024]", **config}
        write_results(opts.json, config=settings, table=table, ratios=ratios, notes=notes, raw=raw)
