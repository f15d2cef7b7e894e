"""A real Flink 1.20 session cluster on this machine: a JobManager and
TaskManagers, each Flink's own `bin/jobmanager.sh` / `bin/taskmanager.sh`
process, listening on localhost, with Python's SDK workers started by each TaskManager
through a PROCESS environment (testing.portable: a boot command that
installs what the job staged and starts the worker), as on machines that
have Python and the package installed (VMs, YARN, a standalone cluster).

    with LocalFlink(workdir, source=REPO) as cluster:
      btr.build(..., beam_args=cluster.args)

`args` are what docs/operations.md tells a user: --runner FlinkRunner,
--flink_master, --flink_job_server_jar (the assembled job server of
ci/jobserver: cross-version, Beam 2.70 Java with the 2.77 Python SDK),
--parallelism and the environment; `endpoint_args` send the job to the
cluster's standing job server (the same jar) with --job_endpoint. The
REST API says what ran where (`finished_jobs`, `taskmanagers_of`).
"""

import json
import os
import subprocess
import urllib.request
from typing import Dict, List, Optional

import yaml

from beam_tfrecords.testing import EngineCluster
from beam_tfrecords.testing.tools import engine_home, job_server_jar
from beam_tfrecords.testing.portable import LocalPortable, free_port

__all__ = ["LocalFlink"]

TIMEOUT = 120


def _set(config: dict, dotted: str, value) -> None:
  """Sets a.b.c in Flink's nested config.yaml, replacing a flat "a.b.c"
  key if the file has one."""
  config.pop(dotted, None)
  keys = dotted.split(".")
  for key in keys[:-1]:
    config = config.setdefault(key, {})
  config[keys[-1]] = value


