"""files.py: ``Storage`` against a real S3-protocol server (``s3_store``: moto, checking credentials,
reached through the standard AWS environment as a user's would be) and on local paths: single files,
directories uploaded with their commit file last, and generations that readers only ever see whole.
Each test works under a prefix of its own in the session's bucket."""

import json
import os
import uuid

import pytest

from sparkdl.common.errors import StorageError
from sparkdl.storage import Storage
from sparkdl.storage.files import COMPLETE_MARKER, POINTER

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def store():
    """A Storage configured by the environment alone (``s3_store`` put its AWS variables there)."""
    return Storage()


@pytest.fixture
def prefix(s3_store):
    """``s3://<bucket>/<unique>``: this test's own place in the session's bucket."""
    return s3_store.url(f"t-{uuid.uuid4().hex[:10]}")


def keys_under(s3_store, url: str) -> list[str]:
    """Every object key under ``url``, as the store lists it (boto3, behind sparkdl's back), less the
    empty ``dir/`` objects pyarrow leaves as directory markers when it deletes a directory's content."""
    key = url.split("/", 3)[3]
    pages = s3_store.client.get_paginator("list_objects_v2").paginate(Bucket=s3_store.bucket, Prefix=key + "/")
    keys = (item["Key"][len(key) + 1 :] for page in pages for item in page.get("Contents", []))
    return sorted(name for name in keys if name and not name.endswith("/"))


def make_dir(root, files: dict[str, bytes]) -> str:
    for relative, data in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return str(root)


SAVED_MODEL = {
    "saved_model.pb": b"graph" * 100,
    "fingerprint.pb": b"fp",
    "variables/variables.index": b"index",
    "variables/variables.data-00000-of-00001": os.urandom(70_000),
    "assets/vocab.txt": b"a\nb\n",
}


# -- one file --


def test_write_read_exists_delete(store, prefix, s3_store):
    path = f"{prefix}/a/b.bin"
    assert not store.exists(path) and store.read_text(path) is None
    store.write_bytes(path, b"\x00first")
    store.write_text(path, "second é")  # replaces
    assert store.read_bytes(path) == "second é".encode()
    assert store.read_text(path) == "second é"
    assert store.exists(path) and store.is_complete(path) and not store.is_dir(path)
    assert store.exists(f"{prefix}/a") and store.is_dir(f"{prefix}/a")
    body = s3_store.client.get_object(Bucket=s3_store.bucket, Key=path.split("/", 3)[3])["Body"].read()
    assert body == "second é".encode()
    store.delete(path)
    assert not store.exists(path) and store.read_text(path) is None
    store.delete(path)  # nothing there: nothing to do


def test_every_s3_spelling_reaches_the_same_object(store, prefix):
    store.write_text(f"{prefix}/x.txt", "one")
    for scheme in ("s3a", "s3n"):
        assert store.read_text(prefix.replace("s3://", f"{scheme}://", 1) + "/x.txt") == "one"


def test_reading_a_missing_file_names_it(store, prefix):
    with pytest.raises(FileNotFoundError, match="nothing.bin"):
        store.read_bytes(f"{prefix}/nothing.bin")


def test_a_file_goes_up_and_down(store, prefix, tmp_path):
    local = tmp_path / "m.keras"
    local.write_bytes(os.urandom(20_000))
    store.upload(str(local), f"{prefix}/m.keras")
    store.download(f"{prefix}/m.keras", str(tmp_path / "back.keras"))
    assert (tmp_path / "back.keras").read_bytes() == local.read_bytes()


def test_walk_and_listdir(store, prefix, s3_store):
    for name in ("a.txt", "d/b.txt", "d/e/c.txt"):
        store.write_text(f"{prefix}/{name}", name)
    assert sorted((name, size) for name, size, _ in store.walk(prefix)) == [
        ("a.txt", 5), ("d/b.txt", 7), ("d/e/c.txt", 9),
    ]  # fmt: skip
    assert sorted(store.listdir(prefix)) == [("a.txt", False), ("d", True)]
    assert store.listdir(f"{prefix}/nowhere") == []
    store.delete(f"{prefix}/d")
    assert keys_under(s3_store, prefix) == ["a.txt"]


# -- a directory --


