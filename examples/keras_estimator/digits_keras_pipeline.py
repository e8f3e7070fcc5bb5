"""A Spark ML Pipeline ending in sparkdl's KerasEstimator: tuned by CrossValidator, saved, loaded, scored.

``Pipeline(VectorAssembler -> StandardScaler -> KerasEstimator)`` on scikit-learn's digits (64 pixel
columns): ``CrossValidator`` tries ``--learning_rates`` over ``--folds`` folds (each fold's param maps
train one after another on one TF cluster of ``--cluster_size`` nodes, MultiWorkerMirroredStrategy),
then fits the best on all the training rows. The best ``PipelineModel`` is saved and loaded back, the
held-out rows are scored by the loaded one (and checked to get the same values as the saved one), and
Spark ML's MultilayerPerceptronClassifier is fitted on the same split for comparison.

Runs with no arguments on an embedded ``local-cluster[2,1,1024]``; see README.md for spark-submit.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import keras_digits  # noqa: E402


def parse_args(argv=None):
    """Command-line options; every one has a default."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--master", default=None, help="Spark master (default: spark-submit's, else local-cluster)")
    parser.add_argument("--cluster_size", type=int, default=2, help="TF nodes, one per executor (0: local mode)")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--learning_rates", default="0.01,0.001", help="the grid CrossValidator searches")
    parser.add_argument("--folds", type=int, default=2)
    parser.add_argument("--work_dir", default=None, help="models and the saved pipeline (default: a temp dir)")
    parser.add_argument("--no_baseline", action="store_true", help="skip Spark ML's MultilayerPerceptronClassifier")
    return parser.parse_args(argv)


def main(argv=None, spark=None) -> float:
    """Tune, save, load, score; returns the held-out accuracy.

    ``spark``: use this running session and leave it running (by default the example starts its own).
    """
    own_session = spark is None
    args = parse_args(argv)
    work_dir = args.work_dir or tempfile.mkdtemp(prefix="sparkdl-keras-pipeline-")
    spark = keras_digits.start_spark("sparkdl-keras-pipeline", args.master, max(args.cluster_size, 1), spark=spark)
    import numpy as np
    from pyspark.ml import PipelineModel
    from pyspark.ml.evaluation import MulticlassClassificationEvaluator
    from pyspark.ml.tuning import CrossValidator, ParamGridBuilder

    train, test = keras_digits.digits_frames(spark)
    estimator = keras_digits.keras_estimator(args.epochs, args.cluster_size, model_dir=os.path.join(work_dir, "models"))
    rates = [float(r) for r in args.learning_rates.split(",")]
    tuning = CrossValidator(
        estimator=keras_digits.pipeline(estimator),
        estimatorParamMaps=ParamGridBuilder().addGrid(estimator.learning_rate, rates).build(),
        evaluator=MulticlassClassificationEvaluator(metricName="accuracy"),  # Spark ML's columns: label, prediction
        numFolds=args.folds,
        seed=7,
    )
    started = time.perf_counter()
    tuned = tuning.fit(train)
    tuning_s = time.perf_counter() - started
    where = f"{args.cluster_size} TF nodes" if args.cluster_size else "the driver (local mode)"
    grid = f"{len(rates)} learning rate{'s' if len(rates) > 1 else ''} x {args.folds} folds"
    print(f"tuned on {where}: {grid} + the final fit in {tuning_s:.1f} s")
    for rate, metric in zip(rates, tuned.avgMetrics):
        print(f"  learning_rate={rate:g}: cross-validated accuracy {metric:.4f}")
    best = tuned.bestModel
    keras_model = best.stages[-1]
    print(
        f"best learning_rate={rates[int(np.argmax(tuned.avgMetrics))]:g}; its val_accuracy by epoch: "
        + ", ".join(f"{a:.3f}" for a in keras_model.history["val_accuracy"])
    )

    saved = os.path.join(work_dir, "pipeline_model")
    best.write().overwrite().save(saved)
    loaded = PipelineModel.load(saved)
    scored = loaded.transform(test)
    accuracy = keras_digits.accuracy(scored)
    before = best.transform(test).select("probability").toPandas()["probability"]
    after = scored.select("probability").toPandas()["probability"]
    difference = float(
        np.abs(np.stack(before.map(lambda v: v.toArray())) - np.stack(after.map(lambda v: v.toArray()))).max()
    )
    print(f"saved and loaded the PipelineModel ({saved}): same predictions, max |difference| {difference:.1e}")
    print(f"test accuracy (held-out {test.count()} rows, the loaded PipelineModel): {accuracy:.4f}")
    if not args.no_baseline:
        mlp_accuracy, mlp_s = keras_digits.spark_ml_mlp(train, test)
        final = keras_model.history
        print("on the same split:")
        print(f"  sparkdl KerasEstimator, MLP 64-64-10, {len(final['loss'])} epochs: accuracy {accuracy:.4f}")
        print(f"  Spark ML MultilayerPerceptronClassifier 64-64-10: accuracy {mlp_accuracy:.4f} ({mlp_s:.1f} s)")
    if own_session:
        spark.stop()
    return accuracy


if __name__ == "__main__":
    main()
