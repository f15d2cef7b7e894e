"""`beam-tfrecords build` as a Dataflow Flex Template (issue 63): the
template's metadata.json, made from the build command's own flags, and
the launcher that turns the template's parameters back into that command.

    python -m beam_tfrecords.cli.flex_template --metadata > metadata.json
    # the launcher image (Dockerfile.launcher) runs this module with
    # the job's parameters: --schema=gs://... --input=gs://a/*.csv,gs://b/x.csv ...

Every flag of `build` (but those that only change what the terminal shows)
is a parameter, named as the flag with underscores (Dataflow's parameter
names have no dashes), with the flag's help, whether it is optional, and
a regex where the flag takes a choice, a number or true/false. A flag
that repeats (--input) takes a comma-separated list. Parameters that are
not ours (--region, --max_num_workers, ...) go to Beam's PipelineOptions,
as on the command line.
"""

import argparse
import json
import re
import sys
from typing import Any, Dict, List, Optional, Tuple

__all__ = ["metadata", "build_argv", "parameters"]

# Flags that only change what the launcher's terminal shows.
_NOT_PARAMETERS = {"--help", "--verbose", "--progress", "--quiet",
                   "--summary-json"}


def _build_parser() -> argparse.ArgumentParser:
  # pylint: disable=import-outside-toplevel,protected-access
  from beam_tfrecords.cli.args import parser
  sub = next(a for a in parser()._actions
             if isinstance(a, argparse._SubParsersAction))
  return sub.choices["build"]


def parameters() -> List[Tuple[str, argparse.Action]]:
  """(parameter name, the build flag's action), in the flags' order."""
  out = []
  for action in _build_parser()._actions:  # pylint: disable=protected-access
    longs = [o for o in action.option_strings if o.startswith("--")]
    if not longs or longs[0] in _NOT_PARAMETERS:
      continue
    out.append((longs[0][2:].replace("-", "_"), action))
  return out


def _is_flag(action: argparse.Action) -> bool:
  return action.nargs == 0


def _regex(action: argparse.Action) -> Optional[str]:
  if _is_flag(action):
    return "^(true|false)$"
  if action.choices:
    return "^(" + "|".join(re.escape(str(c)) for c in action.choices) + ")$"
  if action.type is int:
    return "^[0-9]+$"
  if action.type is float:
    return r"^[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$"
  return None


def metadata() -> Dict[str, Any]:
  """The Flex Template's metadata.json."""
  params = []
  for name, action in parameters():
    text = (action.help or name) % {"default": action.default} \
        if action.help and "%(" in action.help else (action.help or name)
    if isinstance(action, argparse._AppendAction):  # pylint: disable=protected-access
      text = text.replace(" (repeatable)", "") + \
          " (several: separated by commas)"
    entry: Dict[str, Any] = {
        "name": name, "label": name.replace("_", " ").capitalize(),
        "helpText": text, "isOptional": not action.required}
    regex = _regex(action)
    if regex is not None:
      entry["regexes"] = [regex]
    params.append(entry)
  return {"name": "beam-tfrecords build",
          "description": "Builds a TFRecord dataset from raw data as a "
                         "schema file says (beam-tfrecords build).",
          "parameters": params}


def build_argv(argv: List[str]) -> List[str]:
  """The template's parameters (--name=value) as `beam-tfrecords build`
  arguments; those that are not ours pass on unchanged (Beam's)."""
  ours = dict(parameters())
  out = ["build"]
  for arg in argv:
    m = re.fullmatch(r"--([A-Za-z0-9_]+)=(.*)", arg, re.S)
    action = ours.get(m.group(1)) if m else None
    if m is None or action is None:
      out.append(arg)
      continue
    flag, value = action.option_strings[-1], m.group(2)
    if _is_flag(action):
      if value.lower() == "true":
        out.append(flag)
    elif isinstance(action, argparse._AppendAction):  # pylint: disable=protected-access
      for item in value.split(","):
        out += [flag, item.strip()]
    else:
      out += [flag, value]
  return out


def main(argv: Optional[List[str]] = None) -> int:
  argv = sys.argv[1:] if argv is None else argv
  if argv == ["--metadata"]:
    sys.stdout.write(json.dumps(metadata(), indent=2) + "\n")
    return 0
  from beam_tfrecords.cli import main as cli_main  # pylint: disable=import-outside-toplevel
  return cli_main(build_argv(argv))


if __name__ == "__main__":
  sys.exit(main())
