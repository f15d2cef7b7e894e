"""PyTorch reads a dataset (or a window of them) without TensorFlow.

    from beam_tfrecords.read.torch import Dataset
    ds = Dataset("out/events/2026-11-*", "train", shuffle_seed=7)
    loader = torch.utils.data.DataLoader(ds, batch_size=64, num_workers=2,
                                         collate_fn=ds.collate)
    for epoch in range(3):
        ds.set_epoch(epoch)
        for batch in loader: ...

An `IterableDataset` of dicts of numpy arrays (beam_tfrecords.read.arrays:
SequenceExamples as {"context", "feature_lists"}); `ds.collate` batches
them into tensors ({"values", "lengths"} for what varies; text and bytes
as numpy object arrays), as `batch_size=` does, column by column, in the
workers. Records are inflated by zlib and decoded over whole batches by
the native core (beam_tfrecords.read.wire_columns: numpy where the core is
not installed; tfx-bsl's C++ decoder for Examples in another layout, and
read.sequence_columns' pure-Python reader for SequenceExamples). A
record's dict makes its values when first read (read.arrays.Row), so
records that only go to `ds.collate` never make them.

Shares (beam_tfrecords.core.shares): with torch.distributed initialised, the
rank's exact share (rank, world_size) unless `shard` is given; each
DataLoader worker reads its portion of it, so no record is read twice and the
ranks' shares differ by at most one record (`drop_remainder=True`: equal,
so that collective steps never wait on a rank with one batch fewer).
`state_dict()` / `load_state_dict()` resume mid-epoch (torchdata's
StatefulDataLoader calls them on each worker's copy).

A global shuffle (`shuffle="global"`: a permutation of every record of
the split from (seed, epoch), read through the shards' indexes) comes
with an exact resume from the trainer's side:

    ds = Dataset(path, "train", shuffle_seed=7, shuffle="global",
                 batch_size=256)
    loader = ds.loader(num_workers=2)     # a DataLoader that counts
    for batch in loader:
        ...
        state = loader.state_dict()       # small JSON: records taken
    # after a restart (or a killed worker):
    loader = ds.loader(num_workers=2); loader.load_state_dict(state)

Random access: `IndexedDataset` is a map-style Dataset (`len`,
`ds[i]`, and `__getitems__` for a batch of indices: each gzip member
inflated once); `GlobalSampler` gives the same permutation and shares
as indices, and `IndexedDataset.loader` resumes it the same way.

Needs the `torch` extra: pip install beam-tfrecords[torch].
"""

import contextlib
import functools
import gc
import multiprocessing
import operator
import queue
import sys
import threading
from typing import Any, Dict, FrozenSet, Iterator, Optional, Tuple

import numpy as np
import pyarrow as pa
import torch
import torch.utils.data
from torch.utils.data._utils import fetch as _fetch
from torch.utils.data._utils.collate import default_convert

from beam_tfrecords.core.errors import InputError
from beam_tfrecords.core.shard_formats import fork_safe
from beam_tfrecords.read.arrays import RecordDecoder, cuts, run_of
from beam_tfrecords.read.global_order import (LOOKAHEAD, GlobalOrder,
                                              Positions)
from beam_tfrecords.read.random_access import RecordIndex
from beam_tfrecords.read.reader import dataset_schema
from beam_tfrecords.read.stream import (SHUFFLE_BUFFER, RecordStream,
                                       check_state, state_ints)
from beam_tfrecords.read.window import Datasets, window
from beam_tfrecords.read.wire_columns import Text, objects

__all__ = ["Batch", "Dataset", "IndexedDataset", "GlobalSampler", "Loader",
           "collate"]

_GROUP = 8192


