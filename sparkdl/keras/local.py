"""Local mode (``num_workers=0``): the same job trained in the driver process, no TF node started.

For debugging a model before paying for a cluster: the rows are prepared and checked as for a
cluster (``data.py``), collected to the driver as Arrow and turned into numpy columns by
``sparkdl/columns/arrow_numpy.py`` (Vectors densified, arrays reshaped, as the feed does), and each run
is built, compiled, fitted (with the same callbacks, history and run store as on the nodes) and
saved by the same code as ``node_program.py``, with one process instead of a strategy. The data
must fit in the driver's memory. Files go through a :class:`~sparkdl.storage.Storage` with the driver's
store settings (``fitting.py`` hands it in), as ``ctx.storage`` on a node.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from ..columns.arrow_numpy import ColumnRef, arrow_to_numpy
from ..common.tf_compat import save_keras_file
from ..storage import Storage, is_remote
from . import training
from .compiling import compile_model
from .layout import batch_mapper
from .shipping import build, keep_tf_keras_saves_zipped
from .spec import TrainingJob


def collect_columns(df, columns: list[str]) -> dict[str, Any]:
    """``df``'s ``columns`` on the driver, one dense numpy array each (through Arrow, no per-row Python)."""
    table = df.select(*columns).toArrow()
    return {name: arrow_to_numpy(table.column(name), ColumnRef(name)) for name in columns}


def train_locally(job: TrainingJob, train_df, validation_df, storage: Storage | None = None) -> dict:
    """Train every run of ``job`` in this process; the same result as the node program's chief returns.
    ``storage``: the driver's (its application's store settings), for a run directory in a store."""
    storage = storage or Storage()
    scratch = tempfile.mkdtemp(prefix="sparkdl-keras-local-")
    try:
        return _train_runs(job, train_df, validation_df, storage, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _train_runs(job: TrainingJob, train_df, validation_df, storage: Storage, scratch: str) -> dict:
    import tensorflow as tf

    def private(kind: str) -> str:
        return tempfile.mkdtemp(prefix=f"{kind}-", dir=scratch)

    columns = job.layout.columns()
    train_columns = collect_columns(train_df, columns)
    validation_columns = collect_columns(validation_df, columns) if validation_df is not None else None
    to_keras = batch_mapper(job.layout)
    options = tf.data.Options()
    options.autotune.enabled = False
    outcomes = []
    for run in job.runs:
        training.set_seed(job.model.flavour, run.seed)
        model = build(job.model)
        keras = training.keras_of(model)
        keep_tf_keras_saves_zipped(job.model.flavour)  # fit may run in a Spark ML tuning thread
        compile_model(model, run.compile, keras)
        rows = len(next(iter(train_columns.values())))
        train = tf.data.Dataset.from_tensor_slices(train_columns)
        if run.shuffle:
            train = train.shuffle(rows, seed=run.seed, reshuffle_each_iteration=True)
        train = train.batch(run.batch_size).map(to_keras).prefetch(2).with_options(options)
        validation = None
        if validation_columns is not None:
            validation = tf.data.Dataset.from_tensor_slices(validation_columns).batch(run.batch_size).map(to_keras)
        keeper, callbacks = training.run_callbacks(keras, run, True, storage, private)
        model.fit(  # the dataset is shuffled above; Keras 3 would warn that its own shuffle cannot be
            train,
            validation_data=validation,
            epochs=run.epochs,
            callbacks=callbacks,
            verbose=run.verbose,
            shuffle=False,
        )
        _save(model, run.paths.export_path, storage, private)
        outcomes.append(training.finish(run, keeper, True, storage))
    return {"runs": outcomes}


def _save(model, path: str, storage: Storage, private) -> None:
    """Save ``model`` at ``path``: in a store, saved locally and uploaded as one object."""
    if not is_remote(path):
        save_keras_file(model, path)
        return
    local = os.path.join(private("export"), os.path.basename(path))
    save_keras_file(model, local)
    storage.upload(local, path)
