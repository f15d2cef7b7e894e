"""Reading finished datasets: one handle (`btr.open`), tf.data, plain
Python records, numpy, PyTorch, exact per-rank streams, windows of
datasets and their pins."""
