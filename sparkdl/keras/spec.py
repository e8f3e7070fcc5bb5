"""What the driver tells the node program: the model, the column layout, and one ``RunSpec`` per param map.

A ``TrainingJob`` is ``map_fun``'s argument (``TFCluster.run`` cloudpickles it into the launch
task; it also drives local mode). ``fit`` gives it one run, ``fitMultiple`` one per param map of
the same data and cluster: the nodes train them in order, one ``cluster.train`` call each.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .compiling import CompileSpec
from .layout import ColumnLayout
from .run_store import RunPaths
from .shipping import ModelPayload
from .tracking import TrackingTarget


@dataclass(frozen=True)
class RunSpec:
    """One param map's training run."""

    index: int  # the param map's index (fitMultiple's)
    epochs: int  # epochs of the whole run (a resumed run goes on from the epochs it completed)
    batch_size: int  # per worker
    compile: CompileSpec
    seed: int
    shuffle: bool  # a new order of the rows every epoch
    paths: RunPaths
    config: dict  # the settings recorded in state.json (the run store compares them)
    backup: bool  # checkpoint every epoch and keep state.json: run store, or max_restarts
    callbacks: bytes = field(default=b"", repr=False)  # the user's Keras callbacks, cloudpickled
    monitor: str | None = None  # keep best.keras by this metric
    mode: str = "auto"
    verbose: int = 0
    tracking: TrackingTarget | None = None  # the MLflow run the chief logs each epoch into


@dataclass(frozen=True)
class TrainingJob:
    """Everything the node program needs (``node_program.main_fun``'s ``args``)."""

    model: ModelPayload
    layout: ColumnLayout
    validation: bool  # each run is also fed validation rows
    runs: tuple[RunSpec, ...]
    current_run_path: str | None = None  # with max_restarts: where the driver names the run it feeds
    # the driver names every train call's run there (a lane of a parallel fitMultiple trains the
    # param maps it claims, in no order known at launch); the nodes train until the feed ends
    named_runs: bool = False
    epoch_gate: bool = False  # the chief waits at each epoch end for the driver's word (tuning's pruning)

    @property
    def qname(self) -> str:
        """The feed queue the runs are fed on (``cluster.train``'s default)."""
        return "input"
