"""The core every side shares, with no Apache Beam and no TensorFlow:
errors, paths on any file system, TFRecord framing and Example protos in
plain Python, dataset.json's types, generations, exact shares."""
