"""A real Spark 3.5 standalone cluster on this machine: a master and
workers, each Spark's own `spark-class ...Master` / `...Worker` process on
127.0.0.1, with Python's SDK workers started by each executor through a
PROCESS environment (testing.portable), as on machines that have Python
and the package installed.

    with LocalSpark(workdir, source=REPO) as cluster:
      btr.build(..., beam_args=cluster.args)

`args` are what docs/operations.md tells a user: --runner SparkRunner,
--spark_master_url, --spark_job_server_jar and the environment;
`endpoint_args` send the job to the cluster's standing job server (the
same jar, started with the same properties) with --job_endpoint. The jar is
the assembled job server of ci/jobserver (cross-version: Beam 2.70 Java
with the 2.77 Python SDK), which holds no Spark: Beam's official jar
bundles Spark, this one takes it from the cluster's own jars/ through a
manifest-only launcher jar, which Beam's SparkRunner starts with
`java -jar` exactly as it starts the official one.

The master's JSON API and the applications' event logs say what ran
where (`applications`, `tasks_per_worker`).
"""

import json
import os
import subprocess
import urllib.request
import zipfile
from typing import Dict, List, Optional

from apache_beam.runners.portability.spark_runner import (
    SPARK_JAR_JOB_SERVER_JVM_ARGS)

from beam_tfrecords.testing import EngineCluster
from beam_tfrecords.testing.tools import engine_home, job_server_jar
from beam_tfrecords.testing.portable import LocalPortable, free_port

__all__ = ["LocalSpark", "launcher_jar"]

TIMEOUT = 120
MAIN = "org.apache.beam.runners.spark.SparkJobServerDriver"


def _manifest(main: str, class_path: List[str]) -> bytes:
  """A JAR manifest (lines of at most 72 bytes, continued with a space)."""
  lines = []
  for header in ("Manifest-Version: 1.0", f"Main-Class: {main}",
                 "Class-Path: " + " ".join(class_path)):
    data = header.encode("utf-8")
    lines.append(data[:72])
    data = data[72:]
    while data:
      lines.append(b" " + data[:71])
      data = data[71:]
  return b"\r\n".join(lines) + b"\r\n\r\n"


def launcher_jar(path: str, jar: str, spark_home: str) -> str:
  """A jar holding only a manifest: main class the job server's, class
  path the job server jar and every jar of Spark's distribution."""
  jars = os.path.join(spark_home, "jars")
  class_path = [f"file:{jar}"] + [
      f"file:{os.path.join(jars, name)}" for name in sorted(os.listdir(jars))
      if name.endswith(".jar")]
  with zipfile.ZipFile(path, "w") as z:
    z.writestr("META-INF/MANIFEST.MF", _manifest(MAIN, class_path))
  return path