class LocalFlink(EngineCluster):
  """JobManager + `taskmanagers` TaskManagers of one slot each, and the
  workers' Python, which has this package (from a wheel of `source`)."""

  WHAT = "TaskManagers"
  # io.tmp.dirs: the TaskManagers' blob caches of each job's jars.
  SCRATCH = ("tmp",)

  def __init__(self, workdir: str, source: Optional[str] = None,
               taskmanagers: int = 2):
    super().__init__(workdir)
    self.source = source
    self.count = taskmanagers
    self.home = ""
    self.jar = ""
    self.rest = ""
    self.args: List[str] = []
    self.pool: Optional[LocalPortable] = None
    self.taskmanagers: List[subprocess.Popen] = []
    self._env: Dict[str, str] = {}

  def _configure(self) -> str:
    conf = os.path.join(self.workdir, "conf")
    os.makedirs(conf, exist_ok=True)
    for name in os.listdir(os.path.join(self.home, "conf")):
      if name != "config.yaml":
        with open(os.path.join(self.home, "conf", name), "rb") as src, \
            open(os.path.join(conf, name), "wb") as dst:
          dst.write(src.read())
    with open(os.path.join(self.home, "conf", "config.yaml")) as f:
      config = yaml.safe_load(f)
    self.port = free_port()
    tmp = os.path.join(self.workdir, "tmp")
    os.makedirs(tmp, exist_ok=True)
    for key, value in {
        "rest.port": self.port, "rest.address": "localhost",
        "rest.bind-address": "localhost",
        "jobmanager.rpc.port": free_port(),
        "parallelism.default": self.count, "io.tmp.dirs": tmp,
        "taskmanager.numberOfTaskSlots": 1,
        # A TensorFlow Transform build's job has many exchanges: with the
        # default (10% of 1728m, 4096 buffers) it failed with
        # "Insufficient number of network buffers: required 512, but only
        # 470 available".
        "taskmanager.memory.network.min": "256mb",
        "taskmanager.memory.network.max": "256mb",
        # A killed TaskManager is dropped after 15 s without heartbeats
        # (Flink's default: 50 s): a restarted one gets its slot sooner.
        "heartbeat.interval": 3000, "heartbeat.timeout": 15000}.items():
      _set(config, key, value)
    with open(os.path.join(conf, "config.yaml"), "w") as f:
      yaml.safe_dump(config, f)
    return conf

  def _spawn(self, name: str, script: str) -> subprocess.Popen:
    log = open(os.path.join(self.workdir, f"{name}.out"), "w")
    self._logs.append(log)
    # Its own process group: the script's java is stopped with it.
    proc = subprocess.Popen(
        ["bash", os.path.join(self.home, "bin", script), "start-foreground"],
        cwd=self.workdir, env=self._env, stdout=log,
        stderr=subprocess.STDOUT, start_new_session=True)
    self._procs.append(proc)
    return proc

  def get(self, path: str):
    with urllib.request.urlopen(self.rest + path, timeout=10) as r:
      return json.load(r)

  def _nodes(self) -> set:
    return {tm["id"] for tm in self.get("/taskmanagers")["taskmanagers"]}

  def start(self) -> None:
    os.makedirs(self.workdir, exist_ok=True)
    self.home = engine_home("flink")
    self.jar = job_server_jar("flink-1.20")
    conf = self._configure()
    logs = os.path.join(self.workdir, "log")
    os.makedirs(logs, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(FLINK_HOME=self.home, FLINK_CONF_DIR=conf,
               FLINK_LOG_DIR=logs)
    self._env = env
    self.rest = f"http://localhost:{self.port}"
    self._spawn("jobmanager", "jobmanager.sh")
    for i in range(self.count):
      self.taskmanagers.append(self._spawn(f"taskmanager{i}",
                                           "taskmanager.sh"))
    self.pool = LocalPortable(os.path.join(self.workdir, "pool"),
                              source=self.source, servers=False)
    self.pool.start()
    self._wait_for(self.count)
    self.args = ["--runner=FlinkRunner", f"--flink_master=localhost:{self.port}",
                 f"--flink_job_server_jar={self.jar}",
                 f"--parallelism={self.count}",
                 "--job_server_jvm_properties=-Xmx1g"] + self.pool.args + [
                     # SDK workers kept for the job, not started per stage
                     "--environment_cache_millis=600000"]
    endpoint = self._start_job_server(
        ["java", "-Xmx1g", "-jar", self.jar,
         "--flink-master", f"http://localhost:{self.port}"], self._env)
    self.endpoint_args = ["--runner=FlinkRunner",
                          f"--job_endpoint={endpoint}"] + [
                              a for a in self.args if a.startswith(
                                  ("--parallelism", "--environment"))]

  def kill_taskmanager(self, i: int) -> None:
    """SIGKILLs TaskManager `i` (its JVM and script), as a lost machine."""
    self._kill(self.taskmanagers[i])

  def restart_taskmanager(self, i: int) -> None:
    """Starts TaskManager `i` again and waits until it has registered."""
    self.taskmanagers[i] = self._spawn(f"taskmanager{i}-again",
                                       "taskmanager.sh")
    self._wait_for(self.count, new=True)

  def finished_jobs(self) -> List[dict]:
    return [j for j in self.get("/jobs/overview")["jobs"]
            if j["state"] == "FINISHED"]

  def jobs(self) -> List[dict]:
    return self.get("/jobs/overview")["jobs"]

  def taskmanagers_of(self, jid: str) -> Dict[str, int]:
    """{TaskManager id: records it read} over the job's vertices: where
    the job's work ran."""
    out: Dict[str, int] = {}
    for vertex in self.get(f"/jobs/{jid}")["vertices"]:
      for tm in self.get(f"/jobs/{jid}/vertices/{vertex['id']}"
                         "/taskmanagers")["taskmanagers"]:
        key = tm.get("taskmanager-id") or tm.get("endpoint")
        out[key] = out.get(key, 0) + int(
            tm.get("metrics", {}).get("read-records", 0))
    return out
