"""``cluster.history``: the chief's per-epoch Keras logs at the driver (Keras ``History.history``'s
shape), and the per-epoch lines ``cluster.train``'s progress display ends with; without a cluster.
(A real MWMS fit's history: tests/cluster/tensorflow_mode/test_history_cluster.py.)"""

from __future__ import annotations

import io
import math
import threading

import pytest

from sparkdl.common.roles import NodeRole
from sparkdl.driver.coordinator import NodeState
from sparkdl.driver.history import TrainingHistory
from sparkdl.driver.progress import TrainProgress

pytestmark = pytest.mark.timeout(240)


def _report(epoch: int, **logs) -> dict:
    """The metrics of an epoch-end progress report, as the coordinator hands them on."""
    return {
        "epoch": epoch,
        "epoch_end": True,
        "step": 10 * (epoch + 1),
        "rows_read": 100,
        "rows_received": 120,
        **logs,
    }


def test_history_has_keras_shape_without_bookkeeping():
    history = TrainingHistory()
    history.record(_report(0, loss=0.9, accuracy=0.5, val_loss=1.0, val_accuracy=0.4))
    history.record(_report(1, loss=0.5, accuracy=0.8, val_loss=0.6, val_accuracy=0.7))
    assert history.as_dict() == {
        "loss": [0.9, 0.5],
        "accuracy": [0.5, 0.8],
        "val_loss": [1.0, 0.6],
        "val_accuracy": [0.4, 0.7],
    }
    assert TrainingHistory().as_dict() == {} and TrainingHistory().reports == 0


def test_a_re_run_epoch_replaces_the_earlier_report():
    history = TrainingHistory()
    for epoch, loss in ((0, 0.9), (1, 0.7), (1, 0.6), (2, 0.4)):  # a relaunch resumed at epoch 1
        history.record(_report(epoch, loss=loss))
    assert history.as_dict() == {"loss": [0.9, 0.6, 0.4]}


def test_a_relaunched_fit_replaces_every_epoch_from_where_it_begins():
    """A fit without a backup, relaunched, begins again at epoch 0 with fresh weights: the first
    attempt's epochs 0 and 1 are dropped, so no epoch of the history mixes two attempts."""
    history = TrainingHistory()
    for epoch, loss in ((0, 0.9), (1, 0.7)):
        history.record(_report(epoch, loss=loss))
    history.forget_from(0)
    assert history.as_dict() == {} and history.reports == 2, "the count of reports is kept"
    history.record(_report(0, loss=0.95))
    assert history.as_dict() == {"loss": [0.95]}
    history.forget_from(1)  # a fit resuming at epoch 1 keeps epoch 0
    assert history.as_dict() == {"loss": [0.95]}


def test_missing_metrics_and_epochs_are_nan_so_lists_stay_aligned():
    history = TrainingHistory()
    history.record(_report(0, loss=0.9))
    history.record(_report(1, loss=0.5, val_loss=0.6))
    history.record(_report(3, loss=0.2, val_loss=0.3))  # epoch 2 never reported
    result = history.as_dict()
    assert set(result) == {"loss", "val_loss"} and all(len(values) == 4 for values in result.values())
    assert result["loss"][:2] == [0.9, 0.5] and math.isnan(result["loss"][2]) and result["loss"][3] == 0.2
    assert math.isnan(result["val_loss"][0]) and result["val_loss"][1] == 0.6 and math.isnan(result["val_loss"][2])


def test_wait_for_reports_wakes_when_another_thread_records():
    history = TrainingHistory()
    release = threading.Event()

    def chief() -> None:
        history.record(_report(0, loss=0.9))
        release.wait(30)
        history.record(_report(1, loss=0.6))

    thread = threading.Thread(target=chief, daemon=True)
    thread.start()
    assert history.wait_for_reports(1, timeout=30)
    assert not history.wait_for_reports(2, timeout=0.1), "the second report is held back"
    release.set()
    assert history.wait_for_reports(2, timeout=30)
    thread.join(30)
    assert history.as_dict() == {"loss": [0.9, 0.6]}


