# The two commands of the README:
#   make demo   sets up a virtualenv and builds the bundled sample dataset
#   make test   sets up the same virtualenv, type-checks the library (mypy.ini)
#               and runs the test suite
# make docs regenerates docs/cli.md and builds the documentation into site/.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup demo test bench docs clean

$(VENV)/.installed: setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

setup: $(VENV)/.installed

demo: setup
	$(BIN)/beam-tfrecords build --schema schemas/movie_ratings.yaml \
	  --input pipelines/data/movie_ratings.csv --output out/movie_ratings --overwrite
	$(BIN)/beam-tfrecords inspect out/movie_ratings --records 2

test: setup
	$(BIN)/mypy
	$(BIN)/python -m pytest -q tests

bench: setup
	$(BIN)/python benchmarks/run.py

docs: setup
	$(BIN)/python docs/gen_cli.py docs/cli.md
	$(BIN)/mkdocs build --strict -d site

clean:
	rm -rf $(VENV) out build site *.egg-info
