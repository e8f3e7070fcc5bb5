"""Executor side: score Spark batches with the cached model, following a :class:`ScoringPlan`.

The driver (:mod:`.planning`, :mod:`.predictor`) builds one picklable :class:`ScoringPlan` for
every form and hands Spark one of the functions made here: :func:`pandas_scorer`
(``mapInPandas``), :func:`arrow_scorer` (``mapInArrow``) or :func:`udf_scorer` (a pandas UDF),
plus :func:`probe_function`, the one-row job that reads a model's signature. On executors every
batch is converted column-wise (:mod:`.columns`), split into ``batch_size`` chunks, scored by
the worker's cached model (:mod:`.worker`) and converted back. A versioned source
(:class:`~sparkdl.model_versions.ModelVersions`) is re-resolved as each batch starts
(:class:`TaskModel`), so a newer version takes over between two batches; ``version_column``
then names the version that scored each row.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator, Mapping, Tuple

import numpy as np
import pandas as pd

from ..columns.arrow_rows import origin_values
from . import columns as cols
from . import worker
from .columns import InferenceInputError, InputPlan, OutputPlan
from .model import LoadedModel, ModelSource


@dataclass(frozen=True)
class ScoringPlan:
    """Everything an executor needs to score batches (picklable, no Spark objects).

    ``pad_to``: when set, a chunk shorter than this is padded (by repeating its last row) to this
    many rows and the padding is dropped from the outputs, so the model always sees one batch
    shape (needed for models with a fixed batch dimension or jit-compiled functions).
    """

    source: ModelSource
    inputs: tuple[InputPlan, ...]
    outputs: tuple[OutputPlan, ...]
    keep: tuple[str, ...]
    batch_size: int
    pad_to: int | None
    gpus: str
    output_schema_json: str  # StructType.json(): executors rebuild it without a JVM
    version_column: str | None = None  # a long column after the outputs: the version that scored the row

    def output_schema(self):
        """The result ``StructType``."""
        from pyspark.sql.types import StructType

        return StructType.fromJson(json.loads(self.output_schema_json))


def _normalise_result(result: Any, plan: ScoringPlan) -> dict[str, np.ndarray]:
    """What a model or predict function returned, as ``{output name: array}``."""
    if isinstance(result, Mapping):
        return {key: np.asarray(value) for key, value in result.items()}
    if isinstance(result, pd.DataFrame):
        return {key: result[key].to_numpy() for key in result.columns}
    if isinstance(result, list) and result and isinstance(result[0], Mapping):
        # predict_batch_udf's row-oriented form: a list of dicts, one per row.
        return {key: np.asarray([row[key] for row in result]) for key in result[0]}
    if isinstance(result, (list, tuple)):
        if len(result) != len(plan.outputs):
            raise InferenceInputError(
                f"the predict function returned {len(result)} arrays but {len(plan.outputs)} outputs were declared"
            )
        return {out.tensor: np.asarray(value) for out, value in zip(plan.outputs, result)}
    if len(plan.outputs) != 1:
        raise InferenceInputError(
            f"the predict function returned one array but {len(plan.outputs)} outputs "
            f"were declared ({[o.tensor for o in plan.outputs]}); return a dict"
        )
    return {plan.outputs[0].tensor: np.asarray(result)}


class TaskModel:
    """The model one task scores with: looked up (cache or load) at its first batch; for a
    versioned source, re-resolved at every batch (:func:`.worker.newest_source` lists the base at
    most once every ``refresh_seconds``), switching when a newer version appears. ``version`` is
    the version of the model :meth:`current` returned (None for an unversioned source)."""

    def __init__(self, plan: ScoringPlan):
        self.plan = plan
        self.model: LoadedModel | None = None
        self.version: int | None = None
        self.path: str | None = None
        self.rows_seen = 0  # rows of this task's partition so far (bad rows are named by position)
        self._partition_id: int | None = None
        self._converters: dict = {}  # one traced converter per input read by a column reader

    def current(self) -> LoadedModel:
        """The model to score the next batch with."""
        source = self.plan.source
        if source.versions is None:
            if self.model is None:
                self.model = worker.get_model(source, self.plan.gpus)
            return self.model
        version, resolved = worker.newest_source(source)
        if self.model is None or resolved.path != self.path:
            model = worker.get_model(resolved, self.plan.gpus)
            _check_version(model, self.plan, resolved.path)
            self.model, self.version, self.path = model, version, resolved.path
        return self.model

    def version_values(self, rows: int) -> np.ndarray:
        """The version column's values for a batch of ``rows`` rows."""
        return np.full(rows, self.version, dtype="int64")

    def inputs(self, columns: list, dense: Callable, rows: int, runtime: bool = False) -> list:
        """The model's inputs for one batch, in plan order: ``dense(column, plan)`` for plain
        columns, a checked :class:`~.columns.ReaderBatch` for images, Vectors and arrays of
        varying length (a bad row raises naming its column, Spark partition and row)."""
        origins = origin_values(self._partition(), self.rows_seen + np.arange(rows))
        self.rows_seen += rows
        arrays = []
        for column, p in zip(columns, self.plan.inputs):
            if cols.needs_reader(p):
                arrays.append(cols.read_column(column, p, origins, self._converters))
            else:
                arrays.append(dense(column, _runtime_plan(p, column) if runtime else p))
        return arrays

    def _partition(self) -> int:
        if self._partition_id is None:
            from pyspark import TaskContext

            context = TaskContext.get()
            self._partition_id = context.partitionId() if context is not None else 0
        return self._partition_id


