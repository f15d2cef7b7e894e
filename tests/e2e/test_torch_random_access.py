"""PyTorch with random access (issue 47): the map-style IndexedDataset,
and a global shuffle through a DataLoader with 2 workers that resumes
exactly, to the record, after a worker is killed. Real torch (the
`torch` extra; CI installs it)."""

import json
import multiprocessing
import os
import signal

import numpy as np
import pytest

if os.environ.get("BTR_REQUIRE_EXTRAS"):
  import torch
else:
  torch = pytest.importorskip("torch")

import beam_tfrecords as btr  # noqa: E402
from beam_tfrecords.read.global_order import GlobalOrder  # noqa: E402
from beam_tfrecords.read.stream import RecordStream  # noqa: E402
from beam_tfrecords.read.torch import (Dataset, GlobalSampler,  # noqa: E402
                                       IndexedDataset)

from tests.helpers.shard_size import SCHEMA, _csv  # noqa: E402
from tests.helpers.torch_workers import no_garbage_to_fork  # noqa: F401,E402

ROWS = 2000


@pytest.fixture(scope="module")
def built(tmp_path_factory):
  folder = tmp_path_factory.mktemp("torch_random_access")
  out = str(folder / "out")
  btr.build(SCHEMA, _csv(folder / "in.csv", ROWS), out, num_shards=2,
            member_size="4KiB")
  return out


@pytest.fixture(scope="module")
def array_records(tmp_path_factory):
  """The same records as ArrayRecord shards (the array_record extra)."""
  pytest.importorskip("array_record.python.array_record_module")
  folder = tmp_path_factory.mktemp("torch_array_record")
  out = str(folder / "out")
  btr.build(SCHEMA, _csv(folder / "in.csv", ROWS), out, num_shards=2,
            file_format="array_record")
  return out


def _stream_ids(out):
  from beam_tfrecords.core.tfrecord_files import decode_example
  return [decode_example(r)["id"][1][0] for r in RecordStream(out, "train")]


def test_the_map_style_dataset_gives_records_by_number(built):
  ds = IndexedDataset(built, "train")
  ids = _stream_ids(built)
  assert len(ds) == ROWS
  assert int(ds[17]["id"]) == ids[17]
  batch = ds.__getitems__([5, 1999, 0, 5])
  assert [int(r["id"]) for r in batch] == [ids[5], ids[1999], ids[0], ids[5]]
  assert batch[0]["text"] == ds[5]["text"]
  # With torch's own sampler and DataLoader (its fetcher calls
  # __getitems__ with each batch's indices).
  loader = torch.utils.data.DataLoader(
      ds, batch_size=64, shuffle=True, collate_fn=ds.collate,
      generator=torch.Generator().manual_seed(0))
  seen = [int(v) for b in loader for v in b["id"]]
  assert sorted(seen) == sorted(ids)


def test_the_sampler_gives_the_permutation_and_shares(built):
  order = GlobalOrder(ROWS, 9, 4)(np.arange(ROWS)).tolist()
  assert list(GlobalSampler(ROWS, 9, epoch=4)) == order
  shares = [list(GlobalSampler(ROWS, 9, 4, shard=(r, 3)))
            for r in range(3)]
  assert [len(s) for s in shares] == [666, 667, 667]
  assert sum(shares, []) == order


def _ids(batches):
  return [int(v) for b in batches for v in b["id"]]