def test_a_directory_upload_writes_saved_model_pb_last(store, prefix, tmp_path, s3_store, monkeypatch):
    """Every upload is watched: when saved_model.pb starts to go up, every other file is in the store
    and the directory does not yet count as complete."""
    local = make_dir(tmp_path / "model", SAVED_MODEL)
    target = f"{prefix}/model"
    order, complete_before_commit = [], []
    real_put = Storage._put_file

    def watched_put(self, source, location):
        if location.name == "saved_model.pb":
            complete_before_commit.append(self.is_complete(target))
            assert sorted(keys_under(s3_store, target)) == sorted(set(SAVED_MODEL) - {"saved_model.pb"})
        order.append(location.key.split("/model/", 1)[1])
        real_put(self, source, location)

    monkeypatch.setattr(Storage, "_put_file", watched_put)
    store.upload(local, target)
    assert order[-1] == "saved_model.pb" and sorted(order) == sorted(SAVED_MODEL)
    assert complete_before_commit == [False]
    assert store.is_complete(target)
    assert keys_under(s3_store, target) == sorted(SAVED_MODEL)  # no marker: saved_model.pb is the commit


def test_a_directory_without_its_commit_file_is_not_complete(store, prefix, tmp_path, s3_store):
    store.upload(make_dir(tmp_path / "model", SAVED_MODEL), f"{prefix}/model")
    s3_store.client.delete_object(Bucket=s3_store.bucket, Key=f"{prefix.split('/', 3)[3]}/model/saved_model.pb")
    assert store.exists(f"{prefix}/model") and not store.is_complete(f"{prefix}/model")


def test_a_plain_directory_gets_the_marker_last(store, prefix, tmp_path, s3_store):
    files = {"a.json": b"{}", "sub/b.bin": b"12345"}
    target = f"{prefix}/out"
    store.upload(make_dir(tmp_path / "out", files), target)
    assert keys_under(s3_store, target) == sorted([*files, COMPLETE_MARKER])
    assert store.is_complete(target)
    store.delete(f"{target}/{COMPLETE_MARKER}")
    assert not store.is_complete(target)
    assert not store.is_complete(f"{prefix}/missing")


def test_a_directory_upload_replaces_the_previous_one(store, prefix, tmp_path, s3_store):
    target = f"{prefix}/model"
    store.upload(make_dir(tmp_path / "one", {"old.bin": b"1", "saved_model.pb": b"1"}), target)
    store.upload(make_dir(tmp_path / "two", {"new.bin": b"2", "saved_model.pb": b"2"}), target)
    assert keys_under(s3_store, target) == ["new.bin", "saved_model.pb"]


def test_a_directory_comes_back_whole(store, prefix, tmp_path):
    store.upload(make_dir(tmp_path / "model", SAVED_MODEL), f"{prefix}/model")
    back = tmp_path / "back"
    store.download(f"{prefix}/model", str(back))
    assert {str(p.relative_to(back)): p.read_bytes() for p in back.rglob("*") if p.is_file()} == SAVED_MODEL


# -- generations, on S3 and on a local path --


@pytest.fixture(params=["s3", "local"])
def base(request, s3_store, tmp_path):
    """Where a generation directory lives: the test's own S3 prefix, or a local directory."""
    if request.param == "s3":
        return s3_store.url(f"gens-{uuid.uuid4().hex[:10]}")
    return str(tmp_path / "store" / "gens")


def generations(store: Storage, base: str) -> list[str]:
    return sorted(name for name, is_dir in store.listdir(base) if is_dir and name.startswith("gen-"))


def test_nothing_published_fetches_none_and_empties_the_target(store, base, tmp_path):
    out = tmp_path / "out"
    make_dir(out, {"stale.txt": b"x"})
    assert store.fetch(base, str(out)) is None
    assert list(out.iterdir()) == []


def test_each_publish_replaces_the_last_and_keeps_one_before_it(store, base, tmp_path):
    names = []
    for epoch in (1, 2, 3):
        local = make_dir(
            tmp_path / f"backup{epoch}", {"ckpt.index": b"i" * epoch, "d/ckpt.data": bytes([epoch]) * 1000}
        )
        names.append(store.publish(local, base, epoch=epoch, loss=1.0 / epoch))
    assert [name.split("-")[1] for name in names] == ["000000", "000001", "000002"]
    assert generations(store, base) == sorted(names[1:])  # the first is gone, the one before the last stays
    out = tmp_path / "out"
    assert store.fetch(base, str(out)) == {"epoch": 3, "loss": 1.0 / 3}
    assert (out / "ckpt.index").read_bytes() == b"iii" and (out / "d" / "ckpt.data").read_bytes() == b"\x03" * 1000
    pointer = json.loads(store.read_text(f"{base}/{POINTER}"))
    assert (pointer["generation"], pointer["files"]) == (names[-1], {"ckpt.index": 3, "d/ckpt.data": 1000})


