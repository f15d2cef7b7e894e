"""A split's serialized records for one training rank and worker: exact
shares, a seeded order, and resuming mid-epoch. No TensorFlow.

    stream = RecordStream("out/events/2026-11-*", "train",
                          shard=(rank, world_size), shuffle_seed=7, epoch=3)
    for record in stream:                  # serialized Examples, this share
        ...
    state = stream.state_dict()            # after a preemption:
    stream = RecordStream(...same arguments...)
    stream.load_state_dict(state)          # the records still to come

The share is beam_tfrecords.core.shares' (disjoint, sizes within one); a
`worker=(index, count)` splits it again (DataLoader workers). With a
`shuffle_seed` the files are read in an order drawn from (seed, epoch) and
records pass through a seeded buffer of `shuffle_buffer` records, so the
order is the same on every run and differs between epochs. The state is
the number of records yielded; resuming reads the share again from its
start and skips that many (records are not decoded while skipped), so it
continues with exactly the records that were still to come, in order.

`shuffle="global"` (with a seed) reads the split in a permutation of all
its records drawn from (seed, epoch) instead (read.global_order): any
record may follow any other. It reads through the shards' indexes
(read.random_access), `lookahead` positions at a time, each gzip member
inflated once per lookahead. The rank's share is a range of the
permutation; its workers take blocks of `block` positions in turn (give
the DataLoader's batch size: then the batches come out in the
permutation's order). A resume skips without reading anything.
"""

import copy
import random
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from beam_tfrecords.core import fs
from beam_tfrecords.core.errors import InputError
from beam_tfrecords.core.generations import Guard
from beam_tfrecords.core.shares import (Piece, check_share, file_order, share,
                                        share_of, stable_seed)
from beam_tfrecords.core.shard_formats import of_file
from beam_tfrecords.core.shard_reader import Expected
from beam_tfrecords.read.global_order import (LOOKAHEAD, GlobalOrder,
                                              Positions, read_in_order)
from beam_tfrecords.read.random_access import RecordIndex
from beam_tfrecords.read.window import (Datasets, records_digest,
                                       split_files, window)

__all__ = ["RecordStream", "SHUFFLE_BUFFER", "SHUFFLES", "buffer_shuffled",
           "state_ints", "check_state"]

# "buffer": the files in a seeded order, records through a seeded buffer;
# "global": a permutation of every record (the shards' indexes).
SHUFFLES = ("buffer", "global")

SHUFFLE_BUFFER = 10_000


def buffer_shuffled(records, size: int, rng: random.Random):
  """Records through a shuffle buffer of `size`: each one out is drawn at
  random from the next `size` waiting (as tf.data's shuffle)."""
  buf: List[Any] = []
  for record in records:
    if len(buf) < size:
      buf.append(record)
      continue
    j = rng.randrange(size)
    yield buf[j]
    buf[j] = record
  rng.shuffle(buf)
  yield from buf


