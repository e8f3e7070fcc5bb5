"""files.py: ``Storage`` against real store servers, each reached through its standard environment alone
as a user's would be (``s3_store``: moto, checking credentials; ``azure_store``: Azurite; ``gcs_store``:
gcp-storage-emulator; ``any_store``: each in turn) and on local paths: single files, directories
uploaded with their commit file last, and generations that readers only ever see whole. Each test works
under a prefix of its own in the session's bucket (or container)."""

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


@pytest.fixture
def any_prefix(any_store):
    """This test's own place in the session's bucket (or container) of each store in turn."""
    return any_store.url(f"t-{uuid.uuid4().hex[:10]}")


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


def test_write_read_exists_delete(store, any_prefix, any_store):
    path = f"{any_prefix}/a/b.bin"
    assert not store.exists(path) and store.read_text(path) is None
    store.write_bytes(path, b"\x00first")
    store.write_text(path, "second é")  # replaces
    assert store.read_bytes(path) == "second é".encode()
    assert store.read_text(path) == "second é"
    assert store.exists(path) and store.is_complete(path) and not store.is_dir(path)
    assert store.exists(f"{any_prefix}/a") and store.is_dir(f"{any_prefix}/a")
    assert any_store.files_under(any_prefix) == ["a/b.bin"]
    store.delete(path)
    assert not store.exists(path) and store.read_text(path) is None
    assert any_store.files_under(any_prefix) == []
    store.delete(path)  # nothing there: nothing to do


def test_every_s3_spelling_reaches_the_same_object(store, prefix, s3_store):
    store.write_text(f"{prefix}/x.txt", "one é")
    body = s3_store.client.get_object(Bucket=s3_store.bucket, Key=f"{prefix.split('/', 3)[3]}/x.txt")["Body"].read()
    assert body == "one é".encode()
    for scheme in ("s3a", "s3n"):
        assert store.read_text(prefix.replace("s3://", f"{scheme}://", 1) + "/x.txt") == "one é"


def test_wasbs_the_blob_endpoints_spelling_reaches_the_same_blob(store, azure_store):
    path = azure_store.url(f"t-{uuid.uuid4().hex[:10]}/a/b.bin")
    store.write_text(path, "second é")
    wasbs = path.replace("abfss://", "wasbs://", 1).replace(".dfs.core.", ".blob.core.", 1)
    assert store.read_text(wasbs) == "second é"


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
    assert s3_store.files_under(prefix) == ["a.txt"]


# -- a directory --


def test_a_directory_upload_writes_saved_model_pb_last(store, any_prefix, tmp_path, any_store, monkeypatch):
    """Every upload is watched: when saved_model.pb starts to go up, every other file is in the store
    and the directory does not yet count as complete."""
    local = make_dir(tmp_path / "model", SAVED_MODEL)
    target = f"{any_prefix}/model"
    order, complete_before_commit = [], []
    real_put = Storage._put_file

    def watched_put(self, source, location):
        if location.name == "saved_model.pb":
            complete_before_commit.append(self.is_complete(target))
            assert any_store.files_under(target) == sorted(set(SAVED_MODEL) - {"saved_model.pb"})
        order.append(location.key.split("/model/", 1)[1])
        real_put(self, source, location)

    monkeypatch.setattr(Storage, "_put_file", watched_put)
    store.upload(local, target)
    assert order[-1] == "saved_model.pb" and sorted(order) == sorted(SAVED_MODEL)
    assert complete_before_commit == [False]
    assert store.is_complete(target)
    assert any_store.files_under(target) == sorted(SAVED_MODEL)  # no marker: saved_model.pb is the commit


def test_a_directory_without_its_commit_file_is_not_complete(store, prefix, tmp_path, s3_store):
    store.upload(make_dir(tmp_path / "model", SAVED_MODEL), f"{prefix}/model")
    s3_store.client.delete_object(Bucket=s3_store.bucket, Key=f"{prefix.split('/', 3)[3]}/model/saved_model.pb")
    assert store.exists(f"{prefix}/model") and not store.is_complete(f"{prefix}/model")


def test_a_plain_directory_gets_the_marker_last(store, any_prefix, tmp_path, any_store):
    files = {"a.json": b"{}", "sub/b.bin": b"12345"}
    target = f"{any_prefix}/out"
    store.upload(make_dir(tmp_path / "out", files), target)
    assert any_store.files_under(target) == sorted([*files, COMPLETE_MARKER])
    assert store.is_complete(target)
    store.delete(f"{target}/{COMPLETE_MARKER}")
    assert not store.is_complete(target)
    assert not store.is_complete(f"{any_prefix}/missing")


