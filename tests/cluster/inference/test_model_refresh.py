"""Train and serve: scoring from versioned model directories (sparkdl.model_versions) that switches
to a newer version without a restart, in a streaming query and in batch jobs. (The directory layout
without Spark: tests/unit/inference/test_inference_model_versions.py.)

The models are ``y = factor * x`` (``inference_models.scale_model``), so a prediction says which
version made it. ``refresh_seconds=0`` makes each Python worker list the base for every batch, so
a version published before a batch starts scores that batch.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sparkdl.inference import ModelLoadError, ModelVersions, Predictor, map_in_pandas, predict_batch_udf
from sparkdl.ml import TFModel
from sparkdl.model_versions import publish_version

import inference_models as im

# ---------------------------------------------------------------------------------------------
# Scoring with refresh, on a real local-cluster
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def spark(sc2, spark_holder):
    return spark_holder.spark


def _publish_scale(base: Path, version: int, factor: float) -> None:
    publish_version(base, version, lambda d: im.scale_model(factor).save(os.path.join(d, "model.keras")))


def _add_file(folder: Path, staging: Path, name: str, ids: range) -> None:
    """A JSON-lines file of rows ``{id, x = id + 1}``, moved into ``folder`` whole."""
    staging.mkdir(exist_ok=True)
    partial = staging / name
    partial.write_text("".join(json.dumps({"id": i, "x": float(i + 1)}) + "\n" for i in ids))
    os.rename(partial, folder / name)


@pytest.mark.timeout(300)
def test_a_streaming_query_switches_to_a_new_version_without_a_restart(spark, tmp_path):
    base, folder = tmp_path / "models", tmp_path / "incoming"
    folder.mkdir()
    _publish_scale(base, 1, 1.0)
    stream = spark.readStream.schema("id long, x float").option("maxFilesPerTrigger", 1).json(str(folder))
    predictor = Predictor(
        ModelVersions(str(base), refresh_seconds=0),
        input_mapping={"x": "x"},
        output_mapping={"y": "pred"},
        keep_columns=["id", "x"],
        version_column="model_version",
    )
    query = (
        predictor.transform(stream)
        .writeStream.format("memory")
        .queryName("refresh_scored")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        _add_file(folder, tmp_path / "staging", "part-0.json", range(0, 4))
        query.processAllAvailable()
        first = {r["id"]: r for r in spark.sql("select * from refresh_scored").collect()}
        assert sorted(first) == [0, 1, 2, 3]
        assert {r["model_version"] for r in first.values()} == {1}
        assert all(r["pred"] == pytest.approx(r["x"]) for r in first.values())

        _publish_scale(base, 2, 10.0)  # the query keeps running
        _add_file(folder, tmp_path / "staging", "part-1.json", range(4, 8))
        query.processAllAvailable()
        rows = {r["id"]: r for r in spark.sql("select * from refresh_scored").collect()}
        assert query.isActive and query.exception() is None
        assert sorted(rows) == list(range(8))
        assert {rows[i]["model_version"] for i in range(4)} == {1}  # earlier rows as they were
        assert {rows[i]["model_version"] for i in range(4, 8)} == {2}
        assert all(rows[i]["pred"] == pytest.approx(10.0 * rows[i]["x"]) for i in range(4, 8))
    finally:
        query.stop()


@pytest.mark.timeout(300)
def test_batch_jobs_the_udf_and_tfmodel_score_with_the_newest_version(spark, tmp_path):
    base = tmp_path / "models"
    _publish_scale(base, 1, 2.0)
    df = spark.createDataFrame([(i, float(i + 1)) for i in range(6)], "id long, x float").repartition(2)
    fn, schema = map_in_pandas(
        df, ModelVersions(str(base), refresh_seconds=0), input_mapping="x", keep_columns=["id", "x"], version_column="v"
    )
    scored = df.mapInPandas(fn, schema)
    assert schema.names == ["id", "x", "prediction", "v"]
    assert {(r["v"], r["prediction"]) for r in scored.collect()} == {(1, 2.0 * (i + 1)) for i in range(6)}

    _publish_scale(base, 2, 3.0)
    assert {(r["v"], r["prediction"]) for r in scored.collect()} == {(2, 3.0 * (i + 1)) for i in range(6)}

    udf = predict_batch_udf(model=ModelVersions(str(base), refresh_seconds=0))
    assert sorted(r[0] for r in df.select(udf("x")).collect()) == [3.0 * (i + 1) for i in range(6)]

    model = TFModel(export_dir=str(base), input_mapping={"x": "x"}, refresh_seconds=0.0, version_column="version")
    rows = model.transform(df).collect()
    assert set(rows[0].asDict()) == {"id", "x", "prediction", "version"}
    assert {(r["version"], r["prediction"]) for r in rows} == {(2, 3.0 * (i + 1)) for i in range(6)}


@pytest.mark.timeout(300)
def test_a_base_without_versions_fails_on_the_driver_naming_it(spark, tmp_path):
    empty = tmp_path / "no-versions-yet"
    empty.mkdir()
    df = spark.createDataFrame([(1.0,)], "x float")
    with pytest.raises(ModelLoadError, match=rf"no model version in '{empty}': the directory holds no version yet"):
        Predictor(ModelVersions(str(empty), refresh_seconds=0), input_mapping="x").plan(df)
