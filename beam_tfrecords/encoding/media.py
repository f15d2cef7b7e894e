"""The columns that image, tensor and vocabulary features make.

A schema's Media features (schema.model.Media) read input columns and make
the columns their stored features read (named with model.made_column):

* image: a column of paths (or URIs) -> the file's encoded bytes (as they
  are, or resized / converted / re-encoded), height, width, channels and
  format (encoding.images). Files are read through Beam's FileSystems, so
  gs:// and s3:// work on a cluster; with `base_dir`, relative paths
  resolve against it and no path may leave it.
* tensor: list cells, several numeric columns, or .npy files -> a numeric
  array of the declared dtype and shape, stored as raw little-endian bytes
  plus a shape feature, or as a flat int64 / float list.
* vocabulary: a string column -> each value's index in the vocabulary.

`MediaPreparer.prepare` works on one batch and returns the made columns and
the rows that cannot be stored with their reasons (a missing, unreadable or
broken file, a value out of range, ...): those rows go to the dead-letter
output. Files are read by a small pool of threads (I/O bound on object
stores), in row order.
"""

import concurrent.futures
import decimal
import io
import json
import math
import os
import posixpath
import re
import threading
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_tfrecords.encoding import columns as col
from beam_tfrecords.encoding.images import ImageError, ImageOptions, \
    process_image
from beam_tfrecords.schema.model import (Media, MediaKind, Schema,
                                         made_column)

__all__ = ["MediaPreparer", "resolve_path", "MediaError", "IO_THREADS"]

# Threads per worker process that read files (image / npy paths).
IO_THREADS = 8
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*://)(.*)$", re.S)
_pool = None
_pool_lock = threading.Lock()

Problems = Dict[int, List[Tuple[str, str]]]


class MediaError(ValueError):
  """Why one row's file or value cannot be stored (a reason for a person)."""


def _io_pool() -> concurrent.futures.ThreadPoolExecutor:
  global _pool
  with _pool_lock:
    if _pool is None:
      _pool = concurrent.futures.ThreadPoolExecutor(
          IO_THREADS, thread_name_prefix="beam_tfrecords-io")
    return _pool


def _split_scheme(path: str) -> Tuple[str, str]:
  m = _SCHEME.match(path)
  return (m.group(1), m.group(2)) if m else ("", path)


def _normalized(path: str) -> str:
  scheme, rest = _split_scheme(path)
  if not rest:
    return path
  norm = posixpath.normpath(rest)
  if rest.startswith("//") and not scheme:
    norm = "/" + norm.lstrip("/")
  return scheme + norm


def _is_absolute(path: str) -> bool:
  return bool(_SCHEME.match(path)) or path.startswith("/")


def resolve_path(value: str, base_dir: Optional[str], source: str) -> str:
  """Where a path from the data points.

  With `base_dir`, relative paths resolve against it and the result must
  stay inside it (".." or an absolute path elsewhere is refused: paths
  from data must not reach other files). Without it, relative paths
  resolve against the directory of the input file that holds them.

  Raises:
    MediaError: an empty path, or one outside base_dir.
  """
  text = value.strip()
  if not text:
    raise MediaError("the path is empty")
  if base_dir is not None:
    base = _normalized(base_dir).rstrip("/")
    path = _normalized(text if _is_absolute(text) else f"{base}/{text}")
    if path != base and not path.startswith(base + "/"):
      raise MediaError(f"the path {text!r} leads outside base_dir "
                       f"{base_dir!r}; paths from the data must stay inside "
                       "it")
    if not _SCHEME.match(path):
      # On local disk a symbolic link inside base_dir may point anywhere:
      # the file it reaches must be inside base_dir too.
      real, real_base = os.path.realpath(path), os.path.realpath(base)
      if real != real_base and not real.startswith(
          real_base.rstrip("/") + "/"):
        raise MediaError(f"the path {text!r} leads outside base_dir "
                         f"{base_dir!r} through a symbolic link (to "
                         f"{real!r}); paths from the data must stay inside "
                         "it")
    return path
  if _is_absolute(text):
    return _normalized(text)
  folder = source.rsplit("/", 1)[0] if "/" in source else "."
  if not _is_absolute(folder):
    folder = os.path.abspath(folder)
  return _normalized(f"{folder}/{text}")