class RecordStream:
  """The serialized records of one split of a dataset (or a window of
  them: a list, a glob or a pin file) for one share.

  Args:
    datasets: a dataset folder, a glob, a pin file, or a list of them.
    split: the split.
    shard: (index, count): this rank's share (None: every record).
    drop_remainder: every share ⌊N/count⌋ records (the rest read by none).
    shuffle_seed: None for the files' order; else a seeded order.
    epoch: with a seed, which epoch's order.
    shuffle_buffer: records the shuffle draws from (with a seed).
    worker: (index, count): this reader's portion of the share.
    transformed: the records of the schema's `transform:` section.
    shuffle: with a seed, "buffer" (files in a seeded order, records
      through the buffer) or "global" (a permutation of every record).
    block: "global": positions dealt to a worker at a time (the
      DataLoader's batch size).
    lookahead: "global": positions read at a time (memory: this many
      records).
    check: check every record's CRCs and every shard's SHA-256
      (core.shard_reader); sizes and record counts are checked either
      way. False is faster by what benchmarks/read_suite.py measures.
  """

  def __init__(self, datasets: Datasets, split: str = "train",
               shard: Optional[Tuple[int, int]] = None,
               drop_remainder: bool = False,
               shuffle_seed: Optional[int] = None, epoch: int = 0,
               shuffle_buffer: int = SHUFFLE_BUFFER,
               worker: Optional[Tuple[int, int]] = None,
               transformed: bool = False, shuffle: str = "buffer",
               block: int = 1, lookahead: int = LOOKAHEAD,
               check: bool = True):
    if shuffle not in SHUFFLES:
      raise ValueError(f"shuffle must be one of {SHUFFLES}; got "
                       f"{shuffle!r}")
    if shuffle == "global" and shuffle_seed is None:
      raise ValueError("shuffle='global' needs a shuffle_seed (the "
                       "permutation is drawn from the seed and the epoch)")
    self.found = window(datasets)
    # Each file checked against its dataset's generation once open.
    self.guard = Guard({path: info.generation for path, info in self.found})
    self.split = split
    self.files = split_files(self.found, split, transformed)
    self.expected = _expected(self.found, transformed)
    self.check = check
    self.shard = check_share(shard)
    self.worker = check_share(worker)
    if shuffle_buffer < 1:
      raise ValueError(f"shuffle_buffer must be at least 1; got "
                       f"{shuffle_buffer}")
    self.drop_remainder = drop_remainder
    self.shuffle_seed = shuffle_seed
    self.epoch = epoch
    self.shuffle_buffer = shuffle_buffer
    self.shuffle, self.block, self.lookahead = shuffle, block, lookahead
    self.transformed = transformed
    self._records: Optional[RecordIndex] = None
    self._origin = 0  # "global": the share's positions consumed before
    if shuffle == "global":
      self._records = RecordIndex.of_window(self.found, split, transformed)
      if block < 1:
        raise ValueError(f"block must be at least 1; got {block}")
    self._skip = 0
    self._yielded = 0

  def replaced(self, shard: Optional[Tuple[int, int]] = None,
               worker: Optional[Tuple[int, int]] = None) -> "RecordStream":
    """The same datasets and order for another share or worker, without
    reading the datasets' dataset.json again; at the start of the
    epoch."""
    out = copy.copy(self)
    out.shard, out.worker = check_share(shard), check_share(worker)
    out._skip = out._yielded = out._origin = 0
    return out

  def set_epoch(self, epoch: int) -> None:
    """The epoch whose order to read next (as DistributedSampler's). The
    epoch a loaded state is of keeps its place: load_state_dict, then
    set_epoch(that epoch), resumes."""
    if epoch != self.epoch:
      self._skip = self._yielded = self._origin = 0
    self.epoch = epoch

  @property
  def pieces(self) -> List[Piece]:
    """What this reader reads: [Piece(file, skip, take)], in order."""
    files = file_order(self.files, self.shuffle_seed, self.epoch)
    mine = share(files, *self.shard, drop_remainder=self.drop_remainder)
    return share_of(mine, *self.worker) if self.worker[1] > 1 else mine

  def __len__(self) -> int:
    if self._records is not None:
      return len(self._positions())
    return sum(p.take for p in self.pieces)

  def _positions(self) -> Positions:
    assert self._records is not None
    return Positions(len(self._records), self.shard, self.worker,
                     self.block, self.drop_remainder, self._origin)

  def _global(self, skip: int) -> Iterator[Sequence[bytes]]:
    """Shuffle "global": the records after the first `skip`, a list per
    lookahead."""
    assert self._records is not None and self.shuffle_seed is not None
    order = GlobalOrder(len(self._records), self.shuffle_seed, self.epoch)
    return read_in_order(self._records, order, self._positions(), skip,
                         self.lookahead)

  def lists(self) -> Iterator[Sequence[bytes]]:
    """The pieces' records, a list per read of a file, each checked
    (core.shard_reader): a piece that ends the file reads it to its end
    and counts its records; one that ends before reads the rest raw for
    the shard's checksum. A shard that is not what dataset.json lists
    raises ShardDamagedError (or DatasetReplacedError, if it was
    replaced)."""
    for p in self.pieces:
      at, end = 0, p.skip + p.take  # records of the file before the list
      expect = self.expected[p.file]
      whole = expect.records if expect.records is not None else end
      upto = end if end < whole else None
      for records in self.guard.lists(
          p.file, _file_lists(p.file, expect, self.check, upto)):
        lo, hi = max(p.skip - at, 0), min(end - at, len(records))
        at += len(records)
        if lo < hi:
          yield records if hi - lo == len(records) else records[lo:hi]
      if not fs.is_local(p.file):  # read by name: still the generation's
        self.guard.check(p.file)

  def __iter__(self) -> Iterator[bytes]:
    # The counters are set now, not at the first record: state_dict() is
    # right between here and there too.
    skip, self._skip = self._skip, 0
    self._yielded = skip
    return self._from(skip)

  def _from(self, skip: int) -> Iterator[bytes]:
    if self._records is not None:
      for records in self._global(skip):
        for record in records:
          self._yielded += 1
          yield record
      return
    if self.shuffle_seed is None:
      for records in self._unshuffled(skip):
        for record in records:
          self._yielded += 1
          yield record
      return
    shuffled = buffer_shuffled(
        (r for rs in self.lists() for r in rs), self.shuffle_buffer,
        random.Random(stable_seed("records", self.shuffle_seed, self.epoch,
                                  self.shard, self.worker)))
    for i, record in enumerate(shuffled):
      if i >= skip:
        self._yielded = i + 1
        yield record

  def _unshuffled(self, skip: int) -> Iterator[Sequence[bytes]]:
    """The lists, the first `skip` records left out (not decoded)."""
    for records in self.lists():
      if skip >= len(records):
        skip -= len(records)
        continue
      yield records[skip:] if skip else records
      skip = 0

  def batches(self, size: int) -> Iterator[Sequence[bytes]]:
    """The records iterating gives, in lists of `size` (the last may be
    shorter); unshuffled, without a Python step per record. The state
    counts the records of the lists given out."""
    if size < 1:
      raise ValueError(f"a batch has at least 1 record; got {size}")
    skip, self._skip = self._skip, 0
    self._yielded = skip
    if self._records is not None:
      return self._counted(_regrouped(self._global(skip), size))
    if self.shuffle_seed is not None:
      return _regrouped(([r] for r in self._from(skip)), size)
    return self._counted(_regrouped(self._unshuffled(skip), size))

  def _counted(self, batches: Iterator[Sequence[bytes]]
               ) -> Iterator[Sequence[bytes]]:
    for batch in batches:
      self._yielded += len(batch)
      yield batch

  def _config(self) -> Dict[str, Any]:
    return {"datasets": [p for p, _ in self.found],
            "builds": _builds(self.found), "split": self.split,
            "shard": list(self.shard), "worker": list(self.worker),
            "drop_remainder": self.drop_remainder,
            "shuffle_seed": self.shuffle_seed, "epoch": self.epoch,
            "shuffle_buffer": self.shuffle_buffer,
            **({"shuffle": "global", "block": self.block}
               if self._records is not None else {})}

  def state_dict(self) -> Dict[str, Any]:
    """Where the reader is: its arguments and the records yielded in
    this epoch (torchdata's Stateful protocol); "global": also the
    origin its blocks were dealt from (resume_rank)."""
    if self._records is not None:
      return dict(self._config(), position=self._yielded,
                  origin=self._origin)
    return dict(self._config(), position=self._yielded)

  def load_state_dict(self, state: Dict[str, Any]) -> None:
    """The next iteration continues where `state` was taken.

    Raises:
      InputError: the state is of a reader of other datasets (or of
        another build of them: other records), split, share, worker or
        order (the epoch is taken from it), or it is malformed.
    """
    want = dict(state_ints(state, ("position", "epoch"), ("origin",)))
    position, origin = want.pop("position"), want.pop("origin", 0)
    self.epoch = want["epoch"]
    check_state(want, self._config(), "reader")
    limit = len(self._records) if self._records is not None else len(self)
    if not 0 <= origin <= limit or not 0 <= position <= limit:
      raise InputError(f"the state's position {position:,} (origin "
                       f"{origin:,}) is outside this reader's {limit:,} "
                       "records: it is not this reader's state")
    self._origin = origin
    self._skip = self._yielded = position

  def resume_rank(self, consumed: int) -> None:
    """Shuffle "global": the next iteration continues after the first
    `consumed` records of the rank's share (what a DataLoader handed the
    trainer), its blocks dealt to the workers anew from there (a new
    DataLoader asks worker 0 first)."""
    if self._records is None:
      raise ValueError("resume_rank() needs shuffle='global'")
    self._origin = consumed
    self._skip = self._yielded = 0


