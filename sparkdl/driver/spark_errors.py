"""What a failed Spark job says about its cause, read from Spark's structure rather than its text.

A feeding job fails when one of its Python tasks raises (a ``FeedDataError`` for data that cannot
be fed, a ``FeedError`` for a node that dropped its stream, ...). PySpark 4 hands the driver that
failure as a ``PythonException`` (RDD and DataFrame actions alike, classic and Connect) whose
Spark error condition is ``PYTHON_EXCEPTION`` and whose message parameters hold the task's
``traceback`` (``getCondition()``, ``getMessageParameters()``); older paths give a
``Py4JJavaError`` whose chain of JVM causes holds Spark's
``org.apache.spark.api.python.PythonException``, found by its class. The Python exception itself
crosses the JVM only as that traceback's text, so its class and message are read from the
traceback's last lines, in Python's own format (``module.Class: message``).

A job that failed in the JVM (no Python task raised) is read from the chain of JVM causes: the
error conditions along it (``getCondition()``), and the message of the innermost cause that has
a condition, else of the outermost one (``Py4JJavaError``'s own text names only the py4j call).
One condition gets its own explanation: ``CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND``, a block of a local
checkpoint (how ``partitions.py`` pins a shuffled DataFrame) lost with the executor that held it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..common.errors import FeedDataError, FeedError

#: The JVM class of a Python worker's failure (Spark wraps the worker's traceback in it).
JVM_PYTHON_EXCEPTION = "org.apache.spark.api.python.PythonException"
#: Spark's error condition for it, whose message parameter ``traceback`` is the worker's traceback.
PYTHON_EXCEPTION_CONDITION = "PYTHON_EXCEPTION"
TRACEBACK_HEADER = "Traceback (most recent call last):"
#: Spark's error condition for a block of a local checkpoint that no executor holds any more.
LOST_CHECKPOINT_CONDITION = "CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND"
#: How many JVM causes are read at most (a chain is short; a cycle must not hold the driver).
MAX_CAUSES = 20
#: What a lost local checkpoint means for cluster.train, and what to do.
LOST_CHECKPOINT_ADVICE = (
    "an executor that held blocks of a local checkpoint is gone, and Spark cannot read them again. "
    "sparkdl pins a DataFrame that comes out of a shuffle with a local checkpoint (so that every epoch "
    "reads the same rows), which does not survive the loss of an executor. Before cluster.train(), "
    "persist the DataFrame with a replicated storage level (df.persist(StorageLevel.MEMORY_AND_DISK_2)) "
    "or checkpoint() it to reliable storage; with cache=True (the default) epochs 2+ are read from the "
    "nodes, not from Spark"
)


@dataclass(frozen=True)
class TaskFailure:
    """The cause of a failed Spark job, as far as Spark's exception structure tells it."""

    spark_class: str  # the class of the exception the driver got (PySpark's or the JVM's)
    condition: str | None  # Spark's error condition, when the exception is a SparkThrowable
    python_type: str | None  # the class a Python task raised (its qualified name), if one did
    message: str  # that exception's message, else the first line of the JVM's (or the driver's) exception
    jvm_conditions: tuple[str, ...] = ()  # Spark's error conditions along the JVM causes, outermost first

    @property
    def python_class(self) -> str | None:
        """The unqualified class name the Python task raised (``FeedDataError``), if one did."""
        return self.python_type.rsplit(".", 1)[-1] if self.python_type else None

    @property
    def is_data_error(self) -> bool:
        """Whether a task found the data unfeedable (a ``FeedDataError``): the data is the cause,
        not a node."""
        return self.python_class == FeedDataError.__name__

    @property
    def lost_checkpoint(self) -> bool:
        """Whether the job failed because a block of a local checkpoint was lost with its executor:
        the cause is known, no node report is awaited for it."""
        return self.python_type is None and LOST_CHECKPOINT_CONDITION in self.jvm_conditions

    def as_feed_error(self, description: str) -> FeedError | FeedDataError:
        """The error ``cluster.train``/``inference`` raises for this failure of the job ``description``:
        a ``FeedDataError`` when a task found the data unfeedable, else a ``FeedError``."""
        if self.is_data_error:
            return FeedDataError(f"{description} failed: FeedDataError: {self.message}")
        if self.lost_checkpoint:
            return FeedError(f"{description} failed: {LOST_CHECKPOINT_ADVICE} (Spark: {self.message})")
        cause = f"{self.python_class}: {self.message}" if self.python_class else self.message
        return FeedError(f"{description} failed: {cause}")


