"""The engine says how much of each sequence its prefix cache holds (`cached_tokens`), so the
executor can run rows whose documents are still cached before new ones evict them."""

from conftest import WordTokenizer

from quail_engine.infer.engine import LocalEngine


def test_cached_tokens_are_the_whole_pages_a_computed_prefix_left(tiny_llama):
    _, model, config = tiny_llama
    engine = LocalEngine(model, WordTokenizer(), config, model_id="tiny-llama", token_budget=64,
                         prefix_sharing=True)
    page = engine.prefix_cache.page_size
    a, b, c = ([seed + i % 7 for i in range(2 * page + 3)] for seed in (10, 30, 50))
    handles = engine.add_prefixes([a, b])
    for h in handles:
        engine.release(h)  # released: its pages stay cached by content, evictable
    assert engine.cached_tokens([a, b, c, a[:page + 1]]) == [2 * page, 2 * page, 0, page]
    plain = LocalEngine(model, WordTokenizer(), config, model_id="tiny-llama", token_budget=64,
                        prefix_sharing=False)
    assert plain.cached_tokens([a, c]) == [0, 0]
