"""The native decoders keep every record they were given alive while they
read it with the GIL released: another thread that empties the list
meanwhile (its references were the only ones) neither crashes the
process nor changes a decoded value. Run in a child process, as a
failure here is a crash."""

import subprocess
import sys

import pytest

from beam_tfrecords.core import native

from tests.helpers.paths import ROOT

_SCRIPT = r'''
import sys, threading
from beam_tfrecords.core import native

def varint(v):
  out = bytearray()
  while True:
    b, v = v & 0x7F, v >> 7
    out.append(b | 0x80 if v else b)
    if not v:
      return bytes(out)

def delimited(tag, payload):
  return bytes([tag]) + varint(len(payload)) + payload

def example(value):  # {"t": bytes_list [value]}
  entry = delimited(0x0A, b"t") + delimited(0x12, delimited(0x0A, delimited(
      0x0A, value)))
  return delimited(0x0A, delimited(0x0A, entry))

N, SIZE = 16, 4 << 20
module = native.core()
sys.setswitchinterval(1e-6)
for attempt in range(3):
  records = [example(bytes([65 + i]) * SIZE) for i in range(N)]
  go = threading.Event()

  def clear():
    go.wait()
    records.clear()
    junk = [b"\0" * SIZE for _ in range(N)]  # the freed memory reused
  thread = threading.Thread(target=clear)
  thread.start()
  go.set()
  got = module.decode_examples(records, [b"t"], [2])
  thread.join()
  data = bytes(got[0][1])
  assert data == b"".join(bytes([65 + i]) * SIZE for i in range(N)), attempt
print("decoded", N, "records", 3, "times")
'''


def test_records_emptied_from_the_list_during_a_decode_stay_alive():
  if native.core() is None:
    pytest.skip("the native core is not built")
  done = subprocess.run([sys.executable, "-c", _SCRIPT], cwd=ROOT,
                        capture_output=True, text=True, timeout=120)
  assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
  assert done.stdout.strip() == "decoded 16 records 3 times"
