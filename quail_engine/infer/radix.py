"""Radix index over token ids, one node per page of KV: which beginnings of sequences have
their KV resident, shared by content across rows. Torch-free.

A node stands for one full page of `page_size` tokens under its parent; its `page` is an
opaque payload (a page id of the GPU arena, a page of CPU keys/values). `match` finds the
longest chain of cached pages a token sequence begins with; `insert` adds the pages of a
computed sequence. Lifetimes: a node with `refs > 0` is pinned (a planner-retained prefix, a
request in flight reads it) and is never evicted; unpinned nodes are a cache, evicted least
recently used, leaves first, when `max_pages` is exceeded or `evict` is asked to free room.
The payload is adopted through `hold` and given back through `drop` (the GPU arena's page
reference counts), so a page a live prefix still reads outlives its eviction from the index.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import Any


class RadixNode:
    __slots__ = ("key", "parent", "children", "page", "refs", "last_used", "depth")

    def __init__(self, key: tuple[int, ...], parent: RadixNode | None, page: Any, depth: int):
        self.key = key
        self.parent = parent
        self.children: dict[tuple[int, ...], RadixNode] = {}
        self.page = page
        self.refs = 0
        self.last_used = 0
        self.depth = depth  # pages from the root to this node, itself included

    @property
    def num_tokens(self) -> int:
        """Tokens from the start of the sequence to the end of this node's page."""
        return self.depth * len(self.key)


