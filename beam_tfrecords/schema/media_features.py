"""The checks of image, tensor and vocabulary declarations.

Each is one declared feature in an example schema's `features:` that the
build turns into several stored features (the encoded image and its
height / width / channels / format; an array's bytes and shape, or its flat
values; a string and its index), all reading columns the build makes.
"""

import functools
from typing import Any, Callable, Dict, List, Optional, Tuple

from beam_tfrecords.core.errors import preview
from beam_tfrecords.schema.checking import Checker, listed, suggest
from beam_tfrecords.schema.features import (FEATURE_KEYS, IMAGE_KEYS, NAME_RE,
                                            TENSOR_KEYS, parse_feature,
                                            required_and_description)
from beam_tfrecords.schema.model import (Feature, FeatureType, IMAGE_CONVERTS,
                                         IMAGE_ENCODES, IMAGE_METHODS, Media,
                                         MediaKind, made_column)

__all__ = ["TENSOR_DTYPES", "media_kind", "parse_media", "image_options"]

TENSOR_DTYPES = ("uint8", "int8", "uint16", "int16", "uint32", "int32",
                 "int64", "float16", "float32", "float64")


def media_kind(raw: Any) -> Optional[MediaKind]:
  """The kind of a declaration in `features:`, None for a plain feature."""
  if isinstance(raw, str):
    raw = {"type": raw}
  if not isinstance(raw, dict):
    return None
  if raw.get("type") in (MediaKind.IMAGE.value, MediaKind.TENSOR.value):
    return MediaKind(raw["type"])
  if "vocabulary" in raw:
    return MediaKind.VOCABULARY
  return None


def parse_media(check: Checker, name: str, raw_name: Any, raw: Any,
                kind: MediaKind) -> Tuple[Media, List[Feature]]:
  """An image / tensor / vocabulary declaration: (Media, stored
  features)."""
  key = f"features.{name}"
  if not NAME_RE.match(name):
    check.fail(key, f"{preview(name)} is not a valid feature name")
  if isinstance(raw, str):
    raw = {"type": raw}
  allowed = {MediaKind.IMAGE: IMAGE_KEYS, MediaKind.TENSOR: TENSOR_KEYS,
             MediaKind.VOCABULARY: FEATURE_KEYS + ("vocabulary",)}[kind]
  check.check_keys(key, raw, allowed)
  required, description = required_and_description(check, key, raw)
  declared = dict(raw)
  if kind is MediaKind.VOCABULARY:
    return _vocabulary(check, key, name, raw_name, raw, required, declared)
  source = raw.get("source", name)
  base_dir = raw.get("base_dir")
  if base_dir is not None and (not isinstance(base_dir, str)
                               or not base_dir):
    check.fail(f"{key}.base_dir", "must be a directory (local, gs://, "
               f"s3://, ...); got {preview(base_dir)}")
  made = functools.partial(_made_feature, name, required)
  if kind is MediaKind.IMAGE:
    if not isinstance(source, str) or not source:
      check.fail(f"{key}.source", "must be the column holding the image "
                 f"paths; got {preview(source)}")
    options = image_options(check, key, raw)
    stored = [made("bytes", FeatureType.BYTES, text=description
                   or "the encoded image"),
              made("height", FeatureType.INT64), made("width",
                                                      FeatureType.INT64),
              made("channels", FeatureType.INT64),
              made("format", FeatureType.STRING)]
    options["base_dir"] = base_dir
    return Media(name=name, kind=kind, sources=(source,),
                 stored=tuple(f.name for f in stored), options=options,
                 declared=declared), stored
  return _tensor(check, key, name, raw, description, declared, made,
                 source, base_dir)


def _made_feature(name: str, required: bool, facet: str, ftype: FeatureType,
                  shape: Tuple[int, ...] = (), text: str = "") -> Feature:
  """A stored feature of the declaration `name`, reading the column the
  build makes for `facet`."""
  return Feature(name=name if facet in ("bytes", "values") else
                 f"{name}_{facet}", type=ftype, shape=shape,
                 source=made_column(name, facet), required=required,
                 description=text)


def _vocabulary(check: Checker, key: str, name: str, raw_name: Any,
                raw: dict, required: bool,
                declared: dict) -> Tuple[Media, List[Feature]]:
  """A string feature with `vocabulary:`, and the index feature it makes."""
  kind = MediaKind.VOCABULARY
  plain = {k: v for k, v in raw.items() if k != "vocabulary"}
  feature = parse_feature(check, name, raw_name, plain)
  if feature.type is not FeatureType.STRING or not feature.is_scalar:
    check.fail(f"{key}.vocabulary", "goes with a scalar string feature "
               "(type: string), whose values it numbers")
  if feature.default is not None:
    check.fail(f"{key}.default", "a feature with a vocabulary takes no "
               "default (its index would have to be made up)")
  vocab = raw["vocabulary"]
  if vocab != "auto":
    if not isinstance(vocab, list) or not vocab or not all(
        isinstance(v, str) for v in vocab):
      check.fail(f"{key}.vocabulary", "must be auto (the sorted values "
                 "found: class folder names for images) or a list of "
                 f"the values in index order; got {preview(vocab)}")
    if len(set(vocab)) != len(vocab):
      check.fail(f"{key}.vocabulary", "lists a value twice")
  index = Feature(name=f"{name}_index", type=FeatureType.INT64,
                  source=made_column(name, "index"), required=required,
                  description=f"index of {name} in its vocabulary")
  column = feature.column
  assert column is not None  # only derive: length / part read no column
  return Media(name=name, kind=kind, sources=(column,),
               stored=(name, index.name),
               options={"values": None if vocab == "auto" else
                        list(vocab)},
               declared=declared), [feature, index]


