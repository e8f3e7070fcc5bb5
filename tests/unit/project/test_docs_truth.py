"""What the documentation names exists: files, CLI arguments and Python names.

Scans the user-facing Markdown (README.md, docs/*.md, examples/**/README.md, notebooks/README.md,
a root CONTRIBUTING file if one exists) and fails on:

1. a file or folder in backticks (or in a shell code block) that the repository does not hold.
   A name with a folder (``node/launch.py``) must match the end of a repository path, or resolve
   from the repository root or the page's folder; a bare file name (``roles.py``) must be some
   file's name. Skipped on purpose, as the user's files or no files at all: placeholders and
   wildcards (``<room>``, ``*``, ``{a,b}``, ``$VAR``, ``...``), URLs (``s3://bucket/key``,
   ``spark://HOST:7077``), absolute and home paths (``/tmp/model``, ``~/data``), paths whose first
   folder is none of the repository's (``./environment/bin/python``, ``pyspark/ml/param/shared.py``:
   the user's or another project's), and bare file names in shell blocks (``spark-submit ...
   train.py``: the user's script);
2. a ``sparkdl ...`` or ``python -m sparkdl ...`` command whose arguments the CLI does not accept
   (read from its own ``--help``);
3. a ``sparkdl`` Python name (``from sparkdl.x import Y``, ``import sparkdl.x``, a dotted
   ``sparkdl.a.b``) that does not resolve: its module is imported and each attribute looked up;
   a module that imports TensorFlow at its top level is read with ``ast`` instead. A quoted name
   (``"sparkdl.elements"``, a metadata key) is a string, not a Python name.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import inspect
import io
import os
import re
import shlex
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.timeout(60)

#: File endings that make a backticked token a file name even without a folder.
FILE_ENDINGS = (".py", ".md", ".sh", ".toml", ".yml", ".yaml", ".ipynb")
#: Folders that are not the repository's own (virtual environments, caches, build output).
NOT_REPOSITORY = {".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", "site", "build", "dist"}
#: Code fences whose lines are shell commands.
SHELL_FENCES = {"bash", "sh", "shell", "console", "zsh"}
#: Modules a sparkdl module must not import at its top level for this test to import it.
HEAVY_MODULES = {"tensorflow", "keras", "tf_keras"}

_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([^\n`]*)\n(.*?)^[ \t]*\1[ \t]*$", re.S | re.M)
# An inline code span: a run of N backticks, then text (no blank line) up to the next run of exactly N.
_SPAN = re.compile(r"(?<!`)(`+)(?!`)((?:[^`\n]|\n(?![ \t]*\n)|`+(?!`))+?)(?<!`)\1(?!`)")
_PLACEHOLDER = re.compile(r"[<>*?{}\[\]$]|\.\.\.|…|~")
_URL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)
_DOTTED = re.compile(r"""(?<![\w./'"-])sparkdl(?:\.[A-Za-z_]\w*)+""")
_FROM_IMPORT = re.compile(r"\bfrom\s+(sparkdl(?:\.\w+)*)\s+import\s+(\([^)]*\)|[^\n#;\"']+)")
_IMPORT = re.compile(r"(?<![\w.])import\s+(sparkdl(?:\.\w+)*(?:\s+as\s+\w+)?(?:\s*,\s*[\w.]+(?:\s+as\s+\w+)?)*)")
_PYTHON = re.compile(r"python(?:\d+(?:\.\d+)?)?$")


# -- reading the pages ----------------------------------------------------------------------------


def doc_files() -> list[Path]:
    """The pages users read: the README, the site's pages, the examples' and notebooks' READMEs."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    pages += sorted((ROOT / "examples").glob("**/README.md")) + [ROOT / "notebooks" / "README.md"]
    pages += sorted(ROOT.glob("CONTRIBUTING*"))
    return [page for page in pages if page.is_file()]


def code_pieces(text: str) -> list[tuple[str, str]]:
    """``(kind, code)`` for each fenced block (kind: its language, ``""`` if none) and each inline
    code span (kind ``"span"``, line breaks made spaces)."""
    pieces = [(match.group(2).strip().split(" ")[0].lower(), match.group(3)) for match in _FENCE.finditer(text)]
    prose = _FENCE.sub("", text)
    pieces += [("span", re.sub(r"\s*\n\s*", " ", match.group(2)).strip()) for match in _SPAN.finditer(prose)]
    return pieces


# -- 1. files and folders -------------------------------------------------------------------------


def repository_paths(root: Path = ROOT) -> tuple[set[str], set[str], set[str]]:
    """``(paths, file names, folder names)`` of the repository's files and folders (``paths``
    relative to ``root``, with ``/``), virtual environments and caches left out."""
    paths, names, folders = set(), set(), set()
    for current, subdirs, files in os.walk(root):
        subdirs[:] = [
            d
            for d in subdirs
            if d not in NOT_REPOSITORY
            and not d.endswith(".egg-info")
            and not (Path(current) / d / "pyvenv.cfg").exists()
        ]
        relative = Path(current).relative_to(root).as_posix()
        prefix = "" if relative == "." else relative + "/"
        for d in subdirs:
            paths.add(prefix + d)
            folders.add(d)
        for f in files:
            paths.add(prefix + f)
            names.add(f)
    return paths, names, folders


def path_tokens(kind: str, code: str) -> list[str]:
    """The tokens of an inline span or a shell block that could be file or folder names."""
    if kind != "span" and kind not in SHELL_FENCES:
        return []
    tokens = []
    for raw in code.split():
        token = raw.split("=", 1)[1] if raw.startswith("-") and "=" in raw else raw
        token = token.strip("\"'(),;:").split("::")[0].split("#")[0]
        token = re.sub(r":\d+$", "", token)  # file.py:42
        if token and re.fullmatch(r"[\w.@+/-]+", token) and re.search(r"[A-Za-z]", token):
            tokens.append(token)
    return tokens


def missing_paths(text: str, page: Path, repository: tuple[set[str], set[str], set[str]]) -> list[str]:
    """The file and folder names in ``text`` (the page at ``page``) that the repository lacks."""
    paths, names, folders = repository
    page_dir = page.parent.relative_to(ROOT).as_posix() if page.is_relative_to(ROOT) else "."
    missing = []
    for kind, code in code_pieces(text):
        if kind == "span" and (_PLACEHOLDER.search(code) or _URL.match(code)):
            continue
        for token in path_tokens(kind, code):
            if _PLACEHOLDER.search(token) or _URL.match(token) or token.startswith("/"):
                continue
            if "/" not in token:
                if kind == "span" and token.endswith(FILE_ENDINGS) and token not in names:
                    missing.append(token)
                continue
            path = token.rstrip("/").removeprefix("./")
            first = path.split("/")[0]
            if not (first in folders or first == ".."):
                continue  # a path of the user's or of another project
            candidates = {os.path.normpath(path), os.path.normpath(os.path.join(page_dir, path))}
            if not (candidates & paths or any(p.endswith("/" + path) for p in paths)):
                missing.append(token)
    return missing


# -- 2. CLI commands -------------------------------------------------------------------------------


def cli_arguments() -> tuple[set[str], set[str]]:
    """``(options, positional choices)`` that ``sparkdl`` accepts, read from its ``--help``."""
    from sparkdl.__main__ import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main(["--help"])
    usage = out.getvalue().split("\n\n")[0]
    assert usage.startswith("usage: sparkdl"), out.getvalue()[:200]
    options = set(re.findall(r"(?<![\w-])--?[A-Za-z][\w-]*", usage)) | {"--help"}
    choices = {c.strip() for group in re.findall(r"\{([^}]*)\}", usage) for c in group.split(",")}
    return options, choices


def commands(text: str) -> list[list[str]]:
    """The argument lists of the ``sparkdl`` / ``python -m sparkdl`` commands shown in ``text``."""
    found = []
    for kind, code in code_pieces(text):
        if kind != "span" and kind not in SHELL_FENCES:
            continue  # a block without a language shows output, not commands
        for line in code.replace("\\\n", " ").splitlines():
            for part in re.split(r"&&|\|\||[;|(`]|\$\(", line.split(" #")[0]):
                try:
                    words = shlex.split(part, comments=True)
                except ValueError:
                    words = part.split()
                while words and re.fullmatch(r"\$|\w+=\S*", words[0]):  # prompt, VAR=value
                    words = words[1:]
                if words and Path(words[0]).name == "sparkdl":
                    arguments = words[1:]
                elif len(words) >= 3 and _PYTHON.match(Path(words[0]).name) and words[1:3] == ["-m", "sparkdl"]:
                    arguments = words[3:]
                else:
                    continue
                cut = next((i for i, w in enumerate(arguments) if w[:1] in "<>&" or w[:2] == "2>"), len(arguments))
                found.append(arguments[:cut])
    return found


def bad_commands(text: str, accepted: tuple[set[str], set[str]]) -> list[str]:
    """The commands in ``text`` with an argument the CLI rejects, as written."""
    options, choices = accepted
    bad = []
    for arguments in commands(text):
        wrong = [a for a in arguments if (a.split("=")[0] not in options if a.startswith("-") else a not in choices)]
        if wrong:
            bad.append(" ".join(["sparkdl", *arguments]))
    return bad


# -- 3. Python names -------------------------------------------------------------------------------


def python_names(text: str) -> set[str]:
    """The ``sparkdl`` names that ``text``'s code imports or spells out dotted."""
    names = set()
    for _, code in code_pieces(text):
        names.update(_DOTTED.findall(code))
        for module, imported in _FROM_IMPORT.findall(code):
            for item in imported.strip("()").replace("\\", " ").split(","):
                name = item.split(" as ")[0].strip()
                if name and name != "*" and name.isidentifier():
                    names.add(f"{module}.{name}")
        for imported in _IMPORT.findall(code):
            for item in imported.split(","):
                names.add(item.split(" as ")[0].strip())
    return {name for name in names if name.startswith("sparkdl")}


def _module_file(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imports_heavy_modules(source: Path) -> bool:
    tree = ast.parse(source.read_text())
    for node in tree.body:
        imported = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported = [node.module]
        if any(name.split(".")[0] in HEAVY_MODULES for name in imported):
            return True
    return False


def _defined_in_source(source: Path, attributes: list[str]) -> bool:
    """Whether ``attributes`` (``["Class", "method"]``) are defined in ``source``, read with ast."""
    scope: list[ast.stmt] = ast.parse(source.read_text()).body
    for name in attributes:
        found = None
        for node in scope:
            targets = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                targets = [node.name]
            elif isinstance(node, ast.Assign):
                targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                targets = [node.target.id]
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                targets = [(a.asname or a.name).split(".")[0] for a in node.names]
            if name in targets:
                found = node
        if found is None:
            return False
        scope = found.body if isinstance(found, ast.ClassDef) else []
    return True


def _instance_attribute(cls: type, name: str) -> bool:
    """Whether instances of ``cls`` carry ``name`` though the class does not: a field, a slot, or
    an attribute its methods assign (``self.name = ...``)."""
    for klass in inspect.getmro(cls):
        if name in getattr(klass, "__annotations__", {}) or name in getattr(klass, "__slots__", ()):
            return True
        with contextlib.suppress(OSError, TypeError):
            if re.search(rf"\bself\.{name}\s*(?::[^=\n]+)?=(?!=)", inspect.getsource(klass)):
                return True
    return False


def resolves(name: str) -> bool:
    """Whether the dotted ``sparkdl`` name ``name`` names a module, or an attribute within one."""
    parts = name.split(".")
    for split in range(len(parts), 0, -1):
        source = _module_file(".".join(parts[:split]))
        if source is not None:
            break
    else:
        return False
    module, attributes = ".".join(parts[:split]), parts[split:]
    if _imports_heavy_modules(source):
        return _defined_in_source(source, attributes)
    obj = importlib.import_module(module)
    for attribute in attributes:
        if hasattr(obj, attribute):
            obj = getattr(obj, attribute)
        elif _module_file(f"{obj.__name__}.{attribute}" if inspect.ismodule(obj) else "") is not None:
            obj = importlib.import_module(f"{obj.__name__}.{attribute}")
        else:
            return inspect.isclass(obj) and attribute == attributes[-1] and _instance_attribute(obj, attribute)
    return True


# -- the tests -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pages() -> dict[Path, str]:
    return {page: page.read_text() for page in doc_files()}


def test_the_scanned_pages_are_the_user_facing_ones(pages):
    names = {page.relative_to(ROOT).as_posix() for page in pages}
    expected = {"README.md", "docs/architecture.md", "docs/migration.md", "examples/README.md", "notebooks/README.md"}
    assert expected <= names, expected - names
    assert any(name.startswith("examples/") and name.count("/") == 2 for name in names), names


def test_every_file_and_folder_the_docs_name_exists(pages):
    repository = repository_paths()
    missing = [
        f"{page.relative_to(ROOT)}: {token}"
        for page, text in pages.items()
        for token in missing_paths(text, page, repository)
    ]
    checked = sum(len(path_tokens(kind, code)) for text in pages.values() for kind, code in code_pieces(text))
    assert checked >= 200, f"only {checked} tokens looked at; are the patterns still right?"
    assert not missing, "the docs name files the repository does not hold:\n" + "\n".join(missing)


def test_every_sparkdl_command_the_docs_show_is_accepted(pages):
    accepted = cli_arguments()
    assert "--version" in accepted[0], accepted
    bad = [
        f"{page.relative_to(ROOT)}: {command}"
        for page, text in pages.items()
        for command in bad_commands(text, accepted)
    ]
    shown = sum(len(commands(text)) for text in pages.values())
    assert shown >= 3, f"only {shown} sparkdl commands found; is the pattern still right?"
    assert not bad, "the docs show sparkdl commands the CLI rejects:\n" + "\n".join(bad)


def test_every_sparkdl_name_the_docs_use_resolves(pages):
    tensorflow_before = "tensorflow" in sys.modules
    named = {(page, name) for page, text in pages.items() for name in python_names(text)}
    wrong = {name for name in {name for _, name in named} if not resolves(name)}
    unresolved = sorted(f"{page.relative_to(ROOT)}: {name}" for page, name in named if name in wrong)
    assert len(named) >= 50, f"only {len(named)} sparkdl names found; are the patterns still right?"
    assert not unresolved, "the docs name sparkdl objects that do not exist:\n" + "\n".join(unresolved)
    assert tensorflow_before or "tensorflow" not in sys.modules, "resolving the docs' names imported TensorFlow"


def test_the_checks_name_stale_files_commands_and_imports():
    """Each check flags what it should (the names of a page that fell behind the code)."""
    page = ROOT / "docs" / "stale.md"
    text = (
        "Specs live in `column_specs.py` and `columns/column_readers.py`; see `tests/unit/node/test_node_config.py`.\n"
        "Fine: `roles.py`, `node/launch.py`, `tests/unit/feed/`, `/tmp/x/y.py`, `s3://b/k.py`,\n"
        "`sparkdl/<room>/x.py`, `pyspark/ml/param/shared.py`.\n\n"
        "```bash\npython -m sparkdl doctor\nsparkdl --version && .venv/bin/python -m sparkdl --check-tf\n"
        "spark-submit --py-files examples/mnist/gone.py x\n```\n\n"
        "```python\nfrom sparkdl.keras import KerasEstimator, NoSuchThing\nimport sparkdl.nowhere\n```\n"
        "`sparkdl.TFCluster.run` and `sparkdl.TFCluster.walk`.\n"
    )
    assert sorted(missing_paths(text, page, repository_paths())) == [
        "column_specs.py",
        "columns/column_readers.py",
        "examples/mnist/gone.py",
        "tests/unit/node/test_node_config.py",
    ]
    assert bad_commands(text, cli_arguments()) == ["sparkdl doctor"]
    unresolved = sorted(name for name in python_names(text) if not resolves(name))
    assert unresolved == ["sparkdl.TFCluster.walk", "sparkdl.keras.NoSuchThing", "sparkdl.nowhere"]


def test_a_module_that_imports_tensorflow_is_read_not_imported(tmp_path):
    source = tmp_path / "heavy.py"
    source.write_text("import tensorflow as tf\n\nLIMIT: int = 3\n\n\nclass Model:\n    def fit(self):\n        pass\n")
    assert _imports_heavy_modules(source)
    assert not _imports_heavy_modules(ROOT / "sparkdl" / "columns" / "tensors.py")  # imports TF in functions only
    assert _defined_in_source(source, ["Model", "fit"]) and _defined_in_source(source, ["LIMIT"])
    assert not _defined_in_source(source, ["Model", "predict"]) and not _defined_in_source(source, ["tf", "keras"])
