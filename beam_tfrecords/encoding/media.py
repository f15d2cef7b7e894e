"""The columns that image, tensor and vocabulary features make.

A schema's Media features (schema.model.Media) read input columns and make
the columns their stored features read (named with model.made_column):

* image: a column of paths (or URIs) -> the file's encoded bytes (as they
  are, or resized / converted / re-encoded), height, width, channels and
  format (encoding.images). With `base_dir`, relative paths resolve
  against it and no path may leave it (encoding.media_paths).
* tensor: list cells, several numeric columns, or .npy files -> a numeric
  array of the declared dtype and shape, stored as raw little-endian bytes
  plus a shape feature, or as a flat int64 / float list (encoding.tensors).
* vocabulary: a string column -> each value's index in the vocabulary.

`MediaPreparer.prepare` works on one batch and returns the made columns and
the rows that cannot be stored with their reasons (a missing, unreadable or
broken file, a value out of range, ...): those rows go to the dead-letter
output.

Files are read by the `fetch` the preparer is given, not here, so this
module needs no file system and no Beam: a build passes
sources.fetch.fetch_files (Beam's FileSystems on a pool of threads), a test
can pass a dict. See `Fetch` for what it must do.
"""

from typing import (Any, Callable, Dict, List, Mapping, Optional, Protocol,
                    Sequence, Tuple, TypeVar, Union)

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from beam_tfrecords.encoding import columns as col
from beam_tfrecords.encoding import tensors
from beam_tfrecords.encoding.images import (ImageError, ImageInfo, ImageOptions,
                                            process_image)
from beam_tfrecords.encoding.media_cells import (MediaError, Problems,
                                                 add_problem, binary_array,
                                                 cells, int_array, text)
from beam_tfrecords.encoding.media_paths import resolve_path
from beam_tfrecords.schema.model import Media, MediaKind, Schema, made_column

__all__ = ["MediaPreparer", "Fetch", "resolve_path", "MediaError"]

T = TypeVar("T")


class Fetch(Protocol):
  """Reads the files a batch's rows name.

  fetch(paths, limit, then) returns, per path and in order, then(data,
  path) of the file's bytes, or an exception whose message (naming the
  path) says why the file cannot be read: missing, unreadable, or larger
  than `limit` bytes. `then` never raises; a fetch may run it on other
  threads (sources.fetch.fetch_files reads and decodes on its I/O pool).
  """

  def __call__(self, paths: Sequence[str], limit: int,
               then: Callable[[bytes, str], T]
               ) -> Sequence[Union[T, Exception]]: ...