def _tensor(check: Checker, key: str, name: str, raw: dict, description: str,
            declared: dict, made: Callable[..., Feature], source: Any,
            base_dir: Optional[str]) -> Tuple[Media, List[Feature]]:
  """A `type: tensor` declaration (values in the row or .npy files)."""
  kind = MediaKind.TENSOR
  dtype = raw.get("dtype")
  if dtype not in TENSOR_DTYPES:
    check.fail(f"{key}.dtype", f"must be one of {listed(TENSOR_DTYPES)}; "
               f"got {preview(dtype)}.{suggest(dtype, TENSOR_DTYPES)}")
  storage = raw.get("storage", "bytes")
  if storage not in ("bytes", "list"):
    check.fail(f"{key}.storage", "must be bytes (raw little-endian bytes + "
               f"a shape feature) or list (a flat int64/float list); got "
               f"{preview(storage)}")
  shape = raw.get("shape")
  if not isinstance(shape, list) or not shape or not all(
      isinstance(d, int) and not isinstance(d, bool) and (d > 0 or d == -1)
      for d in shape):
    check.fail(f"{key}.shape", "must list the dimensions, e.g. [8, 8] or "
               f"[28, 28, 1] (-1: any size, storage: bytes only); got "
               f"{preview(shape)}")
  if -1 in shape and storage == "list":
    check.fail(f"{key}.shape", "a list tensor needs every dimension fixed; "
               "use storage: bytes for shapes that vary")
  loader = raw.get("from")
  if loader not in (None, "npy"):
    check.fail(f"{key}.from", f"must be npy (the column holds .npy file "
               f"paths) or absent (the values are in the row); got "
               f"{preview(loader)}")
  columns = source if isinstance(source, list) else [source]
  if not columns or not all(isinstance(c, str) and c for c in columns):
    check.fail(f"{key}.source", f"must be a column or a list of columns; "
               f"got {preview(source)}")
  if len(set(columns)) != len(columns):
    check.fail(f"{key}.source", "names a column twice")
  size = 1
  for d in shape:
    size *= d
  if len(columns) > 1:
    if loader is not None:
      check.fail(f"{key}.from", "reads one path column")
    if -1 in shape or size != len(columns):
      check.fail(f"{key}.source", f"{len(columns)} columns cannot fill "
                 f"shape {shape} ({size if size > 0 else 'any number of'} "
                 "values)")
  if -1 in shape and loader is None:
    check.fail(f"{key}.shape", "-1 dimensions need from: npy (arrays "
               "whose shape varies); values in a row fill a fixed shape")
  separator = raw.get("separator")
  if separator is not None and (not isinstance(separator, str)
                                or not separator or len(columns) > 1
                                or loader is not None):
    check.fail(f"{key}.separator", "splits a text cell of one column into "
               f"values; got {preview(separator)}")
  if storage == "bytes":
    stored = [made("bytes", FeatureType.BYTES, text=description or
                   f"{dtype} array, raw little-endian bytes"),
              made("shape", FeatureType.INT64, shape=(len(shape),))]
  else:
    stored = [made("values", FeatureType.FLOAT if dtype.startswith("float")
                   else FeatureType.INT64, shape=tuple(shape),
                   text=description or f"{dtype} array, flat")]
  options = {"dtype": dtype, "shape": list(shape), "storage": storage,
             "columns": columns, "from": loader, "separator": separator,
             "base_dir": base_dir}
  return Media(name=name, kind=kind, sources=tuple(columns),
               stored=tuple(f.name for f in stored), options=options,
               declared=declared), stored


def image_options(check: Checker, key: str, raw: dict) -> Dict[str, Any]:
  """The settings of a `type: image` declaration (resize, method, convert,
  encode, quality, verify)."""
  out: Dict[str, Any] = {}
  resize = raw.get("resize")
  if resize is not None:
    if isinstance(resize, dict):
      check.check_keys(f"{key}.resize", resize, ("height", "width"))
      resize = [resize.get("height"), resize.get("width")]
    if not isinstance(resize, list) or len(resize) != 2 or not all(
        isinstance(d, int) and not isinstance(d, bool) and d > 0
        for d in resize):
      check.fail(f"{key}.resize", "must be [height, width] or {height: h, "
                 f"width: w}} in pixels; got {preview(raw.get('resize'))}")
    out["resize"] = list(resize)
  for opt, allowed in (("method", IMAGE_METHODS),
                       ("convert", IMAGE_CONVERTS),
                       ("encode", IMAGE_ENCODES)):
    if opt in raw:
      if raw[opt] not in allowed:
        check.fail(f"{key}.{opt}", f"must be one of {listed(allowed)}; "
                   f"got {preview(raw[opt])}.{suggest(raw[opt], allowed)}")
      out[opt] = raw[opt]
  if "method" in raw and resize is None:
    check.fail(f"{key}.method", "is the resize method; add resize: [h, w]")
  if "quality" in raw:
    q = raw["quality"]
    if isinstance(q, bool) or not isinstance(q, int) or not 1 <= q <= 100:
      check.fail(f"{key}.quality", f"must be a JPEG quality 1-100; got "
                 f"{preview(q)}")
    if out.get("encode") != "jpeg":
      check.fail(f"{key}.quality", "is the JPEG quality; add encode: jpeg")
    out["quality"] = q
  if "verify" in raw:
    if not isinstance(raw["verify"], bool):
      check.fail(f"{key}.verify", "must be true or false")
    out["verify"] = raw["verify"]
  return out
