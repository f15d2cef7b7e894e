"""One build's publish into its output, as one object in the phases of
Beam's own file sinks:

    stage    the output checked and locked for the build's run id, killed
             builds' publishes finished (recover), the staging folder made
             (`StageOutput`, the pipeline's first step when it runs; build()
             stages on the launcher instead: publish.staging.stage_output);
    write    the pipeline writes shards and errors into `staging`;
    commit   `Commit` writes the staged dataset.json (publish.commit);
    publish  the journaled switch into the output, `_SUCCESS` last, the
             lock released (`publish`, from the last step: publish.finish);
    recover  a next build finishes (or undoes) a switch a kill cut short,
             and removes the staging folders of builds that died before
             theirs: part of every stage (publish.journal.recover).

A `Publication` is a plain value, decided on the launcher and pickled into
the steps; `expand()` only wires them.
"""

import dataclasses
from typing import Any, Callable, Mapping, Optional

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from beam_tfrecords.core.layout import staging_name
from beam_tfrecords.core.version import __version__
from beam_tfrecords.publish import journal
from beam_tfrecords.publish.staging import stage_at_run

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

  def stage(self, options) -> str:
    """Locks and stages the output; the staging folder. Safe to run again
    (a retried step): the lock is adopted, the rest done again."""
    return stage_at_run(self.output, self.run, self.staging, self.tfmd,
                        self.overwrite, self.overwrite_hint, options)

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


class _StageFn(beam.DoFn):

  def process(self, publication: Publication):
    # The file system options the worker was started with (S3 endpoint,
    # credentials) reach the lock's store too.
    yield publication.stage(
        FileSystems._pipeline_options)  # pylint: disable=protected-access


class StageOutput(beam.PTransform):
  """A pipeline -> its staging folder (one element), once the output is
  locked and staged for `publication` when the pipeline runs: steps that
  write there take it as a side input (or gather it) so that they run
  after it. A pipeline built and never run leaves nothing."""

  def __init__(self, publication: Publication):
    super().__init__()
    self._publication = publication

  def expand(self, pipeline):
    return (pipeline
            | "Plan" >> beam.Create([self._publication])
            | "LockAndStage" >> beam.ParDo(_StageFn()).with_output_types(
                str))
