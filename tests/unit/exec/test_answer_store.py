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


def test_value_keys_are_the_same_whatever_the_container_or_types():
    """A tuple of strings is its own key; lists, NULLs and non-strings key as their strings, so
    the same binding values find the same answer however they were handed over."""
    from quail_engine.exec.answer_store import value_key

    values = ("a review", "price")
    assert value_key(values) is values
    assert value_key(["a review", "price"]) == values
    assert value_key(("a review", None)) == ("a review", None)
    assert value_key(("a review", 3)) == value_key(["a review", "3"]) == ("a review", "3")
    store = AnswerStore()
    store.put(1, ["a review", 3], True)
    assert store.get(1, ("a review", "3")) is True and store.missing(1, [("a review", "3")]) == []