def test_a_directory_upload_replaces_the_previous_one(store, any_prefix, tmp_path, any_store):
    target = f"{any_prefix}/model"
    store.upload(make_dir(tmp_path / "one", {"old.bin": b"1", "saved_model.pb": b"1"}), target)
    store.upload(make_dir(tmp_path / "two", {"new.bin": b"2", "saved_model.pb": b"2"}), target)
    assert any_store.files_under(target) == ["new.bin", "saved_model.pb"]
    store.upload(make_dir(tmp_path / "three", {"saved_model.pb": b"3"}), target)
    assert any_store.files_under(target) == ["saved_model.pb"]


def test_a_directory_comes_back_whole(store, any_prefix, tmp_path):
    store.upload(make_dir(tmp_path / "model", SAVED_MODEL), f"{any_prefix}/model")
    back = tmp_path / "back"
    store.download(f"{any_prefix}/model", str(back))
    assert {str(p.relative_to(back)): p.read_bytes() for p in back.rglob("*") if p.is_file()} == SAVED_MODEL


# -- generations, on every store and on a local path --


@pytest.fixture(
    params=["s3_store", "azure_store", "gcs_store", "local"], ids=lambda where: where.removesuffix("_store")
)
def base(request, tmp_path):
    """Where a generation directory lives: the test's own prefix on each store (the store fixture the
    parameter names: conftest starts its server for this test), or a local directory."""
    if request.param == "local":
        return str(tmp_path / "store" / "gens")
    return request.getfixturevalue(request.param).url(f"gens-{uuid.uuid4().hex[:10]}")


def generations(store: Storage, base: str) -> list[str]:
    return sorted(name for name, is_dir in store.listdir(base) if is_dir and name.startswith("gen-"))


def test_nothing_published_fetches_none_and_empties_the_target(store, base, tmp_path):
    out = tmp_path / "out"
    make_dir(out, {"stale.txt": b"x"})
    assert store.fetch(base, str(out)) is None
    assert list(out.iterdir()) == []


def test_each_publish_replaces_the_last_and_keeps_the_generations_before_it(store, base, tmp_path):
    names = []
    for epoch in (1, 2, 3):
        local = make_dir(
            tmp_path / f"backup{epoch}", {"ckpt.index": b"i" * epoch, "d/ckpt.data": bytes([epoch]) * 1000}
        )
        names.append(store.publish(local, base, epoch=epoch, loss=1.0 / epoch))
    assert [name.split("-")[1] for name in names] == ["000000", "000001", "000002"]
    assert generations(store, base) == sorted(names)  # the newest three stay (see the review fixes below)
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
    store.write_bytes(f"{base}/gen-000099-deadbeef/w.bin", b"half")  # a writer died mid-publish
    store.remove_generations(base)
    assert generations(store, base) == [] and not store.exists(f"{base}/{POINTER}")
    assert store.listdir(base) == []  # the leftover went too
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

    assert not any(name.endswith("weights.h5") and "gen-000001" in name for name in s3_store.files_under(prefix))
    restored = tmp_path / "restored"
    assert store.fetch(prefix, str(restored)) == {"epoch": 1}
    assert (restored / "weights.h5").read_bytes() == b"w" * 1000


# -- Azure (Azurite, reached through AZURE_STORAGE_CONNECTION_STRING alone) --


@pytest.fixture
def azure_prefix(azure_store):
    """``abfss://<container>@devstoreaccount1.dfs.core.windows.net/<unique>``: this test's own place."""
    return azure_store.url(f"t-{uuid.uuid4().hex[:10]}")


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


# -- review fixes --


def _review_dir(root, files: dict[str, bytes]) -> str:
    for relative, data in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return str(root)


