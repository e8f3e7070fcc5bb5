"""One column from Spark's Arrow to a tensor and back.

Users name how a column is read with the specs, ``from sparkdl.columns import Image, Sparse,
Ragged, Padded, Packed`` (:mod:`.specs`). Inside: :mod:`.arrow_numpy` (Arrow arrays to numpy and back),
:mod:`.arrow_rows` (Arrow batches to rows), :mod:`.readers` (a reader per column kind),
:mod:`.image_headers` (image sizes from their headers), :mod:`.tensors` (readers as TensorFlow
tensors) and :mod:`.tfrecords` (rows to ``tf.train.Example`` and back, TensorFlowOnSpark's ``dfutil``).
Imports :mod:`sparkdl.common` only.
"""

from .specs import Image, Packed, Padded, Ragged, Sparse

__all__ = ["Image", "Packed", "Padded", "Ragged", "Sparse"]
