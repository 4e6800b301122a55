"""The token store: each distinct text tokenized once, persisted per tokenizer, crash-safe."""

from __future__ import annotations

import pytest

from quail_engine.exec.prompt_text import PromptText
from quail_engine.exec.token_store import TokenStore


class CountingEncoder:
    def __init__(self):
        self.calls: list[list[str]] = []

    def __call__(self, texts):
        self.calls.append(list(texts))
        return [[len(w) for w in t.split()] for t in texts]


def test_each_distinct_text_is_encoded_once_in_one_batch():
    enc = CountingEncoder()
    store = TokenStore(enc)
    texts = ["a bb ccc", "dd e", "a bb ccc", "dd e", "ffff"]
    assert store.ids(texts) == [[1, 2, 3], [2, 1], [1, 2, 3], [2, 1], [4]]
    assert enc.calls == [["a bb ccc", "dd e", "ffff"]]
    assert store.ids(["ffff", "dd e"]) == [[4], [2, 1]]
    assert len(enc.calls) == 1


def test_a_second_run_reads_the_segments_and_encodes_nothing(tmp_path):
    first = TokenStore(CountingEncoder(), tmp_path)
    first.ids(["one two", "three"])
    first.flush()
    assert [p.name.startswith("seg-") for p in tmp_path.iterdir()] == [True]
    enc = CountingEncoder()
    second = TokenStore(enc, tmp_path)
    assert second.ids(["three", "one two"]) == [[5], [3, 3]]
    assert enc.calls == [] and second.num_disk_hits == 2


def test_an_unreadable_segment_is_ignored_and_no_partial_file_is_left(tmp_path):
    store = TokenStore(CountingEncoder(), tmp_path)
    store.ids(["kept"])
    store.flush()
    (tmp_path / "seg-broken.arrow").write_bytes(b"ARROW1\x00\x00 not really")
    enc = CountingEncoder()
    again = TokenStore(enc, tmp_path)
    assert again.ids(["kept", "new"]) == [[4], [3]]
    assert enc.calls == [["new"]]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_many_segments_are_merged_at_open(tmp_path, monkeypatch):
    import quail_engine.exec.token_store as ts

    for i in range(5):
        s = TokenStore(CountingEncoder(), tmp_path)
        s.ids([f"text {i}"])
        s.flush()
    monkeypatch.setattr(ts, "MAX_SEGMENTS", 3)
    enc = CountingEncoder()
    merged = TokenStore(enc, tmp_path)
    assert len(list(tmp_path.glob("seg-*.arrow"))) == 1
    assert merged.ids([f"text {i}" for i in range(5)]) == [[4, 1]] * 5 and enc.calls == []


def test_a_read_only_cache_only_costs_tokenizing_again(tmp_path):
    target = tmp_path / "file-not-dir"
    target.write_text("")
    store = TokenStore(CountingEncoder(), target / "tokens")
    assert store.ids(["x y"]) == [[1, 1]]
    store.flush()  # cannot create the folder: a warning, no exception


class FakeCodec:
    """The engine-side protocol of a test fake: chat_split and tokenize."""

    def __init__(self):
        self.encoded = 0

    def tokenize(self, texts):
        self.encoded += len(texts)
        return [[ord(c) for c in t] for t in texts]

    def chat_split(self, prefix, suffix):
        return self.tokenize(["<" + prefix])[0], self.tokenize([suffix + ">"])[0]


def test_prompt_text_namespaces_by_identity_and_loads_lazily(tmp_path):
    loads = []

    def factory():
        loads.append(1)
        return FakeCodec()

    a = PromptText(factory, lambda: "model-a", tmp_path)
    assert loads == []  # nothing asked yet: no tokenizer loaded
    assert a.split("doc", "q?") == ([ord(c) for c in "<doc"], [ord(c) for c in "q?>"])
    a.flush()
    warm = PromptText(factory, "model-a", tmp_path)
    assert warm.split("doc", "q?") == a.split("doc", "q?") and len(loads) == 1
    other = PromptText(factory, "model-b", tmp_path)
    other.heads(["doc"])
    assert len(loads) == 2  # another model's ids are never read from model-a's store


@pytest.mark.parametrize("texts", [["x"] * 3, []])
def test_empty_and_repeated_batches(texts):
    enc = CountingEncoder()
    assert TokenStore(enc).ids(texts) == [[1]] * len(texts)
    assert len(enc.calls) == (1 if texts else 0)
