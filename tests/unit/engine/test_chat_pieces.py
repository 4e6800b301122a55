"""Prompt ids built from the chat template's pieces equal the ids of the fully rendered prompt."""

from __future__ import annotations

import pytest

from quail_engine.infer.textio import TextCodec

SPLIT = "\u2063CUT\u2063"
CASES = [("Text:\nGreat shoes.\n\n", "Question: Is it positive?\nAnswer yes or no."),
         ("  leading spaces\n", "trailing spaces  \n"), ("Text:\n", "Q"),
         ("ünïcödé — 日本語 {0}\n\n", "emoji 🙂?"), ("x", " ")]


def rendered_split(codec: TextCodec, prefix: str, suffix: str) -> tuple[list[int], list[int]]:
    """The reference: render the whole user turn once, cut at a marker, tokenize both sides."""
    head, _, tail = codec.render_chat(prefix + SPLIT + suffix).partition(SPLIT)
    return codec.encode(head), codec.encode(tail)


class TrimmingTokenizer:
    """A character tokenizer with a Gemma-style template that strips the turn's content."""

    chat_template = "trim"
    eos_token_id = None
    bos_token_id = 1

    def encode(self, text, add_special_tokens=False):
        return [ord(c) for c in text]

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True, **kw):
        return "<turn>user\n" + messages[0]["content"].strip() + "<end>\n<turn>model\n"


@pytest.mark.parametrize("prefix,suffix", CASES)
def test_trimming_template(prefix, suffix):
    codec = TextCodec(TrimmingTokenizer())
    assert codec.chat_split(prefix, suffix) == rendered_split(codec, prefix, suffix)


@pytest.mark.model
@pytest.mark.parametrize("spec", ["smollm2-135m", "gemma3-270m"])
def test_embedded_models(spec, require_embedded):
    require_embedded(spec)
    from quail_engine.infer.model_ref import ModelRef

    codec = ModelRef.resolve(spec).codec()
    for prefix, suffix in CASES:
        got = codec.chat_split(prefix, suffix)
        if codec.has_chat_template:
            assert got == rendered_split(codec, prefix, suffix)
        else:  # no template: BOS + the document, then the question + the answer cue
            assert got == (codec.bos_head + codec.encode(prefix),
                           codec.encode(suffix + "\nAnswer:"))
        assert codec.encode_batch([prefix, suffix]) == [codec.encode(prefix),
                                                         codec.encode(suffix)]
