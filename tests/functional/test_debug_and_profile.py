"""`dbt debug` checks the configured model without loading it (resolved, tokenizer and weight
files readable, device present) and says what is wrong when it cannot; profile fields are
checked with messages that quote the bad value."""

import pytest
from dbt.tests.util import run_dbt_and_capture

from dbt.adapters.quail.credentials import QuailCredentials

pytestmark = pytest.mark.dbt


class TestDebugReportsAMissingModel:
    @pytest.fixture(scope="class")
    def dbt_profile_target(self, tmp_path_factory):
        path = tmp_path_factory.mktemp("quail") / "test.duckdb"
        return {"type": "quail", "threads": 1, "path": str(path),
                "model": "/nonexistent/quail-model.gguf", "device": "cpu"}

    def test_debug_fails_naming_the_model(self, project):
        _, out = run_dbt_and_capture(["debug"], expect_pass=False)
        assert "/nonexistent/quail-model.gguf" in out
        assert "quail cannot use model" in out


@pytest.mark.model
class TestDebugChecksTheEmbeddedModel:
    @pytest.fixture(scope="class")
    def dbt_profile_target(self, tmp_path_factory):
        path = tmp_path_factory.mktemp("quail") / "test.duckdb"
        return {"type": "quail", "threads": 1, "path": str(path), "device": "cpu"}

    def test_debug_passes(self, project):
        _, out = run_dbt_and_capture(["debug"])
        assert "model default: gemma3, 18 layers, vocabulary 262,144, identity" in out
        assert "tokenizer.json reads (262,144 tokens" in out
        assert "tensors" in out and "intact; device cpu" in out
        assert "fingerprint matches (6 prompts in float32" in out
        assert "loaded model" not in out


@pytest.mark.model
class TestDebugNamesATruncatedWeightFile:
    """A model folder whose weights were cut short (a full disk, an interrupted copy) is
    reported by `dbt debug`, naming the file, although debug reads no weights."""

    @pytest.fixture(scope="class")
    def dbt_profile_target(self, tmp_path_factory, require_embedded):
        import numpy as np
        from safetensors.numpy import save_file

        from quail_engine.infer.model_ref import ModelRef

        require_embedded("default")
        source = ModelRef.resolve("default").directory
        root = tmp_path_factory.mktemp("quail")
        model = root / "cut-model"
        model.mkdir()
        for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
            if (source / name).exists():
                (model / name).symlink_to(source / name)
        weights = model / "model.safetensors"
        save_file({"w": np.zeros(4096, dtype=np.float32)}, str(weights))
        with weights.open("r+b") as handle:
            handle.truncate(weights.stat().st_size - 1000)
        return {"type": "quail", "threads": 1, "path": str(root / "test.duckdb"),
                "model": str(model), "device": "cpu"}

    def test_debug_fails_naming_the_file(self, project):
        _, out = run_dbt_and_capture(["debug"], expect_pass=False)
        assert "quail cannot use model" in out
        assert "model.safetensors' is truncated" in out


_BAD_FIELDS = [
    ({"dialect": "oracle"}, "'oracle'"),
    ({"device": "tpu"}, "'tpu'"),
    ({"max_batch_tokens": 0}, "max_batch_tokens"),
    ({"max_new_tokens": -5}, "max_new_tokens"),
    ({"precision": "int8"}, "'int8'"),
]


@pytest.mark.parametrize(("fields", "quoted"), _BAD_FIELDS)
def test_bad_profile_fields_are_refused_with_the_value(fields, quoted):
    with pytest.raises(Exception, match=quoted):
        QuailCredentials(database="memory", schema="main", **fields)


@pytest.mark.parametrize(("model", "expected"), [
    (None, None), ("", None), ("embedded", None), ("Embedded", None),
    ("/models/x.gguf", "/models/x.gguf")])
def test_embedded_is_the_default_model(model, expected):
    creds = QuailCredentials(database="memory", schema="main", model=model)
    assert creds.model == expected
    assert creds.type == "quail"
    assert creds.dialect == "duckdb"
