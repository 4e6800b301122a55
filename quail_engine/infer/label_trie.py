"""`LabelTrie`: which tokens teacher-forced label scoring runs, each distinct token prefix once.

A label's log-likelihood needs, after the prompt, the logits at every proper prefix of each of
its spellings (the prompt's last position gives the first token's). Spellings that begin alike
(several labels starting "poor ...", a label continued by a longer one) share those prefixes, so
the tokens to run are the nodes of a token trie over the spellings that have children: no
token is run twice for one prompt.

The nodes are cut into chains (a radix tree's edges): a node with one child continues its
parent's chain, the children of a node with several start chains of their own over the KV of
the chain that ends there. A chain is one sequence job; chains of the same level run in one
call, so a label set costs one call per level of branching, not one per token. With no shared
prefix each chain is one spelling's tokens but its last, as scoring them spelling by spelling
ran them. Imports no torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

Spellings = Sequence[Sequence[Sequence[int]]]  # per label, its spellings' token ids


@dataclass(frozen=True)
class Chain:
    """Tokens run as one job: over the prompt's KV (`parent` None) or over the KV of chain
    `parent` (which ends where this one branches off); `stores_kv` when chains continue it."""

    tokens: tuple[int, ...]
    parent: int | None
    level: int
    stores_kv: bool


@dataclass(frozen=True)
class LabelTrie:
    """`chains` in level order; `vocab`: every token a spelling continues with after its first,
    sorted (one vocabulary for all the chains' reads); `reads[label][spelling]`: per token after
    the first, the (chain, row, vocab column) whose log-probability scores it."""

    chains: tuple[Chain, ...]
    vocab: tuple[int, ...]
    reads: tuple[tuple[tuple[tuple[int, int, int], ...], ...], ...]

    @property
    def num_levels(self) -> int:
        return 1 + max((c.level for c in self.chains), default=-1)

    @property
    def num_tokens(self) -> int:
        """Tokens run per prompt: the trie's nodes that have children."""
        return sum(len(c.tokens) for c in self.chains)

    def level(self, level: int) -> list[int]:
        return [i for i, c in enumerate(self.chains) if c.level == level]


def label_trie(spellings: Spellings) -> LabelTrie:
    """The trie of `spellings` (per label, its token spellings), chains in the order the
    spellings first reach them."""
    spelled = [tuple(map(tuple, label)) for label in spellings]
    inner = {sp[:j] for label in spelled for sp in label for j in range(1, len(sp))}
    fanout: dict[tuple[int, ...], int] = {}
    for node in inner:
        fanout[node[:-1]] = fanout.get(node[:-1], 0) + 1
    where: dict[tuple[int, ...], tuple[int, int]] = {}  # node -> (chain, row)
    tokens: list[list[int]] = []
    parents: list[int | None] = []
    for label in spelled:
        for sp in label:
            for j in range(1, len(sp)):
                node = sp[:j]
                if node in where:
                    continue
                up = node[:-1]
                if up and fanout[up] == 1:  # the parent's only child: its chain goes on
                    chain = where[up][0]
                else:
                    chain = len(tokens)
                    tokens.append([])
                    parents.append(where[up][0] if up else None)
                where[node] = (chain, len(tokens[chain]))
                tokens[chain].append(node[-1])
    levels: list[int] = []
    for parent in parents:  # a parent is created before its children
        levels.append(0 if parent is None else levels[parent] + 1)
    order = sorted(range(len(tokens)), key=lambda i: (levels[i], i))
    new = {old: i for i, old in enumerate(order)}
    stores = {p for p in parents if p is not None}
    chains = tuple(Chain(tuple(tokens[i]), None if parents[i] is None else new[parents[i]],
                         levels[i], i in stores) for i in order)
    vocab = tuple(sorted({t for label in spelled for sp in label for t in sp[1:]}))
    column = {t: c for c, t in enumerate(vocab)}
    reads = tuple(tuple(tuple((new[where[sp[:j]][0]], where[sp[:j]][1], column[sp[j]])
                              for j in range(1, len(sp)))
                        for sp in label)
                  for label in spelled)
    return LabelTrie(chains, vocab, reads)
