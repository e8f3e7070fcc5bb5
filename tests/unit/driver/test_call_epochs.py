"""Which epochs of a ``cluster.train`` call each attempt is fed (``driver/call_epochs.py``): a
relaunched ``model.fit`` that resumes from a backup is fed the epochs not yet completed, one that
starts again at epoch 0 (no backup) every epoch; the relaunched chief's first fit is checked against
its plan. Pure objects: no Spark, no TensorFlow. (On a cluster: tests/cluster/spark_mode/test_resume.py.)"""

from __future__ import annotations

import pytest

from sparkdl.driver.call_epochs import CallEpochs, FitStart

pytestmark = pytest.mark.timeout(60)


def test_the_first_attempt_is_fed_every_epoch_and_not_checked():
    call = CallEpochs(epochs=3, reports=5)  # 5 reports from earlier calls
    assert (call.first_epoch, call.fed_epochs, call.last_report) == (0, 3, 8)
    assert call.fit_began(0, attempt=0) == FitStart(True, None)
    assert call.done(7) == 2


def test_a_relaunch_whose_fit_resumes_is_fed_the_epochs_not_yet_completed():
    call = CallEpochs(epochs=6, reports=0)
    call.replan(reports=3, attempt=1, fits_resume=True)  # the chief reported epochs 0..2
    assert (call.first_epoch, call.fed_epochs, call.last_report) == (3, 3, 6)
    assert call.fit_began(3, attempt=1) == FitStart(True, True), "resumed at epoch 3, as planned"
    assert call.fit_began(0, attempt=1) == FitStart(True, None), "checked once: a later fit is not"
    assert call.done(5) == 5


def test_a_relaunched_fit_that_begins_again_at_0_stops_its_attempt_and_the_next_is_fed_every_epoch():
    """``ctx.progress_callback()`` without a backup: the relaunch planned from epoch 1 (one reported)
    begins at 0 with fresh weights. Fed 2 epochs, it would run out of data after 2 of its 3."""
    call = CallEpochs(epochs=3, reports=0)
    call.replan(reports=1, attempt=1, fits_resume=True)
    assert call.first_epoch == 1
    assert call.fit_began(0, attempt=1) == FitStart(False, False)
    call.replan(reports=1, attempt=2, fits_resume=False)
    assert (call.first_epoch, call.fed_epochs, call.last_report) == (0, 3, 4)
    assert call.fit_began(0, attempt=2) == FitStart(True, None)
    assert call.done(3) == 2, "its own reports count from the new plan"


def test_a_cluster_whose_fits_do_not_resume_feeds_every_epoch_to_each_relaunch_at_once():
    call = CallEpochs(epochs=4, reports=10)
    call.replan(reports=12, attempt=3, fits_resume=False)
    assert (call.first_epoch, call.fed_epochs) == (0, 4)
    assert call.fit_began(0, attempt=3) == FitStart(True, None), "planned at 0, began at 0: says nothing"


def test_a_fit_that_resumes_elsewhere_than_planned_is_fed_from_where_it_began():
    """The chief reported an epoch its backup lacks (progress callback before the backup), or backed
    up an epoch it never reported: the next plan starts where the fit began, within the call."""
    call = CallEpochs(epochs=5, reports=0)
    call.replan(reports=3, attempt=1, fits_resume=True)
    assert call.fit_began(2, attempt=1) == FitStart(False, True)
    call.replan(reports=3, attempt=2, fits_resume=True)
    assert call.first_epoch == 2
    call.replan(reports=9, attempt=3, fits_resume=True)
    assert call.first_epoch == 4, "never past the call's last epoch: one is always fed"


def test_a_report_from_another_attempt_is_not_checked():
    call = CallEpochs(epochs=3, reports=0)
    call.replan(reports=1, attempt=2, fits_resume=True)
    assert call.fit_began(0, attempt=1) == FitStart(True, None)
    assert not call.checked


def test_a_fit_that_begins_past_the_call_or_elsewhere_again_and_again_goes_on_without_endless_relaunches():
    """No relaunch can feed a fit that begins past the call's last epoch (a custom loop's count, or
    ``fit(epochs=...)`` longer than the call), nor one that picks another first epoch every time:
    after ``MAX_REFEEDS`` relaunches the fit goes on, marked as a mismatch (the driver warns)."""
    from sparkdl.driver.call_epochs import MAX_REFEEDS

    past = CallEpochs(epochs=3, reports=0)
    past.replan(reports=1, attempt=1, fits_resume=True)
    assert past.fit_began(5, attempt=1) == FitStart(True, True, mismatch=True)

    wandering = CallEpochs(epochs=6, reports=0)
    wandering.replan(reports=3, attempt=1, fits_resume=True)
    for attempt in range(1, MAX_REFEEDS + 1):
        began = (wandering.first_epoch + 1) % 6  # never where it was planned
        assert wandering.fit_began(began, attempt=attempt).go_on is False
        wandering.replan(reports=3, attempt=attempt + 1, fits_resume=True)
    last = wandering.fit_began((wandering.first_epoch + 1) % 6, attempt=MAX_REFEEDS + 1)
    assert last.go_on is True and last.mismatch is True
