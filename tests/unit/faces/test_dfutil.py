"""sparkdl.dfutil without Spark or TensorFlow: columns it cannot write are named. (TFRecord files
written and read back, and read inside a node: tests/cluster/faces/test_dfutil_cluster.py.)"""

from __future__ import annotations

import pytest

from sparkdl import dfutil

pytestmark = pytest.mark.timeout(300)


def test_unsupported_columns_are_named():
    with pytest.raises(ValueError, match=r"column 'm' has type map<string,int>"):
        dfutil.toTFExample([("ok", "int"), ("m", "map<string,int>")])
    assert not dfutil.isLoadedDF(object())
