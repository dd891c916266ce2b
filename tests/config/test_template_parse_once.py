"""Shipped templates are parsed once a process (config.templates.template_document): resolving a table's hardware
reads dozens of templates a row, and PyYAML's parser took the collectives calibration's setup (reading the
validation table into cases) about 50 of its 52 CPU seconds."""

from __future__ import annotations

import yaml

from simulon.config import errors, templates
from simulon.config.resolve import resolve_hardware
from simulon.config.templates import find_template, template_document, template_names, template_text


def test_a_template_document_is_its_text_parsed_and_a_fresh_copy_each_time():
    for kind in ("gpu", "datacenter"):
        for stem in template_names(kind):
            doc = template_document(kind, stem)
            assert doc == errors.parse_yaml(template_text(kind, stem))
            if isinstance(doc, dict):
                doc["name"] = "changed"
                doc.setdefault("node", {})["gpus_per_node"] = -1
                assert template_document(kind, stem) == yaml.load(template_text(kind, stem),
                                                                  Loader=errors.ScenarioLoader)


def test_a_found_template_changed_by_its_caller_leaves_the_next_one_whole():
    first = find_template("datacenter", "dgx-h100")
    first["node"]["gpus_per_node"] = 3
    assert find_template("datacenter", "dgx-h100")["node"]["gpus_per_node"] == 8


def test_resolving_hardware_a_second_time_parses_no_shipped_template(monkeypatch):
    resolve_hardware("8x H100 SXM", "")
    parsed = []

    def counting(text):
        parsed.append(text)
        return errors.parse_yaml(text)

    monkeypatch.setattr(templates, "parse_yaml", counting)
    again = resolve_hardware("8x H100 SXM", "")
    assert parsed == []
    assert again == resolve_hardware("8x H100 SXM", "")
