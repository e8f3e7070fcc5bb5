"""hdfs_path: TensorFlowOnSpark's rules for qualifying user paths."""

import getpass
import logging

import pytest

from sparkdl.common.paths import hdfs_path, normalize_default_fs

pytestmark = pytest.mark.timeout(60)


WORKDIR = "/work/dir"


@pytest.mark.parametrize(
    "path",
    [
        "hdfs://other:9000/data",
        "s3a://bucket/key",
        "gs://bucket/obj",
        "file:///tmp/x",
        "viewfs://cluster/a",
        "abfs://c@acct.dfs.core.windows.net/p",
    ],
)
@pytest.mark.parametrize("default_fs", ["hdfs://nn:8020", "file:///"])
def test_qualified_paths_pass_through(default_fs, path):
    assert hdfs_path(default_fs, WORKDIR, path) == path


@pytest.mark.parametrize(
    "default_fs, path, expected",
    [
        ("hdfs://nn:8020", "/abs", "hdfs://nn:8020/abs"),
        ("hdfs://nn:8020/", "/abs", "hdfs://nn:8020/abs"),
        ("file:///", "/abs/x", "file:///abs/x"),
        ("file://", "/abs/x", "file:///abs/x"),
        ("viewfs://cluster", "/a/b", "viewfs://cluster/a/b"),
    ],
)
def test_absolute_paths_get_the_default_fs(default_fs, path, expected):
    assert hdfs_path(default_fs, WORKDIR, path) == expected


@pytest.mark.parametrize("default_fs", ["hdfs://nn:8020", "hdfs://nn:8020/"])
def test_relative_path_on_hdfs_goes_under_user_home(default_fs):
    assert hdfs_path(default_fs, WORKDIR, "rel/model") == f"hdfs://nn:8020/user/{getpass.getuser()}/rel/model"


def test_relative_path_on_viewfs_goes_under_user_home():
    assert hdfs_path("viewfs://c", WORKDIR, "rel") == f"viewfs://c/user/{getpass.getuser()}/rel"


@pytest.mark.parametrize("default_fs", ["file://", "file:///", None])
def test_relative_path_on_local_fs_goes_under_working_dir(default_fs):
    assert hdfs_path(default_fs, WORKDIR, "rel") == "file:///work/dir/rel"


def test_unknown_scheme_with_relative_path_warns(caplog):
    with caplog.at_level(logging.WARNING, logger="sparkdl.common.paths"):
        assert hdfs_path("weird://store", WORKDIR, "rel") == "weird://store/rel"
    assert any(
        r.levelno == logging.WARNING and "weird://store" in r.getMessage() and "rel" in r.getMessage()
        for r in caplog.records
    )


def test_known_paths_do_not_warn(caplog):
    with caplog.at_level(logging.WARNING, logger="sparkdl.common.paths"):
        hdfs_path("hdfs://nn:8020", WORKDIR, "rel")
        hdfs_path("weird://store", WORKDIR, "/abs")
    assert not caplog.records


@pytest.mark.parametrize(
    "value, expected",
    [
        ("hdfs://nn:8020/", "hdfs://nn:8020"),
        ("hdfs://nn:8020", "hdfs://nn:8020"),
        ("file:///", "file://"),
        ("file://", "file://"),
        (None, "file://"),
        ("", "file://"),
    ],
)
def test_normalize_default_fs(value, expected):
    assert normalize_default_fs(value) == expected


@pytest.mark.parametrize("path", ["dbfs:/x", "dbfs:/mnt/models/m", "hdfs:/user/me/m", "viewfs:/a/b", "file:/tmp/x"])
@pytest.mark.parametrize("default_fs", ["hdfs://nn:8020", "file:///", "dbfs:/"])
def test_one_slash_hadoop_spellings_pass_through(default_fs, path):
    assert hdfs_path(default_fs, WORKDIR, path) == path
