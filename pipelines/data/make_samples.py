"""Regenerates the bundled sample data (deterministic: same bytes each run).

    python pipelines/data/make_samples.py
"""

import csv
import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
MOVIES = ["The Shawshank Redemption", "Fight Club", "Inception", "Heat",
          "Alien", "Amélie", "Spirited Away", "The Matrix", "Up", "Jaws"]


def movie_ratings(rows: int = 200) -> None:
  """Seed 001's movie recommendation rows: one user per row."""
  rng = random.Random(1)
  path = os.path.join(HERE, "movie_ratings.csv")
  with open(path, "w", newline="", encoding="utf-8") as f:
    w = csv.writer(f)
    w.writerow(["Age", "Movie", "Movie Ratings", "Suggestion",
                "Suggestion Purchased", "Purchase Price"])
    w.writerow([29, "The Shawshank Redemption|Fight Club", "9.0|9.7",
                "Inception", 1.0, 9.99])
    for _ in range(rows - 1):
      seen = rng.sample(MOVIES, rng.randint(1, 4))
      bought = rng.random() < 0.4
      w.writerow([rng.randint(16, 80), "|".join(seen),
                  "|".join(f"{rng.uniform(1, 10):.1f}" for _ in seen),
                  rng.choice(MOVIES), 1.0 if bought else 0.0,
                  f"{rng.uniform(2, 20):.2f}" if bought else ""])


def structured(rows: int = 300) -> None:
  """Seed 003's structured int / bytes / float columns with a label."""
  rng = random.Random(3)
  path = os.path.join(HERE, "structured.jsonl")
  with open(path, "w", encoding="utf-8") as f:
    for i in range(rows):
      row = {"int_col": rng.randint(-1000, 1000),
             "str_col": rng.choice(["red", "green", "blue", ""]),
             "float_col": round(rng.gauss(0, 3), 4),
             "label": rng.choice(["cat", "dog"])}
      if i % 10 == 7:
        del row["int_col"]  # missing: the schema's default fills it
      f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
  movie_ratings()
  structured()
