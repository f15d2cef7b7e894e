"""The preprocessing_fn TensorFlow Transform runs: the schema's declared
analyzers (`preprocessing_fn(section)`), the user's own function
(`with_preprocessing_fn`), both merged on the stored features
(`combined_fn`), traced before anything runs (`check_traces`), and what the
build key sees of them (`fn_digest`). See beam_tfrecords.tft."""

import dataclasses
import hashlib
import inspect
from typing import Any, Callable, Dict, List, Optional, Union

from beam_tfrecords.core.errors import InputError
from beam_tfrecords.schema import Schema, load_schema
from beam_tfrecords.schema.model import TransformSection
from beam_tfrecords.schema.tfmd import SEQUENCE_FEATURE, to_tfmd
from beam_tfrecords.sources.preprocess import function_digest, import_function

__all__ = ["preprocessing_fn", "with_preprocessing_fn", "combined_fn",
           "check_traces", "analyze_columns", "fn_digest", "traced_key",
           "tfxio_source", "SEQUENCE_PREFIX"]

# TFXIO names a SequenceExample's per-step feature x "##SEQUENCE##.x".
SEQUENCE_PREFIX = SEQUENCE_FEATURE + "."


def preprocessing_fn(section: TransformSection):
  """The TFT preprocessing_fn the section declares."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  import tensorflow_transform as tft  # pylint: disable=import-outside-toplevel

  def fn(inputs: Dict[str, Any]) -> Dict[str, Any]:
    out = {}
    for t in section.features:
      x = inputs[t.source]
      p = dict(t.params)
      # int64 is scaled in float64 (TFT would use float32, which merges
      # integers past 2**24: timestamps, ids), then stored as float32.
      if t.op == "scale_to_z_score":
        out[t.name] = tf.cast(tft.scale_to_z_score(
            tf.cast(x, tf.float64)), tf.float32) if x.dtype == tf.int64 \
            else tft.scale_to_z_score(x)
      elif t.op == "scale_to_0_1" and x.dtype == tf.int64:
        out[t.name] = _int_0_1(x)
      elif t.op == "scale_to_0_1":
        out[t.name] = tft.scale_to_0_1(x)
      elif t.op == "compute_and_apply_vocabulary":
        out[t.name] = tft.compute_and_apply_vocabulary(
            x, top_k=p.get("top_k"),
            frequency_threshold=p.get("frequency_threshold"),
            num_oov_buckets=p.get("num_oov_buckets", 0),
            vocab_filename=t.name)
      elif t.op == "bucketize":
        out[t.name] = tft.bucketize(x, p["num_buckets"])
      elif t.op == "hash_strings":
        out[t.name] = tft.hash_strings(x, p["hash_buckets"])
      else:
        out[t.name] = x if isinstance(x, (tf.SparseTensor, tf.RaggedTensor)
                                      ) else tf.identity(x)
    return out
  return fn


def _int_0_1(x):
  """scale_to_0_1 of int64 values: TFT's min / max would go through
  float32, int64's are exact; scaled in float64, stored as float32."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  import tensorflow_transform as tft  # pylint: disable=import-outside-toplevel
  low, high = tft.min(x), tft.max(x)
  span = tf.cast(high - low, tf.float64)

  def scaled(v):
    return tf.cast(tf.where(
        span > 0, tf.cast(v - low, tf.float64) / tf.maximum(span, 1.0),
        tf.sigmoid(tf.cast(v, tf.float64))), tf.float32)  # as TFT
  # A sequence's per-step values: (batch, steps) ragged.
  return tf.ragged.map_flat_values(scaled, x) if isinstance(
      x, tf.RaggedTensor) else scaled(x)


_SETTING = "transform.preprocessing_fn"


def with_preprocessing_fn(schema: Schema,
                          given: Union[None, str, Callable[..., Any]]
                          ) -> Schema:
  """The schema with its preprocessing_fn resolved: `given` (a function
  or "module:function", which replaces the schema's), else the schema's
  own "module:function", imported here.

  Raises:
    InputError: the function does not import or is not callable, or the
      schema cannot take one (a transform section its splits or names
      refuse: SchemaError).
  """
  section = schema.transform
  if given is None and (section is None
                        or section.preprocessing_fn is None):
    return schema
  if given is None:
    assert section is not None and section.preprocessing_fn is not None
    fn, name = import_function(section.preprocessing_fn, _SETTING), \
        section.preprocessing_fn
  elif isinstance(given, str):
    fn, name = import_function(given, "preprocessing_fn"), given
  else:
    fn, name = given, _display_name(given)
  if not callable(fn):
    raise InputError(f"the preprocessing_fn {name} is a {type(fn).__name__}"
                     ", not a function")
  if section is None:
    section = TransformSection(features=())
  out = dataclasses.replace(schema, transform=dataclasses.replace(
      section, preprocessing_fn=name, fn=fn))
  # The steps re-read the schema from its dict: it must read back (a
  # transform section needs the analyzed split, names not reserved...).
  load_schema(out.to_dict())
  return out


def _display_name(fn: Callable[..., Any]) -> str:
  """module:qualname of a function given as an object (a closure's or a
  lambda's too; "(partial)" after a functools.partial's function)."""
  base = getattr(fn, "func", fn)
  if not hasattr(base, "__qualname__"):  # a callable instance
    base = type(base)
  name = f"{getattr(base, '__module__', None) or 'unknown'}:" \
      f"{base.__qualname__}"
  return name + "(partial)" if base is not fn and hasattr(fn, "func") \
      else name


