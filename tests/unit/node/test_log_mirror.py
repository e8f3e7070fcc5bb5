"""log_mirror.py: a store log_dir's files and a node's own logs copied while the node runs and at its end."""

from __future__ import annotations

from sparkdl.node.log_mirror import LogMirror
from sparkdl.storage import StoreSettings


def test_summaries_and_the_nodes_own_logs_are_copied_and_a_grown_file_again(tmp_path):
    logs, node, store = tmp_path / "tensorboard", tmp_path / "node0-chief0", tmp_path / "store"
    (logs / "train").mkdir(parents=True)
    (node / "feed-cache").mkdir(parents=True)
    (logs / "train" / "events.out.tfevents.1").write_bytes(b"a")
    (node / "node.log").write_text("started\n")
    (node / "feed-cache" / "part-0").write_bytes(b"cache")  # a subdirectory of the node's: not a log
    kept = store / "sparkdl-nodes" / "c1" / "node0-chief0"
    mirror = LogMirror(str(logs), str(store), StoreSettings(), (str(node), str(kept)), interval_s=3600)
    assert mirror.copy_once() == 2
    assert mirror.copy_once() == 0, "nothing changed: nothing copied again"
    (logs / "train" / "events.out.tfevents.1").write_bytes(b"ab")
    (node / "node.log").write_text("started\nended\n")
    mirror.start()
    mirror.stop()  # the thread waits an hour between rounds: stop copies what changed at once
    assert (store / "train" / "events.out.tfevents.1").read_bytes() == b"ab"
    assert (kept / "node.log").read_text() == "started\nended\n"
    assert not (kept / "feed-cache").exists()


def test_a_store_that_fails_is_logged_and_never_raised(tmp_path, caplog):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "events").write_bytes(b"x")
    mirror = LogMirror(str(tmp_path / "logs"), "swift://container/logs", StoreSettings(), interval_s=3600)
    assert mirror.copy_once() == 0
    assert "cannot copy TensorBoard logs to swift://container/logs" in caplog.text
