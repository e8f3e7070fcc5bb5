"""Node functions for ``test_tensorboard_example.py``: the TensorBoard example's callbacks, and a hold
that keeps its chief's fit at the end of epoch 1 until the test has looked at TensorBoard."""

from __future__ import annotations

import os

from node_functions import wait_for_file

HELD = "held"  # the chief wrote epoch 1's summaries and waits
GO = "go"  # the test looked: the fit goes on


def hold_after_first_epoch(summary_callbacks, flags: str, ctx) -> list:
    """``summary_callbacks(ctx)`` (the example's), then on the chief a callback that, once epoch 1's
    summaries are on disk, creates ``<flags>/held`` and waits for ``<flags>/go`` (bounded)."""
    import keras

    callbacks = summary_callbacks(ctx)
    if not ctx.is_chief:
        return callbacks

    class Hold(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch == 0:
                open(os.path.join(flags, HELD), "w").close()
                if not wait_for_file(os.path.join(flags, GO)):
                    raise TimeoutError("the test never said go")

    return [*callbacks, Hold()]
