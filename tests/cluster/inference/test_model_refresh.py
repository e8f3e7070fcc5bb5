"""Train and serve: versioned model directories (sparkdl.model_versions) and scoring that switches to
a newer version without a restart, in a streaming query and in batch jobs.

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
from sparkdl.model_versions import ModelVersionError, newest_version, publish_version, version_model_path

import inference_models as im

# ---------------------------------------------------------------------------------------------
# The directory layout (no Spark, no TensorFlow)
# ---------------------------------------------------------------------------------------------


def _keras_file(directory: str) -> None:
    Path(directory, "model.keras").write_bytes(b"PK not really a model")  # only names matter here


def _saved_model(directory: str) -> None:
    Path(directory, "saved_model.pb").write_bytes(b"")
    Path(directory, "variables").mkdir()


def _leftovers(base: Path) -> list[str]:
    return sorted(p.name for p in base.iterdir() if p.name.startswith("."))


@pytest.mark.timeout(30)
def test_publish_is_atomic_and_the_newest_complete_version_wins(tmp_path):
    base = tmp_path / "models"
    assert newest_version(base) is None  # no base yet
    seen_while_writing = []

    def write(directory):
        seen_while_writing.append((Path(directory).parent == base, newest_version(base)))
        _keras_file(directory)

    path = publish_version(base, 1, write)
    assert seen_while_writing == [(True, None)]  # written beside the versions, invisible meanwhile
    assert path == str(base / "1" / "model.keras") and newest_version(base) == (1, path)

    # Junk a reader must ignore: a temporary directory (a crashed publisher), names that are not
    # plain version numbers, a file named like a version.
    for name in (".tmp-99-dead", "latest", "007", "3a"):
        (base / name).mkdir()
        _keras_file(str(base / name))
    (base / "8").write_text("not a directory")
    assert newest_version(base) == (1, path)

    publish_version(base, 2, _keras_file)
    saved = publish_version(base, 10, _saved_model)  # numbers, not names, are compared
    assert saved == str(base / "10") and newest_version(base) == (10, saved)


@pytest.mark.timeout(30)
def test_a_version_is_published_once_and_failed_writes_leave_nothing(tmp_path):
    base = tmp_path / "models"
    publish_version(base, 3, _keras_file)
    calls = []
    with pytest.raises(FileExistsError, match="versions are immutable"):
        publish_version(base, 3, calls.append)
    assert calls == []  # refused before writing anything

    def failing(directory):
        _keras_file(directory)
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        publish_version(base, 4, failing)
    with pytest.raises(ModelVersionError, match="no saved_model.pb and no Keras file"):
        publish_version(base, 5, lambda directory: None)  # wrote no model
    assert _leftovers(base) == [] and newest_version(base) == (3, str(base / "3" / "model.keras"))

    two = tmp_path / "two"
    two.mkdir()
    for name in ("a.keras", "b.h5"):
        (two / name).write_bytes(b"")
    with pytest.raises(ModelVersionError, match=r"Keras files \['a.keras', 'b.h5'\]"):
        version_model_path(str(two))
    with pytest.raises(ValueError, match="version must be an integer"):
        publish_version(base, "6", _keras_file)
    with pytest.raises(ValueError, match="refresh_seconds"):
        ModelVersions(str(base), refresh_seconds=-1)
    with pytest.raises(ModelVersionError, match="local paths"):
        ModelVersions("hdfs://namenode/models")
    with pytest.raises(ValueError, match="version_column .* needs a versioned model"):
        Predictor(str(base / "3" / "model.keras"), input_mapping="x", version_column="model_version")


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
