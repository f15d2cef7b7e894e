# The Beam worker image for Dataflow, Flink, Spark and Prism: Beam's SDK
# harness (boot) with beam_tfrecords and the runtime lock, for
# --environment_type DOCKER, --sdk_container_image (Dataflow) and a worker
# pool (--environment_type EXTERNAL). Build it with
#
#   make worker-image                   # a local Debian base: no Docker Hub
#   make worker-image BASE=official     # FROM apache/beam_python3.11_sdk
#
# (beam_tfrecords/testing/worker_image.py): it assembles the build context,
# the package, requirements/runtime-py311.txt (setup.py's requirements at
# the full lock's versions, without the test tools) and a wheelhouse the
# host downloaded with the lock's hashes (served to the build on
# 127.0.0.1) plus the native core's wheel. The base's Beam and Python must
# equal the launcher's: a build checks the labels below before it starts
# (docs/operations.md, the worker image).
ARG BASE=apache/beam_python3.11_sdk:2.77.0
FROM ${BASE}

# The lock, hash-checked, from the host's wheelhouse served on 127.0.0.1
# to this build (--network host; no index is asked): one layer, kept
# while the lock does not change.
ARG WHEELHOUSE=http://127.0.0.1:38765/
COPY requirements/runtime-py311.txt /tmp/lock.txt
RUN python3 -m venv /opt/beam-tfrecords \
    && /opt/beam-tfrecords/bin/pip install --no-cache-dir --no-index \
       --find-links ${WHEELHOUSE} --require-hashes --no-deps \
       -r /tmp/lock.txt \
    && rm /tmp/lock.txt

# The native core's wheel and the package: small layers of their own.
COPY native-wheel /tmp/native-wheel
COPY setup.py README.md /tmp/beam_tfrecords/
COPY beam_tfrecords /tmp/beam_tfrecords/beam_tfrecords
COPY pipelines /tmp/beam_tfrecords/pipelines
COPY schemas /tmp/beam_tfrecords/schemas
RUN /opt/beam-tfrecords/bin/pip install --no-cache-dir --no-index \
       --find-links ${WHEELHOUSE} --no-deps --no-build-isolation \
       /tmp/beam_tfrecords /tmp/native-wheel/beam_tfrecords_native-*.whl \
    && /opt/beam-tfrecords/bin/pip check \
    && /opt/beam-tfrecords/bin/python -c \
       "import beam_tfrecords, beam_tfrecords_native, apache_beam" \
    && rm -rf /tmp/beam_tfrecords /tmp/native-wheel

# Beam's boot (/opt/apache/beam/boot), ended when the runner that started
# it is gone: Beam's harness would wait for it forever; a worker pool's
# workers are started the same way (beam_tfrecords/runners/
# worker_entrypoint.py).
RUN printf '#!/bin/sh\nexec /opt/beam-tfrecords/bin/python -m beam_tfrecords.runners.worker_entrypoint "$@"\n' \
      > /opt/beam-tfrecords/bin/beam-tfrecords-worker \
    && chmod 755 /opt/beam-tfrecords/bin/beam-tfrecords-worker

# boot finds python (and pip) on PATH; without the variable it would make a
# virtualenv per worker that cannot see the packages.
ENV PATH=/opt/beam-tfrecords/bin:$PATH \
    RUN_PYTHON_SDK_IN_DEFAULT_ENVIRONMENT=1
ARG VERSION=unknown
ARG BEAM_VERSION=unknown
ARG PYTHON_VERSION=3.11
ARG LOCK_SHA256=unknown
LABEL org.opencontainers.image.title="beam-tfrecords-worker" \
      org.opencontainers.image.version="${VERSION}" \
      io.beam-tfrecords.version="${VERSION}" \
      io.beam-tfrecords.beam="${BEAM_VERSION}" \
      io.beam-tfrecords.python="${PYTHON_VERSION}" \
      io.beam-tfrecords.lock-sha256="${LOCK_SHA256}"
# (the command above)
ENTRYPOINT ["/opt/beam-tfrecords/bin/beam-tfrecords-worker"]
