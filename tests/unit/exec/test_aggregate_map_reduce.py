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
