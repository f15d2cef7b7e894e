"""encoding.media without Beam: the preparer reads files only through the
fetch it is given (a dict here), and encoding/ imports no Beam at all;
sources.fetch, the fetch a build passes, keeps its messages."""

import os
import subprocess
import sys


def test_importing_the_media_encoder_loads_no_beam():
  code = ("import sys, beam_tfrecords.encoding.media, "
          "beam_tfrecords.encoding.images; "
          "print(sorted(m for m in sys.modules if m.startswith('apache_beam')))")
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
  out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                       text=True, check=True, env=env)
  assert out.stdout.strip() == "[]"
