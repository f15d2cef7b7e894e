"""A dataset's last step, inside the pipeline: from the committed staging
folder to the published dataset.

After `Commit` wrote the staged dataset.json: TensorFlow Transform's
output is described (when the schema has `transform:`), the rejection
thresholds and expectations are applied, the card, the previews and
croissant.json are written with every file's checksum
(publish.describe), the output's lock is checked to still be this
build's, the staging folder is published (its Publication), and the
lock is released. The step's output is the published dataset.json
content, so a pipeline can go on after it.
"""

import json
import logging
import time
from typing import Any, Dict, Iterator, NamedTuple, Optional, Tuple

import apache_beam as beam

from beam_tfrecords.core.errors import AnomalyError, InputError, OutputBusyError
from beam_tfrecords.core.info import DatasetInfo
from beam_tfrecords.core.layout import ANOMALIES_FILE, REPORT_FILE
from beam_tfrecords.core.unit_cache import drop_output_units
from beam_tfrecords.publish.commit import write_info
from beam_tfrecords.publish.describe import describe
from beam_tfrecords.publish.journal import remove_parts
from beam_tfrecords.publish.lock import LEASE_SECONDS, OutputLock
from beam_tfrecords.publish.publication import Publication
from beam_tfrecords.publish.thresholds import check_thresholds
from beam_tfrecords.runners.run import sigint_deferred

__all__ = ["Finish", "FinishPlan"]

_LOG = logging.getLogger(__name__)


class FinishPlan(NamedTuple):
  """What the last step needs to know (decided on the launcher)."""
  publication: Publication
  max_bad_rows: Optional[int]
  max_bad_fraction: Optional[float]
  producible: Tuple[str, ...]
  # The split TensorFlow Transform analyzes, None without transform:.
  analyze_split: Optional[str] = None
  # The read units and columns of a build from files (no preprocess
  # function), and the runner's name: a run that read no rows from them
  # is checked against them before anything is published.
  units: Tuple[Any, ...] = ()
  columns: Tuple[str, ...] = ()
  runner: str = ""
  # What anomalies do (expect: sections): "fail" or "warn".
  on_anomaly: str = "fail"
  # --tfds: TFDS's features.json (sinks.tfds_files), else None.
  tfds_features: Optional[Dict[str, Any]] = None
  # BuildOptions.croissant; live: a scheduled build (isLiveDataset).
  croissant: str = "auto"
  live: bool = False
  # The launcher's SOURCE_DATE_EPOCH (publish.describe.build_time): the
  # workers that finish may run where its environment is not.
  epoch: Optional[str] = None

  @property
  def output(self) -> str:
    return self.publication.output

  @property
  def staging(self) -> str:
    return self.publication.staging

  @property
  def run(self) -> str:
    return self.publication.run


class _Fence:
  """This build's hold on the output's lock, from inside the pipeline:
  `renew()` before each file operation of the publish checks that the lock
  is still this build's, and renews its lease (compare-and-swap) when it
  is older than RENEW_AFTER seconds; it fails once another build has the
  lock. (A renewal rewrites the lock in place, which needs no space.)"""

  RENEW_AFTER = LEASE_SECONDS / 8

  def __init__(self, plan: FinishPlan, pipeline_options: Any):
    self._plan = plan
    lock = OutputLock(plan.output, pipeline_options)
    self._store = lock._store  # pylint: disable=protected-access
    self.token = None
    self._renewed = 0.0
    self.renew()

  def _ours(self) -> Any:
    current = self._store.read()
    if current is None:
      return None
    try:
      info = json.loads(current[0].decode("utf-8"))
    except ValueError:
      return None
    return (info, current[1]) if info.get("run") == self._plan.run else None

  def renew(self) -> None:
    for _ in range(3):  # the launcher renews it too: adopt its token
      ours = self._ours()
      if ours is None:
        break
      info, token = ours
      if time.monotonic() - self._renewed < self.RENEW_AFTER:
        self.token = token
        return
      info["renewed"] = time.time()
      new = self._store.replace(json.dumps(info, sort_keys=True).encode(
          "utf-8"), token)
      if new is not None:
        self.token = new
        self._renewed = time.monotonic()
        return
    raise OutputBusyError(
        f"{self._plan.output}: the lock was removed or taken over by another "
        "build; this build publishes nothing")