def test_reports_count_every_epoch_end_also_when_a_later_fit_numbers_from_zero():
    history = TrainingHistory()
    for epoch in (0, 1, 2, 0, 1):  # two fits (two train calls), each numbering its epochs from 0
        history.record(_report(epoch, loss=1.0 / (epoch + 1)))
    assert history.reports == 5 and history.as_dict()["loss"] == [1.0, 0.5, 1.0 / 3]
    assert history.wait_for_reports(5, timeout=0) and not history.wait_for_reports(6, timeout=0.05)


def test_an_early_stopped_fit_ends_the_wait_for_its_epochs_but_an_earlier_fit_s_end_does_not():
    """A fit that stops early (EarlyStopping) reports its end instead of the epochs it skipped: the
    wait for the last epoch report ends there, not after LAST_EPOCH_WAIT_S. The end of the previous
    train call's fit, arriving late, must not end the next call's wait."""
    history = TrainingHistory()
    history.record(_report(0, loss=1.0))
    before = history.reports  # a train call of 3 epochs starts here; the previous fit has not said it ended
    history.record({"step": 10, "epoch": 0, "fit_end": True})  # the previous fit's end, arriving late
    assert not history.wait_for_reports(before + 3, timeout=0.05, since=before)
    history.record(_report(0, loss=0.8))
    history.record(_report(1, loss=0.7))  # EarlyStopping: no epoch 2
    assert not history.wait_for_reports(before + 3, timeout=0.05, since=before)
    history.record({"step": 20, "epoch": 1, "fit_end": True})
    assert history.wait_for_reports(before + 3, timeout=0, since=before)
    assert not history.wait_for_reports(before + 3, timeout=0), "without since, only the epoch count ends it"
    assert history.as_dict() == {"loss": [0.8, 0.7]}, "a fit-end report holds no epoch logs"


def test_epoch_lines():
    history = TrainingHistory()
    history.record(_report(0, loss=0.41234, accuracy=0.881, val_loss=0.39012, val_accuracy=0.89))
    history.record(_report(1, loss=0.3, accuracy=0.9))
    assert history.epoch_lines(3) == [
        "epoch 1/3: loss 0.4123, accuracy 0.8810, val_loss 0.3901, val_accuracy 0.8900",
        "epoch 2/3: loss 0.3000, accuracy 0.9000",
    ]
    assert history.epoch_lines()[-1] == "epoch 2/2: loss 0.3000, accuracy 0.9000"
    assert history.epoch_lines(1)[-1].startswith("epoch 2/2:"), "never fewer epochs than were recorded"
    history.record(_report(2, loss=0.25, nodes=2))  # an elastic cluster's node count: a whole number
    assert history.epoch_lines()[-1] == "epoch 3/3: loss 0.2500, nodes 2"


def test_train_progress_ends_with_one_line_per_epoch():
    """A TrainProgress without a cluster (the nodes are real NodeState objects; no Spark job runs)."""
    history = TrainingHistory()
    history.record(_report(0, loss=0.9, val_loss=1.0))
    history.record(_report(1, loss=0.5, val_loss=0.6))
    node = NodeState(NodeRole(0, "chief", 0), metrics={"rows_received": 0, "rows_read": 0})

    def shown(succeeded: bool) -> list[str]:
        stream = io.StringIO()
        progress = TrainProgress(nodes=[node], total_rows=100, epochs=2, stream=stream, interval_s=600, history=history)
        progress.start()
        progress.close(succeeded=succeeded)
        return stream.getvalue().splitlines()

    lines = shown(True)
    assert lines[0].startswith("sparkdl train [fed]: 100/100 rows fed"), lines
    assert lines[1:] == ["epoch 1/2: loss 0.9000, val_loss 1.0000", "epoch 2/2: loss 0.5000, val_loss 0.6000"]
    assert shown(False) == [], "a failed call shows no final line and no epoch lines"
