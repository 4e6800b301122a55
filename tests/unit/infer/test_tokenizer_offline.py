"""A model folder's tokenizer comes from the folder alone. One with no vocabulary file is an
error naming the folder (transformers would make a one-token tokenizer of a folder holding only
config.json: every text one token, answers silently meaningless), and where transformers reads
the folder it is asked for the folder's own files only (a machine without a network otherwise
waits minutes on retries before failing)."""

from __future__ import annotations

import json

import pytest

from quail_engine.errors import ModelError
from quail_engine.infer.tokenizer import load_tokenizer


def test_a_folder_without_a_vocabulary_is_refused_naming_it(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen3"}))
    (tmp_path / "tokenizer_config.json").write_text("{}")
    with pytest.raises(ModelError, match=f"no tokenizer in '{tmp_path}'"):
        load_tokenizer(tmp_path)


def test_transformers_reads_the_folder_s_own_files_only(tmp_path, monkeypatch):
    transformers = pytest.importorskip("transformers")
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen3"}))
    (tmp_path / "vocab.json").write_text("{}")  # not a tokenizer.json: transformers reads it
    asked = []

    def from_pretrained(name, *args, **kwargs):
        asked.append((name, kwargs))
        raise OSError("no merges.txt")

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", from_pretrained)
    with pytest.raises(ModelError, match="no merges.txt"):
        load_tokenizer(tmp_path)
    assert asked == [(str(tmp_path), {"local_files_only": True})]


def test_a_random_model_folder_needs_a_tokenizer(tmp_path):
    from quail_testing.model_dir import write_model_dir

    with pytest.raises(FileNotFoundError, match="no tokenizer.json"):
        write_model_dir(tmp_path / "model", tmp_path / "empty", True, "cpu")
    assert not (tmp_path / "model").exists()
