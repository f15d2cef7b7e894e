"""The worker image, built from this repository with Docker and without
Docker Hub (`make worker-image`; issue 63): Beam's SDK harness with
beam_tfrecords, for --environment_type DOCKER (Prism, Flink, Spark,
Dataflow's --sdk_container_image) and a worker pool (EXTERNAL).

    python -m beam_tfrecords.testing.worker_image [--base local|official|IMAGE]

Each step is kept in the tools folder (testing.tools.tools_dir) for the
next build:

1. **Docker.** The daemon must answer. As root, where none runs, dockerd
   is started without a bridge (`--bridge=none --iptables=false
   --ip-forward=false`): containers then have the host's network only,
   and the tests give them 127.0.0.1.
2. **The base.** `official`: Beam's SDK image of the installed Beam and
   Python 3.11 (from Docker Hub). `local` (the default): Debian bookworm
   made here, `debootstrap --variant=minbase` from the host's Debian
   mirror with python3, python3-venv and ca-certificates, and Beam's boot
   (testing.tools.beam_boot_binary) at /opt/apache/beam/boot, where the
   SDK images have it; imported as BASE_IMAGE.
3. **The wheelhouse.** Every file of the runtime lock
   (requirements/runtime-py311.txt: setup.py's requirements at the full
   lock's versions, without the test tools), downloaded by the host's pip
   with the lock's hashes checked; the build backend its two sdists need;
   and the native core's wheel (maturin, native/Cargo.lock).
4. **The image.** `docker build` of the repository's Dockerfile in a
   context of the package, the lock and the native wheel; the wheelhouse
   is served to it on 127.0.0.1:WHEELHOUSE_PORT (the build has the
   host's network; pip asks no index), and the image installs the lock
   hash-checked from it. The lock's layer stays cached while the lock
   does not change: a warm build makes the package's layer only.
   Tagged IMAGE (`:latest`) and `:<version>-py311`;
   labelled with the package's, Beam's and Python's versions and the
   lock's SHA-256 (what a build checks: runners.image_check).
"""

import argparse
import contextlib
import fcntl
import functools
import glob
import hashlib
import http.server
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, List, NamedTuple, Optional

from beam_tfrecords.core.version import __version__
from beam_tfrecords.testing.tools import (ToolsMissing, beam_boot_binary,
                                          beam_version, tools_dir)

__all__ = ["IMAGE", "BASE_IMAGE", "Built", "build_image", "docker_ready",
           "repository"]

IMAGE = "beam-tfrecords-worker"
BASE_IMAGE = "beam-tfrecords-base"
PYTHON = "3.11"
LOCK = os.path.join("requirements", "runtime-py311.txt")
# The build backend of the lock's two sdists (google-apitools,
# jsonpath-rw), which pip builds in the image from the wheelhouse.
BUILD_BACKEND = ("setuptools==80.9.0", "wheel==0.45.1")
# Where the wheelhouse is served to `docker build` (the Dockerfile's
# WHEELHOUSE default: a build argument that changed would make the lock's
# layer again).
WHEELHOUSE_PORT = 38765
# What the build context holds: files and folders of the repository, and
# the native core's wheel (in native-wheel/).
CONTEXT = ("Dockerfile", "setup.py", "README.md", LOCK, "beam_tfrecords",
           "pipelines", "schemas")
_DEBIAN = "bookworm"
_PACKAGES = "python3,python3-venv,ca-certificates"
_TIMEOUT = 1800


class Built(NamedTuple):
  """A built image: its tags, the seconds of each step, its bytes and
  the bytes of each layer (`docker history`: the step that made it)."""
  tags: List[str]
  seconds: Dict[str, float]
  bytes: int
  layers: List[tuple]


def repository() -> str:
  """The repository this package is a checkout of."""
  return os.path.dirname(os.path.dirname(os.path.dirname(
      os.path.abspath(__file__))))


