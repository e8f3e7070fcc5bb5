"""A TFCluster whose every file is in a bucket, on local-cluster[2,1,1024] against an S3-protocol
server (moto) configured only by the standard AWS environment (``s3_store``): a Keras 3 MWMS fit
backs up to ``s3://`` every epoch, survives a worker SIGKILLed mid-epoch by resuming from the bucket,
exports its model to ``s3a://`` and its TensorBoard summaries to a store ``log_dir``, and
``predict_batch_udf`` scores from there. No secret reaches a log
or the console; a bad bucket or key fails ``TFCluster.run`` before any node starts."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
import store_functions as sfn
from cluster_watch import wait_for

from sparkdl import TFCluster
from sparkdl.common.errors import StorageError
from sparkdl.inference import predict_batch_udf

pytestmark = pytest.mark.timeout(360)
EPOCHS, KILL_EPOCH = 4, 2
#: How long an ended attempt's supervisors may take to upload their node logs after the cluster ends.
NODE_LOG_WAIT_S = 60


def _digits_frame(sc):
    from pyspark.sql import SparkSession
    from sklearn.datasets import load_digits

    spark = SparkSession.builder.getOrCreate()
    x, y = load_digits(return_X_y=True)
    rows = [((r / 16).tolist(), int(t)) for r, t in zip(x[:960], y[:960])]
    return spark.createDataFrame(rows, "pixels array<float>, label long").repartition(4).cache()


def _read(out: Path, name: str) -> dict:
    return json.loads((out / f"{name}.json").read_text())


def _files_holding(root: Path, needle: str) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file():
            try:
                if needle.encode() in path.read_bytes():
                    found.append(str(path))
            except OSError:
                continue
    return found


def test_a_fit_backed_up_to_a_bucket_survives_a_sigkilled_worker_and_scores_from_the_bucket(
    sc2, s3_store, spark_holder, tmp_path, capfd
):
    prefix = f"run-{uuid.uuid4().hex[:8]}"
    args = {
        "out": str(tmp_path),
        "backup": s3_store.url(f"{prefix}/backup"),
        "model": s3_store.url(f"{prefix}/models/digits.keras").replace("s3://", "s3a://"),
        "kill_epoch": KILL_EPOCH,
    }
    frame = _digits_frame(sc2)
    cluster = TFCluster.run(
        sc2,
        sfn.digits_fit_to_store,
        args,
        2,
        input_mode=TFCluster.InputMode.SPARK,
        max_restarts=1,
        log_dir=s3_store.url(f"{prefix}/tensorboard"),
    )
    history = cluster.train(frame, num_epochs=EPOCHS)
    cluster.shutdown(timeout=240)

    # The worker died in epoch 2; the relaunch restored epoch 1's backup from the bucket and trained 2..3.
    assert cluster.restarts == 1
    failure = cluster.failures_survived[0].failures[0]
    assert failure.label == "worker:0" and failure.signal == "SIGKILL"
    for node in (0, 1):
        assert _read(tmp_path, f"start-attempt1-node{node}")["epoch"] == KILL_EPOCH
        assert _read(tmp_path, f"plan-attempt1-node{node}") == {"epochs": EPOCHS, "first_epoch": KILL_EPOCH}
        done = {epoch for epoch in range(EPOCHS) if (tmp_path / f"epoch-attempt0-node{node}-{epoch}.json").exists()}
        redone = {epoch for epoch in range(EPOCHS) if (tmp_path / f"epoch-attempt1-node{node}-{epoch}.json").exists()}
        assert done == set(range(KILL_EPOCH)) and redone == set(range(KILL_EPOCH, EPOCHS)), "every epoch once"
    assert len(history["loss"]) == EPOCHS

    # The fit ended well: Keras' delete_checkpoint removed the backup; the model is one whole object.
    listed = s3_store.client.list_objects_v2(Bucket=s3_store.bucket, Prefix=prefix).get("Contents", [])
    keys = [o["Key"] for o in listed if not o["Key"].endswith("/")]  # pyarrow's empty directory markers aside
    assert [k for k in keys if "/tensorboard/" not in k] == [f"{prefix}/models/digits.keras"], keys
    assert any("/tensorboard/events.out.tfevents." in k for k in keys), "the chief's summaries reached the store"

    def node_logs() -> list[str] | None:
        listed = s3_store.client.list_objects_v2(Bucket=s3_store.bucket, Prefix=prefix).get("Contents", [])
        kept = [
            o["Key"] for o in listed if "/tensorboard/sparkdl-nodes/" in o["Key"] and o["Key"].endswith("/node.log")
        ]
        return kept if len(kept) == 4 else None

    # Each node's log of each attempt is kept in the store. The stopped attempt's supervisors upload
    # theirs as they end, which may come after the relaunched cluster's end: polled, bounded.
    wait_for(node_logs, NODE_LOG_WAIT_S, "each node's log of each attempt in the store")

    scored = frame.withColumn("probs", predict_batch_udf(model=args["model"], batch_size=128)("pixels"))
    right = scored.where("array_position(probs, array_max(probs)) - 1 = label").count()
    assert right / frame.count() > 0.5  # 4 short epochs, any seed: far above chance (0.1)

    # The secret key reached every process through the environment, and no log or console line.
    console = capfd.readouterr()
    assert s3_store.secret_key not in console.out + console.err
    assert _files_holding(Path(spark_holder.executor_tmpdir), s3_store.secret_key) == []


@pytest.mark.parametrize("problem", ["missing bucket", "wrong secret", "unknown scheme"])
def test_a_store_that_cannot_be_used_fails_tfcluster_run_before_any_node_starts(sc2, s3_store, tmp_path, problem):
    args = {"out": str(tmp_path), "model": s3_store.url("models/m.keras")}
    if problem == "missing bucket":
        args["model"] = f"s3a://no-such-bucket-{uuid.uuid4().hex[:6]}/models/m.keras"
    elif problem == "unknown scheme":
        args["export"] = ["swift://container/m"]
    # Spark copies AWS_SECRET_ACCESS_KEY into fs.s3a.secret.key when it starts: a wrong key is set there,
    # as a user configuring Spark for S3 would.
    hadoop = sc2._jsc.hadoopConfiguration()
    saved = hadoop.get("fs.s3a.secret.key")
    if problem == "wrong secret":
        hadoop.set("fs.s3a.secret.key", "not-the-secret-" + uuid.uuid4().hex)
    started = time.monotonic()
    try:
        with pytest.raises(StorageError) as raised:
            TFCluster.run(sc2, sfn.digits_fit_to_store, args, 2, input_mode=TFCluster.InputMode.SPARK)
    finally:
        hadoop.set("fs.s3a.secret.key", saved)
    assert time.monotonic() - started < 10
    message = str(raised.value)
    assert s3_store.secret_key not in message and "not-the-secret" not in message
    if problem == "missing bucket":
        assert "does not exist" in message and "AWS_ENDPOINT_URL" in message  # where the endpoint came from
    elif problem == "wrong secret":
        assert "refused the credentials" in message and "fs.s3a.access.key" in message
        assert s3_store.url("models") in message
    else:
        assert "cannot read or write swift:// paths" in message and "s3a://" in message
    assert not list(tmp_path.glob("plan-*")), "no node started"


def test_tf_keras_backs_up_to_a_bucket_and_a_new_cluster_resumes_from_it(sc2, s3_store):
    """tf-keras' BackupAndRestore (a checkpoint directory, not Keras 3's two files) through the bucket:
    a second cluster with more epochs starts where the first one's backup ends."""
    backup = s3_store.url(f"tfkeras-{uuid.uuid4().hex[:8]}/backup")
    legacy = {"TF_USE_LEGACY_KERAS": "1"}
    results = []
    for epochs in (2, 3):
        args = {"backup": backup, "epochs": epochs}
        cluster = TFCluster.run(sc2, sfn.tf_keras_fit_with_store_backup, args, 2, env=legacy)
        results.append(cluster.shutdown(timeout=180))
    assert results == [{"keras": "tf_keras", "first_epoch": 0}, {"keras": "tf_keras", "first_epoch": 2}]
