"""beam_tfrecords: declarative TFRecord datasets built with Apache Beam."""

import os
import re

from setuptools import find_packages, setup

_HERE = os.path.dirname(os.path.abspath(__file__))


def _version():
  with open(os.path.join(_HERE, "beam_tfrecords", "core", "version.py")) as f:
    return re.search(r'__version__ = "([^"]+)"', f.read()).group(1)


# The versions that resolve together on Python 3.11 (checked 2026-11). The
# Beam pin must equal the SDK container in the Dockerfile: a launcher/worker
# mismatch is the classic failure on a cluster (tests/e2e/test_packaging.py).
BEAM_VERSION = "2.77.0"
INSTALL_REQUIRES = [
    # [gcp] brings google-crc32c, the C crc32c that Beam's TFRecord framing
    # picks up (without it Beam falls back to a pure-Python crcmod); tfx-bsl
    # requires apache-beam[gcp] anyway.
    # [aws]: boto3, for s3:// paths through Beam's FileSystems.
    f"apache-beam[gcp,aws]=={BEAM_VERSION}",
    "tensorflow>=2.21,<2.22",
    "tensorflow-transform>=1.21,<1.22",
    "tfx-bsl>=1.21,<1.22",
    "pyarrow>=14,<26",
    "numpy>=1.26,<3",
    "PyYAML>=6.0,<7",
    # ISA-L deflate: standard gzip, several times faster than zlib.
    "isal>=1.6,<2",
    # Image headers, verification, resize / convert / re-encode.
    "pillow>=10.3,<13",
    # The live progress line of a build (TensorFlow's Keras brings it too).
    "rich>=13,<16",
]

DASK_REQUIRES = [f"apache-beam[dask]=={BEAM_VERSION}",
                 "dask>=2024.4.2,<2027", "distributed>=2024.4.2,<2027"]

setup(
    name="beam-tfrecords",
    version=_version(),
    description="Declarative schema-driven TFRecord datasets with Apache Beam.",
    long_description=open(os.path.join(_HERE, "README.md")).read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.11,<3.14",
    # The bundled pipelines, their sample data and the schemas they name
    # install under this package's name (beam_tfrecords.pipelines, with
    # schemas/ as beam_tfrecords/pipelines/schemas/): no top-level package
    # that another distribution could also ship. `python -m
    # beam_tfrecords.pipelines.movie_ratings` works from the wheel (in the
    # worker image, say); `python -m pipelines.movie_ratings` from the
    # checkout.
    packages=find_packages(include=["beam_tfrecords", "beam_tfrecords.*"])
    + ["beam_tfrecords.pipelines", "beam_tfrecords.pipelines.schemas"],
    package_dir={"beam_tfrecords.pipelines": "pipelines",
                 "beam_tfrecords.pipelines.schemas": "schemas"},
    package_data={"beam_tfrecords": ["py.typed"],
                  "beam_tfrecords.read": ["view_templates/*.html",
                                          "view_templates/static/*"],
                  "beam_tfrecords.pipelines": ["data/*", "data/shapes/*/*"],
                  "beam_tfrecords.pipelines.schemas": ["*.yaml"]},
    include_package_data=True,
    install_requires=INSTALL_REQUIRES,
    extras_require={
        # Beam's DaskRunner and a dask.distributed cluster's processes
        # (`dask scheduler`, `dask worker`): --runner DaskRunner.
        "dask": DASK_REQUIRES,
        # beam_tfrecords.read.torch: PyTorch's Dataset. A large install (the
        # index's Linux wheel is the CUDA build, ~3 GB with its nvidia
        # packages): never part of the core install; `make setup-extras`.
        "torch": ["torch>=2.4,<3"],
        # TensorFlow Datasets, to read what `build --tfds` writes (the
        # build itself does not need it).
        # importlib_resources: TFDS 4.9 imports it and declares it only
        # for Python < 3.9 (tensorflow/datasets#11212); its
        # CroissantBuilder fails without it.
        "tfds": ["tensorflow-datasets>=4.9,<5", "importlib_resources>=6,<7"],
        # `build --file-format array_record`: array-record writes the
        # shards (0.8.6 needs absl-py and etils only, nothing that
        # conflicts with tfx-bsl's pins; the bytes it writes were checked
        # deterministic with 0.8.6); Grain reads them at random. Grain
        # 0.2.18 needs protobuf>=5.28.3 (the lock has 6.x).
        "array_record": ["array-record>=0.8.6,<0.9", "grain>=0.2.18,<0.3"],
        # NVIDIA DALI, whose TFRecord reader reads uncompressed shards with
        # the index the build writes beside them (a test runs it on the
        # CPU). Linux x86_64 wheels only, ~420 MB with its nvidia
        # packages: never part of the core install.
        "dali": ["nvidia-dali-cuda120>=2.4,<3"],
        # `beam-tfrecords view`: Flask (Werkzeug's server and routing,
        # Jinja2's escaping) for the local page.
        "view": ["flask>=3.1,<4"],
        # moto's server mode: a real S3 endpoint on 127.0.0.1 for the
        # s3:// tests; the Dask tests start a cluster on 127.0.0.1.
        # mypy: `make test` type-checks the library first (mypy.ini),
        # with PyYAML's type hints (types-PyYAML).
        # mkdocs: tests/e2e/test_docs.py builds the documentation site.
        # pytest-xdist: make test runs the suite on every core;
        # coverage / pytest-cov: make coverage.
        # mlcroissant: MLCommons' validator checks croissant.json
        # (tests/e2e/test_croissant.py; pure Python: rdflib, jsonpath-rw,
        # scipy).
        "test": ["pytest>=8,<10", "pytest-xdist>=3.5,<4",
                 "coverage>=7.4,<8", "pytest-cov>=5,<8",
                 "hypothesis>=6.100,<7",
                 "moto[server]>=5,<6", "mypy>=1.10,<2",
                 "types-PyYAML>=6,<7", "mkdocs>=1.6,<2",
                 "mlcroissant>=1.1.1,<1.2"] + DASK_REQUIRES,
    },
    entry_points={
        "console_scripts": ["beam-tfrecords=beam_tfrecords.cli:run"],
    },
)
