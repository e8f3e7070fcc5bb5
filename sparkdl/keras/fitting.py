"""One fit on the driver, from Params to trained ``KerasModel``s: check, prepare, train, collect.

``fit_group`` trains the param maps that share data and cluster (one for ``fit``, several for
``fitMultiple``): every check first (Params, columns, model, callbacks, then the data scan and
the shapes), so bad input fails before any TF node starts; then one ``TFCluster`` (InputMode.SPARK)
runs ``node_program.main_fun`` and is fed once per param map, or local mode trains in this
process. The models stay files where the driver chose (``run_store.py``), on any store: the driver
reaches them through a :class:`~sparkdl.storage.Storage` made from the application's store settings
(``fs.s3a.*``...), the nodes through ``ctx.storage``, which carries the same. The chief's return
value brings each run's history back (``TFCluster.shutdown()``). A tracked fit's MLflow runs
(``tracking.FitRuns``) are opened before training and finished after it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import uuid
from dataclasses import dataclass, fields, replace
from typing import Any

from ..common.errors import SparkDLError
from ..storage import Storage, is_remote, preflight, spark_conf
from . import checks, data, run_store, tracking
from .compiling import CompileSpec, normalise
from .layout import plan_layout
from .model import KerasModel, qualified_path
from .run_store import RunPaths
from .shipping import TF_KERAS, ship
from .spec import RunSpec, TrainingJob

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FitSettings:
    """Every Param of one param map, resolved (``KerasEstimator``'s Params, by name)."""

    model: Any
    optimizer: Any
    learning_rate: float | None
    loss: Any
    metrics: Any
    feature_cols: list
    label_cols: list
    sample_weight_col: str | None
    validation: Any
    batch_size: int
    epochs: int
    shuffle: bool
    seed: int
    num_workers: int | None
    min_workers: int | None
    num_gpus: int | None
    callbacks: list
    max_restarts: int
    checkpoint_dir: str | None
    run_id: str | None
    monitor: str | None
    mode: str
    model_dir: str | None
    verbose: int
    log_to_mlflow: bool
    prediction_col: str
    probability_col: str
    raw_prediction_col: str
    output_kind: str | None
    predicted_class_col: str | None
    predict_batch_size: int
    packed_outputs: bool
    safe_mode: bool

    @classmethod
    def of(cls, estimator) -> "FitSettings":
        """The settings of ``estimator`` (a copy holding one param map)."""
        return cls(**{f.name: estimator.getOrDefault(f.name) for f in fields(cls)})

    def shared_key(self) -> tuple:
        """What param maps must share to train on one cluster from one preparation of the data."""
        return (
            id(self.model),
            tuple(self.feature_cols),
            tuple(self.label_cols),
            self.sample_weight_col,
            self.validation,
            self.seed,
            self.num_workers,
            self.min_workers,
            self.num_gpus,
            self.max_restarts,
            self.model_dir,
            self.checkpoint_dir,
        )

    def compile_spec(self) -> CompileSpec:
        """The compile overrides, as JSON-like values."""
        return CompileSpec(
            normalise(self.optimizer, "optimizer"),
            normalise(self.loss, "loss"),
            normalise(self.metrics, "metrics"),
            self.learning_rate,
        )


def fit_group(
    dataset, group: list[tuple[int, FitSettings]], use_run_store: bool, on_epoch=None, log_model: bool = True, lane=None
) -> dict[int, KerasModel]:
    """Train the param maps of ``group`` (``(index, settings)``, sharing ``shared_key``); models by index.
    ``on_epoch``: the cluster's epoch watcher (``TFCluster.watch_epochs``; ``tuning.py`` prunes with it);
    ``log_model``: whether a tracked fit logs its model to MLflow; ``lane`` (``lanes.Lane``, a parallel
    ``fitMultiple``): train only the param maps its ``claim()`` names, the models of those."""
    for _, settings in group:
        checks.check_settings(settings)
    first = group[0][1]
    log_to_mlflow = any(settings.log_to_mlflow for _, settings in group)  # log_to_mlflow is not in shared_key
    tracking.wanted(log_to_mlflow)  # log_to_mlflow without MLflow fails now, not after training
    sc = _spark_context(dataset)
    kinds = checks.column_kinds(dataset.schema, first)
    with lane.serial() if lane is not None else contextlib.nullcontext():  # one Keras save at a time
        payload, info = ship(first.model)
    nodes = _nodes(sc, first.num_workers)
    if on_epoch is not None and nodes == 0:
        raise checks.KerasInputError("an epoch watcher (tuning's pruning) needs TF nodes: set num_workers >= 1")
    specs = {index: settings.compile_spec() for index, settings in group}
    for spec in specs.values():
        checks.check_model(info, spec)
    pickled = {index: checks.pickled_callbacks(settings.callbacks, info.flavour) for index, settings in group}
    store = use_run_store and first.run_id is not None
    base = _base_dir(sc, first, store)
    storage = Storage(spark_conf.from_spark(sc))
    if is_remote(base):  # the bucket, its credentials and endpoint are checked before any work starts
        preflight.check([base], storage.settings)
    with tracking.FitRuns([index for index, _ in group], log_to_mlflow, log_model) as tracked:  # opened before training
        runs, done, models = _plan_runs(storage, group, specs, info, pickled, store, base, tracked)
        if runs:
            outcomes = _train(dataset, storage, first, kinds, payload, info, runs, done, nodes, base, on_epoch, lane)
            trained = runs if lane is None else [run for run in runs if run.index in lane.claimed]
            models.update(_trained_models(storage, group, trained, outcomes, info))
        for index, settings in group:
            if index in models:  # a lane's param maps only
                tracked.log_fit(index, settings, models[index], info)
    return models


def _plan_runs(storage, group, specs, info, pickled, store: bool, base: str, tracked) -> tuple[list, dict, dict]:
    """``(runs to train, epochs each has done, models of finished runs)``: a run store's finished
    run returns its model; every other param map gets a ``RunSpec`` (its MLflow run: ``tracked``)."""
    runs, done, models = [], {}, {}
    for index, settings in group:
        paths = RunPaths(base if store else f"{base}/run-{index}")
        config = _config(settings, specs[index], info)
        stored = run_store.read_stored_run(storage, paths, settings.run_id, config) if store else None
        if stored is not None and stored.finished and stored.epochs_completed >= settings.epochs:
            logger.info("sparkdl KerasEstimator: run %r is finished; its model is returned", settings.run_id)
            models[index] = _model(settings, paths, stored.history, info)
            continue
        done[index] = stored.epochs_completed if stored is not None else 0
        # A relaunch (max_restarts, or an elastic resize: min_workers) resumes from the last epoch.
        backup = store or settings.max_restarts > 0 or settings.min_workers is not None
        runs.append(
            RunSpec(index, settings.epochs, settings.batch_size, specs[index], settings.seed, settings.shuffle, paths,
                    config, backup, pickled[index], settings.monitor, settings.mode, settings.verbose,
                    tracked.target(index))
        )  # fmt: skip
    return runs, done, models


def _trained_models(storage, group, runs, outcomes: dict[int, dict], info) -> dict[int, KerasModel]:
    """The trained runs' models, each checked to be where the chief saved it."""
    models = {}
    for run in runs:
        outcome = outcomes.get(run.index)
        if outcome is None or not storage.exists(run.paths.export_path):
            raise SparkDLError(
                f"sparkdl KerasEstimator: the chief saved no model at {run.paths.export_path} (param map "
                f"{run.index}): are model_dir/checkpoint_dir on storage every node and the driver reach?"
            )
        settings = dict(group)[run.index]
        models[run.index] = _model(settings, run.paths, outcome["history"], info)
    return models


def _train(
    dataset, storage, first: FitSettings, kinds, payload, info, runs, done, nodes, base, on_epoch=None, lane=None
) -> dict[int, dict]:
    """Prepare the data once, then train every run (local mode, or one cluster); outcomes by index."""
    started = time.perf_counter()
    prepared = data.prepare(dataset, list(kinds), kinds, first.validation, first.seed)
    try:
        widths = checks.check_scan(prepared.stats, first, kinds)
        dtypes = checks.column_dtypes(dataset.schema, kinds)
        layout = plan_layout(info, first.feature_cols, first.label_cols, first.sample_weight_col, widths, dtypes)
        marker = (
            f"{base}/current-run.json"
            if lane is not None or (first.max_restarts or first.min_workers is not None) and len(runs) > 1
            else None
        )
        job = TrainingJob(payload, layout, first.validation is not None, tuple(runs), marker, lane is not None)
        for run in runs:
            storage.mkdirs(run.paths.run_dir)  # an object store has no directories: nothing to do there
        logger.info(
            "sparkdl KerasEstimator: %d rows checked and persisted in %.1f s", prepared.stats.rows,
            time.perf_counter() - started,
        )  # fmt: skip
        if nodes == 0:
            from .local import train_locally

            result = train_locally(job, prepared.train, prepared.validation, storage)
        else:
            spark = dataset.sparkSession
            result = _train_on_cluster(
                spark, storage, first, job, prepared, done, nodes, payload.flavour, on_epoch, lane
            )
    finally:
        prepared.release()
    if not isinstance(result, dict) or not isinstance(result.get("runs"), list):
        raise SparkDLError(f"sparkdl KerasEstimator: the chief returned no training results ({result!r})")
    return {outcome["index"]: outcome for outcome in result["runs"]}


def _train_on_cluster(
    spark, storage, first: FitSettings, job: TrainingJob, prepared, done, nodes, flavour, on_epoch=None, lane=None
) -> Any:
    from ..driver.arguments import InputMode
    from ..driver.run import CountNames, launch
    from .node_program import main_fun

    if on_epoch is not None and first.min_workers is None:
        job = replace(job, epoch_gate=True)
    env = {"TF_USE_LEGACY_KERAS": "1" if flavour == TF_KERAS else "0"}  # the nodes' Keras is the model's
    env.update(tracking.node_environment())  # the chief opens the driver's MLflow store as the driver does
    started = time.perf_counter()
    cluster = launch(
        CountNames(nodes="num_workers", min_nodes="min_workers"),  # errors name the estimator's Params
        spark, main_fun, job, nodes, input_mode=InputMode.SPARK, num_gpus=first.num_gpus,
        max_restarts=first.max_restarts, env=env, min_executors=first.min_workers,
    )  # fmt: skip
    cluster.watch_epochs(on_epoch)  # a gated chief (not elastic: its gate is the resize's) stops at the boundary
    with cluster:  # a driver-side error stops every node
        ready = time.perf_counter()
        fed = 0
        for run in job.runs if lane is None else lane.runs(job.runs):
            fed += 1
            if job.current_run_path is not None:  # a relaunched node (a lane's: every node) reads which run is fed
                storage.write_text(job.current_run_path, json.dumps({"index": run.index}))
            epochs = max(1, run.epochs - done[run.index])  # a resumed run is fed the epochs it has left
            cluster.train(
                prepared.train, epochs, validation_data=prepared.validation, shuffle=run.shuffle, seed=run.seed
            )
        trained = time.perf_counter()
        result = cluster.shutdown()
        logger.info(
            "sparkdl KerasEstimator: %d TF nodes started in %.1f s, fed %d run(s) in %.1f s, shut down in %.1f s",
            nodes, ready - started, fed, trained - ready, time.perf_counter() - trained,
        )  # fmt: skip
        return result


def _spark_context(dataset):
    from ..driver.spark_access import spark_access

    access = spark_access(dataset.sparkSession)
    if access.connect:
        raise checks.KerasInputError(
            "KerasEstimator needs a classic SparkSession (it feeds a cluster of TF nodes from the driver); under "
            "Spark Connect, train with TFCluster.run and score with sparkdl.inference"
        )
    return access.sc


def _nodes(sc, num_workers: int | None) -> int:
    """How many TF nodes to start (0: local mode); None means one per executor."""
    if num_workers is not None:
        return num_workers
    from ..driver.spark_access import spark_access

    return max(1, spark_access(sc).count_executors() or 1)


def _base_dir(sc, s: FitSettings, store: bool) -> str:
    """Where this fit's runs keep their files, qualified as Spark would (see ``run_store.py``)."""
    if store:
        return qualified_path(sc, f"{s.checkpoint_dir.rstrip('/')}/{s.run_id}")
    root = s.model_dir or s.checkpoint_dir
    if root is None:
        if not sc.master.startswith("local"):
            raise checks.KerasInputError(
                f"model_dir is not set: on a cluster ({sc.master}) the trained models need storage every node and "
                "the driver reach (HDFS, S3, a shared file system): set model_dir (or checkpoint_dir and run_id)"
            )
        root = sc._temp_dir  # the application's temporary directory: removed when Spark stops
    return qualified_path(sc, f"{root.rstrip('/')}/keras-{uuid.uuid4().hex[:12]}")


def _config(s: FitSettings, spec: CompileSpec, info) -> dict:
    """What a run store records, and refuses to resume with other values of."""
    return json.loads(
        json.dumps(
            {
                "feature_cols": list(s.feature_cols),
                "label_cols": list(s.label_cols),
                "sample_weight_col": s.sample_weight_col,
                "validation": s.validation,
                "batch_size": s.batch_size,
                "seed": s.seed,
                "shuffle": s.shuffle,
                "compile": spec.fingerprint(),
                "model": info.fingerprint(),
            },
            default=str,
        )
    )


def _model(s: FitSettings, paths: RunPaths, history: dict, info) -> KerasModel:
    """The fitted model: its file, the Params it shares with the estimator, how its columns meet its tensors."""
    several_inputs, several_outputs = len(info.inputs) > 1, len(info.outputs) > 1
    model = KerasModel(
        model_path=paths.export_path,
        input_cols={t.name: [t.name] for t in info.inputs} if several_inputs else None,
        output_names=[t.name for t in info.outputs] if several_outputs else None,
        feature_cols=list(s.feature_cols),
        label_cols=list(s.label_cols),
        prediction_col=s.prediction_col,
        probability_col=s.probability_col,
        raw_prediction_col=s.raw_prediction_col,
        output_kind=s.output_kind,
        predicted_class_col=s.predicted_class_col,
        predict_batch_size=s.predict_batch_size,
        packed_outputs=s.packed_outputs,
        safe_mode=s.safe_mode,
    )
    model.set_history(history)
    model.best_model_path = paths.best_path if s.monitor else None
    return model
