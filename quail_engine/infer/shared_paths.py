"""Which beginnings of rows over one prefix to compute once (no torch).

A join asks every partner over its anchor's KV: the rows under one anchor are the partners'
texts followed by the question's end, and partners often begin alike (terms that start with the
same word). Those common beginnings are computed once as a path prefix over the anchor (the
anchor's pages shared, the path's tokens stored after them), and each row then runs only the
tokens after its path. A path costs its own tokens (it is computed from the anchor, not from a
shorter path, so all paths of a call take one pass) and `cost` more: the page it holds and the
sequence it adds to a pass. Choosing which trie nodes to compute is a small dynamic program
over the compressed token trie of the rows: a node is computed where the tokens it saves its
rows (those no deeper computed node serves) exceed what it costs.

A row keeps at least its last token (the one its answer is read from), so a path never covers a
whole row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import accumulate

from quail_engine.infer.radix import common_prefix_length

MAX_NESTING = 48


@dataclass
class _Node:
    depth: int                      # tokens of the path from the prefix to this node
    lb: int                         # its rows: positions lb..rb of the sorted order
    rb: int = -1
    children: list[_Node] = field(default_factory=list)
    own: int = 0                    # rows no child holds, and their tokens
    own_tokens: int = 0


def _trie(keys: list[tuple[int, ...]]) -> _Node | None:
    """The compressed trie of the sorted `keys` as nested lcp intervals (each node: the rows
    whose keys share its first `depth` tokens, more than any larger range of them shares);
    None where nodes nest deeper than MAX_NESTING (rows that extend one another, whose choice
    the recursion below would not bound)."""
    n = len(keys)
    lcp = [common_prefix_length(keys[i - 1], keys[i]) for i in range(1, n)] + [0]
    root = _Node(0, 0, n - 1)
    stack = [root]
    deepest = 1
    for i in range(1, n + 1):
        shared, lb, last = lcp[i - 1], i - 1, None
        while shared < stack[-1].depth:
            last = stack.pop()
            last.rb = i - 1
            lb = last.lb
            if shared <= stack[-1].depth:
                stack[-1].children.append(last)
                last = None
        if shared > stack[-1].depth:
            stack.append(_Node(shared, lb, children=[last] if last is not None else []))
            deepest = max(deepest, len(stack))
    return root if deepest <= MAX_NESTING else None


def _count(node: _Node, upto: list[int]) -> None:
    """Fill each node's `own` and `own_tokens` (its rows that no child holds), `upto` the
    running sum of the rows' lengths in sorted order."""
    node.own = node.rb - node.lb + 1
    node.own_tokens = upto[node.rb + 1] - upto[node.lb]
    for child in node.children:
        _count(child, upto)
        node.own -= child.rb - child.lb + 1
        node.own_tokens -= upto[child.rb + 1] - upto[child.lb]


def _best(node: _Node, above: int, cost: int,
          memo: dict[tuple[int, int], tuple[int, list[_Node]]]) -> tuple[int, list[_Node]]:
    """(tokens the rows under `node` run, the nodes computed) when the deepest computed
    path above them has `above` tokens."""
    key = (id(node), above)
    if key in memo:
        return memo[key]
    options = []
    for start, chosen in ((above, []), (node.depth, [node])):
        if chosen and node.depth <= above:
            continue
        total = node.own_tokens - node.own * start
        if chosen:
            total += node.depth + cost
        picked = list(chosen)
        for child in node.children:
            t, c = _best(child, start, cost, memo)
            total += t
            picked += c
        options.append((total, picked))
    memo[key] = min(options, key=lambda o: o[0])
    return memo[key]


@dataclass(frozen=True)
class Paths:
    paths: list[tuple[int, int]]   # (a row whose tokens begin with the path, path length)
    start: list[int]               # per row: index into paths, or -1 (runs all its tokens)
    saved: int                     # tokens the rows no longer run, less the paths' own


def shared_paths(rows: Sequence[Sequence[int]], cost: int, max_paths: int) -> Paths:
    """The paths worth computing once for `rows` (token lists over one prefix), at most
    `max_paths` of them (those over the most rows kept)."""
    n = len(rows)
    none = Paths([], [-1] * n, 0)
    if n < 2 or max_paths < 1:
        return none
    order = sorted(range(n), key=lambda r: rows[r][:-1])  # (a row keeps its last token)
    keys = [tuple(rows[r][:-1]) for r in order]
    lengths = [len(rows[r]) for r in order]  # by sorted position
    root = _trie(keys)
    if root is None:
        return none
    _count(root, [0, *accumulate(lengths)])
    total, nodes = _best(root, 0, cost, {})
    nodes = [nd for nd in nodes if nd.depth > 0]
    if not nodes or total >= sum(lengths):
        return none
    if len(nodes) > max_paths:
        nodes = sorted(nodes, key=lambda nd: -(nd.rb - nd.lb + 1) * nd.depth)[:max_paths]
    start = [-1] * n
    paths: list[tuple[int, int]] = []
    for p, nd in enumerate(sorted(nodes, key=lambda nd: nd.depth)):  # deeper ones win
        paths.append((order[nd.lb], nd.depth))
        for pos in range(nd.lb, nd.rb + 1):
            start[order[pos]] = p
    ran = sum(len(rows[r]) - (paths[start[r]][1] if start[r] >= 0 else 0) for r in range(n))
    saved = sum(lengths) - ran - sum(d + cost for _, d in paths)
    return Paths(paths, start, saved) if saved > 0 else none  # (a cut set can save nothing)
