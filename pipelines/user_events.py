"""Event log rows grouped by user, in time order -> tf.train.SequenceExample.

    python -m pipelines.user_events [--input events.csv]
        [--output out/user_events] [any Beam pipeline option]

Each user becomes one sequence (context: user_id, country, length, first and
last timestamp; per step: timestamp, event, item, dwell). Users with more
than 100 events keep their latest 100; the rest are counted in dataset.json
and listed in errors/.
"""

from ._common import run_build


def run(argv=None):
  return run_build(__doc__.splitlines()[0], "user_events.yaml",
                   "user_events.csv", "out/user_events", argv)


if __name__ == "__main__":
  run()
