"""Count the reach-ins of a package: ``obj._private`` attribute accesses from one module into what
another module defines.

    .venv/bin/python scripts/private_access.py            # sparkdl/: per module pair, then the total
    .venv/bin/python scripts/private_access.py --max 0    # exit 1 when there are more than 0
    .venv/bin/python scripts/private_access.py path/to/package

What it counts, read from the source with ``ast`` (nothing is imported):

- An access is an attribute node ``<expr>._name``, read, written or deleted, whose name starts with
  exactly one underscore (``_x``; not a dunder ``__x__`` and not a mangled ``__x``), and whose
  receiver is not ``self``, ``cls`` or ``super()`` (a class's own attributes, reached from its own
  methods).
- Its owner is a module of the package that *defines* that name: a class attribute or method
  (assigned, annotated or ``def`` in a class body), an instance attribute (``self._x = ...``,
  ``cls._x = ...`` in a method) or a module-level name (``_x = ...``, ``def _x``, ``class _x``).
  Types are not inferred, so the owner is found by name: an access counts when the accessing module
  defines no such name itself and at least one other module does; it is listed under the pair
  ``accessor -> owner`` (several owners, when several modules define the name, joined by ``|``).
- So it does not count a private attribute of another library (``sc._jsc``, ``tuple._replace``:
  no module of the package defines it), and it misses an access whose name the accessing module
  also defines (``other._lock`` in a module with its own ``_lock``): the count is a lower bound.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter, defaultdict
from pathlib import Path

OWN_RECEIVERS = {"self", "cls"}


def is_private(name: str) -> bool:
    """``_x``: one leading underscore, not a dunder (``__x__``) nor a name Python mangles (``__x``)."""
    return name.startswith("_") and not name.startswith("__") and len(name) > 1


def module_name(path: Path, package: Path) -> str:
    """``feed/dataset.py`` under ``package`` as ``<package>.feed.dataset``."""
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        return node.targets
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        return [node.target]
    return []


def _names_of(target: ast.expr) -> list[str]:
    """The plain names a target binds (``a``, ``a, b``)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for element in target.elts for name in _names_of(element)]
    return []


def _body_names(body: list[ast.stmt]) -> set[str]:
    """Names a module or class body binds at its own level."""
    names = set()
    for statement in body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(statement.name)
        for target in _targets(statement):
            names.update(_names_of(target))
    return names


def defined_names(tree: ast.Module) -> set[str]:
    """The private names a module defines: module-level names, class attributes and methods,
    and attributes set on ``self``/``cls``."""
    names = _body_names(tree.body)
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            names |= _body_names(node.body)
        for target in _targets(node):
            if isinstance(target, ast.Attribute) and _receiver(target) in OWN_RECEIVERS:
                names.add(target.attr)
    return {name for name in names if is_private(name)}


def _receiver(node: ast.Attribute) -> str | None:
    """``self``/``cls`` for ``self._x``/``cls._x``, ``super`` for ``super()._x``, else None."""
    value = node.value
    if isinstance(value, ast.Name) and value.id in OWN_RECEIVERS:
        return value.id
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "super":
        return "super"
    return None


def accessed_names(tree: ast.Module) -> list[tuple[str, int]]:
    """Every private attribute (name, line) the module reaches on a receiver other than
    ``self``/``cls``/``super()``."""
    return [
        (node.attr, node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and is_private(node.attr) and _receiver(node) is None
    ]


def reach_ins(package: Path) -> list[tuple[str, str, str, int]]:
    """Every counted access as ``(accessor module, owner module(s), name, line)``."""
    trees = {module_name(path, package): ast.parse(path.read_text()) for path in sorted(package.rglob("*.py"))}
    owners: dict[str, set[str]] = defaultdict(set)
    for module, tree in trees.items():
        for name in defined_names(tree):
            owners[name].add(module)
    found = []
    for module, tree in trees.items():
        for name, line in accessed_names(tree):
            if owners[name] and module not in owners[name]:
                found.append((module, " | ".join(sorted(owners[name])), name, line))
    return sorted(found)


def count(package: Path) -> Counter:
    """``Counter({(accessor module, owner module(s)): accesses})`` over every module of ``package``."""
    return Counter((accessor, owner) for accessor, owner, _, _ in reach_ins(package))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("package", nargs="?", default=str(Path(__file__).resolve().parents[1] / "sparkdl"))
    parser.add_argument("--max", type=int, default=None, help="exit 1 when the total is above this")
    parser.add_argument("--each", action="store_true", help="also list every access: module:line name")
    args = parser.parse_args(argv)
    package = Path(args.package).resolve()
    if args.each:
        for accessor, _, name, line in reach_ins(package):
            print(f"      {accessor}:{line} .{name}")
    pairs = count(package)
    for (accessor, owner), accesses in sorted(pairs.items(), key=lambda item: (-item[1], item[0])):
        print(f"{accesses:4d}  {accessor} -> {owner}")
    total = sum(pairs.values())
    print(f"total: {total} private accesses across modules")
    if args.max is not None and total > args.max:
        print(f"above the ceiling of {args.max}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
