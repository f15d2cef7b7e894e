"""beam_tfrecords/sources/csv.py, on values: CSV (and other delimited text) ->
Arrow batches of string columns."""

import csv

import pytest

from beam_tfrecords import cli

from tests.helpers.cli_builds import _write_inputs, _build_cli


def test_a_csv_header_cell_too_long_is_a_clean_error(tmp_path, capsys):
  schema, _ = _write_inputs(tmp_path, [])
  (tmp_path / "wide.csv").write_text("id," + "x" * 140_000 + "\n1,2\n")
  assert cli.main(["build", "--schema", schema, "--input",
                   str(tmp_path / "wide.csv"), "--output",
                   str(tmp_path / "out")]) == cli.EXIT_INPUT
  assert capsys.readouterr().err == (
      f"error: {tmp_path / 'wide.csv'}: the header (first line, 140,003 "
      "characters) holds a column name of 140,000 characters, more than "
      "131,072; is it a CSV file with a header line? Check --csv-delimiter "
      "/ --csv-quote-char, or give --csv-no-header --csv-column-names "
      "a,b,c\n")


# --- A CSV header cell over the csv module's limit -------------------------

@pytest.fixture
def raised_csv_limit():
  """The csv module's field limit as the CSV reader leaves it after it met
  a malformed row (it is process-wide)."""
  saved = csv.field_size_limit()
  csv.field_size_limit(1 << 30)
  yield
  csv.field_size_limit(saved)


@pytest.mark.parametrize("header,line,cell", [
    ("id," + "x" * 140_000, "140,003", "140,000"),
    ('id,"a' + ",b" * 70_000, "140,005", "140,001"),
], ids=["long_name", "unbalanced_quote"])
@pytest.mark.parametrize("limit", [None, "raised"], ids=["fresh", "raised"])
def test_a_huge_csv_header_cell_is_a_clean_error(tmp_path, capsys, request,
                                                 header, line, cell, limit):
  if limit:  # the outcome must not depend on what ran before
    request.getfixturevalue("raised_csv_limit")
  assert _build_cli(tmp_path, header + "\n1,2\n") == cli.EXIT_INPUT
  assert capsys.readouterr().err == (
      f"error: {tmp_path / 'in.csv'}: the header (first line, {line} "
      f"characters) holds a column name of {cell} characters, more than "
      "131,072; is it a CSV file with a header line? Check --csv-delimiter "
      "/ --csv-quote-char, or give --csv-no-header --csv-column-names "
      "a,b,c\n")


@pytest.mark.parametrize("extra,message", [
    (["--csv-delimiter", "||"], "error: the CSV delimiter must be one "
     "character, such as ; or a tab ($'\\t' in bash); got '||'\n"),
    (["--csv-delimiter", "\\t"], "error: the CSV delimiter must be one "
     "character, such as ; or a tab ($'\\t' in bash); got '\\\\t'\n"),
    (["--csv-quote-char", "''"], "error: the CSV quote character must be "
     "one character (or empty: values are never quoted); got \"''\"\n"),
], ids=["two_char_delimiter", "backslash_t", "two_char_quote"])
def test_csv_options_the_header_cannot_be_read_with(tmp_path, capsys, extra,
                                                    message):
  assert _build_cli(tmp_path, "id\n1\n", *extra) == cli.EXIT_INPUT
  assert capsys.readouterr().err == message
