"""scripts/calibrate_collectives.py writes the link-model data back as shipped: a refit of one family (--family)
rewrites the whole file, so what it writes of the families it did not refit must be what was there, comments
beside a family (FAMILY_NOTES) included."""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

from simulon.network.calibration import link_model_for, shipped_table
from simulon.validate.report import read_table

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("calibrate_collectives", ROOT / "scripts/calibrate_collectives.py")
calibrate = importlib.util.module_from_spec(spec)
spec.loader.exec_module(calibrate)


def test_writing_the_shipped_table_gives_the_shipped_file_byte_for_byte(tmp_path, monkeypatch):
    out = tmp_path / "calibration.yaml"
    monkeypatch.setattr(calibrate, "DATA", out)
    calibrate.write(copy.deepcopy(shipped_table()))
    assert out.read_text() == (ROOT / "src/simulon/network/data/calibration.yaml").read_text()


def test_a_refit_of_one_family_keeps_the_notes_beside_the_others(tmp_path, monkeypatch):
    out = tmp_path / "calibration.yaml"
    monkeypatch.setattr(calibrate, "DATA", out)
    table = copy.deepcopy(shipped_table())
    table["gpu_families"]["ampere"]["p2p_hop_us"] = 22.42  # what `--family ampere` wrote at 1245850
    calibrate.write(table)
    text = out.read_text()
    for (section, family), note in calibrate.FAMILY_NOTES.items():
        start = text.index(f"\n{section}:\n")
        line = text.index(f"\n  {family}:", start)
        lines = text[line + 1:text.index("\n    match:", line)].splitlines()
        assert " ".join(one.split("# ", 1)[1] for one in lines) == note
    assert "p2p_hop_us: 22.42" in text


def test_each_family_is_fitted_on_its_own_rows_the_gpu_families_inside_a_domain_before_the_nic_families_across():
    cases = calibrate.fit_cases(read_table(ROOT.parent / "shared/validation/collectives.csv"))
    fits = list(calibrate.family_fits(cases, copy.deepcopy(shipped_table())))
    kinds = [label.split()[0] for label, _, _ in fits]
    assert kinds == sorted(kinds, key=["GPU", "NIC"].index) and {"GPU", "NIC"} <= set(kinds)
    for label, params, data in fits:
        kind, family = label.split()[0], label.split()[-1]
        assert all(calibrate.single_domain(c) == (kind == "GPU") for c in data.cases)
        assert {getattr(link_model_for(c.datacenter()), f"{kind.lower()}_family") for c in data.cases} == {family}
        # its own family's parameters, and the nccl-tests thread's pace with the family whose rows ran one thread
        # driving several GPUs (-g N; validate.collectives.issue_time)
        thread = calibrate.shows_issue(data.cases)
        assert all(p.path[1] == family or (thread and p.path[0] == "nccl_tests_thread") for p in params)
        assert thread == any(p.path[0] == "nccl_tests_thread" for p in params)
    assert sum(len(data.cases) for _, _, data in fits) == len(cases)