def _run(command: List[str], what: str, **kwargs) -> str:
  run = subprocess.run(command, capture_output=True, text=True,
                       timeout=_TIMEOUT, **kwargs)
  if run.returncode != 0:
    raise ToolsMissing(f"{what} failed ({' '.join(command[:3])} ...): "
                       f"{(run.stderr or run.stdout).strip()[-3000:]}")
  return run.stdout


def docker_ready() -> None:
  """Docker's daemon answers, or is started (as root, without a bridge);
  else ToolsMissing."""
  if shutil.which("docker") is None:
    raise ToolsMissing("docker is not installed (Debian: apt-get install "
                       "docker.io)")
  if _answers():
    return
  if os.geteuid() != 0 or shutil.which("dockerd") is None:
    raise ToolsMissing("Docker's daemon does not answer; start it")
  log = open(os.path.join(tools_dir(), "dockerd.log"), "ab")
  subprocess.Popen(["dockerd", "--bridge=none", "--iptables=false",
                    "--ip-forward=false"], stdout=log, stderr=log,
                   start_new_session=True)
  deadline = time.time() + 60
  while time.time() < deadline:
    if _answers():
      return
    time.sleep(0.5)
  raise ToolsMissing("dockerd did not start (see "
                     f"{os.path.join(tools_dir(), 'dockerd.log')})")


def _answers() -> bool:
  return subprocess.run(["docker", "info"], capture_output=True,
                        timeout=60).returncode == 0


def _image_id(image: str) -> Optional[str]:
  run = subprocess.run(["docker", "image", "inspect", "--format",
                        "{{.Id}}", image], capture_output=True, text=True,
                       timeout=60)
  return run.stdout.strip() if run.returncode == 0 else None


def _mirror() -> str:
  """The Debian mirror the host's apt uses (deb.debian.org by default)."""
  for path in ["/etc/apt/sources.list"] + sorted(
      glob.glob("/etc/apt/sources.list.d/*.sources")):
    try:
      with open(path) as f:
        text = f.read()
    except OSError:
      continue
    for line in text.splitlines():
      words = line.split()
      if words[:1] == ["URIs:"] and not words[1].endswith("-security"):
        return words[1]
      if words[:1] == ["deb"] and len(words) > 2 and \
          not words[-2].endswith("-security") and _DEBIAN in words:
        return next(w for w in words[1:] if "://" in w)
  return "http://deb.debian.org/debian"


def local_base() -> str:
  """BASE_IMAGE (see the module's docstring), imported once: its root
  file system is kept as a tarball for the next time Docker lost it."""
  image = f"{BASE_IMAGE}:{_DEBIAN}-py{PYTHON}-beam{beam_version()}"
  if _image_id(image) is not None:
    return image
  tarball = os.path.join(tools_dir(), f"{BASE_IMAGE}-{_DEBIAN}-"
                         f"beam{beam_version()}.tar")
  if not os.path.exists(tarball):
    _root_file_system(tarball)
  _run(["docker", "import", "--change",
        'ENTRYPOINT ["/opt/apache/beam/boot"]', tarball, image],
       "docker import")
  return image


def _root_file_system(tarball: str) -> None:
  if shutil.which("debootstrap") is None or os.geteuid() != 0:
    raise ToolsMissing("the local base needs debootstrap, run as root "
                       "(Debian: apt-get install debootstrap)")
  boot = beam_boot_binary()
  work = tempfile.mkdtemp(prefix=".rootfs-", dir=tools_dir())
  try:
    root = os.path.join(work, "root")
    _run(["debootstrap", "--variant=minbase", f"--include={_PACKAGES}",
          _DEBIAN, root, _mirror()], "debootstrap")
    shutil.rmtree(os.path.join(root, "var", "lib", "apt", "lists"),
                  ignore_errors=True)
    for deb in glob.glob(os.path.join(root, "var", "cache", "apt",
                                      "archives", "*.deb")):
      os.remove(deb)
    os.makedirs(os.path.join(root, "opt", "apache", "beam"))
    shutil.copy2(boot, os.path.join(root, "opt", "apache", "beam", "boot"))
    _run(["tar", "-C", root, "-cf", tarball + ".tmp", "."], "tar")
    os.replace(tarball + ".tmp", tarball)
  finally:
    shutil.rmtree(work, ignore_errors=True)