class RadixIndex:
    """`hold(page)` / `drop(page)`: called when the index adopts / lets go of a payload.
    `max_pages`: unpinned pages past this count are evicted at once (None: only on demand)."""

    def __init__(self, page_size: int, max_pages: int | None = None,
                 hold: Callable[[Any], None] | None = None,
                 drop: Callable[[Any], None] | None = None):
        if page_size < 1:
            raise ValueError(f"page_size must be >= 1, got {page_size}")
        self.page_size = page_size
        self.max_pages = max_pages
        self._hold, self._drop = hold, drop
        self._root = RadixNode((), None, None, 0)
        self._clock = 0
        self.num_pages = 0
        self.num_evicted = 0

    def _pages_of(self, tokens: Sequence[int], limit: int) -> list[tuple[int, ...]]:
        size = self.page_size
        return [tuple(tokens[i:i + size]) for i in range(0, limit // size * size, size)]

    def match(self, tokens: Sequence[int], max_tokens: int | None = None) -> list[RadixNode]:
        """The longest chain of cached pages `tokens` begins with (at most `max_tokens` tokens),
        root side first; marks them used."""
        limit = len(tokens) if max_tokens is None else min(len(tokens), max_tokens)
        self._clock += 1
        chain: list[RadixNode] = []
        node = self._root
        for key in self._pages_of(tokens, limit):
            node = node.children.get(key)
            if node is None:
                break
            node.last_used = self._clock
            chain.append(node)
        return chain

    def insert(self, tokens: Sequence[int], pages: Sequence[Any]) -> list[RadixNode]:
        """Index the first len(pages) full pages of `tokens` (payload pages[i] for page i);
        pages already indexed keep their payload (the new one is not adopted). Returns the
        chain of nodes, root side first."""
        if len(pages) * self.page_size > len(tokens):
            raise ValueError(f"{len(pages)} pages of {self.page_size} tokens for a sequence "
                             f"of {len(tokens)}")
        self._clock += 1
        chain: list[RadixNode] = []
        node = self._root
        for key, page in zip(self._pages_of(tokens, len(pages) * self.page_size), pages):
            child = node.children.get(key)
            if child is None:
                child = node.children[key] = RadixNode(key, node, page, node.depth + 1)
                if self._hold is not None:
                    self._hold(page)
                self.num_pages += 1
            child.last_used = self._clock
            chain.append(child)
            node = child
        if self.max_pages is not None and self.num_pages > self.max_pages:
            self.retain(chain)  # what was just inserted is the last thing to evict
            self.evict(self.num_pages - self.max_pages)
            self.release(chain)
        return chain

    @staticmethod
    def retain(chain: Sequence[RadixNode]) -> None:
        """Pin `chain` (one reference per node) until `release`."""
        for node in chain:
            node.refs += 1

    @staticmethod
    def release(chain: Sequence[RadixNode]) -> None:
        for node in chain:
            if node.refs <= 0:
                raise ValueError(f"release of an unpinned radix node ({node.num_tokens} tokens)")
            node.refs -= 1

    def evict(self, num_pages: int) -> int:
        """Drop up to `num_pages` unpinned pages, least recently used leaves first (a parent
        becomes a candidate once its last child is gone). Returns how many were dropped."""
        heap = [(n.last_used, id(n), n) for n in self._leaves() if n.refs == 0]
        heapq.heapify(heap)
        dropped = 0
        while heap and dropped < num_pages:
            _, _, node = heapq.heappop(heap)
            parent = node.parent
            del parent.children[node.key]
            if self._drop is not None:
                self._drop(node.page)
            self.num_pages -= 1
            dropped += 1
            if parent is not self._root and not parent.children and parent.refs == 0:
                heapq.heappush(heap, (parent.last_used, id(parent), parent))
        self.num_evicted += dropped
        return dropped

    def clear(self) -> None:
        """Drop every unpinned page."""
        self.evict(self.num_pages)

    def _leaves(self) -> list[RadixNode]:
        out, stack = [], list(self._root.children.values())
        while stack:
            node = stack.pop()
            if node.children:
                stack.extend(node.children.values())
            else:
                out.append(node)
        return out


def adjacent_shares(token_lists: Sequence[Sequence[int]], keep_last: bool
                    ) -> list[tuple[int, int]]:
    """(index into token_lists, tokens shared with the next) for each sequence but the last in
    sorted order: its longest common prefix with its successor (with `keep_last`, stopping
    before either one's last token: a request keeps one own token). `branch_points` at any
    granularity reads these, so a caller asking at two sorts the sequences once."""
    order = sorted(range(len(token_lists)), key=lambda i: token_lists[i])
    out = []
    for a, b in zip(order, order[1:]):
        x, y = token_lists[a], token_lists[b]
        limit = min(len(x), len(y)) - (1 if keep_last else 0)
        out.append((a, common_prefix_length(x, y, limit)))
    return out


def branch_points(token_lists: Sequence[Sequence[int]], page_size: int, keep_last: bool,
                  shares: list[tuple[int, int]] | None = None) -> list[tuple[int, int]]:
    """(index into token_lists, length) of each maximal page-aligned beginning shared by two or
    more sequences: adjacent sequences in sorted order share their longest common prefix,
    floored to whole pages; one that is the start of another is dropped. With `keep_last`, a
    shared beginning stops before each sequence's last token (a request keeps one own token).
    `shares`: `adjacent_shares(token_lists, keep_last)`, when the caller has them."""
    if shares is None:
        shares = adjacent_shares(token_lists, keep_last)
    found = [(a, n // page_size * page_size) for a, n in shares if n >= page_size]
    # in sorted order, two beginnings one of which starts the other are found next to each
    # other (every pair between them shares the shorter one): keep the longer
    out: list[tuple[int, int]] = []
    for i, n in found:
        if out:
            j, m = out[-1]
            k = min(n, m)
            if common_prefix_length(token_lists[i], token_lists[j], k) == k:
                if n > m:
                    out[-1] = (i, n)
                continue
        out.append((i, n))
    return out


def common_prefix_length(a: Sequence[int], b: Sequence[int], limit: int | None = None) -> int:
    n = min(len(a), len(b)) if limit is None else max(0, min(len(a), len(b), limit))
    i, step = 0, 256  # whole blocks compared as slices (C speed), then token by token
    while i + step <= n and a[i:i + step] == b[i:i + step]:
        i += step
    while i < n and a[i] == b[i]:
        i += 1
    return i


class PrefixCounter:
    """Running minimum work of the prompts seen: each distinct beginning's tokens once
    (`tokens`) and their causal attention pairs (`attention_pairs`, a token at position p
    reads p + 1 keys). A sequence's known beginning is the longer of its common prefix with the
    previous sequence in sorted order and the whole `grain`-token chunks seen before (a hash
    per chunk chain, so memory grows by one int per `grain` distinct tokens): exact within a
    sorted batch, at most `grain` - 1 tokens over per sequence across batches. `offset`: the
    sequences all follow that many tokens counted elsewhere (their positions start there)."""

    def __init__(self, grain: int = 16, offset: int = 0):
        self.grain = grain
        self.offset = offset
        self.tokens = 0
        self.attention_pairs = 0
        self._last: Sequence[int] = ()
        self._last_hashes: list[int] = []  # chain hash after each whole chunk of `_last`
        self._chunks: set[int] = set()
        self._after: dict[tuple[int, int], PrefixCounter] = {}  # add_after's, by head
        self._first: tuple | None = None  # the last new head's tails, count and end state

    def add_after(self, head: Sequence[int], tails: Sequence[Sequence[int]]) -> tuple[int, int]:
        """Count sequences `head + tail` for each of `tails` without building them: `head` (a
        join anchor's thousands of tokens, shared by every pair of a batch) is counted once
        like any sequence, each tail among the tails seen after the same head. Exact as `add`
        is, except that a head + tail is not matched against sequences added without a head."""
        head = tuple(head)  # rows come as tuples: slices of one type compare in C
        key = (len(head), hash(head))
        after = self._after.get(key)
        new = pairs = 0
        if after is None:
            new, pairs = self.add([head])
            after = self._after[key] = PrefixCounter(self.grain, self.offset + len(head))
            n, q = self._first_tails(after, tails)
        else:
            n, q = after.add(tails)
        self.tokens += n
        self.attention_pairs += q
        return new + n, pairs + q

    def _first_tails(self, after: PrefixCounter, tails: Sequence[Sequence[int]]
                     ) -> tuple[int, int]:
        """`after.add(tails)` on a head's new counter. A join's batch asks every anchor about
        the same partners, so each new head's first tails are mostly the last new head's: a
        new counter's count depends on the tails alone (its offset moves each new token's
        pairs by the same amount), so the last one's result and end state are reused."""
        rows = tuple(t if isinstance(t, tuple) else tuple(t) for t in tails)
        memo = self._first
        if memo is not None and memo[0] == rows:
            _, n, pairs0, last, hashes, chunks = memo
            after._last, after._last_hashes, after._chunks = last, hashes, set(chunks)
            q = pairs0 + n * after.offset
            after.tokens, after.attention_pairs = n, q
            return n, q
        n, q = after.add(rows)
        self._first = (rows, n, q - n * after.offset, after._last, after._last_hashes,
                       set(after._chunks))
        return n, q

    def add(self, token_lists: Sequence[Sequence[int]]) -> tuple[int, int]:
        """Count a batch; returns its new distinct tokens and their attention pairs."""
        new = pairs = 0
        chunk = self.grain
        for seq in sorted(token_lists):
            n, common = len(seq), common_prefix_length(seq, self._last)
            hashes = self._last_hashes[:common // chunk]  # shared with `_last`: seen already
            seen = len(hashes) * chunk
            h = hashes[-1] if hashes else 0
            for i in range(seen, n - chunk + 1, chunk):
                h = hash((h, tuple(seq[i:i + chunk])))
                hashes.append(h)
                if h in self._chunks:
                    seen = i + chunk
                else:
                    self._chunks.add(h)
            known = max(seen, common)
            new += n - known
            end, start = self.offset + n, self.offset + known
            pairs += (end * (end + 1) - start * (start + 1)) // 2
            self._last, self._last_hashes = seq, hashes
        self.tokens += new
        self.attention_pairs += pairs
        return new, pairs


def shared_runs(token_lists: Sequence[Sequence[int]], budget: int) -> list[list[int]]:
    """Positions of `token_lists` (sorted, as the executor sends rows) cut into consecutive runs
    whose held tokens stay within `budget`: the beginnings two or more of a run's sequences
    share (in sorted order: each sequence's common beginning with the one before it, less what
    the one before shared with its own predecessor) plus the run's last sequence (its KV is
    kept). Sequences that share nothing stay one run."""
    runs: list[list[int]] = []
    held = last_lcp = 0
    previous: Sequence[int] = ()
    for i, tokens in enumerate(token_lists):
        lcp = common_prefix_length(tokens, previous) if runs else 0
        grow = max(0, lcp - last_lcp)
        if not runs or held + grow + len(tokens) > budget:
            runs.append([])
            held = grow = lcp = 0
        runs[-1].append(i)
        held += grow
        last_lcp, previous = lcp, tokens
    return runs
