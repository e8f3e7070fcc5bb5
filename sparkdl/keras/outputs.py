"""Spark ML's output columns for a Keras model: which kind of output it has, and the columns it gets.

Spark ML's classifiers write ``prediction`` (a double: the class index), ``probability`` and
``rawPrediction`` (Vectors), and its evaluators and ``CrossValidator`` read those names by default;
a regressor writes ``prediction`` (a double). ``KerasModel.transform`` follows them for a model
with one output, by the output's kind (:func:`output_kind`, read from the model's Keras config,
never by running its code):

================  ==========================================  =====================================
kind              what the model's output is                  columns
================  ==========================================  =====================================
``softmax``       class probabilities (softmax, or a          ``prediction`` = argmax, ``probability``
                  categorical loss on the output)             = the output, ``rawPrediction`` = log p
``softmax_logits`` logits (a categorical loss, from_logits)   ``probability`` = softmax, ``rawPrediction``
                                                              = the logits
``sigmoid``       P(class 1) in one unit (sigmoid, or binary  ``prediction`` = 1.0 above 0.5, else 0.0;
                  cross-entropy)                              ``probability`` = [1-p, p], ``rawPrediction``
                                                              = [-logit, logit] (Spark's binary layout)
``sigmoid_logits`` the logit of class 1 (binary loss,          as ``sigmoid``, p = sigmoid(logit)
                  from_logits)
``regression``    anything else                               ``prediction`` = a double (a Vector for
                                                              several values per row)
================  ==========================================  =====================================

A sigmoid output of several units is multi-label: ``prediction`` is the array of label indices
above 0.5 (Spark's ``MultilabelClassificationEvaluator`` reads it), ``probability`` and
``rawPrediction`` Vectors of every label. An empty column name leaves that column out.
"""

from __future__ import annotations

import re
from typing import Any

from ..spark_ml.param_table import OUTPUT_KINDS

KINDS = OUTPUT_KINDS  #: the kinds, defined with the ``output_kind`` Param that accepts them (the Params table)
REGRESSION, SOFTMAX, SOFTMAX_LOGITS, SIGMOID, SIGMOID_LOGITS = KINDS

_CATEGORICAL_LOSSES = {"categorical_crossentropy", "sparse_categorical_crossentropy", "categorical_focal_crossentropy"}
_BINARY_LOSSES = {"binary_crossentropy", "binary_focal_crossentropy"}
#: Losses of a regressor: its output is a value, whatever activation bounds it (a sigmoid with mse).
_REGRESSION_LOSSES = {
    "mean_squared_error",
    "mse",
    "mean_absolute_error",
    "mae",
    "mean_absolute_percentage_error",
    "mape",
    "mean_squared_logarithmic_error",
    "msle",
    "huber",
    "huber_loss",
    "log_cosh",
    "logcosh",
    "kl_divergence",
    "kld",
    "kullback_leibler_divergence",
    "poisson",
    "cosine_similarity",
}
#: p is clipped into [_EPS, 1 - _EPS] before logs and logits, so no column holds an infinity.
_EPS = 1e-7


def output_kind(saved: dict) -> str:
    """The kind of a one-output model's output, from its Keras config as ``config.json`` of a
    ``.keras`` file holds it (``{"config": ..., "compile_config": ...}``); ``regression`` when
    the config says nothing (a subclassed model: set ``output_kind`` yourself)."""
    config = saved.get("config") if isinstance(saved.get("config"), dict) else {}
    activation = _activation(_output_layer(config))
    loss_name, from_logits = _loss((saved.get("compile_config") or {}).get("loss"))
    if loss_name in _REGRESSION_LOSSES:
        return REGRESSION
    if activation in (SOFTMAX, SIGMOID, SOFTMAX_LOGITS):
        return activation
    if loss_name in _CATEGORICAL_LOSSES:
        return SOFTMAX_LOGITS if from_logits else SOFTMAX
    if loss_name in _BINARY_LOSSES:
        return SIGMOID_LOGITS if from_logits else SIGMOID
    return REGRESSION


def _output_layer(config: dict) -> dict:
    layers = [layer for layer in config.get("layers") or [] if isinstance(layer, dict)]
    outputs = config.get("output_layers")
    if isinstance(outputs, list) and outputs and isinstance(outputs[0], list):  # [[name, 0, 0], ...]
        outputs = outputs[0]
    if isinstance(outputs, list) and outputs and isinstance(outputs[0], str):  # one output: [name, 0, 0]
        return next((layer for layer in layers if (layer.get("config") or {}).get("name") == outputs[0]), {})
    return layers[-1] if layers else {}


def _activation(layer: dict) -> str | None:
    config = layer.get("config") or {}
    if layer.get("class_name") == "Softmax":
        return SOFTMAX
    activation = config.get("activation")
    if isinstance(activation, dict):  # a serialized function: {"config": "softmax", ...}
        activation = activation.get("config") if isinstance(activation.get("config"), str) else None
    if activation == "log_softmax":  # log-probabilities: logits as far as softmax is concerned
        return SOFTMAX_LOGITS
    return activation if activation in (SOFTMAX, SIGMOID) else None