def lock_sha256() -> str:
  with open(os.path.join(repository(), LOCK), "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()


def wheelhouse() -> str:
  """The runtime lock's files and the build backend, downloaded once per
  lock (hash-checked by pip); a folder."""
  folder = os.path.join(tools_dir(), f"wheelhouse-py{PYTHON}-"
                        f"{lock_sha256()[:16]}")
  if os.path.exists(os.path.join(folder, ".complete")):
    return folder
  work = tempfile.mkdtemp(prefix=".wheelhouse-", dir=tools_dir())
  try:
    pip = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
           "--python-version", PYTHON, "--dest", work]
    _run(pip + ["--require-hashes", "-r",
                os.path.join(repository(), LOCK)], "pip download (lock)")
    _run(pip + ["--only-binary", ":all:", *BUILD_BACKEND],
         "pip download (build backend)")
    open(os.path.join(work, ".complete"), "w").close()
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(work, folder)
  finally:
    shutil.rmtree(work, ignore_errors=True)
  return folder


def native_wheel() -> str:
  """The native core's wheel (abi3, manylinux_2_34), built with maturin
  from native/Cargo.lock once per state of native/ (its sources'
  SHA-256)."""
  folder = os.path.join(tools_dir(), f"native-wheel-{_native_digest()}")
  found = glob.glob(os.path.join(folder, "beam_tfrecords_native-*.whl"))
  if found:
    return found[0]
  maturin = os.path.join(os.path.dirname(sys.executable), "maturin")
  if not os.path.exists(maturin):
    raise ToolsMissing("maturin is not installed (make native)")
  work = tempfile.mkdtemp(prefix=".native-", dir=tools_dir())
  try:
    _run([maturin, "build", "--release", "--locked", "--compatibility",
          "manylinux_2_34", "--interpreter", sys.executable, "-o", work],
         "maturin build", cwd=os.path.join(repository(), "native"))
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(work, folder)
  finally:
    shutil.rmtree(work, ignore_errors=True)
  [wheel] = glob.glob(os.path.join(folder, "beam_tfrecords_native-*.whl"))
  return wheel


def _native_digest() -> str:
  """The SHA-256 (16 hex digits) of native/'s sources."""
  digest = hashlib.sha256()
  native = os.path.join(repository(), "native")
  for folder, names, files in os.walk(native):
    names[:] = sorted(n for n in names if n != "target")
    for name in sorted(files):
      path = os.path.join(folder, name)
      digest.update(os.path.relpath(path, native).encode() + b"\0")
      with open(path, "rb") as f:
        digest.update(hashlib.sha256(f.read()).digest())
  return digest.hexdigest()[:16]


def _context() -> str:
  """The build context: the Dockerfile, the package, the lock and the
  native core's wheel, made anew."""
  context = os.path.join(tools_dir(), "worker-context")
  shutil.rmtree(context, ignore_errors=True)
  os.makedirs(os.path.join(context, "requirements"))
  repo = repository()
  skip = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so")
  for name in CONTEXT:
    if os.path.isdir(os.path.join(repo, name)):
      shutil.copytree(os.path.join(repo, name), os.path.join(context, name),
                      ignore=skip)
    else:
      shutil.copy2(os.path.join(repo, name), os.path.join(context, name))
  os.makedirs(os.path.join(context, "native-wheel"))
  shutil.copy2(native_wheel(), os.path.join(context, "native-wheel"))
  return context