def finish(info: DatasetInfo, plan: FinishPlan,
           pipeline_options: Any = None) -> DatasetInfo:
  """Thresholds, lock, publish, unlock; returns the published dataset.json."""
  begun = plan.publication.state()
  if begun:
    # A retried last step whose publish began or ended: its checks passed
    # and its files were described; the staging folder may be half moved
    # (or gone, with the lock). Finish the publish, and say what it
    # published.
    if begun == "began":
      _publish(info, plan, pipeline_options)
    return DatasetInfo.from_directory(plan.output)
  try:
    remove_parts(plan.staging)
  except Exception:  # pylint: disable=broad-except
    _LOG.warning("could not remove the part files under %s", plan.staging,
                 exc_info=True)
  if plan.analyze_split is not None:
    # pylint: disable=import-outside-toplevel
    from beam_tfrecords.sinks.transform_files import describe_transform
    info = describe_transform(plan.staging, info)
    write_info(plan.staging, info)
    analyzed = info.transform.splits.get(plan.analyze_split) \
        if info.transform else None
    if analyzed is None or not analyzed.num_records:
      raise InputError(
          f"the split {plan.analyze_split!r} that TensorFlow Transform "
          "analyzes has no records, so its statistics (means, "
          "vocabularies, buckets) would be meaningless; nothing was "
          f"published (see {plan.staging}). Check the split rule and "
          "errors/, or set transform.analyze_split")
  if plan.units and not info.counts.rows_read:
    _check_nothing_lost(plan)
  check_thresholds(info, plan.max_bad_rows, plan.max_bad_fraction,
                   plan.staging, plan.producible)
  _check_anomalies(info, plan)
  # The card, the previews, every file's checksum, croissant.json.
  info = describe(plan.staging, info, croissant=plan.croissant,
                  tfds_features=plan.tfds_features, live=plan.live,
                  epoch=plan.epoch)
  # A rerun has nothing left to reuse the output's .units/ for, and the
  # switch may need their room (a nearly full disk).
  drop_output_units(plan.output)
  _publish(info, plan, pipeline_options)
  return info


def _publish(info: DatasetInfo, plan: FinishPlan,
             pipeline_options: Any) -> None:
  """The staging folder switched into the output under the lock, which
  is then released."""
  fence = _Fence(plan, pipeline_options)
  with sigint_deferred("publishing"):
    plan.publication.publish(info.to_json(), guard=fence.renew)
    try:
      ours = fence._ours()  # pylint: disable=protected-access
      if ours is not None:
        fence._store.delete(ours[1])  # pylint: disable=protected-access
    except Exception:  # pylint: disable=broad-except
      # Published: the launcher removes the lock when the build ends.
      _LOG.warning("%s: published; could not remove the lock",
                   plan.output, exc_info=True)


def _check_anomalies(info: DatasetInfo, plan: FinishPlan) -> None:
  """Raises AnomalyError for anomalies, unless they are only to be
  recorded (on_anomaly: warn)."""
  found = info.anomalies.found if info.anomalies else ()
  if not found:
    return
  lines = [a.line() for a in found]
  if plan.on_anomaly == "warn":
    for line in lines:
      _LOG.warning("anomaly (published anyway, on_anomaly: warn): %s", line)
    return
  raise AnomalyError(
      f"{len(found)} anomal{'y' if len(found) == 1 else 'ies'}: the data "
      "does not meet the schema's expectations; nothing was published "
      f"({plan.output} keeps its previous content). What would have been "
      f"published is in {plan.staging} ({ANOMALIES_FILE}, and {REPORT_FILE} "
      "unless --no-report; the next build removes it). To publish anyway: "
      "--on-anomaly warn.\n"
      + "\n".join("  " + line for line in lines),
      [a.to_json() for a in found])


def _check_nothing_lost(plan: FinishPlan) -> None:
  """A run that read no rows, from inputs that hold some, lost them (a
  runner that drops a step's outputs): raises InputError instead of
  publishing an empty dataset. Reads the inputs until the first row."""
  # pylint: disable=import-outside-toplevel
  from beam_tfrecords.sources import read_unit
  for unit in plan.units:
    for batch in read_unit(unit, list(plan.columns)):
      if batch.num_rows or batch.errors:
        raise InputError(
            f"the {plan.runner or 'runner'} read 0 rows, but the input "
            f"holds rows ({unit.path} has "
            f"{batch.num_rows + len(batch.errors):,} in its first batch): "
            "the runner lost them, and nothing was published (see "
            f"{plan.staging}). Run on the DirectRunner, Dataflow, or the "
            "portable runner (Flink, Spark): see docs/operations.md, "
            "\"Running on a cluster\"")


class _FinishFn(beam.DoFn):

  def __init__(self, plan: FinishPlan):
    self._plan = plan

  def process(self, info: Any) -> Iterator[Any]:
    # pylint: disable=import-outside-toplevel
    from beam_tfrecords.core.beam_files import pipeline_options
    # The file system options the worker was started with (S3 endpoint,
    # credentials) reach the lock's store too.
    options = pipeline_options()
    yield finish(info, self._plan, options)


class Finish(beam.PTransform):
  """The committed dataset.json (one element) -> the published one."""

  def __init__(self, plan: FinishPlan):
    super().__init__()
    self._plan = plan

  def expand(self, committed: Any) -> Any:
    return committed | "Publish" >> beam.ParDo(_FinishFn(self._plan))
