"""sparkdl.columns.specs: column specs and their options are checked when made."""

from __future__ import annotations

import pyarrow as pa
import pytest

from sparkdl.columns.readers import (
    ColumnSpecError,
    reader_for,
)
from sparkdl.columns.specs import Image, check_bad_rows, check_columns
from sparkdl.feed.dataset import NODE_CORES_ENV, decode_parallelism

pytestmark = pytest.mark.timeout(60)


def test_specs_and_options_are_checked():
    with pytest.raises(TypeError, match="a spec is one of Image, Sparse, Ragged, Padded"):
        check_columns({"x": "image"}, "feed.as_dataset")
    with pytest.raises(ValueError, match="give both, or neither"):
        Image(height=4)
    with pytest.raises(ValueError, match="'fail' or 'skip'"):
        check_bad_rows("ignore", "cluster.train")
    with pytest.raises(ColumnSpecError, match="arrays of strings: declare"):
        reader_for("w", pa.array([["a"], ["b", "c"]]))


def test_max_pixels_and_decoding_parallelism_are_checked(monkeypatch):
    with pytest.raises(ValueError, match=r"Image\(30000, 30000\) is more than max_pixels=67108864 pixels"):
        Image(30000, 30000)
    assert Image(30000, 30000, max_pixels=None).height == 30000
    with pytest.raises(ValueError, match=r"max_pixels=...\) must be a positive integer or None"):
        Image(max_pixels=0)
    monkeypatch.delenv(NODE_CORES_ENV, raising=False)
    assert decode_parallelism(Image()) == 1, "not the machine's cores: executors share the machine"
    monkeypatch.setenv(NODE_CORES_ENV, "3")  # what the node's launch task was given (sparkdl/node/launch.py)
    assert decode_parallelism(Image()) == 3 and decode_parallelism(Image(parallel=5)) == 5


def test_packed_declares_shape_and_dtype():
    from sparkdl.columns import Packed

    assert Packed(784).shape == (784,) and Packed([28, 28, 1]).row_bytes == 784 * 4
    assert Packed((2,), "float64").row_bytes == 16
    for bad in [dict(shape=(0,)), dict(shape=(2.5,)), dict(shape=(2,), dtype="str"), dict(shape=(2,), dtype="nope")]:
        with pytest.raises(ValueError, match="Packed"):
            Packed(**bad)