def _check_version(model: LoadedModel, plan: ScoringPlan, path: str) -> None:
    """Refuse a model version that the plan (made from the version read when the job was planned)
    cannot feed: another number of inputs, or outputs missing."""
    if model.inputs is None:
        return
    names = [t.name for t in model.inputs]
    outputs = [t.name for t in model.outputs or []]
    missing = [o.tensor for o in plan.outputs if o.tensor not in outputs]
    if len(names) != len(plan.inputs) or missing:
        raise InferenceInputError(
            f"model {path!r} has inputs {names} and outputs {outputs}, but this job was planned for "
            f"inputs {[p.tensor for p in plan.inputs]} and outputs {[o.tensor for o in plan.outputs]}; "
            "a new version must keep them (start the query again to plan for the new ones)"
        )


def feed_order(model: LoadedModel, plan: ScoringPlan) -> list[int] | None:
    """The one rule for which array feeds which model input: for each of the model's inputs, in
    the model's order, the index of the plan input (column or UDF argument) with its name.

    ``input_mapping`` (a dict in any order, ``TFModel``'s mapping sorted by column) and
    ``input_names`` may list the inputs in another order than the model, which takes them by
    position. None (feed as listed) when nothing needs moving or the inputs have no usable names:
    a ``make_predict_fn``, a single input, or names that are not the model's one for one.
    """
    if model.inputs is None or len(model.inputs) < 2:
        return None
    index = {p.tensor: i for i, p in enumerate(plan.inputs)}
    names = [t.name for t in model.inputs]
    if len(index) != len(plan.inputs) or sorted(index) != sorted(names):
        return None
    order = [index[name] for name in names]
    return None if order == sorted(order) else order


def score_arrays(model: LoadedModel, plan: ScoringPlan, arrays: list[np.ndarray], rows: int) -> dict[str, np.ndarray]:
    """Run the model over ``rows`` rows of ``arrays`` (in plan order, put in the model's input
    order by :func:`feed_order`) in ``batch_size`` chunks; outputs by name."""
    order = feed_order(model, plan)
    if order is not None:
        arrays = [arrays[i] for i in order]
    parts: list[dict[str, np.ndarray]] = []
    for start in range(0, rows, plan.batch_size):
        chunk = [array[start : start + plan.batch_size] for array in arrays]
        size = min(plan.batch_size, rows - start)
        pad = (plan.pad_to - size) if plan.pad_to and size < plan.pad_to else 0
        if pad:
            chunk = [
                a.repeat_last(pad)
                if isinstance(a, cols.ReaderBatch)
                else np.concatenate([a, np.repeat(a[-1:], pad, axis=0)])
                for a in chunk
            ]
        chunk = [a.tensor() if isinstance(a, cols.ReaderBatch) else a for a in chunk]
        result = _normalise_result(model(chunk), plan)
        if pad:
            result = {key: value[:size] for key, value in result.items()}
        parts.append(result)
    if len(parts) == 1:
        return parts[0]
    return {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}