class LocalSpark(EngineCluster):
  """Master + `workers` workers of one core each, and the workers' Python,
  which has this package (from a wheel of `source`)."""

  WHAT = "workers"
  # Each executor's copy of the job server's jars (324 MB), and the
  # driver's; the executors' logs beside them stay.
  SCRATCH = ("worker*/app-*/*/*.jar", "local")

  def __init__(self, workdir: str, source: Optional[str] = None,
               workers: int = 2, memory: str = "2g"):
    super().__init__(workdir)
    self.source = source
    self.count = workers
    self.memory = memory
    self.home = ""
    self.jar = ""
    self.url = ""
    self.ui = ""
    self.args: List[str] = []
    self.env: Dict[str, str] = {}
    self.pool: Optional[LocalPortable] = None
    self.workers: List[subprocess.Popen] = []
    self.worker_uis: List[str] = []
    self.events = ""

  def _spawn(self, name: str, args: List[str]) -> subprocess.Popen:
    log = open(os.path.join(self.workdir, f"{name}.out"), "w")
    self._logs.append(log)
    proc = subprocess.Popen(
        [os.path.join(self.home, "bin", "spark-class")] + args,
        cwd=self.workdir, env=self.env, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True)
    self._procs.append(proc)
    return proc

  def get(self, url: str):
    with urllib.request.urlopen(url, timeout=10) as r:
      return json.load(r)

  def _nodes(self) -> set:
    return {w["id"] for w in self.get(self.ui + "/json/")["workers"]
            if w["state"] == "ALIVE"}

  def _start_worker(self, i: int, name: str) -> subprocess.Popen:
    work = os.path.join(self.workdir, f"worker{i}")
    os.makedirs(work, exist_ok=True)
    port = free_port()
    proc = self._spawn(name, [
        "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
        "--webui-port", str(port), "--cores", "1", "--memory", self.memory,
        "--work-dir", work, self.url])
    ui = f"http://127.0.0.1:{port}"
    if i < len(self.worker_uis):
      self.worker_uis[i] = ui
    else:
      self.worker_uis.append(ui)
    return proc

  def start(self) -> None:
    os.makedirs(self.workdir, exist_ok=True)
    self.home = engine_home("spark")
    self.jar = launcher_jar(os.path.join(self.workdir, "jobserver.jar"),
                            job_server_jar("spark-3"), self.home)
    local = os.path.join(self.workdir, "local")
    self.events = os.path.join(self.workdir, "events")
    os.makedirs(local, exist_ok=True)
    os.makedirs(self.events, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(SPARK_HOME=self.home, SPARK_LOCAL_IP="127.0.0.1",
               SPARK_LOCAL_DIRS=local, SPARK_LOG_DIR=self.workdir)
    self.env = env
    port, ui = free_port(), free_port()
    self.url = f"spark://127.0.0.1:{port}"
    self.ui = f"http://127.0.0.1:{ui}"
    self._spawn("master", ["org.apache.spark.deploy.master.Master",
                           "--host", "127.0.0.1", "--port", str(port),
                           "--webui-port", str(ui)])
    for i in range(self.count):
      self.workers.append(self._start_worker(i, f"worker{i}"))
    self.pool = LocalPortable(os.path.join(self.workdir, "pool"),
                              source=self.source, servers=False)
    self.pool.start()
    self._wait_for(self.count)
    # The driver (the job server) must reach executors on 127.0.0.1 too.
    properties = {"spark.driver.host": "127.0.0.1",
                  "spark.executor.memory": "1g",
                  "spark.executor.cores": "1",
                  "spark.cores.max": str(self.count),
                  "spark.eventLog.enabled": "true",
                  "spark.eventLog.dir": "file:" + self.events}
    self.args = ["--runner=SparkRunner", f"--spark_master_url={self.url}",
                 f"--spark_job_server_jar={self.jar}",
                 "--job_server_jvm_properties=-Xmx1g"] + [
                     f"--job_server_jvm_properties=-D{k}={v}"
                     for k, v in properties.items()] + self.pool.args + [
                     # SDK workers kept for the job, not started per stage
                     "--environment_cache_millis=600000"]
    endpoint = self._start_job_server(
        # (Java 17 flags: those Beam's SparkRunner gives its job server.)
        ["java", "-Xmx1g"] + SPARK_JAR_JOB_SERVER_JVM_ARGS +
        [f"-D{k}={v}" for k, v in properties.items()] +
        ["-jar", self.jar, "--spark-master-url", self.url], self.env)
    self.endpoint_args = ["--runner=SparkRunner",
                          f"--job_endpoint={endpoint}"] + [
                              a for a in self.args
                              if a.startswith("--environment")]

  def kill_worker(self, i: int) -> None:
    """SIGKILLs worker `i` and what it started (its executors)."""
    self._kill(self.workers[i])

  def restart_worker(self, i: int) -> None:
    self.workers[i] = self._start_worker(i, f"worker{i}-again")
    self._wait_for(self.count, new=True)

  def applications(self) -> List[dict]:
    """The master's finished applications (id, name, state...)."""
    return self.get(self.ui + "/json/")["completedapps"]

  def tasks_per_executor(self, app_id: str) -> Dict[str, int]:
    """{executor id: tasks it ended} from the application's event log."""
    out: Dict[str, int] = {}
    with open(os.path.join(self.events, app_id)) as f:
      for line in f:
        event = json.loads(line)
        if event.get("Event") == "SparkListenerTaskEnd":
          executor = event["Task Info"]["Executor ID"]
          out[executor] = out.get(executor, 0) + 1
    return out

  def executors_per_worker(self, app_id: str) -> Dict[str, List[str]]:
    """{worker UI: ids of the app's executors it ran}."""
    out: Dict[str, List[str]] = {}
    for ui in self.worker_uis:
      try:
        state = self.get(ui + "/json/")
      except OSError:
        continue
      out[ui] = [str(e["id"]) for e in state.get("finishedexecutors", []) +
                 state.get("executors", []) if e.get("appid") == app_id]
    return out
