"""The exceptions sparkdl raises at the driver, carrying structured facts about failed nodes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class NodeFailure:
    """How one TF node died, as reported by the process that watched it."""

    label: str  # e.g. "worker:1"
    node_number: int  # sparkdl's node number (TFoS's executor_id)
    host: str
    spark_executor: str = ""  # Spark's executor address, when known
    exit_code: int | None = None
    signal: str | None = None
    traceback: str = ""
    log_tail: str = ""
    log_path: str = ""
    hint: str = ""
    cause: str = ""  # why sparkdl ended the node, e.g. "made no progress for 30 s"
    stalled: bool = False  # ended by the stall/feed timeout

    def describe(self) -> str:
        """A multi-line, human-readable account of the failure."""
        how = (
            self.cause
            if self.cause
            else f"killed by {self.signal}"
            if self.signal
            else f"exited with code {self.exit_code}"
            if self.exit_code is not None
            else "failed"
        )
        where = f"node {self.label} (node #{self.node_number}) on host {self.host}"
        if self.spark_executor:
            where += f", Spark executor {self.spark_executor}"
        lines = [f"{where} {how}"]
        if self.traceback:
            lines += ["--- remote traceback ---", self.traceback.rstrip()]
        if self.log_tail:
            lines += [f"--- last lines of {self.log_path or 'the node log'} ---", self.log_tail.rstrip()]
        elif self.log_path:
            lines.append(f"node log: {self.log_path}")
        if self.hint:
            lines.append(f"hint: {self.hint}")
        return "\n".join(lines)


class SparkDLError(RuntimeError):
    """Base class of sparkdl's runtime errors."""


class ClusterError(SparkDLError):
    """One or more TF nodes failed; ``failures`` lists each, first failure first."""

    def __init__(self, failures: list[NodeFailure], summary: str = ""):
        self.failures = failures
        head = summary or f"{len(failures)} TensorFlow node(s) failed"
        super().__init__(head + "\n" + "\n\n".join(f.describe() for f in failures))


class ReservationTimeout(SparkDLError):
    """Not every node registered within ``reservation_timeout``."""


class PreflightError(SparkDLError, ValueError):
    """The Spark set-up cannot host the requested cluster; the message says what to change."""


class NodeStalled(ClusterError):
    """A node made no progress for its stall or feed timeout; it was stopped (see ``failures``)."""


def cluster_error(failures: list[NodeFailure], summary: str) -> ClusterError:
    """The exception for these failures: ``NodeStalled`` when the first one was a stall."""
    return (NodeStalled if failures and failures[0].stalled else ClusterError)(list(failures), summary)


class ShutdownTimeout(SparkDLError):
    """Nodes were still running when ``shutdown(timeout=...)`` ran out; they were stopped."""
