"""Model files on an object store, without Spark or TensorFlow: what the executors' loaders and the
versioned directories do with a real S3-protocol server (moto, the session's ``s3_store``, reached
through the AWS variables it puts in the environment). (Scoring from the bucket on a local-cluster:
tests/cluster/inference/test_store_models.py.)"""

from __future__ import annotations

import os
import pickle
import re
import uuid
from pathlib import Path

import pytest

from sparkdl.common.errors import StorageError
from sparkdl.inference import ModelLoadError, ModelVersions, loaders
from sparkdl.inference.model import ModelSource
from sparkdl.model_versions import ModelVersionError, newest_version, publish_version, version_model_path
from sparkdl.storage import Storage, StoreSettings


def _key() -> str:
    return f"unit-store-models-{uuid.uuid4().hex[:8]}"


def _keras_file(directory: str) -> None:
    Path(directory, "model.keras").write_bytes(b"PK not really a model")  # only names matter here


@pytest.mark.timeout(60)
def test_remote_model_files_are_fingerprinted_and_copied_whole(s3_store, tmp_path):
    key = _key()
    storage = Storage()
    url = f"s3a://{s3_store.bucket}/{key}/m.keras"
    s3_store.client.put_object(Bucket=s3_store.bucket, Key=f"{key}/m.keras", Body=b"one")
    first = loaders.fingerprint(url, storage)
    assert loaders.model_kind(url, storage) == "keras"
    with loaders._local_copy(url, storage) as local:
        assert Path(local).read_bytes() == b"one" and local.endswith("m.keras")
        scratch = os.path.dirname(local)
    assert not os.path.exists(scratch)  # the private copy is gone
    s3_store.client.put_object(Bucket=s3_store.bucket, Key=f"{key}/m.keras", Body=b"two!")
    assert loaders.fingerprint(url, storage) != first
    with pytest.raises(ModelLoadError, match=re.escape(f"model path '{url}.missing' does not exist")):
        loaders.fingerprint(url + ".missing", storage)

    # A SavedModel directory: whole once saved_model.pb is there, refused before.
    model = tmp_path / "export"
    (model / "variables").mkdir(parents=True)
    (model / "variables" / "variables.index").write_bytes(b"index")
    (model / "saved_model.pb").write_bytes(b"graph")
    directory = f"s3://{s3_store.bucket}/{key}/export"
    s3_store.client.upload_file(
        str(model / "variables" / "variables.index"), s3_store.bucket, f"{key}/export/variables/variables.index"
    )
    for call in (loaders.fingerprint, loaders.model_kind):
        with pytest.raises(ModelLoadError, match=re.escape(f"model directory '{directory}': upload not finished")):
            call(directory, storage)
    storage.upload(str(model), directory)
    assert loaders.model_kind(directory, storage) == "saved_model"
    loaders.fingerprint(directory, storage)
    with loaders._local_copy(directory, storage) as local:
        assert sorted(str(p.relative_to(local)) for p in Path(local).rglob("*") if p.is_file()) == [
            "saved_model.pb",
            "variables/variables.index",
        ]


@pytest.mark.timeout(60)
def test_store_errors_name_the_path_and_never_a_secret(s3_store):
    secret = f"wrong-secret-{uuid.uuid4().hex}"
    settings = StoreSettings.from_mapping(
        {"fs.s3a.access.key": "AKIAWRONGKEY0000", "spark.hadoop.fs.s3a.secret.key": secret}
    )
    source = ModelSource(f"s3a://{s3_store.bucket}/m.keras", storage=settings)
    assert secret not in repr(source) and pickle.loads(pickle.dumps(source)).storage == settings
    with pytest.raises(StorageError) as refused:
        loaders.fingerprint(source.path, Storage(source.storage, attempts=1))
    message = str(refused.value)
    assert source.path in message and "fs.s3a.access.key" in message
    assert secret not in message and s3_store.secret_key not in message


@pytest.mark.timeout(60)
def test_versions_on_a_store_publish_whole_and_the_newest_complete_one_wins(s3_store):
    key = _key()
    base = f"s3a://{s3_store.bucket}/{key}/models/"
    storage = Storage()
    assert newest_version(base, storage) is None  # no base yet
    with pytest.raises(
        ModelVersionError, match=re.escape(f"no model version in '{base.rstrip('/')}': the directory does not exist")
    ):
        ModelVersions(base).newest(storage)
    base = base.rstrip("/")

    seen = []

    def write(directory):
        seen.append(newest_version(base, storage))  # written locally: nothing in the store yet
        _keras_file(directory)

    path = publish_version(base, 1, write, storage)
    assert seen == [None] and path == f"{base}/1/model.keras" and newest_version(base, storage) == (1, path)
    assert version_model_path(f"{base}/1", storage.settings) == path

    # Junk a reader must ignore, a version still being uploaded, and a file named like a version.
    for junk in ("latest/model.keras", "007/model.keras", "5/variables/variables.index", "8"):
        s3_store.client.put_object(Bucket=s3_store.bucket, Key=f"{key}/models/{junk}", Body=b"")
    assert newest_version(base, storage) == (1, path)

    saved = publish_version(base, 2, lambda d: Path(d, "saved_model.pb").write_bytes(b""), storage)
    assert saved == f"{base}/2" and newest_version(base, storage) == (2, saved)
    with pytest.raises(FileExistsError, match="versions are immutable"):
        publish_version(base, 2, _keras_file, storage)
    with pytest.raises(ModelVersionError, match="no saved_model.pb and no Keras file"):
        publish_version(base, 3, lambda directory: None, storage)
    assert not storage.exists(f"{base}/3") and newest_version(base, storage) == (2, saved)

    s3_store.client.put_object(Bucket=s3_store.bucket, Key=f"{key}/models/5/saved_model.pb", Body=b"")  # now whole
    assert newest_version(base, storage) == (5, f"{base}/5")

    empty = f"s3a://{s3_store.bucket}/{key}/empty"
    s3_store.client.put_object(Bucket=s3_store.bucket, Key=f"{key}/empty/notes.txt", Body=b"")
    with pytest.raises(
        ModelVersionError,
        match=re.escape(f"no model version in '{empty}': the directory holds no complete version yet"),
    ):
        ModelVersions(empty).newest(storage)
