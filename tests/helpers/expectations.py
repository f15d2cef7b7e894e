"""What tests/e2e/test_expectations.py shares with the tests split from it
(tests/unit, tests/cluster)."""

import gzip
import json
import pathlib


DATA = pathlib.Path(__file__).resolve().parents[1] / "data" / "flights"
DAY1, DAY2 = str(DATA / "2013-01-01.jsonl.gz"), str(DATA / "2013-01-02.jsonl.gz")
CARRIERS = ["9E", "AA", "AS", "B6", "DL", "EV", "F9", "FL", "HA", "MQ",
            "OO", "UA", "US", "VX", "WN", "YV"]
SCHEMA = {
    "name": "flights",
    "features": {
        "dep_delay": {"type": "float", "expect": {
            "presence": 0.95, "min": -60, "max": 1500, "drift": 0.2}},
        "arr_delay": "float",
        "carrier": {"type": "string", "required": True, "expect": {
            "values": CARRIERS, "drift": 0.2}},
        "origin": {"type": "string", "expect": {"values": ["EWR", "JFK",
                                                          "LGA"]}},
        "dest": "string",
        "flight": "int64",
        "tailnum": "string",
        "distance": {"type": "int64", "expect": {"min": 1, "max": 5000}},
        "time_hour": "string",
    },
    "splits": {"hash": ["carrier", "flight"],
               "weights": {"train": 0.8, "eval": 0.2}},
    "expect": {"records": {"min": 500}, "records_change": 0.5},
}


def _rows(path):
  with gzip.open(path, "rt") as f:
    return [json.loads(line) for line in f]
