"""Bad input to ``KerasEstimator.fit``, refused on the driver before any TF node starts.

Each check raises ``KerasInputError`` naming the Param and, for data, the column: Params that
cannot work together, columns that are missing or of a type no tensor holds, a model that is not
compiled and has no ``loss``, callbacks that cannot pickle or belong to the other Keras, and (from
``data.py``'s scan) nulls, ragged arrays, empty data and empty splits. Shapes are checked against
the model by ``layout.plan_layout``.
"""

from __future__ import annotations

import re
from typing import Any

from ..columns.arrow_numpy import numpy_dtype
from ..common.errors import SparkDLError
from .shipping import FLAVOUR_NAMES, TF_KERAS, ModelInfo, flavour_of

_RUN_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}")
MODES = ("auto", "min", "max")


class KerasInputError(SparkDLError, ValueError):
    """``KerasEstimator.fit`` cannot train on this input: the message names the Param and the column."""


def check_settings(s) -> None:
    """The Params of one fit (a ``FitSettings``), each alone and together."""
    if s.model is None:
        raise KerasInputError("model is not set: give a compiled Keras model, or a function returning one")
    for param in ("feature_cols", "label_cols"):
        if not getattr(s, param):
            raise KerasInputError(f"{param} is empty: name at least one column")
    for param, low in (("batch_size", 1), ("epochs", 1), ("predict_batch_size", 1), ("max_restarts", 0)):
        value = getattr(s, param)
        if value < low:
            raise KerasInputError(f"{param} must be at least {low}, got {value}")
    for param in ("num_workers", "num_gpus"):
        if getattr(s, param) is not None and getattr(s, param) < 0:
            raise KerasInputError(f"{param} must be None or at least 0, got {getattr(s, param)}")
    if s.min_workers is not None and s.num_workers == 0:
        raise KerasInputError("min_workers is for a cluster: num_workers=0 trains in the driver process")
    if s.min_workers is not None and (
        s.min_workers < 1 or (s.num_workers is not None and s.min_workers > s.num_workers)
    ):
        raise KerasInputError(f"min_workers must be None or from 1 to num_workers={s.num_workers}, got {s.min_workers}")
    if not 0 <= s.seed < 2**32:
        raise KerasInputError(f"seed must be an integer from 0 to 2**32 - 1, got {s.seed}")
    if s.verbose not in (0, 1, 2):
        raise KerasInputError(f"verbose must be 0, 1 or 2 (Keras' fit verbosity), got {s.verbose}")
    if isinstance(s.validation, float) and not 0 < s.validation < 1:
        raise KerasInputError(f"validation must be a fraction, 0 < validation < 1 (or a column), got {s.validation}")
    if s.mode not in MODES:
        raise KerasInputError(f"mode must be one of {MODES}, got {s.mode!r}")
    if s.monitor and s.monitor.startswith("val_") and s.validation is None:
        raise KerasInputError(f"monitor={s.monitor!r} needs validation data: set validation (a fraction or a column)")
    if (s.checkpoint_dir is None) != (s.run_id is None):
        missing = "run_id" if s.run_id is None else "checkpoint_dir"
        raise KerasInputError(f"the run store needs checkpoint_dir and run_id together: {missing} is not set")
    if s.run_id is not None and not _RUN_ID.fullmatch(s.run_id):
        raise KerasInputError(
            f"run_id must be 1 to 128 of the characters A-Z a-z 0-9 _ . - not starting with '.', got {s.run_id!r}"
        )
    if not s.prediction_col:
        raise KerasInputError("prediction_col is empty: name the column transform appends")


def column_kinds(schema, s) -> dict[str, str]:
    """``{column: "scalar" | "array" | "vector"}`` of every fed column; KerasInputError naming the
    Param and column for a missing one or a type no tensor holds."""
    fields = {f.name: f.dataType for f in schema.fields}
    kinds: dict[str, str] = {}
    weight = [s.sample_weight_col] if s.sample_weight_col else []
    for param, names in (("feature_cols", s.feature_cols), ("label_cols", s.label_cols), ("sample_weight_col", weight)):
        for name in names:
            if name not in fields:
                raise KerasInputError(f"{param}: the DataFrame has no column {name!r}; its columns are {list(fields)}")
            kind = _kind(fields[name])
            if kind is None or (param == "sample_weight_col" and kind != "scalar"):
                wanted = "a number" if param == "sample_weight_col" else "numbers, number arrays or pyspark.ml Vectors"
                raise KerasInputError(
                    f"{param}: column {name!r} has type {fields[name].simpleString()}, which cannot feed a Keras "
                    f"model: it must hold {wanted} (cast or convert it first)"
                )
            kinds[name] = kind
    if isinstance(s.validation, str):
        from pyspark.sql.types import BooleanType

        if s.validation not in fields:
            raise KerasInputError(
                f"validation: the DataFrame has no column {s.validation!r} (a boolean column marking validation "
                f"rows); its columns are {list(fields)}"
            )
        if not isinstance(fields[s.validation], BooleanType):
            raise KerasInputError(
                f"validation: column {s.validation!r} has type {fields[s.validation].simpleString()}; a validation "
                "indicator column must be boolean"
            )
    return kinds


