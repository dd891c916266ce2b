"""An empty JSON input (nothing, or only white space) is refused naming the file and saying it is empty, with what
it should hold: a HuggingFace config.json, a result `plot` draws, a result `diff` compares. Python's parser said
'Expecting value: line 1 column 1 (char 0)'."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulon.analysis.diff import read_result
from simulon.config.errors import ConfigError
from simulon.config.hf import HFConfigError, read_config
from simulon.plots.inputs import read_json

BLANK = st.text(alphabet=" \t\r\n", max_size=8)


def written(folder: str, text: str, name: str) -> Path:
    path = Path(folder) / name
    path.write_text(text, encoding="utf-8")
    return path


@settings(max_examples=20, deadline=None)
@given(BLANK)
def test_an_empty_json_input_is_refused_naming_the_file_as_empty(text):
    with tempfile.TemporaryDirectory() as folder:
        readers = ((lambda p: read_json(p, "simulon collective SCENARIO --json"), ConfigError,
                    "empty: expected the JSON that `simulon collective SCENARIO --json` writes"),
                   (read_result, ConfigError, "empty: expected the JSON that `simulon simulate --json` writes"),
                   (read_config, HFConfigError, "is empty: expected a model's config.json"))
        for read, error, message in readers:
            path = written(folder, text, "config.json")
            with pytest.raises(error) as caught:
                read(path)
            assert str(path) in str(caught.value) and message in str(caught.value)
            assert "Expecting value" not in str(caught.value)
