"""sparkdl.inference.columns without Spark or TensorFlow: conversions to tensors and back, bad rows
named. (Scoring on a real local-cluster: tests/cluster/inference/test_inference.py.)"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from sparkdl.inference import InferenceInputError, worker
from sparkdl.inference import columns as cols


def _plan(**kw):
    base = dict(column="x", tensor="t", depth=1, source_dtype="float32", row_shape=(2, 2, 1), dtype="float32")
    base.update(kw)
    return cols.InputPlan(**base)


@pytest.mark.timeout(30)
def test_pandas_arrays_are_stacked_and_reshaped():
    series = pd.Series([np.arange(4, dtype="float64") + i for i in range(3)])
    out = cols.pandas_to_model_input(series, _plan(source_dtype="float64"))
    assert out.shape == (3, 2, 2, 1) and out.dtype == np.float32
    np.testing.assert_array_equal(out[2].ravel(), [2, 3, 4, 5])


@pytest.mark.timeout(30)
def test_nested_arrays_and_arrow_lists_give_the_same_tensor():
    rows = [[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]]
    nested = pa.array(rows, type=pa.list_(pa.list_(pa.float32())))
    plan = _plan(depth=2)
    from_arrow = cols.arrow_to_model_input(nested, plan)
    from_pandas = cols.pandas_to_model_input(nested.to_pandas(), plan)
    np.testing.assert_array_equal(from_arrow, from_pandas)
    assert from_arrow.shape == (2, 2, 2, 1)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("to_numpy", [cols.pandas_to_model_input, cols.arrow_to_model_input], ids=["pandas", "arrow"])
def test_nulls_and_ragged_rows_raise_naming_the_column(to_numpy):
    with_null = pa.array([[1.0, 2.0, 3.0, 4.0], None], type=pa.list_(pa.float32()))
    ragged = pa.array([[1.0, 2.0, 3.0, 4.0], [1.0, 2.0]], type=pa.list_(pa.float32()))

    def data(array):
        return array.to_pandas() if to_numpy is cols.pandas_to_model_input else array

    with pytest.raises(InferenceInputError, match=r"column 'x' \(model input 't'\) has 1 null.*batch row 1"):
        to_numpy(data(with_null), _plan())
    with pytest.raises(InferenceInputError, match="column 'x'.*different lengths"):
        to_numpy(data(ragged), _plan())
    with pytest.raises(InferenceInputError, match="column 'x'.*4 values but the model expects 9"):
        to_numpy(data(pa.array([[1.0] * 4], type=pa.list_(pa.float32()))), _plan(row_shape=(3, 3)))


@pytest.mark.timeout(30)
def test_scalar_nulls_and_dtype_rules():
    # Spark turns an integer column with nulls into float64 for pandas: detected as nulls.
    with pytest.raises(InferenceInputError, match="null"):
        cols.pandas_to_model_input(
            pd.Series([1.0, np.nan]), _plan(depth=0, source_dtype="int64", row_shape=(), dtype="float32")
        )
    with pytest.raises(InferenceInputError, match="null"):
        cols.arrow_to_model_input(pa.array([1.0, None]), _plan(depth=0, source_dtype="float64", row_shape=()))
    assert cols.castable("int64", "float32") and cols.castable("float64", "float32")
    assert not cols.castable("float32", "int32") and not cols.castable("str", "float32")
    with pytest.raises(InferenceInputError, match="holds str values but the model expects float32"):
        cols.check_dtype(_plan(source_dtype="str"))


@pytest.mark.timeout(30)
def test_outputs_become_scalar_and_array_columns():
    outputs = {"probs": np.arange(6, dtype="float32").reshape(3, 2), "score": np.ones((3, 1), "float32")}
    plans = [
        cols.OutputPlan("probs", "p", "array<float>", False, "float32"),
        cols.OutputPlan("score", "s", "float", True, "float32"),
    ]
    frame = cols.outputs_to_pandas(outputs, plans, 3, keep=pd.DataFrame({"id": [7, 8, 9]}, index=[4, 5, 6]))
    assert frame.columns.tolist() == ["id", "p", "s"] and frame["id"].tolist() == [7, 8, 9]
    assert list(frame["p"][2]) == [4.0, 5.0] and frame["s"].dtype == np.float32
    schema = pa.schema([("p", pa.list_(pa.float32())), ("s", pa.float32())])
    batch = cols.outputs_to_arrow(outputs, plans, 3, schema)
    assert batch.column(0).to_pylist()[1] == [2.0, 3.0] and batch.column(1).to_pylist() == [1.0, 1.0, 1.0]


@pytest.mark.timeout(60)
def test_scoring_refuses_a_decompression_bomb_before_decoding(monkeypatch):
    """The bomb is a bad row of the task, found from its header: no converter (no TensorFlow)
    is made, nothing decoded. Images decode as many at once as the task has cores."""
    import io

    from PIL import Image as PILImage

    from sparkdl.columns import Image, arrow_rows

    from image_bombs import png_bomb

    small = io.BytesIO()
    PILImage.fromarray(np.zeros((8, 8, 3), np.uint8)).save(small, format="PNG")
    plan = _plan(
        column="content", tensor="image", depth=0, source_dtype="object", row_shape=(8, 8, 3), spec=Image(8, 8)
    )
    column = pa.array([small.getvalue(), png_bomb()])
    converters = {}
    with pytest.raises(
        InferenceInputError,
        match=r"column 'content' \(model input 'image'\), partition 2, row 1: an image of 20000x20000 declaring "
        r"400000000 pixels, more than Image\(max_pixels=67108864\): refused before decoding",
    ):
        cols.read_column(column, plan, arrow_rows.origin_values(2, np.arange(2)), converters)
    assert converters == {}  # no converter made: nothing was decoded
    reader = cols._reader(plan, column[:1])
    monkeypatch.setattr(worker, "task_cpus", lambda: 3)  # spark.task.cpus of the running task
    assert cols._decode_parallelism(reader) == 3
    monkeypatch.setattr(worker, "task_cpus", lambda: None)  # outside a task: one at a time
    assert cols._decode_parallelism(reader) == 1


def test_packed_binary_columns_feed_dense_inputs_and_wrong_lengths_name_the_column():
    from sparkdl.columns.arrow_numpy import to_packed_array
    from sparkdl.columns.specs import Packed

    values = np.random.default_rng(0).random((4, 784), dtype="float32")
    plan = cols.InputPlan("pixels", "image", 1, "float32", (28, 28, 1), "float32", Packed((784,)))
    assert not cols.needs_reader(plan)
    from_arrow = cols.arrow_to_model_input(to_packed_array(values), plan)
    from_pandas = cols.pandas_to_model_input(pd.Series([row.tobytes() for row in values]), plan)
    for got in (from_arrow, from_pandas):
        assert got.shape == (4, 28, 28, 1) and got.dtype == np.float32
        np.testing.assert_array_equal(got.reshape(4, -1), values)
    wrong = pa.array([values[0].tobytes(), values[1, :10].tobytes()], pa.binary())
    with pytest.raises(InferenceInputError, match=r"column 'pixels' \(model input 'image'\) is read as Packed.*row 1"):
        cols.arrow_to_model_input(wrong, plan)
