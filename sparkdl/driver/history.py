"""The chief's per-epoch Keras logs, collected at the driver: what ``cluster.history`` returns.

A node whose ``map_fun`` passes ``ctx.progress_callback()`` to ``model.fit`` reports its logs at
each epoch end; the cluster records the chief's reports here. One ``TrainingHistory`` lives as
long as its ``TFCluster``, across relaunches: a relaunched node that resumes re-runs epochs,
and their later reports replace the earlier ones. A relaunched fit that begins at epoch ``k``
(``k`` = 0 without a backup) first drops what earlier attempts reported from epoch ``k`` on
(:meth:`TrainingHistory.forget_from`), so no epoch of the history mixes two attempts' training.
"""

from __future__ import annotations

import math
import threading

#: Keys of a progress report that are sparkdl's bookkeeping, not Keras metrics.
BOOKKEEPING_KEYS = frozenset(
    {"epoch", "epoch_end", "fit_begin", "awaits_word", "fit_end", "step", "rows_read", "rows_received"}
)


#: Entries that count things (an elastic cluster's node count per epoch), shown as whole numbers.
COUNTS = frozenset({"nodes"})


def _shown(item: tuple[str, float]) -> str:
    name, value = item
    return f"{name} {int(value)}" if name in COUNTS and value.is_integer() else f"{name} {value:.4f}"


class TrainingHistory:
    """Per-epoch metrics of one cluster's training, keyed by 0-based epoch (thread-safe)."""

    def __init__(self):
        self._epochs: dict[int, dict[str, float]] = {}
        self._reports = 0  # epoch-end reports recorded, re-runs included
        self._reports_at_fit_end = -1  # epoch-end reports recorded when the chief's latest fit ended
        self._cond = threading.Condition()

    def record(self, metrics: dict) -> None:
        """Keep the logs of one epoch-end report (its ``epoch``), replacing any earlier report of it;
        a ``fit_end`` report (the chief's ``model.fit`` returned) only marks that no more will come."""
        if metrics.get("fit_end"):
            with self._cond:
                self._reports_at_fit_end = self._reports
                self._cond.notify_all()
            return
        if metrics.get("epoch") is None:
            return
        logs = {}
        for key, value in metrics.items():
            if key in BOOKKEEPING_KEYS or isinstance(value, bool):
                continue
            try:
                logs[key] = float(value)
            except (TypeError, ValueError):
                continue
        with self._cond:
            self._epochs[int(metrics["epoch"])] = logs
            self._reports += 1
            self._cond.notify_all()

    def forget_from(self, epoch: int) -> None:
        """A relaunched fit begins at ``epoch``: drop the logs of that epoch and the later ones, which
        earlier attempts reported (a fit without a backup begins at 0 with fresh weights: its epochs
        replace every one). The count of :attr:`reports` is kept."""
        with self._cond:
            for number in [number for number in self._epochs if number >= epoch]:
                del self._epochs[number]

    def as_dict(self) -> dict[str, list[float]]:
        """Keras ``History.history``'s shape: ``{"loss": [epoch 0, epoch 1, ...], "val_loss": [...]}``.

        Entry ``i`` of every list is epoch ``i``; an epoch (or a metric of it) never reported is NaN,
        so the lists stay aligned. Metrics appear in the order they were first reported.
        """
        with self._cond:
            epochs = dict(self._epochs)
        names = list(dict.fromkeys(name for e in sorted(epochs) for name in epochs[e]))
        span = range(max(epochs) + 1) if epochs else range(0)
        return {name: [epochs.get(e, {}).get(name, math.nan) for e in span] for name in names}

    def epoch_lines(self, total: int | None = None) -> list[str]:
        """One line per recorded epoch: ``epoch 1/3: loss 0.4123, accuracy 0.8810, ...``.

        ``total``: the number of epochs shown after the slash (never less than those recorded).
        """
        with self._cond:
            epochs = dict(self._epochs)
        total = max(total or 0, max(epochs, default=-1) + 1)
        return [f"epoch {e + 1}/{total}: " + ", ".join(map(_shown, epochs[e].items())) for e in sorted(epochs)]

    @property
    def reports(self) -> int:
        """Epoch-end reports recorded so far. A ``fit`` that resumes after a relaunch reports only
        the epochs it runs, so the reports since a ``train`` call began count its completed epochs,
        also when a later ``fit`` numbers its epochs from 0 again."""
        with self._cond:
            return self._reports

    def wait_for_reports(self, n: int, timeout: float | None, since: int | None = None) -> bool:
        """Block until ``n`` epoch-end reports were recorded in all, or ``timeout`` seconds.

        With ``since`` (the reports recorded when the ``train`` call began), also return once the
        chief's fit ended after reporting at least one epoch more: an early-stopped fit reports no
        further epochs. A node's reports arrive in order, so the end of an earlier fit, recorded
        before this call's first epoch report, does not count.
        """
        with self._cond:
            return self._cond.wait_for(
                lambda: self._reports >= n or (since is not None and self._reports_at_fit_end > since), timeout
            )
