"""AI aggregates over groups larger than the model's context: a map-reduce of the operator's
own instruction.

An aggregate's row is its group: one binding holds the list of the group's texts. A group
whose prompt fits the context (less the answer's tokens) is answered as one prompt. A larger
group is cut into consecutive chunks of the plan's size (plan/chunking.map_chunk_tokens: a
chunk as long as the context would spend most of its prefill on attention, which grows with its
length squared); every chunk is answered with the same instruction (map), and the group's
answers then stand in for its texts (reduce), again until each group fits one prompt. All
groups' chunks of a round go to the engine together, so a round decodes as one batch, and each
text is read once, in the first round. A text too long for a chunk on its own stays one chunk
(the executor's long-prompt policy cuts it past the context); after the first round, a group
whose answers no longer combine two to a prompt goes to its final prompt as it is (cut the same
way) rather than round after round.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

MAX_ROUNDS = 8  # a round shrinks a group by chunks of 2+ items; past this, the rest is cut


def list_slot(row: Sequence[object]) -> int | None:
    """The binding of `row` that holds the group's texts (a list or tuple), if exactly one
    does."""
    slots = [i for i, v in enumerate(row) if isinstance(v, (list, tuple))]
    return slots[0] if len(slots) == 1 else None


def chunks(items: list[object], fits: Callable[[list[object]], bool]) -> list[list[object]]:
    """Consecutive runs of `items`, each as long as `fits` allows (at least one item)."""
    out: list[list[object]] = []
    current: list[object] = []
    for item in items:
        if current and not fits(current + [item]):
            out.append(current)
            current = []
        current.append(item)
    if current:
        out.append(current)
    return out


def map_reduce(rows: Sequence[Sequence[object]], fits: Callable[[Sequence[object]], bool],
               answer: Callable[[list[tuple]], list[object]],
               fits_chunk: Callable[[Sequence[object]], bool] | None = None,
               on_round: Callable[[int], None] | None = None) -> list[object]:
    """The answers of aggregate `rows`: `fits(row)` says whether a row is one prompt within
    the context; `answer(rows)` answers rows that are (any rows, in one engine call);
    `fits_chunk(row)` whether a row is small enough for one chunk of a group that does not fit
    (the plan's map chunk, no larger than the context; None: `fits`); `on_round(n)` is told
    each map round's number of chunks (the report's)."""
    fits_chunk = fits_chunk or fits
    rows = [tuple(r) for r in rows]
    for round_ in range(MAX_ROUNDS):
        big = [i for i, r in enumerate(rows) if list_slot(r) is not None and not fits(r)]
        if not big:
            break
        parts: list[tuple] = []
        owners: list[int] = []
        for i in big:
            slot = list_slot(rows[i])
            row = rows[i]

            def with_items(items: list[object], row=row, slot=slot) -> tuple:
                return row[:slot] + (tuple(items),) + row[slot + 1:]

            pieces = chunks([v for v in row[slot] if v is not None],
                            lambda items, w=with_items: fits_chunk(w(items)))
            if round_ and len(pieces) >= len(row[slot]):
                # answers alone per chunk again: another round would not shrink the group (in
                # the first, texts alone per chunk still shrink to their answers)
                continue
            parts += [with_items(p) for p in pieces]
            owners += [i] * len(pieces)
        if not parts:
            break
        if on_round is not None:
            on_round(len(parts))
        answers = answer(parts)  # (a round's chunks of every group: one engine call)
        merged: dict[int, list[object]] = {i: [] for i in set(owners)}
        for i, value in zip(owners, answers):
            if value is not None:
                merged[i].append(value)
        for i, items in merged.items():
            slot = list_slot(rows[i])
            rows[i] = rows[i][:slot] + (tuple(items),) + rows[i][slot + 1:]
    return answer(rows)
