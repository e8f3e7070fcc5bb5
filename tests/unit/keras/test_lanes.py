"""fitMultiple's lanes (``keras/lanes.py``): one thread trains every param map on one cluster, k threads on k."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from sparkdl.common.errors import ReservationTimeout
from sparkdl.keras import lanes
from sparkdl.keras.lanes import ParallelFits

pytestmark = pytest.mark.timeout(30)


class Runs:
    """A fake ``fit_group`` with a lane: records each call's claims, trains each run it is handed."""

    def __init__(self, gate: threading.Barrier | None = None):
        self.calls: list[tuple[str, list[int]]] = []  # (thread, the param maps its cluster trained)
        self.gate = gate  # both lanes inside their fit at once before either trains
        self.lock = threading.Lock()

    def fit(self, group, lane):
        if self.gate is not None:
            self.gate.wait(10)
        trained = [run.index for run in lane.runs([Run(i) for i, _ in group])]
        with self.lock:
            self.calls.append((threading.current_thread().name, trained))
        return {index: f"model {index}" for index in trained}


class Run:
    def __init__(self, index):
        self.index = index


def grid(*sizes):
    """Groups of (index, settings), indexes numbered across groups."""
    groups, index = [], 0
    for size in sizes:
        groups.append([(index + i, None) for i in range(size)])
        index += size
    return groups


def test_one_thread_trains_every_param_map_of_a_group_on_one_cluster_in_order():
    runs = Runs()
    fits = ParallelFits(grid(3, 2), runs.fit)
    handed = list(fits)
    assert sorted(handed) == [(i, f"model {i}") for i in range(5)]
    assert [claims for _, claims in runs.calls] == [[0, 1, 2], [3, 4]]  # one cluster per group, as before


def test_two_threads_train_on_two_clusters_at_once_each_param_map_once():
    runs = Runs(threading.Barrier(2))
    fits = ParallelFits(grid(4), runs.fit)
    with ThreadPoolExecutor(2) as pool:
        handed = list(pool.map(lambda _: next(fits), range(4)))
    assert sorted(handed) == [(i, f"model {i}") for i in range(4)]
    assert len(runs.calls) == 2 and len({thread for thread, _ in runs.calls}) == 2
    claims = [set(c) for _, c in runs.calls]
    assert claims[0].isdisjoint(claims[1]) and claims[0] | claims[1] == {0, 1, 2, 3}
    with pytest.raises(StopIteration):
        next(fits)


def test_a_next_with_nothing_to_claim_waits_for_the_lane_still_training():
    gate, release = threading.Barrier(2), threading.Event()

    def fit(group, lane):
        gate.wait(10)  # both lanes claimed their first param map
        trained = []
        for run in lane.runs([Run(i) for i, _ in group]):
            if run.index == 1:
                release.wait(10)
            trained.append(run.index)
        return {i: f"model {i}" for i in trained}

    fits = ParallelFits(grid(2), fit)
    with ThreadPoolExecutor(3) as pool:
        first, second = pool.submit(next, fits), pool.submit(next, fits)
        assert first.result(10) == (0, "model 0")
        third = pool.submit(lambda: next(fits, None))  # nothing left to claim, nothing ready
        assert not release.wait(0.3) and not third.done()
        release.set()
        results = [second.result(10), third.result(10)]
    assert sorted(results, key=str) == sorted([(1, "model 1"), None], key=str)  # one of them got it


def test_a_failed_lane_stops_the_others_claiming_and_every_next_raises():
    boom = RuntimeError("node failed")
    calls = []

    def fit(group, lane):
        trained = []
        for run in lane.runs([Run(i) for i, _ in group]):
            calls.append(run.index)
            if run.index == 0:
                raise boom
            trained.append(run.index)
        return {i: f"model {i}" for i in trained}

    fits = ParallelFits(grid(3), fit)
    with pytest.raises(RuntimeError, match="node failed"):
        next(fits)
    assert calls == [0]
    with pytest.raises(RuntimeError, match="node failed"):
        next(fits)


def test_a_lane_whose_fit_returns_no_model_for_a_claimed_param_map_fails():
    fits = ParallelFits(grid(2), lambda group, lane: {run.index: "m" for run in lane.runs([Run(0), Run(1)])} and {})
    with pytest.raises(Exception, match=r"no model for param map\(s\) \[0, 1\]"):
        next(fits)


class Queued:
    """Lane A trains and holds its executors until ``go``; lane B's first cluster finds none free
    (``ReservationTimeout``) and gives its param map back; ``gave_back`` is set once it did."""

    def __init__(self, monkeypatch, a_takes_the_rest: bool):
        self.go, self.gave_back, self.a_in = threading.Event(), threading.Event(), threading.Event()
        self.a_takes_the_rest = a_takes_the_rest  # A claims again after go (else its cluster just ends)
        self.b_calls = 0
        monkeypatch.setattr(lanes.logger, "info", lambda *args: self.gave_back.set())

    def fit(self, group, lane):
        runs = lane.runs([Run(i) for i, _ in group])
        first = next(runs)
        if first.index == 0:  # lane A
            self.a_in.set()
            trained = [first.index]  # without a_takes_the_rest: A had found nothing left to claim
            self.go.wait(10)
            if self.a_takes_the_rest:
                trained += [run.index for run in runs]  # the param map B gave back
            return {i: f"model {i}" for i in trained}
        self.b_calls += 1
        if self.b_calls == 1:
            raise ReservationTimeout("2 executors free of other sparkdl clusters' nodes were not available")
        return {first.index: f"model {first.index}", **{r.index: f"model {r.index}" for r in runs}}


def _queued_run(queued: Queued):
    fits = ParallelFits(grid(2), queued.fit)
    with ThreadPoolExecutor(2) as pool:
        a = pool.submit(next, fits)
        assert queued.a_in.wait(10)
        b = pool.submit(next, fits)
        assert queued.gave_back.wait(10)  # B gave param map 1 back rather than failing
        assert not b.done()
        queued.go.set()
        return sorted([a.result(10), b.result(10)])


def test_a_lane_that_finds_no_free_executors_gives_its_param_map_to_a_lane_that_trains(monkeypatch):
    queued = Queued(monkeypatch, a_takes_the_rest=True)
    assert _queued_run(queued) == [(0, "model 0"), (1, "model 1")]
    assert queued.b_calls == 1  # lane A trained param map 1 after its own


def test_a_param_map_given_back_after_the_other_lanes_stopped_claiming_is_trained_by_its_thread(monkeypatch):
    queued = Queued(monkeypatch, a_takes_the_rest=False)
    assert _queued_run(queued) == [(0, "model 0"), (1, "model 1")]
    assert queued.b_calls == 2  # B became a lane again once A's cluster had ended


def test_no_free_executors_with_no_other_lane_training_is_a_failure():
    def fit(group, lane):
        list(lane.runs([Run(i) for i, _ in group]))
        raise ReservationTimeout("no executors")

    fits = ParallelFits(grid(2), fit)
    with pytest.raises(ReservationTimeout):
        next(fits)
    with pytest.raises(ReservationTimeout):
        next(fits)
