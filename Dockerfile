# A custom Beam SDK worker image for Dataflow, Flink and Spark, with
# beam_tfrecords installed. The base image's Beam and Python versions must
# equal the launcher's (setup.py pins Beam; tests/unit/test_packaging.py checks):
# Python 3.11 by default, another supported one with --build-arg.
#
#   docker build -t REGISTRY/beam-tfrecords:0.1.0 .
#   docker build --build-arg PYTHON_VERSION=3.13 -t REGISTRY/beam-tfrecords:0.1.0-py313 .
#   beam-tfrecords build ... --runner DataflowRunner \
#       --sdk_container_image REGISTRY/beam-tfrecords:0.1.0
ARG PYTHON_VERSION=3.11

# The native encoding core (native/) as an abi3 wheel (CPython 3.11 and
# later), built in a Rust image of the SDK images' Debian release
# (bookworm, glibc 2.36) with the crates of native/Cargo.lock.
FROM rust:1-slim-bookworm AS native
RUN apt-get update && apt-get install -y --no-install-recommends python3-venv \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /build
COPY requirements/native.txt ./requirements/
COPY native ./native
RUN python3 -m venv /venv \
    && /venv/bin/pip install --require-hashes -r requirements/native.txt \
    && cd native && /venv/bin/maturin build --release --locked \
       --compatibility manylinux_2_34 -o /wheels

FROM apache/beam_python${PYTHON_VERSION}_sdk:2.77.0

WORKDIR /opt/beam_tfrecords
COPY setup.py README.md ./
COPY beam_tfrecords ./beam_tfrecords
COPY pipelines ./pipelines
COPY schemas ./schemas
COPY --from=native /wheels /tmp/native-wheels
RUN pip install --no-cache-dir . /tmp/native-wheels/*.whl \
    && python -c "import beam_tfrecords, beam_tfrecords_native"

# The base image's entrypoint (/opt/apache/beam/boot) starts the SDK harness.
