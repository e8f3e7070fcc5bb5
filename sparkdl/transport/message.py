"""What every message of ``protocol.py`` is made of: its JSON wire form, and the checks that
turn a peer's JSON object back into it.

A message is a frozen dataclass; its fields may themselves be frozen dataclasses (a *record*,
such as the ``TrainingPlan`` a ``Plan`` message carries), checked the same way, field by field.
Nothing a peer sends is trusted: every field's presence and JSON type is checked against its
annotation, and every number against its range.
"""

# No ``from __future__ import annotations`` here: the checks read the field annotations, which
# must therefore be real types, not strings.
import dataclasses
import math
import types
import typing
from dataclasses import MISSING, dataclass, fields
from typing import Any, ClassVar

from ..common.errors import ProtocolError


@dataclass(frozen=True)
class Message:
    """One message type: subclasses set ``TYPE`` (the wire tag) and declare their fields.

    A field whose default is None is optional: left out of the wire form when None. Every number
    field is a count, id, port, size, seed or duration: parse refuses a negative or non-finite one,
    an int outside 64 bits, and a field named in ``POSITIVE`` that is zero (records too); a field
    named in ``FREE`` holds any JSON value and is not checked as a number.
    """

    TYPE: ClassVar[str] = ""
    POSITIVE: ClassVar[frozenset[str]] = frozenset({"timeout"})  #: number fields that must be > 0
    FREE: ClassVar[frozenset[str]] = frozenset()  #: fields holding any JSON value, not a count

    def wire(self) -> dict[str, Any]:
        """The JSON object sent on a channel."""
        return {"type": self.TYPE, **to_wire(self)}

    @classmethod
    def from_wire(cls, data: dict[str, Any]):
        """The message ``data`` holds; ProtocolError names a missing, unknown or mistyped field."""
        return from_wire(cls, data, f"{cls.TYPE!r} message", ignore={"type"})


def to_wire(record: Any) -> dict[str, Any]:
    """A message's or record's fields as a JSON object (optional fields left out when None)."""
    data: dict[str, Any] = {}
    for spec in fields(record):
        value = getattr(record, spec.name)
        if value is None and spec.default is None:
            continue
        if dataclasses.is_dataclass(value):
            value = to_wire(value)
        data[spec.name] = list(value) if isinstance(value, tuple) else value
    return data


def from_wire(cls: type, data: dict[str, Any], what: str, ignore: frozenset[str] | set[str] = frozenset()):
    """An instance of the dataclass ``cls`` from the JSON object ``data``, every field checked;
    ProtocolError names ``what`` and the field."""
    values = {}
    for spec in fields(cls):
        if spec.name in data:
            values[spec.name] = _field(cls, spec, data[spec.name], what)
        elif spec.default is MISSING and spec.default_factory is MISSING:
            raise ProtocolError(f"{what}: field {spec.name!r} is missing")
    unknown = set(data) - set(ignore) - {spec.name for spec in fields(cls)}
    if unknown:
        raise ProtocolError(f"{what}: unknown fields {sorted(unknown)}")
    return cls(**values)


def _field(cls: type, spec: dataclasses.Field, value: Any, what: str) -> Any:
    """The checked value of one field (a record's fields checked in turn)."""
    record = _record_type(spec.type)
    if record is not None and isinstance(value, dict):
        return from_wire(record, value, f"{what}, field {spec.name!r}")
    if not _conforms(value, spec.type):
        got = repr(value) if typing.get_origin(spec.type) is typing.Literal else type(value).__name__
        raise ProtocolError(f"{what}: field {spec.name!r} must be {_describe(spec.type)}, got {got}")
    if spec.name not in getattr(cls, "FREE", ()):
        _check_number(cls, spec.name, value, what)
    if typing.get_origin(spec.type) is tuple:  # JSON has lists: a tuple field arrives as it was sent
        for item in value:
            _check_number(cls, spec.name, item, what)
        return tuple(value)
    return value


def _record_type(kind: Any) -> type | None:
    """The dataclass an annotation names (alone or with None), if any."""
    options = typing.get_args(kind) if typing.get_origin(kind) in (typing.Union, types.UnionType) else (kind,)
    return next((o for o in options if isinstance(o, type) and dataclasses.is_dataclass(o)), None)


def _conforms(value: Any, kind: Any) -> bool:
    """Whether a JSON value fits the annotation ``kind`` (bool is never a number here)."""
    origin = typing.get_origin(kind)
    if kind is Any:
        return True
    if origin is typing.Literal:  # one of a few strings, such as bad_rows' "fail" / "skip"
        return any(value == option and type(value) is type(option) for option in typing.get_args(kind))
    if origin in (typing.Union, types.UnionType):
        return any(_conforms(value, option) for option in typing.get_args(kind))
    if kind is type(None):
        return value is None
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin in (list, tuple):
        args = typing.get_args(kind)
        return isinstance(value, (list, tuple)) and all(_conforms(item, args[0]) for item in value)
    if origin is dict or kind is dict:
        return isinstance(value, dict) and all(isinstance(key, str) for key in value)
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        return False  # a record arrives as a JSON object, handled by _field
    return isinstance(value, kind)


def _check_number(cls: type, name: str, value: Any, what: str) -> None:
    """Raise ProtocolError when a number field's ``value`` is out of its range (see ``Message``)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return
    problem = None
    if isinstance(value, float) and not math.isfinite(value):
        problem = "must be a finite number"
    elif isinstance(value, int) and not -(2**63) <= value < 2**63:
        problem = "must fit in 64 bits"  # numpy and Arrow hold counts as int64
    elif name in getattr(cls, "POSITIVE", ()) and value <= 0:
        problem = "must be positive"
    elif value < 0:
        problem = "must not be negative"
    if problem:
        raise ProtocolError(f"{what}: field {name!r} {problem}, got {value!r}")


def _describe(kind: Any) -> str:
    """``int``, ``list[str]``, ``int | None``, ``one of ('fail', 'skip')``: an annotation as written."""
    if typing.get_origin(kind) is typing.Literal:
        return f"one of {typing.get_args(kind)}"
    return kind.__name__ if typing.get_origin(kind) is None and isinstance(kind, type) else str(kind)
