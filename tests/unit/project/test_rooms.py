"""The rooms of sparkdl import one another only along the arrows of docs/architecture.md's map.

Each module belongs to a room (``driver``, ``node``, ``feed``, ``inference``, ``transport``,
``keras``, ``spark_ml``, ``columns``, ``storage``, ``common``) or is a face at the package root (a public
import path that re-exports a room). The test reads every ``import`` in the source (no module is
imported) and checks: the root holds the faces and nothing else; every room-to-room import is an
arrow of ``ARROWS``; no room imports a face (the faces re-export the rooms, never the other way);
and ``ARROWS`` is exactly what the architecture page draws, so the map cannot drift from the code.

The tests are laid out like the code: unit tests by room and module (``tests/unit/<room>/test_<module>.py``),
cluster tests by scenario (``tests/cluster/<scenario>/``), no test module importing another; conftest's
``layout_problems`` refuses, at every collection, a test whose tree disagrees with its ``cluster`` mark.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import sparkdl

from conftest import layout_problems

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "sparkdl"
ROOMS = ("driver", "node", "feed", "inference", "transport", "keras", "spark_ml", "columns", "storage", "common")
#: The package root's modules: the public import paths, each re-exporting a room (TensorFlowOnSpark's
#: module names, sparkdl's ``ml`` and ``model_versions``, the package itself and its command line).
FACES = (
    "TFCluster", "TFNode", "TFParallel", "compat", "util", "gpu_info", "dfutil", "pipeline", "params", "ml",
    "model_versions", "__init__", "__main__",
)  # fmt: skip
#: The folders of tests/unit/: the rooms, the package root's faces, the repository itself.
UNIT_ROOMS = (*ROOMS, "faces", "project")
#: The rooms open to every room above them, drawn with dotted arrows, lowest first: ``common`` imports
#: no room, ``storage`` only ``common``, and every other room may import both.
OPEN_ROOMS = ("common", "storage")
#: Which rooms each room may import, besides the open rooms (``OPEN_ROOMS``).
ARROWS = {
    "keras": {"driver", "inference", "spark_ml", "columns"},
    "spark_ml": {"driver", "inference"},
    "driver": {"node", "feed", "transport", "columns"},
    "node": {"feed", "transport"},
    "feed": {"transport", "columns"},
    "inference": {"columns"},
    "transport": set(),
    "columns": set(),
    "storage": set(),
    "common": set(),
}


def _open_rooms_below(room: str) -> set[str]:
    """The open rooms ``room`` may import: all of them, or for an open room those below it."""
    return set(OPEN_ROOMS[: OPEN_ROOMS.index(room)] if room in OPEN_ROOMS else OPEN_ROOMS)


def _room(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 and parts[1] in ROOMS else None


def _face(module: str) -> str | None:
    """The face ``module`` names (``sparkdl.compat``, or ``sparkdl`` itself as ``__init__``), else None."""
    parts = module.split(".")
    if parts == ["sparkdl"]:
        return "__init__"
    return parts[1] if len(parts) == 2 and parts[1] in FACES else None


def _module(path: Path) -> str:
    """``sparkdl/feed/dataset.py`` as ``sparkdl.feed.dataset``, wherever the ``sparkdl`` folder is."""
    parts = path.with_suffix("").parts
    return ".".join(parts[len(parts) - 1 - parts[::-1].index("sparkdl") :])


def _imports(path: Path) -> set[str]:
    """The sparkdl modules ``path`` imports, as absolute names."""
    module = _module(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    package = package.removesuffix(".__init__")
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            if node.module is None:  # from . import x: x may be a module
                found |= {f"{name}.{alias.name}" for alias in node.names}
            else:
                found.add(name)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return {name for name in found if name.split(".")[0] == "sparkdl"}


def _room_imports(package: Path = PACKAGE) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {room: set() for room in ROOMS}
    for path in package.rglob("*.py"):
        source = _room(_module(path))
        if source is None:
            continue
        for target in filter(None, map(_room, _imports(path))):
            if target != source:
                edges[source].add(target)
    return edges


def face_imports(package: Path = PACKAGE) -> list[str]:
    """``"<module> imports the face <face>"`` for every room module that imports a face, and every
    face that imports another face (the package's ``__init__`` names its faces, lazily)."""
    found = []
    for path in sorted(package.rglob("*.py")):
        module = _module(path)
        own_face = _face(module) if path.parent == package else None
        for name in sorted(_imports(path)):
            face = _face(name)
            if face is None or face == own_face or own_face == "__init__":
                continue
            found.append(f"{module} imports the face {face}")
    return found


def test_rooms_import_one_another_only_along_the_arrows():
    edges = _room_imports()
    allowed = {room: targets | _open_rooms_below(room) for room, targets in ARROWS.items()}
    extra = {room: sorted(targets - allowed[room]) for room, targets in edges.items() if targets - allowed[room]}
    assert not extra, f"imports against the arrows of docs/architecture.md: {extra}"
    assert edges["driver"], "the import scan found nothing: is the package layout still sparkdl/<room>/?"


def test_the_package_root_holds_the_faces_and_nothing_else():
    modules = {path.stem for path in PACKAGE.glob("*.py")}
    folders = {path.name for path in PACKAGE.iterdir() if path.is_dir() and path.name != "__pycache__"}
    assert modules == set(FACES), f"not faces: {sorted(modules - set(FACES))}; missing: {sorted(set(FACES) - modules)}"
    assert folders == set(ROOMS), f"folders that are no room: {sorted(folders - set(ROOMS))}"


def test_nothing_imports_a_face():
    assert face_imports() == []


def test_a_room_importing_a_face_is_named(tmp_path):
    """The check above can fail: a copy of the package where keras/ imports ``compat`` again."""
    package = tmp_path / "sparkdl"
    (package / "keras").mkdir(parents=True)
    (package / "compat.py").write_text("def save_keras_file(model, path): ...\n")
    (package / "keras" / "shipping.py").write_text("from ..compat import save_keras_file\n")
    (package / "ml.py").write_text("from .keras import shipping\nfrom . import pipeline\n")
    problems = face_imports(package)
    assert problems == ["sparkdl.keras.shipping imports the face compat", "sparkdl.ml imports the face pipeline"]


def test_the_architecture_map_draws_exactly_these_arrows():
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = re.search(r"```mermaid\n(flowchart[^\n]*\n(?:.*\n)*?)```", text[text.index("## The rooms") :])
    assert block, "docs/architecture.md has no mermaid map under '## The rooms'"
    drawn = {(a, b) for a, b in re.findall(r"^\s*(\w+)\s*-->\s*(\w+)\s*$", block.group(1), re.M)}
    drawn = {(a, b) for a, b in drawn if a in ROOMS and b in ROOMS}
    declared = {(room, target) for room, targets in ARROWS.items() for target in targets}
    assert drawn == declared, (
        f"drawn but not allowed: {sorted(drawn - declared)}; allowed but not drawn: {sorted(declared - drawn)}"
    )


def test_no_test_module_imports_another_test_module():
    """What tests share lives in helper modules beside them (``feed_servers.py``, ``cluster_watch.py``,
    ...), never in a ``test_*`` module: importing one would collect and couple its tests too."""
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            offenders += [f"{path.relative_to(ROOT)} imports {name}" for name in names if name.startswith("test_")]
    assert not offenders, offenders


def test_tests_are_laid_out_like_the_code():
    """Test modules sit in ``unit/<room>/``, ``cluster/<scenario>/`` or ``gpu/``; helpers anywhere,
    shared ones in ``support/``. Modules are imported by basename (no ``__init__.py``; executors
    import them by that name too), so no two may share one."""
    tests = ROOT / "tests"
    modules = sorted(tests.rglob("*.py"))
    clashes = {name: count for name, count in Counter(path.name for path in modules).items() if count > 1}
    assert not clashes, f"basenames used more than once under tests/: {clashes}"
    misplaced = []
    for path in modules:
        parts = path.relative_to(tests).parts
        if not path.name.startswith("test_"):
            continue
        if parts[0] == "unit" and len(parts) == 3 and parts[1] in UNIT_ROOMS:
            continue
        if (parts[0] == "cluster" and len(parts) == 3) or parts[0] == "gpu":
            continue
        misplaced.append(str(path.relative_to(ROOT)))
    assert not misplaced, f"test modules outside tests/unit/<room>/, tests/cluster/<scenario>/, tests/gpu/: {misplaced}"
    rooms = {path.parent.name for path in (tests / "unit").rglob("*.py")}
    assert rooms <= set(UNIT_ROOMS), f"folders of tests/unit/ that are no room: {sorted(rooms - set(UNIT_ROOMS))}"


def misnamed_unit_tests(tests: Path = ROOT / "tests", package: Path = PACKAGE) -> list[str]:
    """``"<test file>: <why>"`` for every unit test module not named after the module it tests.

    ``tests/unit/<room>/test_<name>.py`` tests ``sparkdl/<room>/<name>.py``; ``tests/unit/faces/``
    holds ``test_<face>.py`` for the faces at the package root; ``tests/unit/project/`` any name. Test
    modules are imported by basename, so where a module's name is used in more than one place (two
    rooms, or a room and a face: ``columns``, ``console``, ``params``...), its test is
    ``test_<room>_<name>.py`` instead (``tests/unit/feed/test_feed_columns.py``)."""
    homes: dict[str, set[str]] = {}  # a module's name -> the rooms (or "faces") that have one
    for path in package.rglob("*.py"):
        room = "faces" if path.parent == package else path.parent.name
        if path.stem != "__init__" and (room == "faces" or room in ROOMS):
            homes.setdefault(path.stem, set()).add(room)
    problems = []
    for path in sorted((tests / "unit").glob("*/test_*.py")):
        room, name = path.parent.name, path.stem.removeprefix("test_")
        if room == "project" or room not in UNIT_ROOMS:
            continue  # any name; a folder that is no room is refused by the layout test
        plain = room in homes.get(name, set())
        if plain and len(homes[name]) == 1:
            continue
        where = "the package root" if room == "faces" else f"sparkdl/{room}/"
        if plain:
            others = ", ".join(sorted(homes[name] - {room}))
            problems.append(f"{path.relative_to(tests)}: {name}.py is also in {others}: name it test_{room}_{name}.py")
            continue
        prefixed = name.removeprefix(f"{room}_")
        if prefixed != name and room in homes.get(prefixed, set()) and len(homes[prefixed]) > 1:
            continue
        problems.append(f"{path.relative_to(tests)}: no module {name}.py in {where} (test_<module>.py)")
    return problems


def test_every_unit_test_module_is_named_after_the_module_it_tests():
    assert misnamed_unit_tests() == []


def test_a_misnamed_unit_test_module_is_named(tmp_path):
    """The check above can fail: a copy of the package and of tests/unit/ with misnamed files."""
    package, unit = tmp_path / "sparkdl", tmp_path / "tests" / "unit"
    for module in ("feed/columns", "feed/wire", "inference/columns", "columns/readers", "compat"):
        (package / f"{module}.py").parent.mkdir(parents=True, exist_ok=True)
        (package / f"{module}.py").write_text("")
    fine = ("feed/test_wire", "feed/test_feed_columns", "inference/test_inference_columns", "faces/test_compat")
    wrong = ("feed/test_node_feed", "feed/test_columns", "columns/test_column_readers", "faces/test_wire")
    for test in (*fine, *wrong, "project/test_anything", "feed/helpers_not_a_test"):
        (unit / f"{test}.py").parent.mkdir(parents=True, exist_ok=True)
        (unit / f"{test}.py").write_text("")
    assert misnamed_unit_tests(tmp_path / "tests", package) == [
        "unit/columns/test_column_readers.py: no module column_readers.py in sparkdl/columns/ (test_<module>.py)",
        "unit/faces/test_wire.py: no module wire.py in the package root (test_<module>.py)",
        "unit/feed/test_columns.py: columns.py is also in inference: name it test_feed_columns.py",
        "unit/feed/test_node_feed.py: no module node_feed.py in sparkdl/feed/ (test_<module>.py)",
    ]


def _item(path: Path, cluster: bool) -> SimpleNamespace:
    """What ``layout_problems`` reads of a collected test."""
    nodeid = f"{path.relative_to(ROOT).as_posix()}::test_x"
    return SimpleNamespace(path=path, nodeid=nodeid, get_closest_marker=lambda name: cluster or None)


def test_a_test_in_the_wrong_tree_is_named():
    tests = ROOT / "tests"
    fine = [
        _item(tests / "unit" / "feed" / "test_a.py", cluster=False),
        _item(tests / "cluster" / "spark_mode" / "test_b.py", cluster=True),
        _item(tests / "gpu" / "test_c.py", cluster=True),
        _item(ROOT / "elsewhere" / "test_d.py", cluster=False),  # not under tests/: not ours to judge
    ]
    assert layout_problems(fine) == []
    wrong = [
        _item(tests / "unit" / "feed" / "test_e.py", cluster=True),
        _item(tests / "cluster" / "spark_mode" / "test_f.py", cluster=False),
    ]
    problems = layout_problems(wrong)
    assert len(problems) == 2
    assert problems[0].startswith("tests/unit/feed/test_e.py::test_x: a cluster test"), problems
    assert problems[1].startswith("tests/cluster/spark_mode/test_f.py::test_x: not a cluster test")


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _module_level_imports(path: Path, modules: set[str]) -> set[str]:
    """The package's modules ``path`` imports when it is imported: module-level statements only
    (not imports inside functions, nor under ``if TYPE_CHECKING:``); ``from . import x`` names
    the module ``x`` when there is one, else the package."""
    module = _module(path)
    package = module.removesuffix(".__init__") if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    statements, found = list(ast.parse(path.read_text()).body), set()
    while statements:
        node = statements.pop()
        if isinstance(node, ast.If) and not _is_type_checking(node):
            statements += node.body + node.orelse
        elif isinstance(node, ast.Try):
            statements += node.body + node.orelse + node.finalbody + [s for h in node.handlers for s in h.body]
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1]) if node.level else ""
            name = ".".join(filter(None, [base, node.module]))
            found |= {f"{name}.{a.name}" if f"{name}.{a.name}" in modules else name for a in node.names}
    return {name.removesuffix(".__init__") for name in found if name in modules}


