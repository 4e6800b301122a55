"""Precomputed answers looked up by DuckDB hash instead of by text in the final statement.

The final statement evaluates every AI call once per row it reaches; for a join that is once per
candidate pair, and handing DuckDB's strings to a Python UDF copies each pair's anchor text
(a long document times every partner). For an
operator the plan answered completely (its filters and joins: a miss is a row another conjunct
eliminated), the statement passes `hash(arg)` instead, and the UDF maps each hash back to the
scan's value. The map is built from every distinct value the operator's scans hold and is used
only when it is one-to-one there (no two values of a binding share a hash), so a lookup can
never return another row's answer: any row that survives the statement's other conditions is
a scan row.
"""

from __future__ import annotations

import logging

import numpy as np
import pyarrow as pa

log = logging.getLogger(__name__)


def slot_maps(con, columns: list[list[object]]) -> list[dict[int, object]] | None:
    """For each binding, DuckDB's hash of each distinct value (NULL included) -> the value
    (None if two values of one binding share a hash)."""
    maps = []
    for values in columns:
        distinct = list(dict.fromkeys([None, *values]))
        table = pa.table({"v": pa.array(distinct, type=pa.string())})
        hashes = con.from_arrow(table).project("hash(v)").fetchnumpy()
        column = next(iter(hashes.values()))
        m = dict(zip(np.asarray(column, dtype=np.uint64).tolist(), distinct))
        if len(m) != len(distinct):
            return None
        maps.append(m)
    return maps


def keyed_answer(op_id: int, op, store, maps: list[dict[int, object]], report):
    """Answers of `op` for rows of its bindings' hashes (the `answer` of udfs.ai_function),
    from `store`; a hash no scan produced, or a value never asked, is a row the plan
    eliminated: FALSE. A NULL argument answers NULL, as DuckDB answers a scalar UDF."""
    missing = object()

    def answer(rows: list[tuple]) -> list[object]:
        out, skipped = [], 0
        for combo in rows:
            values = tuple(m.get(h, missing) for m, h in zip(maps, combo))
            if None in values:
                out.append(None)
                continue
            got = missing if missing in values else store.get(op_id, values, missing)
            if got is missing:
                skipped += 1
                got = op.unasked_answer
            out.append(got)
        if skipped:
            store.skipped[op_id] = store.skipped.get(op_id, 0) + skipped
            report.op(op_id, op.op).skipped += skipped
        return out

    return answer
