"""PyTorch reads datasets without TensorFlow (issue 34, part 4): the
values equal the plain-Python reader's, a DataLoader's workers split a
rank's share without repeats, two torch.distributed processes (gloo on
127.0.0.1) get equal shares and finish the same number of steps, and a
reader resumes mid-epoch. Real torch (the `torch` extra; CI installs
it)."""

import functools
import gc
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

# Skipped without the torch extra (make setup-extras), but for CI, which
# installs it and sets BTR_REQUIRE_EXTRAS.
if os.environ.get("BTR_REQUIRE_EXTRAS"):
  import torch
else:
  torch = pytest.importorskip("torch")

import beam_tfrecords as btr  # noqa: E402
from beam_tfrecords.read.torch import Dataset, collate  # noqa: E402

from tests.helpers.penguins import _build  # noqa: E402
from tests.helpers.torch_workers import no_garbage_to_fork  # noqa: F401,E402



ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def days(tmp_path_factory):
  folder = tmp_path_factory.mktemp("torch")
  return [_build(folder, y) for y in ("2007", "2008")]


@pytest.fixture(scope="module")
def bundled(tmp_path_factory):
  """The bundled Example, list-sequence and grouped-sequence datasets."""
  import importlib
  out = tmp_path_factory.mktemp("bundled")
  for name in ("movie_ratings", "tokens_labels", "user_events"):
    importlib.import_module(f"pipelines.{name}").run(
        ["--output", str(out / name)])
  return out


def _same(got, want):
  if isinstance(want, dict):
    assert set(got) == set(want)
    for k in want:
      _same(got[k], want[k])
  elif isinstance(want, list) and not isinstance(got, list):
    _same(list(got), want)
  elif isinstance(want, list):
    assert len(got) == len(want)
    for g, w in zip(got, want):
      _same(g, w)
  elif want is None:
    assert got.size == 0
  else:
    got = got.item() if hasattr(got, "item") else got
    assert got == pytest.approx(want) if isinstance(want, float) \
        else got == want


@pytest.mark.parametrize("name", ["movie_ratings", "tokens_labels",
                                  "user_events"])
def test_values_equal_the_plain_python_reader(bundled, name):
  path = str(bundled / name)
  want = list(btr.iter_records(path, "train"))
  got = list(Dataset(path, "train"))
  assert len(got) == len(want) > 0
  for g, w in zip(got, want):
    _same(g, w)


def _rows(loader):
  return [int(r) for batch in loader for r in batch["row"]]


@pytest.mark.parametrize("workers", [0, 1, 2])
def test_dataloader_workers_split_each_rank_share(days, workers):
  every = [r["row"] for r in btr.iter_records(days)]
  seen = []
  for rank in range(3):
    ds = Dataset(days, shard=(rank, 3))
    rows = _rows(torch.utils.data.DataLoader(
        ds, batch_size=5, num_workers=workers, collate_fn=ds.collate))
    assert sorted(rows) == sorted(r["row"] for r in btr.iter_records(
        days, shard=(rank, 3)))
    assert len(rows) == len(ds)
    seen += rows
  assert sorted(seen) == sorted(every) and len(set(seen)) == len(every)


_RANK = r"""
import json, sys, torch, torch.distributed as dist
from beam_tfrecords.read.torch import Dataset
rank, port, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
# Made before the process group: the rank is looked up when it is read.
ds = Dataset(json.loads(sys.argv[4]), drop_remainder=True, shuffle_seed=3)
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                        rank=rank, world_size=2)
rows, steps = [], 0
for epoch in range(2):
  ds.set_epoch(epoch)
  for batch in torch.utils.data.DataLoader(ds, batch_size=4, num_workers=2,
                                          collate_fn=ds.collate):
    total = torch.tensor([len(batch["row"])])
    dist.all_reduce(total)  # every rank must take this step
    steps += 1
    rows.append([int(r) for r in batch["row"]])
dist.barrier()
json.dump({"rows": rows, "steps": steps,
           "tf": "tensorflow" in sys.modules}, open(out, "w"))
"""