def import_circles(package: Path = PACKAGE) -> list[list[str]]:
    """Every set of modules that import one another in a circle (module-level imports), sorted."""
    paths = {_module(path).removesuffix(".__init__"): path for path in package.rglob("*.py")}
    graph = {module: _module_level_imports(path, set(paths)) - {module} for module, path in paths.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in graph[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while not component or component[-1] != module:
                component.append(stack.pop())
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(circles)


def test_the_package_has_no_import_circles():
    assert import_circles() == []


def test_an_import_circle_is_named(tmp_path):
    """The check above can fail: a copy of the feed where two modules import each other at module
    level (an import inside a function, or under TYPE_CHECKING, is no circle)."""
    feed = tmp_path / "sparkdl" / "feed"
    feed.mkdir(parents=True)
    (feed / "__init__.py").write_text("")
    (feed / "data_feed.py").write_text("from .micro_batches import read_micro_batches\n")
    (feed / "micro_batches.py").write_text("from . import data_feed\n")
    (feed / "dataset.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .data_feed import DataFeed\n"
    )
    (feed / "reader.py").write_text("def read():\n    from .dataset import build\n")
    (tmp_path / "sparkdl" / "__init__.py").write_text("")
    (feed / "server.py").write_text("from .reader import read\n")
    assert import_circles(tmp_path / "sparkdl") == [["sparkdl.feed.data_feed", "sparkdl.feed.micro_batches"]]


def test_the_tfos_faces_sit_on_top_no_module_imports_them():
    """TFCluster, TFNode and TFParallel only re-export or wrap the modules below them."""
    faces = {"TFCluster", "TFNode", "TFParallel"}
    root = Path(sparkdl.__file__).parent
    offenders = []
    for path in root.rglob("*.py"):
        if path.parent == root and (path.stem in faces or path.stem == "__init__"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):  # from ..TFNode import x, from .. import TFNode
                names = {(node.module or "").rsplit(".", 1)[-1]}
                if node.module in (None, "sparkdl"):
                    names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.Import):
                names = {alias.name.rsplit(".", 1)[-1] for alias in node.names}
            else:
                continue
            if names & faces:
                offenders.append(f"{path.relative_to(root)}:{node.lineno}")
    assert offenders == []
