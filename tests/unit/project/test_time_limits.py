"""Every default time limit is defined once, in ``sparkdl/common/timeouts.py``: no other module
assigns a module-level constant named as a duration (``*_S``, ``*_SECS``, ``*TIMEOUT*``, ``*_WAIT*``)
a number. The others import it by name from there."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "sparkdl"
HOME = Path("common") / "timeouts.py"
DURATION = re.compile(r"(_S|_SECS|_SECONDS)$|TIMEOUT|_WAIT")


def time_limits_outside(package: Path = PACKAGE) -> list[str]:
    """``"<module>: NAME = value"`` for each duration constant defined outside ``common/timeouts.py``."""
    found = []
    for path in sorted(package.rglob("*.py")):
        if path.relative_to(package) == HOME:
            continue
        for node in ast.parse(path.read_text()).body:
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            names = [t.id for t in targets if isinstance(t, ast.Name) and t.id.isupper() and DURATION.search(t.id)]
            value = getattr(node, "value", None)
            if names and isinstance(value, ast.Constant) and isinstance(value.value, (int, float)):
                found += [f"{path.relative_to(package)}: {name} = {value.value!r}" for name in names]
    return found


def test_every_time_limit_is_defined_in_timeouts():
    assert time_limits_outside() == []


def test_a_time_limit_defined_elsewhere_is_named(tmp_path):
    """The check above can fail: a module that defines its own wait again."""
    (tmp_path / "common").mkdir()
    (tmp_path / "common" / "timeouts.py").write_text("STOP_WAIT_S = 60.0\n")
    (tmp_path / "cluster.py").write_text(
        "from .common.timeouts import STOP_WAIT_S\nSTOP_WAIT_S_COPY = STOP_WAIT_S\nABORT_WAIT_S = 15.0\nMAX_ROWS = 64\n"
    )
    assert time_limits_outside(tmp_path) == ["cluster.py: ABORT_WAIT_S = 15.0"]


def test_each_time_limit_is_documented_where_it_is_defined():
    """Each constant of timeouts.py says what waits on it (a ``#:`` comment above it)."""
    lines = (PACKAGE / HOME).read_text().splitlines()
    bare = [
        line.split("=")[0].strip()
        for number, line in enumerate(lines)
        if re.match(r"[A-Z][A-Z0-9_]* = ", line) and not lines[number - 1].startswith("#:")
    ]
    assert bare == []