def read_file(path: str, limit: int) -> bytes:
  """A whole file through Beam's FileSystems (no decompression).

  Raises:
    MediaError: missing, unreadable, or larger than `limit` bytes.
  """
  try:
    with FileSystems.open(path, compression_type=(
        CompressionTypes.UNCOMPRESSED)) as f:
      data = f.read(limit + 1)
  except Exception as e:  # pylint: disable=broad-except
    try:
      exists = FileSystems.exists(path)
    except Exception:  # pylint: disable=broad-except
      exists = True
    if not exists:
      raise MediaError(f"{path}: no such file") from None
    raise MediaError(f"{path}: cannot be read ({type(e).__name__}: "
                     f"{str(e)[:200]})") from None
  if len(data) > limit:
    raise MediaError(f"{path}: the file is larger than max_record_bytes "
                     f"({limit:,} bytes)")
  return data


def _cells(array: Any) -> list:
  """Python values of a column (Arrow array or list)."""
  if isinstance(array, list):
    return array
  return col.python_values(array)


def _text(value: Any) -> Optional[str]:
  if value is None:
    return None
  if isinstance(value, bytes):
    return value.decode("utf-8", "replace")
  return str(value)


def _binary(chunks: Sequence[Optional[bytes]]) -> pa.Array:
  return pa.array(chunks, type=pa.large_binary())


def _ints(values: Sequence[Optional[int]]) -> pa.Array:
  return pa.array(values, type=pa.int64())


def _fixed_lists(flat: np.ndarray, per_row: int, valid: np.ndarray,
                 value_type: pa.DataType) -> pa.Array:
  """Rows of `per_row` values (flat holds the valid rows' values only)."""
  counts = np.where(valid, per_row, 0).astype(np.int64)
  offsets = np.zeros(len(valid) + 1, dtype=np.int64)
  np.cumsum(counts, out=offsets[1:])
  return pa.LargeListArray.from_arrays(
      pa.array(offsets), pa.array(flat, type=value_type),
      mask=pa.array(~valid))


