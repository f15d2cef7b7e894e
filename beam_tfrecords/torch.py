"""PyTorch reads a dataset (or a window of them) without TensorFlow.

    from beam_tfrecords.torch import Dataset
    ds = Dataset("out/events/2026-11-*", "train", shuffle_seed=7)
    loader = torch.utils.data.DataLoader(ds, batch_size=64, num_workers=2,
                                         collate_fn=ds.collate)
    for epoch in range(3):
        ds.set_epoch(epoch)
        for batch in loader: ...

An `IterableDataset` of dicts of numpy arrays (beam_tfrecords.arrays:
SequenceExamples as {"context", "feature_lists"}); `ds.collate` batches
them into tensors ({"values", "lengths"} for what varies), as
`batch_size=` does, column by column, in the workers. Records are read with the gzip reader of the
standard library (zlib, C) and decoded by tfx-bsl's C++ decoder.

Shares (beam_tfrecords.shares): with torch.distributed initialised, the
rank's exact share (rank, world_size) unless `shard` is given; each
DataLoader worker reads its part of it, so no record is read twice and the
ranks' shares differ by at most one record (`drop_remainder=True`: equal,
so that collective steps never wait on a rank with one batch fewer).
`state_dict()` / `load_state_dict()` resume mid-epoch (torchdata's
StatefulDataLoader calls them on each worker's copy).

Needs the `torch` extra: pip install beam-tfrecords[torch].
"""

import functools
from typing import Any, Dict, FrozenSet, Iterator, Optional, Tuple

import numpy as np
import torch
import torch.utils.data

from beam_tfrecords.arrays import RecordDecoder
from beam_tfrecords.reader import dataset_schema
from beam_tfrecords.stream import SHUFFLE_BUFFER, RecordStream
from beam_tfrecords.window import Datasets

__all__ = ["Dataset", "collate"]


def collate(records, fixed: Optional[FrozenSet[str]] = None, path: str = ""):
  """A DataLoader `collate_fn` for the per-record dicts: a fixed feature
  becomes one tensor [batch, ...], any other {"values": the values back to
  back, "lengths": per record} (a feature list: rows [steps, ...], or when
  its steps vary {"values", "lengths" (per step), "steps" (per record)});
  text and bytes stay lists. `fixed`: the features the schema fixes
  (Dataset.collate passes them: then a batch is what `batch_size=` gives);
  None: those whose values have one shape in this batch."""
  first = records[0]
  if isinstance(first, dict):
    return {k: collate([r[k] for r in records], fixed, f"{path}{k}/")
            for k in first}
  if isinstance(first, list):  # feature lists whose steps vary
    steps = [a for r in records for a in r]
    if steps and np.asarray(steps[0]).dtype.kind in "OUS":
      return [[np.asarray(a).tolist() for a in r] for r in records]
    return {"values": _tensors(np.concatenate(steps) if steps else
                               np.zeros(0)),
            "lengths": torch.tensor([len(a) for a in steps]),
            "steps": torch.tensor([len(r) for r in records])}
  arrays = [np.asarray(r) for r in records]
  if arrays[0].dtype.kind in "OUS":  # text, bytes
    return [a.tolist() for a in arrays]
  stack = path.rstrip("/") in fixed if fixed is not None else all(
      a.shape == arrays[0].shape for a in arrays)
  if stack:
    return torch.from_numpy(np.stack(arrays))
  return {"values": torch.from_numpy(np.concatenate(arrays)),
          "lengths": torch.tensor([len(a) for a in arrays])}


def _split(values, lengths) -> list:
  ends = np.cumsum(lengths)
  return [values[a:b] for a, b in zip(np.concatenate([[0], ends[:-1]]),
                                      ends)]


def _text(column: dict) -> list:
  """A text / bytes column's {"values", "lengths"[, "steps"]} -> a list
  per record (of lists per step for uneven steps), as `collate` gives."""
  values = column["values"].tolist()
  parts = _split(values, column["lengths"])
  if "steps" in column:
    return [list(r) for r in _split(parts, column["steps"])]
  return [list(p) for p in parts]


def _tensors(value):
  """Numpy columns -> tensors (text and bytes stay lists)."""
  if isinstance(value, dict) and "values" in value and \
      value["values"].dtype.kind in "OUS":
    return _text(value)
  if isinstance(value, dict):
    return {k: _tensors(v) for k, v in value.items()}
  if value.dtype.kind in "OUS":
    return value.tolist()
  return torch.from_numpy(np.require(value, requirements="W"))


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
      a variable one (feature lists: beam_tfrecords.arrays). The last
      batch may be smaller.
  """

  def __init__(self, datasets: Datasets, split: str = "train",
               shard: Optional[Tuple[int, int]] = None,
               drop_remainder: bool = False,
               shuffle_seed: Optional[int] = None, epoch: int = 0,
               shuffle_buffer: int = SHUFFLE_BUFFER,
               batch_size: Optional[int] = None):
    super().__init__()
    # No shard: torch.distributed's, looked up when iterating (the
    # Dataset may be made before init_process_group).
    self._shard = shard
    self._stream = RecordStream(
        datasets, split, shard or _rank_share(), drop_remainder,
        shuffle_seed, epoch, shuffle_buffer)
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
    stream = self._worker_stream()
    self._position = 0
    if self._state is not None:
      stream.load_state_dict(self._state)
      self._position, self._state = self._state["position"], None
    return self._from(stream)

  def _from(self, stream: RecordStream) -> Iterator[Dict[str, Any]]:
    if self._batch:
      yield from self._batches(stream)
      return
    # The decoder reads ahead a batch: the position counts what was
    # yielded from here, not what the stream gave it.
    for record in self._decoder.iter_decoded(stream):
      self._position += 1
      yield record

  def _batches(self, stream: RecordStream) -> Iterator[Dict[str, Any]]:
    pending = []
    for record in stream:
      pending.append(record)
      if len(pending) == self._batch:
        self._position += len(pending)
        yield _tensors(self._decoder.decode_batch(pending))
        pending = []
    if pending:
      self._position += len(pending)
      yield _tensors(self._decoder.decode_batch(pending))

  def state_dict(self) -> Dict[str, Any]:
    if self._state is not None:  # loaded, not yet iterated
      return dict(self._state)
    return dict(self._stream.state_dict(), position=self._position)

  def load_state_dict(self, state: Dict[str, Any]) -> None:
    """The next iteration resumes where `state` was taken (in the same
    worker: its state names it)."""
    self._state = dict(state)
    self._stream.epoch = state["epoch"]