def column_dtypes(schema, columns) -> dict[str, str]:
    """The numpy dtype of each of ``columns``' values (an array's elements; a Vector's: float64), for
    ``layout.plan_layout`` to feed each model input as its dtype, integers as integers."""
    from pyspark.sql import types as T

    fields = {f.name: f.dataType for f in schema.fields}
    dtypes = {}
    for name in columns:
        kind = fields[name]
        if isinstance(kind, T.ArrayType):
            kind = kind.elementType
        dtypes[name] = numpy_dtype(kind.typeName()) or "float64"  # a Vector (a user-defined type): doubles
    return dtypes


def _kind(data_type) -> str | None:
    from pyspark.ml.linalg import VectorUDT
    from pyspark.sql import types as T

    numbers = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType, T.BooleanType)
    if isinstance(data_type, numbers):
        return "scalar"
    if isinstance(data_type, T.ArrayType) and isinstance(data_type.elementType, numbers):
        return "array"
    if isinstance(data_type, VectorUDT):
        return "vector"
    return None


def check_model(info: ModelInfo, compile_spec) -> None:
    """A model that can train as asked: compiled, or given a ``loss``."""
    if not info.has_loss and compile_spec.loss is None:
        raise KerasInputError(
            "model is not compiled with a loss and the loss Param is not set: compile the model, or set loss "
            "(and optimizer, else Keras' default)"
        )


def pickled_callbacks(callbacks: list, flavour: str) -> bytes:
    """The callbacks, cloudpickled for the nodes; KerasInputError naming the one that cannot travel."""
    from pyspark import cloudpickle

    for callback in callbacks:
        own = flavour_of(callback)
        if own is None:
            raise KerasInputError(
                f"callbacks: {callback!r} is not a Keras callback ({FLAVOUR_NAMES[flavour]}.callbacks.Callback)"
            )
        if own != flavour:
            module = "tf_keras" if flavour == TF_KERAS else "keras"
            raise KerasInputError(
                f"callbacks: {type(callback).__name__} is a {FLAVOUR_NAMES[own]} callback but the model trains with "
                f"{FLAVOUR_NAMES[flavour]}: create it with {module}.callbacks"
                + (" (or set TF_USE_LEGACY_KERAS=1 before importing TensorFlow)" if flavour == TF_KERAS else "")
            )
        try:
            cloudpickle.dumps(callback)
        except Exception as exc:  # noqa: BLE001 - pickling fails in many ways; name the callback
            raise KerasInputError(
                f"callbacks: {type(callback).__name__} cannot be pickled to travel to the nodes ({exc}); give "
                "callbacks whose attributes pickle (no open files, locks or sessions)"
            ) from exc
    return cloudpickle.dumps(list(callbacks)) if callbacks else b""


def check_scan(stats, s, kinds: dict[str, str]) -> dict[str, int]:
    """The scan's findings judged; returns each fed column's width (values per row)."""
    if stats.rows == 0:
        raise KerasInputError("the DataFrame has no rows to train on")
    params = {c: "feature_cols" for c in s.feature_cols}
    params.update({c: "label_cols" for c in s.label_cols if c not in params})
    if s.sample_weight_col:
        params.setdefault(s.sample_weight_col, "sample_weight_col")
    for name, nulls in stats.nulls.items():
        if nulls:
            raise KerasInputError(
                f"{params[name]}: column {name!r} has {nulls} null value(s) in {stats.rows} rows; a tensor cannot "
                f"hold nulls: drop them (df.dropna(subset=[{name!r}])) or fill them first"
            )
    for name, holes in stats.null_elements.items():
        if holes:
            raise KerasInputError(
                f"{params[name]}: column {name!r} has null elements inside its arrays ({holes} rows); fill them first"
            )
    widths = {}
    for name, kind in kinds.items():
        if kind == "scalar":
            widths[name] = 1
            continue
        low, high = stats.widths[name]
        if low != high:
            raise KerasInputError(
                f"{params[name]}: column {name!r} holds {kind}s of different lengths ({low} .. {high} values per "
                "row); a tensor is dense: pad or filter the rows first"
            )
        widths[name] = low
    if s.validation is not None:
        _check_split(stats, s.validation)
    return widths


def _check_split(stats, validation: Any) -> None:
    if stats.mark_nulls:
        raise KerasInputError(
            f"validation: column {validation!r} has {stats.mark_nulls} null value(s); mark each row true or false"
        )
    if stats.validation_rows == 0:
        raise KerasInputError(f"validation={validation!r} leaves no validation rows among {stats.rows}")
    if stats.validation_rows == stats.rows:
        raise KerasInputError(f"validation={validation!r} leaves no training rows: every row is a validation row")
