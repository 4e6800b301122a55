"""Decode prompts share their beginnings (infer/engine.py `_decode_prefill`): on the embedded
writer (real weights, CPU, float32), a batch of prompts that begin alike (the chat template's
system text and the instruction before each row's document) decodes the same texts, grammar
answers included, with the beginning computed once instead of once per row."""

from __future__ import annotations

import json

import pytest
from test_grammar_decode import OBJECT, TEXTS

from quail_engine.infer.api import GenerateReadout, Grammar, Request

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def engines(require_embedded):
    require_embedded("smollm2-135m")
    import torch

    from quail_engine.infer.engine import LocalEngine

    return {share: LocalEngine.load("smollm2-135m", dtype=torch.float32, prefix_sharing=share)
            for share in (False, True)}


def _requests(engine) -> list[Request]:
    obj = Grammar(json.dumps(OBJECT))
    requests = []
    for t in TEXTS:
        head, tail = engine.chat_split(f"Summarize this text in one sentence: {t}", "")
        requests.append(Request(tuple(head + tail), GenerateReadout(max_tokens=12)))
        head, tail = engine.chat_split(f"Extract a JSON object with keys name and city: {t}", "")
        requests.append(Request(tuple(head + tail), GenerateReadout(max_tokens=40, grammar=obj)))
    return requests


def test_shared_beginnings_decode_the_same_texts_computed_once(engines):
    got = {}
    for share, engine in engines.items():
        stats = engine.stats
        fresh0, hits0, decoded0 = stats.fresh_tokens, stats.kv_hit_tokens, stats.decode_tokens
        requests = _requests(engine)
        got[share] = ([a.value for a in engine.run(requests)], stats.fresh_tokens - fresh0,
                      stats.kv_hit_tokens - hits0, stats.decode_tokens - decoded0)
    (plain, plain_fresh, plain_hits, plain_decoded) = got[False]
    (shared, shared_fresh, shared_hits, shared_decoded) = got[True]
    assert shared == plain
    assert all(json.loads(v).keys() == {"name", "city"} for v in shared[1::2])
    assert shared_decoded == plain_decoded and plain_hits == 0
    # each prompt reads the system text and the instruction it shares with others from the
    # cache; the beginnings themselves are computed once (fresh tokens, counted once)
    page = engines[True].prefix_cache.page_size
    prompts = [r.tokens for r in _requests(engines[True])]
    common = min(_common(prompts[0], p) for p in prompts[1:]) // page * page
    assert common >= page
    assert shared_hits >= len(prompts) * common
    # (a constrained prompt's prefill also computes the tokens its grammar forces first)
    engine = engines[True]
    forced = len(engine._grammar_masks().forced_start(Grammar(json.dumps(OBJECT)),
                                                      engine._logits_width()))
    assert plain_fresh == sum(map(len, prompts)) + forced * len(TEXTS)
    assert plain_fresh - shared_fresh >= (len(prompts) - 1) * common

def _common(a, b) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


# 44 tokens of SmolLM2's template and this instruction: two CPU pages of 16 and 12 more
LONG_INSTRUCTION = ("Summarize this text in one short sentence for a busy reader, keeping every "
                    "name and number: ")


def test_a_beginning_shared_past_whole_pages_is_read_to_the_token(engines):
    """The rows share 44 tokens, 12 past their last whole page: each reads all 44 from the
    batch's tail (prefix_cache.MIN_TAIL) and decodes what it decodes alone."""
    from quail_engine.infer.prefix_cache import MIN_TAIL

    got = {}
    for share, engine in engines.items():
        requests = [Request(tuple(sum(engine.chat_split(LONG_INSTRUCTION + t, ""), [])),
                            GenerateReadout(max_tokens=12)) for t in TEXTS]
        hits0, fresh0 = engine.stats.kv_hit_tokens, engine.stats.fresh_tokens
        got[share] = ([a.value for a in engine.run(requests)],
                      engine.stats.kv_hit_tokens - hits0, engine.stats.fresh_tokens - fresh0)
    prompts = [r.tokens for r in requests]
    page = engines[True].prefix_cache.page_size
    common = min(_common(prompts[0], p) for p in prompts[1:])
    assert common - common // page * page >= MIN_TAIL  # (the case this test is about)
    assert got[True][0] == got[False][0]
    assert got[True][1] == len(prompts) * common
    assert got[False][2] - got[True][2] >= (len(prompts) - 1) * common
