"""``DataFeed.as_dataset`` over real sockets, with TensorFlow: one epoch per iteration of the
``tf.data.Dataset``. (The rest of the data plane without TensorFlow: tests/unit/feed/test_data_feed.py.)"""

import os

import numpy as np
import pytest
from feed_servers import feed_rows, make_server, secret, send_plan, server, target  # noqa: F401 - fixtures

from sparkdl.feed.data_feed import DataFeed

pytestmark = pytest.mark.timeout(120)


@pytest.mark.cluster  # imports TensorFlow
def test_as_dataset_one_epoch_per_iteration(server, secret):
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    tf = pytest.importorskip("tensorflow")
    tgt = target(secret, server)
    send_plan(server, secret, 1, 10, epochs=2)
    for epoch in range(2):
        rows = [(np.arange(4, dtype=np.float32) + i, i) for i in range(100 * epoch, 100 * epoch + 10)]
        feed_rows(tgt, rows, epoch=epoch)
    feed = DataFeed(server, feed_timeout=10)
    assert feed.steps_per_epoch(4) == 3 and feed.steps_per_epoch(10) == 1
    ds = feed.as_dataset(4, features=0, label=1, shapes={0: (2, 2)})
    assert ds.element_spec[0].shape.as_list() == [None, 2, 2] and ds.element_spec[1].dtype == tf.int64
    for epoch in range(2):
        batches = [(x.numpy(), y.numpy()) for x, y in ds]
        assert [len(y) for _, y in batches] == [4, 4, 2]
        labels = np.concatenate([y for _, y in batches])
        assert labels.tolist() == list(range(100 * epoch, 100 * epoch + 10))
        x = np.concatenate([x for x, _ in batches])
        assert x.shape == (10, 2, 2)
        np.testing.assert_array_equal(x.reshape(10, 4), labels[:, None] + np.arange(4))
    # The next run: no selection yields a dict of every column; a feature list yields a dict too.
    send_plan(server, secret, 2, 5)
    feed_rows(tgt, [(np.full(4, i, np.float32), i) for i in range(5)], session=2)
    assert feed.steps_per_epoch(2) == 3
    everything = list(feed.as_dataset(5))
    assert len(everything) == 1 and set(everything[0]) == {"0", "1"}
    assert everything[0]["0"].shape == (5, 4) and everything[0]["1"].numpy().tolist() == [0, 1, 2, 3, 4]
