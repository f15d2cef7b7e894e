"""One handle to read a finished dataset (or a window of them) every way.

    ds = btr.open("out/movies")                      # or a list, glob, pin
    ds.info.splits["train"].num_records, ds.schema.label
    ds.tf_dataset("train", batch_size=256)           # tf.data
    for row in ds.records("eval"): ...               # plain Python, no TF
    for entry in ds.errors(): ...                    # the dead-letter rows
    stream = ds.stream("train", rank=(0, 8), shuffle_seed=1)  # exact shares
    ds.torch("train", batch_size=256)                # a PyTorch Dataset
    ds.view()                                        # a page to browse it

`open` reads each dataset's dataset.json once and checks the window
(beam_tfrecords.read.window); every reading method reads the datasets as they
were then: a dataset replaced since is refused while its files are read
(DatasetReplacedError), never mixed with the new one. `btr.load` and
`btr.iter_records` are the same readers for a path.
"""

from typing import Any, Dict, Iterator, List, Optional, Tuple

from beam_tfrecords.core.info import DatasetInfo
from beam_tfrecords.read.reader import (dataset_errors, dataset_schema,
                                        iter_records, load, transform_output)
from beam_tfrecords.read.stream import SHUFFLE_BUFFER, RecordStream
from beam_tfrecords.read.window import Datasets, Window, window
from beam_tfrecords.schema import Schema

__all__ = ["DatasetReader", "open_dataset", "open"]


