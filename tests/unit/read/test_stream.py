"""beam_tfrecords/read/stream.py on a hand-made dataset: a split's records
for one rank and worker (exact shares, disjoint, every record once), in a
seeded order that is the same on every run ("buffer" and "global"),
resumed mid-epoch from a saved state with exactly the records still to
come, and the errors for bad arguments and foreign states."""

import random

import pytest

from beam_tfrecords import DatasetReplacedError, InputError
from beam_tfrecords.read.stream import (RecordStream, buffer_shuffled,
                                        check_state, state_ints)

from tests.helpers.hand_made import example, publish_over, write_dataset

SCHEMA = {"name": "s", "features": {"id": {"type": "int64",
                                          "required": True}}}
# train: 3 shards of 4, 0 and 7 records (members of 3 records); eval: 2.
SIZES = (4, 0, 7)
N = sum(SIZES)
RECORDS = [example({"id": [i]}) for i in range(N + 2)]
ID = {r: i for i, r in enumerate(RECORDS)}


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
  shards, at = [], 0
  for size in SIZES:
    shards.append(RECORDS[at:at + size])
    at += size
  return write_dataset(str(tmp_path_factory.mktemp("stream") / "ds"),
                       SCHEMA, {"train": shards, "eval": [RECORDS[N:]]},
                       per_member=3)


def ids(records):
  return [ID[r] for r in records]


@pytest.mark.parametrize("size", [1, 3, 11, 50], ids=lambda s: f"buffer{s}")
def test_buffer_shuffled_gives_each_record_once_in_a_seeded_order(size):
  records = list(range(11))
  once = list(buffer_shuffled(records, size, random.Random(5)))
  assert sorted(once) == records
  assert once == list(buffer_shuffled(records, size, random.Random(5)))
  if size == 1:
    assert once == records  # a buffer of one cannot reorder
  else:
    assert once != records


def test_every_record_of_the_split_in_the_shards_order(ds):
  stream = RecordStream(ds)
  assert len(stream) == N
  assert ids(stream) == list(range(N))
  assert ids(RecordStream(ds, "eval")) == [N, N + 1]
  assert [list(map(len, b)) for b in [list(stream.batches(5))]] == [
      [5, 5, 1]]
  assert ids(r for b in stream.batches(5) for r in b) == list(range(N))


@pytest.mark.parametrize("count", [1, 2, 3, 4, 11, 12])
@pytest.mark.parametrize("drop_remainder", [False, True],
                         ids=["all", "drop_remainder"])
