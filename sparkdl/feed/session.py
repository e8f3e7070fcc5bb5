"""A training run as one node's feed server knows it: the driver's plan and what was read of it.

``SessionPlan`` is the ``Plan`` message a node receives for one ``cluster.train`` call (a
training run, numbered ``session``), field for field; ``RunState`` is the server's bookkeeping of
that run (rows read per split, the first row's schema, the epoch cache and the driver's decision
about it).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np

from ..transport import protocol
from .cache import RunCache
from .wire import TRAIN_SPLIT, VALIDATION_SPLIT


@dataclass(frozen=True)
class SessionPlan:
    """What one ``cluster.train`` call (a training run, numbered ``session``) gives this node."""

    session: int
    rows_per_epoch: int
    epochs: int
    validation_rows: int = 0  # validation rows per epoch (0: no validation data)
    cache: bool = False  # keep epoch 1 on disk and, if the driver agrees, replay it
    cache_max_bytes: int | None = None
    shuffle: bool = False  # permute the cached rows every epoch
    seed: int = 0
    node: int = 0  # this node's position among the data nodes (for the permutation)
    deterministic: bool = False  # epoch 1 is cached, not queued, and read from the cache in the seeded order
    first_epoch: int = 0  # the absolute number of the first epoch fed (after a relaunch that resumes)
    batch_id: int | None = None  # the Structured Streaming micro-batch this run is (cluster.train_stream)

    @classmethod
    def from_message(cls, message: protocol.Plan) -> "SessionPlan":
        """The plan in a driver's ``Plan`` message: its fields of the same names, carried as they are."""
        return cls(**{f.name: getattr(message, f.name) for f in fields(cls)})

    def split_rows(self, split: str) -> int:
        """Rows per epoch of ``split``."""
        return self.rows_per_epoch if split == TRAIN_SPLIT else self.validation_rows

    def total_rows(self, split: str = TRAIN_SPLIT) -> int:
        """Rows of ``split`` over the whole call (every epoch)."""
        return self.split_rows(split) * self.epochs

    @property
    def splits(self) -> tuple[str, ...]:
        """The splits this run feeds."""
        return (TRAIN_SPLIT, VALIDATION_SPLIT) if self.validation_rows else (TRAIN_SPLIT,)


@dataclass
class RunState:
    """The server's state of one training run: plan, rows read, the first rows' schema, cache."""

    plan: SessionPlan
    cache: RunCache | None
    read: dict[str, int] = field(default_factory=dict)
    example: dict[str, np.ndarray] | None = None  # the first training row, as columns (the schema)
    names: list[str] | None = None
    replay: bool | None = None  # the driver's decision (None: not yet told)
    consumed: bool = False  # read in full, or its fit ended (the driver was told)
    released: bool = False  # its cache was dropped: every split read, or the reader moved on
