"""The Dataflow Flex Template of `beam-tfrecords build` (issue 63): its
metadata.json has a parameter for every flag of the command (but those
that only change the terminal), with the flag's help and a regex that
its values pass; the launcher turns the parameters back into the same
command."""

import argparse
import re

import pytest

from beam_tfrecords.cli import flex_template
from beam_tfrecords.cli.args import parser


def _build_namespace(argv):
  return parser().parse_known_args(argv)


def test_every_build_flag_is_a_parameter_with_its_help():
  meta = flex_template.metadata()
  names = [p["name"] for p in meta["parameters"]]
  assert len(names) == len(set(names))
  assert all(re.fullmatch(r"[a-z][a-z0-9_]*", n) for n in names)
  build = flex_template._build_parser()  # pylint: disable=protected-access
  flags = {o[2:].replace("-", "_")
           for a in build._actions for o in a.option_strings  # pylint: disable=protected-access
           if o.startswith("--") and o == [x for x in a.option_strings
                                          if x.startswith("--")][0]}
  assert flags - set(names) == {"help", "verbose", "progress", "quiet",
                                "summary_json"}
  by_name = {p["name"]: p for p in meta["parameters"]}
  assert by_name["schema"]["isOptional"] is False
  assert by_name["num_shards"]["isOptional"] is True
  assert by_name["input"]["helpText"].endswith(
      "(several: separated by commas)")
  assert by_name["sink"]["regexes"] == ["^(deterministic|beam)$"]


def test_the_regexes_take_what_the_command_takes():
  for name, action in flex_template.parameters():
    regexes = [p for p in flex_template.metadata()["parameters"]
               if p["name"] == name][0].get("regexes", [])
    for regex in regexes:
      for choice in action.choices or ():
        assert re.fullmatch(regex, str(choice)), (name, choice)
      if action.nargs == 0:
        assert re.fullmatch(regex, "true") and re.fullmatch(regex, "false")
        assert not re.fullmatch(regex, "yes")
      if action.type is int and not action.choices:
        assert re.fullmatch(regex, "16") and not re.fullmatch(regex, "x")


@pytest.mark.parametrize("params, command", [
    (["--schema=gs://b/s.yaml", "--input=gs://b/a/*.csv, gs://b/c.csv",
      "--output=gs://b/out", "--num_shards=4", "--no_statistics=true",
      "--overwrite=false", "--gzip_level=6"],
     ["build", "--schema", "gs://b/s.yaml", "--input", "gs://b/a/*.csv",
      "--input", "gs://b/c.csv", "--output", "gs://b/out", "--num-shards",
      "4", "--no-statistics", "--gzip-level", "6"]),
    (["--schema=s.yaml", "--input=x.csv", "--output=o",
      "--runner=DataflowRunner", "--max_num_workers=20"],
     ["build", "--schema", "s.yaml", "--input", "x.csv", "--output", "o",
      "--runner=DataflowRunner", "--max_num_workers=20"]),
])
def test_the_launcher_makes_the_command_back(params, command):
  argv = flex_template.build_argv(params)
  assert argv == command
  assert _build_namespace(argv) == _build_namespace(command)
  ns, beam = _build_namespace(argv)
  assert isinstance(ns, argparse.Namespace) and ns.command == "build"
