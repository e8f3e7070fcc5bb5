"""sparkdl.node.keras3_multi_worker: which Keras 3 releases the multi-worker layer is verified on."""

import pytest

from sparkdl.node import keras3_multi_worker

pytestmark = pytest.mark.timeout(60)


def test_verified_releases():
    assert keras3_multi_worker.verified("3.15.0") and keras3_multi_worker.verified("3.15.1")
    assert not keras3_multi_worker.verified("3.1.5") and not keras3_multi_worker.verified("x")
