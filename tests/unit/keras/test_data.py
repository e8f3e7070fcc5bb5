"""sparkdl.keras.data without Spark: what a fit's prepared rows release, and the scan's findings."""

from __future__ import annotations

import dataclasses

import pytest

from sparkdl.keras.data import VALIDATION_MARK, ColumnStats, PreparedData

pytestmark = pytest.mark.timeout(30)


class Frame:
    """Stands in for the persisted DataFrame: counts its unpersist calls."""

    def __init__(self):
        self.unpersisted = 0

    def unpersist(self):
        self.unpersisted += 1


def stats() -> ColumnStats:
    return ColumnStats(rows=10, validation_rows=0, nulls={"x": 0}, null_elements={}, widths={"x": (3, 3)})


def test_release_drops_only_the_rows_prepare_persisted():
    ours, theirs = Frame(), Frame()
    PreparedData(ours, ours, None, stats()).release()
    PreparedData(theirs, theirs, None, stats(), owned=False).release()  # the user's own cache stays theirs
    assert (ours.unpersisted, theirs.unpersisted) == (1, 0)


def test_the_scan_s_findings_are_frozen_and_count_no_unmarked_rows_by_default():
    found = stats()
    assert found.mark_nulls == 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        found.rows = 11
    assert VALIDATION_MARK.startswith("__sparkdl"), "the validation mark cannot clash with a user's column"
