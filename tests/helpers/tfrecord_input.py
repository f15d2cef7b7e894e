"""What tests/e2e/test_tfrecord_input.py shares with the tests split from it
(tests/unit, tests/cluster)."""


def _example(tf, **features):
  feature = {}
  for name, value in features.items():
    values = value if isinstance(value, list) else [value]
    if values and isinstance(values[0], bytes):
      feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(
          value=values))
    elif values and isinstance(values[0], float):
      feature[name] = tf.train.Feature(float_list=tf.train.FloatList(
          value=values))
    elif values:
      feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(
          value=values))
    else:
      feature[name] = tf.train.Feature(int64_list=tf.train.Int64List())
  return tf.train.Example(features=tf.train.Features(
      feature=feature)).SerializeToString()


def _write(tf, path, records, gzip_it=False):
  options = tf.io.TFRecordOptions(compression_type="GZIP" if gzip_it
                                  else "")
  with tf.io.TFRecordWriter(str(path), options) as w:
    for r in records:
      w.write(r)
