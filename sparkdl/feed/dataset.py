"""``DataFeed.as_dataset``: a node's rows of a training run as a ``tf.data.Dataset`` for Keras.

The dataset yields what ``model.fit`` takes: ``x``, ``(x, y)`` or ``(x, y, sample_weight)``,
each a tensor, a dict of named inputs/outputs, or a tuple. Each column is read by a reader
(``sparkdl/columns/readers.py``: dense arrays, ``tf.string``, decoded images, ``tf.SparseTensor``,
``tf.RaggedTensor`` or padded arrays, as the column's spec says).

The pipeline: a Python generator reads blocks of whole batches (about ``BLOCK_BYTES``) from the
feed, checks their rows (a bad row fails naming its column, partition and row, or with
``cluster.train(bad_rows="skip")`` is marked, counted and reported to the driver), and yields
each column's parts (flat numpy buffers; no Python object per row). TensorFlow then assembles
per-row tensors (strings out of one buffer, ragged rows), cuts batches (``rebatch``, so a node
yields the same number of batches per epoch whatever it skips), drops skipped rows, and finishes
each batch (images decoded in parallel, sparse tensors, padding). Dense columns keep the direct
path: the generator yields the batch structure itself.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import numpy as np

from ..columns.arrow_rows import ORIGIN, describe_origin, vector_rows
from ..columns.readers import ColumnReader, ColumnSpecError, DenseReader, ImageReader, VectorReader, reader_for, take
from ..columns.specs import Image, check_columns
from . import aligned
from .columns import FeedDataError, bad_row_error
from .reader import FeedReader
from .wire import TRAIN_SPLIT

logger = logging.getLogger(__name__)

#: About how many bytes the generator reads per step (a whole number of batches).
BLOCK_BYTES = 4 << 20
#: The hidden part that marks rows to keep (``bad_rows="skip"``).
KEEP = "__sparkdl_keep"
#: A sparse Vector column read dense whose batches take this much (as much as a node's whole feed
#: queue) earns a hint in the driver's log that ``Sparse()`` keeps them as their non-zeros.
HUGE_DENSE_BATCH_BYTES = 64 << 20
#: ... when its dense rows are at least this many times the size of their non-zeros.
SPARSE_HINT_RATIO = 8


#: The attribute of each dataset ``as_dataset`` returns that holds its :class:`FeedDataset`.
FEED_DATASET_ATTR = "sparkdl_feed"


@dataclass(frozen=True)
class FeedDataset:
    """What sparkdl knows of a dataset ``as_dataset`` returned that Keras cannot tell from it.

    Each iteration ends with its epoch's last batch, so Keras, which does not know the length,
    runs it to its end. ``shuffled``: the feed gives the rows in a new order every epoch
    (``cluster.train(shuffle=True)``, the default), so Keras need not shuffle them.
    """

    shuffled: bool


def feed_dataset(data) -> FeedDataset | None:
    """The :class:`FeedDataset` of ``data`` if ``as_dataset`` returned it; None for anything else
    (a dataset built from it included: its length and order are the user's)."""
    found = getattr(data, FEED_DATASET_ATTR, None)
    return found if isinstance(found, FeedDataset) else None


def keeps_feed_order(derived, source):
    """``derived`` (``source.map(f)``: a row-for-row change that keeps every batch and its order)
    marked as the feed dataset ``source`` is; returns ``derived``. For sparkdl's own code only: a
    user's change may drop, repeat or reorder batches, which Keras must then be told of as usual."""
    found = feed_dataset(source)
    if found is not None:
        setattr(derived, FEED_DATASET_ATTR, found)
    return derived


#: In a node's environment: the cores Spark gave its launch task (``sparkdl/node/launch.py``).
NODE_CORES_ENV = "SPARKDL_NODE_CORES"


def decode_parallelism(spec: Image) -> int:
    """How many images a node decodes at once: ``spec.parallel``, else the cores of its launch
    task (never the machine's: executors share it), else one."""
    if spec.parallel:
        return spec.parallel
    cores = os.environ.get(NODE_CORES_ENV, "")
    return int(cores) if cores.isdigit() and int(cores) > 0 else 1


class Selection:
    """Which columns make ``x``, ``y`` and ``sample_weight``, and in what structure."""

    def __init__(self, features, label, sample_weight, names: list[str], input_mapping: dict | None):
        self._names = set(names)
        if features is None and label is None and sample_weight is None:
            mapping = input_mapping or {n: n for n in names}
            self.x = {tensor: self._column(column) for column, tensor in mapping.items()}
            self.y = self.w = None
        else:
            if features is None:
                raise ValueError("feed.as_dataset(label=...) needs features=... too")
            self.x = self._structure(features, input_mapping or {}, named=True)
            self.y = self._structure(label) if label is not None else None
            self.w = self._structure(sample_weight) if sample_weight is not None else None
            if self.w is not None and self.y is None:
                raise ValueError("feed.as_dataset(sample_weight=...) needs label=... (Keras: fit(x, y, sample_weight))")

    def _column(self, name) -> str:
        name = str(name)
        if name not in self._names:
            raise FeedDataError(f"column {name!r} is not in the fed data; columns are {sorted(self._names)}")
        return name

    def _structure(self, given, renames: dict | None = None, named: bool = False):
        """A column name, a dict ``{name: column}``, or a list: features as a dict keyed by column
        (or ``input_mapping``'s tensor name), labels and weights as a tuple (Keras' outputs in order)."""
        if isinstance(given, dict):
            return {str(key): self._column(column) for key, column in given.items()}
        if isinstance(given, (list, tuple)):
            columns = [self._column(c) for c in given]
            return {(renames or {}).get(c, c): c for c in columns} if named else tuple(columns)
        return self._column(given)

    def columns(self) -> list[str]:
        """Every column the dataset reads, once each."""
        found: list[str] = []
        for part in (self.x, self.y, self.w):
            for name in _leaves(part):
                if name not in found:
                    found.append(name)
        return found

    def pick(self, values: dict):
        """The element Keras gets, from tensors by column."""
        build = lambda part: _map(part, values.__getitem__)  # noqa: E731
        if self.y is None:
            return build(self.x)
        if self.w is None:
            return build(self.x), build(self.y)
        return build(self.x), build(self.y), build(self.w)


def _leaves(part) -> list[str]:
    if part is None:
        return []
    if isinstance(part, dict):
        return list(part.values())
    if isinstance(part, tuple):
        return list(part)
    return [part]


def _map(part, function):
    if isinstance(part, dict):
        return {key: function(name) for key, name in part.items()}
    if isinstance(part, tuple):
        return tuple(function(name) for name in part)
    return function(part)


def build_dataset(
    reader: FeedReader,
    input_mapping: dict | None,
    batch_size: int,
    features,
    label,
    shapes,
    split,
    all_epochs,
    sample_weight,
    columns,
):
    """The dataset of ``DataFeed.as_dataset`` (see its docstring), read through ``reader``."""
    specs = check_columns(columns, "feed.as_dataset")
    plan = reader.current_plan()
    rows_per_epoch = reader.split_rows(plan, split, "as_dataset")
    if all_epochs and split != "train":
        raise ValueError(
            "feed.as_dataset(all_epochs=True) reads the training split only: Keras rebuilds the "
            "validation iterator every epoch, so validation needs one epoch per iteration"
        )
    example, names = reader.example(plan.session, reader.read_timeout)
    selection = Selection(features, label, sample_weight, names, input_mapping)
    readers = column_readers(example, names, selection, specs, shapes)
    for name, hint in _sparse_hints(readers, batch_size).items():
        reader.warn_once(f"sparse-hint:{reader.qname}:{name}", hint)
    blocks = BlockSource(reader, plan, split, all_epochs, readers, selection, block_rows(readers, batch_size))
    # With all_epochs the batch sizes cycle through one epoch's, so each epoch ends on its own last
    # batch, as Keras expects.
    batch_sizes = _epoch_batch_sizes(rows_per_epoch, batch_size) if all_epochs else batch_size
    dataset = _direct_dataset(blocks, batch_sizes) if blocks.direct else _assembled_dataset(blocks, batch_sizes)
    setattr(dataset, FEED_DATASET_ATTR, FeedDataset(shuffled=plan.shuffle and split == TRAIN_SPLIT))
    return dataset


def column_readers(
    example: dict, names: list[str], selection: Selection, specs: dict, shapes
) -> dict[str, ColumnReader]:
    """A reader per column the dataset reads, made from its spec, its shape and the run's first row."""
    unknown = sorted(set(specs) - set(names))
    if unknown:
        raise FeedDataError(f"feed.as_dataset(columns=...) names {unknown}, which are not fed; columns are {names}")
    shapes = {str(k): tuple(v) for k, v in (shapes or {}).items()}
    try:
        return {
            name: reader_for(name, example[name], specs.get(name), shapes.get(name)) for name in selection.columns()
        }
    except ColumnSpecError as exc:
        raise FeedDataError(str(exc)) from None


class BlockSource:
    """The dataset's Python generator: blocks of whole batches of one run's ``split``, read through
    the feed's reader, their rows checked before they count as read (a bad row fails naming its
    column, partition and row, or with ``bad_rows="skip"`` is marked, counted and reported), then
    each column's parts (flat numpy buffers: no Python object per row).

    ``direct`` (dense columns, nothing skipped): a block is the batch structure itself, made
    tensors without a copy. Otherwise a block is every reader's parts (and the ``KEEP`` mark)."""

    def __init__(self, reader: FeedReader, plan, split: str, all_epochs: bool, readers: dict, selection, block: int):
        self.reader = reader
        self.plan = plan
        self.split = split
        self.all_epochs = all_epochs
        self.readers = readers
        self.selection = selection
        self.rows_per_block = block
        self.rows_per_epoch = plan.split_rows(split)
        self.skip = plan.bad_rows == "skip"
        self.direct = not self.skip and all(
            isinstance(r, DenseReader) or (isinstance(r, VectorReader) and not r.sparse) for r in readers.values()
        )

    def __call__(self):
        """One iteration: an epoch's blocks (``all_epochs``: every epoch the run has left)."""
        import tensorflow as tf

        session = self.plan.session
        left = self._rows_to_read()
        checked = []  # each block's rows are checked before they count as read: a bad one fails cluster.train
        check = lambda columns, count: checked.append(self._check(columns, count))  # noqa: E731
        while left > 0:
            # A block ends with its epoch: Keras ends the epoch (and validates) on it, while the next
            # epoch's rows may wait on the driver, which waits for that validation.
            in_epoch = self.rows_per_epoch - self.reader.rows_read(session, self.split) % self.rows_per_epoch
            columns, _, count = self.reader.read_run(
                session, self.split, min(self.rows_per_block, left, in_epoch), check
            )
            if not count:
                logger.warning("the feed ended %d rows before the end of the epoch", left)
                return
            left -= count
            keep = checked.pop()
            parts = self._parts(columns, keep)
            if self.direct:  # aligned blocks become tensors without a copy (twice the rate of a cached epoch)
                yield tf.nest.map_structure(aligned.ensure, self.selection.pick(parts))
            else:
                yield self._generator_parts(parts, keep, count)

    def _rows_to_read(self) -> int:
        """Rows this iteration reads; a new iteration of the training split also ends the validation
        of the epochs before it (Keras starts an epoch's iteration once the last one's validation ended)."""
        if self.all_epochs:  # every epoch fed (after a resuming relaunch, those not completed)
            return self.plan.total_rows(self.split) - self.reader.rows_read(self.plan.session, self.split)
        if self.split == "train":
            self.reader.training_iteration_begins(self.plan.session)
        return self.rows_per_epoch

    def _check(self, columns: dict, count: int) -> np.ndarray | None:
        report = lambda n, first: self.reader.report_bad_rows(self.plan.session, n, first)  # noqa: E731
        return _check_block(self.readers, columns, count, self.skip, report)

    def _parts(self, columns: dict, keep: np.ndarray | None) -> dict:
        """Every reader's parts of a block (skipped rows replaced by a good one, dropped after batching)."""
        parts = {}
        for name, reader in self.readers.items():
            column = columns[name] if keep is None else _without_bad_rows(columns[name], keep, reader)
            parts.update(reader.parts(column))
        return parts

    def _generator_parts(self, parts: dict, keep: np.ndarray | None, count: int) -> dict:
        from ..columns import tensors as tf_columns

        parts = {
            k: (aligned.ensure(v) if isinstance(v, np.ndarray) else v)
            for k, v in tf_columns.generator_parts(parts).items()
        }
        if self.skip:
            parts[KEEP] = np.ones(count, bool) if keep is None else keep
        return parts


def _options():
    """Auto-sharding off (each node already holds only its own rows), tf.data autotuning off."""
    import tensorflow as tf

    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    options.autotune.enabled = False
    return options


# The generator yields blocks of whole batches (about BLOCK_BYTES): its GIL-bound Python step runs
# once per block and TensorFlow cuts batches in C++ (a per-batch generator made fit under MWMS about
# 2x slower). A fixed prefetch overlaps reading and training without the autotuner, which can hold
# up fit()'s end for a minute.


def _direct_dataset(blocks: BlockSource, batch_sizes):
    """Dense columns: the generator yields the batch structure itself, rebatched."""
    import tensorflow as tf

    from ..columns import tensors as tf_columns

    specs = {k: v for reader in blocks.readers.values() for k, v in tf_columns.part_specs(reader).items()}
    dataset = tf.data.Dataset.from_generator(blocks, output_signature=blocks.selection.pick(specs))
    return dataset.rebatch(batch_sizes).prefetch(2).with_options(_options())


def _assembled_dataset(blocks: BlockSource, batch_sizes):
    """Other columns: TensorFlow assembles per-row tensors from the parts (strings out of one
    buffer, ragged rows), cuts batches, drops skipped rows and finishes each batch (images decoded
    in parallel, sparse tensors, padding)."""
    import tensorflow as tf

    from ..columns import tensors as tf_columns

    readers, skip = blocks.readers, blocks.skip
    signature = {k: v for reader in readers.values() for k, v in tf_columns.part_specs(reader).items()}
    if skip:
        signature[KEEP] = tf.TensorSpec((None,), tf.bool)
    # One batch finishes at a time (prefetch overlaps it with training), its images `parallel`
    # at a time: at most that many images are decoded, at their full size, at once.
    parallel = {name: decode_parallelism(r.spec) for name, r in readers.items() if isinstance(r, ImageReader)}

    def assemble(parts):
        rows = {name: tf_columns.assemble(reader, parts) for name, reader in readers.items()}
        if skip:
            rows[KEEP] = parts[KEEP]
        return rows

    def finish(rows):
        if skip:
            rows = {name: tf_columns.keep_rows(rows[name], rows[KEEP]) for name in readers}
        finished = {
            name: tf_columns.finish(reader, rows[name], parallel.get(name, 1)) for name, reader in readers.items()
        }
        return blocks.selection.pick(finished)

    dataset = tf.data.Dataset.from_generator(blocks, output_signature=signature)
    dataset = dataset.map(assemble).rebatch(batch_sizes).map(finish)
    return dataset.prefetch(2).with_options(_options())


def block_rows(readers: dict[str, ColumnReader], batch_size: int) -> int:
    """Rows the generator reads per step: whole batches, about ``BLOCK_BYTES`` of rows as the readers
    make them (a wide Vector read dense counts dense), and at least one batch."""
    row_bytes = sum(reader.row_bytes() for reader in readers.values()) or 1
    return batch_size * max(1, BLOCK_BYTES // (row_bytes * batch_size))


def _sparse_hints(readers: dict[str, ColumnReader], batch_size: int) -> dict[str, str]:
    """Per Vector column read dense whose batches would be huge (``HUGE_DENSE_BATCH_BYTES``) though
    its rows are sparse: what to say (``Sparse()`` exists)."""
    hints = {}
    for name, reader in readers.items():
        if not isinstance(reader, VectorReader) or reader.sparse:
            continue
        dense = batch_size * reader.row_bytes()
        if dense < HUGE_DENSE_BATCH_BYTES or dense < SPARSE_HINT_RATIO * batch_size * reader.fed_row_bytes():
            continue
        non_zeros = len(vector_rows(reader.example).values)  # the reader's example: one row without problems
        hints[name] = (
            f"column {name!r} holds Vectors of {reader.size:,} values, read dense (the default): a batch of "
            f"{batch_size} rows takes {dense / 1e6:,.0f} MB, though its first row holds {non_zeros:,} "
            f"non-zeros; as_dataset(..., columns={{{name!r}: Sparse()}}) gives tf.SparseTensor batches "
            "whose memory follows the non-zeros"
        )
    return hints


def _check_block(readers: dict[str, ColumnReader], columns: dict, count: int, skip: bool, report) -> np.ndarray | None:
    """The rows to keep (None: all), after every reader's checks. Without ``skip`` the first bad
    row raises, naming its column, partition and row; with it, bad rows are reported (count and
    the first) and marked."""
    origins = columns.get(ORIGIN)
    bad = None
    first = ""
    for name, reader in readers.items():
        for problem in reader.problems(columns[name]):
            if not skip:
                raise bad_row_error(name, problem, origins)
            if bad is None:
                bad = np.zeros(count, bool)
            if not first:
                row = int(np.flatnonzero(problem.mask)[0])
                where = describe_origin(int(origins[row]) if origins is not None else None)
                first = f"column {name!r}, {where}: {problem.reason}"
            bad |= problem.mask
    if bad is None or not bad.any():
        return None
    report(int(bad.sum()), first)
    return ~bad


def _without_bad_rows(column, keep: np.ndarray, reader: ColumnReader):
    """``column`` with each bad row replaced by a good one (the block's first, else the reader's
    example row), so the parts are whole; the rows are dropped once batched."""
    good = np.flatnonzero(keep)
    if len(good):
        index = np.where(keep, np.arange(len(keep)), good[0])
        return take(column, index)
    return take(reader.example, np.zeros(len(keep), dtype=np.int64))


def _epoch_batch_sizes(rows_per_epoch: int, batch_size: int) -> int | list[int]:
    """The batch sizes of one epoch: ``batch_size``, or its full batches and the smaller last one."""
    full, last = divmod(rows_per_epoch, batch_size)
    return [batch_size] * full + [last] if last else batch_size
