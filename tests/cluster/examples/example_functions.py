"""Node functions for the examples' tests (``test_examples.py``), run in TF nodes: an example's own
``map_fun`` with its data and its fit swapped for what the test checks."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def load_example(script: str):
    """The example module at ``script`` (from the repository's root), imported under its own name;
    its functions travel to the executors by value (the executors cannot import an example by name)."""
    from pyspark import cloudpickle

    path = ROOT / script
    name = f"example_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    cloudpickle.register_pickle_by_value(module)
    return module


def shards_as_mwms_deals_them(main_fun, rows: int, epochs: int, args, ctx) -> dict:
    """Run ``main_fun`` (``examples/mnist/mnist_tf.py``'s) with ``digits_common`` giving it ``rows``
    training rows whose pixel is the row's id, and instead of its fit, iterate ``epochs`` times over
    the dataset it built as MultiWorkerMirroredStrategy distributes it (auto-sharding, rebatching);
    returns the ids this node got, per epoch (``{"0": [...], ...}``)."""
    import digits_common
    import numpy as np

    ids = np.arange(rows, dtype="float32").reshape(rows, 1)
    digits_common.load_digits_split = lambda: ((ids, np.zeros(rows, "int64")), (ids[:0], np.zeros(0, "int64")))
    seen: dict[str, list[int]] = {}

    def iterate(strategy, dataset, ctx, args, build=None) -> None:
        distributed = strategy.experimental_distribute_dataset(dataset)
        for epoch in range(epochs):
            got = seen.setdefault(str(epoch), [])
            for features, _ in distributed:
                for local in strategy.experimental_local_results(features):
                    got.extend(int(i) for i in local.numpy().ravel())

    digits_common.fit_and_export = iterate
    main_fun(args, ctx)
    return seen
