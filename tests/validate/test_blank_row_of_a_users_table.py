"""A row of a user's table whose every cell is blank (a spreadsheet's empty row, exported as commas alone) is
skipped as blank by every validator, not for the first cell each happens to read."""

from __future__ import annotations

import pytest

from simulon.validate.collectives import validate_collectives
from simulon.validate.kernels import validate_kernels
from simulon.validate.memory import validate_memory
from simulon.validate.report import shipped_table
from simulon.validate.training import validate_training


@pytest.mark.parametrize(("name", "validator"), [("training", validate_training), ("memory", validate_memory),
                                                 ("collectives", validate_collectives), ("kernels", validate_kernels)])
def test_an_empty_row_is_skipped_as_blank_by_every_validator(name, validator):
    header = shipped_table(name).read_text().splitlines()[0].split(",")
    report = validator([dict.fromkeys(header, ""), dict.fromkeys(header, " ")])
    assert [(s.index, s.reason) for s in report.skipped] == [(0, "the row is blank (every cell empty)"),
                                                             (1, "the row is blank (every cell empty)")]
