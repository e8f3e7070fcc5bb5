"""What map_fun returns, on its way to the driver (sparkdl/node/return_value.py): plain JSON
values, numpy turned into numbers and lists, anything else refused on the node naming its type
and place, and a size bound."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from sparkdl.node.return_value import MAX_RESULT_BYTES, ResultError, as_json


def test_plain_values_numpy_and_tuples_become_json():
    value = {
        "loss": [np.float32(0.5), 0.25],
        "steps": np.int64(7),
        "weights": np.arange(6, dtype=np.float64).reshape(2, 3),
        "flags": (True, np.bool_(False), None),
        "name": "chief",
        "nan": float("nan"),
    }
    plain = as_json(value)
    assert plain["loss"] == [0.5, 0.25] and type(plain["loss"][0]) is float
    assert plain["steps"] == 7 and type(plain["steps"]) is int
    assert plain["weights"] == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert plain["flags"] == [True, False, None] and plain["name"] == "chief" and math.isnan(plain["nan"])
    assert json.loads(json.dumps(plain))["steps"] == 7
    assert as_json(None) is None and as_json(-3) == -3


@pytest.mark.parametrize(
    "value, message",
    [
        (object(), r"builtins\.object at the return value"),
        ({"a": [1, {2, 3}]}, r"builtins\.set at the return value\['a'\]\[1\]"),
        ({1: "x"}, r"a dict with a int key 1 at the return value"),
        ({"s": np.array(["x"])}, r"numpy ndarray of dtype <U1 at the return value\['s'\]"),
        (b"bytes", r"builtins\.bytes"),
    ],
)
def test_values_that_cannot_travel_are_refused_naming_type_and_place(value, message):
    with pytest.raises(ResultError, match=message):
        as_json(value)


def test_a_result_over_the_bound_is_refused_with_what_to_do():
    with pytest.raises(ResultError, match=r"at most 524,288 travel to the driver: write a large result to storage"):
        as_json("x" * MAX_RESULT_BYTES)
    assert as_json("x" * (MAX_RESULT_BYTES - 100))  # just under: fine
