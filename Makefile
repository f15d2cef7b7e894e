# The two commands of the README:
#   make demo   sets up a virtualenv and builds the bundled sample dataset
#   make test   sets up the same virtualenv, type-checks the library (mypy.ini)
#               and runs the whole test suite on every core: the suite, then
#               its cluster tier
# make test-fast runs the fast tier (no slow or cluster test): run it
#             before every commit.
# make native builds the native encoding core (native/, Rust) into the
#             virtualenv; make setup does it where cargo is installed, and
#             says in one line where it is not (the pure-Python path then
#             writes the same bytes, with more CPU: docs/performance.md,
#             the native core).
# make native-wheel builds the core's wheel for Beam workers
#             (--extra_package; docs/operations.md).
# make setup-extras adds the torch, tfds, array_record and dali extras
#             (PyTorch, ~3 GB, TensorFlow Datasets, array-record and
#             Grain, NVIDIA DALI, ~420 MB) to the virtualenv, for their
#             tests.
# make cluster-tools installs Flink and Spark (from PyPI), builds their
#             Beam job servers (Maven, JDK 17), Beam's Prism runner and
#             fake-gcs-server (Go) into a tools folder outside the
#             repository, for the
#             real-cluster tests (5-10 minutes cold, nothing warm);
#             without it they make them on first use, or skip where
#             Java, Maven or Go is missing.
# make worker-image builds the Beam worker image (Docker) for
#             --environment_type DOCKER, Dataflow's --sdk_container_image
#             and worker pools, tagged beam-tfrecords-worker:latest and
#             :VERSION-py311; BASE=local (default: a Debian base made with
#             debootstrap and Beam's boot, no Docker Hub) or official
#             (apache/beam_python3.11_sdk): docs/operations.md.
# make coverage runs the whole suite under coverage.py.
# Another Python: make test-fast PYTHON=python3.13 VENV=.venv-py313
# make docs regenerates docs/cli.md and builds the documentation into site/.
# make lock refreshes the lock of exact versions (requirements/) from
#             setup.py's ranges.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The exact versions `make setup` installs (hash-checked), one lock per
# Python version; setup.py keeps the ranges users install from.
PY_VERSION := $(shell $(PYTHON) -c 'import sys; print("%d%d" % sys.version_info[:2])')
LOCK := requirements/py$(PY_VERSION).txt
PIP_VERSION := 26.3
UV_VERSION := 0.13.9

# pytest-xdist: one worker per core, a test file's tests on one worker
# (module fixtures are built once).
PYTEST := $(BIN)/python -m pytest -q -n auto --dist loadfile

.PHONY: setup native native-if-cargo native-wheel setup-extras cluster-tools worker-image demo test test-fast coverage bench docs lock clean view-screenshots

$(VENV)/.installed: setup.py $(wildcard $(LOCK))
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade 'pip==$(PIP_VERSION)'
	@if [ -f $(LOCK) ]; then \
	  echo "installing the locked versions of $(LOCK)"; \
	  $(BIN)/pip install --quiet --require-hashes --no-deps -r $(LOCK) && \
	  $(BIN)/pip install --quiet --no-deps --no-build-isolation -e . && \
	  $(BIN)/pip check && echo $(LOCK) > $@; \
	else \
	  echo "warning: no lock for this Python ($(LOCK)): installing from setup.py's ranges" >&2; \
	  $(BIN)/pip install --quiet -e '.[test]' && echo ranges > $@; \
	fi
	@# An editable install compiles nothing, and with PYTHONDONTWRITEBYTECODE
	@# set every command would compile the package again (0.1 s each).
	$(BIN)/python -m compileall -q beam_tfrecords pipelines

setup: $(VENV)/.installed native-if-cargo

