"""The rows a fit trains on, prepared once on the driver's side of Spark: selected, split, persisted, scanned.

``prepare`` selects the fed columns (and the validation mark: a seeded ``rand(seed) < fraction``,
or the user's boolean column), persists that one frame (memory and disk; unless the user cached
exactly these rows already: they are used and left cached) so every feeding job and every param
map of ``fitMultiple`` reads the same rows, and scans it in one Spark job for what the
schema cannot tell: row counts, nulls, array and Vector widths (ragged rows) and null elements.
The training and validation frames are filters of the persisted frame; ``release`` unpersists it.
The scan's findings are judged by ``checks.py``; no TF node has started yet.
"""

from __future__ import annotations

from dataclasses import dataclass

VALIDATION_MARK = "__sparkdl_validation"


@dataclass(frozen=True)
class ColumnStats:
    """What the scan found, per column (by name)."""

    rows: int
    validation_rows: int  # rows marked for validation (0 without validation)
    nulls: dict[str, int]
    null_elements: dict[str, int]  # rows of an array column holding a null element
    widths: dict[str, tuple[int, int]]  # (smallest, largest) values per row of array and Vector columns
    mark_nulls: int = 0  # rows whose validation indicator is null


@dataclass
class PreparedData:
    """The persisted rows of a fit and its training and validation frames."""

    frame: object
    train: object
    validation: object | None
    stats: ColumnStats
    owned: bool = True  # persisted by prepare (else the user had cached these rows already)

    def release(self) -> None:
        """Drop the rows prepare persisted (the frames must not be used afterwards)."""
        if self.owned:
            self.frame.unpersist()


def column(name: str):
    """A column by its exact name (dots and other characters taken literally)."""
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def prepare(df, columns: list[str], kinds: dict[str, str], validation, seed: int) -> PreparedData:
    """Select, mark, persist and scan ``df``'s ``columns`` (``kinds``: scalar, array or vector)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    selected = [column(c) for c in columns]
    if isinstance(validation, str):
        selected.append(column(validation).alias(VALIDATION_MARK))
    elif validation is not None:
        selected.append((F.rand(seed) < F.lit(float(validation))).alias(VALIDATION_MARK))
    frame = df.select(*selected)
    level = frame.storageLevel  # the user's own cache of these very rows is used, and left to them
    owned = not (level.useMemory or level.useDisk)
    if owned:
        frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        stats = _scan(frame, columns, kinds, validation is not None)
    except BaseException:
        if owned:
            frame.unpersist()
        raise
    if validation is None:
        return PreparedData(frame, frame, None, stats, owned)
    mark = F.coalesce(F.col(VALIDATION_MARK), F.lit(False))
    train, held_out = frame.where(~mark).drop(VALIDATION_MARK), frame.where(mark).drop(VALIDATION_MARK)
    return PreparedData(frame, train, held_out, stats, owned)


def _scan(frame, columns: list[str], kinds: dict[str, str], marked: bool) -> ColumnStats:
    """One Spark job: counts, nulls and widths of every column (it also fills the persisted frame)."""
    from pyspark.ml.functions import vector_to_array
    from pyspark.sql import functions as F

    aggregates = [F.count(F.lit(1)).alias("rows")]
    for i, name in enumerate(columns):
        values = column(name)
        aggregates.append(F.sum(values.isNull().cast("long")).alias(f"null{i}"))
        if kinds[name] == "array":
            size = F.size(values)
            has_null = F.exists(values, lambda element: element.isNull())
            aggregates += [F.min(size).alias(f"min{i}"), F.max(size).alias(f"max{i}")]
            aggregates.append(F.sum(has_null.cast("long")).alias(f"holes{i}"))
        elif kinds[name] == "vector":
            size = F.size(vector_to_array(values))
            aggregates += [F.min(size).alias(f"min{i}"), F.max(size).alias(f"max{i}")]
    if marked:
        mark = F.col(VALIDATION_MARK)
        aggregates += [F.sum(mark.cast("long")).alias("marked"), F.sum(mark.isNull().cast("long")).alias("unmarked")]
    sc = frame.sparkSession.sparkContext
    sc.setJobDescription("sparkdl: check the columns KerasEstimator.fit trains on")
    try:
        row = frame.agg(*aggregates).collect()[0].asDict()
    finally:
        sc.setJobDescription(None)
    widths = {
        name: (int(row[f"min{i}"] or 0), int(row[f"max{i}"] or 0))
        for i, name in enumerate(columns)
        if kinds[name] in ("array", "vector")
    }
    return ColumnStats(
        rows=int(row["rows"]),
        validation_rows=int(row.get("marked") or 0),
        nulls={name: int(row[f"null{i}"] or 0) for i, name in enumerate(columns)},
        null_elements={name: int(row[f"holes{i}"] or 0) for i, name in enumerate(columns) if f"holes{i}" in row},
        widths=widths,
        mark_nulls=int(row.get("unmarked") or 0),
    )
