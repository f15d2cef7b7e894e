"""A seeded mutation fuzz of a built dataset (issue 60): its shards, their
indexes and its metadata are damaged one way at a time, and every reader
(the stream, decoded records, random access, verify, validate) is asked
for the records. Shared by tests/e2e/test_read_fuzz.py (a bounded run)
and benchmarks/read_fuzz.py (a long one, with the outcome table).

Outcomes, per reader and case:
  same    every record, equal to the source's (the damage missed nothing
          a reader hands out: dataset.json's free text, say)
  error   a BeamTFRecordsError (or TypeError) naming the problem, and the
          records before it a prefix of the source's
  late    an error, after records that were not a prefix of the source's
          (allowed only where members were reordered: the shard's checksum
          at its end is what catches that)
  wrong   records that differ from the source's, and no error
  raw     an exception not of ours
  hang    no answer within the case's time
verify and validate say `error` when they report a problem, `same` when
they call the dataset intact.
"""

import contextlib
import dataclasses
import json
import os
import random
import shutil
import signal
from typing import Callable, Dict, List, Sequence

import numpy as np

import beam_tfrecords as btr
from beam_tfrecords.core.errors import BeamTFRecordsError
from beam_tfrecords.core.shard_index import ShardIndex

# Mutations of a shard, of an index, of the metadata.
SHARD = ("bitflip", "cut_byte", "cut_member", "drop_member", "swap_members",
         "dup_member", "append_garbage", "append_member", "zero_shard",
         "swap_shards")
INDEX = ("index_bitflip", "index_field", "index_cut")
METADATA = ("json_bitflip", "json_shape")
MUTATIONS = SHARD + INDEX + METADATA
# Where records may come out reordered before the error: the shard's
# SHA-256 (and count) at its end catch it.
REORDERING = ("swap_members", "swap_shards")
OUTCOMES = ("same", "error", "late", "wrong", "raw", "hang")
FAILURES = ("wrong", "raw", "hang")


@dataclasses.dataclass
class Source:
  """The pristine dataset and what it holds."""
  folder: str
  records: List[bytes]
  rows: List[dict]
  schema: object


def source(folder: str) -> Source:
  from beam_tfrecords.read.reader import dataset_schema
  from beam_tfrecords.read.stream import RecordStream
  return Source(folder, list(RecordStream(folder)),
                list(btr.iter_records(folder)), dataset_schema(folder))


def _shards(folder: str):
  return btr.dataset_info(folder).splits["train"].shards


def _members(folder: str, shard) -> List[int]:
  with open(os.path.join(folder, shard.index.file), "rb") as f:
    index = ShardIndex.from_bytes(f.read(), shard.index.file)
  return index.offsets.tolist()