def pandas_scorer(plan: ScoringPlan) -> Callable[[Iterator[pd.DataFrame]], Iterator[pd.DataFrame]]:
    """The ``mapInPandas`` function: one cached model per worker, vectorised batches."""

    def score_partition(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        task = TaskModel(plan)  # loaded lazily: an empty partition loads nothing
        for frame in batches:
            rows = len(frame)
            if rows == 0:
                continue
            # Data first: a bad batch fails before TensorFlow is even imported in a fresh worker.
            arrays = task.inputs([frame[p.column] for p in plan.inputs], cols.pandas_to_model_input, rows)
            outputs = score_arrays(task.current(), plan, arrays, rows)
            result = cols.outputs_to_pandas(outputs, plan.outputs, rows, frame[list(plan.keep)] if plan.keep else None)
            if plan.version_column:
                result[plan.version_column] = task.version_values(rows)
            yield result

    return score_partition


def arrow_scorer(plan: ScoringPlan) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The ``mapInArrow`` function: like :func:`pandas_scorer`, on Arrow record batches; kept
    columns pass through as the very Arrow arrays Spark sent (no conversion at all)."""

    def score_partition(batches):
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema
        from pyspark.sql.types import StructType

        result_fields = list(to_arrow_schema(StructType(plan.output_schema().fields[len(plan.keep) :])))
        version_field = result_fields.pop() if plan.version_column else None
        task = TaskModel(plan)
        for batch in batches:
            rows = batch.num_rows
            if rows == 0:
                continue
            arrays = task.inputs([batch.column(p.column) for p in plan.inputs], cols.arrow_to_model_input, rows)
            outputs = score_arrays(task.current(), plan, arrays, rows)
            keep = batch.select(list(plan.keep)) if plan.keep else None
            schema = pa.schema((list(keep.schema) if keep is not None else []) + result_fields)
            result = cols.outputs_to_arrow(outputs, plan.outputs, rows, schema, keep)
            if version_field is not None:
                result = pa.RecordBatch.from_arrays(
                    [*result.columns, pa.array(task.version_values(rows), type=version_field.type)],
                    schema=schema.append(version_field),
                )
            yield result

    return score_partition


def probe_function(source: ModelSource, gpus: str):
    """The ``mapInPandas`` function of the driver's signature probe: loads (and caches) the
    model on an executor and answers its signature as one JSON row, or the error."""

    def probe(batches):
        for _ in batches:
            pass
        try:
            answer = {"signature": worker.get_model(source, gpus).signature()}
        except Exception as exc:  # reported, not raised: Spark would retry a deterministic failure
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        yield pd.DataFrame({"signature": [json.dumps(answer)]})

    return probe


def udf_scorer(plan: ScoringPlan, struct: bool, arity: int):
    """The SCALAR_ITER pandas UDF body (type hints tell PySpark which UDF kind this is)."""

    def score_task(batches):
        task = TaskModel(plan)  # looked up (cache or load) at this task's first batch
        for batch_args in batches:
            args = batch_args if isinstance(batch_args, tuple) else (batch_args,)
            if len(args) != len(plan.inputs):
                raise InferenceInputError(
                    f"the UDF was called with {len(args)} column(s) but the model takes "
                    f"{len(plan.inputs)} input(s) {[p.tensor for p in plan.inputs]}"
                )
            rows = len(args[0])
            arrays = task.inputs(list(args), cols.pandas_to_model_input, rows, runtime=True)
            frame = cols.outputs_to_pandas(score_arrays(task.current(), plan, arrays, rows), plan.outputs, rows)
            if plan.version_column:
                frame[plan.version_column] = task.version_values(rows)
            yield frame if struct else frame.iloc[:, 0]

    if struct and arity == 1:

        def udf_struct_one(batches: Iterator[pd.Series]) -> Iterator[pd.DataFrame]:
            return score_task(batches)

        return udf_struct_one
    if struct:

        def udf_struct(batches: Iterator[Tuple[pd.Series, ...]]) -> Iterator[pd.DataFrame]:
            return score_task(batches)

        return udf_struct
    if arity == 1:

        def udf_one(batches: Iterator[pd.Series]) -> Iterator[pd.Series]:
            return score_task(batches)

        return udf_one

    def udf_many(batches: Iterator[Tuple[pd.Series, ...]]) -> Iterator[pd.Series]:
        return score_task(batches)

    return udf_many


def _runtime_plan(plan: InputPlan, series: pd.Series) -> InputPlan:
    """Fill in a UDF argument's depth and dtype from the pandas data (no schema at UDF creation)."""
    if plan.depth >= 0:
        return plan
    if series.dtype == object:
        first = series.iloc[series.first_valid_index()] if series.first_valid_index() is not None else None
        if isinstance(first, (str, bytes)):
            return replace(plan, depth=0, source_dtype="str" if isinstance(first, str) else "bytes")
        depth = 0
        while isinstance(first, (np.ndarray, list)) and len(first):
            depth += 1
            first = first[0]
        source = np.asarray(first).dtype.name if first is not None else ""
        return replace(plan, depth=max(depth, 1), source_dtype=source)
    return replace(plan, depth=0, source_dtype=series.dtype.name)
