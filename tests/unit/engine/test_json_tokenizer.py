"""The tokenizer read with `tokenizers` alone gives what transformers gives, on the embedded
models: ids, batch ids, decoded text, special tokens and the rendered chat template."""

from __future__ import annotations

import json

import pytest

from quail_engine.infer.json_tokenizer import JsonTokenizer

TEXTS = ["Text:\nGreat shoes.\n\n", "Question: Is it positive?\nAnswer yes or no.\nAnswer:",
         "  spaces  and\ttabs\n", "ünïcödé — 日本語 🙂", "<|im_start|>user\nhi<|im_end|>",
         "<bos><start_of_turn>user", "don't stop , ok ?", ""]


@pytest.mark.model
@pytest.mark.parametrize("spec", ["smollm2-135m", "gemma3-270m"])
def test_matches_transformers(spec, require_embedded):
    require_embedded(spec)
    from transformers import AutoTokenizer

    from quail_engine.infer.model_ref import ModelRef

    directory = ModelRef.resolve(spec).directory
    ours, theirs = JsonTokenizer.load(directory), AutoTokenizer.from_pretrained(str(directory))
    for text in TEXTS:
        ids = theirs.encode(text, add_special_tokens=False)
        assert ours.encode(text) == ids
        assert ours.decode(ids, skip_special_tokens=True) == theirs.decode(
            ids, skip_special_tokens=True)
        assert ours.decode(ids) == theirs.decode(ids)
    assert ours.encode_batch(TEXTS) == [theirs.encode(t, add_special_tokens=False)
                                        for t in TEXTS]
    assert (ours.bos_token_id, ours.eos_token_id) == (theirs.bos_token_id, theirs.eos_token_id)
    assert len(ours) == len(theirs) and ours.get_vocab() == theirs.get_vocab()
    assert bool(ours.chat_template) == bool(theirs.chat_template)
    if theirs.chat_template:
        turn = [{"role": "user", "content": "Text:\nx\n\nQuestion: y?"}]
        assert ours.apply_chat_template(turn, add_generation_prompt=True) == \
            theirs.apply_chat_template(turn, tokenize=False, add_generation_prompt=True)


def test_a_directory_without_tokenizer_json_is_left_to_transformers(tmp_path):
    assert JsonTokenizer.load(tmp_path) is None


def test_chat_template_features_transformers_templates_use(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({"<unk>": 0, "<s>": 1, "</s>": 2}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    template = ("{% for m in messages %}{% if m.role == 'system' %}{% continue %}{% endif %}"
                "{{ bos_token }}{{ m.content | tojson }}\n"
                "{% endfor %}{% if enable_thinking is false %}no-think{% endif %}"
                "{% if add_generation_prompt %}<gen>{% endif %}")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": {"content": "<s>"}, "eos_token": "</s>", "chat_template": template}))
    t = JsonTokenizer.load(tmp_path)
    assert (t.bos_token_id, t.eos_token_id) == (1, 2)
    out = t.apply_chat_template([{"role": "system", "content": "s"},
                                 {"role": "user", "content": "é"}],
                                add_generation_prompt=True, enable_thinking=False)
    assert out == '<s>"é"\nno-think<gen>'