def test_a_generation_left_half_written_is_never_fetched(store, base, tmp_path):
    """A writer that died mid-publish left files in a newer generation directory but never pointed at it."""
    store.publish(make_dir(tmp_path / "good", {"w.bin": b"good"}), base, epoch=5)
    store.write_bytes(f"{base}/gen-000001-deadbeef/w.bin", b"half")
    store.write_bytes(f"{base}/gen-000099-deadbeef/w.bin", b"half")
    out = tmp_path / "out"
    assert store.fetch(base, str(out)) == {"epoch": 5}
    assert (out / "w.bin").read_bytes() == b"good"
    # the next publish numbers after the pointer's and clears the leftovers
    name = store.publish(make_dir(tmp_path / "next", {"w.bin": b"next"}), base, epoch=6)
    assert name.startswith("gen-000001-") and "gen-000001-deadbeef" not in generations(store, base)
    assert store.fetch(base, str(out)) == {"epoch": 6} and (out / "w.bin").read_bytes() == b"next"


def test_a_file_changed_after_publishing_fails_the_fetch_naming_it(store, base, tmp_path):
    name = store.publish(make_dir(tmp_path / "b", {"w.bin": b"12345678"}), base)
    store.write_bytes(f"{base}/{name}/w.bin", b"123")
    with pytest.raises(StorageError, match=r"holds 3 bytes, its generation says 8") as caught:
        store.fetch(base, str(tmp_path / "out"))
    assert f"{name}/w.bin" in str(caught.value)


def test_a_file_missing_from_a_published_generation_fails_the_fetch(store, base, tmp_path):
    name = store.publish(make_dir(tmp_path / "b", {"w.bin": b"1", "x.bin": b"2"}), base)
    store.delete(f"{base}/{name}/x.bin")
    with pytest.raises((StorageError, FileNotFoundError), match="x.bin"):
        store.fetch(base, str(tmp_path / "out"))


def test_a_pointer_sparkdl_did_not_write_is_refused(store, base, tmp_path):
    store.write_text(f"{base}/{POINTER}", json.dumps({"something": "else"}))
    with pytest.raises(StorageError, match="not a pointer sparkdl wrote"):
        store.fetch(base, str(tmp_path / "out"))


def test_remove_generations_leaves_nothing_to_fetch(store, base, tmp_path):
    for epoch in (1, 2):
        store.publish(make_dir(tmp_path / f"b{epoch}", {"w.bin": b"w"}), base, epoch=epoch)
    store.remove_generations(base)
    assert generations(store, base) == [] and not store.exists(f"{base}/{POINTER}")
    assert store.fetch(base, str(tmp_path / "out")) is None
    store.publish(make_dir(tmp_path / "again", {"w.bin": b"again"}), base, epoch=1)
    assert store.fetch(base, str(tmp_path / "out")) == {"epoch": 1}


# -- errors --


