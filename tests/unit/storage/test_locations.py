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


# -- parent and child rebuild the path from its parts (the preflight probe goes beside the path) --


@pytest.mark.parametrize(
    "root",
    ["s3://bucket", "s3a://bucket/", "S3A://bucket", "gs://bucket", "abfss://c@acct.dfs.core.windows.net",
     "wasbs://c@acct.blob.core.windows.net/", "hdfs://nn:8020/", "hdfs:///", "viewfs://cluster/"],
)  # fmt: skip
def test_a_bucket_roots_parent_is_itself_and_its_children_stay_in_the_store(root):
    location = parse(root)
    parent = location.parent
    assert parent == location.parent.parent
    assert (parent.store, parent.bucket, parent.account) == (location.store, location.bucket, location.account)
    probe = parent.child("_sparkdl_preflight_1")
    again = parse(probe.original)  # the spelling files.py hands back to parse
    assert not again.is_local and probe.original.lower().startswith(root.split(":")[0].lower() + "://")
    assert (again.store, again.bucket, again.account, again.key) == (
        probe.store,
        probe.bucket,
        probe.account,
        probe.key,
    )
    assert again.name == "_sparkdl_preflight_1"


@pytest.mark.parametrize(
    "path, parent, child",
    [("s3://bucket/m", "s3://bucket", "s3://bucket/x"),
     ("s3a://bucket/a/b/", "s3a://bucket/a", "s3a://bucket/a/x"),
     ("gs://bucket/m", "gs://bucket", "gs://bucket/x"),
     ("abfss://c@acct.dfs.core.windows.net/m", "abfss://c@acct.dfs.core.windows.net",
      "abfss://c@acct.dfs.core.windows.net/x"),
     ("hdfs://nn:8020/m", "hdfs://nn:8020/", "hdfs://nn:8020/x"),
     ("hdfs:///u/m", "hdfs:///u", "hdfs:///u/x"),
     ("hdfs:/u/m", "hdfs:///u", "hdfs:///u/x"),
     ("viewfs://cluster/u/m", "viewfs://cluster/u", "viewfs://cluster/u/x"),
     ("file:///tmp/m", "file:///tmp", "file:///tmp/x"),
     ("/tmp/m", "/tmp", "/tmp/x"),
     ("dbfs:/tmp/m", "dbfs:/tmp", "dbfs:/tmp/x"),
     ("dbfs:/m", "dbfs:/", "dbfs:/x")],
)  # fmt: skip
def test_parent_and_child_are_spelled_from_the_parsed_path(path, parent, child):
    location = parse(path)
    assert location.parent.original == parent
    assert location.parent.child("x").original == child
    reparsed = parse(location.parent.child("x").original)
    assert (reparsed.store, reparsed.bucket, reparsed.key) == (location.store, location.bucket, parse(child).key)


@pytest.mark.parametrize("root", ["/", "file:///", "dbfs:/"])
def test_a_local_roots_parent_is_itself(root):
    assert parse(root).parent == parse(root)


# -- scheme:/path with one slash --


@pytest.mark.parametrize("scheme", ["hdfs", "viewfs", "HDFS"])
def test_hdfs_with_one_slash_is_the_default_name_node(scheme):
    location = parse(f"{scheme}:/user/x/m")
    assert (location.store, location.bucket, location.key) == ("hdfs", "default", "/user/x/m")
    assert location.uri == f"{scheme.lower()}:///user/x/m"
    assert is_remote(f"{scheme}:/user/x/m")


@pytest.mark.parametrize("path", ["s3:/bucket/k", "s3a:/bucket", "gs:/b/k", "abfss:/c/k"])
def test_an_object_store_path_with_one_slash_is_refused_with_the_form_to_write(path):
    scheme = path.split(":")[0]
    with pytest.raises(StorageError, match="two slashes") as caught:
        parse(path)
    assert f"{scheme}://<" in str(caught.value) and path in str(caught.value)
    assert is_remote(path)  # so callers parse it, and see this message


@pytest.mark.parametrize("path", ["foo:/x", "foo:x", "weird+fs:/a"])
def test_an_unknown_scheme_without_two_slashes_is_refused_too(path):
    with pytest.raises(StorageError, match="cannot read or write"):
        parse(path)
    assert is_remote(path)


@pytest.mark.parametrize(
    "path, remote",
    [("hdfs:/x", True), ("viewfs:/x", True), ("hdfs:///x", True), ("dbfs:/x", False), ("dbfs:///x", False),
     ("DBFS:/x", False), ("file:/x", False)],
)  # fmt: skip
def test_is_remote_agrees_with_parse(path, remote):
    assert is_remote(path) is remote
    assert parse(path).is_local is (not remote)


@pytest.mark.parametrize(
    "path, default_fs",
    [("dbfs:/tmp/m", "dbfs:/"), ("hdfs:/u/m", "hdfs://nn"), ("viewfs:/u/m", "viewfs://c"), ("file:/tmp/m", "hdfs://nn"),
     ("s3a://b/k", "dbfs:/")],
)  # fmt: skip
def test_qualify_takes_any_scheme_path_as_qualified(path, default_fs):
    assert qualify(path, default_fs) == path


@pytest.mark.parametrize("default_fs", ["dbfs:/", "dbfs:", "dbfs:///"])
def test_qualify_on_dbfs_is_under_dbfs_root(default_fs):
    assert qualify("/tmp/m", default_fs) == "dbfs:/tmp/m"
    assert qualify("tmp/m", default_fs) == "dbfs:/tmp/m"  # DBFS's working directory is its root
    assert parse(qualify("tmp/m", default_fs)).key == "/dbfs/tmp/m"


# -- credentials in the path --


@pytest.mark.parametrize(
    "path",
    ["s3a://AKIAKEY:sEcReT-1234@bucket/k", "s3://AKIAKEY:sEcReT/1234@bucket/k", "s3n://sEcReT-1234@bucket",
     "gs://user:sEcReT-1234@bucket/k", "hdfs://user:sEcReT-1234@nn:8020/k", "hdfs://user:sEcReT/1234@nn/k"],
)  # fmt: skip
def test_credentials_in_the_path_are_refused_without_echoing_them(path):
    with pytest.raises(StorageError, match="credentials in the path are not supported") as caught:
        parse(path)
    message = str(caught.value)
    assert "sEcReT" not in message and "AKIAKEY" not in message and "1234" not in message
    if path.startswith("s3"):
        assert "fs.s3a." in message


@pytest.mark.parametrize("path", ["hdfs://nn:8020/k", "hdfs://[::1]:8020/k", "hdfs://nn/k"])
def test_a_name_node_with_a_port_holds_no_credentials(path):
    assert parse(path).store == "hdfs"
