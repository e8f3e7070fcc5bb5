"""Arrow IPC framing for feed data: record batches and inference results as binary frames.

Data frames are Arrow IPC streams (one record batch each) carried as binary frames on an
authenticated ``Channel``, between the control messages of a feed stream (``sparkdl/transport/protocol.py``
defines those and the order of each exchange). Nothing here unpickles anything.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from .columns import FeedDataError
from .results import decode_results, encode_results

TRAIN_SPLIT = "train"
VALIDATION_SPLIT = "validation"


def encode_batch(batch: pa.RecordBatch) -> pa.Buffer:
    """One record batch as a self-describing Arrow IPC stream buffer."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue()


def decode_batch(data) -> pa.RecordBatch:
    """The record batch inside an IPC stream buffer (zero-copy over ``data``), fully validated.

    A frame comes from a peer, so nothing in it is trusted: it must hold exactly one record
    batch, without dictionary encoding or compression (sparkdl never sends either; both let a
    small frame expand far past the queue's bound), whose offsets and lengths stay inside its
    buffers (Arrow's full validation). Anything else raises ``FeedDataError`` with a short
    message (Arrow's own can quote the frame's bytes at length).
    """
    try:
        reader = pa.ipc.open_stream(pa.py_buffer(data))
        if any(pa.types.is_dictionary(field.type) for field in reader.schema):
            raise FeedDataError("dictionary-encoded columns are not accepted")
        batch = reader.read_next_batch()
        try:
            reader.read_next_batch()
        except StopIteration:
            pass
        else:
            raise FeedDataError("a frame must hold one record batch")
        if batch.get_total_buffer_size() > len(data):  # more data than the frame carried: compressed
            raise FeedDataError("compressed record batches are not accepted")
        for column in batch.columns:  # text is checked as bytes: a reader names a row that is not UTF-8
            column.view(_as_bytes(column.type)).validate(full=True)
    except FeedDataError as exc:
        raise FeedDataError(f"invalid Arrow frame of {len(data)} bytes: {exc}") from None
    except (pa.ArrowException, StopIteration, OSError, ValueError, IndexError, TypeError) as exc:
        reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise FeedDataError(f"invalid Arrow frame of {len(data)} bytes: {reason}") from None
    return batch


def _as_bytes(kind: pa.DataType) -> pa.DataType:
    """``kind`` with every string type made the binary type of the same layout."""
    if pa.types.is_string(kind):
        return pa.binary()
    if pa.types.is_large_string(kind):
        return pa.large_binary()
    if pa.types.is_list(kind):
        return pa.list_(_as_bytes(kind.value_type))
    if pa.types.is_large_list(kind):
        return pa.large_list(_as_bytes(kind.value_type))
    if pa.types.is_fixed_size_list(kind):
        return pa.list_(_as_bytes(kind.value_type), kind.list_size)
    if pa.types.is_struct(kind):
        return pa.struct([field.with_type(_as_bytes(field.type)) for field in kind])
    return kind


def results_to_batch(results: Any) -> pa.RecordBatch:
    """Inference results (a list of per-row values, or an array with one row per input row) as a
    record batch that keeps each row's type (see ``results.py``)."""
    return encode_results(results)


def batch_to_results(batch: pa.RecordBatch) -> list:
    """Per-row values back from :func:`results_to_batch`, with the types ``map_fun`` gave them."""
    return decode_results(batch)
