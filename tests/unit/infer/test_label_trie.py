"""The label trie runs each distinct token prefix of a label set's spellings once: its chains,
levels and token count per prompt, against the sum of the spellings' lengths."""

from __future__ import annotations

import pytest

from quail_engine.infer.label_trie import label_trie

A, B, C, D, E, F, G = range(10, 17)


@pytest.mark.parametrize("spellings, chains, levels, old", [
    # no shared prefix: one chain per spelling (its tokens but the last), as before
    ([[(A, B, C), (D, E)], [(F, G)]], [(A, B), (D,), (F,)], 1, 4),
    # single-token spellings run nothing
    ([[(A,), (B,)], [(C,)]], [], 0, 0),
    # two labels sharing a first token: it runs once, each continues over its KV
    ([[(A, B, C)], [(A, D, E)]], [(A,), (B,), (D,)], 2, 4),
    # a label continued by a longer one ("sports" / "sports news ..."): one chain
    ([[(A, B)], [(A, B, C, D)]], [(A, B, C)], 1, 4),
    # the same spelling under two labels is scored once
    ([[(A, B, C)], [(A, B, C)]], [(A, B)], 1, 4),
    # branching twice: a, then ab / ac, then abd / abe
    ([[(A, B, D, F)], [(A, B, E, G)], [(A, C, D)]],
     [(A,), (B,), (C,), (D,), (E,)], 3, 8),
])
def test_chains_cover_each_prefix_once(spellings, chains, levels, old):
    trie = label_trie(spellings)
    assert [c.tokens for c in trie.chains] == chains
    assert trie.num_levels == levels
    assert trie.num_tokens == len({sp[:j] for lab in spellings for sp in lab
                                   for j in range(1, len(sp))})
    assert sum(len(sp) - 1 for lab in spellings for sp in lab) == old


def test_reads_follow_each_spelling_through_its_chains():
    spellings = [[(A, B, D, F)], [(A, B, E, G), (A, C)], [(A, C, D)]]
    trie = label_trie(spellings)
    for lab in spellings:
        for sp, reads in zip(lab, trie.reads[spellings.index(lab)], strict=True):
            assert len(reads) == len(sp) - 1
            for j, (chain, row, column) in enumerate(reads, start=1):
                c = trie.chains[chain]
                assert c.tokens[row] == sp[j - 1]          # the node ends with sp[:j]'s token
                assert trie.vocab[column] == sp[j]         # and scores the next one
    # a chain continues the KV of the chain ending where it branches off
    for c in trie.chains:
        if c.parent is not None:
            parent = trie.chains[c.parent]
            assert parent.stores_kv and parent.level == c.level - 1
    assert [c.stores_kv for c in trie.chains] == [True, True, False, False, False]