# The native encoding core (beam_tfrecords_native, built from native/ with
# the crates of native/Cargo.lock): where cargo is missing, setup goes on
# with one line saying so, and the pure-Python path runs.
NATIVE_SOURCES := native/Cargo.toml native/Cargo.lock native/pyproject.toml \
  $(wildcard native/src/*.rs)

$(VENV)/.native: $(VENV)/.installed $(NATIVE_SOURCES) requirements/native.txt
	$(BIN)/pip install --quiet --require-hashes -r requirements/native.txt
	@# (maturin's build hook runs the `maturin` of PATH)
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/pip install --quiet --no-deps --no-build-isolation ./native
	touch $@

native: $(VENV)/.native

native-if-cargo: $(VENV)/.installed
	@if command -v cargo >/dev/null 2>&1; then \
	  $(MAKE) --no-print-directory native || echo "the native encoding core did not build (see above): records are encoded by the pure-Python path (the same bytes, more CPU: docs/performance.md, the native core)"; \
	else \
	  echo "no cargo here: the native encoding core is not built; records are encoded by the pure-Python path (the same bytes, more CPU: docs/performance.md, the native core)"; \
	fi

# The core's wheel (abi3: CPython 3.11 and later) for Beam workers, in
# native/target/wheels/; ship it with --extra_package (docs/operations.md).
native-wheel: $(VENV)/.native
	cd native && $(abspath $(BIN))/maturin build --release --locked --compatibility manylinux_2_34

# The torch, tfds, array_record and dali extras (beam_tfrecords.read.torch;
# TensorFlow Datasets to read --tfds datasets; array-record to write
# --file-format array_record, Grain to read it; DALI's reader of
# uncompressed shards and their index), beside the core install: their
# tests run with them and are skipped without them (CI installs them).
$(VENV)/.extras: $(VENV)/.installed
	$(BIN)/pip install --quiet --no-build-isolation -e '.[torch,tfds,array_record,dali]'
	$(BIN)/pip check
	touch $@

setup-extras: $(VENV)/.extras

# ${BTR_TOOLS:-~/.cache/beam-tfrecords-tools}: beam_tfrecords/testing/tools.py
cluster-tools: setup
	$(BIN)/python -m beam_tfrecords.testing.tools

BASE ?= local
worker-image: setup native
	$(BIN)/python -m beam_tfrecords.testing.worker_image --base $(BASE)

demo: setup
	$(BIN)/beam-tfrecords build --schema schemas/movie_ratings.yaml \
	  --input pipelines/data/movie_ratings.csv --output out/movie_ratings --overwrite
	$(BIN)/beam-tfrecords inspect out/movie_ratings --records 2

# The suite, then the cluster tier (tests that start servers or clusters on
# 127.0.0.1: the portable job service and worker pools, Dask, S3, Flink,
# Spark), each with its own time budget.
test: setup
	$(BIN)/mypy
	$(PYTEST) -m "not cluster" tests
	$(PYTEST) -m cluster tests

test-fast: setup
	$(BIN)/mypy
	$(PYTEST) -m "not slow and not cluster" tests

coverage: setup
	$(PYTEST) --cov=beam_tfrecords --cov-report=term tests

bench: setup
	$(BIN)/python benchmarks/run.py

docs: setup
	$(BIN)/python docs/gen_cli.py docs/cli.md
	$(BIN)/mkdocs build --strict -d site

# Resolves setup.py's requirements (with the [test] extra) for Linux
# x86_64 and writes the lock with every file's SHA-256; commit the result
# (tests/unit/test_requirements_lock.py checks it still satisfies setup.py).
# uv runs from a venv of its own: a setup.py that the old lock no longer
# satisfies must not stop the lock's refresh.
# The screenshots of `beam-tfrecords view` in docs/reading.md, taken by
# its headless-browser test (needs Chromium).
view-screenshots: setup
	BTR_VIEW_SCREENSHOTS=docs $(BIN)/python -m pytest -q tests/e2e/test_view.py -k image

lock:
	$(PYTHON) -m venv .venv-lock
	.venv-lock/bin/pip install --quiet 'uv==$(UV_VERSION)'
	.venv-lock/bin/uv pip compile setup.py --extra test --generate-hashes \
	  --python-version $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])') \
	  --python-platform x86_64-manylinux_2_28 --quiet -o $(LOCK)
	@# The worker image's lock: setup.py's requirements (no test tools) at
	@# the versions of the full lock (testing/worker_image.py).
	if [ "$(PY_VERSION)" = "311" ]; then \
	  .venv-lock/bin/uv pip compile setup.py --generate-hashes -c $(LOCK) \
	    --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
	    --quiet -o requirements/runtime-py311.txt; \
	fi

clean:
	rm -rf $(VENV) .venv-lock .venv-py3* out build site *.egg-info .coverage native/target
