"""What the tests and benchmarks use to run builds the way clusters do."""


class LocalServers:
  """Processes started by `start()`, stopped by `close()`; a context
  manager that stops what started when starting fails halfway."""

  def start(self) -> None:
    raise NotImplementedError

  def close(self) -> None:
    raise NotImplementedError

  def __enter__(self):
    try:
      self.start()
    except BaseException:
      self.close()
      raise
    return self

  def __exit__(self, *exc):
    self.close()
