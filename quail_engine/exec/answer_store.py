"""Answers of the current query, by (operator id, binding values), read by the DuckDB UDFs."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence


def value_key(values: Sequence[object]) -> tuple:
    """Binding values as a hashable key; DuckDB and the scans hand over the same Python types.
    A tuple of strings (the usual: bindings are cast to VARCHAR) is its own key, not rebuilt
    (a join's 563,500 pairs are keyed three times or more)."""
    if type(values) is tuple:
        for v in values:
            if type(v) is not str:
                break
        else:
            return values
    return tuple(None if v is None else str(v) for v in values)


class AnswerStore:
    """`complete` ops were precomputed for every row that can reach them: a miss is a row the
    plan already eliminated (another conjunct is false), so it answers FALSE without a prompt."""

    def __init__(self) -> None:
        self._answers: dict[int, dict[tuple, object]] = {}
        self.complete: set[int] = set()
        self.skipped: dict[int, int] = {}
        # complete ops the final statement looks up by hash: op -> per binding, hash -> value
        # (exec/keyed_answers.py); None: the op runs in more than one core, looked up by text
        self.keyed: dict[int, list[dict[int, object]] | None] = {}

    def put(self, op: int, values: Sequence[object], answer: object) -> None:
        self._answers.setdefault(op, {})[value_key(values)] = answer

    def has(self, op: int, values: Sequence[object]) -> bool:
        return value_key(values) in self._answers.get(op, {})

    def get(self, op: int, values: Sequence[object], default: object = None) -> object:
        return self._answers.get(op, {}).get(value_key(values), default)

    def missing(self, op: int, values: Iterable[Sequence[object]]) -> list:
        """The distinct `values` (first-seen order) with no stored answer of `op`, and every
        value holding a NULL as often as it occurs: those are answered NULL without a prompt,
        and the report counts the rows they stand for."""
        out, seen = [], set()
        for v in values:
            if None in v:
                if not self.has(op, v):
                    out.append(v)
            elif v not in seen:
                seen.add(v)
                if not self.has(op, v):
                    out.append(v)
        return out

    def fill(self, op: int, values: Iterable[Sequence[object]],
             answer: Callable[[list], Sequence[object]]) -> None:
        """Answer what is missing, then store it: `answer(missing)` gives one answer per value
        of `self.missing(op, values)`, and is not called when nothing is missing."""
        need = self.missing(op, values)
        if need:
            for v, a in zip(need, answer(need)):
                self.put(op, v, a)

    def answers(self, op: int):
        """(binding-value key, answer) of every stored answer of `op`."""
        return self._answers.get(op, {}).items()

    def count(self, op: int) -> int:
        return len(self._answers.get(op, {}))