@pytest.mark.slow
def test_two_gloo_ranks_get_equal_shares_and_finish(days, tmp_path):
  import socket
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(
      [str(ROOT), os.environ.get("PYTHONPATH", "")]))
  procs = [subprocess.Popen(
      [sys.executable, "-c", _RANK, str(rank), str(port),
       str(tmp_path / f"{rank}.json"), json.dumps(days)], env=env)
      for rank in range(2)]
  assert [p.wait(timeout=300) for p in procs] == [0, 0]
  got = [json.loads((tmp_path / f"{r}.json").read_text()) for r in (0, 1)]
  n = len(list(btr.iter_records(days)))
  assert got[0]["steps"] == got[1]["steps"]
  assert not got[0]["tf"] and not got[1]["tf"]
  for epoch_rows in (got[0]["rows"], got[1]["rows"]):
    assert sum(len(b) for b in epoch_rows) == 2 * (n // 2)
  # Within an epoch the two ranks' rows are disjoint.
  half = len(got[0]["rows"]) // 2
  first = [r for b in got[0]["rows"][:half] for r in b]
  second = [r for b in got[1]["rows"][:half] for r in b]
  assert not set(first) & set(second)
  assert len(first) == len(second) == n // 2


def test_a_dataset_resumes_mid_epoch(days):
  whole = [int(r["row"]) for r in Dataset(days, shuffle_seed=9, epoch=1)]
  ds = Dataset(days, shuffle_seed=9, epoch=1)
  it = iter(ds)
  head = [int(next(it)["row"]) for _ in range(23)]
  state = ds.state_dict()
  again = Dataset(days, shuffle_seed=9, epoch=1)
  again.load_state_dict(state)
  assert head + [int(r["row"]) for r in again] == whole
  assert np.unique(whole).size == len(whole)


def test_collate_batches_what_has_one_shape(bundled):
  events = Dataset(str(bundled / "user_events"))
  loader = torch.utils.data.DataLoader(events, batch_size=3,
                                       collate_fn=events.collate)
  batch = next(iter(loader))
  want = list(btr.iter_records(str(bundled / "user_events")))[:3]
  # Text as numpy object arrays, where a number would be a tensor.
  events = batch["feature_lists"]["event"]
  assert events["lengths"].tolist() == [
      len(w["feature_lists"]["event"]) for w in want]
  assert events["values"].dtype == object
  assert events["values"].tolist() == [
      v for w in want for v in w["feature_lists"]["event"]]
  items = batch["feature_lists"]["item"]
  assert items["lengths"].tolist() == [
      len(w["feature_lists"]["item"]) for w in want]
  assert items["values"].tolist() == [
      v for w in want for v in w["feature_lists"]["item"]]
  movies = Dataset(str(bundled / "movie_ratings"))
  ratings = next(iter(torch.utils.data.DataLoader(
      movies, batch_size=4, collate_fn=movies.collate)))
  first = list(btr.iter_records(str(bundled / "movie_ratings")))[:4]
  assert ratings["price"].dtype == torch.float32
  assert ratings["price"].tolist() == pytest.approx(
      [r["price"] for r in first])
  assert ratings["age"].dtype == torch.int64
  assert ratings["age"].tolist() == [r["age"] for r in first]
  assert ratings["ratings"]["lengths"].tolist() == [
      len(r["ratings"]) for r in first]
  assert ratings["ratings"]["values"].tolist() == pytest.approx(
      [v for r in first for v in r["ratings"]])
  assert ratings["suggestion"].dtype == object
  assert ratings["suggestion"].tolist() == [r["suggestion"] for r in first]


@pytest.mark.parametrize("name", ["movie_ratings", "user_events"])
def test_whole_batches_equal_what_collate_makes(bundled, name):
  """batch_size= decodes column by column; the batches equal the
  per-record dicts collated, for Examples and grouped sequences."""
  path = str(bundled / name)
  ds = Dataset(path)
  records = list(ds)
  batches = list(Dataset(path, batch_size=4))
  assert len(batches) == len(Dataset(path, batch_size=4)) == -(
      -len(records) // 4)
  # Every batch, the last (of one record, say) included: the schema
  # decides what stacks, not the batch's shapes.
  for i, batch in enumerate(batches):
    _equal(batch, ds.collate(records[4 * i:4 * i + 4]))
  _equal(list(Dataset(path, batch_size=1))[0], ds.collate(records[:1]))
  # Without the schema, collate stacks what has one shape in the batch.
  assert isinstance(collate(records[:1])[
      "ratings" if name == "movie_ratings" else "context"],
      (torch.Tensor, dict))


def test_collate_cuts_unchanged_records_from_their_columns(bundled):
  """Records the dataset decoded, consecutive and unchanged, are cut from
  the columns they came from: the same batch as their values stacked one
  by one (plain dicts of the same values), also through 2 DataLoader
  workers; a record changed, or records out of order, are stacked as
  they are now; a record copies and pickles as a plain dict."""
  import copy
  import pickle
  from beam_tfrecords.core import native
  from beam_tfrecords.read.arrays import Row, run_of
  if native.core() is None:
    pytest.skip("the native core is not built: records are plain dicts")
  path = str(bundled / "movie_ratings")
  ds = Dataset(path)
  records = list(ds)
  assert all(isinstance(r, Row) for r in records)
  assert run_of(records[2:7], ds._decoder.fixed)[1] == 2  # cut, from 2
  for a, b in ((0, 4), (3, 9), (0, len(records)), (len(records) - 1,
                                                    len(records))):
    _equal(ds.collate(records[a:b]), ds.collate(
        [dict(r) for r in records[a:b]]))
  # Out of order: stacked as given.
  swapped = [records[1], records[0]]
  assert run_of(swapped, ds._decoder.fixed) is None
  _equal(ds.collate(swapped), ds.collate([dict(r) for r in swapped]))
  # Changed: what it holds now, not what was decoded.
  changed = list(ds)[:4]
  changed[2]["age"] = np.int64(-7)
  assert ds.collate(changed)["age"].tolist() == [
      int(r["age"]) for r in records[:2]] + [-7, int(records[3]["age"])]
  assert type(copy.copy(records[0])) is dict
  assert type(pickle.loads(pickle.dumps(records[0]))) is dict
  assert pickle.loads(pickle.dumps(records[0])).keys() == records[0].keys()
  # Through 2 workers: each batch cut there, and stacked there from plain
  # dicts of the same records, equal once across.
  both = functools.partial(_cut_and_stacked, fixed=ds._decoder.fixed)
  seen = 0
  for cut, stacked, was_cut in torch.utils.data.DataLoader(
      ds, batch_size=3, num_workers=2, collate_fn=both):
    assert was_cut
    _equal(cut, stacked)
    seen += len(cut["age"])
  assert seen == len(records)


def _cut_and_stacked(records, fixed):
  """(the batch `collate` makes, the one it makes from plain dicts of the
  same values, whether the first was cut from the records' columns)."""
  from beam_tfrecords.read.arrays import run_of
  return (collate(records, fixed), collate([dict(r) for r in records], fixed),
          run_of(records, fixed) is not None)


def _equal(got, want):
  if isinstance(want, dict):
    assert set(got) == set(want)
    for k in want:
      _equal(got[k], want[k])
  elif isinstance(want, torch.Tensor):
    assert got.dtype == want.dtype and got.shape == want.shape
    assert torch.equal(got, want)
  else:  # text and bytes: object arrays
    assert isinstance(got, np.ndarray) and got.dtype == want.dtype == object
    assert got.shape == want.shape and got.tolist() == want.tolist()


def test_sequences_without_steps_keep_their_dtype(tmp_path):
  """A record whose feature list has no steps: an empty array of the
  feature's dtype, which batches with the others."""
  src = tmp_path / "t.jsonl"
  src.write_text('{"tokens": [], "labels": []}\n'
                 '{"tokens": [4, 5], "labels": [1, 0]}\n')
  schema = btr.load_schema(str(ROOT / "schemas" / "tokens_labels.yaml"))
  out = str(tmp_path / "out")
  btr.build(schema.to_dict(), str(src), out)
  ds = Dataset(out)
  first = next(iter(ds))
  tokens = first["feature_lists"]["tokens"]
  assert tokens.shape == (0,) and tokens.dtype == np.int64
  batch = ds.collate(list(ds))
  assert batch["feature_lists"]["tokens"]["values"].dtype == torch.int64
  assert batch["feature_lists"]["tokens"]["lengths"].tolist() == [0, 2]
  _equal(next(iter(Dataset(out, batch_size=2))), batch)


def test_a_dataset_state_survives_set_epoch(days):
  ds = Dataset(days, shuffle_seed=9, epoch=2)
  whole = [int(r["row"]) for r in ds]
  it = iter(ds)
  head = [int(next(it)["row"]) for _ in range(5)]
  state = ds.state_dict()
  again = Dataset(days, shuffle_seed=9)
  again.load_state_dict(state)
  assert again.state_dict()["position"] == 5
  again.set_epoch(2)
  assert head + [int(r["row"]) for r in again] == whole


def test_worker_batches_arrive_as_in_process(bundled):
  """Whole batches from 2 DataLoader workers (tensors as numpy in the
  pickle, text as Arrow's buffers: columns.Text) equal the ones read in
  this process, value for value and type for type."""
  from beam_tfrecords.read.torch import Batch
  path = str(bundled / "movie_ratings")
  ds = Dataset(path, batch_size=3)
  here = [b for w in range(2)  # each worker's share, read here
          for b in ds._from(ds._stream.replaced(None, (w, 2)))]
  got = list(torch.utils.data.DataLoader(Dataset(path, batch_size=3),
                                         batch_size=None, num_workers=2))
  assert len(got) == len(here) > 2
  assert all(isinstance(b, Batch) for b in got)

  def key(b):
    return (b["age"].tolist(), b["suggestion"].tolist())
  assert sorted(map(key, got)) == sorted(map(key, here))
  for batch in got:
    _equal(batch, next(b for b in here if key(b) == key(batch)))
    assert isinstance(batch["movies"]["values"], np.ndarray)
    assert batch["price"].dtype == torch.float32


def _refuse(*args, **kwargs):
  raise AssertionError("a worker made the batch as user code sees it")


@pytest.mark.parametrize("way", ["batches", "collate", "indexed"])
def test_plain_loaders_send_batches_straight_from_the_workers(
    bundled, monkeypatch, way):
  """What torch's fetcher takes from us and puts on the pipe unchanged
  (DataLoader(batch_size=None) over batches; a collate_fn of ours;
  IndexedDataset.loader's) crosses as the columns read, no tensors or
  object arrays made in the worker (read.torch._Wire): the workers fork
  from here with the worker's own view refused, and the batches equal the
  ones made in this process. If torch's worker loop changes, this fails
  rather than going slow."""
  import beam_tfrecords.read.torch as bt
  path = str(bundled / "movie_ratings")
  if way == "indexed":  # in a global shuffle's order, batches of 3
    ds = bt.IndexedDataset(path)
    order = list(bt.GlobalSampler(len(ds), 5))
    here = [bt._decoded_batch(ds._decoder, ds._records.get(order[i:i + 3]))
            for i in range(0, len(order), 3)]
    loader = ds.loader(batch_size=3, shuffle_seed=5, num_workers=2,
                       multiprocessing_context="fork")
  else:
    ds = Dataset(path, batch_size=3 if way == "batches" else None)
    whole = Dataset(path, batch_size=3)
    here = [b for w in range(2)  # each worker's share, read here
            for b in whole._from(whole._stream.replaced(None, (w, 2)))]
    # (forked: the workers inherit the refusal below)
    loader = torch.utils.data.DataLoader(
        ds, batch_size=None, num_workers=2,
        multiprocessing_context="fork") if way == "batches" else \
        torch.utils.data.DataLoader(ds, batch_size=3, num_workers=2,
                                    collate_fn=ds.collate,
                                    multiprocessing_context="fork")
  monkeypatch.setattr(bt, "_shipped", _refuse)
  got = list(loader)
  assert len(got) == len(here) > 2
  key = lambda b: b["age"].tolist()  # noqa: E731

  assert sorted(map(key, got)) == sorted(map(key, here))
  for batch in got:
    assert isinstance(batch, bt.Batch)
    _equal(batch, next(b for b in here if key(b) == key(batch)))


def _user_wrapper(path, how):
  """A dataset of the user's around ours: it sees our batches in the
  worker (`how`: iterating ours, or through a DataLoader of its own made
  there, over batches or with ds.collate) and reports the text's type."""

  class Wrapped(torch.utils.data.IterableDataset):
    def __iter__(self):
      if how == "iterating":
        batches = Dataset(path, batch_size=3)
      elif how == "inner loader":
        batches = torch.utils.data.DataLoader(Dataset(path, batch_size=3),
                                              batch_size=None)
      else:
        ds = Dataset(path)
        batches = torch.utils.data.DataLoader(ds, batch_size=3,
                                              collate_fn=ds.collate)
      for batch in batches:
        yield {"kind": type(batch["suggestion"]).__name__,
               "dtype": str(batch["suggestion"].dtype)}
  return Wrapped()


@pytest.mark.parametrize("how", ["iterating", "inner loader",
                                 "inner loader, collate"])
def test_a_dataset_of_the_user_s_in_a_worker_sees_object_arrays(bundled,
                                                                how):
  """Ours read by the user's code in a worker (not by the worker's own
  fetcher: iterated, or through a DataLoader made there, whose fetcher
  is torch's too): text as object arrays, as in the training process."""
  got = list(torch.utils.data.DataLoader(
      _user_wrapper(str(bundled / "movie_ratings"), how), batch_size=None,
      num_workers=1))
  assert got and all(g == {"kind": "ndarray", "dtype": "object"}
                     for g in got)


def _text_types(batch):
  from beam_tfrecords.read.torch import Batch
  """In a worker: what user code sees of the batch's text."""
  return Batch({"kind": type(batch["suggestion"]).__name__,
                "dtype": str(batch["suggestion"].dtype),
                "first": batch["suggestion"][0],
                "movies": list(batch["movies"]["values"][:2])})


def test_code_in_a_worker_sees_object_arrays_and_odd_tensors_pickle(
    bundled):
  """A collate_fn runs in the worker: text there is numpy object arrays
  (read-only) as in the training process; tensors numpy has no type for
  (bfloat16) and text arrays the user replaced pickle too."""
  path = str(bundled / "movie_ratings")
  loader = torch.utils.data.DataLoader(
      Dataset(path, batch_size=3), batch_size=None, num_workers=1,
      collate_fn=_text_types)
  seen = list(loader)
  first = list(btr.iter_records(path))[:3]
  assert seen[0]["kind"] == "ndarray" and seen[0]["dtype"] == "object"
  assert seen[0]["first"] == first[0]["suggestion"]
  assert seen[0]["movies"] == list(first[0]["movies"][:2])
  import pickle
  from beam_tfrecords.read.torch import Batch as B
  odd = B({"x": torch.ones(3, dtype=torch.bfloat16),
           "t": np.array(["a", "b"], dtype=object),
           "mixed": np.array(["a", b"b"], dtype=object),
           "none": np.array(["a", None], dtype=object)})
  back = pickle.loads(pickle.dumps(odd))
  assert back["x"].dtype == torch.bfloat16 and back["x"].tolist() == [1] * 3
  assert back["t"].tolist() == ["a", "b"]
  assert back["mixed"].tolist() == ["a", b"b"]
  assert back["none"].tolist() == ["a", None]


def _tensorflow_garbage():
  """A TensorFlow resource (a tf.data iterator's) in a reference cycle,
  unreachable and not yet collected: its __del__ runs a TensorFlow op,
  which never returns in a forked child (TensorFlow's threads are not
  there)."""
  import tensorflow as tf

  class Cycle:
    pass

  garbage = Cycle()
  garbage.cycle = garbage
  garbage.resource = iter(tf.data.Dataset.range(3))
  next(garbage.resource)


def test_forked_workers_never_collect_the_parent_s_garbage(days):
  """Loader starts its workers with the parent's objects frozen (gc.freeze):
  a forked worker's collection, here one it runs first thing, does not run
  the destructor of a TensorFlow resource the parent left uncollected (it
  would hang there). DataLoader's timeout turns a hang into an error."""
  ds = Dataset(days, shuffle_seed=3, shuffle="global", batch_size=16)
  want = [r for b in ds.loader() for r in b["row"].tolist()]
  gc.collect()
  gc.disable()
  try:
    _tensorflow_garbage()
    loader = ds.loader(num_workers=2, timeout=60,
                       multiprocessing_context="fork",
                       worker_init_fn=lambda _: gc.collect())
    got = [r for b in loader for r in b["row"].tolist()]
  finally:
    gc.enable()
    gc.collect()
  assert got == want