def mutate(folder: str, kind: str, rng: random.Random) -> str:
  """Damages the dataset in `folder` one way; says how."""
  shards = _shards(folder)
  shard = rng.choice(shards)
  path = os.path.join(folder, shard.file)
  data = bytearray(open(path, "rb").read())
  offsets = _members(folder, shard)
  spans = list(zip(offsets[:-1], offsets[1:]))
  if kind in SHARD:
    return _shard(folder, kind, rng, shard, path, data, spans, shards)
  if kind in INDEX:
    index_path = os.path.join(folder, shard.index.file)
    raw = bytearray(open(index_path, "rb").read())
    if kind == "index_bitflip":
      at = rng.randrange(len(raw) * 8)
      raw[at // 8] ^= 1 << at % 8
    elif kind == "index_field":
      at = 8 * rng.randrange(10, len(raw) // 8)
      value = int.from_bytes(raw[at:at + 8], "little")
      new = rng.choice([value + 1, value - 1, 0, 2**63, rng.getrandbits(
          64)]) % 2**64
      raw[at:at + 8] = (new if new != value else value ^ 1).to_bytes(
          8, "little")
    else:
      raw = raw[:rng.randrange(len(raw))]
    _write(index_path, raw)
    return f"{kind} {shard.index.file}"
  meta = os.path.join(folder, "dataset.json")
  text = bytearray(open(meta, "rb").read())
  if kind == "json_bitflip":
    at = rng.randrange(len(text) * 8)
    text[at // 8] ^= 1 << at % 8
  else:
    text = bytearray(rng.choice([b"[]", b"{}", b"null", b"\"x\"", b"{\"splits\"",
                                 json.dumps({"splits": []}).encode()]))
  _write(meta, text)
  return kind


def _shard(folder, kind, rng, shard, path, data, spans, shards) -> str:
  a = rng.randrange(len(spans))
  if kind == "bitflip":
    for _ in range(rng.randint(1, 3)):
      at = rng.randrange(len(data) * 8)
      data[at // 8] ^= 1 << at % 8
  elif kind == "cut_byte":
    data = data[:rng.randrange(len(data))]
  elif kind == "cut_member":
    data = data[:spans[a][0]]
  elif kind == "drop_member":
    data = data[:spans[a][0]] + data[spans[a][1]:]
  elif kind == "swap_members" and len(spans) > 1:
    b = rng.choice([i for i in range(len(spans)) if i != a])
    a, b = sorted((a, b))
    (s0, e0), (s1, e1) = spans[a], spans[b]
    data = data[:s0] + data[s1:e1] + data[e0:s1] + data[s0:e0] + data[e1:]
  elif kind == "dup_member":
    s0, e0 = spans[a]
    data = data[:e0] + data[s0:e0] + data[e0:]
  elif kind == "append_garbage":
    data += bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 64)))
  elif kind == "append_member":
    s0, e0 = spans[a]
    data += data[s0:e0]
  elif kind == "zero_shard":
    data = bytearray()
  elif kind == "swap_shards" and len(shards) > 1:
    # This shard and its index under another shard's names, and back.
    other = rng.choice([s for s in shards if s.file != shard.file])
    for x, y in ((shard.file, other.file),
                 (shard.index.file, other.index.file)):
      px, py = os.path.join(folder, x), os.path.join(folder, y)
      os.rename(px, px + ".swap")
      os.rename(py, px)
      os.rename(px + ".swap", py)
    return f"{kind} {shard.file} {other.file}"
  _write(path, data)
  return f"{kind} {shard.file} member {a}"


def _write(path: str, data) -> None:
  with open(path, "wb") as f:
    f.write(bytes(data))


class Hang(Exception):
  pass


@contextlib.contextmanager
def _deadline(seconds: int):
  def hung(*_):
    raise Hang()
  old = signal.signal(signal.SIGALRM, hung)
  signal.alarm(seconds)
  try:
    yield
  finally:
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def _ours(e: BaseException) -> bool:
  return isinstance(e, (BeamTFRecordsError, TypeError))


def _handed_out(read: Callable[[], Sequence], truth: Sequence,
                reorder_ok: bool, seconds: int) -> str:
  """Reads records one by one; the outcome."""
  got: list = []
  try:
    with _deadline(seconds):
      for item in read():
        got.append(item)
  except Hang:
    return "hang"
  except Exception as e:  # pylint: disable=broad-except
    if not _ours(e):
      return f"raw:{type(e).__name__}: {e}"[:300]
    return "error" if got == list(truth[:len(got)]) else "late"
  return "same" if got == list(truth) else "wrong"


def _random_order(folder: str, truth: Sequence) -> Callable:
  def read():
    records = btr.open(folder).by_number()
    order = np.random.default_rng(len(truth)).permutation(len(truth))
    # One at a time and in batches: both paths of RecordIndex.
    for i in order[:50].tolist():
      yield records[i]
    yield from records.get(order[50:].tolist())
  return read


def _reported(run: Callable[[], bool], seconds: int) -> str:
  try:
    with _deadline(seconds):
      intact = run()
  except Hang:
    return "hang"
  except Exception as e:  # pylint: disable=broad-except
    return "error" if _ours(e) else f"raw:{type(e).__name__}: {e}"[:300]
  return "same" if intact else "error"


def readers(folder: str, src: Source, seconds: int) -> Dict[str, str]:
  """Each reader's outcome on the (damaged) dataset in `folder`."""
  order = np.random.default_rng(len(src.records)).permutation(
      len(src.records))
  shuffled = [src.records[i] for i in order[:50]] + [
      src.records[i] for i in order[50:]]
  from beam_tfrecords.inspect.check import validate
  from beam_tfrecords.read.stream import RecordStream
  return {
      "stream": _handed_out(lambda: RecordStream(folder), src.records, True,
                            seconds),
      "records": _handed_out(lambda: btr.iter_records(folder), src.rows,
                             True, seconds),
      "random": _handed_out(_random_order(folder, src.records), shuffled,
                            False, seconds),
      "verify": _reported(lambda: btr.verify(folder).ok, seconds),
      "validate": _reported(lambda: not validate(
          folder, src.schema).failures, seconds),
  }


def run(pristine: str, work: str, cases: int, seed: int,
        seconds: int = 20) -> List[dict]:
  """`cases` seeded cases over copies of `pristine` in `work`: a dict per
  case (mutation, how, and each reader's outcome)."""
  src = source(pristine)
  rng = random.Random(seed)
  out = []
  for case in range(cases):
    kind = MUTATIONS[case % len(MUTATIONS)]
    folder = os.path.join(work, f"case{case}")
    shutil.copytree(pristine, folder)
    how = mutate(folder, kind, random.Random(rng.getrandbits(64)))
    out.append(dict(case=case, mutation=kind, how=how,
                    **readers(folder, src, seconds)))
    shutil.rmtree(folder)
  return out


def failures(results: List[dict]) -> List[dict]:
  """The cases where a reader broke the goal: a wrong record without an
  error, a raw exception, a hang; `late` outside reordering mutations;
  verify calling damaged shard or index bytes intact."""
  bad = []
  for r in results:
    for reader in ("stream", "records", "random", "verify", "validate"):
      o = r[reader]
      if o.split(":")[0] in FAILURES or (
          o == "late" and r["mutation"] not in REORDERING) or (
              reader == "verify" and o == "same" and r["mutation"] in
              SHARD + INDEX):
        bad.append(dict(r, reader=reader))
  return bad


def table(results: List[dict]) -> str:
  """Outcomes per reader and mutation, as a Markdown table."""
  counts: Dict[tuple, int] = {}
  for r in results:
    for reader in ("stream", "records", "random", "verify", "validate"):
      key = (r["mutation"], reader, r[reader].split(":")[0])
      counts[key] = counts.get(key, 0) + 1
  lines = ["| mutation | reader | " + " | ".join(OUTCOMES) + " |",
           "|---|---|" + "---|" * len(OUTCOMES)]
  for kind in MUTATIONS:
    for reader in ("stream", "records", "random", "verify", "validate"):
      row = [counts.get((kind, reader, o), 0) for o in OUTCOMES]
      if any(row):
        lines.append(f"| {kind} | {reader} | " + " | ".join(map(str, row))
                     + " |")
  return "\n".join(lines)
