"""python -m beam_tfrecords: the same as the beam-tfrecords command."""

from beam_tfrecords.cli import run

if __name__ == "__main__":
  run()