class Batch(dict):
  """A batch: a dict of tensors (text and bytes: numpy object arrays)
  that crosses from a DataLoader worker to the training process as numpy
  arrays in the pickle, one copy each, instead of a shared-memory segment
  and a file descriptor per tensor (the default for tensors: 25 tensors
  a batch cost 0.3 ms each, more than decoding; measured), and text as
  Arrow's buffers instead of a pickled object per value. The other side
  turns them into tensors and object arrays again. (Where nothing of the
  user's sees the batch in the worker, it crosses as a `_Wire` instead,
  and is made a Batch only on arrival.)"""

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    # id -> (a read-only object array made from Text, that Text): sent
    # as the Text while it is that array.
    self._texts: Dict[int, Tuple[np.ndarray, Text]] = {}

  def __reduce__(self):
    return (_batch, (_packed(dict(self), self._texts),))

  def __copy__(self):  # (the DataLoader copies it; not through pickling)
    out = Batch(self)
    out._texts = self._texts  # pylint: disable=protected-access
    return out


def _shipped(columns: Dict[str, Any]) -> Batch:
  """A batch made in a DataLoader worker: its text as read-only object
  arrays, each remembered with the Arrow array it was made from (what
  the pickle then holds)."""
  texts: Dict[int, Tuple[np.ndarray, Text]] = {}

  def made(value):
    if isinstance(value, dict):
      return {k: made(v) for k, v in value.items()}
    if isinstance(value, Text):
      array = value.numpy()
      array.flags.writeable = False
      texts[id(array)] = (array, value)
      return array
    return value
  batch = Batch(_tensors(made(columns)))
  batch._texts = texts  # pylint: disable=protected-access
  return batch


def _collated_for(columns: Dict[str, Any], caller: Any) -> Any:
  """`_made` by a collate_fn of ours, called from the frame `caller`."""
  return _made(columns, torch.utils.data.get_worker_info() is not None,
               _to_pipe(caller))


def _made(columns: Dict[str, Any], worker: bool, to_pipe: bool = False
          ) -> Any:
  """A batch of decode_batch(text=True)'s columns: in the training
  process with its text as object arrays; in a DataLoader worker
  `_shipped`, or a `_Wire` where torch takes it straight to the pipe
  (`to_pipe`: see `_to_pipe`)."""
  if to_pipe:
    return _Wire(columns)
  return _shipped(columns) if worker else Batch(_tensors(objects(columns)))


class _Wire:
  """A batch that goes from a DataLoader worker straight into the pipe
  to the training process, no code of the user's in between
  (`_to_pipe`): its columns as decode_batch(text=True) cut them (numpy
  arrays, Text), pickled as they are (Text compacted), and unpickled as
  the Batch the training process would have made. The worker makes no
  tensors and no object arrays nobody would see: for 1M flight records
  in batches of 1,024, 0.4 CPU-s of object arrays (5M strings) alone."""

  __slots__ = ("columns",)

  def __init__(self, columns: Dict[str, Any]):
    self.columns = columns

  def __reduce__(self):
    return (_batch, (_compacted(self.columns),))


def _compacted(value):
  """Text (in nested dicts) with only its rows' buffers: a cut's Text
  is a slice of its whole group's."""
  if isinstance(value, dict):
    return {k: _compacted(v) for k, v in value.items()}
  return value.compact() if isinstance(value, Text) else value


# What a DataLoader worker's fetcher (torch/utils/data/_utils/fetch.py)
# takes from the dataset or the collate_fn and then puts on the pipe
# unchanged (torch/utils/data/_utils/worker.py: _worker_loop).
_ITERABLE_FETCHER = getattr(_fetch, "_IterableDatasetFetcher", None)
_FETCHES = frozenset(
    getattr(getattr(c, "fetch", None), "__code__", None)
    for c in (_ITERABLE_FETCHER, getattr(_fetch, "_MapDatasetFetcher", None))
    ) - {None}


