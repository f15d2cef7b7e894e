"""python -m beam_tfrecords: the same as the beam-tfrecords command."""

import sys

from beam_tfrecords.cli import main

if __name__ == "__main__":
  sys.exit(main())