def test_ranks_shares_are_exact_and_disjoint(ds, count, drop_remainder):
  shares = [ids(RecordStream(ds, shard=(i, count),
                             drop_remainder=drop_remainder))
            for i in range(count)]
  # Rank i reads records i*N//count up to (i+1)*N//count, in order.
  if drop_remainder:
    assert shares == [list(range(i * (N // count), (i + 1) * (N // count)))
                      for i in range(count)]
  else:
    assert shares == [list(range(i * N // count, (i + 1) * N // count))
                      for i in range(count)]
  assert [len(RecordStream(ds, shard=(i, count),
                           drop_remainder=drop_remainder))
          for i in range(count)] == [len(s) for s in shares]


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_a_ranks_workers_split_its_share(ds, workers):
  share = ids(RecordStream(ds, shard=(1, 2)))
  parts = [ids(RecordStream(ds, shard=(1, 2), worker=(w, workers)))
           for w in range(workers)]
  assert sorted(sum(parts, [])) == share
  assert sum(len(p) for p in parts) == len(share)
  stream = RecordStream(ds, shard=(0, 2))
  assert [ids(stream.replaced(shard=(1, 2), worker=(w, workers)))
          for w in range(workers)] == parts


@pytest.mark.parametrize("shuffle", ["buffer", "global"])
def test_a_seeded_order_is_the_same_every_run_and_new_each_epoch(ds,
                                                                 shuffle):
  def order(seed, epoch, shard=None):
    return ids(RecordStream(ds, shuffle_seed=seed, epoch=epoch, shard=shard,
                            shuffle=shuffle, shuffle_buffer=4))
  first = order(7, 0)
  assert sorted(first) == list(range(N)) and first != list(range(N))
  assert order(7, 0) == first
  assert order(7, 1) != first and sorted(order(7, 1)) == list(range(N))
  assert order(8, 0) != first
  halves = order(7, 0, (0, 2)) + order(7, 0, (1, 2))
  assert sorted(halves) == list(range(N))


def test_a_global_order_with_blocks_deals_them_to_the_workers_in_turn(ds):
  whole = ids(RecordStream(ds, shuffle_seed=3, shuffle="global"))
  parts = [ids(RecordStream(ds, shuffle_seed=3, shuffle="global",
                            worker=(w, 2), block=2)) for w in range(2)]
  dealt = []
  for i in range(0, N, 2):  # worker 0's block, then worker 1's
    dealt += parts[(i // 2) % 2][(i // 4) * 2:(i // 4) * 2 + 2]
  assert dealt == whole


@pytest.mark.parametrize("kwargs", [
    {}, {"shuffle_seed": 4, "shuffle_buffer": 3},
    {"shuffle_seed": 4, "shuffle": "global"},
    {"shard": (1, 3), "worker": (1, 2)},
], ids=["files_order", "buffer", "global", "share_and_worker"])
def test_a_saved_state_resumes_with_exactly_the_records_to_come(ds, kwargs):
  whole = ids(RecordStream(ds, **kwargs))
  for k in range(len(whole) + 1):
    stream = RecordStream(ds, **kwargs)
    it = iter(stream)
    assert [ID[next(it)] for _ in range(k)] == whole[:k]
    state = stream.state_dict()
    assert state["position"] == k
    again = RecordStream(ds, **kwargs)
    again.load_state_dict(state)
    assert ids(again) == whole[k:], k
    # The next epoch starts from its beginning.
    assert len(ids(again)) == len(whole)


def test_batches_count_in_the_state(ds):
  stream = RecordStream(ds)
  batches = stream.batches(4)
  assert ids(next(batches)) == [0, 1, 2, 3]
  state = stream.state_dict()
  assert state["position"] == 4
  again = RecordStream(ds)
  again.load_state_dict(state)
  assert ids(r for b in again.batches(4) for r in b) == list(range(4, N))


def test_set_epoch_starts_the_epoch_unless_it_is_the_one_loaded(ds):
  stream = RecordStream(ds, shuffle_seed=1)
  it = iter(stream)
  next(it)
  next(it)
  state = stream.state_dict()
  resumed = RecordStream(ds, shuffle_seed=1)
  resumed.load_state_dict(state)
  resumed.set_epoch(0)  # the epoch the state is of: it keeps its place
  assert len(ids(resumed)) == N - 2
  resumed.load_state_dict(state)
  resumed.set_epoch(1)
  assert sorted(ids(resumed)) == list(range(N))


def test_a_window_of_two_datasets_reads_as_one(ds, tmp_path):
  other = write_dataset(str(tmp_path / "other"), SCHEMA,
                        {"train": [RECORDS[N:]]})
  assert ids(RecordStream([ds, other])) == list(range(N + 2))
  assert ids(RecordStream([other, ds])) == [N, N + 1] + list(range(N))


@pytest.mark.parametrize("kwargs,message", [
    ({"shuffle": "random"}, "shuffle must be one of ('buffer', 'global'); "
     "got 'random'"),
    ({"shuffle": "global"}, "shuffle='global' needs a shuffle_seed (the "
     "permutation is drawn from the seed and the epoch)"),
    ({"shuffle_buffer": 0}, "shuffle_buffer must be at least 1; got 0"),
    ({"shuffle": "global", "shuffle_seed": 1, "block": 0},
     "block must be at least 1; got 0"),
], ids=["unknown_shuffle", "global_without_seed", "no_buffer", "no_block"])
def test_bad_arguments_are_refused(ds, kwargs, message):
  with pytest.raises(ValueError) as raised:
    RecordStream(ds, **kwargs)
  assert str(raised.value) == message


def test_bad_calls_are_refused(ds):
  with pytest.raises(ValueError, match="^a batch has at least 1 record; "
                     "got 0$"):
    RecordStream(ds).batches(0)
  with pytest.raises(ValueError, match=r"^resume_rank\(\) needs "
                     "shuffle='global'$"):
    RecordStream(ds).resume_rank(3)
  with pytest.raises(InputError, match=f"^{ds} has no split 'test'; it has "
                     r"\['eval', 'train'\]$"):
    RecordStream(ds, "test")


def _state(ds, **changes):
  return dict(RecordStream(ds).state_dict(), **changes)


@pytest.mark.parametrize("state,message", [
    ([1, 2], "a saved state is a dict (state_dict()'s); got list"),
    ({"epoch": 0}, "the saved state's 'position' is None, not a whole "
     "number: pass a state that state_dict() returned (as saved, "
     "unedited)"),
    ("position_true", "the saved state's 'position' is True, not a whole "
     "number"),
    ("position_past", "the state's position 12 (origin 0) is outside this "
     "reader's 11 records: it is not this reader's state"),
    ("other_split", "the state is of a reader with split='eval'; this one "
     "has 'train': make it with the same arguments to resume"),
    ("other_share", "the state is of a reader with shard=[0, 2]; this one "
     "has [0, 1]"),
    ("other_build", "the state was saved reading another build of the "
     "datasets"),
], ids=["not_a_dict", "no_position", "position_true", "position_past",
        "other_split", "other_share", "other_build"])
def test_a_state_of_another_reader_is_refused(ds, state, message):
  states = {
      "position_true": lambda: _state(ds, position=True),
      "position_past": lambda: _state(ds, position=N + 1),
      "other_split": lambda: _state(ds, split="eval"),
      "other_share": lambda: _state(ds, shard=[0, 2]),
      "other_build": lambda: _state(ds, builds=["0" * 64]),
  }
  given = states[state]() if isinstance(state, str) else state
  with pytest.raises(InputError) as raised:
    RecordStream(ds).load_state_dict(given)
  assert str(raised.value).startswith(message)


def test_state_ints_and_check_state_on_values():
  assert state_ints({"a": 1, "b": 2, "c": "x"}, ("a",), ("b", "z")) == {
      "a": 1, "b": 2, "c": "x"}
  with pytest.raises(InputError, match="^the saved state's 'b' is 2.5, not "
                     "a whole number"):
    state_ints({"a": 1, "b": 2.5}, ("a",), ("b",))
  check_state({"split": "train"}, {"split": "train", "epoch": 1}, "reader")
  with pytest.raises(InputError, match="^the state is of a sampler with "
                     "epoch=2; this one has 1: "):
    check_state({"epoch": 2}, {"epoch": 1}, "sampler")


@pytest.mark.parametrize("new_shards", [3, 2], ids=["same_names",
                                                     "other_names"])
def test_a_stream_stops_at_the_next_file_of_a_replaced_dataset(tmp_path,
                                                               new_shards):
  """An overwrite published while a stream reads: the file open is read
  whole (the old dataset's), the next one is refused, never a mix; read
  again, the new dataset whole."""
  out = write_dataset(str(tmp_path / "ds"), SCHEMA, {"train": [
      RECORDS[0:4], RECORDS[4:8], RECORDS[8:11]]})
  new = [example({"id": [100 + i]}) for i in range(6)]
  it = iter(RecordStream(out))
  got = [next(it)]  # the first file is open
  publish_over(out, SCHEMA, {"train": [new[i::new_shards]
                                       for i in range(new_shards)]})
  with pytest.raises(DatasetReplacedError) as raised:
    for record in it:
      got.append(record)
  assert str(raised.value) == (
      f"{out} was replaced by a newer build while it was read ({out}/"
      "train-00001-of-00003.tfrecord.gz was opened): what was read so far "
      "is the old dataset's, and reading on would mix the two. Read it "
      "again (load, iter_records or RecordStream anew)")
  assert ids(got) == [0, 1, 2, 3]
  assert sorted(RecordStream(out)) == sorted(new)
