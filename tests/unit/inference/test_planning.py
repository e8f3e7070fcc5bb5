"""sparkdl.inference.planning: the column specs of scoring follow the model's inputs."""

from __future__ import annotations

import pytest

from sparkdl.columns import arrow_rows as ar
from sparkdl.columns.specs import Image, Padded, Ragged, Sparse

pytestmark = pytest.mark.timeout(60)


def test_scoring_specs_follow_the_model_inputs():
    from pyspark.ml.linalg import VectorUDT
    from pyspark.sql import types as T

    from sparkdl.inference.columns import InferenceInputError
    from sparkdl.inference.model import TensorInfo
    from sparkdl.inference.planning import _reader_spec

    image_struct = T.StructType(
        [
            T.StructField(n, t)
            for n, t in zip(sorted(ar.IMAGE_FIELDS), [T.BinaryType()] + [T.IntegerType()] * 4 + [T.StringType()])
        ]
    )
    sparse_input = TensorInfo("vec", "float32", (1 << 18,), form="sparse")
    assert _reader_spec(VectorUDT(), None, sparse_input) == (Sparse(), True)
    assert _reader_spec(VectorUDT(), None, TensorInfo("vec", "float32", (8,))) == (None, True), (
        "dense for a dense input"
    )
    spec, _ = _reader_spec(image_struct, None, TensorInfo("image", "uint8", (28, 28, 1)))
    assert (spec.height, spec.width, spec.channels) == (28, 28, 1), "an image struct decodes to the input's shape"
    spec, _ = _reader_spec(T.BinaryType(), Image(channels=3), TensorInfo("image", "float32", (28, 28, 1)))
    assert (spec.height, spec.width, spec.channels) == (28, 28, 3), "a given Image keeps its channels"
    assert _reader_spec(T.ArrayType(T.LongType()), Padded(), TensorInfo("t", "int64", (7,)))[0] == Padded(7)
    assert (
        _reader_spec(T.ArrayType(T.LongType()), None, TensorInfo("t", "int64", (None,), form="ragged"))[0] == Ragged()
    )
    with pytest.raises(InferenceInputError, match="array<string> column needs"):
        _reader_spec(T.ArrayType(T.StringType()), None, TensorInfo("w", "str", (3,)))
    with pytest.raises(InferenceInputError, match="gives no image size"):
        _reader_spec(T.BinaryType(), Image(), TensorInfo("image", "uint8", (None, None, 3)))
