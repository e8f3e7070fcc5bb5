"""Which epochs of one ``cluster.train`` call each attempt of the cluster is fed.

The chief's epoch-end reports (``ctx.progress_callback()``) count the epochs a call completed. After
a relaunch, ``model.fit`` either resumes from a backup (``ctx.backup_and_restore``, Keras'
``BackupAndRestore``) after the last epoch backed up, and must be fed only the epochs left, or
starts again at epoch 0 with fresh weights, and must be fed every epoch again (fed fewer, Keras
"runs out of data" and returns an undertrained model). The relaunched nodes' plan goes out before
their ``fit`` starts (``map_fun`` reads ``feed.num_epochs`` from it), so the driver plans by what
the cluster's last relaunched fit did (it resumed, until one did not), then checks: the relaunched
chief reports the epoch its first fit begins at and waits there for the driver's word
(``ctx.progress_callback()``; ``EpochGate``). A fit that begins where its plan does goes on; any
other is stopped before it trains, and the cluster is relaunched again, fed from the epoch that fit
began at (not counted against ``max_restarts``). No TensorFlow, no Spark: ``TFCluster`` drives it
under its own lock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


class FitStart(NamedTuple):
    """What the epoch a relaunched fit began at means for the attempt it runs in."""

    go_on: bool  #: the attempt is fed the epochs the fit runs (False: relaunch it, fed from ``began``)
    resumes: bool | None  #: whether fits of this cluster resume from a backup (None: this one cannot tell)
    #: the fit runs other epochs than it is fed, and no relaunch can mend that (it begins past the
    #: call's epochs, or still elsewhere after ``MAX_REFEEDS`` relaunches): it goes on, with a warning
    mismatch: bool = False


#: Relaunches of one call fed from where a relaunched fit began, at most: a fit that begins elsewhere
#: again after them (a loop that picks its first epoch anew each time) goes on as it is.
MAX_REFEEDS = 2


@dataclass
class CallEpochs:
    """One ``cluster.train`` call's epochs across the cluster's attempts.

    ``epochs`` is the call's ``num_epochs``; ``reports`` the chief's epoch-end reports recorded (all
    calls, re-runs included: ``TrainingHistory.reports``) when the current plan was made, and
    ``attempt`` the attempt it feeds. The first attempt of a call is fed every epoch and not checked.
    """

    epochs: int
    reports: int
    attempt: int = 0
    first_epoch: int = 0  #: the first epoch the current plan feeds
    checked: bool = True  #: whether the current attempt's first fit was seen to begin where planned
    began: int | None = None  #: where the current attempt's fit began, when its plan says otherwise
    refeeds: int = 0  #: relaunches of this call fed from where a fit began

    @property
    def fed_epochs(self) -> int:
        """How many epochs the current plan feeds (at least one)."""
        return self.epochs - self.first_epoch

    @property
    def last_report(self) -> int:
        """The epoch-end reports recorded once the current attempt reported each epoch it is fed."""
        return self.reports + self.fed_epochs

    def done(self, reports: int) -> int:
        """Epochs of the call completed, given ``reports`` recorded now: those before the current
        plan's first epoch, and the chief's reports since the plan (its fit runs the epochs fed)."""
        return self.first_epoch + max(0, reports - self.reports)

    def replan(self, reports: int, attempt: int, fits_resume: bool) -> None:
        """Plan the relaunched ``attempt``, ``reports`` recorded now: from the epoch a stopped fit
        began at, else from the first epoch not completed when fits resume, else from epoch 0. Its
        chief's first fit will be checked against it (:meth:`fit_began`)."""
        if self.began is not None:
            first = self.began
        else:
            first = self.done(reports) if fits_resume else 0
        self.first_epoch = min(max(0, first), self.epochs - 1)
        self.reports, self.attempt, self.checked, self.began = reports, attempt, False, None

    def fit_began(self, epoch: int, attempt: int) -> FitStart:
        """The chief's first fit of ``attempt`` began at ``epoch``: whether that attempt may go on.
        A fit that begins elsewhere than its plan stops the attempt; the next plan starts at ``epoch``."""
        if self.checked or attempt != self.attempt:
            return FitStart(True, None)
        self.checked = True
        told = epoch > 0 or self.first_epoch > 0  # a fit planned from 0 that began at 0 says nothing
        resumes = epoch > 0 if told else None
        if epoch == self.first_epoch:
            return FitStart(True, resumes)
        if epoch >= self.epochs or self.refeeds >= MAX_REFEEDS:
            return FitStart(True, resumes, mismatch=True)
        self.began, self.refeeds = epoch, self.refeeds + 1
        return FitStart(False, resumes)
