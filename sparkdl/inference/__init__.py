"""Distributed inference: score Spark DataFrames with TensorFlow models, one model per Python worker.

Three forms over one engine:

- :func:`map_in_pandas` (or :class:`Predictor`) returns the iterator function and output schema
  for ``DataFrame.mapInPandas``; chosen input columns (an id) are kept next to the predictions:

    ```python
    from sparkdl.inference import map_in_pandas

    fn, schema = map_in_pandas(df, "/models/digits.keras", input_mapping={"pixels": "image"},
                               output_mapping={"probs": "probabilities"}, keep_columns=["id"],
                               batch_size=1024)
    scored = df.mapInPandas(fn, schema)
    ```

- :func:`map_in_arrow`: the same for ``DataFrame.mapInArrow`` (no pandas in between);
  ``Predictor(...).with_predictions(df)`` keeps every column and appends the predictions.
- :func:`predict_batch_udf`: a pandas UDF for ``select``/``withColumn``, called like
  ``pyspark.ml.functions.predict_batch_udf`` (or with ``model=``).

The model (a ``.keras`` file, a SavedModel directory, or a ``make_predict_fn``) is loaded once
per Python worker and reused across tasks, batches and jobs while Spark keeps the worker alive
(``spark.python.worker.reuse``, the default); overwriting the model file makes the next task
reload it. Models are read from local paths (a shared file system on every executor) or any
store of :mod:`sparkdl.storage` (``s3://``/``s3a://``, ``gs://``, ``abfs[s]://``, ``hdfs://``),
with the ``fs.s3a.*``/``fs.azure.*``/``fs.gs.*`` settings of the driver's Spark carried to the
executors. See :mod:`sparkdl.inference.worker` for the cache and GPU rules and
:mod:`sparkdl.inference.loaders` for the Keras and storage rules.

Train and serve: ``ModelVersions(base, refresh_seconds=30)`` in place of a model path scores
with the newest version of a versioned model directory (``base/<integer version>/``, local or on
any of those stores, written by :func:`sparkdl.model_versions.publish_version`); each worker
looks for a newer one at most every ``refresh_seconds`` as a batch starts, so a running
streaming query switches without a restart, and ``Predictor(..., version_column="model_version")``
says which version scored each row.

Driver side: :mod:`.predictor` (the public forms) and :mod:`.planning` (the one plan builder,
the signature probe). Executor side: :mod:`.scoring` (the functions Spark runs),
:mod:`.worker` (devices, the model cache) and :mod:`.loaders`. Both: :mod:`.model` (model
sources and signatures) and :mod:`.columns` (batches to tensors and back, through
:mod:`sparkdl.columns.arrow_numpy`).
"""

from .columns import InferenceInputError
from .model import ModelLoadError
from .model_versions import ModelVersions
from .planning import read_signature
from .predictor import Predictor, map_in_arrow, map_in_pandas, predict_batch_udf
from .scoring import ScoringPlan
from .worker import CACHE_CAPACITY, cache_info, clear_cache

__all__ = [
    "Predictor",
    "ModelVersions",
    "ScoringPlan",
    "map_in_pandas",
    "map_in_arrow",
    "predict_batch_udf",
    "read_signature",
    "cache_info",
    "clear_cache",
    "CACHE_CAPACITY",
    "InferenceInputError",
    "ModelLoadError",
]
