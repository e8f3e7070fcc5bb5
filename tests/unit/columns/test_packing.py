"""pack_tensors' batch step: array columns out as packed binary rows, the rest untouched."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from sparkdl.columns.arrow_numpy import ColumnRef, packed_to_numpy
from sparkdl.columns.packing import pack_batch


def test_pack_batch_packs_the_named_columns_as_their_values_bytes():
    values = np.arange(12, dtype="float64").reshape(3, 4)
    batch = pa.RecordBatch.from_arrays(
        [pa.array([1, 2, 3]), pa.array(values.tolist(), pa.list_(pa.float64()))], ["id", "x"]
    )
    packed = pack_batch(batch, ["x"], "float32")
    assert packed.schema.field("x").type == pa.binary() and packed.column(0).equals(batch.column(0))
    np.testing.assert_array_equal(packed_to_numpy(packed.column(1), (4,), "float32", ColumnRef("x")), values)


def test_pack_batch_refuses_ragged_rows_naming_the_column():
    batch = pa.RecordBatch.from_arrays([pa.array([[1.0, 2.0], [3.0]])], ["x"])
    with pytest.raises(ValueError, match="column 'x' holds arrays of different lengths"):
        pack_batch(batch, ["x"], "float32")
