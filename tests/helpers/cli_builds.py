"""Small builds through the command line (an id and a score per row), and
the text of an int64 value's refusal."""

from beam_tfrecords import cli


SCHEMA_YAML = "name: t\nfeatures:\n  id: {type: int64}\n  score: {type: float}\n"


def _write_inputs(tmp_path, rows, schema=SCHEMA_YAML):
  (tmp_path / "s.yaml").write_text(schema)
  (tmp_path / "in.csv").write_text("id,score\n" + "".join(
      f"{i},{s}\n" for i, s in rows))
  return str(tmp_path / "s.yaml"), str(tmp_path / "in.csv")


def _build(tmp_path, *extra, rows=((1, 0.5), (2, 0.7))):
  schema, data = _write_inputs(tmp_path, rows)
  return cli.main(["build", "--schema", schema, "--input", data, "--output",
                   str(tmp_path / "out"), *extra])


def _bad_rows(n_good, n_bad):
  return [(i, 0.5) for i in range(n_good)] + [(1000 + i, "x")
                                              for i in range(n_bad)]


NOT_WHOLE = ("is not a whole number; int64 features take integers (use "
             "type: float for fractions)")


def _build_cli(tmp_path, data, *extra):
  (tmp_path / "s.yaml").write_text("name: t\nfeatures:\n  id: {type: int64}\n")
  (tmp_path / "in.csv").write_text(data)
  return cli.main(["build", "--schema", str(tmp_path / "s.yaml"), "--input",
                   str(tmp_path / "in.csv"), "--output",
                   str(tmp_path / "out"), *extra])