def _expected(found, transformed: bool) -> Dict[str, Expected]:
  """What each shard's dataset.json entry says of it, by path."""
  out: Dict[str, Expected] = {}
  for path, info in found:
    splits = info.transform.splits if transformed and info.transform \
        else info.splits
    out.update((fs.join(path, s.file), Expected.of(s))
               for split in splits.values() for s in split.shards)
  return out


def _builds(found) -> List[Optional[str]]:
  """Each dataset's records as a state names them: the digest of its
  shards' checksums (the same after a rebuild with the same records), or
  its generation for a dataset written before checksums."""
  return [records_digest(info) or info.generation for _, info in found]


def state_ints(state: Any, required: Sequence[str],
               optional: Sequence[str] = ()) -> Dict[str, Any]:
  """A saved state (a dict) with these fields checked to be whole
  numbers (`optional` ones may be absent).

  Raises:
    InputError: not a dict, a field missing or not a whole number.
  """
  if not isinstance(state, dict):
    raise InputError(f"a saved state is a dict (state_dict()'s); got "
                     f"{type(state).__name__}")
  out = dict(state)
  for key in list(required) + [k for k in optional if k in state]:
    value = state.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
      raise InputError(
          f"the saved state's {key!r} is {value!r}, not a whole number: "
          "pass a state that state_dict() returned (as saved, unedited)")
  return out