def test_a_refused_key_is_a_storage_error_without_the_secret(prefix, s3_store, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-" + "x" * 20)
    with pytest.raises(StorageError) as caught:
        Storage(attempts=1).write_text(f"{prefix}/x.txt", "x")
    message = str(caught.value)
    assert prefix in message and "refused the credentials" in message
    assert "wrong-secret-" not in message and s3_store.secret_key not in message


def test_an_upload_killed_half_way_leaves_the_last_generation_and_no_partial_object(store, prefix, tmp_path, s3_store):
    """A process SIGKILLed inside ``publish`` (the node's upload path), with part of a file sent: the
    store never completes the upload, readers still fetch the generation before, and no object of the
    killed generation's file is listed. The file is a FIFO, so the kill lands mid-upload for certain."""
    import signal
    import subprocess
    import sys
    import threading
    import time

    first = make_dir(tmp_path / "first", {"weights.h5": b"w" * 1000})
    store.publish(first, prefix, epoch=1)
    second = tmp_path / "second"
    second.mkdir()
    os.mkfifo(second / "weights.h5")
    script = "import sys; from sparkdl.storage import Storage; Storage().publish(sys.argv[1], sys.argv[2], epoch=2)"
    child = subprocess.Popen([sys.executable, "-c", script, str(second), prefix], stderr=subprocess.DEVNULL)

    killed = threading.Event()

    def feed():  # 24 MiB: more than pyarrow's first part, so a multipart upload is under way
        try:
            with open(second / "weights.h5", "wb") as pipe:
                pipe.write(b"x" * (24 * 1024 * 1024))
                killed.wait(60)  # the pipe stays open until the kill: the upload cannot finish before it
        except OSError:  # the reader died: a broken pipe
            pass

    threading.Thread(target=feed, daemon=True).start()
    key = prefix.split("/", 3)[3]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        uploads = s3_store.client.list_multipart_uploads(Bucket=s3_store.bucket, Prefix=key).get("Uploads", [])
        if uploads:
            break
        time.sleep(0.02)
    assert uploads, "the child never started its upload"
    child.send_signal(signal.SIGKILL)
    child.wait(30)
    killed.set()

    assert not any(name.endswith("weights.h5") and "gen-000001" in name for name in keys_under(s3_store, prefix))
    restored = tmp_path / "restored"
    assert store.fetch(prefix, str(restored)) == {"epoch": 1}
    assert (restored / "weights.h5").read_bytes() == b"w" * 1000


# -- Azure (Azurite, reached through AZURE_STORAGE_CONNECTION_STRING alone) --


@pytest.fixture
def azure_prefix(azure_store):
    """``abfss://<container>@devstoreaccount1.dfs.core.windows.net/<unique>``: this test's own place."""
    return azure_store.url(f"t-{uuid.uuid4().hex[:10]}")


def test_azure_write_read_exists_delete(store, azure_prefix, azure_store):
    path = f"{azure_prefix}/a/b.bin"
    assert not store.exists(path) and store.read_text(path) is None
    store.write_bytes(path, b"\x00first")
    store.write_text(path, "second é")  # replaces
    assert store.read_bytes(path) == "second é".encode()
    assert store.read_text(path) == "second é"
    assert store.exists(path) and store.is_complete(path) and not store.is_dir(path)
    assert store.exists(f"{azure_prefix}/a") and store.is_dir(f"{azure_prefix}/a")
    assert azure_store.files_under(azure_prefix) == ["a/b.bin"]
    # wasbs://, the Blob endpoint's spelling, names the same blob
    wasbs = path.replace("abfss://", "wasbs://", 1).replace(".dfs.core.", ".blob.core.", 1)
    assert store.read_text(wasbs) == "second é"
    store.delete(path)
    assert not store.exists(path) and store.read_text(path) is None
    assert azure_store.files_under(azure_prefix) == []
    store.delete(path)  # nothing there: nothing to do


def test_azure_a_directory_upload_writes_saved_model_pb_last(store, azure_prefix, tmp_path, azure_store, monkeypatch):
    """As on S3: when saved_model.pb starts to go up, every other file is in the container and the
    directory does not yet count as complete; a plain directory gets the marker last."""
    local = make_dir(tmp_path / "model", SAVED_MODEL)
    target = f"{azure_prefix}/model"
    order, complete_before_commit = [], []
    real_put = Storage._put_file

    def watched_put(self, source, location):
        if location.name == "saved_model.pb":
            complete_before_commit.append(self.is_complete(target))
            assert azure_store.files_under(target) == sorted(set(SAVED_MODEL) - {"saved_model.pb"})
        order.append(location.key.split("/model/", 1)[1])
        real_put(self, source, location)

    monkeypatch.setattr(Storage, "_put_file", watched_put)
    store.upload(local, target)
    assert order[-1] == "saved_model.pb" and sorted(order) == sorted(SAVED_MODEL)
    assert complete_before_commit == [False]
    assert store.is_complete(target) and azure_store.files_under(target) == sorted(SAVED_MODEL)
    back = tmp_path / "back"
    store.download(target, str(back))
    assert {str(p.relative_to(back)): p.read_bytes() for p in back.rglob("*") if p.is_file()} == SAVED_MODEL

    monkeypatch.undo()
    plain = f"{azure_prefix}/out"
    store.upload(make_dir(tmp_path / "out", {"a.json": b"{}", "sub/b.bin": b"12345"}), plain)
    assert azure_store.files_under(plain) == sorted(["a.json", "sub/b.bin", COMPLETE_MARKER])
    assert store.is_complete(plain)
    store.delete(f"{plain}/{COMPLETE_MARKER}")
    assert not store.is_complete(plain) and not store.is_complete(f"{azure_prefix}/missing")


def test_azure_generations_replace_each_other_and_a_half_written_one_is_never_fetched(store, azure_prefix, tmp_path):
    base = f"{azure_prefix}/gens"
    assert store.fetch(base, str(tmp_path / "out")) is None
    names = []
    for epoch in (1, 2, 3):
        local = make_dir(tmp_path / f"b{epoch}", {"ckpt.index": b"i" * epoch, "d/ckpt.data": bytes([epoch]) * 1000})
        names.append(store.publish(local, base, epoch=epoch))
    assert [name.split("-")[1] for name in names] == ["000000", "000001", "000002"]
    assert generations(store, base) == sorted(names[1:])  # the first is gone, the one before the last stays
    store.write_bytes(f"{base}/gen-000099-deadbeef/ckpt.index", b"half")  # a writer died mid-publish
    out = tmp_path / "out"
    assert store.fetch(base, str(out)) == {"epoch": 3}
    assert (out / "ckpt.index").read_bytes() == b"iii" and (out / "d" / "ckpt.data").read_bytes() == b"\x03" * 1000
    pointer = json.loads(store.read_text(f"{base}/{POINTER}"))
    assert (pointer["generation"], pointer["files"]) == (names[-1], {"ckpt.index": 3, "d/ckpt.data": 1000})
    store.write_bytes(f"{base}/{names[-1]}/ckpt.index", b"changed!")
    with pytest.raises(StorageError, match=r"holds 8 bytes, its generation says 3"):
        store.fetch(base, str(out))
    store.remove_generations(base)
    assert generations(store, base) == [] and store.fetch(base, str(out)) is None


def test_azure_a_refused_key_is_a_storage_error_without_the_key(azure_prefix, azure_store, monkeypatch):
    wrong = "d3Jvbmcta2V5LW9mLXRoZS1yaWdodC1sZW5ndGgtZm9yLWFuLWF6dXJlLWtleSEhIQ=="
    connection = azure_store.env["AZURE_STORAGE_CONNECTION_STRING"].replace(azure_store.account_key, wrong)
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", connection)
    with pytest.raises(StorageError) as caught:
        Storage(attempts=1).write_text(f"{azure_prefix}/x.txt", "x")
    message = str(caught.value)
    assert azure_prefix in message and "AZURE_STORAGE_CONNECTION_STRING" in message
    assert wrong not in message and azure_store.account_key not in message


# -- GCS (gcp-storage-emulator, reached through STORAGE_EMULATOR_HOST alone) --


@pytest.fixture
def gcs_prefix(gcs_store):
    """``gs://<bucket>/<unique>``: this test's own place in the session's bucket."""
    return gcs_store.url(f"t-{uuid.uuid4().hex[:10]}")


def test_gcs_write_read_exists_delete(store, gcs_prefix, gcs_store):
    path = f"{gcs_prefix}/a/b.bin"
    assert not store.exists(path) and store.read_text(path) is None
    store.write_bytes(path, b"\x00first")
    store.write_text(path, "second é")  # replaces
    assert store.read_bytes(path) == "second é".encode()
    assert store.read_text(path) == "second é"
    assert store.exists(path) and store.is_complete(path) and not store.is_dir(path)
    assert store.exists(f"{gcs_prefix}/a") and store.is_dir(f"{gcs_prefix}/a")
    assert gcs_store.files_under(gcs_prefix) == ["a/b.bin"]
    store.delete(path)
    assert not store.exists(path) and store.read_text(path) is None
    assert gcs_store.files_under(gcs_prefix) == []
    store.delete(path)  # nothing there: nothing to do


def test_gcs_listdir_names_the_directories_no_marker_stands_for(store, gcs_prefix):
    """pyarrow's one-level GCS listing drops prefixes without a marker object (every directory sparkdl
    uploads has none): listdir still names them, as model_versions and publish need."""
    for key in ("1/saved_model.pb", "2/variables/v.data", "top.bin"):
        store.write_bytes(f"{gcs_prefix}/{key}", b"x")
    assert sorted(store.listdir(gcs_prefix)) == [("1", True), ("2", True), ("top.bin", False)]
    assert store.listdir(f"{gcs_prefix}/2/") == [("variables", True)]
    assert store.listdir(f"{gcs_prefix}/2/variables") == [("v.data", False)]
    assert store.listdir(f"{gcs_prefix}/missing") == []
    assert sorted(store.walk(gcs_prefix))[0][:2] == ("1/saved_model.pb", 1)


def test_gcs_a_directory_upload_writes_saved_model_pb_last(store, gcs_prefix, tmp_path, gcs_store, monkeypatch):
    """As on S3: when saved_model.pb starts to go up, every other file is in the bucket and the
    directory does not yet count as complete; a plain directory gets the marker last."""
    local = make_dir(tmp_path / "model", SAVED_MODEL)
    target = f"{gcs_prefix}/model"
    order, complete_before_commit = [], []
    real_put = Storage._put_file

    def watched_put(self, source, location):
        if location.name == "saved_model.pb":
            complete_before_commit.append(self.is_complete(target))
            assert gcs_store.files_under(target) == sorted(set(SAVED_MODEL) - {"saved_model.pb"})
        order.append(location.key.split("/model/", 1)[1])
        real_put(self, source, location)

    monkeypatch.setattr(Storage, "_put_file", watched_put)
    store.upload(local, target)
    assert order[-1] == "saved_model.pb" and sorted(order) == sorted(SAVED_MODEL)
    assert complete_before_commit == [False]
    assert store.is_complete(target) and gcs_store.files_under(target) == sorted(SAVED_MODEL)
    back = tmp_path / "back"
    store.download(target, str(back))
    assert {str(p.relative_to(back)): p.read_bytes() for p in back.rglob("*") if p.is_file()} == SAVED_MODEL

    monkeypatch.undo()
    store.upload(make_dir(tmp_path / "model2", {"saved_model.pb": b"new"}), target)  # replaces the whole directory
    assert gcs_store.files_under(target) == ["saved_model.pb"]
    plain = f"{gcs_prefix}/out"
    store.upload(make_dir(tmp_path / "out", {"a.json": b"{}", "sub/b.bin": b"12345"}), plain)
    assert gcs_store.files_under(plain) == sorted(["a.json", "sub/b.bin", COMPLETE_MARKER])
    assert store.is_complete(plain)
    store.delete(f"{plain}/{COMPLETE_MARKER}")
    assert not store.is_complete(plain) and not store.is_complete(f"{gcs_prefix}/missing")


def test_gcs_generations_replace_each_other_and_a_half_written_one_is_never_fetched(store, gcs_prefix, tmp_path):
    base = f"{gcs_prefix}/gens"
    assert store.fetch(base, str(tmp_path / "out")) is None
    names = []
    for epoch in (1, 2, 3):
        local = make_dir(tmp_path / f"b{epoch}", {"ckpt.index": b"i" * epoch, "d/ckpt.data": bytes([epoch]) * 1000})
        names.append(store.publish(local, base, epoch=epoch))
    assert [name.split("-")[1] for name in names] == ["000000", "000001", "000002"]
    assert generations(store, base) == sorted(names[1:])  # the first is gone, the one before the last stays
    store.write_bytes(f"{base}/gen-000099-deadbeef/ckpt.index", b"half")  # a writer died mid-publish
    out = tmp_path / "out"
    assert store.fetch(base, str(out)) == {"epoch": 3}
    assert (out / "ckpt.index").read_bytes() == b"iii" and (out / "d" / "ckpt.data").read_bytes() == b"\x03" * 1000
    pointer = json.loads(store.read_text(f"{base}/{POINTER}"))
    assert (pointer["generation"], pointer["files"]) == (names[-1], {"ckpt.index": 3, "d/ckpt.data": 1000})
    store.write_bytes(f"{base}/{names[-1]}/ckpt.index", b"changed!")
    with pytest.raises(StorageError, match=r"holds 8 bytes, its generation says 3"):
        store.fetch(base, str(out))
    store.remove_generations(base)
    assert generations(store, base) == [] and store.fetch(base, str(out)) is None
    assert store.listdir(base) == []  # the leftover gen-000099 went too
