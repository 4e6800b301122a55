"""The binding values an AI operator reads from the rows of a join: a joined row's, a pair's
(a bound tuple of the joined aliases with a partner row), and which aliases a prompt reads."""

from __future__ import annotations

import numpy as np

from quail_engine.errors import ExecutionError
from quail_engine.exec.call_prep import picker
from quail_engine.exec.scans import ScanData
from quail_engine.sql.ir import binding_column


def combo_values(op_id: int, op, scans: dict[str, ScanData], row: dict[str, int]) -> tuple:
    out = []
    for i in range(len(op.bindings)):
        col = binding_column(op_id, i)
        alias = next(a for a in row if col in scans[a].columns)
        out.append(scans[alias].rows[row[alias]][col])
    return tuple(out)


def bound_aliases(op_id: int, op, scans: dict[str, ScanData], aliases) -> list[str]:
    """The aliases among `aliases` whose columns `op`'s prompt reads, in binding order."""
    out: list[str] = []
    for i in range(len(op.bindings)):
        col = binding_column(op_id, i)
        alias = next((a for a in aliases if col in scans[a].columns), None)
        if alias is not None and alias not in out:
            out.append(alias)
    return out


def pair_values(op_id: int, op, scans: dict[str, ScanData], proj: list[str],
                bound: list[list[int]], alias: str, pairs: list[tuple[int, int]]) -> list[tuple]:
    """`op`'s binding values (combo_values') for each (d, j) of `pairs`: row `bound[d]` of the
    aliases `proj` joined with row j of `alias`. Each bound row's and each partner's part is
    read once, a pair's values are the two parts put together (a join's pairs number hundreds
    of thousands, built while the GPU waits for the join's first batch)."""
    sources = []  # per binding: (the part it comes from, its place there), first alias first
    mine: list[tuple[int, str]] = []
    theirs: list[str] = []
    for i in range(len(op.bindings)):
        col = binding_column(op_id, i)
        k = next((k for k, a in enumerate(proj) if col in scans[a].columns), None)
        if k is not None:
            sources.append((0, len(mine)))
            mine.append((k, col))
        elif col in scans[alias].columns:
            sources.append((1, len(theirs)))
            theirs.append(col)
        else:
            raise ExecutionError(f"no relation of the join holds binding column {col}")
    left = [tuple(scans[proj[k]].rows[r[k]][col] for k, col in mine) for r in bound]
    rows = scans[alias].rows
    right = {j: tuple(rows[j][col] for col in theirs) for j in {j for _, j in pairs}}
    order = [i if part == 0 else len(mine) + i for part, i in sources]
    if order == list(range(len(order))):  # bound bindings first: one tuple concatenation
        return [left[d] + right[j] for d, j in pairs]
    pick = picker(order)
    return [pick(left[d] + right[j]) for d, j in pairs]


def tuple_values(op_id: int, op, scans, aliases: list[str], tuples: np.ndarray) -> list[tuple]:
    """`op`'s binding values for each row of `tuples` (row indices of `aliases`)."""
    return [combo_values(op_id, op, scans, dict(zip(aliases, r))) for r in tuples.tolist()]