class DatasetReader:
  """A finished dataset, or a window of them read as one (`btr.open`).

  Attributes:
    info: the (first) dataset's dataset.json, typed (btr.DatasetInfo).
    infos: every dataset's, in reading order.
    paths: the dataset folders, in reading order.
    schema: the schema the records were built with (btr.Schema).
  """

  def __init__(self, datasets: Datasets):
    self._window: Window = window(datasets)
    self.paths: List[str] = [path for path, _ in self._window]
    self.infos: List[DatasetInfo] = [info for _, info in self._window]
    self.info: DatasetInfo = self.infos[0]
    self.schema: Schema = dataset_schema(self.paths[0], self.info)

  def __repr__(self) -> str:
    splits = ", ".join(f"{name}: {split.num_records:,}"
                       for name, split in sorted(self.info.splits.items()))
    where = self.paths[0] if len(self.paths) == 1 else \
        f"{len(self.paths)} datasets from {self.paths[0]}"
    return f"<DatasetReader {where} ({self.info.record}; {splits})>"

  @property
  def splits(self) -> List[str]:
    """The split names, sorted."""
    return sorted(self.info.splits)

  def num_records(self, split: str = "train") -> int:
    """The records of a split, over every dataset of the window."""
    return sum(i.splits[split].num_records for i in self.infos
               if split in i.splits)

  def tf_dataset(self, split: str = "train",
                 batch_size: Optional[int] = None, decode: bool = True,
                 transformed: bool = False, as_supervised: bool = False, *,
                 shard: Optional[Tuple[int, int]] = None,
                 drop_remainder: bool = False,
                 shuffle_seed: Optional[int] = None, epoch: int = 0,
                 shuffle_buffer: int = SHUFFLE_BUFFER,
                 check: bool = True) -> Any:
    """A tf.data.Dataset of parsed records: btr.load's, whose docstring
    says what each argument does."""
    return load(self._window, split, batch_size, decode, transformed,
                as_supervised, shard=shard, drop_remainder=drop_remainder,
                shuffle_seed=shuffle_seed, epoch=epoch,
                shuffle_buffer=shuffle_buffer, check=check)

  def records(self, split: str = "train", *,
              shard: Optional[Tuple[int, int]] = None,
              drop_remainder: bool = False,
              shuffle_seed: Optional[int] = None, epoch: int = 0,
              shuffle_buffer: int = SHUFFLE_BUFFER, check: bool = True
              ) -> Iterator[Dict[str, Any]]:
    """Each record as a plain dict, without TensorFlow: btr.iter_records'
    (shard, shuffle_seed, epoch, ... as there)."""
    return iter_records(self._window, split, shard=shard,
                        drop_remainder=drop_remainder,
                        shuffle_seed=shuffle_seed, epoch=epoch,
                        shuffle_buffer=shuffle_buffer, check=check)

  def errors(self) -> Iterator[Dict[str, Any]]:
    """The dead-letter entries of every dataset (errors/*.jsonl), in file
    order: dicts with source, row, rows, reason, problems and raw."""
    for path, info in self._window:
      yield from dataset_errors(path, info)

  def stream(self, split: str = "train", *,
             rank: Optional[Tuple[int, int]] = None,
             worker: Optional[Tuple[int, int]] = None,
             drop_remainder: bool = False,
             shuffle_seed: Optional[int] = None, epoch: int = 0,
             shuffle_buffer: int = SHUFFLE_BUFFER,
             transformed: bool = False, shuffle: str = "buffer",
             block: int = 1) -> RecordStream:
    """The serialized records of `rank`'s exact share ((index, count);
    None: all), and `worker`'s portion of it, resumable
    (state_dict / load_state_dict): read.stream.RecordStream;
    shuffle="global" (with a seed): a permutation of every record."""
    return RecordStream(self._window, split, rank, drop_remainder,
                        shuffle_seed, epoch, shuffle_buffer, worker,
                        transformed, shuffle, block)

  def by_number(self, split: str = "train", transformed: bool = False,
                check: bool = True, cache_bytes: Optional[int] = None
                ) -> Any:
    """The split's serialized records by number (`len`, `[i]`,
    `.get([i, ...])`): read.random_access.RecordIndex, through the
    shards' indexes (`check`, `cache_bytes`: as there; None: its
    default)."""
    # pylint: disable=import-outside-toplevel
    from beam_tfrecords.read.random_access import CACHE_BYTES, RecordIndex
    return RecordIndex(self._window, split, transformed,
                       CACHE_BYTES if cache_bytes is None else cache_bytes,
                       check=check)

  def torch(self, split: str = "train", *,
            shard: Optional[Tuple[int, int]] = None,
            drop_remainder: bool = False,
            shuffle_seed: Optional[int] = None, epoch: int = 0,
            shuffle_buffer: int = SHUFFLE_BUFFER,
            batch_size: Optional[int] = None, shuffle: str = "buffer"
            ) -> Any:
    """A torch.utils.data.IterableDataset of the split: the torch extra's
    Dataset (beam_tfrecords.read.torch), whose docstring says what each
    argument does."""
    # pylint: disable=import-outside-toplevel
    from beam_tfrecords.read.torch import Dataset
    return Dataset(self._window, split, shard, drop_remainder, shuffle_seed,
                   epoch, shuffle_buffer, batch_size, shuffle)

  def view(self, port: int = 0, against: Optional[str] = None) -> Any:
    """Serves `beam-tfrecords view`'s page for the (first) dataset on
    127.0.0.1 from a thread: a read.view_server.ViewServer (`url`,
    `stop()`; a link in a notebook). Needs the view extra."""
    # pylint: disable=import-outside-toplevel
    from beam_tfrecords.read.view_server import serve
    return serve(self.paths[0], port, against)

  def transform_output(self) -> Any:
    """TensorFlow Transform's TFTransformOutput (schemas with
    `transform:`)."""
    return transform_output(self.paths[0])


def open_dataset(datasets: Datasets) -> DatasetReader:
  """A reader of a finished dataset: a folder (local, gs://, s3://), or a
  window of them read as one (a list, a glob, a pin file).

  Raises:
    InputError: one is not finished, or they cannot be read as one.
  """
  return DatasetReader(datasets)


open = open_dataset  # pylint: disable=redefined-builtin
