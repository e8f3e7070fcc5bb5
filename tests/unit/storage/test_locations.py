"""locations.py: every path spelling a Spark user writes, mapped to one store, bucket and key (pure)."""

import getpass
import os

import pytest

from sparkdl.common.errors import StorageError
from sparkdl.storage.locations import is_remote, parse, qualify

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("scheme", ["s3", "s3a", "s3n", "S3A"])
def test_every_s3_spelling_names_one_bucket_and_key(scheme):
    location = parse(f"{scheme}://models/runs/7/model.keras")
    assert (location.store, location.bucket, location.key) == ("s3", "models", "runs/7/model.keras")
    assert location.uri == "s3://models/runs/7/model.keras"
    assert location.original == f"{scheme}://models/runs/7/model.keras"
    assert not location.is_local


def test_a_bucket_alone_has_an_empty_key():
    for path in ("s3a://models", "s3a://models/"):
        location = parse(path)
        assert (location.bucket, location.key, location.uri) == ("models", "", "s3://models")


def test_object_keys_are_normalised():
    assert parse("s3://b/a//b/./c/../d/").key == "a/b/d"


def test_gcs():
    location = parse("gs://bucket/dir/file")
    assert (location.store, location.bucket, location.key, location.uri) == (
        "gcs",
        "bucket",
        "dir/file",
        "gs://bucket/dir/file",
    )


@pytest.mark.parametrize("scheme", ["abfs", "abfss"])
def test_abfs_names_its_container_and_account(scheme):
    location = parse(f"{scheme}://models@acct.dfs.core.windows.net/runs/m")
    assert location.store == "azure"
    assert (location.bucket, location.account, location.key) == ("models", "acct.dfs.core.windows.net", "runs/m")
    assert location.uri == f"{scheme}://models@acct.dfs.core.windows.net/runs/m"


@pytest.mark.parametrize("path", ["abfss://acct.dfs.core.windows.net/m", "abfss://@acct.dfs.core.windows.net/m"])
def test_abfs_without_a_container_is_refused_with_the_form_to_write(path):
    with pytest.raises(StorageError, match=r"<container>@<account>") as caught:
        parse(path)
    assert path in str(caught.value)


def test_hdfs_keeps_its_name_node_and_an_absolute_key():
    location = parse("hdfs://nn:8020/user/me/m")
    assert (location.store, location.bucket, location.key) == ("hdfs", "nn:8020", "/user/me/m")
    assert location.uri == "hdfs://nn:8020/user/me/m"
    assert parse("viewfs://cluster/a/b").store == "hdfs"


def test_hdfs_without_a_name_node_is_the_default_one():
    location = parse("hdfs:///user/me/m")
    assert (location.store, location.bucket, location.key) == ("hdfs", "default", "/user/me/m")


@pytest.mark.parametrize("path", ["file:/tmp/a/b", "file:///tmp/a/b", "/tmp/a/b", "/tmp/a/./x/../b"])
def test_local_spellings_are_one_absolute_path(path):
    location = parse(path)
    assert location.is_local and location.store == "local"
    assert (location.bucket, location.key, location.uri) == ("", "/tmp/a/b", "/tmp/a/b")


def test_a_relative_path_is_local_to_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    location = parse("models/m.keras")
    assert location.is_local and location.key == os.path.join(str(tmp_path), "models", "m.keras")
    assert parse(tmp_path / "x").key == str(tmp_path / "x")  # os.PathLike too


def test_an_unknown_scheme_is_refused_naming_the_schemes_that_work():
    with pytest.raises(StorageError) as caught:
        parse("foo://bucket/key")
    message = str(caught.value)
    assert "'foo://bucket/key'" in message and "foo://" in message
    for scheme in ("s3://", "s3a://", "gs://", "abfss://", "hdfs://", "file://"):
        assert scheme in message


@pytest.mark.parametrize("path", ["s3:///key", "s3a://", "gs:///k"])
def test_an_object_store_path_without_a_bucket_is_refused(path):
    with pytest.raises(StorageError, match="names no bucket") as caught:
        parse(path)
    assert path in str(caught.value)


@pytest.mark.parametrize("path", ["", None, 3])
def test_a_path_that_is_not_a_string_is_refused(path):
    with pytest.raises((StorageError, TypeError)):
        parse(path)


def test_child_parent_and_name_keep_the_users_spelling():
    location = parse("s3a://b/runs/7")
    child = location.child("gen-1", "model.keras")
    assert (child.key, child.original, child.name) == (
        "runs/7/gen-1/model.keras",
        "s3a://b/runs/7/gen-1/model.keras",
        "model.keras",
    )
    assert child.parent.key == "runs/7/gen-1" and child.parent.original == "s3a://b/runs/7/gen-1"
    assert parse("s3://b").child("k").key == "k"
    assert parse("/tmp/a").child("b").key == "/tmp/a/b"


def test_describe_names_the_path_and_the_store():
    assert parse("s3a://b/k").describe() == "'s3a://b/k' (S3)"
    assert parse("/tmp/x").describe() == "'/tmp/x' (local file system)"
    assert "HDFS" in parse("hdfs://nn/x").describe() and "GCS" in parse("gs://b/x").describe()


@pytest.mark.parametrize(
    "path, remote",
    [("s3a://b/k", True), ("gs://b/k", True), ("foo://b/k", True), ("/tmp/x", False), ("rel/x", False),
     ("file:///tmp/x", False), ("FILE:///tmp/x", False), ("file:/tmp/x", False)],
)  # fmt: skip
def test_is_remote(path, remote):
    assert is_remote(path) is remote


@pytest.mark.parametrize("path", ["s3a://b/k", "hdfs://nn:8020/x", "file:/tmp/x", "file:///tmp/x"])
@pytest.mark.parametrize("default_fs", ["file://", "hdfs://nn:8020", None])
def test_qualify_leaves_a_path_with_a_scheme_as_it_is(path, default_fs):
    assert qualify(path, default_fs) == path


@pytest.mark.parametrize("default_fs", ["file://", "file:///", "file:", "", None])
def test_qualify_on_a_local_default_fs_is_the_absolute_local_path(default_fs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert qualify("/data/m", default_fs) == "/data/m"
    assert qualify("m", default_fs) == os.path.join(str(tmp_path), "m")


@pytest.mark.parametrize("default_fs", ["hdfs://nn:8020", "hdfs://nn:8020/"])
def test_qualify_on_hdfs_puts_relative_paths_in_the_users_home(default_fs):
    assert qualify("/data/m", default_fs) == "hdfs://nn:8020/data/m"
    assert qualify("m", default_fs) == f"hdfs://nn:8020/user/{getpass.getuser()}/m"
