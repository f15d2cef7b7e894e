"""The dataset's last descriptions, written into the staging folder by
the finish step just before the publish, once every other file is there:

    TensorFlow Transform's and TFDS's files    their checksums
    preview/<split>.parquet                    (sinks.preview)
    README.md                                  the card (inspect.card)
    dataset.json                               every file's checksum
    croissant.json                             (publish.croissant), with
                                               dataset.json's SHA-256

Every checksum is of bytes this process writes (TFT's files, written by
TensorFlow Transform, are read back: a few small files). They are the
same on every run of the same build where the bytes are (not TFT's saved
model, which TensorFlow does not write the same way twice).
croissant.json alone holds the build time, which is why dataset.json
lists it without a checksum.
"""

import dataclasses
import datetime
import os
from typing import Dict, Iterable, Optional

from beam_tfrecords.core import fs
from beam_tfrecords.core.info import DatasetInfo, FileSum
from beam_tfrecords.core.layout import CARD_FILE, CROISSANT_FILE, DATASET_JSON
from beam_tfrecords.inspect.card import render_card
from beam_tfrecords.publish.commit import listed_with
from beam_tfrecords.sinks.metadata import write_file

__all__ = ["describe", "build_time"]


def build_time(epoch: Optional[str] = None) -> str:
  """Now, in UTC (ISO 8601, seconds), or SOURCE_DATE_EPOCH's time where
  it is set (the reproducible-builds convention: a build that must be
  the same bytes, croissant.json included, sets it): `epoch`, the
  launcher's (workers in a container do not have its environment), else
  this process's."""
  epoch = epoch or os.environ.get("SOURCE_DATE_EPOCH")
  when = (datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc)
          if epoch and epoch.isdigit() else
          datetime.datetime.now(datetime.timezone.utc))
  return when.replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _read_sums(staging: str, names: Iterable[str]) -> Dict[str, FileSum]:
  # (as stored: a .gz asset is hashed as verify reads it, not inflated)
  return {name: FileSum(*fs.sha256_of(fs.join(staging, name)))
          for name in names}


def describe(staging: str, info: DatasetInfo, *, croissant: str = "auto",
             tfds_features: Optional[dict] = None,
             live: bool = False,
             epoch: Optional[str] = None) -> DatasetInfo:
  """Writes the previews, the card, dataset.json and croissant.json into
  the staging folder; the dataset.json written.

  Args:
    croissant: BuildOptions.croissant ("off": no previews, no
      croissant.json).
    tfds_features: --tfds's features.json (TFDS's files written too).
    live: a scheduled build's (croissant.json: isLiveDataset).
    epoch: the launcher's SOURCE_DATE_EPOCH (see build_time).
  """
  # pylint: disable=import-outside-toplevel
  sums: Dict[str, FileSum] = {}
  if info.transform is not None and info.transform.files:
    sums.update(_read_sums(staging, info.transform.files))
  if tfds_features is not None:
    from beam_tfrecords.sinks.tfds_files import write_tfds_files
    sums.update(write_tfds_files(staging, info, tfds_features))
  if croissant != "off":
    from beam_tfrecords.sinks.preview import write_previews
    sums.update(write_previews(staging, info))
    info = dataclasses.replace(info, croissant=CROISSANT_FILE)
  info = listed_with(info, sums)
  info = listed_with(info, {CARD_FILE: write_file(
      staging, CARD_FILE, render_card(info).encode("utf-8"))})
  own = write_file(staging, DATASET_JSON, info.to_text().encode("utf-8"))
  if croissant != "off":
    from beam_tfrecords.publish.croissant import croissant_json
    write_file(staging, CROISSANT_FILE, croissant_json(
        info, own, build_time(epoch), live=live))
  return info

