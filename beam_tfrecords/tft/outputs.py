"""A batch of transformed tensors -> serialized records.

What a preprocessing_fn returns for a batch, as TFT's TransformDataset
gives it, becomes one record per row, its features in name order (the same
bytes on every run), encoded by this package's encoders:

* **Examples:** every output is a feature; a row's values are its part of
  the tensor, flattened (dense (batch, ...), sparse (batch, n), ragged).
* **SequenceExamples:** a RaggedTensor output (batch, steps[, values]) is
  a feature list, one step per step of the row; a dense or sparse output
  is a context feature. (A variable-length context feature is a
  SparseTensor, as TFT gives one: `ragged.to_sparse()`.)

Values are stored as TFT stores them: floating point as float, integers
and booleans as int64, strings as bytes.
"""

from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import pyarrow as pa

__all__ = ["TransformedEncoder"]


def _value_array(values: np.ndarray) -> Tuple[str, pa.Array]:
  """Flat values -> (feature type, Arrow values)."""
  if values.dtype.kind == "f":
    return "float", pa.array(values.astype(np.float32, copy=False))
  if values.dtype.kind in "iub":
    return "int64", pa.array(values.astype(np.int64, copy=False))
  return "bytes", pa.array(values.tolist(), pa.large_binary())


def _lists(offsets: np.ndarray, values: np.ndarray
           ) -> Tuple[str, pa.LargeListArray]:
  kind, flat = _value_array(values)
  return kind, pa.LargeListArray.from_arrays(
      pa.array(offsets.astype(np.int64, copy=False)), flat)


def _flattened(tensor: Any, n: int) -> Tuple[np.ndarray, np.ndarray]:
  """(offsets per row, flat values) of a dense, sparse or ragged tensor
  whose first dimension is the batch."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  if isinstance(tensor, tf.RaggedTensor):
    if tensor.shape.rank > 2:
      tensor = tensor.merge_dims(1, -1)
    return tensor.row_splits.numpy(), tensor.flat_values.numpy()
  if isinstance(tensor, tf.SparseTensor):
    rows = tensor.indices.numpy()[:, 0]
    order = np.argsort(rows, kind="stable")
    counts = np.bincount(rows, minlength=n)
    return (np.concatenate([[0], np.cumsum(counts)]),
            tensor.values.numpy()[order])
  values = tensor.numpy().reshape(n, -1)
  return np.arange(n + 1, dtype=np.int64) * values.shape[1], \
      values.reshape(-1)


def _steps(tensor: Any) -> Tuple[str, Tuple[int, ...], pa.LargeListArray]:
  """A ragged (batch, steps[, ...]) output -> (type, step shape, per row
  its list of steps): scalar steps when each step is one value."""
  inner = tensor.values
  step_offsets = tensor.row_splits.numpy()
  if not hasattr(inner, "row_splits") and inner.shape.rank == 1:
    kind, steps = _lists(step_offsets, inner.numpy())
    return kind, (), steps
  offsets, values = _flattened(inner, int(step_offsets[-1]))
  kind, per_step = _lists(offsets, values)
  return kind, (-1,), pa.LargeListArray.from_arrays(
      pa.array(step_offsets.astype(np.int64, copy=False)), per_step)


class TransformedEncoder:
  """Encodes transformed batches as Examples or SequenceExamples (one
  encoder per set of output names and types, made on first use)."""

  def __init__(self, sequence: bool):
    self._sequence = sequence
    self._encoders: Dict[Any, Any] = {}

  def _encoder(self, declared: Tuple[Tuple[str, str, Any], ...]):
    """declared: (name, type, None for a feature / context feature, or the
    step shape of a feature list)."""
    # pylint: disable=import-outside-toplevel
    from beam_tfrecords.encoding import ExampleEncoder
    from beam_tfrecords.encoding.list_sequences import SequenceEncoder
    if declared not in self._encoders:
      plain = {n: {"type": t, "shape": [-1]} for n, t, s in declared
               if s is None}
      if not self._sequence:
        self._encoders[declared] = ExampleEncoder(
            {"name": "transformed", "features": plain})
      else:
        self._encoders[declared] = SequenceEncoder({
            "name": "transformed", "record": "sequence_example",
            "ragged": True, "context": plain,
            "sequence": {n: {"type": t, "shape": list(s)}
                         for n, t, s in declared if s is not None}})
    return self._encoders[declared]

  def encode(self, outputs: Dict[str, Any], n: int) -> List[bytes]:
    """The n rows' records; a ValueError if a value does not encode."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    declared: List[Tuple[str, str, Optional[Tuple[int, ...]]]] = []
    columns: Dict[str, pa.Array] = {}
    for name in sorted(outputs):
      tensor = outputs[name]
      if self._sequence and isinstance(tensor, tf.RaggedTensor):
        kind, shape, columns[name] = _steps(tensor)
        declared.append((name, kind, shape))
      else:
        kind, columns[name] = _lists(*_flattened(tensor, n))
        declared.append((name, kind, None))
    encoded = self._encoder(tuple(declared)).encode_columns(columns, n)
    if encoded.errors:
      raise ValueError(f"transformed values that do not encode: "
                       f"{encoded.errors[:3]}")
    return encoded.record_list()