def _to_pipe(frame: Any, iterating: bool = False) -> bool:
  """Whether what a DataLoader worker's fetcher takes from us goes
  straight into the pipe to the training process: `frame` is our
  caller's, torch's fetcher of the worker's own dataset (a loader made
  inside the worker has its own fetchers: not those) either calling a
  collate_fn of ours (which made the batch), or (`iterating`) calling
  iter(dataset) for a DataLoader that passes each item through torch's
  default_convert only (batch_size=None and no collate_fn:
  default_convert leaves unknown objects as they are). Anything else (the
  training process, a collate_fn or dataset of the user's, another
  loader's fetcher, another torch) is False: then the batch is made as
  the user would see it."""
  info = torch.utils.data.get_worker_info()
  if frame is None or info is None:
    return False
  code, here = frame.f_code, frame.f_locals
  if not iterating:
    return code in _FETCHES and getattr(
        here.get("self"), "dataset", None) is info.dataset
  if _ITERABLE_FETCHER is None or \
      code is not getattr(_ITERABLE_FETCHER.__init__, "__code__", None):
    return False
  return here.get("dataset") is info.dataset and \
      here.get("auto_collation") is False and \
      here.get("collate_fn") is default_convert


def _packed(value, texts: Dict[int, Tuple[np.ndarray, Text]]):
  """For pickling, in nested dicts: tensors numpy can hold (on the CPU,
  without grad) as numpy arrays; object arrays of str or bytes as
  columns.Text (Arrow's buffers, compacted: not a slice's whole
  buffers); anything else as it is."""
  if isinstance(value, dict):
    return {k: _packed(v, texts) for k, v in value.items()}
  made = texts.get(id(value))
  if made is not None and made[0] is value and not value.flags.writeable:
    return made[1].compact()
  if isinstance(value, torch.Tensor) and value.device.type == "cpu" and \
      not value.requires_grad and value.layout == torch.strided:
    try:
      return value.numpy()
    except TypeError:  # bfloat16 and others numpy has no type for
      return value
  if isinstance(value, np.ndarray) and value.dtype == object:
    return _as_text(value)
  return value


def _as_text(value: np.ndarray):
  """All str or all bytes (Arrow infers which, in C++): Text; anything
  else (mixed, None, other objects, empty) as it is."""
  try:
    array = pa.array(value.ravel())
  except (pa.ArrowException, TypeError, ValueError):
    return value
  if array.null_count or not (pa.types.is_string(array.type) or
                              pa.types.is_binary(array.type)):
    return value
  if pa.types.is_binary(array.type) and not all(
      isinstance(v, bytes) for v in value.flat):  # str and bytes mixed
    return value
  return Text(array, value.shape)


def _batch(packed) -> Batch:
  return Batch(_tensors(objects(packed)))


def collate(records, fixed: Optional[FrozenSet[str]] = None,
            path: str = "") -> Batch:
  """A DataLoader `collate_fn` for the per-record dicts: a fixed feature
  becomes one tensor [batch, ...], any other {"values": the values back to
  back, "lengths": per record} (a feature list: rows [steps, ...], or when
  its steps vary {"values", "lengths" (per step), "steps" (per record)});
  text and bytes as numpy object arrays in the same places (torch has
  no string tensors). `fixed`: the features the schema fixes
  (Dataset.collate passes them: then a batch is what `batch_size=` gives);
  None: those whose values have one shape in this batch.

  Records the dataset decoded and nobody changed (`arrays.Row`), a run
  of them in the order read, are cut from the columns they were decoded
  as instead (the same values, types and layout; in a DataLoader worker
  the batch crosses as Dataset(batch_size=...)'s does)."""
  run = run_of(records, fixed) if fixed is not None and not path else None
  if run is not None:
    decoded, start = run
    return _collated_for(decoded.cut(start, start + len(records)),
                         sys._getframe(1))  # pylint: disable=protected-access
  return Batch(_tensors(_collated(records, fixed, path)))