def check_state(want: Dict[str, Any], mine: Dict[str, Any],
                what: str) -> None:
  """Raises InputError unless a saved state's arguments are this
  reader's (`what` it is, for the message)."""
  if "builds" in want and want["builds"] != mine.get("builds"):
    raise InputError(
        f"the state was saved reading another build of the datasets "
        f"({want.get('datasets')!r}): they were rebuilt with other records "
        "since, so its position would name other records. Start the epoch "
        "again (do not load the state)")
  for key, value in sorted(want.items()):
    if mine.get(key) != value:
      raise InputError(f"the state is of a {what} with {key}={value!r}; "
                       f"this one has {mine.get(key)!r}: make it with the "
                       "same arguments to resume")


def _file_lists(path: str, expect: Expected, check: bool,
                upto: Optional[int]) -> Iterator[Sequence[bytes]]:
  """A shard's records, a list per read, checked against `expect` by its
  format's reader (core.shard_formats)."""
  return of_file(path).read(path, expect, check, upto)


def _regrouped(lists: Iterator[Sequence[bytes]], size: int
               ) -> Iterator[Sequence[bytes]]:
  """Lists of any length -> lists of `size` (the last may be shorter)."""
  pending: Sequence[bytes] = []
  for records in lists:
    at = 0
    while at < len(records):
      take = records[at:at + size - len(pending)]
      at += len(take)
      pending = take if not pending else pending + take  # type: ignore[operator]
      if len(pending) == size:
        yield pending
        pending = []
  if pending:
    yield pending
