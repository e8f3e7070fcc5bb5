"""The documentation site's configuration: a broken link fails the strict build.

CI builds the site with ``mkdocs build --strict`` (a warning is an error). These tests build a tiny
site of two pages with the real ``mkdocs.yml``'s theme, Markdown extensions and ``validation``
settings (not its API pages, which take seconds to render): one with good links builds, one with
a link to a page that does not exist, or to an anchor that does not exist, fails.
"""

from __future__ import annotations

from pathlib import Path

import pytest

mkdocs_config = pytest.importorskip("mkdocs.config")
from mkdocs.commands.build import build  # noqa: E402
from mkdocs.exceptions import Abort  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.timeout(120)


def _real_settings() -> dict:
    """What the tiny site takes from mkdocs.yml: theme, Markdown extensions, link validation."""
    import yaml

    settings = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    return {name: settings[name] for name in ("theme", "markdown_extensions", "validation")}


def _build_tiny_site(tmp_path: Path, index_text: str) -> None:
    """Build ``index.md`` (``index_text``) and ``other.md`` (a heading ``## Known``) strictly."""
    import yaml

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text(index_text)
    (docs / "other.md").write_text("# Other\n\n## Known\n\nText.\n")
    config_file = tmp_path / "mkdocs.yml"
    settings = {"site_name": "tiny", "docs_dir": str(docs), "site_dir": str(tmp_path / "site"), **_real_settings()}
    settings["nav"] = [{"Home": "index.md"}, {"Other": "other.md"}]
    config_file.write_text(yaml.safe_dump(settings))
    config = mkdocs_config.load_config(config_file=str(config_file), strict=True)
    build(config)


def test_the_real_config_makes_missing_pages_and_anchors_warnings():
    links = _real_settings()["validation"]["links"]
    assert links["not_found"] == "warn" and links["anchors"] == "warn", links


def test_a_site_with_good_links_builds(tmp_path):
    _build_tiny_site(tmp_path, "# Home\n\nSee [the other page](other.md) and [its section](other.md#known).\n")
    assert (tmp_path / "site" / "other" / "index.html").exists()


@pytest.mark.parametrize(
    "link",
    ["missing.md", "other.md#nowhere"],
    ids=["page that does not exist", "anchor that does not exist"],
)
def test_a_broken_link_fails_the_strict_build(tmp_path, link, caplog):
    with pytest.raises(Abort):
        _build_tiny_site(tmp_path, f"# Home\n\nSee [this]({link}).\n")
    assert link.split("#")[-1] in caplog.text, caplog.text
