"""AnswerStore.fill: the one "answer what is missing, then store" every caller uses."""

from quail_engine.exec.answer_store import AnswerStore


def test_fill_asks_each_missing_value_once_and_never_for_nothing():
    store, asked = AnswerStore(), []

    def answer(need):
        asked.append(list(need))
        return [f"a{v[0]}" for v in need]

    store.put(0, ("x",), "kept")
    store.fill(0, [("x",), ("y",), ("y",), ("z",)], answer)
    store.fill(0, [("y",), ("z",)], answer)
    assert asked == [[("y",), ("z",)]]
    assert [store.get(0, v) for v in (("x",), ("y",), ("z",))] == ["kept", "ay", "az"]
