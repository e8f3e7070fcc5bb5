"""The Params about the model and the columns, of ``KerasEstimator`` and ``KerasModel``: a ``HasX`` mixin each.

Each mixin holds one Param named as the issue and Keras name it (``feature_cols``,
``batch_size``...) with Spark ML's camel-case accessors (``setFeatureCols``/``getFeatureCols``).
Values are only converted here (a single column name becomes a list, numbers become numbers);
whether they make sense together is checked by ``checks.py`` when ``fit`` starts. How training
runs (batch size, epochs, nodes, run store...) is in ``training_params.py``.
"""

from __future__ import annotations

from typing import Any

from pyspark.ml.param import Param, Params, TypeConverters


def _columns(value: Any) -> list[str]:
    """One column name, or a list of them, as a list."""
    if isinstance(value, str):
        return [value]
    return TypeConverters.toListString(value)


def optional(converter):
    """``converter``, letting None through (an unset optional Param)."""

    def convert(value: Any) -> Any:
        return None if value is None else converter(value)

    convert.__name__ = f"optional_{converter.__name__}"
    return convert


def _validation(value: Any) -> float | str | None:
    """A fraction of the rows (a number strictly between 0 and 1) or a boolean column's name."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        raise TypeError("validation must be a fraction of the rows (0 < f < 1) or a boolean column's name, got a bool")
    return TypeConverters.toFloat(value)


def _as_is(value: Any) -> Any:
    return value


class HasModel(Params):
    """Mixin for Param ``model``."""

    model = Param(
        Params._dummy(),
        "model",
        "A compiled Keras model (Keras 3 or tf-keras), or a function of no arguments returning one (built inside the "
        "distribution strategy's scope on every node)",
        typeConverter=_as_is,
    )

    def setModel(self, value):
        """Set ``model``. Returns self."""
        return self._set(model=value)

    def getModel(self):
        """The value of ``model``."""
        return self.getOrDefault(self.model)


class HasOptimizer(Params):
    """Mixin for Param ``optimizer``."""

    optimizer = Param(
        Params._dummy(),
        "optimizer",
        "Overrides the compiled optimizer: a Keras optimizer name ('adam'), its serialized config "
        "(a dict), or an optimizer object (its config is shipped)",
        typeConverter=_as_is,
    )

    def setOptimizer(self, value):
        """Set ``optimizer``. Returns self."""
        return self._set(optimizer=value)

    def getOptimizer(self):
        """The value of ``optimizer``."""
        return self.getOrDefault(self.optimizer)


class HasLearningRate(Params):
    """Mixin for Param ``learning_rate``."""

    learning_rate = Param(
        Params._dummy(),
        "learning_rate",
        "Overrides the optimizer's learning rate (None: the optimizer's own)",
        typeConverter=optional(TypeConverters.toFloat),
    )

    def setLearningRate(self, value):
        """Set ``learning_rate``. Returns self."""
        return self._set(learning_rate=value)

    def getLearningRate(self):
        """The value of ``learning_rate``."""
        return self.getOrDefault(self.learning_rate)


class HasLoss(Params):
    """Mixin for Param ``loss``."""

    loss = Param(
        Params._dummy(),
        "loss",
        "Overrides the compiled loss: a Keras loss name, a serialized config, a loss object, or "
        "a dict of them by output name (needed when the model is not compiled)",
        typeConverter=_as_is,
    )

    def setLoss(self, value):
        """Set ``loss``. Returns self."""
        return self._set(loss=value)

    def getLoss(self):
        """The value of ``loss``."""
        return self.getOrDefault(self.loss)


class HasMetrics(Params):
    """Mixin for Param ``metrics``."""

    metrics = Param(
        Params._dummy(),
        "metrics",
        "Overrides the compiled metrics: a list of Keras metric names or configs (or a dict by output name)",
        typeConverter=_as_is,
    )

    def setMetrics(self, value):
        """Set ``metrics``. Returns self."""
        return self._set(metrics=value)

    def getMetrics(self):
        """The value of ``metrics``."""
        return self.getOrDefault(self.metrics)


class HasFeatureCols(Params):
    """Mixin for Param ``feature_cols``."""

    feature_cols = Param(
        Params._dummy(),
        "feature_cols",
        "Feature columns (numbers, arrays of numbers, or pyspark.ml Vectors): concatenated into the "
        "model's one input, or one column per input when the model has several, matched by input name",
        typeConverter=_columns,
    )

    def setFeatureCols(self, value):
        """Set ``feature_cols``. Returns self."""
        return self._set(feature_cols=value)

    def getFeatureCols(self):
        """The value of ``feature_cols``."""
        return self.getOrDefault(self.feature_cols)


class HasLabelCols(Params):
    """Mixin for Param ``label_cols``."""

    label_cols = Param(
        Params._dummy(),
        "label_cols",
        "Label columns: concatenated for a model with one output, or one per output of a "
        "multi-output model, matched by output name",
        typeConverter=_columns,
    )

    def setLabelCols(self, value):
        """Set ``label_cols``. Returns self."""
        return self._set(label_cols=value)

    def getLabelCols(self):
        """The value of ``label_cols``."""
        return self.getOrDefault(self.label_cols)


class HasSampleWeightCol(Params):
    """Mixin for Param ``sample_weight_col``."""

    sample_weight_col = Param(
        Params._dummy(),
        "sample_weight_col",
        "A numeric column of per-row weights for the loss (None: every row weighs 1)",
        typeConverter=optional(TypeConverters.toString),
    )

    def setSampleWeightCol(self, value):
        """Set ``sample_weight_col``. Returns self."""
        return self._set(sample_weight_col=value)

    def getSampleWeightCol(self):
        """The value of ``sample_weight_col``."""
        return self.getOrDefault(self.sample_weight_col)


class HasValidation(Params):
    """Mixin for Param ``validation``."""

    validation = Param(
        Params._dummy(),
        "validation",
        "Validation data: a fraction of the rows (0 < f < 1, split with seed) or the name of a boolean "
        "column marking validation rows (Spark ML's validationIndicatorCol); None: no validation",
        typeConverter=_validation,
    )

    def setValidation(self, value):
        """Set ``validation``. Returns self."""
        return self._set(validation=value)

    def getValidation(self):
        """The value of ``validation``."""
        return self.getOrDefault(self.validation)


def _output_kind(value: Any) -> str | None:
    """None (read from the model's config) or one of ``outputs.KINDS``."""
    from .outputs import KINDS

    if value is None:
        return None
    value = TypeConverters.toString(value)
    if value not in KINDS:
        raise TypeError(f"output_kind must be None or one of {KINDS}, got {value!r}")
    return value


#: Spark ML's camel-case names of the output-column Params, accepted by the constructors.
SPARK_ML_ALIASES = {
    "predictionCol": "prediction_col",
    "probabilityCol": "probability_col",
    "rawPredictionCol": "raw_prediction_col",
}


def spark_ml_names(params: dict) -> dict:
    """Constructor keyword arguments with Spark ML's names (``predictionCol``...) renamed to ours."""
    return {SPARK_ML_ALIASES.get(name, name): value for name, value in params.items()}


class HasPredictionCols(Params):
    """Mixin for the output-column Params of transform, Spark ML's names and conventions (``outputs.py``)."""

    prediction_col = Param(
        Params._dummy(),
        "prediction_col",
        "Spark ML's predictionCol: a classifier's class index (a double), a regressor's value (a double, "
        "a Vector for several values); a multi-output model appends prediction_col + '_' + output name "
        "per output, as the model writes it",
        typeConverter=TypeConverters.toString,
    )
    probability_col = Param(
        Params._dummy(),
        "probability_col",
        "Spark ML's probabilityCol: a classifier's class probabilities (a Vector); '' for none",
        typeConverter=TypeConverters.toString,
    )
    raw_prediction_col = Param(
        Params._dummy(),
        "raw_prediction_col",
        "Spark ML's rawPredictionCol: a classifier's raw scores (a Vector: logits, or log-probabilities of a "
        "softmax output, [-logit, logit] for a binary one); '' for none",
        typeConverter=TypeConverters.toString,
    )
    output_kind = Param(
        Params._dummy(),
        "output_kind",
        "What the model's one output is: 'softmax', 'softmax_logits', 'sigmoid', 'sigmoid_logits' or "
        "'regression'; None reads it from the model's Keras config (its last activation and loss)",
        typeConverter=_output_kind,
    )
    predicted_class_col = Param(
        Params._dummy(),
        "predicted_class_col",
        "When set, transform also appends the predicted class as a double (the index of the largest "
        "output value, or 1.0 when a single output value is over 0.5); kept from before prediction_col "
        "followed Spark ML's conventions",
        typeConverter=optional(TypeConverters.toString),
    )
    predict_batch_size = Param(
        Params._dummy(),
        "predict_batch_size",
        "Rows per model call when transform scores a DataFrame",
        typeConverter=TypeConverters.toInt,
    )

    def setPredictionCol(self, value):
        """Set ``prediction_col``. Returns self."""
        return self._set(prediction_col=value)

    def getPredictionCol(self):
        """The value of ``prediction_col``."""
        return self.getOrDefault(self.prediction_col)

    def setProbabilityCol(self, value):
        """Set ``probability_col``. Returns self."""
        return self._set(probability_col=value)

    def getProbabilityCol(self):
        """The value of ``probability_col``."""
        return self.getOrDefault(self.probability_col)

    def setRawPredictionCol(self, value):
        """Set ``raw_prediction_col``. Returns self."""
        return self._set(raw_prediction_col=value)

    def getRawPredictionCol(self):
        """The value of ``raw_prediction_col``."""
        return self.getOrDefault(self.raw_prediction_col)

    def setOutputKind(self, value):
        """Set ``output_kind``. Returns self."""
        return self._set(output_kind=value)

    def getOutputKind(self):
        """The value of ``output_kind``."""
        return self.getOrDefault(self.output_kind)

    def setPredictedClassCol(self, value):
        """Set ``predicted_class_col``. Returns self."""
        return self._set(predicted_class_col=value)

    def getPredictedClassCol(self):
        """The value of ``predicted_class_col``."""
        return self.getOrDefault(self.predicted_class_col)

    def setPredictBatchSize(self, value):
        """Set ``predict_batch_size``. Returns self."""
        return self._set(predict_batch_size=value)

    def getPredictBatchSize(self):
        """The value of ``predict_batch_size``."""
        return self.getOrDefault(self.predict_batch_size)


class HasModelPath(Params):
    """Mixin for Param ``model_path``."""

    model_path = Param(
        Params._dummy(),
        "model_path",
        "The trained model's .keras file, on a path every executor reads (set by fit, and by load)",
        typeConverter=optional(TypeConverters.toString),
    )

    def setModelPath(self, value):
        """Set ``model_path``. Returns self."""
        return self._set(model_path=value)

    def getModelPath(self):
        """The value of ``model_path``."""
        return self.getOrDefault(self.model_path)


class HasModelStructure(Params):
    """Mixin for Params ``input_cols`` and ``output_names``: how a fitted model's columns meet its tensors."""

    input_cols = Param(
        Params._dummy(),
        "input_cols",
        "{model input name: [feature columns]} for a model with several inputs (None: every feature "
        "column, concatenated, feeds the model's one input); set by fit",
        typeConverter=optional(_as_is),
    )
    output_names = Param(
        Params._dummy(),
        "output_names",
        "The model's output names when it has several (None: one output); set by fit",
        typeConverter=optional(TypeConverters.toListString),
    )

    def setInputCols(self, value):
        """Set ``input_cols``. Returns self."""
        return self._set(input_cols=value)

    def getInputCols(self):
        """The value of ``input_cols``."""
        return self.getOrDefault(self.input_cols)

    def setOutputNames(self, value):
        """Set ``output_names``. Returns self."""
        return self._set(output_names=value)

    def getOutputNames(self):
        """The value of ``output_names``."""
        return self.getOrDefault(self.output_names)