class MediaPreparer:
  """Makes a batch's media columns (see the module docstring).

  Args:
    schema: a Schema with `media` (vocabularies resolved: no `auto`).
  """

  def __init__(self, schema: Schema):
    self._schema = schema
    self._media = schema.media
    self._limit = schema.max_record_bytes
    self._images = {}
    for m in self._media:
      if m.kind is MediaKind.IMAGE:
        o = m.options
        self._images[m.name] = ImageOptions(
            resize=tuple(o["resize"]) if o.get("resize") else None,
            method=o.get("method", "bilinear"), convert=o.get("convert"),
            encode=o.get("encode"), quality=o.get("quality", 95),
            verify=o.get("verify", True))
      if m.kind is MediaKind.VOCABULARY and m.options["values"] is None:
        raise ValueError(f"the vocabulary of {m.name!r} is not resolved")

  def prepare(self, columns: Mapping[str, Any], n: int, source: str
              ) -> Tuple[Dict[str, pa.Array], Problems]:
    """(made columns, {row: [(feature, reason)]} of rows to reject)."""
    made: Dict[str, pa.Array] = {}
    problems: Problems = {}
    for m in self._media:
      array = {c: columns.get(c) for c in m.sources}
      if m.kind is MediaKind.IMAGE:
        self._image(m, array[m.sources[0]], n, source, made, problems)
      elif m.kind is MediaKind.TENSOR:
        self._tensor(m, array, n, source, made, problems)
      else:
        self._vocabulary(m, array[m.sources[0]], n, made, problems)
    return made, problems

  # Images.

  def _files(self, m: Media, array, n: int, source: str, parse) -> list:
    """Per row: None (no path), a MediaError, or parse(data, path) of the
    file the row's path names; read by the I/O threads, in row order."""
    paths = [_text(v) for v in _cells(array)] if array is not None \
        else [None] * n
    base_dir = m.options.get("base_dir")

    def one(path):
      if path is None:
        return None
      resolved = path
      try:
        resolved = resolve_path(path, base_dir, source)
        return parse(read_file(resolved, self._limit), resolved)
      except MediaError as e:
        return e
      except Exception as e:  # pylint: disable=broad-except
        # A file the libraries choke on (e.g. an image too large for
        # JPEG) is that row's problem, not the build's.
        return MediaError(f"{resolved}: cannot be stored "
                          f"({type(e).__name__}: {str(e)[:200]})")

    return list(_io_pool().map(one, paths))

  def _image(self, m: Media, array, n, source, made, problems):
    required = self._schema.feature(m.name).required
    options = self._images[m.name]

    def parse(data, path):
      try:
        return process_image(data, options)
      except ImageError as e:
        raise MediaError(f"{path}: {e}") from None

    results = self._files(m, array, n, source, parse)
    out = {k: [None] * n for k in ("bytes", "height", "width", "channels",
                                   "format")}
    for row, r in enumerate(results):
      if r is None:
        if required:
          problems.setdefault(row, []).append((
              m.name, f'required image is missing (column "{m.sources[0]}" '
              "has no path)"))
      elif isinstance(r, MediaError):
        problems.setdefault(row, []).append((m.name, str(r)))
      else:
        out["bytes"][row] = r.data
        out["height"][row], out["width"][row] = r.height, r.width
        out["channels"][row], out["format"][row] = r.channels, r.format
    made[made_column(m.name, "bytes")] = _binary(out["bytes"])
    for part in ("height", "width", "channels"):
      made[made_column(m.name, part)] = _ints(out[part])
    made[made_column(m.name, "format")] = pa.array(
        out["format"], type=pa.large_string())

  # Tensors.

  def _tensor(self, m: Media, arrays, n, source, made, problems):
    o = m.options
    dtype = np.dtype(o["dtype"])
    shape = tuple(o["shape"])
    required = self._schema.feature(m.name).required
    if o["from"] == "npy":
      values = self._npy(m, arrays[m.sources[0]], n, source, dtype, shape,
                         problems)
    elif len(m.sources) > 1:
      values = self._gathered(m, arrays, n, dtype, problems)
    else:
      values = self._listed(m, arrays[m.sources[0]], n, dtype, shape,
                            problems)
    # values: per row an ndarray of `dtype`, None (missing) or a problem.
    for row, v in enumerate(values):
      if v is None and required and row not in problems:
        problems.setdefault(row, []).append((
            m.name, f"required tensor is missing (column(s) "
            f"{', '.join(m.sources)} have no value)"))
    good = [v if isinstance(v, np.ndarray) and row not in problems else None
            for row, v in enumerate(values)]
    if o["storage"] == "bytes":
      little = dtype.newbyteorder("<")
      made[made_column(m.name, "bytes")] = _binary(
          [None if v is None else v.astype(little).tobytes() for v in good])
      made[made_column(m.name, "shape")] = pa.array(
          [None if v is None else list(v.shape) for v in good],
          type=pa.large_list(pa.int64()))
      return
    size = int(np.prod(shape))
    valid = np.array([v is not None for v in good], dtype=bool)
    is_float = dtype.kind == "f"
    flat = (np.concatenate([v.reshape(-1) for v in good if v is not None])
            if valid.any() else np.zeros(0))
    if is_float:
      big = np.abs(flat.astype(np.float64)) > np.finfo(np.float32).max
      big &= np.isfinite(flat.astype(np.float64))
      if big.any():
        rows = np.nonzero(valid)[0][np.nonzero(big)[0] // size]
        for row in sorted(set(rows.tolist())):
          problems.setdefault(row, []).append((
              m.name, "a value does not fit float32 (storage: list keeps "
              "float32); use storage: bytes"))
        keep = valid.copy()
        keep[rows] = False
        flat = flat.reshape(-1, size)[keep[valid]].reshape(-1)
        valid = keep
    made[made_column(m.name, "values")] = _fixed_lists(
        flat.astype(np.float32 if is_float else np.int64), size, valid,
        pa.float32() if is_float else pa.int64())

  def _npy(self, m, array, n, source, dtype, shape, problems):
    def parse(data, path):
      try:
        loaded = np.load(io.BytesIO(data), allow_pickle=False)
      except Exception as e:  # pylint: disable=broad-except
        raise MediaError(f"{path}: not a .npy array ({e})") from None
      if not isinstance(loaded, np.ndarray):
        raise MediaError(f"{path}: holds several arrays (.npz); give one "
                         ".npy file per row")
      return _checked(loaded, dtype, shape, path)

    out = []
    for row, r in enumerate(self._files(m, array, n, source, parse)):
      if isinstance(r, MediaError):
        problems.setdefault(row, []).append((m.name, str(r)))
        r = None
      out.append(r)
    return out

  def _gathered(self, m, arrays, n, dtype, problems):
    """Several numeric columns -> one array per row (in source order)."""
    block = np.zeros((n, len(m.sources)), dtype=np.float64 if
                     dtype.kind == "f" else np.int64)
    present = np.zeros((n, len(m.sources)), dtype=bool)
    for j, c in enumerate(m.sources):
      values, valid, errors = _numbers(arrays[c], n, dtype.kind == "f")
      block[:, j] = values
      present[:, j] = valid
      for row, reason in errors.items():
        problems.setdefault(row, []).append((m.name, f'column "{c}": '
                                             f"{reason}"))
    shape = tuple(m.options["shape"])
    out = []
    for row in range(n):
      if not present[row].any():
        out.append(None)
        continue
      if not present[row].all():
        missing = [c for c, p in zip(m.sources, present[row]) if not p]
        problems.setdefault(row, []).append((
            m.name, f"column(s) {', '.join(missing[:5])} have no value; "
            "every column of a tensor needs one"))
        out.append(None)
        continue
      out.append(block[row])
    return _cast_rows(m, out, dtype, shape, problems)

  def _listed(self, m, array, n, dtype, shape, problems):
    """List cells (nested lists, or text split by `separator`) -> arrays."""
    sep = m.options.get("separator")
    out = []
    for row, cell in enumerate(_cells(array) if array is not None
                               else [None] * n):
      if cell is None:
        out.append(None)
        continue
      try:
        if isinstance(cell, (bytes, str)) and not (
            sep is None and _text(cell).lstrip().startswith("[")):
          text = _text(cell)
          parts = text.split(sep) if sep else text.replace(",", " ").split()
          values = [_parse_number(p.strip(), dtype.kind == "f")
                    for p in parts if p.strip()]
        else:
          if isinstance(cell, (bytes, str)):  # JSON list text
            try:
              cell = json.loads(_text(cell))
            except ValueError as e:
              raise ValueError(f"not a JSON list ({e})") from None
          if not isinstance(cell, (list, tuple)):
            cell = [cell]
          values = [_parse_number(v, dtype.kind == "f")
                    for v in _list_values(cell, shape)]
      except (ValueError, TypeError, OverflowError) as e:
        problems.setdefault(row, []).append((m.name, str(e)))
        out.append(None)
        continue
      out.append(np.array(values, dtype=np.float64 if dtype.kind == "f"
                          else object))
    return _cast_rows(m, out, dtype, shape, problems)

  # Vocabularies.

  def _vocabulary(self, m: Media, array, n, made, problems):
    feature = self._schema.feature(m.name)
    vocab = m.options["values"]
    errors = {}
    if array is None:
      lists = pa.nulls(n, pa.large_list(pa.large_binary()))
    else:
      lists, errors = (col.convert_cells(feature, array)
                       if isinstance(array, list)
                       else col.convert_column(feature, array, n))
    value_set = pa.array([v.encode("utf-8") for v in vocab],
                         type=pa.large_binary())
    # A scalar's list holds one value when present.
    values = pc.cast(pc.list_element(lists, 0), pa.large_binary()) \
        if len(lists) else pa.array([], type=pa.large_binary())
    index = pc.index_in(values, value_set=value_set)
    found = index.is_valid().to_numpy(zero_copy_only=False)
    present = values.is_valid().to_numpy(zero_copy_only=False)
    shown = ", ".join(vocab[:10]) + (", ..." if len(vocab) > 10 else "")
    for row in np.nonzero(present & ~found)[0].tolist():
      value = values[row].as_py().decode("utf-8", "replace")
      problems.setdefault(row, []).append((
          m.name, f"{value[:60]!r} is not in the vocabulary ({len(vocab)} "
          f"values: {shown}); add it or fix the row"))
    for row in np.nonzero(~present)[0].tolist():
      if row in errors:  # not a value the feature takes: say why
        problems.setdefault(row, []).append((m.name, errors[row]))
      elif feature.required:
        problems.setdefault(row, []).append((
            m.name, f'required value is missing (column "{m.sources[0]}" '
            "has no value)"))
    made[made_column(m.name, "index")] = _ints(
        [None if v is None else int(v) for v in index.to_pylist()])


def _parse_number(value: Any, is_float: bool):
  """A number from a cell value; for integer dtypes only whole numbers
  (exactly: text is read as a decimal, not through a float)."""
  if isinstance(value, bool):
    return int(value)
  if isinstance(value, int):
    return value
  if isinstance(value, float):
    if is_float:
      return value
    if not math.isfinite(value) or not value.is_integer():
      raise ValueError(f"{value!r} is not a whole number")
    return int(value)
  if isinstance(value, (bytes, str)):
    text = _text(value).strip()
    try:
      return float(text) if is_float else int(text)
    except ValueError:
      pass
    try:
      number = decimal.Decimal(text)
    except decimal.InvalidOperation:
      raise ValueError(f"{text[:40]!r} is not a number") from None
    if not number.is_finite() or number != number.to_integral_value():
      raise ValueError(f"{text[:40]!r} is not a whole number")
    return int(number)
  raise ValueError(f"{str(value)[:40]!r} is not a number")


def _list_values(cell: list, shape: Tuple[int, ...]) -> list:
  """The values of a list cell: flat (row-major) or nested as `shape`."""
  if not any(isinstance(v, (list, tuple)) for v in cell):
    return list(cell)
  nested = np.asarray(cell, dtype=object)
  if nested.shape != tuple(shape) or any(
      isinstance(v, (list, tuple)) for v in nested.reshape(-1).tolist()):
    raise ValueError(f"the lists are nested as {list(nested.shape)} (or "
                     f"ragged), not as the shape {list(shape)}")
  return nested.reshape(-1).tolist()


def _numbers(array, n, is_float):
  """(values, valid, {row: reason}) of one numeric column."""
  values = np.zeros(n, dtype=np.float64 if is_float else np.int64)
  valid = np.zeros(n, dtype=bool)
  errors = {}
  if array is None:
    return values, valid, errors
  target = pa.float64() if is_float else pa.int64()
  if isinstance(array, (pa.Array, pa.ChunkedArray)):
    arr = array.combine_chunks() if isinstance(array, pa.ChunkedArray) \
        else array
    if pa.types.is_dictionary(arr.type):
      arr = arr.dictionary_decode()
    try:
      if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        arr = pc.utf8_trim_whitespace(arr)
        arr = pc.if_else(pc.equal(arr, ""), pa.scalar(None, arr.type), arr)
      cast = pc.cast(arr, target)
      valid = cast.is_valid().to_numpy(zero_copy_only=False)
      values = cast.fill_null(0).to_numpy(zero_copy_only=False)
      return values, valid, errors
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
      pass
  for row, cell in enumerate(_cells(array)):
    if cell is None or (isinstance(cell, (str, bytes)) and
                        not _text(cell).strip()):
      continue
    try:
      values[row] = _parse_number(cell, is_float)
      valid[row] = True
    except (ValueError, TypeError, OverflowError) as e:
      errors[row] = str(e)
  return values, valid, errors


def _cast_rows(m, rows, dtype, shape, problems):
  out = []
  for row, v in enumerate(rows):
    if v is None or row in problems:
      out.append(None)
      continue
    try:
      out.append(_checked(np.asarray(v), dtype, shape, None))
    except (MediaError, ValueError, TypeError, OverflowError) as e:
      problems.setdefault(row, []).append((m.name, str(e)))
      out.append(None)
  return out


def _checked(array: np.ndarray, dtype: np.dtype, shape: Tuple[int, ...],
             path: Optional[str]) -> np.ndarray:
  """The array as `dtype` and `shape` (-1: any size), or MediaError."""
  where = f"{path}: " if path else ""
  if path is not None:  # a loaded array keeps its shape
    if array.ndim != len(shape) or any(
        d != -1 and d != s for d, s in zip(shape, array.shape)):
      raise MediaError(f"{where}the array has shape {list(array.shape)}, "
                       f"not {list(shape)}")
    if array.dtype == dtype:
      return array
    if np.can_cast(array.dtype, dtype, casting="safe"):
      converted = array.astype(dtype)
      # NumPy calls int64 -> float64 safe; past 2**53 it is not exact.
      if array.dtype.kind in "iu" and dtype.kind == "f" and not \
          np.array_equal(converted.astype(array.dtype), array):
        raise MediaError(f"{where}the {array.dtype} values do not all fit "
                         f"{dtype} exactly; declare dtype: {array.dtype}")
      return converted
    raise MediaError(f"{where}the array holds {array.dtype}, which does not "
                     f"fit {dtype} without loss; declare dtype: "
                     f"{array.dtype}")
  size = int(np.prod(shape))
  flat = array.reshape(-1)
  if flat.size != size:
    raise MediaError(f"{flat.size} values, but shape {list(shape)} takes "
                     f"{size}")
  if dtype.kind in "iu":
    info = np.iinfo(dtype)
    ints = [_parse_number(v, False) for v in flat.tolist()]
    bad = [v for v in ints if not info.min <= v <= info.max]
    if bad:
      raise MediaError(f"{bad[0]} is outside the range of {dtype} "
                       f"({info.min}..{info.max})")
    return np.array(ints, dtype=dtype).reshape(shape)
  values = flat.astype(np.float64)
  if dtype != np.float64:  # float16 / float32: finite values that overflow
    big = np.isfinite(values) & (np.abs(values) > np.finfo(dtype).max)
    if big.any():
      raise MediaError(f"{values[big][0]} does not fit {dtype}")
  return values.astype(dtype).reshape(shape)
