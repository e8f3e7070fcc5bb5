"""``ctx`` without a cluster: TensorFlowOnSpark's names for the node number, ``export_path``
(the chief gets the real path, other nodes a scratch path in the cluster's private directory,
removed afterwards). (``start_cluster_server`` in a process of its own with TensorFlow:
tests/cluster/faces/test_node_context_cluster.py.)"""

from __future__ import annotations

import shutil
import threading
import uuid
from pathlib import Path

import pytest
from feed_servers import Worker, driver_send, make_server, secret, server  # noqa: F401 - fixtures

from sparkdl.node.context import NodeContext
from sparkdl.node.launch import user_root
from sparkdl.transport import protocol

pytestmark = pytest.mark.timeout(60)


SPEC = {"chief": ["h:1"], "worker": ["h:2"]}


def _ctx(job_name: str, cluster_id: str, node_number: int = 0, **extra) -> NodeContext:
    return NodeContext(
        node_number=node_number,
        job_name=job_name,
        task_index=0,
        cluster_spec=SPEC,
        default_fs="file://",
        working_dir="/tmp",
        host="h",
        port=1,
        cluster_id=cluster_id,
        **extra,
    )


def test_a_relaunched_chief_waits_at_its_first_fit_for_the_driver_s_word(server, secret):
    """``progress_callback()`` calls ``report_fit_begin`` as a fit begins: the chief of a relaunched
    InputMode.SPARK attempt waits there, once, until the driver says its attempt is fed the epochs this
    fit runs (an ``EpochGate`` keyed by that epoch); others only report."""
    reports, reported = [], threading.Event()
    writer = lambda event: (reports.append(event), reported.set())  # noqa: E731
    chief = _ctx("chief", "c", attempt=1, status_writer=writer, feed_server=server)
    waiting = Worker(chief.report_fit_begin, 0)
    assert reported.wait(10)
    assert reports == [protocol.Progress({"epoch": 0, "fit_begin": True, "awaits_word": True})]
    assert waiting.is_alive(), "the chief waits for the driver's word before it trains"
    driver_send(server, secret, protocol.EpochGate(epoch=0, go_on=True).wire())  # epoch 0's end: not this word
    assert waiting.is_alive(), "an elastic end-of-epoch word is not the fit-begin word"
    driver_send(server, secret, protocol.EpochGate(epoch=0, go_on=True, fit_begin=True).wire())
    waiting.outcome(10)
    chief.report_fit_begin(2)  # a later fit of the same attempt: no word to wait for
    assert reports[-1] == protocol.Progress({"epoch": 2, "fit_begin": True, "awaits_word": False})
    for ctx in (
        _ctx("worker", "c", 1, attempt=1, status_writer=writer, feed_server=server),
        _ctx("chief", "c", attempt=0, status_writer=writer, feed_server=server),  # a first attempt
        _ctx("chief", "c", attempt=1, status_writer=writer),  # InputMode.TENSORFLOW: nothing is fed
    ):
        ctx.report_fit_begin(0)
        assert reports[-1] == protocol.Progress({"epoch": 0, "fit_begin": True, "awaits_word": False})


def test_export_path_gives_the_chief_the_real_path_and_workers_a_removed_scratch_path(tmp_path):
    cluster_id = f"test{uuid.uuid4().hex[:8]}"
    try:
        with _ctx("chief", cluster_id).export_path(str(tmp_path / "model.keras")) as target:
            assert target == str(tmp_path / "model.keras")
        with _ctx("worker", cluster_id).export_path(str(tmp_path / "model.keras")) as target:
            scratch = Path(target)
            assert scratch.name == "model.keras", "the file name (and so the save format) is kept"
            assert scratch.parent.parent == user_root() / cluster_id
            scratch.write_text("a worker's copy")
        assert not scratch.parent.exists(), "nothing is left behind on a worker's executor"
        with pytest.raises(RuntimeError, match="save failed"):
            with _ctx("worker", cluster_id).export_path(str(tmp_path / "saved_model/")) as target:
                assert Path(target).name == "saved_model"
                raise RuntimeError("save failed")
        assert not Path(target).parent.exists(), "removed when the save fails too"
    finally:
        shutil.rmtree(user_root() / cluster_id, ignore_errors=True)


def test_tfos_names_for_the_node_number_are_kept():
    ctx = _ctx("worker", "c", node_number=3)
    assert ctx.node_number == ctx.executor_id == ctx.worker_num == 3


def test_the_learning_rate_follows_the_node_count_only_when_asked():
    ctx = _ctx("chief", "c1")  # SPEC: a chief and a worker, 2 workers under MWMS
    assert ctx.num_workers == 2
    assert ctx.scaled_learning_rate(0.1, base_workers=4) == pytest.approx(0.05)
    assert ctx.scaled_learning_rate(0.1, base_workers=8, rule="sqrt") == pytest.approx(0.05)
    assert ctx.scaled_learning_rate(0.1, base_workers=1, rule="none") == 0.1
    with pytest.raises(ValueError, match="rule must be"):
        ctx.scaled_learning_rate(0.1, 2, rule="cubic")