def traced_key(schema: Schema) -> Dict[str, str]:
  """What build() and WriteDataset do with a resolved preprocessing_fn
  before the pipeline is made: trace it (check_traces), and the build
  key's entry for it ({} without one)."""
  check_traces(schema)
  digest = fn_digest(schema)
  return {"preprocessing_fn": digest} if digest else {}


def fn_digest(schema: Schema) -> Optional[str]:
  """What the build key sees of the user's function: its source and what
  it closes over, and the source of its whole module (TFX modules keep
  constants and helpers beside the function); None without one.

  Raises:
    InputError: the function cannot be pickled (TFT ships it to the
      workers, which trace it again).
  """
  section = schema.transform
  if section is None or section.fn is None:
    return None
  try:
    digest = function_digest(section.fn)
  except Exception as e:  # pylint: disable=broad-except
    raise InputError(
        f"the preprocessing_fn {section.preprocessing_fn} cannot be pickled "
        f"to ship it to the workers ({type(e).__name__}: {e}); define it at "
        "the top level of a module") from e
  try:
    module = inspect.getsource(inspect.getmodule(
        getattr(section.fn, "func", section.fn)))  # type: ignore[arg-type]
  except (OSError, TypeError):
    module = ""
  return hashlib.sha256(f"{digest}\0{module}".encode("utf-8")).hexdigest(
  )[:16]


def combined_fn(schema: Schema) -> Callable[[Dict[str, Any]],
                                             Dict[str, Any]]:
  """The preprocessing_fn TFT runs: the declared analyzers' and the
  user's, on the same inputs (`stored_features`), their outputs merged."""
  section = schema.transform
  assert section is not None  # a schema with a transform section
  declared = preprocessing_fn(section) if section.features else None
  user, name = section.fn, section.preprocessing_fn
  stored = stored_features(schema)

  def fn(inputs: Dict[str, Any]) -> Dict[str, Any]:
    inputs = stored(inputs)
    out = dict(declared(dict(inputs))) if declared else {}
    if user is None:
      return out
    theirs = user(dict(inputs))
    if not isinstance(theirs, dict):
      raise TypeError(f"the preprocessing_fn {name} returned a "
                      f"{type(theirs).__name__}, not a dict of tensors")
    both = sorted(set(out) & set(theirs))
    if both:
      raise ValueError(f"the preprocessing_fn {name} returns {both}, which "
                       "transform.features also declares; rename one")
    out.update(theirs)
    return out
  return fn


def stored_features(schema: Schema) -> Callable[[Dict[str, Any]],
                                                Dict[str, Any]]:
  """TFXIO's tensors -> the stored features by name, as a
  preprocessing_fn gets them. An Example's are TFXIO's own (dense when
  every record has a fixed shape, else sparse). A SequenceExample's
  context features are too; its per-step feature x, which TFXIO gives as
  "##SEQUENCE##.x" (batch, steps, values), is "x", ragged (batch, steps)
  when each step holds one value (a required or defaulted scalar), else
  (batch, steps, values)."""
  scalar_steps = {f.name for f in schema.sequence
                  if f.always_present and f.shape == ()}

  def inputs(tensors: Dict[str, Any]) -> Dict[str, Any]:
    out = {}
    for key, value in tensors.items():
      if key.startswith(SEQUENCE_PREFIX):
        key = key[len(SEQUENCE_PREFIX):]
        if key in scalar_steps:
          value = value.merge_dims(1, 2)
      out[key] = value
    return out
  return inputs


def tfxio_source(schema: Schema):
  """The TFXIO that decodes the schema's raw records (in memory)."""
  from tfx_bsl.public import tfxio  # pylint: disable=import-outside-toplevel
  kind = tfxio.TFSequenceExampleBeamRecord if schema.is_sequence else \
      tfxio.TFExampleBeamRecord
  return kind(physical_format="inmem",
              telemetry_descriptors=["beam_tfrecords"],
              schema=to_tfmd(schema))


def analyze_columns(schema: Schema) -> List[str]:
  """The features TFT's analyzers read: the function traced on the type
  specs TransformRecords feeds TFT (the same TFXIO source)."""
  import tensorflow_transform as tft  # pylint: disable=import-outside-toplevel
  type_specs = tfxio_source(schema).TensorAdapter().TypeSpecs()
  return tft.get_analyze_input_columns(
      combined_fn(schema), type_specs)  # type: ignore[arg-type]


def check_traces(schema: Schema) -> None:
  """Traces the preprocessing_fn on the schema's raw feature spec, as TFT
  will when the pipeline is made.

  Raises:
    InputError: it fails (naming the function and the error).
  """
  section = schema.transform
  if section is None or section.fn is None:
    return
  names = sorted(f.name for f in schema.all_features)
  try:
    analyze_columns(schema)
  except Exception as e:  # pylint: disable=broad-except
    raise InputError(
        f"the preprocessing_fn {section.preprocessing_fn} fails when "
        f"TensorFlow Transform traces it on the stored features "
        f"({', '.join(names)}): {type(e).__name__}: "
        f"{str(e).strip()[:800]}") from e
