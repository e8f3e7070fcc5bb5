"""Bad input to KerasEstimator.fit fails on the driver, before any TF node starts, naming the Param and
the column (issue 23, "Bad input"): missing, mistyped, null and ragged columns, shapes the model cannot
take, a model without loss, a callback that cannot pickle, callbacks of the other Keras than the model's."""

from __future__ import annotations

import pytest

from sparkdl import PreflightError
from sparkdl.keras import KerasEstimator, KerasInputError

import keras_functions as kf

pytestmark = pytest.mark.timeout(240)


def _jobs(sc) -> dict[int, str]:
    """Every Spark job of the application so far, by id: its description, or its group."""
    jobs = sc._jsc.sc().statusStore().jobsList(None)
    texts = {}
    for i in range(jobs.size()):
        job = jobs.apply(i)
        described, group = job.description(), job.jobGroup()
        texts[job.jobId()] = described.get() if described.isDefined() else (group.get() if group.isDefined() else "")
    return texts


def test_bad_input_fails_in_fit_before_any_node_starts(sc2, spark_holder, tmp_path):
    import keras

    spark = spark_holder.spark
    spark.catalog.clearCache()
    good = [([0.1, 0.2, 0.3, 0.4], 1, "a", 1.0)] * 40
    schema = "x array<float>, y long, text string, w double"
    frames = {
        "good": spark.createDataFrame(good, schema),
        "null": spark.createDataFrame(good[:-1] + [([0.1, 0.2, 0.3, 0.4], None, "a", 1.0)], schema),
        "ragged": spark.createDataFrame(good[:-1] + [([0.1, 0.2, 0.3], 1, "a", 1.0)], schema),
    }
    keras3 = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="softmax")])
    keras3.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    base = dict(model=kf.small_model, feature_cols=["x"], label_cols=["y"], num_workers=2, model_dir=str(tmp_path))
    # (frame, Param changes, error): no Spark job either, the schema and the model tell
    static = [
        ("good", dict(feature_cols=["x", "nope"]), r"feature_cols: the DataFrame has no column 'nope'; its columns"),
        ("good", dict(label_cols=["text"]), r"label_cols: column 'text' has type string, which cannot feed a Keras"),
        ("good", dict(sample_weight_col="x"), r"sample_weight_col: column 'x' has type array<float>"),
        ("good", dict(model=lambda: kf.small_model(compiled=False)), r"model is not compiled with a loss and the loss"),
        ("good", dict(callbacks=[kf.LockedCallback()]), r"callbacks: LockedCallback cannot be pickled to travel"),
        (
            "good",
            dict(model=keras3, callbacks=[kf.StopAtEpoch(1)]),
            r"callbacks: StopAtEpoch is a tf-keras callback but",
        ),
        ("good", dict(validation="y"), r"validation: column 'y' has type bigint; a validation indicator column must"),
    ]
    # a Spark job scans the data, and no node starts
    scanned = [
        ("null", {}, r"label_cols: column 'y' has 1 null value\(s\) in 40 rows"),
        ("ragged", {}, r"feature_cols: column 'x' holds arrays of different lengths \(3 \.\. 4 values per row\)"),
        ("good", dict(model=lambda: kf.small_model(inputs=5)), r"feature_cols: the model's input .* \(5 values per r"),
        ("good", dict(validation=0.001), r"validation=0.001 leaves no validation rows among 40"),
    ]
    for cases, jobs_allowed in ((static, False), (scanned, True)):
        for frame, changes, message in cases:
            before = _jobs(sc2)
            with pytest.raises(KerasInputError, match=message):
                KerasEstimator(**{**base, **changes}).fit(frames[frame])
            new = [text for job, text in _jobs(sc2).items() if job not in before]
            assert not [j for j in new if j.startswith("sparkdl-") or j.startswith("sparkdl: run")], (message, new)
            assert jobs_allowed or not new, (message, new)
            assert spark._jsparkSession.sharedState().cacheManager().isEmpty(), message  # nothing left persisted
    assert not list(tmp_path.iterdir())  # no run directory was even created
    # More nodes than executors: Spark's preflight names the Param the user set, num_workers
    with pytest.raises(PreflightError, match=r"^num_workers=3 but this Spark application .* only 2 executor") as info:
        KerasEstimator(**{**base, "num_workers": 3}).fit(frames["good"])
    assert "num_executors" not in str(info.value)
