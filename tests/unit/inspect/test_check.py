"""beam_tfrecords/inspect/check.py, on values: Looking at TFRecord files: any
TFRecord file (`inspect_files`) and a built dataset against a schema
(`validate`). No TensorFlow needed."""

import os

from beam_tfrecords import cli


def _write_tf_files(tf, directory):
  """Files written by TensorFlow itself: one gzip, one plain; Examples."""
  def example(i):
    return tf.train.Example(features=tf.train.Features(feature={
        "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
        "text": tf.train.Feature(bytes_list=tf.train.BytesList(
            value=[b"x"] * (i % 3))),
    })).SerializeToString()
  paths = []
  for name, options, rows in (("a.tfrecord.gz", "GZIP", range(4)),
                              ("b.tfrecord", None, range(4, 7))):
    path = os.path.join(directory, name)
    with tf.io.TFRecordWriter(path, options=options) as w:
      for i in rows:
        w.write(example(i))
    paths.append(path)
  return paths


def test_inspect_reads_foreign_tfrecord_files(tf, tmp_path, capsys):
  _write_tf_files(tf, str(tmp_path))
  assert cli.main(["inspect", str(tmp_path), "--records", "2"]) == 0
  out = capsys.readouterr().out
  assert "2 TFRecord file(s), 7 records (examples)" in out
  assert f"{tmp_path}/a.tfrecord.gz: 4 records" in out and "gzip" in out
  assert f"{tmp_path}/b.tfrecord: 3 records" in out and "uncompressed" in out
  assert "  id: int64_list, in 7 of 7 records, 1 per record" in out
  assert "  text: bytes_list, in 7 of 7 records, 0-2 per record" in out
  assert 'record 0: {"id": [0], "text": []}' in out
  assert 'record 1: {"id": [1], "text": ["x"]}' in out
  # A single file, by a glob, works too.
  assert cli.main(["inspect", str(tmp_path / "b.*")]) == 0
  assert "1 TFRecord file(s), 3 records" in capsys.readouterr().out


def test_inspect_shows_sequence_examples_and_corrupt_files(tf, tmp_path,
                                                           capsys):
  ex = tf.train.SequenceExample()
  ex.context.feature["user"].int64_list.value.append(7)
  for v in (1.0, 2.0, 3.0):
    ex.feature_lists.feature_list["r"].feature.add().float_list.value.append(v)
  path = str(tmp_path / "s.tfrecord")
  with tf.io.TFRecordWriter(path) as w:
    w.write(ex.SerializeToString())
    w.write(ex.SerializeToString())
  assert cli.main(["inspect", path]) == 0
  out = capsys.readouterr().out
  assert "2 records (sequenceexamples)" in out
  assert "feature lists (steps per record):\n  r: float_list, in 2 of 2 " \
      "records, 3 per record" in out
  assert '"feature_lists": {"r": [[1.0], [2.0], [3.0]]}' in out
  data = open(path, "rb").read()
  with open(path, "wb") as f:  # flip a byte in the second record's payload
    f.write(data[:-10] + bytes([data[-10] ^ 1]) + data[-9:])
  assert cli.main(["inspect", path]) == 1
  assert "ERROR: " in capsys.readouterr().out


def test_inspect_reports_a_broken_gzip_file_instead_of_crashing(tf, tmp_path,
                                                                capsys):
  paths = _write_tf_files(tf, str(tmp_path))
  data = open(paths[0], "rb").read()
  with open(paths[0], "wb") as f:
    f.write(data[:len(data) // 2] + bytes(b ^ 0x55 for b in data[
        len(data) // 2:]))
  assert cli.main(["inspect", paths[0]]) == 1
  assert "ERROR: " in capsys.readouterr().out
