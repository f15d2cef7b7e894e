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
FROM apache/beam_python${PYTHON_VERSION}_sdk:2.77.0

WORKDIR /opt/beam_tfrecords
COPY setup.py README.md ./
COPY beam_tfrecords ./beam_tfrecords
COPY pipelines ./pipelines
COPY schemas ./schemas
RUN pip install --no-cache-dir . && python -c "import beam_tfrecords"

# The base image's entrypoint (/opt/apache/beam/boot) starts the SDK harness.