@contextlib.contextmanager
def _served(folder: str):
  """The folder served over HTTP on 127.0.0.1:WHEELHOUSE_PORT (its
  listing is what pip's --find-links reads) while the block runs."""
  handler = functools.partial(_QuietHandler, directory=folder)
  try:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", WHEELHOUSE_PORT),
                                             handler)
  except OSError as e:
    raise ToolsMissing(f"127.0.0.1:{WHEELHOUSE_PORT}, where the wheelhouse "
                       f"is served to docker build, is taken ({e})") from e
  thread = threading.Thread(target=server.serve_forever, daemon=True)
  thread.start()
  try:
    yield
  finally:
    server.shutdown()
    server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
  def log_message(self, format, *args):  # pylint: disable=redefined-builtin
    pass


def build_image(base: str = "local", tag: str = IMAGE) -> Built:
  """Builds the worker image (see the module's docstring); `base`:
  "local", "official" or an image name. One build at a time per tools
  folder (processes of a test run wait for each other's)."""
  os.makedirs(tools_dir(), exist_ok=True)
  with open(os.path.join(tools_dir(), ".worker-image.lock"), "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    return _build_image(base, tag)


def _build_image(base: str, tag: str) -> Built:
  seconds: Dict[str, float] = {}
  started = time.time()
  docker_ready()
  if base == "local":
    base = local_base()
  elif base == "official":
    base = f"apache/beam_python{PYTHON}_sdk:{beam_version()}"
  seconds["base"] = time.time() - started
  mark = time.time()
  wheels = wheelhouse()
  seconds["wheelhouse"] = time.time() - mark
  mark = time.time()
  context = _context()
  seconds["context"] = time.time() - mark
  mark = time.time()
  tags = [f"{tag}:latest", f"{tag}:{__version__}-py{PYTHON.replace('.', '')}"]
  command = ["docker", "build", "--network", "host", "--build-arg",
             f"BASE={base}"]
  for name, value in (("VERSION", __version__),
                      ("BEAM_VERSION", beam_version()),
                      ("PYTHON_VERSION", PYTHON),
                      ("LOCK_SHA256", lock_sha256())):
    command += ["--build-arg", f"{name}={value}"]
  for t in tags:
    command += ["-t", t]
  before = _image_id(tags[0])
  with _served(wheels):
    _run(command + [context], "docker build",
         env=dict(os.environ, DOCKER_BUILDKIT="0"))
  if before is not None and before != _image_id(tags[0]):
    # The image this one replaces, untagged now (its layers that this
    # one shares stay); kept where a container or another tag uses it.
    subprocess.run(["docker", "rmi", before], capture_output=True,
                   timeout=120)
  seconds["image"] = time.time() - mark
  size = int(_run(["docker", "image", "inspect", "--format", "{{.Size}}",
                   tags[0]], "docker image inspect").strip())
  layers = [tuple(line.split("\t", 1)) for line in _run(
      ["docker", "history", "--no-trunc", "--format",
       "{{.Size}}\t{{.CreatedBy}}", tags[0]], "docker history").splitlines()]
  return Built(tags, seconds, size, layers)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--base", default="local",
                      help="local (Debian, made here), official (Beam's "
                      "SDK image, from Docker Hub) or an image name")
  parser.add_argument("--tag", default=IMAGE)
  args = parser.parse_args(argv)
  started = time.time()
  try:
    built = build_image(args.base, args.tag)
  except ToolsMissing as e:
    print(f"error: {e}", file=sys.stderr)
    return 1
  print(f"built {', '.join(built.tags)} in {time.time() - started:.0f} s ("
        + ", ".join(f"{k} {v:.0f} s" for k, v in built.seconds.items())
        + f"): {built.bytes / 1e9:.2f} GB")
  for size, step in built.layers:
    if size not in ("0B", "0"):
      print(f"  {size:>8}  {step[:110]}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
