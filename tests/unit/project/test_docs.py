"""The documentation stays true: the API reference (docs/api.md, rendered by mkdocstrings when
the site is built) names every public object it should and each carries a docstring, and links
between the Markdown files point at files (and anchors) that exist.

CI builds the site with ``mkdocs build --strict`` (warnings are errors: a ``:::`` target that no
longer exists, a broken link or anchor between pages); these tests check what a build cannot:
that nothing public is left out, or left without a docstring (mkdocstrings would skip it quietly).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

griffe = pytest.importorskip("griffe")

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.timeout(120)
API_PAGE = ROOT / "docs" / "api.md"


@pytest.fixture(scope="module")
def package():
    """sparkdl as mkdocstrings sees it: read from the source, not imported."""
    return _load(ROOT / "sparkdl")


def _load(package_dir: Path):
    """The package in ``package_dir``, read by griffe (given by path: not the one on sys.path)."""
    return griffe.load(str(package_dir), resolve_aliases=True, resolve_external=False)


def _targets() -> list[str]:
    """The objects docs/api.md renders (its ``::: path`` lines)."""
    return re.findall(r"^::: ([\w.]+)\s*$", API_PAGE.read_text(), re.M)


def _documented(package) -> dict[str, object]:
    """Every object the reference shows, by the path a reader sees (``sparkdl.TFCluster.run``):
    each ``:::`` target and, recursively, its public members (mkdocs.yml: ``filters: ["!^_"]``;
    a module's ``__all__`` when it has one)."""
    shown: dict[str, object] = {}

    def visit(obj, path: str) -> None:
        shown[path] = obj
        target = obj.final_target if obj.is_alias else obj
        if not (target.is_module or target.is_class):
            return
        names = list(target.exports) if target.is_module and target.exports else list(target.members)
        for name in names:
            member = target.members.get(name)
            if member is None or name.startswith("_"):
                continue
            if target.is_module and not target.exports and member.is_alias:
                continue  # a module without __all__ shows what it defines, not what it imports
            if target.is_class and member.is_alias:
                continue  # inherited from elsewhere
            visit(member, f"{path}.{name}")

    for path in _targets():
        visit(package[path.removeprefix("sparkdl.")] if path != "sparkdl" else package, path)
    return shown


def test_every_api_target_exists(package):
    missing = []
    for path in _targets():
        try:
            package[path.removeprefix("sparkdl.")] if path != "sparkdl" else package
        except KeyError:
            missing.append(path)
    assert len(_targets()) >= 20
    assert not missing, f"docs/api.md names objects that do not exist: {missing}"


def test_every_documented_public_name_has_a_docstring(package):
    undocumented = []
    for path, obj in _documented(package).items():
        target = obj.final_target if obj.is_alias else obj
        needs_one = target.kind.value in ("module", "class", "function") or "property" in target.labels
        if needs_one and not (target.docstring and target.docstring.value):
            undocumented.append(path)
    assert not undocumented, f"public names without a docstring (mkdocstrings would skip them): {undocumented}"


def test_reference_covers_the_tensorflowonspark_surface_and_the_additions(package):
    names = set(_documented(package))
    expected = {
        "sparkdl.TFCluster.run",
        "sparkdl.TFCluster.InputMode",
        "sparkdl.TFCluster.TFCluster",
        "sparkdl.TFCluster.TFCluster.train",
        "sparkdl.TFCluster.TFCluster.train_stream",
        "sparkdl.TFCluster.TFCluster.inference",
        "sparkdl.TFCluster.TFCluster.shutdown",
        "sparkdl.TFCluster.TFCluster.tensorboard_url",
        "sparkdl.TFCluster.TFCluster.cluster_info",
        "sparkdl.TFCluster.TFCluster.history",
        "sparkdl.TFNode.DataFeed",
        "sparkdl.TFNode.hdfs_path",
        "sparkdl.TFNode.start_cluster_server",
        "sparkdl.TFParallel.run",
        "sparkdl.node.context.NodeContext",
        "sparkdl.node.context.NodeContext.get_data_feed",
        "sparkdl.node.context.NodeContext.absolute_path",
        "sparkdl.node.context.NodeContext.release_port",
        "sparkdl.feed.data_feed.DataFeed.next_batch",
        "sparkdl.feed.data_feed.DataFeed.should_stop",
        "sparkdl.feed.data_feed.DataFeed.batch_results",
        "sparkdl.feed.data_feed.DataFeed.terminate",
        "sparkdl.feed.data_feed.DataFeed.as_dataset",
        "sparkdl.feed.data_feed.DataFeed.num_epochs",
        "sparkdl.inference.map_in_pandas",
        "sparkdl.inference.predict_batch_udf",
        "sparkdl.inference.Predictor",
        "sparkdl.ml.TFEstimator",
        "sparkdl.ml.TFModel",
        "sparkdl.common.errors.ClusterError",
        "sparkdl.common.errors.NodeFailure",
        "sparkdl.common.errors.PreflightError",
    }
    assert not expected - names, sorted(expected - names)
    private = [n for n in names if re.match(r"_(?!_\w+__$)", n.split(".")[-1])]  # dunders like __version__ are fine
    assert not private, f"private names leaked into the reference: {private}"


def test_a_public_method_added_to_the_code_shows_up_in_the_reference(tmp_path):
    """The reference follows the code: a new documented method of a documented class is in it
    with no other change (read from a copy of the source with the method added)."""
    import shutil

    copy = tmp_path / "sparkdl"
    shutil.copytree(ROOT / "sparkdl", copy, ignore=shutil.ignore_patterns("__pycache__"))
    context = copy / "node" / "context.py"
    context.write_text(
        context.read_text().replace(
            "    def release_port(self)",
            "    def brand_new_helper(self, count: int = 3) -> list[int]:\n"
            '        """A helper added after the reference was written."""\n'
            "        return list(range(count))\n\n"
            "    def release_port(self)",
            1,
        )
    )
    shown = _documented(_load(copy))
    helper = shown["sparkdl.node.context.NodeContext.brand_new_helper"]
    assert helper.docstring.value == "A helper added after the reference was written."


# -- links ----------------------------------------------------------------------------------------

_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _anchors(path: Path) -> set[str]:
    """Explicit ``id``/``name`` anchors and GitHub's heading slugs of a Markdown file."""
    text = _FENCE.sub("", path.read_text())
    anchors = set(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", text))
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*$", text, re.M):
        anchors.add(re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-"))
    return anchors


def _links(path: Path) -> list[str]:
    text = _FENCE.sub("", path.read_text())
    text = re.sub(r"`[^`\n]*`", "", text)  # inline code is not a link
    return _LINK.findall(text)


def test_relative_links_in_readme_and_docs_point_at_existing_files_and_anchors():
    broken = []
    checked = 0
    for path in _markdown_files():
        for target in _links(path):
            if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            destination = (path.parent / file_part).resolve() if file_part else path
            checked += 1
            if not destination.exists():
                broken.append(f"{path.relative_to(ROOT)}: {target} (no such file)")
            elif destination == API_PAGE:
                continue  # its anchors are the objects mkdocstrings renders: `mkdocs build --strict` checks them
            elif anchor and destination.suffix == ".md" and anchor not in _anchors(destination):
                broken.append(f"{path.relative_to(ROOT)}: {target} (no such anchor)")
    assert not broken, "broken links:\n" + "\n".join(broken)
    assert checked >= 10, f"only {checked} relative links found; is the link pattern still right?"


def test_readme_links_every_document():
    links = set(_links(ROOT / "README.md"))
    for doc in ("docs/architecture.md", "docs/api.md", "docs/migration.md", "docs/deployment.md"):
        assert doc in links, f"README.md does not link {doc}"
    # the lobby's way on: the site, contributors' page, examples, notebooks, changelog, license
    for doc in ("docs/index.md", "docs/contributing.md", "examples/README.md", "notebooks/README.md", "CHANGELOG.md"):
        assert doc in links, f"README.md does not link {doc}"
    assert "LICENSE" in links


def test_no_docstring_in_the_reference_uses_restructuredtext_literal_blocks(package):
    """Docstrings are Markdown (mkdocstrings renders them so): a paragraph ending in ``::`` before
    indented code renders as a stray ``::`` and a plain paragraph; write a fenced code block."""
    stray = []
    for path, obj in _documented(package).items():
        target = obj.final_target if obj.is_alias else obj
        text = target.docstring.value if target.docstring else ""
        if re.search(r"::\s*$", text, re.M):
            stray.append(path)
    assert not stray, f"docstrings with a reStructuredText '::' block (use a ```python fence): {stray}"
