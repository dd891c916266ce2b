"""A user's own table with blank lines (a spreadsheet's empty rows, or lines left between blocks of a hand-written
file): the skipped rows are named by the row a spreadsheet shows them on, blank lines counted, while `--json`'s index
stays the row's place among the data rows (csv.DictReader, like pandas, skips blank lines)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from simulon.cli.app import app
from simulon.config.errors import ConfigError
from simulon.validate.report import read_table

HEADER = "hardware,kernel,dtype,M,N,K,batch,kernel_tflops\n"
GOOD = "H100 SXM,GEMM,bf16,8192,8192,8192,,650\n"
BAD = "H100 SXM,GEMM,bf16,4k,4096,4096,1,600\n"


def test_each_row_knows_the_spreadsheet_row_it_is_on_blank_lines_counted(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text(HEADER + GOOD + "\n\n" + BAD + '"A100, 80 GB",GEMM,bf16,1,1,1,1,"a\n\nb"\n' + GOOD)
    assert [row.number for row in read_table(path)] == [2, 5, 6, 7]  # a cell's own blank line is no row


def test_a_skipped_row_after_a_blank_line_is_named_by_its_own_row_and_json_by_its_data_row_index(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text(HEADER + GOOD + "\n" + BAD)  # BAD is the file's (and a spreadsheet's) row 4
    text = CliRunner().invoke(app, ["validate", "kernels", "--csv", str(path)])
    assert text.exit_code == 0, text.output
    assert "skipped 1 (row 4): M: '4k' is not a number" in text.output
    assert "not counting blank lines" in text.output
    as_json = CliRunner().invoke(app, ["validate", "kernels", "--csv", str(path), "--json"])
    assert json.loads(as_json.output)["skipped"] == [{"index": 1, "reason": "M: '4k' is not a number"}]


def test_a_table_without_blank_lines_numbers_its_rows_from_two_as_before(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text(HEADER + GOOD + BAD)
    text = CliRunner().invoke(app, ["validate", "kernels", "--csv", str(path)]).output
    assert "skipped 1 (row 3): M: '4k' is not a number" in text and "blank lines" not in text


def test_a_table_none_of_whose_rows_compares_names_them_by_their_own_rows(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text(HEADER + "\n\n" + BAD)
    refused = CliRunner().invoke(app, ["validate", "kernels", "--csv", str(path)])
    assert isinstance(refused.exception, ConfigError)  # exit 2 under simulon's main
    assert "(row 4): M: '4k' is not a number" in str(refused.exception)
