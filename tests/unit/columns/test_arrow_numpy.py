"""Packed tensor rows (``binary`` columns of raw values) to numpy and back."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from sparkdl.columns.arrow_numpy import ColumnRef, packed_rows_to_numpy, packed_to_numpy, to_packed_array


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "uint8"])
def test_packed_rows_round_trip_without_a_copy(dtype):
    values = (np.arange(5 * 6).reshape(5, 2, 3) % 200).astype(dtype)
    packed = to_packed_array(values)
    assert packed.type == pa.binary() and len(packed) == 5
    back = packed_to_numpy(packed, (2, 3), dtype, ColumnRef("x"))
    np.testing.assert_array_equal(back, values)
    assert np.shares_memory(back, np.frombuffer(packed.buffers()[2], dtype=np.uint8))
    np.testing.assert_array_equal(packed_to_numpy(packed.slice(2, 2), (2, 3), dtype, ColumnRef("x")), values[2:4])
    objects = np.array([row.tobytes() for row in values], dtype=object)
    np.testing.assert_array_equal(packed_rows_to_numpy(objects, (6,), dtype, ColumnRef("x")), values.reshape(5, 6))


def test_a_row_of_another_byte_length_raises_naming_the_column():
    rows = pa.array([np.zeros(4, "float32").tobytes(), np.zeros(3, "float32").tobytes()], pa.binary())
    with pytest.raises(
        ValueError, match=r"column 'pixels' is read as Packed\(\(4,\), 'float32'\).*batch row 1 holds 12"
    ):
        packed_to_numpy(rows, (4,), "float32", ColumnRef("pixels"))


def test_nulls_and_other_types_raise_naming_the_column():
    with pytest.raises(ValueError, match="column 'pixels' has 1 null"):
        packed_to_numpy(pa.array([b"\0" * 4, None], pa.binary()), (1,), "float32", ColumnRef("pixels"))
    with pytest.raises(ValueError, match="column 'pixels' is read as Packed.*binary column, not list"):
        packed_to_numpy(pa.array([[1.0]]), (1,), "float32", ColumnRef("pixels"))