def _loss(loss: Any) -> tuple[str | None, bool]:
    """``(name, from_logits)`` of a one-output model's compiled loss (a name or a serialized loss)."""
    if isinstance(loss, list) and len(loss) == 1:
        loss = loss[0]
    if isinstance(loss, dict) and len(loss) == 1 and "class_name" not in loss:  # {output name: loss}
        loss = next(iter(loss.values()))
    if isinstance(loss, str):
        return loss, False
    if isinstance(loss, dict) and isinstance(loss.get("config"), str):  # a function: {"config": "mse", ...}
        return loss["config"], False
    if isinstance(loss, dict):
        config = loss.get("config") if isinstance(loss.get("config"), dict) else {}
        name = config.get("name")
        if name not in _CATEGORICAL_LOSSES | _BINARY_LOSSES:  # a renamed loss: its class says what it is
            name = re.sub(r"(?<!^)(?=[A-Z])", "_", str(loss.get("class_name", ""))).lower()
        return name, bool(config.get("from_logits", False))
    return None, False


def spark_ml_columns(scored, output: str, kind: str, names: dict[str, str], class_col: str | None = None):
    """``scored`` with Spark ML's columns for the model output in column ``output`` (which is
    dropped): ``names`` maps ``prediction``, ``probability`` and ``rawPrediction`` to the columns to
    write (an empty name writes none). A one-value output is a scalar column (sparkdl's inference
    writes a ``(1,)`` output so), several values an array. ``class_col`` (``predicted_class_col``,
    from before ``prediction`` followed Spark ML) gets a classifier's ``prediction``, and for any
    other output the index of its largest value (1.0 over 0.5 for one value)."""
    from pyspark.ml.functions import array_to_vector
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, BinaryType

    data_type = scored.schema[output].dataType
    column = F.col("`" + output.replace("`", "``") + "`")
    if isinstance(data_type, BinaryType) or (
        isinstance(data_type, ArrayType) and isinstance(data_type.elementType, ArrayType)
    ):
        columns = {"prediction": column}  # packed rows, or a tensor per row: left as the model wrote it
    elif not isinstance(data_type, ArrayType):
        columns = _one_value(column.cast("double"), kind)
    else:
        values = column.cast("array<double>")
        columns = {"prediction": array_to_vector(values)} if kind == REGRESSION else _several_values(values, kind)
    if class_col:
        single_class = kind != REGRESSION and (
            kind in (SOFTMAX, SOFTMAX_LOGITS) or not isinstance(data_type, ArrayType)
        )
        if single_class:
            columns["class"] = columns["prediction"]
        elif isinstance(data_type, ArrayType):
            columns["class"] = (F.array_position(column, F.array_max(column)) - 1).cast("double")
        else:
            columns["class"] = (column > 0.5).cast("double")
        names = {**names, "class": class_col}
    wanted = {names[key]: value for key, value in columns.items() if names.get(key)}
    return scored.withColumns(wanted).drop(output)


def _clip(p):
    from pyspark.sql import functions as F

    return F.least(F.greatest(p, F.lit(_EPS)), F.lit(1 - _EPS))


def _one_value(value, kind: str) -> dict:
    """A scalar output: a regressor's value, or a binary classifier's P(1) or logit."""
    from pyspark.ml.functions import array_to_vector
    from pyspark.sql import functions as F

    if kind == REGRESSION:
        return {"prediction": value}
    if kind in (SIGMOID_LOGITS, SOFTMAX_LOGITS):
        p, z = 1 / (1 + F.exp(-value)), value
    else:
        p, z = value, F.log(_clip(value) / (1 - _clip(value)))
    return {
        "prediction": (p > 0.5).cast("double"),
        "probability": array_to_vector(F.array(1 - p, p)),
        "rawPrediction": array_to_vector(F.array(-z, z)),
    }


def _several_values(values, kind: str) -> dict:
    """An array output: class probabilities or logits (softmax), or labels' (sigmoid: multi-label)."""
    from pyspark.ml.functions import array_to_vector
    from pyspark.sql import functions as F

    if kind == SOFTMAX:
        probability, raw = values, F.transform(values, lambda p: F.log(_clip(p)))
    elif kind == SOFTMAX_LOGITS:
        top = F.array_max(values)
        exps = F.transform(values, lambda z: F.exp(z - top))
        total = F.aggregate(exps, F.lit(0.0), lambda acc, e: acc + e)
        probability, raw = F.transform(exps, lambda e: e / total), values
    elif kind == SIGMOID:
        probability, raw = values, F.transform(values, lambda p: F.log(_clip(p) / (1 - _clip(p))))
    else:
        probability, raw = F.transform(values, lambda z: 1 / (1 + F.exp(-z))), values
    if kind in (SOFTMAX, SOFTMAX_LOGITS):
        prediction = (F.array_position(probability, F.array_max(probability)) - 1).cast("double")
    else:  # multi-label: the indices of the labels over 0.5
        indices = F.sequence(F.lit(0), F.size(probability) - 1)
        prediction = F.filter(indices, lambda i: F.element_at(probability, i + 1) > 0.5).cast("array<double>")
    return {
        "prediction": prediction,
        "probability": array_to_vector(probability),
        "rawPrediction": array_to_vector(raw),
    }
