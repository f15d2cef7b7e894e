"""A Python stand-in for the Beam SDK container's boot program.

Beam's worker pool runs `--container_executable` once per SDK worker with
the endpoints of the job. Like the container's Go `boot`, this program
fetches the job's staged artifacts (the sdist `--setup_file` builds, the
`--extra_package` files), installs them with pip,
and starts the SDK harness with them importable. It lets the tests prove
that `--setup_file` and `--extra_package` ship what workers need, on a
machine without Docker. Installs use --no-deps --no-index: the worker's
Python already has Beam and TensorFlow (as the SDK image does), and there
is no network.

Run as a file, not imported: the worker's Python may not have
beam_tfrecords (shipping it is what is being tested).

    boot.py --id=ID --provision_endpoint=... [--logging_endpoint=...
        --artifact_endpoint=... --control_endpoint=...]
"""

import argparse
import os
import subprocess
import sys
import tempfile

import grpc
from apache_beam.portability import common_urns
from apache_beam.portability.api import (beam_artifact_api_pb2_grpc,
                                         beam_provision_api_pb2,
                                         beam_provision_api_pb2_grpc,
                                         beam_runner_api_pb2)
from apache_beam.runners.portability import artifact_service

# The pip that installs (the worker's Python may have none).
PIP = os.environ.get("BOOT_PIP", "pip")


class _WithWorkerId:
  """A stub whose calls carry the worker id, as the job server expects."""

  def __init__(self, stub, worker_id):
    self._stub, self._metadata = stub, [("worker_id", worker_id)]

  def __getattr__(self, name):
    call = getattr(self._stub, name)
    return lambda request: call(request, metadata=self._metadata)


def main(argv=None):
  p = argparse.ArgumentParser()
  for flag in ("id", "provision_endpoint"):
    p.add_argument(f"--{flag}", required=True)
  # A worker pool passes these too; a PROCESS environment (Flink's, Spark's
  # job server) only the two above: the provision info has them.
  for flag in ("logging_endpoint", "artifact_endpoint", "control_endpoint"):
    p.add_argument(f"--{flag}")
  args, _ = p.parse_known_args(argv)
  provision = _WithWorkerId(beam_provision_api_pb2_grpc.ProvisionServiceStub(
      grpc.insecure_channel(args.provision_endpoint)), args.id)
  info = provision.GetProvisionInfo(
      beam_provision_api_pb2.GetProvisionInfoRequest()).info
  args.artifact_endpoint = args.artifact_endpoint or \
      info.artifact_endpoint.url
  args.control_endpoint = args.control_endpoint or info.control_endpoint.url
  retrieval = _WithWorkerId(
      beam_artifact_api_pb2_grpc.ArtifactRetrievalServiceStub(
          grpc.insecure_channel(args.artifact_endpoint)), args.id)
  work = tempfile.mkdtemp(prefix=f"boot-{args.id}-",
                          dir=os.environ.get("BOOT_DIR"))
  staged = {}
  for artifact in artifact_service.resolve_artifacts(
      list(info.dependencies), retrieval, work):
    path = beam_runner_api_pb2.ArtifactFilePayload.FromString(
        artifact.type_payload).path
    if artifact.role_urn == common_urns.artifact_roles.STAGING_TO.urn:
      name = beam_runner_api_pb2.ArtifactStagingToRolePayload.FromString(
          artifact.role_payload).staged_name
      os.rename(path, os.path.join(work, name))
      staged[name] = os.path.join(work, name)
  # What the Go boot installs, in its order: extra packages, then the
  # workflow tarball (the --setup_file sdist). (It also installs a
  # --requirements_file from PyPI, which needs a network.)
  packages = []
  if "extra_packages.txt" in staged:
    with open(staged["extra_packages.txt"]) as f:
      packages += [staged[n.strip()] for n in f if n.strip()]
  if "workflow.tar.gz" in staged:
    packages.append(staged["workflow.tar.gz"])
  site = os.path.join(work, "site")
  if packages:
    subprocess.run([PIP, "install", "--quiet", "--no-deps", "--no-index",
                    "--no-build-isolation", "--target", site] + packages,
                   check=True, stdout=sys.stderr)
  if not packages:
    # Nothing to install: the harness runs here (another interpreter's
    # start and Beam's import again took 3 s of every worker's start).
    # pylint: disable=import-outside-toplevel
    from apache_beam.runners.worker.sdk_worker import SdkHarness
    SdkHarness(args.control_endpoint, worker_id=args.id).run()
    return
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join(
      p for p in (site, env.get("PYTHONPATH")) if p)
  os.execve(sys.executable, [
      sys.executable, "-c",
      "from apache_beam.runners.worker.sdk_worker import SdkHarness; "
      f"SdkHarness({args.control_endpoint!r}, worker_id={args.id!r}).run()"],
            env)


if __name__ == "__main__":
  main()
