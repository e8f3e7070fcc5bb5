"""What ``map_fun`` returns, on its way to the driver: plain JSON values, bounded in size.

A node asked for its result (``TFCluster.run(return_results=...)``: the chief by default, every
node with ``"all"``) sends ``map_fun``'s return value to its supervisor, which relays it to the
coordinator as a ``protocol.Result`` message: JSON, never pickle. ``as_json`` turns numpy
scalars and arrays into numbers and lists, tuples into lists, and refuses anything else here, on
the node, naming the value's type and where it sits in the returned structure, so the driver
never receives half a result. The JSON text may be at most ``MAX_RESULT_BYTES``: a larger
result belongs in storage, with its path returned instead.
"""

from __future__ import annotations

import json
from typing import Any

#: The most JSON bytes a node's result may take (a channel's JSON frame holds at most 1 MiB).
MAX_RESULT_BYTES = 512 * 1024
_MAX_DEPTH = 64


class ResultError(TypeError):
    """``map_fun`` returned something that cannot travel to the driver as JSON."""


def as_json(value: Any) -> Any:
    """``value`` as plain JSON values (dicts with string keys, lists, str, int, float, bool, None).

    numpy scalars become numbers and numpy arrays nested lists; tuples become lists. Raises
    ResultError naming the type and its place for anything else, and for a result whose JSON
    text is over ``MAX_RESULT_BYTES``.
    """
    plain = _convert(value, "the return value", 0)
    size = len(json.dumps(plain, separators=(",", ":")).encode())
    if size > MAX_RESULT_BYTES:
        raise ResultError(
            f"map_fun returned {size:,} bytes of JSON; at most {MAX_RESULT_BYTES:,} travel to the driver: "
            "write a large result to storage and return its path"
        )
    return plain


def _convert(value: Any, where: str, depth: int) -> Any:
    if depth > _MAX_DEPTH:
        raise ResultError(f"map_fun's return value nests deeper than {_MAX_DEPTH} levels at {where}")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)  # NaN and infinities travel as JSON's NaN and Infinity, as Python reads them
    kind = type(value)
    if kind.__module__ == "numpy":
        if hasattr(value, "tolist") and getattr(value, "dtype", None) is not None and value.dtype.kind in "biuf":
            return value.tolist()  # a numpy scalar or array: Python numbers, nested lists
        raise ResultError(
            f"map_fun returned a numpy {kind.__name__} of dtype {getattr(value, 'dtype', '?')} at {where}; "
            "only numbers and booleans travel to the driver"
        )
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ResultError(
                    f"map_fun returned a dict with a {type(key).__name__} key {key!r} at {where}; JSON keys are strings"
                )
            out[key] = _convert(item, f"{where}[{key!r}]", depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        return [_convert(item, f"{where}[{index}]", depth + 1) for index, item in enumerate(value)]
    raise ResultError(
        f"map_fun returned a {kind.__module__}.{kind.__qualname__} at {where}: only None, bool, int, float, "
        "str, lists and tuples, dicts with str keys, and numpy numbers and arrays travel to the driver"
    )
