"""Apache Beam's FileSystems as this package uses them: the same calls,
with one S3 client per S3 settings in a process.

Beam's S3FileSystem makes a new boto3 session and client for every file
operation (open, create, match, exists, copy, delete): each parses
botocore's JSON service models again, tens of milliseconds of CPU an
operation. A build on S3 makes hundreds of them (inputs, units, parts,
shards, indexes, metadata, the publish), so a 200-row build spent most of
its 11 s of CPU making clients (issue 63). botocore's clients are
thread-safe and meant to be shared: the first one made for a set of S3
settings is kept, and every later Beam S3 client with the same settings
uses it. Beam's wrapper keeps its own per-read state as before.

Every module of this package that calls Beam's FileSystems imports it
from here, so the sharing is in place in the launcher and in every
worker (which import those modules to run the package's DoFns).
"""

import threading
from typing import Any, Dict, Tuple

from apache_beam.io.filesystems import FileSystems

__all__ = ["FileSystems", "S3_SETTINGS", "pipeline_options",
           "share_s3_clients"]

# Beam's S3 options that make one client differ from another.
S3_SETTINGS = ("s3_access_key_id", "s3_secret_access_key", "s3_session_token",
               "s3_endpoint_url", "s3_disable_ssl", "s3_region_name",
               "s3_api_version", "s3_verify")


def pipeline_options() -> Any:
  """The options FileSystems were given (FileSystems.set_options: a
  build's, a worker's), which Beam's file systems are made with."""
  return FileSystems._pipeline_options  # pylint: disable=protected-access


def _settings(beam_options: Any) -> Tuple:
  """The S3 settings of Beam's options (PipelineOptions or a dict)."""
  if isinstance(beam_options, dict):
    return tuple(beam_options.get(name) for name in S3_SETTINGS)
  # pylint: disable=import-outside-toplevel
  from apache_beam.options.pipeline_options import S3Options
  view = beam_options.view_as(S3Options)
  return tuple(getattr(view, name, None) for name in S3_SETTINGS)


def share_s3_clients() -> bool:
  """Makes Beam's S3 client wrapper share one botocore client per
  settings (once a process); False where Beam's AWS support (boto3) is
  not installed."""
  try:
    # pylint: disable=import-outside-toplevel
    from apache_beam.io.aws.clients.s3 import boto3_client
  except ImportError:
    return False
  wrapper = boto3_client.Client
  if getattr(wrapper, "shared_clients", None) is not None:
    return True
  if getattr(boto3_client, "boto3", None) is None:
    return False
  make = wrapper.__init__
  made: Dict[Tuple, Tuple[Any, Dict[str, Any]]] = {}
  lock = threading.Lock()

  def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
    # (Beam calls Client(options=...), its only parameter)
    key = _settings(kwargs["options"] if "options" in kwargs else args[0])
    with lock:
      if key not in made:
        make(self, *args, **kwargs)
        # (the wrapper's other attributes are its fresh per-read state)
        made[key] = (self.client, {k: v for k, v in vars(self).items()
                                   if k != "client"})
        return
      client, state = made[key]
    vars(self).update(state)
    self.client = client

  wrapper.__init__ = __init__  # type: ignore[method-assign]
  setattr(wrapper, "shared_clients", made)
  return True


share_s3_clients()
