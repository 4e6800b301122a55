"""Precomputed answers looked up by DuckDB hash instead of by text in the final statement.

The final statement evaluates every AI call once per row it reaches; for a join that is once per
candidate pair, and handing DuckDB's strings to a Python UDF copies each pair's anchor text
(a 4,000-token report x 1,100 partners: 11 s of 275,000 pairs on the H200 host). For an
operator the plan answered completely (its filters and joins: a miss is a row another conjunct
eliminated), the statement passes `hash(arg)` instead, and the UDF maps each hash back to the
scan's value. The map is built from every distinct value the operator's scans hold and is used
only when it is one-to-one there (no two values of a binding share a hash), so a lookup can
never return another row's answer: any row that survives the statement's other conditions is
a scan row.
"""

from __future__ import annotations

import inspect
import logging

import numpy as np
import pyarrow as pa

from quail_engine.sql.ir import PREDICATE_KINDS

log = logging.getLogger(__name__)
KEYED_KINDS = PREDICATE_KINDS


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


def keyed_udf(op_id: int, op, store, maps: list[dict[int, object]], report):
    """A UDF over the bindings' hashes (UBIGINT) answering from `store`; a hash no scan
    produced, or a value never asked, is a row the plan eliminated: FALSE."""
    missing = object()

    def fn(*arrays):
        if len(arrays[0]) == 0:
            return pa.array([], type=pa.bool_())
        codes = np.stack([np.asarray(a.to_numpy(zero_copy_only=False), dtype=np.uint64)
                          for a in arrays], axis=1)
        combos, inverse = np.unique(codes, axis=0, return_inverse=True)
        out, skipped = [], 0
        for combo in combos.tolist():
            values = tuple(m.get(h, missing) for m, h in zip(maps, combo))
            if None in values:  # as DuckDB answers a scalar UDF over a NULL argument
                out.append(None)
                continue
            answer = missing if missing in values else store.get(op_id, values, missing)
            if answer is missing:
                skipped += 1
                answer = False
            out.append(answer)
        if skipped:
            store.skipped[op_id] = store.skipped.get(op_id, 0) + skipped
            report.op(op_id, op.op).skipped += skipped
        return pa.array(out, type=pa.bool_()).take(pa.array(inverse.reshape(-1)))

    # duckdb counts the function's parameters: give it one per binding
    fn.__signature__ = inspect.Signature(
        [inspect.Parameter(f"h{i}", inspect.Parameter.POSITIONAL_ONLY) for i in range(len(maps))])
    return fn