def _collated(records, fixed: Optional[FrozenSet[str]], path: str):
  """`collate`'s numpy arrays."""
  first = records[0]
  if isinstance(first, dict):
    keys = list(first)
    if len(keys) < 2:
      return {k: _collated([r[k] for r in records], fixed, f"{path}{k}/")
              for k in keys}
    # Each key's values in one pass: the records' tuples, transposed.
    per_key = zip(*map(operator.itemgetter(*keys), records))
    return {k: _collated(list(v), fixed, f"{path}{k}/")
            for k, v in zip(keys, per_key)}
  if isinstance(first, list):  # feature lists whose steps vary
    steps = [_array(a) for r in records for a in r]
    return {"values": np.concatenate(steps) if steps else np.zeros(0),
            "lengths": np.array([len(a) for a in steps], np.int64),
            "steps": np.array([len(r) for r in records], np.int64)}
  if isinstance(first, (np.generic, str, bytes)) and (
      fixed is None or path.rstrip("/") in fixed):
    # Scalars of one type (numpy's, or text): the stack below, without
    # an array per value.
    if len(set(map(type, records))) == 1:
      dtype = first.dtype if isinstance(first, np.generic) else object
      out = np.empty(len(records), dtype)
      out[:] = records
      return out
  arrays = records if set(map(type, records)) == {np.ndarray} else [
      _array(r) for r in records]
  stack = path.rstrip("/") in fixed if fixed is not None else all(
      a.shape == arrays[0].shape for a in arrays)
  if stack:
    return np.stack(arrays)
  return {"values": np.concatenate(arrays),
          "lengths": np.array([len(a) for a in arrays], np.int64)}


def _array(value) -> np.ndarray:
  """A record's value as an array; text and bytes as objects (numpy's
  own string types would pad, and strip trailing NULs from bytes)."""
  if isinstance(value, (str, bytes)):
    return np.array(value, dtype=object)
  return np.asarray(value)


def _tensors(value):
  """Numpy columns -> tensors, in nested dicts (text and bytes stay
  numpy object arrays)."""
  if isinstance(value, dict):
    return {k: _tensors(v) for k, v in value.items()}
  if not isinstance(value, np.ndarray) or value.dtype.kind in "OUS":
    return value
  # (torch wants a writable array; the check costs less than np.require's)
  return torch.from_numpy(value if value.flags.writeable else value.copy())


def _ahead(items: Iterator[Any]) -> Iterator[Any]:
  """`items`, the next one made in a thread while this one is used; the
  thread's error is raised here, and it stops when this is closed."""
  out: "queue.Queue[Tuple[str, Any]]" = queue.Queue(maxsize=1)
  stop = threading.Event()

  def put(message) -> bool:
    while not stop.is_set():
      try:
        out.put(message, timeout=0.1)
        return True
      except queue.Full:
        continue
    return False  # closed: nobody takes it

  def run():
    try:
      for item in items:
        if not put(("item", item)):
          return
      put(("end", None))
    except BaseException as e:  # pylint: disable=broad-except
      put(("error", e))

  thread = threading.Thread(target=run, daemon=True, name="btr-decode")
  thread.start()
  try:
    while True:
      kind, item = out.get()
      if kind == "end":
        return
      if kind == "error":
        raise item
      yield item
  finally:
    stop.set()


def _rank_share() -> Optional[Tuple[int, int]]:
  dist = torch.distributed
  if dist.is_available() and dist.is_initialized():
    return dist.get_rank(), dist.get_world_size()
  return None


