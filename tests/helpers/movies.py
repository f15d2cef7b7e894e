"""A movie-ratings table and its schema, for builds from CSV, JSONL and
Parquet."""

# One table, written as CSV, JSONL and Parquet by the tests. Values chosen
# for the corners: 0 / 0.0 / "" are values, None is missing, negative and
# extreme int64, float32 rounding, non-ASCII text.
ROWS = [
    {"Age": 29, "Movie": ["The Shawshank Redemption", "Fight Club"],
     "Movie Ratings": [9.0, 9.7], "Suggestion": "Inception", "Price": 9.99,
     "Code": "raw-1"},
    {"Age": 0, "Movie": ["Amélie"], "Movie Ratings": [0.0],
     "Suggestion": "", "Price": None, "Code": ""},
    {"Age": -9223372036854775808, "Movie": [], "Movie Ratings": [],
     "Suggestion": "Up", "Price": 0.0, "Code": None},
    {"Age": 9223372036854775807, "Movie": ["Heat", "Alien", "Jaws"],
     "Movie Ratings": [1e-3, 3.3333333, 7.0], "Suggestion": "東京",
     "Price": 1e30, "Code": "abc"},
]

SCHEMA = {
    "name": "movies",
    "features": {
        "age": {"type": "int64", "source": "Age", "required": True},
        "movies": {"type": "string", "shape": [-1], "source": "Movie",
                   "separator": "|"},
        "ratings": {"type": "float", "shape": [-1], "source": "Movie Ratings",
                    "separator": "|"},
        "suggestion": {"type": "string", "source": "Suggestion"},
        "price": {"type": "float", "source": "Price", "default": -1.0},
        "code": {"type": "bytes", "source": "Code"},
    },
}
