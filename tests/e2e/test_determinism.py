"""Same bytes on every machine (issue 36).

A fresh clone on an AVX-512 CPU once wrote another statistics.pb than the
pinned one: the sum of squares went through OpenBLAS's dot product, whose
AVX-512 and AVX2 kernels add in different orders. Now every float the
build writes comes from exact integer sums rounded once
(encoding.exact_sums), and these tests hold it there:

* the bundled pipelines (every float statistic: int64, float, lists,
  feature lists' steps, grouped sequences, images, TensorFlow Transform's
  transformed records) are built in fresh interpreters under other CPU
  kernels (OpenBLAS forced to its AVX2 or AVX-512 kernels, NumPy without
  its AVX-512 or without any dispatched SIMD, Arrow, oneDNN and
  libjpeg-turbo held to lower instruction sets) and must give the pinned
  bytes, file for file (tests/golden/bundled_outputs.json);
* the statistics of the same values cut into other batches and merged in
  other orders are byte-identical (a property test);
* the exact sums equal rational arithmetic's, at the float64 extremes too.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zlib

import numpy as np
import pytest

from beam_tfrecords.core.tfrecord_files import decode_example, unframe_records

from tests.helpers.bundled import MANIFEST, PIPELINES, manifest_of
from tests.helpers.paths import ROOT


HERE = ROOT


def _cpu_flags() -> set:
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("flags"):
          return set(line.split(":", 1)[1].split())
  except OSError:
    pass
  return set()


def _numpy_targets(avx512_only: bool) -> str:
  """NumPy's dispatched SIMD targets this CPU runs (all, or the AVX-512
  ones), for NPY_DISABLE_CPU_FEATURES."""
  from numpy._core import _multiarray_umath as umath
  return " ".join(
      k for k in umath.__cpu_dispatch__ if umath.__cpu_features__.get(k)
      and (not avx512_only or "AVX512" in k or k == "X86_V4"))


# name -> (environment, the CPU flag it needs or None).
VARIANTS = {
    # An AVX2 machine: OpenBLAS's Haswell kernels, NumPy without its
    # AVX-512 loops, Arrow and oneDNN at AVX2. Only on a CPU with AVX-512:
    # on one without, these are the default kernels, which
    # test_bundled_bytes.py's builds already run.
    "avx2": ({"OPENBLAS_CORETYPE": "Haswell",
              "NPY_DISABLE_CPU_FEATURES": _numpy_targets(True),
              "ARROW_USER_SIMD_LEVEL": "AVX2",
              "ONEDNN_MAX_CPU_ISA": "AVX2"}, "avx512f"),
    # OpenBLAS's AVX-512 kernels (only where the CPU has them: forced on
    # another one they would stop the process with an illegal instruction).
    "avx512": ({"OPENBLAS_CORETYPE": "SkylakeX"}, "avx512f"),
    # No dispatched SIMD at all: NumPy at its baseline, Arrow's scalar
    # kernels, libjpeg-turbo's C code, oneDNN at SSE4.1, OpenBLAS's
    # Nehalem kernels.
    "baseline": ({"OPENBLAS_CORETYPE": "Nehalem",
                  "NPY_DISABLE_CPU_FEATURES": _numpy_targets(False),
                  "ARROW_USER_SIMD_LEVEL": "NONE",
                  "JSIMD_FORCENONE": "1",
                  "ONEDNN_MAX_CPU_ISA": "SSE41"}, None),
    # The pure-Python encoder instead of the native core (a worker
    # without it): the same bytes.
    "python-encoder": ({"BTR_NATIVE": "0"}, None),
}

# Builds every bundled pipeline in one interpreter, each into OUT/<name>.
_DRIVER = """
import importlib, os, sys
out = sys.argv[1]
for name in sys.argv[2:]:
  importlib.import_module("pipelines." + name).run(
      ["--output", os.path.join(out, name)])
