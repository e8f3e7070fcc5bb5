"""Which columns feed which model input, and which label columns which output: the column layout.

The driver plans it (``plan_layout``) from the model's inputs and outputs and the columns' widths
(values per row), refusing a mismatch with a message naming the Param and the columns; the nodes
(and local mode) turn each batch of columns into Keras' ``(inputs, labels[, sample_weight])``
with ``batch_mapper``:

- one model input: every feature column, flattened and concatenated in order, reshaped to the
  input's shape (784 values -> 28x28x1); several inputs: one feature column each, by input name;
- one output: the label columns concatenated (a single scalar label stays one value per row,
  as sparse categorical losses want it); several outputs: one label column each, by output name;
- ``sample_weight_col``: one number per row.

Each input is fed as the dtype the model declares for it (an ``Input(dtype="int64")`` of ids gets
the int64 column as it is: float32 holds integers exactly only up to 2**24), or, where it declares
none, as its columns' integer type when they are all integers; float32 otherwise. A column whose
values cannot become the input's dtype (floats for an integer input) is refused naming it. Labels
and weights are float32.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..columns.arrow_numpy import castable
from ..inference.model import TensorInfo
from .checks import KerasInputError
from .shipping import ModelInfo


@dataclass(frozen=True)
class Piece:
    """One model input (or output) and the columns that feed it."""

    name: str  # the input's (or output's) name
    columns: tuple[str, ...]
    widths: tuple[int, ...]  # values per row of each column
    shape: tuple[int, ...] | None  # per-row shape to give the concatenated values (None: flat)
    scalar: bool = False  # one value per row, kept as a vector (labels of one scalar column)
    dtype: str = "float32"  # the dtype the values are fed as (numpy's name)

    @property
    def width(self) -> int:
        """Values per row, all columns together."""
        return sum(self.widths)


@dataclass(frozen=True)
class ColumnLayout:
    """The whole mapping from columns to ``(inputs, labels[, sample_weight])``."""

    inputs: tuple[Piece, ...]
    labels: tuple[Piece, ...]
    sample_weight: str | None = None
    by_name: bool = False  # several inputs: Keras gets a dict keyed by input name
    labels_by_name: bool = False  # several outputs: a dict keyed by output name

    def columns(self) -> list[str]:
        """Every column fed to the nodes, once each, in order."""
        names = [c for piece in self.inputs + self.labels for c in piece.columns]
        if self.sample_weight:
            names.append(self.sample_weight)
        return list(dict.fromkeys(names))


def plan_layout(
    info: ModelInfo,
    feature_cols: list[str],
    label_cols: list[str],
    weight_col: str | None,
    widths: dict[str, int],
    dtypes: dict[str, str] | None = None,
) -> ColumnLayout:
    """The layout for ``info``'s model; KerasInputError naming the Param and the columns that do not fit.
    ``widths``: values per row of each column; ``dtypes``: the numpy dtype of each column's values
    (``checks.column_dtypes``; None: float columns)."""
    inputs = [_typed(p, t, dtypes or {}) for p, t in _match(info.inputs, feature_cols, widths, "feature_cols", "input")]
    labels = [piece for piece, _ in _match(info.outputs, label_cols, widths, "label_cols", "output")]
    if weight_col is not None and widths.get(weight_col, 1) != 1:
        raise KerasInputError(
            f"sample_weight_col: column {weight_col!r} holds {widths[weight_col]} values per row; a weight is a number"
        )
    return ColumnLayout(
        tuple(inputs), tuple(labels), weight_col, by_name=len(info.inputs) > 1, labels_by_name=len(info.outputs) > 1
    )


def _match(tensors: tuple[TensorInfo, ...], cols: list[str], widths: dict[str, int], param: str, kind: str):
    if len(tensors) == 1:
        tensor = tensors[0]
        piece = Piece(tensor.name, tuple(cols), tuple(widths[c] for c in cols), None)
        return [(_shaped(piece, tensor, param, kind), tensor)]
    names = [t.name for t in tensors]
    if sorted(names) != sorted(cols):
        raise KerasInputError(
            f"{param}: the model has {len(tensors)} {kind}s, {names}, and takes one column each by {kind} name, "
            f"but {param} is {cols}: name the columns after the {kind}s (df.withColumnRenamed), one per {kind}"
        )
    return [(_shaped(Piece(t.name, (t.name,), (widths[t.name],), None), t, param, kind), t) for t in tensors]


def _typed(piece: Piece, tensor: TensorInfo, dtypes: dict[str, str]) -> Piece:
    """The input ``piece`` with the dtype it is fed as: the model's, else its columns' integer type, else
    float32; KerasInputError naming a column whose values cannot become it (floats for integers)."""
    sources = [dtypes.get(c) for c in piece.columns]  # None: not known, fed as it comes
    dtype = tensor.dtype
    if dtype is None:
        integers = all(d is not None and _is_integer(d) for d in sources)
        dtype = str(np.result_type(*sources)) if integers else "float32"
    target = "float32" if dtype == "bfloat16" else dtype  # numpy has no bfloat16: a float like the others
    for column, source in zip(piece.columns, sources):
        if source is not None and not castable(source, target):
            raise KerasInputError(
                f"feature_cols: column {column!r} holds {source} values but the model's input {tensor.name!r} "
                f"expects {dtype}: cast the column first (df.withColumn({column!r}, F.col({column!r}).cast(...))), "
                "or declare the input's dtype (keras.Input(..., dtype=...))"
            )
    return replace(piece, dtype=dtype)


def _is_integer(dtype: str) -> bool:
    return dtype.startswith(("int", "uint"))


def _shaped(piece: Piece, tensor: TensorInfo, param: str, kind: str) -> Piece:
    """``piece`` with the shape its values take, checked against the model's ``tensor``."""
    expected = tensor.width()
    described = ", ".join(f"{c!r} ({w} value{'s' if w != 1 else ''})" for c, w in zip(piece.columns, piece.widths))
    if kind == "output":
        # A label may be one value per row (a class index for a sparse categorical loss) or as
        # wide as the output (one-hot classes, several regression targets).
        if piece.width == 1 and len(piece.columns) == 1:
            return Piece(piece.name, piece.columns, piece.widths, None, scalar=True)
        if expected is not None and piece.width != expected:
            raise KerasInputError(
                f"{param}: the model's output {tensor.name!r} has shape {tensor.shape} ({expected} values per row) "
                f"but its labels, {described}, hold {piece.width} per row; give one value (a class index) "
                f"or {expected} per row"
            )
        shape = tensor.shape if expected is not None else None
        return Piece(piece.name, piece.columns, piece.widths, shape)
    if expected is None:  # an input of unknown size takes the values flat, (rows, width)
        return piece
    if piece.width != expected:
        raise KerasInputError(
            f"{param}: the model's input {tensor.name!r} has shape {tensor.shape} ({expected} values per row) "
            f"but {described} hold {piece.width} per row"
        )
    return Piece(piece.name, piece.columns, piece.widths, tensor.shape)


def batch_mapper(layout: ColumnLayout):
    """A function for ``tf.data.Dataset.map``: a dict of column batches -> Keras' ``(x, y[, w])``."""
    import tensorflow as tf

    def piece_tensor(piece: Piece, columns: dict):
        dtype = tf.as_dtype(piece.dtype)
        parts = [tf.reshape(tf.cast(columns[c], dtype), (-1, w)) for c, w in zip(piece.columns, piece.widths)]
        value = parts[0] if len(parts) == 1 else tf.concat(parts, axis=1)
        if piece.scalar:
            return tf.reshape(value, (-1,))
        return tf.reshape(value, (-1, *piece.shape)) if piece.shape is not None else value

    def structure(pieces: tuple[Piece, ...], by_name: bool, columns: dict):
        if by_name:
            return {piece.name: piece_tensor(piece, columns) for piece in pieces}
        return piece_tensor(pieces[0], columns)

    def to_keras(columns: dict):
        x = structure(layout.inputs, layout.by_name, columns)
        y = structure(layout.labels, layout.labels_by_name, columns)
        if layout.sample_weight is None:
            return x, y
        return x, y, tf.reshape(tf.cast(columns[layout.sample_weight], tf.float32), (-1,))

    return to_keras
