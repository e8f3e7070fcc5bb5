"""A TFCluster whose files are in an Azure container, on local-cluster[2,1,1024] against Azurite
configured only by ``AZURE_STORAGE_CONNECTION_STRING`` (``azure_store``): a Keras 3 MWMS fit in
InputMode.TENSORFLOW backs up to ``abfss://`` every epoch and exports its model there, and
``predict_batch_udf`` scores from the ``abfss://`` path on the executors."""

from __future__ import annotations

import json
import uuid

import pytest
import store_functions as sfn

from sparkdl import TFCluster
from sparkdl.inference import predict_batch_udf

# Slow tier (--slow): the storage layer, preflight and generations are tested against Azurite in
# tests/unit/storage; this whole-cluster run (two TensorFlow imports, ~90 s) repeats the S3 one's path.
pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]
EPOCHS = 3


def test_a_keras3_fit_backs_up_and_exports_to_azure_and_scores_from_there(sc2, azure_store):
    from pyspark.sql import SparkSession

    prefix = azure_store.url(f"run-{uuid.uuid4().hex[:8]}")
    args = {"backup": f"{prefix}/backup", "model": f"{prefix}/models/m.keras", "epochs": EPOCHS}
    cluster = TFCluster.run(sc2, sfn.keras3_fit_to_store, args, 2, input_mode=TFCluster.InputMode.TENSORFLOW)
    result = cluster.shutdown(timeout=180)
    assert result["keras"] == "3" and result["loss"] < 0.5, result

    # The container holds the last backup generation (its pointer and the files it names) and the model.
    files = azure_store.files_under(prefix)
    assert "models/m.keras" in files, files
    pointer = json.loads(azure_store.client.open_input_stream(_blob(prefix, "backup/latest.json")).read())
    generation = pointer["generation"]
    assert generation.startswith("gen-") and pointer["files"], pointer
    assert {f"backup/{generation}/{name}" for name in pointer["files"]} <= set(files), files

    spark = SparkSession.builder.getOrCreate()
    rows = [[float(v) for v in row] for row in ([1.0] * 8, [-1.0] * 8, [2.0, 1, 0, 0, 0, 0, 0, -1], [-2.0] + [0] * 7)]
    frame = spark.createDataFrame([(row, int(sum(row) > 0)) for row in rows], "x array<float>, label long")
    scored = frame.withColumn("probs", predict_batch_udf(model=args["model"], batch_size=4)("x"))
    right = scored.where("array_position(probs, array_max(probs)) - 1 = label").count()
    assert right == len(rows)


def _blob(prefix: str, path: str) -> str:
    """``<container>/<key>`` of ``path`` under the ``abfss://`` prefix, as a pyarrow AzureFileSystem names it."""
    authority, _, key = prefix.split("://", 1)[1].partition("/")
    return f"{authority.split('@', 1)[0]}/{key}/{path}"