"""


@pytest.mark.slow
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_bundled_builds_are_the_pinned_bytes_on_other_cpu_kernels(
    tmp_path, variant):
  env_extra, flag = VARIANTS[variant]
  if flag and flag not in _cpu_flags():
    pytest.skip(f"this CPU has no {flag}")
  env = dict(os.environ, **env_extra, TF_CPP_MIN_LOG_LEVEL="2",
             PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
  done = subprocess.run(
      [sys.executable, "-c", _DRIVER, str(tmp_path)] + PIPELINES, env=env,
      cwd=HERE, capture_output=True, text=True, timeout=600)
  assert done.returncode == 0, done.stderr[-3000:]
  with open(MANIFEST) as f:
    pinned = json.load(f)
  for name in PIPELINES:
    got = manifest_of(str(tmp_path / name))
    if got != pinned[name]:
      pytest.fail(_explain(tmp_path, variant, name, got, pinned[name]))


def _members(path):
  """(compressed size, decompressed bytes) of each gzip member."""
  with open(path, "rb") as f:
    data = f.read()
  out = []
  while data:
    d = zlib.decompressobj(31)
    raw = d.decompress(data) + d.flush()
    out.append((len(data) - len(d.unused_data), raw))
    data = d.unused_data
  return out


def _explain(tmp_path, variant, name, got, pinned) -> str:
  """Why a build is not the pinned bytes: which files, and for a shard
  whether its records or only its compression differ (against a build in
  this process, default kernels), record by record. The output is kept
  outside pytest's temporary folders (it keeps only 3 sessions)."""
  keep = tempfile.mkdtemp(prefix=f"btr-unpinned-{variant}-{name}-")
  shutil.copytree(tmp_path / name, os.path.join(keep, "got"))
  import importlib
  importlib.import_module("pipelines." + name).run(
      ["--output", os.path.join(keep, "here")])
  lines = [f"{variant}/{name}: not the pinned bytes; kept in {keep}",
           f"  rebuilt here: {'pinned' if manifest_of(os.path.join(keep, 'here')) == pinned else 'NOT pinned either'}"]
  for rel in sorted(set(got) | set(pinned)):
    if got.get(rel) == pinned.get(rel):
      continue
    lines.append(f"  {rel}: {str(got.get(rel))[:8]} (pinned "
                 f"{str(pinned.get(rel))[:8]})")
    if not rel.endswith(".tfrecord.gz"):
      continue
    a = _members(os.path.join(keep, "got", rel))
    b = _members(os.path.join(keep, "here", rel))
    lines.append(f"    members (compressed, raw): {[(c, len(r)) for c, r in a]}"
                 f" vs {[(c, len(r)) for c, r in b]}")
    ra = [r for _, raw in a for r in unframe_records(raw)]
    rb = [r for _, raw in b for r in unframe_records(raw)]
    if ra == rb:
      lines.append("    same records: only the gzip bytes differ")
      continue
    lines.append(f"    {len(ra)} records vs {len(rb)}; same multiset: "
                 f"{sorted(ra) == sorted(rb)}")
    for i, (x, y) in enumerate(zip(ra, rb)):
      if x != y:
        fx, fy = decode_example(x), decode_example(y)
        for feature in sorted(set(fx) | set(fy)):
          if fx.get(feature) != fy.get(feature):
            u, v = fx.get(feature), fy.get(feature)
            if feature == "image" and u and v:
              p = np.frombuffer(u[1][0], np.uint8)
              q = np.frombuffer(v[1][0], np.uint8)
              where = np.nonzero(p != q)[0] if len(p) == len(q) else []
              lines.append(f"    record {i} ({fy.get('filename')}): "
                           f"{len(where)} pixel bytes differ, first at "
                           f"{where[:8].tolist()}")
            else:
              lines.append(f"    record {i} {feature}: {str(u)[:80]} vs "
                           f"{str(v)[:80]}")
  return "\n".join(lines)


def test_the_variants_change_what_they_claim_to():
  """The environment really switches the kernels (else the test above
  would prove nothing): NumPy drops its dispatched targets, Arrow its
  SIMD level."""
  env_extra, _ = VARIANTS["baseline"]
  env = dict(os.environ, **env_extra)
  code = ("from numpy._core import _multiarray_umath as u; import pyarrow;"
          "print([k for k in u.__cpu_dispatch__ if u.__cpu_features__[k]],"
          " pyarrow.runtime_info().simd_level)")
  out = subprocess.run([sys.executable, "-c", code], env=env,
                       capture_output=True, text=True, check=True).stdout
  assert out.strip() == "[] none"


