"""Builds on a real dask.distributed cluster: `dask scheduler` and two
`dask worker` processes on 127.0.0.1, through Beam's DaskRunner. Every
published file, dataset.json included, must equal the DirectRunner's byte
for byte; the work must reach both workers; a worker killed mid-build is
replaced and the build still publishes the same bytes."""

import os
import signal
import subprocess
import sys
import time

import pytest

import beam_tfrecords as btr
from beam_tfrecords import InputError
from beam_tfrecords.testing.dask import LocalDask

from tests.helpers.datasets import assert_same_but_units, assert_same_files

TIMEOUT = 300
FILES = 4


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
  with LocalDask(tmp_path_factory.mktemp("dask"), workers=2) as c:
    yield c


def _inputs(folder, rows, files=FILES):
  """`files` CSV files (a read unit each): ids, a user key, a time, a
  score that is bad ('n/a') in one row of 17, and a split column."""
  paths = []
  for f in range(files):
    path = folder / f"in{f}.csv"
    with open(path, "w") as out:
      out.write("id,user,t,score,split\n")
      out.writelines(
          f"{i},{i % 97},{(i * 37) % 1001},{i / 3 if i % 17 else 'n/a'},"
          f"{'eval' if i % 4 else 'train'}\n"
          for i in range(f * rows, (f + 1) * rows))
    paths.append(str(path))
  return paths


EXAMPLES = {"name": "ex", "splits": {"column": "split",
                                     "values": ["train", "eval"]},
            "features": {"id": {"type": "int64", "required": True},
                         "score": {"type": "float", "required": True},
                         "user": {"type": "int64"}}}
SEQUENCES = {"name": "seq", "record": "sequence_example", "group_by": "user",
             "order_by": [{"column": "t", "type": "int64"}],
             "max_length": 100, "overflow": "keep_last",
             "context": {"user": {"type": "int64", "required": True},
                         "n": {"derive": "length"}},
             "sequence": {"id": {"type": "int64", "required": True},
                          "t": {"type": "int64"}}}
