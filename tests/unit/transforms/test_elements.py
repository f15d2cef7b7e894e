"""beam_tfrecords/transforms/elements.py, on values: a row from a
PCollection is named by a digest of its content (keys and values, not
their order), whatever types its values are."""

import datetime
import decimal

import numpy as np
import pytest

from beam_tfrecords.transforms.elements import row_digest


def test_the_digest_is_of_the_content_not_the_key_order():
  a = row_digest({"id": 1, "name": "x", "score": 0.5})
  assert a == row_digest({"score": 0.5, "name": "x", "id": 1})
  assert len(a) == 24 and int(a, 16) >= 0  # 12 bytes, hex
  assert a != row_digest({"id": 1, "name": "x", "score": 0.25})
  assert a != row_digest({"id": 1, "name": "x"})


@pytest.mark.parametrize("value,same_as,differs_from", [
    (b"\x00\xff", b"\x00\xff", "AP8="),
    (np.int64(7), 7, 7.0),
    (np.array([1, 2]), [1, 2], [2, 1]),
    (decimal.Decimal("1.50"), "1.50", decimal.Decimal("1.5")),
    (datetime.date(2024, 2, 29), "2024-02-29", datetime.date(2024, 3, 1)),
    (None, None, ""),
    (0, 0, False),
], ids=["bytes", "numpy_scalar", "numpy_array", "decimal", "date",
        "missing", "zero"])
def test_values_of_any_type_digest_by_their_value(value, same_as,
                                                  differs_from):
  assert row_digest({"v": value}) == row_digest({"v": same_as})
  assert row_digest({"v": value}) != row_digest({"v": differs_from})
