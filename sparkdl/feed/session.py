"""A training run as one node's feed server knows it: the driver's plan and what was read of it.

``RunState`` is the server's bookkeeping of one ``cluster.train`` call (a training run, numbered
``session``): its ``protocol.TrainingPlan`` as the ``Plan`` message brought it, the rows read per
split, the first row's schema, the epoch cache and the driver's decision about it, and which
epochs' validation rows Keras is done with.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..transport import protocol
from .cache import RunCache


@dataclass
class RunState:
    """The server's state of one training run: plan, rows read, the first rows' schema, cache."""

    plan: protocol.TrainingPlan  # as the driver sent it
    cache: RunCache | None
    read: dict[str, int] = field(default_factory=dict)
    example: dict | None = None  # the first training rows (up to EXAMPLE_ROWS), as columns (the schema)
    names: list[str] | None = None
    replay: bool | None = None  # whether later epochs come from the cache (None: not known yet)
    consumed: bool = False  # read in full, or its fit ended (the driver was told)
    released: bool = False  # its cache was dropped: every split read, or the reader moved on
    validation_over: int = 0  # validation rows of the run's epochs below this are read no more (skipped)

    def wants(self, split: str, epoch: int) -> bool:
        """Whether rows of ``split`` of ``epoch`` arriving now are still to be read (else dropped)."""
        if self.released or (epoch and self.replay):  # later epochs come from the cache
            return False
        return not (split == protocol.VALIDATION_SPLIT and epoch < self.validation_over)
