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
  """Movie recommendation rows: one user per row, lists of movies and
  their ratings."""
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
  """Structured int / bytes / float columns with a label."""
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


def tokens_labels(rows: int = 300) -> None:
  """Token sequences with one label per token, as JSON lists.

  The first three are fixed: [1, 2, 3] / [0, 1, 0], [4, 5, 1] /
  [1, 0, 0], [1, 2] / [1, 1].
  """
  rng = random.Random(0)
  path = os.path.join(HERE, "tokens_labels.jsonl")
  seqs = [([1, 2, 3], [0, 1, 0]), ([4, 5, 1], [1, 0, 0]), ([1, 2], [1, 1])]
  while len(seqs) < rows:
    n = rng.randint(1, 12)
    seqs.append(([rng.randint(1, 99) for _ in range(n)],
                 [rng.randint(0, 1) for _ in range(n)]))
  with open(path, "w", encoding="utf-8") as f:
    for tokens, labels in seqs:
      f.write(json.dumps({"tokens": tokens, "labels": labels}) + "\n")


EVENTS = ["view", "click", "add_to_cart", "purchase"]
COUNTRIES = ["DE", "FR", "JP", "US", "BR"]


def user_events(users: int = 40) -> None:
  """An event log: one row per event, rows of all users shuffled together.

  User 13 is a heavy user with 400 events (more than the schema's
  max_length), the rest have 1-30. Some events share a timestamp.
  """
  rng = random.Random(4)
  rows = []
  for user in range(1, users + 1):
    country = rng.choice(COUNTRIES)
    n = 400 if user == 13 else rng.randint(1, 30)
    ts = 1_700_000_000 + rng.randint(0, 10_000)
    for _ in range(n):
      ts += rng.choice([0, 1, 5, 60, 3600])
      event = rng.choice(EVENTS)
      rows.append([user, ts, event, rng.randint(1000, 1099),
                   f"{rng.expovariate(1 / 20):.2f}", country])
  rng.shuffle(rows)
  path = os.path.join(HERE, "user_events.csv")
  with open(path, "w", newline="", encoding="utf-8") as f:
    w = csv.writer(f)
    w.writerow(["user_id", "timestamp", "event", "item_id", "dwell_seconds",
                "country"])
    w.writerows(rows)


def ratings(rows: int = 1000) -> None:
  """MovieLens-style ratings (user, movie title, rating, Unix timestamp)
  for the TensorFlow Transform pipeline; about 1 in 10 rows is held out
  for evaluation (the `split` column)."""
  rng = random.Random(8)
  weights = [len(m) % 7 + 1 for m in MOVIES]
  path = os.path.join(HERE, "ratings.csv")
  with open(path, "w", newline="", encoding="utf-8") as f:
    w = csv.writer(f)
    w.writerow(["user_id", "title", "rating", "timestamp", "split"])
    for i in range(rows):
      w.writerow([rng.randint(1, 60), rng.choices(MOVIES, weights)[0],
                  rng.choice([0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5]),
                  1_600_000_000 + rng.randrange(100_000_000),
                  "eval" if rng.random() < 0.1 else "train"])


SHAPES = ("circle", "square", "triangle")


def shapes(per_class: int = 8, size: int = 32) -> None:
  """Small drawn images in one folder per class (PNG and
  JPEG, colour and grayscale; made here, so under this repository's
  licence), and a table of file names with integer labels that names one
  file that does not exist.
  """
  from PIL import Image, ImageDraw  # only needed to regenerate
  rng = random.Random(2)
  root = os.path.join(HERE, "shapes")
  rows = []
  for label, shape in enumerate(SHAPES):
    os.makedirs(os.path.join(root, shape), exist_ok=True)
    for i in range(per_class):
      gray = i % 4 == 3
      mode = "L" if gray else "RGB"
      background = rng.randint(0, 255) if gray else tuple(
          rng.randint(0, 255) for _ in range(3))
      ink = rng.randint(0, 255) if gray else tuple(
          rng.randint(0, 255) for _ in range(3))
      img = Image.new(mode, (size, size), background)
      draw = ImageDraw.Draw(img)
      a, b = rng.randint(2, 10), rng.randint(22, 30)
      if shape == "circle":
        draw.ellipse((a, a, b, b), fill=ink)
      elif shape == "square":
        draw.rectangle((a, a, b, b), fill=ink)
      else:
        draw.polygon(((a, b), (b, b), ((a + b) // 2, a)), fill=ink)
      ext = "jpg" if i % 2 else "png"
      name = f"{shape}/{i:02d}.{ext}"
      img.save(os.path.join(root, name), "JPEG" if ext == "jpg" else "PNG",
               **({"quality": 90} if ext == "jpg" else {}))
      rows.append((f"shapes/{name}", label))
  rows.insert(5, ("shapes/circle/lost.png", 0))  # a file that does not exist
  with open(os.path.join(HERE, "image_labels.csv"), "w", newline="",
            encoding="utf-8") as f:
    w = csv.writer(f)
    w.writerow(["name", "label"])
    w.writerows(rows)


def detections(per_class: int = 8, size: int = 32) -> None:
  """Object-detection style annotations of the shapes() images: per image
  a list of objects, each a box (corners as fractions of the image) and a
  label. The boxes are the ones shapes() drew: the same random draws,
  replayed without drawing."""
  rng = random.Random(2)
  rows = []
  for label, shape in enumerate(SHAPES):
    for i in range(per_class):
      gray = i % 4 == 3
      for _ in range(2 if gray else 6):  # background and ink
        rng.randint(0, 255)
      a, b = rng.randint(2, 10), rng.randint(22, 30)
      box = {"xmin": a / size, "ymin": a / size, "xmax": b / size,
             "ymax": b / size}
      rows.append({"image": f"shapes/{shape}/{i:02d}."
                            f"{'jpg' if i % 2 else 'png'}",
                   "size": {"width": size, "height": size},
                   "objects": [{"bbox": box, "label": shape,
                                "label_id": label}]})
  rows[3]["objects"] = []  # an image without objects
  with open(os.path.join(HERE, "detections.jsonl"), "w",
            encoding="utf-8") as f:
    f.writelines(json.dumps(r) + "\n" for r in rows)


if __name__ == "__main__":
  movie_ratings()
  structured()
  tokens_labels()
  user_events()
  shapes()
  detections()
  ratings()
