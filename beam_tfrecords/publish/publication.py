"""One build's publish into its output, as one object in the phases of
Beam's own file sinks, the same for `btr.build` and `btr.WriteDataset`:

    stage    the output checked and locked for the build's run id, killed
             builds' publishes finished (recover), the staging folder made
             (`stage`: WriteDataset's pipeline's first step when it runs,
             `StageOutput`; build()'s launcher before its pipeline runs);
    write    the pipeline writes shards and errors into `staging`;
    commit   `Commit` writes the staged dataset.json (publish.commit);
    publish  the journaled switch into the output, `_SUCCESS` last, the
             lock released (`publish`, from the last step: publish.finish);
             `release` when the build ends, published or not, and
             `abandon` when it ends without publishing;
    recover  a next build finishes (or undoes) a switch a kill cut short,
             and removes the staging folders of builds that died before
             theirs: part of every stage (publish.journal.recover); a
             build interrupted while it publishes finishes it first
             (`interrupted`).

A `Publication` is a plain value, decided on the launcher and pickled into
the steps; `expand()` only wires them.
"""

import dataclasses
from typing import Any, Callable, Iterator, Mapping, Optional

import apache_beam as beam

from beam_tfrecords.core.beam_files import FileSystems, pipeline_options
from beam_tfrecords.core.errors import OutputError
from beam_tfrecords.core.layout import staging_name
from beam_tfrecords.core.version import __version__
from beam_tfrecords.publish import journal
from beam_tfrecords.publish import staging as stage_phase
from beam_tfrecords.publish.staging import Staged

__all__ = ["Publication", "StageOutput"]


@dataclasses.dataclass(frozen=True)
class Publication:
  """The publish of the build `run` (its lock's run id) of build key `key`
  into `output` (an absolute path or URL): a finished dataset there is
  kept unless `overwrite` (the error says `overwrite_hint`); `tfmd`,
  TensorFlow Metadata's schema, is staged with the rest."""
  output: str
  run: str
  key: str
  overwrite: bool = False
  tfmd: str = ""
  overwrite_hint: str = "overwrite=True"
  # The launcher's version (in _SUCCESS), also where a worker runs another.
  version: str = __version__

  @property
  def staging(self) -> str:
    """The staging folder the pipeline writes into."""
    return FileSystems.join(self.output, staging_name(self.run))

  @property
  def success_text(self) -> str:
    """_SUCCESS, the publish's last file. The run id makes each publish's
    own: readers tell a replaced dataset by it (core.generations)."""
    return f"beam-tfrecords {self.version} {self.key} {self.run}\n"

  def stage(self, pipeline_options: Any,
            if_changed: bool = False) -> Staged:
    """Locks and stages the output (publish.staging.stage). Safe to run
    again (a retried step): the lock is adopted, the rest done again.
    With `if_changed` (build() without force), a finished dataset of this
    build key is kept instead: Staged.previous."""
    return stage_phase.stage(self.output, self.run, self.key, self.tfmd,
                             overwrite=self.overwrite,
                             overwrite_hint=self.overwrite_hint,
                             if_changed=if_changed,
                             pipeline_options=pipeline_options)

  def state(self) -> str:
    """Where this build's publish is: "began", "ended" or "" (not yet):
    a retried last step only finishes it (journal.state)."""
    return journal.state(self.staging, self.output, self.success_text)

  def publish(self, meta: Mapping[str, Any],
              guard: Optional[Callable[[], None]] = None) -> None:
    """The staging folder (its dataset.json: `meta`) switched into the
    output, `guard` called before each file operation."""
    journal.publish(self.staging, self.output, meta, self.success_text,
                    guard=guard)

  def release(self) -> None:
    """The output's lock, as far as this process holds it for this build,
    released: when the build ends, published or not."""
    stage_phase.release(self.output, self.run)

  def abandon(self) -> None:
    """A build that ends without publishing (interrupted, or its pipeline
    could not be made): its staging folder removed, unless its publish
    began (then only the publish's steps may remove it: a next build
    finishes them). Never raises: the build's own error is what counts."""
    try:
      if not journal.has_journal(self.staging):
        journal.remove_staging(self.staging)
    except Exception:  # pylint: disable=broad-except
      pass

  def interrupted(self) -> bool:
    """Ctrl-C or SIGTERM while the build's pipeline ran: True when its
    publish had begun and is now finished (the dataset is published),
    else its staging folder is removed and False."""
    if journal.has_journal(self.staging):
      journal.recover(self.output, keep="")
      return True
    journal.remove_staging(self.staging)
    return False

  def failure(self, error: BaseException) -> Optional[OutputError]:
    """The OutputError of a write into the output that failed (None when
    `error` is no such failure), the staging folder removed unless its
    publish began (publish.staging.output_failure)."""
    return stage_phase.output_failure(self.output, self.staging, error)


class _StageFn(beam.DoFn):

  def process(self, publication: Any) -> Iterator[str]:
    # The file system options the worker was started with (S3 endpoint,
    # credentials) reach the lock's store too.
    options = pipeline_options()
    yield publication.stage(options).staging


class StageOutput(beam.PTransform):
  """A pipeline -> its staging folder (one element), once the output is
  locked and staged for `publication` when the pipeline runs: steps that
  write there take it as a side input (or gather it) so that they run
  after it. A pipeline built and never run leaves nothing."""

  def __init__(self, publication: Publication):
    super().__init__()
    self._publication = publication

  def expand(self, pipeline: Any) -> Any:
    return (pipeline
            | "Plan" >> beam.Create([self._publication])
            | "LockAndStage" >> beam.ParDo(_StageFn()).with_output_types(
                str))
