"""docs/benchmarks.md's headline ratios (and those docs/comparison.md quotes) are copied by hand
from docs/benchmarks-method.md, whose tables benchmarks/run_all.py writes: every bold figure of
those pages must be one the method page holds, so a re-run that moves a figure shows up here
until the pages follow."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
HEADLINE = ROOT / "docs" / "benchmarks.md"
COMPARISON = ROOT / "docs" / "comparison.md"
METHOD = ROOT / "docs" / "benchmarks-method.md"
pytestmark = pytest.mark.timeout(60)


def bold_figures(text: str) -> list[str]:
    """The bold decimal figures of a Markdown text (``**0.84**``)."""
    return re.findall(r"\*\*(\d[\d,]*\.\d+)\*\*", text)


def missing_figures(headline: str, method: str) -> list[str]:
    """The headline's bold figures that no bold span of the method page holds (its ratios are bold)."""
    held = {figure for span in re.findall(r"\*\*(.+?)\*\*", method) for figure in re.findall(r"\d[\d,]*\.\d+", span)}
    return sorted({figure for figure in bold_figures(headline) if figure not in held})


@pytest.mark.parametrize(("page", "least"), [(HEADLINE, 30), (COMPARISON, 8)], ids=["benchmarks", "comparison"])
def test_every_quoted_figure_is_measured_on_the_method_page(page, least):
    text = page.read_text()
    assert len(bold_figures(text)) >= least, f"{page.name} lost its bold figures: is the pattern still right?"
    missing = missing_figures(text, METHOD.read_text())
    assert not missing, f"docs/{page.name} quotes figures docs/benchmarks-method.md does not hold: {missing}"


def test_a_figure_the_method_page_lacks_is_named():
    method = "| (a) fit / in memory | **0.84** |\n**Resize / full relaunch: 0.34** of the seconds lost, 0.85 s\n"
    assert missing_figures("| fit | **0.84** | resize | **0.34** |", method) == []
    assert missing_figures("| fit | **0.85** | resize | **0.34** |", method) == ["0.85"]


def test_the_tables_run_all_writes_are_on_the_method_page_not_the_headline():
    assert "<!-- generated:" not in HEADLINE.read_text()
    assert "<!-- generated: train_feed -->" in METHOD.read_text()
