"""EncodeRows: SourceBatches -> serialized records, with a dead-letter output."""

import base64
import json
from typing import Any, Dict

import apache_beam as beam

from beam_tfrecords.encoding import ExampleEncoder
from beam_tfrecords.sources import SourceBatch

__all__ = ["EncodeRows", "ERRORS", "STATS", "dead_letter_json"]

ERRORS = "errors"
STATS = "stats"
# Raw cells longer than this are cut in the dead-letter row (the reason still
# says what was wrong with the whole value).
MAX_RAW_CHARS = 10_000


def _jsonable(value: Any) -> Any:
  if isinstance(value, bytes):
    try:
      value = value.decode("utf-8")
    except UnicodeDecodeError:
      return {"base64": base64.b64encode(value[:MAX_RAW_CHARS]).decode("ascii")}
  if isinstance(value, str):
    return value if len(value) <= MAX_RAW_CHARS else \
        value[:MAX_RAW_CHARS] + f"... ({len(value)} characters)"
  if isinstance(value, dict):
    return {str(k): _jsonable(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [_jsonable(v) for v in value]
  if isinstance(value, float) and value != value:
    return "NaN"
  if value is None or isinstance(value, (bool, int, float)):
    return value
  return str(value)


def dead_letter_json(record: Dict[str, Any]) -> str:
  return json.dumps(_jsonable(record), sort_keys=True, ensure_ascii=False)


@beam.typehints.with_input_types(SourceBatch)
class _EncodeBatchFn(beam.DoFn):
  """Encodes one batch; rows that fail go to the ERRORS output.

  Outputs: main: serialized records (bytes); ERRORS: dead-letter dicts;
  STATS: (rows_read, records, error_rows) per batch.
  Counters (namespace beam_tfrecords): rows_read, records_encoded,
  rows_rejected.
  """

  def __init__(self, schema_dict: Dict[str, Any]):
    self._schema_dict = schema_dict
    self._encoder = None
    self._rows = beam.metrics.Metrics.counter("beam_tfrecords", "rows_read")
    self._good = beam.metrics.Metrics.counter("beam_tfrecords",
                                              "records_encoded")
    self._bad = beam.metrics.Metrics.counter("beam_tfrecords", "rows_rejected")

  def setup(self):
    self._encoder = ExampleEncoder(self._schema_dict)

  def process(self, batch: SourceBatch):
    result = self._encoder.encode_columns(batch.columns, batch.num_rows)
    for record in result.record_list():
      yield record
    rejected = 0
    for err in batch.errors:
      rejected += 1
      yield beam.pvalue.TaggedOutput(ERRORS, {
          "source": batch.path, "row": err.row, "reason": err.reason,
          "problems": [], "raw": err.raw})
    for err in result.errors:
      rejected += 1
      yield beam.pvalue.TaggedOutput(ERRORS, {
          "source": batch.path, "row": batch.row_number(err.row),
          "reason": err.reason,
          "problems": [{"feature": f, "reason": r} for f, r in err.problems],
          "raw": batch.raw_row(err.row)})
    rows_read = batch.num_rows + len(batch.errors)
    self._rows.inc(rows_read)
    self._good.inc(len(result.rows))
    self._bad.inc(rejected)
    yield beam.pvalue.TaggedOutput(STATS, (rows_read, len(result.rows),
                                           rejected))


class EncodeRows(beam.PTransform):
  """Encodes SourceBatches as the schema says.

  Returns a DoOutputsTuple: main (serialized records), ERRORS (dead-letter
  dicts: source, row, reason, problems, raw) and STATS.
  """

  def __init__(self, schema):
    super().__init__()
    self._schema = schema

  def expand(self, batches):
    return batches | "EncodeBatch" >> beam.ParDo(
        _EncodeBatchFn(self._schema.to_dict())).with_outputs(
            ERRORS, STATS, main="records")
