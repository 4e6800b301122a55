"""bench/batch_sensitivity.py counts flips and margin moves right: every prompt is answered once
per re-batching, in batches of 3-60, and a margin that moves with its batch is seen."""

from types import SimpleNamespace

from bench.batch_sensitivity import markdown, measure, rebatched


class FakeEngine:
    """Margins 0.01 apart, one per prompt it tokenizes (from -1.6), moved by `shift` times the
    size of the batch a prompt is answered in."""

    def __init__(self, shift: float):
        self.shift, self.batches, self.prompts = shift, [], 0

    def chat_split(self, question: str, text: str):
        self.prompts += 1
        return [len(question)], [self.prompts]

    def run(self, requests):
        self.batches.append(len(requests))
        return [SimpleNamespace(margin=(r.tokens[1] - 160) / 100 + self.shift * len(requests))
                for r in requests]


def test_each_prompt_is_answered_once_per_rebatching_in_batches_of_3_to_60():
    engine = FakeEngine(0.0)
    requests = [SimpleNamespace(tokens=(0, i)) for i in range(200)]
    margins = rebatched(engine, requests, seed=1)
    assert margins == [(i - 160) / 100 for i in range(200)]
    assert sum(engine.batches) == 200 and all(3 <= n <= 60 for n in engine.batches[:-1])


def test_a_batch_independent_engine_flips_nothing_and_a_dependent_one_is_counted():
    still = measure(FakeEngine(0.0), {"dtype": "float32", "prefix_sharing": True}, 2)
    assert [r["flips"] for r in still["rebatchings"]] == [0, 0]
    assert all(r["max_moved"] == 0 for r in still["rebatchings"])
    moving = measure(FakeEngine(1e-3), {"dtype": "bfloat16", "prefix_sharing": True}, 2)
    assert all(r["max_moved"] > 0 for r in moving["rebatchings"])
    # one call moves every margin by 0.32, a batch of 3-60 by 0.003-0.06: those from -0.32 to
    # -0.06 flip, 0.01 apart
    assert all(20 <= r["flips"] <= 33 for r in moving["rebatchings"])
    table = markdown({"date": "d", "command": "c", "machine": "m", "rows": [still, moving]})
    assert "| float32 | on |" in table and "| bfloat16 | on |" in table