def task_failure(exc: BaseException) -> TaskFailure:
    """Read the cause of a failed Spark job from ``exc`` (see the module docstring)."""
    condition = _condition(exc)
    causes = _jvm_causes(exc)
    conditions = tuple(c for c, _ in causes if c)
    traceback_text = _python_traceback(exc, condition)
    if traceback_text is not None:
        python_type, message = _exception_line(traceback_text)
        if python_type is not None:
            return TaskFailure(_class_name(exc), condition, python_type, message, conditions)
    with_condition = [m for c, m in reversed(causes) if c and m]
    text = (with_condition or [m for _, m in causes if m] or [str(exc)])[0].strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return TaskFailure(_class_name(exc), condition, None, first, conditions)


def _jvm_causes(exc: BaseException) -> list[tuple[str | None, str]]:
    """``(error condition or None, message)`` of each JVM exception behind ``exc``, outermost first
    (none for an exception that did not come from the JVM)."""
    causes = []
    java = getattr(exc, "java_exception", None)  # py4j.protocol.Py4JJavaError
    while java is not None and len(causes) < MAX_CAUSES:
        try:
            message = str(java.getMessage() or "")
            cause = java.getCause()
        except Exception:  # noqa: BLE001 - the JVM may be gone
            break
        causes.append((_condition(java), message))
        java = cause
    return causes


def _class_name(exc: BaseException) -> str:
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
            return str(java.getClass().getName())
        except Exception:  # noqa: BLE001 - the JVM may be gone; the Python class still says something
            pass
    return f"{type(exc).__module__}.{type(exc).__qualname__}"


def _condition(exc: BaseException) -> str | None:
    """Spark's error condition (``getCondition()``, before 4.0 ``getErrorClass()``), if it has one."""
    for name in ("getCondition", "getErrorClass"):
        method = getattr(exc, name, None)
        if callable(method):
            try:
                return method()
            except Exception:  # noqa: BLE001 - a condition is a nicety, never needed
                return None
    return None


def _python_traceback(exc: BaseException, condition: str | None) -> str | None:
    """The traceback text of the Python task that failed: Spark's message parameter, else found
    by the exceptions' classes."""
    if condition == PYTHON_EXCEPTION_CONDITION:
        try:
            parameters = exc.getMessageParameters() or {}
        except Exception:  # noqa: BLE001 - the JVM may be gone: fall back on the classes below
            parameters = {}
        if isinstance(parameters.get("traceback"), str):
            return _from_header(parameters["traceback"])
    try:
        from pyspark.errors.exceptions.base import PythonException
    except ImportError:  # pragma: no cover - pyspark is a dependency
        PythonException = ()  # noqa: N806
    if isinstance(exc, PythonException):
        return _from_header(str(exc))
    java = getattr(exc, "java_exception", None)  # py4j.protocol.Py4JJavaError
    seen = 0
    while java is not None and seen < 20:  # the chain of causes, bounded
        try:
            if str(java.getClass().getName()) == JVM_PYTHON_EXCEPTION:
                return _from_header(str(java.getMessage()))
            java = java.getCause()
        except Exception:  # noqa: BLE001 - the JVM may be gone
            return None
        seen += 1
    return None


def _from_header(text: str) -> str | None:
    start = text.find(TRACEBACK_HEADER)
    return text[start:] if start >= 0 else None


def _exception_line(traceback_text: str) -> tuple[str | None, str]:
    """``(qualified class, message)`` of the exception that ends a Python traceback.

    Python prints the frames indented under the header, then the exception unindented as
    ``module.Class: message`` (its message may span lines); anything Spark appends after it is
    indented with a tab (the JVM's stack) and left out.
    """
    lines = traceback_text.splitlines()
    start = None
    for index in range(1, len(lines)):  # the last unindented line after a frame starts the exception
        if lines[index] and not lines[index][0].isspace() and lines[index - 1][:1].isspace():
            start = index
    if start is None:
        return None, ""
    kind, _, first = lines[start].partition(": ")
    if not kind or " " in kind:
        return None, ""
    rest = [line for line in lines[start + 1 :] if line and not line.startswith("\t")]
    return kind, "\n".join([first, *rest]).strip()
