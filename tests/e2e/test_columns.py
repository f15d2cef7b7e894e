"""beam_tfrecords.read.wire_columns: Examples read with numpy over a whole batch
give what tfx-bsl's decoder gives, value for value and dtype for dtype,
for records written by TensorFlow's protobuf classes (keys in any order)
and by our encoders; and anything outside its layout gives None (then
tfx-bsl decodes), never a wrong value."""

from beam_tfrecords.read.arrays import RecordDecoder
from beam_tfrecords.read.reader import dataset_schema
from beam_tfrecords.read.wire_columns import Text, decode_columns, objects

from tests.helpers.columns import _same


def test_what_the_build_writes(tmp_path):
  """The bundled movie ratings, as our encoders wrote them."""
  import importlib
  out = str(tmp_path / "movies")
  importlib.import_module("pipelines.movie_ratings").run(["--output", out])
  from beam_tfrecords.read.stream import RecordStream
  records = list(RecordStream(out))
  decoder = RecordDecoder(dataset_schema(out))
  got = decode_columns(records, decoder._schema)  # pylint: disable=protected-access
  assert got is not None
  _same(objects(got), objects(decoder._tfx_columns(records)))
  assert isinstance(got["suggestion"], Text)
