"""The driver's TensorBoard: which log dirs it takes (no process here; the running TensorBoard is
``tests/cluster/examples/test_tensorboard_example.py``'s)."""

from __future__ import annotations

import sys

import pytest

from sparkdl.driver.tensorboard import DriverTensorBoard, board_log_dir

pytestmark = pytest.mark.timeout(30)


def test_without_a_log_dir_it_says_where_to_give_one():
    with pytest.raises(ValueError, match=r"TFCluster.run\(log_dir=...\)"):
        board_log_dir(None)


def test_a_relative_log_dir_is_refused_since_each_process_would_resolve_it_elsewhere():
    with pytest.raises(ValueError, match="relative"):
        board_log_dir("logs")


def test_a_local_log_dir_is_created_and_a_file_uri_becomes_its_path(tmp_path):
    assert board_log_dir(str(tmp_path / "a" / "b")) == str(tmp_path / "a" / "b")
    assert (tmp_path / "a" / "b").is_dir()
    assert board_log_dir(f"file://{tmp_path}/c") == f"{tmp_path}/c"


def test_store_urls_are_handed_on_in_the_spelling_tensorboard_reads():
    assert board_log_dir("gs://bucket/runs/") == "gs://bucket/runs"
    assert board_log_dir("s3a://bucket/runs") == "s3://bucket/runs"  # through tensorflow-io
    assert board_log_dir("hdfs://namenode/runs") == "hdfs://namenode/runs"


def test_a_store_tensorboard_cannot_read_is_refused():
    with pytest.raises(ValueError, match="TensorBoard cannot read"):
        board_log_dir("abfss://container@account.dfs.core.windows.net/runs")


def test_without_tensorboard_installed_it_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # find_spec then finds none
    with pytest.raises(ImportError, match="pip install tensorboard"):
        DriverTensorBoard.start(str(tmp_path))