class MediaPreparer:
  """Makes a batch's media columns (see the module docstring).

  Args:
    schema: a Schema with `media` (vocabularies resolved: no `auto`).
    fetch: reads the image and .npy files rows name (see `Fetch`).
  """

  def __init__(self, schema: Schema, fetch: Fetch):
    self._schema = schema
    self._fetch = fetch
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

  def _files(self, m: Media, array: Any, n: int, source: str,
             parse: Callable[[bytes, str], T]
             ) -> List[Union[None, T, MediaError]]:
    """Per row: None (no path), a MediaError, or parse(data, path) of the
    file the row's path names; in row order."""
    base_dir = m.options.get("base_dir")
    out: List[Union[None, T, MediaError]] = []
    wanted: List[int] = []  # the row of each of `paths`
    paths: List[str] = []
    for path in (text(v) for v in cells(array, n)):
      out.append(None)
      if path is None:
        continue
      try:
        paths.append(resolve_path(path, base_dir, source))
        wanted.append(len(out) - 1)
      except MediaError as e:
        out[-1] = e
      except Exception as e:  # pylint: disable=broad-except
        out[-1] = _unstorable(path, e)

    def then(data: bytes, path: str) -> Union[T, MediaError]:
      try:
        return parse(data, path)
      except MediaError as e:
        return e
      except Exception as e:  # pylint: disable=broad-except
        # A file the libraries choke on (e.g. an image too large for
        # JPEG) is that row's problem, not the build's.
        return _unstorable(path, e)

    fetched = self._fetch(paths, self._limit, then) if paths else []
    if len(fetched) != len(paths):
      raise ValueError(f"the fetch gave {len(fetched)} results for "
                       f"{len(paths)} paths; it must give one per path")
    for row, r in zip(wanted, fetched):
      out[row] = MediaError(str(r)) if isinstance(r, Exception) and \
          not isinstance(r, MediaError) else r
    return out

  def _image(self, m: Media, array: Any, n: int, source: str,
             made: Dict[str, pa.Array], problems: Problems) -> None:
    required = self._schema.feature(m.name).required
    options = self._images[m.name]

    def parse(data: bytes, path: str) -> ImageInfo:
      try:
        return process_image(data, options)
      except ImageError as e:
        raise MediaError(f"{path}: {e}") from None

    results = self._files(m, array, n, source, parse)
    out: Dict[str, List[Any]] = {k: [None] * n for k in (
        "bytes", "height", "width", "channels", "format")}
    for row, r in enumerate(results):
      if r is None:
        if required:
          add_problem(problems, row, m.name,
                      f'required image is missing (column "{m.sources[0]}" '
                      "has no path)")
      elif isinstance(r, MediaError):
        add_problem(problems, row, m.name, str(r))
      else:
        out["bytes"][row] = r.data
        out["height"][row], out["width"][row] = r.height, r.width
        out["channels"][row], out["format"][row] = r.channels, r.format
    made[made_column(m.name, "bytes")] = binary_array(out["bytes"])
    for facet in ("height", "width", "channels"):
      made[made_column(m.name, facet)] = int_array(out[facet])
    made[made_column(m.name, "format")] = pa.array(
        out["format"], type=pa.large_string())

  def _tensor(self, m: Media, arrays: Mapping[str, Any], n: int,
              source: str, made: Dict[str, pa.Array],
              problems: Problems) -> None:
    o = m.options
    dtype = np.dtype(o["dtype"])
    shape = tuple(o["shape"])
    values: Sequence[Optional[np.ndarray]]
    if o["from"] == "npy":
      def parse(data: bytes, path: str) -> np.ndarray:
        return tensors.npy_array(data, path, dtype, shape)

      values = []
      for row, r in enumerate(self._files(m, arrays[m.sources[0]], n,
                                          source, parse)):
        if isinstance(r, MediaError):
          add_problem(problems, row, m.name, str(r))
          r = None
        values.append(r)
    elif len(m.sources) > 1:
      values = tensors.gathered_rows(m, arrays, n, dtype, problems)
    else:
      values = tensors.listed_rows(m, arrays[m.sources[0]], n, dtype, shape,
                                   problems)
    made.update(tensors.tensor_columns(
        m, values, self._schema.feature(m.name).required, problems))

  def _vocabulary(self, m: Media, array: Any, n: int,
                  made: Dict[str, pa.Array], problems: Problems) -> None:
    feature = self._schema.feature(m.name)
    vocab = m.options["values"]
    errors: Dict[int, str] = {}
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
      add_problem(problems, row, m.name,
                  f"{value[:60]!r} is not in the vocabulary ({len(vocab)} "
                  f"values: {shown}); add it or fix the row")
    for row in np.nonzero(~present)[0].tolist():
      if row in errors:  # not a value the feature takes: say why
        add_problem(problems, row, m.name, errors[row])
      elif feature.required:
        add_problem(problems, row, m.name,
                    f'required value is missing (column "{m.sources[0]}" '
                    "has no value)")
    made[made_column(m.name, "index")] = int_array(
        [None if v is None else int(v) for v in index.to_pylist()])


def _unstorable(path: str, e: Exception) -> MediaError:
  return MediaError(f"{path}: cannot be stored ({type(e).__name__}: "
                    f"{str(e)[:200]})")
