"""Shared fixtures: a movie-ratings table and TensorFlow-side readers."""

import glob
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The debug logs of failed builds (beam_tfrecords.cli) go to a folder of
# the test run's, not the system's temporary folder.
os.environ.setdefault("BTR_LOG_DIR", os.path.join(
    os.environ.get("TMPDIR", "/tmp"), f"btr-test-logs-{os.getpid()}"))

import pytest

# One table, written as CSV, JSONL and Parquet by the tests. Values chosen
# for the corners: 0 / 0.0 / "" are values, None is missing, negative and
# extreme int64, float32 rounding, non-ASCII text.
ROWS = [
    {"Age": 29, "Movie": ["The Shawshank Redemption", "Fight Club"],
     "Movie Ratings": [9.0, 9.7], "Suggestion": "Inception", "Price": 9.99,
     "Code": "raw-1"},
    {"Age": 0, "Movie": ["Amélie"], "Movie Ratings": [0.0],
     "Suggestion": "", "Price": None, "Code": ""},
    {"Age": -9223372036854775808, "Movie": [], "Movie Ratings": [],
     "Suggestion": "Up", "Price": 0.0, "Code": None},
    {"Age": 9223372036854775807, "Movie": ["Heat", "Alien", "Jaws"],
     "Movie Ratings": [1e-3, 3.3333333, 7.0], "Suggestion": "東京",
     "Price": 1e30, "Code": "abc"},
]

SCHEMA = {
    "name": "movies",
    "features": {
        "age": {"type": "int64", "source": "Age", "required": True},
        "movies": {"type": "string", "shape": [-1], "source": "Movie",
                   "separator": "|"},
        "ratings": {"type": "float", "shape": [-1], "source": "Movie Ratings",
                    "separator": "|"},
        "suggestion": {"type": "string", "source": "Suggestion"},
        "price": {"type": "float", "source": "Price", "default": -1.0},
        "code": {"type": "bytes", "source": "Code"},
    },
}


@pytest.fixture(scope="session")
def tf():
  import tensorflow
  return tensorflow


def shard_paths(output, split="train"):
  return sorted(glob.glob(os.path.join(output, f"{split}-*.tfrecord.gz")))


def tf_records(tf, output, split="train"):
  """Serialized records of a split, read by TensorFlow (GZIP)."""
  ds = tf.data.TFRecordDataset(shard_paths(output, split),
                               compression_type="GZIP")
  return [r.numpy() for r in ds]


def tf_parse(tf, records, spec):
  """Each record parsed by tf.io.parse_single_example -> dict of numpy."""
  out = []
  for r in records:
    parsed = tf.io.parse_single_example(r, spec)
    row = {}
    for k, v in parsed.items():
      if isinstance(v, tf.sparse.SparseTensor):
        v = tf.sparse.to_dense(v)
      row[k] = v.numpy()
    out.append(row)
  return out


from beam_tfrecords.testing.portable import free_port, wait_for_port  # noqa: E402,F401


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
  """A moto S3 server on 127.0.0.1 (its URL), AWS test credentials in the
  environment; stopped afterwards."""
  import subprocess
  import sys
  pytest.importorskip("boto3")
  pytest.importorskip("moto")
  port = free_port()
  log = open(tmp_path_factory.mktemp("moto") / "server.log", "w")
  server = subprocess.Popen(
      [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
       str(port)], stdout=log, stderr=subprocess.STDOUT)
  wait_for_port(port, server, "moto S3 server", 30)
  env = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
         "AWS_DEFAULT_REGION": "us-east-1"}
  old = {k: os.environ.get(k) for k in env}
  os.environ.update(env)
  try:
    yield f"http://127.0.0.1:{port}"
  finally:
    server.terminate()
    server.wait(10)
    log.close()
    for k, v in old.items():
      if v is None:
        os.environ.pop(k, None)
      else:
        os.environ[k] = v


def s3_beam_args(url):
  """Beam's options for the moto server at `url`."""
  return [f"--s3_endpoint_url={url}", "--s3_access_key_id=test",
          "--s3_secret_access_key=test", "--s3_region_name=us-east-1"]


# The tiers (pytest.ini). A test is `cluster` when it uses a fixture that
# starts servers on 127.0.0.1, `unit` in a module of functions on values,
# else `e2e`; `slow` marks the e2e tests (over about 5 s here) that the fast
# tier (make test-fast) leaves out. tests/test_layout.py checks that every
# name below still names a test or fixture.
CLUSTER_FIXTURES = {"s3", "portable_pool", "portable", "bare_pool",
                    "cluster", "flink", "spark"}
UNIT_MODULES = {"test_encoding", "test_grouped_fast", "test_images_unit",
                "test_layout", "test_lock", "test_properties", "test_runs",
                "test_schema", "test_sequence_encoding"}
SLOW = {
    "test_determinism.py::test_bundled_builds_are_the_pinned_bytes_on_other_cpu_kernels",
    "test_docs.py::test_snippets_run",
    "test_transform.py::test_transformed_only_and_the_same_bytes",
    "test_transform.py::test_review_cases",
    "test_transform.py::test_values_match_numpy_on_the_training_split",
    "test_publish_kills.py::test_simultaneous_builds_into_one_output_never_mix",
    "test_publish_kills.py::test_a_build_killed_while_publishing_is_finished_by_the_next",
    "test_grouped_bytes.py::test_grouped_output_is_pinned",
    "test_beam_transforms.py::test_write_dataset_with_tensorflow_transform",
    "test_beam_transforms.py::test_write_dataset_bytes_do_not_depend_on_order_or_workers",
    "test_images.py::test_every_dtype_round_trips",
    "test_bad_input.py::test_bad_rows",
    "test_splits.py::test_hash_split_keeps_each_key_in_one_split_with_the_ratios",
    "test_shuffle.py::test_shuffle_is_seeded_complete_and_the_same_bytes",
    "test_report.py::test_reports_render_in_a_headless_browser",
    # Command-line processes and several workers (the fast tier keeps
    # in-process builds of the same paths).
    "test_expectations.py::test_a_scheduled_build_compares_with_the_previous_day",
    "test_preprocess.py::test_cli_imports_module_function_from_the_working_directory_and_a_changed_function_rebuilds",
    "test_tfrecord_input.py::test_gzip_without_the_suffix_and_the_cli_flag",
    "test_sequence_build.py::test_records_are_the_same_with_two_worker_processes",
    "test_faults.py::test_same_bytes_with_different_worker_counts",
    "test_packaging.py::test_the_dockerfile_build_context_is_enough_for_the_package",
    "test_preprocessing_fn.py::test_the_records_are_tfts_own_values",
}


def pytest_collection_modifyitems(items):
  for item in items:
    module = item.nodeid.split("::")[0].rsplit("/", 1)[-1]
    if CLUSTER_FIXTURES & set(getattr(item, "fixturenames", ())):
      item.add_marker(pytest.mark.cluster)
    elif module[:-3] in UNIT_MODULES:
      item.add_marker(pytest.mark.unit)
    else:
      item.add_marker(pytest.mark.e2e)
    if module + "::" + item.nodeid.split("::", 1)[-1].split("[")[0] in SLOW:
      item.add_marker(pytest.mark.slow)
