# The Dataflow Flex Template launcher for `beam-tfrecords build`: the
# worker image (make worker-image) with Google's template launcher, which
# runs beam_tfrecords.cli.flex_template with the job's parameters
# (docs/operations.md, Dataflow: a Flex Template). Untested here: it needs
# Google's base image and a Dataflow project.
#
#   docker build -f dataflow/launcher.Dockerfile \
#       --build-arg WORKER=REGISTRY/beam-tfrecords:0.1.0 -t REGISTRY/beam-tfrecords-launcher:0.1.0 .
ARG WORKER=beam-tfrecords-worker:latest
FROM gcr.io/dataflow-templates-base/python311-template-launcher-base:latest AS launcher

FROM ${WORKER}
COPY --from=launcher /opt/google/dataflow/python_template_launcher \
     /opt/google/dataflow/python_template_launcher
# The launcher runs this file with the template's parameters.
RUN printf 'import sys\nfrom beam_tfrecords.cli.flex_template import main\nsys.exit(main())\n' \
    > /opt/beam-tfrecords/flex_template_main.py
ENV FLEX_TEMPLATE_PYTHON_PY_FILE=/opt/beam-tfrecords/flex_template_main.py
ENTRYPOINT ["/opt/google/dataflow/python_template_launcher"]