@pytest.mark.parametrize("fmt", ["tfrecord", "array_record"])
@pytest.mark.parametrize("kind", ["iterable", "map"])
def test_a_killed_worker_resumes_to_the_record(request, kind, fmt):
  """Through the index of gzip shards, and through ArrayRecord's."""
  built = request.getfixturevalue(
      "built" if fmt == "tfrecord" else "array_records")

  def make():
    if kind == "iterable":
      ds = Dataset(built, "train", shuffle_seed=11, shuffle="global",
                   batch_size=50)
      return ds.loader(num_workers=2)
    return IndexedDataset(built, "train").loader(
        batch_size=50, shuffle_seed=11, num_workers=2)

  ids = _stream_ids(built)
  order = [ids[i] for i in GlobalOrder(ROWS, 11, 0)(np.arange(ROWS))]
  assert _ids(make()) == order  # the whole epoch, in the permutation's order
  loader = make()
  taken, it = [], iter(loader)
  for _ in range(7):
    taken += _ids([next(it)])
  # After an odd number of batches (worker 1 would be next; a new
  # DataLoader asks worker 0 first), a resume gives the rest in order.
  seven = loader.state_dict()
  assert seven["consumed"] == 350
  after_seven = make()
  after_seven.load_state_dict(seven)
  assert taken + _ids(after_seven) == order
  # A worker dies (the OOM killer, a preemption): the DataLoader fails.
  workers = multiprocessing.active_children()
  assert len(workers) >= 2
  os.kill(workers[0].pid, signal.SIGKILL)
  with pytest.raises(RuntimeError, match="DataLoader worker"):
    for _ in range(100):
      taken += _ids([next(it)])
  state = json.loads(json.dumps(loader.state_dict()))
  assert state["consumed"] == len(taken) and state["epoch"] == 0
  del it
  resumed = make()
  resumed.load_state_dict(state)
  rest = _ids(resumed)
  assert taken + rest == order  # none skipped, none twice, same order
  # After the epoch: the next one, from its start.
  assert resumed.state_dict()["epoch"] == 1
  assert resumed.state_dict()["consumed"] == 0
  with pytest.raises(btr.InputError, match="the state is of a loader with "
                     "shuffle_seed=11"):
    other = (Dataset(built, "train", shuffle_seed=12, shuffle="global",
                     batch_size=50).loader() if kind == "iterable" else
             IndexedDataset(built, "train").loader(50, shuffle_seed=12))
    other.load_state_dict(state)


def test_array_record_workers_are_not_forked_from_a_reader(array_records):
  """array-record is not fork-safe (core/array_record_files.py): the
  loaders start ArrayRecord workers with "forkserver" (the test above
  reads through them); workers forked by the user's own DataLoader after
  this process read the shards raise an error saying what to do."""
  ds = IndexedDataset(array_records, "train")
  assert int(ds[3]["id"]) == _stream_ids(array_records)[3]  # read here
  loader = ds.loader(batch_size=50, shuffle_seed=1, num_workers=1)
  assert len([b for b in loader]) == ROWS // 50
  forked = torch.utils.data.DataLoader(
      ds, batch_size=50, collate_fn=ds.collate, num_workers=1,
      multiprocessing_context="fork")
  with pytest.raises(btr.InputError, match=r"forked from a process that "
                     r"had loaded array-record.*multiprocessing_context="
                     r"'forkserver' or 'spawn'"):
    next(iter(forked))


def test_resumes_in_the_main_process_twice_and_after_an_epoch(built):
  """Without workers (the DataLoader's default) a resumed loader's state
  resumes again; a state taken after an epoch's last batch starts the
  next epoch."""
  def make():
    return Dataset(built, "train", shuffle_seed=4, shuffle="global",
                   batch_size=100).loader()
  ids = _stream_ids(built)
  order = [ids[i] for i in GlobalOrder(ROWS, 4, 0)(np.arange(ROWS))]
  taken, loader = [], make()
  it = iter(loader)
  taken += _ids([next(it) for _ in range(3)])
  state = json.loads(json.dumps(loader.state_dict()))
  second = make()
  second.load_state_dict(state)
  it = iter(second)
  taken += _ids([next(it) for _ in range(5)])
  third = make()
  third.load_state_dict(json.loads(json.dumps(second.state_dict())))
  assert taken + _ids(third) == order
  # The state after the last batch: epoch 1 from its start.
  loader = make()
  for batch in loader:
    state = loader.state_dict()
  assert (state["epoch"], state["consumed"]) == (1, 0)
  fourth = make()
  fourth.load_state_dict(state)
  epoch1 = [ids[i] for i in GlobalOrder(ROWS, 4, 1)(np.arange(ROWS))]
  assert _ids(fourth) == epoch1


def test_random_access_objects_pickle_for_spawned_workers(built):
  """What a spawned (not forked) DataLoader worker gets: the records
  by number without open files, locks or cached members."""
  import pickle
  from beam_tfrecords.read.random_access import RecordIndex
  records = RecordIndex(built, "train")
  first = records.get([0, 1999])
  again = pickle.loads(pickle.dumps(records))
  assert again.get([0, 1999]) == first
  ds = pickle.loads(pickle.dumps(IndexedDataset(built, "train")))
  assert int(ds[5]["id"]) == _stream_ids(built)[5]
  pickle.dumps(Dataset(built, "train", shuffle_seed=1, shuffle="global",
                       batch_size=10))
