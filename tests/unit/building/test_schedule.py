"""beam_tfrecords/building/schedule.py, on values: Scheduled builds:
placeholders in input and output paths, "latest", and ranges."""

import pytest

from beam_tfrecords import InputError
from beam_tfrecords.building.schedule import (NoInputError, Schedule,
                                              resolve_patterns)



def test_placeholders_dates_ranges_and_latest(tree):
  logs = str(tree / "logs" / "{YYYY}" / "{MM}" / "{DD}" / "*.csv")
  out = str(tree / "out" / "{YYYY}{MM}{DD}")
  inputs, output, chosen = resolve_patterns([logs], out,
                                            Schedule(date="2026-11-20"))
  assert inputs == [str(tree / "logs/2026/11/20/*.csv")]
  assert output == str(tree / "out/20261120")
  assert chosen == {"date": "2026-11-20"}
  inputs, output, chosen = resolve_patterns([logs], out,
                                            Schedule(date="latest"))
  assert chosen == {"date": "2026-11-21"} and output.endswith("20261121")
  inputs, output, chosen = resolve_patterns(
      [logs], out, Schedule(date="2026-11-19..2026-11-21"))
  assert inputs == [str(tree / f"logs/2026/11/{d}/*.csv")
                    for d in (19, 20, 21)]
  assert output.endswith("20261121")  # a range: its last value
  with pytest.raises(NoInputError, match="nothing matches .*2026/11/22"):
    resolve_patterns([logs], out, Schedule(date="2026-11-22"))
  with pytest.raises(InputError, match="give --date"):
    resolve_patterns([logs], out, Schedule())
  with pytest.raises(InputError, match="give YYYY-MM-DD"):
    resolve_patterns([logs], out, Schedule(date="21.11.2026"))
  with pytest.raises(InputError, match="ends before it starts"):
    resolve_patterns([logs], out, Schedule(date="2026-11-21..2026-11-19"))


def test_spans_and_versions(tree):
  spans = str(tree / "spans" / "span-{SPAN:5}" / "v{VERSION}" / "*.csv")
  out = str(tree / "out" / "span-{SPAN}")
  inputs, output, chosen = resolve_patterns(
      [spans], out, Schedule(span="latest", version="latest"))
  assert chosen == {"span": 12, "version": 1}
  assert inputs == [str(tree / "spans/span-00012/v1/*.csv")]
  assert output == str(tree / "out/span-12")
  _, _, chosen = resolve_patterns([spans], out,
                                  Schedule(span="3", version="latest"))
  assert chosen == {"span": 3, "version": 2}  # the span's newest version
  inputs, _, chosen = resolve_patterns([spans], out,
                                       Schedule(span="7", version="4"))
  assert chosen == {"span": 7, "version": 4}
  with pytest.raises(NoInputError, match="span-00004"):
    resolve_patterns([spans], out, Schedule(span="3..7", version="1"))
  with pytest.raises(InputError, match="give --version"):
    resolve_patterns([spans], out, Schedule(span="3"))