class _ReaderFailingAfterOneChunk:
    """A local file whose second read fails with ``error``."""

    def __init__(self, handle, error):
        self.handle, self.error, self.reads = handle, error, 0

    def read(self, *args):
        self.reads += 1
        if self.reads > 1:
            raise self.error
        return self.handle.read(*args)

    def __getattr__(self, name):
        return getattr(self.handle, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.handle.close()


@pytest.mark.parametrize("error", [OSError("the local disk failed"), KeyboardInterrupt()], ids=["oserror", "interrupt"])
def test_review_an_upload_failing_mid_way_leaves_no_partial_object(
    store, prefix, s3_store, tmp_path, monkeypatch, error
):
    """pyarrow's stream completes the multipart upload when closed after an exception: the partial
    object must be removed (the previous one goes too: pyarrow cannot abort), and the error raised."""
    from sparkdl.storage import files

    local = tmp_path / "big.bin"
    local.write_bytes(os.urandom(12 * 1024 * 1024))
    target = f"{prefix}/big.bin"
    store.write_bytes(target, b"previous")
    monkeypatch.setattr(files, "_UPLOAD_BUFFER", 5 * 1024 * 1024)
    real_open = open

    def failing_open(path, *args, **kwargs):
        handle = real_open(path, *args, **kwargs)
        return _ReaderFailingAfterOneChunk(handle, error) if os.fspath(path) == str(local) else handle

    monkeypatch.setattr(files, "open", failing_open, raising=False)
    expected = StorageError if isinstance(error, OSError) else KeyboardInterrupt
    with pytest.raises(expected):
        store.upload(str(local), target)
    assert s3_store.files_under(prefix) == []
    assert not store.exists(target)


def test_review_a_local_file_is_written_beside_its_target_and_moved_into_place(store, tmp_path, monkeypatch):
    """Local paths (and HDFS, through the same code) are written to a ``.part`` beside the target and
    moved: the target shows the old bytes while the new ones are written, and a failure leaves it be."""
    from sparkdl.storage import files

    target = tmp_path / "out" / "w.bin"
    store.write_bytes(str(target), b"previous")
    local = tmp_path / "w.bin"
    local.write_bytes(b"x" * 3000)
    monkeypatch.setattr(files, "_UPLOAD_BUFFER", 1000)
    real_chunks = files._read_chunks
    seen = []

    def watched(source, size):
        for chunk in real_chunks(source, size):
            seen.append(target.read_bytes())
            yield chunk

    monkeypatch.setattr(files, "_read_chunks", watched)
    store.upload(str(local), str(target))
    assert seen == [b"previous"] * 3 and target.read_bytes() == b"x" * 3000

    def failing(source, size):
        yield source.read(1000)
        raise OSError("the local disk failed")

    monkeypatch.setattr(files, "_read_chunks", failing)
    (tmp_path / "w2.bin").write_bytes(b"y" * 3000)
    with pytest.raises(StorageError, match="w.bin"):
        store.upload(str(tmp_path / "w2.bin"), str(target))
    assert target.read_bytes() == b"x" * 3000 and os.listdir(target.parent) == ["w.bin"]


def test_review_a_directory_replace_keeps_the_old_files_until_the_new_ones_are_up(
    store, prefix, s3_store, tmp_path, monkeypatch
):
    """The old commit file goes first, the old files stay until the new ones are up, the old files the
    new directory lacks are gone before its commit file goes up last."""
    target = f"{prefix}/model"
    old = {"a.bin": b"a" * 10, "sub/old.bin": b"o", "saved_model.pb": b"A"}
    new = {"b.bin": b"b" * 20, "a.bin": b"A" * 5, "saved_model.pb": b"BB"}
    store.upload(_review_dir(tmp_path / "old", old), target)
    real_put = Storage._put_file
    watched = []

    def watched_put(self, source, location):
        watched.append((location.name, s3_store.files_under(target), self.is_complete(target)))
        real_put(self, source, location)

    monkeypatch.setattr(Storage, "_put_file", watched_put)
    store.upload(_review_dir(tmp_path / "new", new), target)
    first_name, first_listing, first_complete = watched[0]
    assert "sub/old.bin" in first_listing and "saved_model.pb" not in first_listing and not first_complete
    last_name, last_listing, last_complete = watched[-1]
    assert (last_name, last_listing, last_complete) == ("saved_model.pb", ["a.bin", "b.bin"], False)
    assert s3_store.files_under(target) == sorted(new) and store.is_complete(target)
    assert store.read_bytes(f"{target}/a.bin") == b"A" * 5


def test_review_a_directory_replaced_while_downloaded_is_downloaded_again(store, prefix, tmp_path, monkeypatch):
    target = f"{prefix}/model"
    first = {"a.bin": b"a" * 10, "saved_model.pb": b"A"}
    second = {"b.bin": b"b" * 20, "saved_model.pb": b"BB"}
    store.upload(_review_dir(tmp_path / "first", first), target)
    real_get = Storage._get_file
    replaced = []

    def get_while_replaced(self, location, local):
        if not replaced:
            replaced.append(True)
            self.upload(_review_dir(tmp_path / "second", second), target)
        real_get(self, location, local)

    monkeypatch.setattr(Storage, "_get_file", get_while_replaced)
    back = tmp_path / "back"
    store.download(target, str(back))
    assert {str(p.relative_to(back)): p.read_bytes() for p in back.rglob("*") if p.is_file()} == second


def test_review_a_directory_that_keeps_changing_is_refused(store, prefix, tmp_path, monkeypatch):
    target = f"{prefix}/model"
    store.upload(_review_dir(tmp_path / "m", {"a.bin": b"a", "saved_model.pb": b"A"}), target)
    real_walk = Storage.walk
    calls = []

    def changing_walk(self, path):
        calls.append(path)
        for relative, size, mtime in real_walk(self, path):
            yield relative, size, mtime + len(calls)  # as if rewritten between every two listings

    monkeypatch.setattr(Storage, "walk", changing_walk)
    with pytest.raises(StorageError, match="changed while it was read") as caught:
        store.download(target, str(tmp_path / "back"))
    assert target in str(caught.value) and len(calls) == 6


def test_review_publish_keeps_the_newest_three_generations(store, prefix, tmp_path):
    names = [
        store.publish(_review_dir(tmp_path / f"b{epoch}", {"w.bin": bytes([epoch])}), prefix, epoch=epoch)
        for epoch in range(4)
    ]
    listed = sorted(name for name, is_dir in store.listdir(prefix) if is_dir and name.startswith("gen-"))
    assert listed == sorted(names[1:])
    assert store.fetch(prefix, str(tmp_path / "out")) == {"epoch": 3}


def test_review_a_fetch_that_finds_a_file_removed_reads_the_pointer_again(store, prefix, tmp_path, monkeypatch):
    """A slow reader: the generation it read the pointer for is removed (and a new one published)
    while it downloads; it follows the pointer again and gets the new one, whole, with no leftovers."""
    first = store.publish(_review_dir(tmp_path / "one", {"w.bin": b"one", "x.bin": b"1"}), prefix, epoch=1)
    real_get = Storage._get_file
    moved = []

    def get_after_a_publish(self, location, local):
        if not moved:
            moved.append(True)
            self.publish(_review_dir(tmp_path / "two", {"w.bin": b"two!", "x.bin": b"22"}), prefix, epoch=2)
            self.delete(f"{prefix}/{first}")
        real_get(self, location, local)

    monkeypatch.setattr(Storage, "_get_file", get_after_a_publish)
    out = tmp_path / "fetched" / "out"
    assert store.fetch(prefix, str(out)) == {"epoch": 2}
    assert {p.name: p.read_bytes() for p in out.iterdir()} == {"w.bin": b"two!", "x.bin": b"22"}
    assert os.listdir(out.parent) == ["out"]  # no staged download left beside it


def test_review_a_fetch_that_keeps_failing_raises_a_storage_error_and_leaves_the_target(store, prefix, tmp_path):
    name = store.publish(_review_dir(tmp_path / "b", {"w.bin": b"1", "x.bin": b"2"}), prefix)
    store.delete(f"{prefix}/{name}/x.bin")
    out = tmp_path / "fetched" / "out"
    _review_dir(out, {"old.txt": b"old"})
    with pytest.raises(StorageError, match="x.bin"):
        store.fetch(prefix, str(out))
    assert os.listdir(out) == ["old.txt"] and os.listdir(out.parent) == ["out"]


@pytest.mark.parametrize(
    "generation, relative",
    [
        ("gen-000000-aaaaaaaa", "../../escape.bin"),
        ("gen-000000-aaaaaaaa", "/tmp/escape.bin"),
        ("gen-000000-aaaaaaaa", "a\\..\\..\\escape.bin"),
        ("gen-000000-aaaaaaaa", "a/./b.bin"),
        ("../gen-000000-aaaaaaaa", "w.bin"),
    ],
)
def test_review_a_pointer_leading_out_of_its_generation_is_refused(store, prefix, tmp_path, generation, relative):
    store.write_bytes(f"{prefix}/gen-000000-aaaaaaaa/w.bin", b"w")
    pointer = {"generation": generation, "number": 0, "files": {relative: 1}, "facts": {}}
    store.write_text(f"{prefix}/{POINTER}", json.dumps(pointer))
    out = tmp_path / "fetched" / "out"
    with pytest.raises(StorageError, match="not a pointer sparkdl wrote"):
        store.fetch(prefix, str(out))
    assert not out.exists()
    assert not (tmp_path / "escape.bin").exists()


def test_review_saved_model_pbtxt_commits_a_directory(store, prefix, s3_store, tmp_path, monkeypatch):
    written = f"{prefix}/written"
    store.write_bytes(f"{written}/variables/variables.index", b"i")
    assert not store.is_complete(written)
    store.write_bytes(f"{written}/saved_model.pbtxt", b"text")
    assert store.is_complete(written)

    files = {"saved_model.pbtxt": b"text", "variables/variables.index": b"i", "fingerprint.pb": b"f"}
    order = []
    real_put = Storage._put_file

    def watched_put(self, source, location):
        order.append(location.name)
        real_put(self, source, location)

    monkeypatch.setattr(Storage, "_put_file", watched_put)
    store.upload(_review_dir(tmp_path / "m", files), f"{prefix}/uploaded")
    assert order[-1] == "saved_model.pbtxt"
    assert s3_store.files_under(f"{prefix}/uploaded") == sorted(files)  # no marker: the pbtxt commits it
    assert store.is_complete(f"{prefix}/uploaded")
