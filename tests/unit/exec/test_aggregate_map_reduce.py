"""Map-reduce of AI aggregates over groups larger than the context (exec/aggregate.py), on a
fake engine: which prompts each round asks and what the final prompts hold."""

from quail_engine.exec.aggregate import chunks, list_slot, map_reduce


def test_a_group_too_large_is_summarized_in_chunks_then_from_the_chunks_answers():
    asked = []

    def answer(rows):
        asked.append([list(r[0]) for r in rows])
        return [f"sum({'+'.join(r[0])})" for r in rows]

    def fits(row):  # at most three texts per prompt
        return len(row[0]) <= 3

    group = [f"t{i}" for i in range(10)]
    small = ["a", "b"]
    out = map_reduce([(group,), (small,)], fits, answer)
    # round 1: only the large group, in consecutive chunks, every text read once
    assert asked[0] == [group[0:3], group[3:6], group[6:9], group[9:10]]
    # round 2: its four chunk answers are still too many; round 3 (final): every group fits
    assert len(asked[1]) == 2 and asked[1][0] == ["sum(t0+t1+t2)", "sum(t3+t4+t5)",
                                                  "sum(t6+t7+t8)"]
    assert len(asked) == 3 and asked[2][1] == small and len(asked[2][0]) == 2
    assert out[1] == "sum(a+b)" and out[0].startswith("sum(sum(sum(t0+t1+t2)")


def test_groups_that_fit_go_straight_to_the_engine_and_nulls_are_dropped():
    asked = []

    def answer(rows):
        asked.append(rows)
        return [None if tuple(r[0]) == ("x",) else "ok" for r in rows]

    assert map_reduce([(["a", None],), ("plain",)], lambda r: True, answer) == ["ok", "ok"]
    assert asked == [[(["a", None],), ("plain",)]]  # (rows that fit go as they came)
    # a chunk answered NULL leaves its group; a text too long alone is one chunk and the
    # round that cannot shrink the group stops (the long-prompt policy then cuts it)
    asked.clear()
    out = map_reduce([(["x", "y", "z"],)], lambda r: len(r[0]) <= 1, answer)
    assert asked[0] == [(("x",),), (("y",),), (("z",),)]
    assert out == ["ok"] and asked[-1] == [(("ok", "ok"),)]


def test_chunks_and_the_list_slot():
    assert chunks([1, 2, 3, 4, 5], lambda items: sum(items) <= 5) == [[1, 2], [3], [4], [5]]
    assert chunks([9], lambda items: False) == [[9]]  # one item always makes a chunk
    assert list_slot(("instruction", ["a"])) == 1 and list_slot(("a", "b")) is None


def test_a_group_past_the_context_is_cut_at_the_plans_chunk_then_reduced_whole():
    asked = []

    def answer(rows):
        asked.append([list(r[0]) for r in rows])
        return [f"s{len(asked)}.{i}" for i in range(len(rows))]

    group = [f"t{i}" for i in range(12)]
    # the context holds eight texts, the plan's map chunk two: the chunks are the plan's, and
    # the six answers, which fit the context, go to the final prompt at once
    rounds = []
    out = map_reduce([(group,)], lambda r: len(r[0]) <= 8, answer,
                     fits_chunk=lambda r: len(r[0]) <= 2, on_round=rounds.append)
    assert asked[0] == [group[i:i + 2] for i in range(0, 12, 2)]
    assert rounds == [6]  # one map round of six chunks; the final prompt is not a round
    assert len(asked) == 2 and asked[1] == [[f"s1.{i}" for i in range(6)]]
    assert out == ["s2.0"]


def test_the_map_chunk_is_where_the_modelled_cost_is_least_within_the_context():
    from quail_engine.plan.chunking import map_chunk_tokens
    from quail_engine.plan.cost import ModelSpec

    qwen3_4b = ModelSpec("qwen3-4b", 36, 2560, 32, 8, 128, 9728, 151936)
    layers = qwen3_4b.num_layers
    pair = 4 * qwen3_4b.num_heads * qwen3_4b.head_dim * layers
    lin = 2 * (qwen3_4b.attn_params + qwen3_4b.mlp_params) * layers

    def per_token(c, answer=48, overhead=40):  # prefill FLOPs per document token
        return pair * c / 2 + lin * (2 * answer + overhead) / c

    chunk = map_chunk_tokens(qwen3_4b, 48, 40, 40000)
    assert 1000 < chunk < 4000  # far below the 40k context
    assert per_token(chunk) < min(per_token(chunk * 0.8), per_token(chunk * 1.25))
    assert per_token(chunk) < 0.5 * per_token(40000)
    # longer answers: larger chunks (fewer of them to decode and read again)
    assert map_chunk_tokens(qwen3_4b, 256, 40, 40000) > chunk
    # never past the context, never without a model's shape; at least 4x what it adds back
    assert map_chunk_tokens(qwen3_4b, 48, 40, 512) == 512
    assert map_chunk_tokens(None, 48, 40, 40000) == 40000
    tiny = ModelSpec("tiny", 1, 8, 1, 1, 8, 8, 10)
    assert map_chunk_tokens(tiny, 48, 40, 40000) == 4 * (48 + 40)
