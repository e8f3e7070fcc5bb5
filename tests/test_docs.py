"""The documentation stays true: docs/api.md is what the code generates now, every public name it
covers has a docstring, and links between the Markdown files point at files (and anchors) that exist."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.timeout(120)

REGENERATE = "docs/api.md is out of date: run `python scripts/gen_api_docs.py` and commit the result"


@pytest.fixture(scope="module")
def gen():
    """scripts/gen_api_docs.py as a module."""
    spec = importlib.util.spec_from_file_location("gen_api_docs", ROOT / "scripts" / "gen_api_docs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is created
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generated(gen):
    """``(markdown, entries)`` for the code as it is now."""
    return gen.generate()


def test_api_reference_is_current(generated):
    text, _ = generated
    current = (ROOT / "docs" / "api.md").read_text()
    if current != text:
        changed = [
            f"{i + 1}: {a!r} != {b!r}"
            for i, (a, b) in enumerate(zip(current.splitlines(), text.splitlines()))
            if a != b
        ][:5]
        pytest.fail(f"{REGENERATE}\nfirst differences (file vs generated):\n" + "\n".join(changed))


def test_every_documented_public_name_has_a_docstring(generated):
    _, entries = generated
    missing = [f"{e.qualname} ({e.kind})" for e in entries if e.needs_docstring and not e.doc.strip()]
    assert not missing, "public names without a docstring:\n" + "\n".join(missing)


def test_reference_covers_the_tensorflowonspark_surface_and_the_additions(generated):
    _, entries = generated
    names = {e.qualname for e in entries}
    expected = {
        "sparkdl.TFCluster.run",
        "sparkdl.TFCluster.InputMode",
        "sparkdl.TFCluster.TFCluster",
        "sparkdl.TFCluster.TFCluster.train",
        "sparkdl.TFCluster.TFCluster.inference",
        "sparkdl.TFCluster.TFCluster.shutdown",
        "sparkdl.TFCluster.TFCluster.tensorboard_url",
        "sparkdl.TFCluster.TFCluster.cluster_info",
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
        "sparkdl.TFCluster.TFCluster.history",
        "sparkdl.inference.map_in_pandas",
        "sparkdl.inference.predict_batch_udf",
        "sparkdl.inference.Predictor",
        "sparkdl.ml.TFEstimator",
        "sparkdl.ml.TFModel",
        "sparkdl.ml.TFEstimator.setInputMapping",
        "sparkdl.errors.ClusterError",
        "sparkdl.errors.NodeFailure",
        "sparkdl.errors.PreflightError",
    }
    assert not expected - names, sorted(expected - names)
    private = [n for n in names if re.match(r"_(?!_\w+__$)", n.split(".")[-1])]  # dunders like __version__ are fine
    assert not private, f"private names leaked into the reference: {private}"


def test_generator_reflects_the_code_at_run_time(gen, monkeypatch):
    from sparkdl.node.context import NodeContext

    def brand_new_helper(self, count: int = 3) -> list[int]:
        """A helper added after docs/api.md was written."""
        return list(range(count))

    monkeypatch.setattr(NodeContext, "brand_new_helper", brand_new_helper, raising=False)
    text, entries = gen.generate()
    assert "#### `sparkdl.node.context.NodeContext.brand_new_helper`" in text
    assert "brand_new_helper(count: int = 3) -> list[int]" in text
    assert "A helper added after docs/api.md was written." in text
    assert any(e.qualname.endswith(".brand_new_helper") for e in entries)


def test_check_mode_reports_a_stale_file_and_write_mode_fixes_it(tmp_path):
    output = tmp_path / "api.md"
    output.write_text("stale\n")
    script = [sys.executable, str(ROOT / "scripts" / "gen_api_docs.py"), "--output", str(output)]
    stale = subprocess.run([*script, "--check"], capture_output=True, text=True, timeout=90)
    assert stale.returncode == 1 and "run `python scripts/gen_api_docs.py`" in stale.stderr, stale.stderr
    assert output.read_text() == "stale\n"
    written = subprocess.run(script, capture_output=True, text=True, timeout=90)
    assert written.returncode == 0, written.stderr
    assert output.read_text().startswith("# sparkdl API reference")
    fresh = subprocess.run([*script, "--check"], capture_output=True, text=True, timeout=90)
    assert fresh.returncode == 0, fresh.stderr


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
            elif anchor and destination.suffix == ".md" and anchor not in _anchors(destination):
                broken.append(f"{path.relative_to(ROOT)}: {target} (no such anchor)")
    assert not broken, "broken links:\n" + "\n".join(broken)
    assert checked >= 10, f"only {checked} relative links found; is the link pattern still right?"


def test_readme_links_every_document():
    links = set(_links(ROOT / "README.md"))
    for doc in ("docs/architecture.md", "docs/api.md", "docs/migration.md", "docs/deployment.md"):
        assert doc in links, f"README.md does not link {doc}"
