"""Model files on an object store, without Spark or TensorFlow: what the executors' loaders and the
versioned directories do with a real S3-protocol server (moto, the session's ``s3_store``, reached
through the AWS variables it puts in the environment). (Scoring from the bucket on a local-cluster:
tests/cluster/inference/test_store_models.py.) And the private copy a model is checked and loaded
from in safe mode, local or remote (the swap it stops, with Keras loading:
tests/cluster/inference/test_model_safe_mode_cluster.py)."""

from __future__ import annotations

import os
import pickle
import re
import stat
import uuid
from pathlib import Path

import pytest

from sparkdl.common.errors import StorageError
from sparkdl.inference import ModelLoadError, ModelVersions, loaders
from sparkdl.inference.model import ModelSource
from sparkdl.model_versions import ModelVersionError, newest_version, publish_version, version_model_path
from sparkdl.storage import Storage, StoreSettings

from model_files import functional, input_layer, keras_archive, layer, tf_keras_gadgets


def _key() -> str:
    return f"unit-store-models-{uuid.uuid4().hex[:8]}"


def _private(directory) -> bool:
    """Whether only this process's user can enter ``directory`` (and it is that user's)."""
    status = os.stat(directory)
    return status.st_uid == os.getuid() and stat.S_IMODE(status.st_mode) == 0o700


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
    with loaders.private_copy(url, storage) as local:
        assert Path(local).read_bytes() == b"one" and local.endswith("m.keras")
        scratch = os.path.dirname(local)
        assert _private(scratch) and stat.S_IMODE(os.stat(local).st_mode) & 0o077 == 0
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
    with loaders.private_copy(directory, storage) as local:
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


def test_a_local_model_is_copied_privately_and_the_copy_keeps_what_was_read(tmp_path):
    """Safe mode checks and Keras loads a private copy of a local or mounted model: replacing the
    path after the copy (as whoever can write it could, while Keras is imported) changes nothing."""
    safe = functional(input_layer(), layer("Dense", "checked", [[["x", 0, 0, {}]]], units=2))
    path = keras_archive(tmp_path / "model.keras", safe, "2.21.0")
    checked = Path(path).read_bytes()
    gadget = keras_archive(
        tmp_path / "gadget.keras", tf_keras_gadgets(tmp_path / "ran", "tf_keras")["lambda_exec_live"]
    )
    with loaders.private_copy(path) as local:
        os.replace(gadget, path)  # the swap, after the copy
        assert local != path and os.path.basename(local) == "model.keras"  # Keras goes by the name
        assert _private(os.path.dirname(local)) and stat.S_IMODE(os.stat(local).st_mode) == 0o600
        assert Path(local).read_bytes() == checked
    assert not os.path.exists(os.path.dirname(local))

    # A directory (Keras 3 loads one holding an archive's files), reached through a link.
    model = tmp_path / "versions" / "3"
    (model / "assets").mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "assets" / "vocabulary.txt").write_text("a\nb")
    os.symlink(model, tmp_path / "latest.keras")
    with loaders.private_copy(str(tmp_path / "latest.keras")) as local:
        assert os.path.basename(local) == "latest.keras"
        assert sorted(str(p.relative_to(local)) for p in Path(local).rglob("*")) == [
            "assets",
            "assets/vocabulary.txt",
            "config.json",
        ]
        assert (Path(local) / "assets" / "vocabulary.txt").read_text() == "a\nb"


def test_a_model_path_that_is_not_files_is_refused_without_waiting(tmp_path):
    """A named pipe would block a reader until someone writes it; a device would never end."""
    os.mkfifo(tmp_path / "pipe.keras")
    with pytest.raises(ModelLoadError, match=r"pipe.keras' is not a regular file or a directory"):
        with loaders.private_copy(str(tmp_path / "pipe.keras")):
            pass
    (tmp_path / "model").mkdir()
    os.symlink(tmp_path, tmp_path / "model" / "loop")
    with pytest.raises(ModelLoadError, match=r"holds a link to a directory, .*loop'"):
        with loaders.private_copy(str(tmp_path / "model")):
            pass
    with pytest.raises(ModelLoadError, match=r"model path '.*missing.keras' does not exist"):
        with loaders.private_copy(str(tmp_path / "missing.keras")):
            pass
