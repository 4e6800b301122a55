"""Model fidelity: the embedded models compute what their committed fingerprints say, whatever
transformers is installed (it converts nothing), and a conversion that computes something else
is refused before it is installed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch

from quail_engine.errors import ModelError
from quail_engine.infer import fingerprint, gguf_cache
from quail_engine.infer import gguf as quail_gguf
from quail_engine.infer.file_digest import content_digest
from quail_engine.infer.loader import load_model

EMBEDDED = ("gemma3-270m", "smollm2-135m")


@pytest.mark.model
@pytest.mark.parametrize("spec", EMBEDDED)
def test_embedded_model_matches_its_committed_fingerprint(spec, require_embedded):
    path = require_embedded(spec)
    reference = fingerprint.reference_for(content_digest(path))
    assert reference is not None, f"no committed fingerprint for {path}"
    model, tokenizer, _ = load_model(spec, "cpu", torch.float32)
    worst = fingerprint.check(model, tokenizer, reference, spec)
    assert worst <= fingerprint.FP32_TOLERANCE


def test_a_moved_norm_convention_is_refused(require_embedded):
    """Gemma stores RMSNorm weights as w and multiplies by 1 + w: a conversion that left the +1
    in (or a runtime that dropped it) must not pass."""
    path = require_embedded("gemma3-270m")
    reference = fingerprint.reference_for(content_digest(path))
    model, tokenizer, _ = load_model("gemma3-270m", "cpu", torch.float32)
    with torch.no_grad():
        model.model.norm.weight += 1.0
    with pytest.raises(ModelError, match="does not compute what its file defines.*torch"):
        fingerprint.check(model, tokenizer, reference, "gemma3-270m")


def test_another_tokenization_is_named_as_such(require_embedded):
    path = require_embedded("smollm2-135m")
    reference = json.loads(json.dumps(fingerprint.reference_for(content_digest(path))))
    reference["rows"][2]["ids"][3] += 1
    model, tokenizer, _ = load_model("smollm2-135m", "cpu", torch.float32)
    problems, _ = fingerprint.differences(fingerprint.compute(model, tokenizer,
                                                              reference["prompts"]),
                                          reference["rows"], fingerprint.FP32_TOLERANCE)
    assert problems == ["prompt 3 tokenizes differently (39 tokens, expected 39; first "
                        "difference at token 3)"]


def test_a_wrong_conversion_is_not_installed(tmp_path, monkeypatch, require_embedded):
    """Q/K rows left in llama.cpp's interleaved order: the fingerprint catches it at first use,
    the error names the libraries, and no converted folder is left to be loaded later."""
    path = require_embedded("smollm2-135m")
    monkeypatch.setenv("QUAIL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(quail_gguf, "_reverse_llama_permute", lambda w, heads: w)
    with pytest.raises(ModelError, match="conversion of SmolLM2.*gguf 0"):
        quail_gguf.convert_gguf(path)
    assert not gguf_cache.cache_dir_for(path).exists()
    assert not [p for p in gguf_cache.cache_root().iterdir() if p.is_dir()]


def test_conversion_imports_no_transformers(tmp_path, require_embedded):
    """The conversion depends on the checkpoint, gguf and tokenizers alone: transformers (whose
    GGUF tokenizer changed between releases) never enters the converting process."""
    path = require_embedded("smollm2-135m")
    script = textwrap.dedent(f"""
        import sys
        from quail_engine.infer.gguf import convert_gguf
        target = convert_gguf({str(path)!r})
        assert "transformers" not in sys.modules, "transformers imported"
        print(open(target / "config.json").read())
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**__import__("os").environ, "QUAIL_CACHE_DIR": str(tmp_path)},
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["quail_fingerprint"].startswith("matched")


def test_the_embedded_file_by_path_is_the_embedded_model(require_embedded):
    """Same bytes, same prompts: the Gemma GGUF given by its path (or its converted folder)
    gets the layouts and defaults of its embedded name."""
    from quail_engine.exec.model_quirks import pair_layout_for
    from quail_engine.exec.prompt_text import PromptText
    from quail_engine.infer.embedded import embedded_name
    from quail_engine.infer.loader import resolve_model_dir

    path = require_embedded("gemma3-270m")
    assert embedded_name(str(path)) == "gemma3-270m"
    assert embedded_name(str(resolve_model_dir("gemma3-270m"))) == "gemma3-270m"
    assert embedded_name("org/some-model") == "org/some-model"
    text, _ = PromptText.of_model(str(path))
    assert pair_layout_for(text.model_name)