class Dataset(torch.utils.data.IterableDataset):
  """The records of one split, for this rank and DataLoader worker.

  Args:
    datasets: a dataset folder, a glob, a pin file, or a list of them.
    split: the split.
    shard: (index, count); None: torch.distributed's (rank, world size)
      when it is initialised, else every record.
    drop_remainder: every share ⌊N/count⌋ records.
    shuffle_seed: a seeded order (files by (seed, epoch), then a buffer
      of `shuffle_buffer` records); None: the files' order.
    epoch: the epoch's order (`set_epoch` changes it).
    batch_size: None: one dict per record (batch them with a DataLoader
      and `collate`); N: whole batches of N records, decoded column by
      column (far faster; give the DataLoader batch_size=None): a tensor
      [N, *shape] for a fixed feature, {"values", "lengths"} tensors for
      a variable one (feature lists: beam_tfrecords.read.arrays). The last
      batch may be smaller.
    shuffle: with a seed, "buffer" (files in a seeded order, records
      through a buffer of `shuffle_buffer`) or "global" (a permutation of
      every record; needs the shards' indexes; with batch_size, the
      workers' batches come in the permutation's order and `loader()`
      resumes exactly).
  """

  def __init__(self, datasets: Datasets, split: str = "train",
               shard: Optional[Tuple[int, int]] = None,
               drop_remainder: bool = False,
               shuffle_seed: Optional[int] = None, epoch: int = 0,
               shuffle_buffer: int = SHUFFLE_BUFFER,
               batch_size: Optional[int] = None, shuffle: str = "buffer"):
    super().__init__()
    # No shard: torch.distributed's, looked up when iterating (the
    # Dataset may be made before init_process_group).
    self._shard = shard
    self._stream = RecordStream(
        datasets, split, shard or _rank_share(), drop_remainder,
        shuffle_seed, epoch, shuffle_buffer, shuffle=shuffle,
        block=batch_size or 1)
    # Records of the rank's share the trainer took (Loader), to resume
    # from in every worker; None: the worker's own state, if any.
    self._consumed: Optional[int] = None
    first, info = self._stream.found[0]
    self._decoder = RecordDecoder(dataset_schema(first, info))
    self._batch = batch_size
    self._state: Optional[Dict[str, Any]] = None
    self._position = 0  # records this dataset yielded in the epoch

  @property
  def collate(self):
    """This dataset's collate_fn: batches as `batch_size=` makes them
    (picklable, for DataLoader workers)."""
    return functools.partial(collate, fixed=self._decoder.fixed)

  def set_epoch(self, epoch: int) -> None:
    """The epoch to read next; a loaded state of that epoch keeps its
    place (load_state_dict, then set_epoch(its epoch), resumes)."""
    if epoch != self._stream.epoch:
      self._state = None
      self._position = 0
      self._consumed = None
    self._stream.set_epoch(epoch)

  def __len__(self) -> int:
    """The records of this rank's share (all its workers'); with
    batch_size, the batches (each worker's last may be smaller, so with
    workers a DataLoader may see up to one more per worker)."""
    n = len(self._stream.replaced(self._share()))
    return -(-n // self._batch) if self._batch else n

  def _worker_stream(self) -> RecordStream:
    info = torch.utils.data.get_worker_info()
    worker = (0, 1) if info is None else (info.id, info.num_workers)
    share = self._share()
    if self._stream.worker != worker or self._stream.shard != (
        share or (0, 1)):
      self._stream = self._stream.replaced(share, worker)
    return self._stream

  def _share(self) -> Optional[Tuple[int, int]]:
    """The given shard, else torch.distributed's (rank, world size) now:
    the Dataset may be made before init_process_group."""
    return self._shard if self._shard is not None else _rank_share()

  def __iter__(self) -> Iterator[Dict[str, Any]]:
    # (Our caller's frame: torch's fetcher, in a worker; `_to_pipe`.)
    to_pipe = self._batch is not None and _to_pipe(
        sys._getframe(1), iterating=True)  # pylint: disable=protected-access
    stream = self._worker_stream()
    self._position = 0
    if self._consumed is not None:
      # On a copy: in the main process (no workers) the stream is ours.
      stream = stream.replaced(stream.shard, stream.worker)
      stream.resume_rank(self._consumed)
    elif self._state is not None:
      stream.load_state_dict(self._state)
      self._position, self._state = self._state["position"], None
    return self._from(stream, to_pipe)

  def _from(self, stream: RecordStream, to_pipe: bool = False
            ) -> Iterator[Dict[str, Any]]:
    if self._batch:
      yield from self._batches(stream, self._batch, to_pipe)
      return
    # Records are read and decoded _GROUP at a time (no Python step per
    # record before its dict): the position counts what was yielded from
    # here, not what the stream gave.
    for records in stream.batches(_GROUP):
      for record in self._decoder.decode(records):
        self._position += 1
        yield record

  def _batches(self, stream: RecordStream, size: int, to_pipe: bool
               ) -> Iterator[Dict[str, Any]]:
    # Decoded in groups of at least _GROUP records (numpy's work per
    # call costs less per record the more there are), then cut.
    # In a worker, the next group is read and decoded in a thread while
    # this one's batches wait for the DataLoader to ask for them (it asks
    # each worker in turn, 2 batches ahead by default).
    group = size * max(1, _GROUP // size)
    worker = torch.utils.data.get_worker_info() is not None
    groups = ((len(records), self._decoder.decode_batch(records, text=True))
              for records in stream.batches(group))
    for n, columns in (_ahead(groups) if worker else groups):
      for records, cut in cuts(columns, n, size):
        self._position += records
        yield _made(cut, worker, to_pipe)

  def state_dict(self) -> Dict[str, Any]:
    if self._state is not None:  # loaded, not yet iterated
      return dict(self._state)
    return dict(self._stream.state_dict(), position=self._position)

  def load_state_dict(self, state: Dict[str, Any]) -> None:
    """The next iteration resumes where `state` was taken (in the same
    worker: its state names it)."""
    self._state = dict(state)
    self._stream.epoch = state["epoch"]

  def loader(self, **dataloader_args: Any) -> "Loader":
    """A DataLoader of this dataset (dataloader_args: DataLoader's, e.g.
    num_workers) that knows the records the trainer took: resumable
    exactly (`shuffle="global"` with a batch_size)."""
    if self._stream.shuffle != "global" or not self._batch:
      raise InputError("Dataset.loader() resumes a global shuffle: give "
                       "shuffle_seed, shuffle='global' and batch_size")
    return Loader(self, self._batch, len(self._stream.replaced(
        self._share())), dataloader_args,
                  forks=fork_safe(path for path, _ in self._stream.files))

  def _resume(self, epoch: int, consumed: Optional[int]) -> None:
    self.set_epoch(epoch)
    self._consumed = consumed

  def _config(self) -> Dict[str, Any]:
    return dict({k: v for k, v in self._stream.state_dict().items()
                 if k not in ("position", "worker", "epoch", "origin")},
                shard=list(self._share() or (0, 1)))

  @property
  def epoch(self) -> int:
    return self._stream.epoch


class GlobalSampler(torch.utils.data.Sampler):
  """The indices of a global shuffle of `n` records (read.global_order):
  the permutation from (seed, epoch), this rank's share (torch.distributed's
  rank unless `shard` is given), from its `start`-th position."""

  def __init__(self, n: int, seed: int, epoch: int = 0,
               shard: Optional[Tuple[int, int]] = None,
               drop_remainder: bool = False):
    super().__init__()
    self.n, self.seed, self.epoch = n, seed, epoch
    self.shard, self.drop_remainder = shard, drop_remainder
    self.start = 0

  def set_epoch(self, epoch: int) -> None:
    if epoch != self.epoch:
      self.start = 0
    self.epoch = epoch

  def _positions(self) -> Positions:
    return Positions(self.n, self.shard or _rank_share(),
                     drop_remainder=self.drop_remainder)

  def __len__(self) -> int:
    return len(self._positions())

  def __iter__(self) -> Iterator[int]:
    positions, order = self._positions(), GlobalOrder(self.n, self.seed,
                                                      self.epoch)
    start, self.start = self.start, 0
    at = start
    while at < len(positions):
      ahead = order(positions.take(at, LOOKAHEAD))
      at += len(ahead)
      yield from ahead.tolist()

  def _resume(self, epoch: int, consumed: Optional[int]) -> None:
    self.epoch, self.start = epoch, consumed or 0

  def _config(self) -> Dict[str, Any]:
    return {"n": self.n, "shuffle_seed": self.seed,
            "shard": list(self.shard or _rank_share() or (0, 1)),
            "drop_remainder": self.drop_remainder}


class IndexedDataset(torch.utils.data.Dataset):
  """The records of one split by number (map-style): `len(ds)`, `ds[i]`
  (a dict of numpy arrays, as Dataset gives) and `__getitems__` (a batch
  of indices: each gzip member they touch inflated once). Needs the
  shards' indexes (read.random_access).

  Args:
    datasets: a dataset folder, a glob, a pin file, or a list of them.
    split: the split.
    transformed: the records of the schema's `transform:` section.
  """

  def __init__(self, datasets: Datasets, split: str = "train",
               transformed: bool = False):
    super().__init__()
    found = window(datasets)
    self._records = RecordIndex.of_window(found, split, transformed)
    first, info = found[0]
    self._decoder = RecordDecoder(dataset_schema(first, info))

  @property
  def collate(self):
    """This dataset's collate_fn (see `collate`)."""
    return functools.partial(collate, fixed=self._decoder.fixed)

  def __len__(self) -> int:
    return len(self._records)

  def __getitem__(self, i: int) -> Dict[str, Any]:
    return self._decoder.decode([self._records[int(i)]])[0]

  def __getitems__(self, indices) -> list:
    return self._decoder.decode(self._records.get(list(indices)))

  def loader(self, batch_size: int, shuffle_seed: int, epoch: int = 0,
             shard: Optional[Tuple[int, int]] = None,
             drop_remainder: bool = False,
             **dataloader_args: Any) -> "Loader":
    """A DataLoader of this dataset in a global shuffle's order
    (GlobalSampler), resumable exactly (Loader). Its batches are decoded
    column by column in the workers, as Dataset's with a batch_size are;
    given a `collate_fn`, it gets the per-record dicts instead."""
    sampler = GlobalSampler(len(self), shuffle_seed, epoch, shard,
                            drop_remainder)
    forks = fork_safe(s.path for s in self._records.shards)
    if "collate_fn" in dataloader_args:
      return Loader(self, batch_size, len(sampler),
                    dict(dataloader_args, sampler=sampler,
                         batch_size=batch_size), forks=forks)
    return Loader(self, batch_size, len(sampler), dict(
        dataloader_args, sampler=sampler, batch_size=batch_size,
        collate_fn=functools.partial(_decoded_batch, self._decoder)),
                  dataset=_Serialized(self._records), forks=forks)


class _Serialized(torch.utils.data.Dataset):
  """The serialized records by number (IndexedDataset.loader's: decoded
  a whole batch at a time by its collate_fn)."""

  def __init__(self, records: RecordIndex):
    super().__init__()
    self._records = records

  def __len__(self) -> int:
    return len(self._records)

  def __getitem__(self, i: int) -> bytes:
    return self._records[int(i)]

  def __getitems__(self, indices) -> list:
    return self._records.get(list(indices))


def _decoded_batch(decoder: RecordDecoder, records: list) -> Batch:
  """Serialized records -> one batch, decoded column by column."""
  columns = decoder.decode_batch(records, text=True)
  (_, cut), = cuts(columns, len(records), max(len(records), 1))
  return _collated_for(cut, sys._getframe(1))  # pylint: disable=protected-access


def _forkserver() -> Any:
  """multiprocessing's "forkserver" context, its server importing this
  module first (once: each worker then needs no import of torch)."""
  context = multiprocessing.get_context("forkserver")
  context.set_forkserver_preload([__name__])
  return context


_FREEZING = threading.Lock()


@contextlib.contextmanager
def _frozen_for_fork(dataloader_args: Dict[str, Any]) -> Iterator[None]:
  """Workers forked inside the block start with this process's objects
  frozen (gc.freeze): a worker's collection then leaves alone what was
  garbage here, whose destructors may not run in a forked child (a
  TensorFlow resource's runs an op that never returns there: a worker
  hung so). Only where workers fork; where the program froze objects of
  its own, they stay frozen and the garbage is collected here instead
  (an unfreeze would thaw them too). One loader at a time, so that one's
  unfreeze cannot thaw another's fork."""
  context = dataloader_args.get("multiprocessing_context")
  method = (context if isinstance(context, str) or context is None
            else context.get_start_method())
  if method is None:
    method = multiprocessing.get_start_method(allow_none=True) or (
        multiprocessing.get_context().get_start_method())
  if not dataloader_args.get("num_workers") or method != "fork":
    yield
    return
  with _FREEZING:
    if gc.get_freeze_count():
      gc.collect()
      yield
      return
    gc.freeze()
    try:
      yield
    finally:
      gc.unfreeze()


class Loader:
  """A torch DataLoader whose batches come in a global shuffle's order,
  and so whose state is the records the trainer took: `state_dict()`
  after any batch (a small JSON object), `load_state_dict()` before
  iterating, and the next iteration continues with exactly the records
  still to come, whatever happened to the process or its workers.

  Made by Dataset.loader (an IterableDataset of batches; the workers
  take the permutation's blocks in turn) or IndexedDataset.loader (a
  GlobalSampler: DataLoader keeps a sampler's order).

  Workers reading shards of a format that is not fork-safe (ArrayRecord:
  core.array_record_files) are started with "forkserver" unless
  dataloader_args give a multiprocessing_context."""

  def __init__(self, source, batch_size: int, share: int,
               dataloader_args: Dict[str, Any], dataset=None,
               forks: bool = True):
    self._source, self._batch, self._share = source, batch_size, share
    # What the DataLoader reads (default: the source).
    self._dataset = source if dataset is None else dataset
    self._sampler = dataloader_args.get("sampler")
    self._options = dict(dataloader_args)
    if (not forks and self._options.get("num_workers")
        and self._options.get("multiprocessing_context") is None):
      self._options["multiprocessing_context"] = _forkserver()
    if self._sampler is None:
      self._options["batch_size"] = None
    self._epoch = (self._sampler or source).epoch
    self._consumed = 0

  def set_epoch(self, epoch: int) -> None:
    if epoch != self._epoch:
      self._consumed = 0
    self._epoch = epoch

  def __len__(self) -> int:
    return -(-(self._share - self._consumed) // self._batch)

  def __iter__(self) -> Iterator[Any]:
    (self._sampler or self._source)._resume(self._epoch, self._consumed)
    loader = torch.utils.data.DataLoader(self._dataset, **self._options)
    with _frozen_for_fork(self._options):
      batches = iter(loader)  # (the workers start here)
    for batch in batches:
      self._consumed = min(self._consumed + self._batch, self._share)
      yield batch
    self._consumed = 0
    self._epoch += 1

  def state_dict(self) -> Dict[str, Any]:
    """The arguments, the epoch and the records taken in it; after an
    epoch's last batch, the next epoch's start."""
    epoch, consumed = self._epoch, self._consumed
    if consumed >= self._share:
      epoch, consumed = epoch + 1, 0
    return dict((self._sampler or self._source)._config(), epoch=epoch,
                consumed=consumed)

  def load_state_dict(self, state: Dict[str, Any]) -> None:
    """Raises InputError for the state of another reader."""
    want = state_ints(state, ("consumed", "epoch"))
    consumed, epoch = want.pop("consumed"), want.pop("epoch")
    check_state(want, (self._sampler or self._source)._config(), "loader")
    if not 0 <= consumed <= self._share:
      raise InputError(f"the state's {consumed:,} records taken are outside "
                       f"this loader's share of {self._share:,}: it is not "
                       "this loader's state")
    self._epoch, self._consumed = epoch, consumed