CASES = {
    "examples_with_splits_and_bad_rows": (EXAMPLES, {"num_shards": 3}),
    "grouped_sequences": (SEQUENCES, {}),
    "shuffle": (EXAMPLES, {"shuffle_seed": 7, "num_shards": 2}),
    "beam_sink_with_splits": (EXAMPLES, {"sink": "beam"}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_dask_equals_direct_runner(cluster, tmp_path, case):
  schema, options = CASES[case]
  inputs = _inputs(tmp_path, 3000)
  direct = btr.build(schema, inputs, str(tmp_path / "direct"),
                     max_bad_fraction=1.0, **options)
  before = cluster.tasks_per_worker()
  dask = btr.build(schema, inputs, str(tmp_path / "dask"),
                   max_bad_fraction=1.0, beam_args=[
                       "--runner", "DaskRunner"] + cluster.args, **options)
  after = cluster.tasks_per_worker()
  assert dask.info == direct.info
  counts = direct.info.counts
  assert counts.rows_read == FILES * 3000
  if schema is EXAMPLES:
    assert counts.rows_rejected == len(
        [i for i in range(FILES * 3000) if i % 17 == 0])
  else:
    assert counts.rows_dropped > 0  # keep_last cut the longest groups
  assert_same_files(str(tmp_path / "direct"), str(tmp_path / "dask"))
  # One partition per read unit: both workers read and encode.
  ran = [after[w] - before.get(w, 0) for w in after]
  assert len(ran) == 2 and min(ran) > 0, (before, after)


def test_the_cli_takes_the_short_runner_name(cluster, tmp_path):
  inputs = _inputs(tmp_path, 500)
  (tmp_path / "s.yaml").write_text(
      "name: ex\nfeatures:\n  id: {type: int64, required: true}\n"
      "  user: {type: int64}\n")
  run = subprocess.run(
      [sys.executable, "-m", "beam_tfrecords", "build", "--schema",
       "s.yaml", "--output", "out", "--runner", "DaskRunner",
       "--progress"] + cluster.args + [a for i in inputs
                                       for a in ("--input", i)],
      cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT)
  assert run.returncode == 0, run.stderr[-3000:]
  assert "the DaskRunner reports no metrics while it runs" in run.stderr
  info = btr.dataset_info(str(tmp_path / "out"))
  assert info.counts.records_written == FILES * 500
  direct = btr.build(str(tmp_path / "s.yaml"), inputs,
                     str(tmp_path / "direct"))
  assert_same_files(str(tmp_path / "direct"), str(tmp_path / "out"))
  assert direct.info.counts == info.counts


def test_transform_schemas_are_refused_on_dask(cluster, tmp_path):
  src = tmp_path / "in.csv"
  src.write_text("x\n1\n2\n")
  schema = {"name": "t",
            "features": {"x": {"type": "float", "required": True}},
            "transform": {"features": {"x_z": {"scale_to_z_score": "x"}}}}
  with pytest.raises(InputError, match=(
      "schemas with transform: cannot run on the DaskRunner: TensorFlow "
      "Transform's analyzers are multi-output ParDos and side inputs")):
    btr.build(schema, str(src), str(tmp_path / "out"),
              beam_args=["--runner", "DaskRunner"] + cluster.args)
  assert not (tmp_path / "out").exists()


def _executing(cluster):
  """{worker pid: tasks executing now}."""
  with cluster.client() as client:
    return {pid: n for pid, n in client.run(
        lambda dask_worker: (os.getpid(), len(dask_worker.state.executing))
    ).values()}


def test_a_worker_killed_mid_build_is_replaced_and_the_output_is_the_same(
    cluster, tmp_path):
  """SIGKILL of a worker process while it runs a task: its nanny starts a
  new one, the scheduler runs the lost tasks again, and the dataset is
  the DirectRunner's, byte for byte (every staged file has a name fixed
  by its content's place, so a task run twice writes the same file), but
  for dataset.json's count of read units reused: a unit the killed task
  had kept before it died is taken by the task run again, not read twice,
  and whether the kill came before or after that is a race."""
  inputs = _inputs(tmp_path, 60000)
  (tmp_path / "s.yaml").write_text(
      "name: seq\nrecord: sequence_example\ngroup_by: user\norder_by: "
      "[{column: t, type: int64}]\ncontext:\n  user: {type: int64, "
      "required: true}\nsequence:\n  id: {type: int64, required: true}\n"
      "  t: {type: int64}\n")
  direct = btr.build(str(tmp_path / "s.yaml"), inputs,
                     str(tmp_path / "direct"))
  cluster.wait_for_workers(2)
  before = cluster.worker_pids()
  build = subprocess.Popen(
      [sys.executable, "-m", "beam_tfrecords", "build", "--schema",
       "s.yaml", "--output", "dask", "--runner", "DaskRunner"]
      + cluster.args + [a for i in inputs for a in ("--input", i)],
      cwd=tmp_path, stderr=subprocess.PIPE, text=True)
  victim, deadline = None, time.time() + TIMEOUT
  while victim is None and build.poll() is None and time.time() < deadline:
    busy = [pid for pid, n in _executing(cluster).items() if n]
    victim = busy[0] if busy else None
    time.sleep(0.05)
  assert victim is not None, "no task ran before the build ended"
  os.kill(victim, signal.SIGKILL)
  _, err = build.communicate(timeout=TIMEOUT)
  assert build.returncode == 0, err[-3000:]
  cluster.wait_for_workers(2)
  after = cluster.worker_pids()
  assert victim not in after and len(after) == 2, (before, victim, after)
  assert btr.dataset_info(str(tmp_path / "dask")).counts == \
      direct.info.counts
  assert_same_but_units(str(tmp_path / "direct"), str(tmp_path / "dask"))


def test_write_dataset_stages_its_output_on_a_worker(cluster, tmp_path):
  """btr.WriteDataset in one's own pipeline on Dask: the output is locked
  and staged by the pipeline's first step, on a worker (the DaskRunner
  computes the side input that orders the writes after it again in each
  task that reads it: the step is safe to run again for its build); the
  files equal the DirectRunner's, and no lock or staging folder is left."""
  import apache_beam as beam
  from apache_beam.options.pipeline_options import PipelineOptions
  schema = {"name": "ex", "features": {
      "id": {"type": "int64", "required": True}, "user": "int64"}}
  rows = [{"id": i, "user": i % 7} for i in range(2000)]

  def write(out, args):
    p = beam.Pipeline(options=PipelineOptions(args))
    _ = (p | beam.Create(rows)
         | btr.WriteDataset(schema, str(out), num_shards=2))
    result = p.run()
    result.wait_until_finish()
    if hasattr(result, "client"):
      result.client.close()  # (the DaskRunner leaves its client open)

  write(tmp_path / "direct", [])
  write(tmp_path / "dask", [
      "--runner", "apache_beam.runners.dask.dask_runner.DaskRunner"
  ] + cluster.args)
  assert_same_files(str(tmp_path / "direct"), str(tmp_path / "dask"))
  assert btr.dataset_info(str(tmp_path / "dask")).counts.rows_read == 2000
  assert not [n for n in os.listdir(tmp_path / "dask") if n.startswith(".")]


def test_a_killed_build_reuses_its_finished_units_on_dask(cluster, tmp_path):
  """kill -9 of the launcher once a read unit is finished (its client
  gone, the scheduler drops the job); the same command reuses the units
  that were finished and publishes the DirectRunner's files (but
  dataset.json's `inputs.units`, which says how many were reused).
  Twelve units: the tasks the workers already hold when the launcher
  dies still run, and with four units all four could finish (a run of
  the cluster tier found 4 of 4 kept); with twelve, 2 to 5 were kept in
  five runs, on an idle and a loaded machine."""
  # pylint: disable=import-outside-toplevel
  from beam_tfrecords.core.unit_cache import UnitStore
  inputs = _inputs(tmp_path, 60_000, files=12)
  (tmp_path / "s.yaml").write_text(
      "name: ex\nfeatures:\n  id: {type: int64, required: true}\n"
      "  user: {type: int64}\n  t: {type: int64}\n")
  direct = btr.build(str(tmp_path / "s.yaml"), inputs,
                     str(tmp_path / "direct"), num_shards=2)
  command = ([sys.executable, "-m", "beam_tfrecords", "build", "--schema",
              "s.yaml", "--output", "dask", "--num-shards", "2",
              "--runner", "DaskRunner"] + cluster.args
             + [a for i in inputs for a in ("--input", i)])
  build = subprocess.Popen(command, cwd=tmp_path, stderr=subprocess.PIPE,
                           text=True)
  store = UnitStore(str(tmp_path / "dask" / ".units"))
  deadline = time.time() + TIMEOUT
  while build.poll() is None and time.time() < deadline:
    if list(store.units()):
      break
    time.sleep(0.02)
  assert build.poll() is None, "the build ended before it was killed"
  build.kill()
  build.wait(60)
  finished = len(list(store.units()))
  assert 1 <= finished < len(inputs)
  assert not (tmp_path / "dask" / "_SUCCESS").exists()
  cluster.wait_for_workers(2)
  rerun = subprocess.run(command, cwd=tmp_path, capture_output=True,
                         text=True, timeout=TIMEOUT)
  assert rerun.returncode == 0, rerun.stderr[-3000:]
  info = btr.dataset_info(str(tmp_path / "dask"))
  assert info.inputs.extra["units"]["reused"] >= finished
  assert info.counts == direct.info.counts
  assert_same_but_units(str(tmp_path / "direct"), str(tmp_path / "dask"))
