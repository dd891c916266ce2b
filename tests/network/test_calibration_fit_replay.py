"""scripts/calibrate_collectives.py replays on numba's event loop (REPLAY_ENGINE): a pass over a family's rows must
give the times the Python loop gives, to the bit, so that the fit it drives is the one the Python loop drove."""

from __future__ import annotations

import copy
import importlib.util
import os
from pathlib import Path

import numpy as np

from simulon.engine.replay import ENGINE_VARIABLE
from simulon.network.calibration import shipped_table
from simulon.validate.report import read_table

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("calibrate_collectives", ROOT / "scripts/calibrate_collectives.py")
calibrate = importlib.util.module_from_spec(spec)
spec.loader.exec_module(calibrate)


def test_the_fit_replays_on_the_compiled_loop_unless_the_environment_names_one(monkeypatch):
    monkeypatch.delenv(ENGINE_VARIABLE, raising=False)
    calibrate.use_compiled_replay()
    assert calibrate.REPLAY_ENGINE == "compiled"
    assert os.environ[ENGINE_VARIABLE] == "compiled"
    monkeypatch.setenv(ENGINE_VARIABLE, "python")
    calibrate.use_compiled_replay()
    assert os.environ[ENGINE_VARIABLE] == "python"


def test_a_pass_over_a_nic_familys_rows_on_the_compiled_loop_gives_the_python_loops_times_to_the_bit(monkeypatch):
    cases = calibrate.fit_cases(read_table(ROOT.parent / "shared/validation/collectives.csv"))
    table = copy.deepcopy(shipped_table())
    data = next(data for label, _, data in calibrate.family_fits(cases, table, lambda family: family == "efa"))
    monkeypatch.setenv(ENGINE_VARIABLE, "python")
    python = data.simulate(table)
    monkeypatch.setenv(ENGINE_VARIABLE, "compiled")
    compiled = data.simulate(table)
    assert len(python) == len(data.measured) > 0
    assert python.tobytes() == compiled.tobytes()
    assert np.all(python > 0)
