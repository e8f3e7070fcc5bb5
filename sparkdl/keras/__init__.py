"""Keras on Spark ML: ``KerasEstimator`` trains a Keras model on a DataFrame, ``KerasModel`` scores with it.

```python
from sparkdl.keras import KerasEstimator      # also: from sparkdl.ml import KerasEstimator

estimator = KerasEstimator(model=build_model, feature_cols=["features"], label_cols=["label"], epochs=10)
model = estimator.fit(train_df)               # one TF node per executor; num_workers=0: in the driver
model.transform(test_df)                      # + "prediction"; model.history, model.keras_model
```

The rooms, one job each: ``params.py`` and ``training_params.py`` (the Params), ``estimator.py``
(the Estimator, ``fitMultiple``), ``fitting.py`` (one fit on the driver), ``checks.py`` (bad input,
before any node starts), ``data.py`` (select, split, persist, scan), ``shipping.py`` (the model's
way to the nodes), ``compiling.py`` (optimizer/loss/metrics overrides), ``layout.py`` (columns to
tensors), ``spec.py`` (what the nodes are told), ``node_program.py`` (what every node runs),
``training.py`` (callbacks, state, history: nodes and local mode), ``local.py`` (local mode),
``run_store.py`` (checkpoint_dir/run_id), ``tracking.py`` (MLflow), ``model.py`` (``KerasModel``),
``tuning.py`` (Optuna studies: ``run_study``, ``fit_trial``, pruning at epoch boundaries).
Importing this package does not import TensorFlow (nor Optuna).
"""

from .checks import KerasInputError
from .estimator import KerasEstimator
from .model import KerasModel
from .tuning import fit_trial, run_study

__all__ = ["KerasEstimator", "KerasModel", "KerasInputError", "fit_trial", "run_study"]