def _unsummed(entry: dict) -> dict:
  return {k: v for k, v in entry.items() if k not in ("bytes", "sha256")}


# The files whose bytes hold the input's path (and dataset.json, which
# lists their checksums).
_PATH_HOLDERS = ("dataset.json", "report.html", "errors/")


def _unsummed_croissant(described: dict) -> dict:
  """croissant.json without the sizes and checksums of the files that
  hold the input's path, and without the input's time, the input
  fingerprint (of that time) and the build key it names."""
  for entry in described["distribution"]:
    if entry["@id"].startswith(_PATH_HOLDERS):
      entry.pop("sha256", None)
      entry.pop("contentSize", None)
  for entity in described["prov:wasDerivedFrom"]:
    entity.pop("dateModified")  # the input's time
  described["prov:wasGeneratedBy"]["identifier"] = [
      i for i in described["prov:wasGeneratedBy"]["identifier"]
      if not i.startswith(("build key ", "input fingerprint "))]
  return described


def test_the_same_input_elsewhere_and_later_differs_only_as_listed(
    tmp_path):
  """The contract's exceptions, and nothing else: dataset.json's inputs
  and build_key, _SUCCESS, and the input paths in errors/ and
  report.html (and so their checksums, in dataset.json and
  croissant.json)."""
  import beam_tfrecords as btr
  schema = {"name": "ex", "splits": {"column": "split",
                                     "values": ["train", "eval"]},
            "features": {"id": {"type": "int64", "required": True},
                         "score": {"type": "float", "required": True},
                         "tag": {"type": "string"}}}
  text = "id,score,split,tag\n" + "".join(
      f"{i},{i / 7 if i % 13 else 'n/a'},{'eval' if i % 4 else 'train'},"
      f"t{i % 5}\n" for i in range(400))
  built = []
  for name, mtime in (("here", 1_600_000_000), ("there", 1_700_000_000)):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "in.csv").write_text(text)
    os.utime(folder / "in.csv", (mtime, mtime))
    btr.build(schema, str(folder / "in.csv"), str(tmp_path / f"out-{name}"),
              max_bad_fraction=1.0)
    built.append((str(folder), tmp_path / f"out-{name}"))
  (here, a), (there, b) = built

  def files(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file())

  assert files(a) == files(b)
  assert "errors/errors-00000-of-00001.jsonl" in files(a)
  differing = set()
  for rel in files(a):
    x, y = (a / rel).read_bytes(), (b / rel).read_bytes()
    if x == y:
      continue
    differing.add(rel)
    if rel == "dataset.json":  # the input's path (in errors), the key
      mx, my = json.loads(x.decode().replace(here, there)), json.loads(y)
      # ... and the checksums of the files that hold the path.
      assert {k for k in mx if mx[k] != my.get(k)} == {
          "inputs", "build_key", "errors", "checksums"}
      assert set(mx) == set(my)
      assert mx["inputs"]["files"][0]["modified"] == 1_600_000_000
      assert [_unsummed(e) for e in mx["errors"]["files"]] == [
          _unsummed(e) for e in my["errors"]["files"]]
      assert {k for k in mx["checksums"]
              if mx["checksums"][k] != my["checksums"][k]} <= {
                  "report.html", "README.md"}
    elif rel == "croissant.json":  # the same, and dataset.json's checksum
      cx, cy = (_unsummed_croissant(json.loads(v)) for v in (
          x.decode().replace(here, there).encode(), y))
      assert cx == cy
    elif rel == "_SUCCESS":  # the tool and version, the key, the run id;
      # and the seal of dataset.json (which differs, above)
      assert x.split()[:2] == y.split()[:2]
      assert len(x.split()) == len(y.split()) == 7
      assert x.split()[4:6] == y.split()[4:6] == [b"dataset.json",
                                                  b"sha256"]
      assert x.split()[6].decode() == hashlib.sha256(
          (a / "dataset.json").read_bytes()).hexdigest()
    else:  # the input's path, and nothing else
      assert x.decode().replace(here, there) == y.decode(), rel
  assert differing <= {"dataset.json", "_SUCCESS", "report.html",
                       "croissant.json",
                       "errors/errors-00000-of-00001.jsonl"}
  assert {"dataset.json", "_SUCCESS"} <= differing
