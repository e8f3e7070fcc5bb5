"""``fitMultiple``'s iterator: a TF cluster per thread that asks, so ``CrossValidator(parallelism=k)`` fits k at once.

Spark ML's ``CrossValidator`` and ``TrainValidationSplit`` call ``fitMultiple`` once per fold and
then ``next()`` on its iterator from ``parallelism`` threads. Each thread whose ``next()`` finds
param maps nobody has claimed becomes a **lane**: it claims them one at a time, in order, from a
shared list and trains them on a cluster of its own (``fitting.fit_group`` with the lane: one
preparation of the rows, one ``TFCluster`` whose nodes train each run the driver names), until
none is left; then it shuts its cluster down and hands out a model. So one thread (``parallelism=1``)
trains every param map on one cluster, as a plain ``fitMultiple`` does, and k threads train on k
clusters at once. The clusters' nodes never share an executor: a cluster that finds too few
executors free of the others' nodes waits for them (``driver/node_groups.py``).

A later ``next()`` hands out a trained model (waiting for the lane training it). A lane whose
cluster found no free executors within its ``reservation_timeout`` while another lane trains gives
its param maps back (a queue, not a failure); any other failure ends every lane's claiming, and
each ``next()`` then raises it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Callable, Iterator

from ..common.errors import ReservationTimeout, SparkDLError

logger = logging.getLogger(__name__)


class Lane:
    """One thread's share of a parallel ``fitMultiple``, as ``fitting.fit_group`` sees it."""

    def __init__(self, fits: "ParallelFits", key: int, first: int):
        self._fits = fits
        self._key = key
        self._first: int | None = first
        self.claimed: set[int] = set()  # the param maps this lane trained or trains

    def claim(self) -> int | None:
        """The next param map of this lane's group for its cluster, None when none is left."""
        if self._first is not None:
            index, self._first = self._first, None
        else:
            index = self._fits.claim(self._key)
        if index is not None:
            self.claimed.add(index)
        return index

    def runs(self, runs) -> Iterator:
        """The runs of ``runs`` (``RunSpec``s) this lane claims, one at a time, as its cluster is ready for each."""
        by_index = {run.index: run for run in runs}
        while (index := self.claim()) is not None:
            yield by_index[index]

    def serial(self) -> contextlib.AbstractContextManager:
        """Held for the steps no two lanes may run at once (Keras saving the shared model object)."""
        return self._fits.serial


class ParallelFits:
    """The iterator of ``(index, model)`` that ``KerasEstimator.fitMultiple`` returns (see the module docstring)."""

    def __init__(self, groups: list[list[tuple[int, object]]], fit: Callable[[list, Lane], dict]):
        self._groups = groups  # param maps that share data and cluster settings: (index, settings)
        self._fit = fit  # (group, lane) -> {index: model} of the param maps the lane claimed
        self._pending = [[index for index, _ in group] for group in groups]  # unclaimed, by group
        self._models: dict[int, object] = {}
        self._handed: set[int] = set()
        self._count = sum(len(group) for group in groups)
        self._error: BaseException | None = None
        self._active = 0  # lanes training now
        self._cond = threading.Condition()
        self.serial = threading.Lock()

    def __iter__(self):
        return self

    def __next__(self):
        while True:
            with self._cond:
                if len(self._handed) >= self._count:
                    raise StopIteration
            self._run_lane()
            with self._cond:
                while True:
                    if self._error is not None:
                        raise self._error
                    ready = sorted(set(self._models) - self._handed)
                    if ready:
                        self._handed.add(ready[0])
                        return ready[0], self._models[ready[0]]
                    if len(self._handed) >= self._count:
                        raise StopIteration
                    if self._active == 0 and any(self._pending):
                        break  # param maps given back that no lane trains now: become a lane again
                    self._cond.wait()  # a lane trains the rest; it notifies when done, failed or gave some back

    def claim(self, key: int) -> int | None:
        """The next unclaimed param map of group ``key`` (None when none is left, or a lane failed)."""
        with self._cond:
            if self._error is not None or not self._pending[key]:
                return None
            return self._pending[key].pop(0)

    def _run_lane(self) -> None:
        """Train param maps on clusters of this thread's own while any is unclaimed."""
        for key, group in enumerate(self._groups):
            first = self.claim(key)
            if first is None:
                continue
            lane = Lane(self, key, first)
            with self._cond:
                self._active += 1
            try:
                models = self._fit(group, lane)
                missing = lane.claimed - set(models)
                if missing:
                    raise SparkDLError(f"sparkdl KerasEstimator: no model for param map(s) {sorted(missing)}")
                with self._cond:
                    self._models.update(models)
            except ReservationTimeout as exc:
                if not self._give_back(key, lane.claimed):
                    self._fail(exc)
                    raise
                logger.info("sparkdl KerasEstimator: no executors free for another cluster yet (%s); waiting", exc)
                return
            except BaseException as exc:
                self._fail(exc)
                raise
            finally:
                with self._cond:
                    self._active -= 1
                    self._cond.notify_all()

    def _give_back(self, key: int, claimed: set[int]) -> bool:
        """Return a lane's param maps to the others when its cluster found no free executors in time
        and another lane holds some (it trains them once it can): a queue, not a failure."""
        with self._cond:
            if self._active <= 1 or self._error is not None:
                return False
            self._pending[key][:0] = sorted(claimed)
            return True

    def _fail(self, error: BaseException) -> None:
        with self._cond:
            self._error = self._error or error
            self._cond.notify_all()
