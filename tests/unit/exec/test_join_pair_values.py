"""A join's binding values per (bound row, partner) pair, built from each side's part once
(join_values.pair_values), equal combo_values' row-by-row reading for any placement of the
bindings among the bound aliases and the new one."""

import random

import pytest

from quail_engine.errors import ExecutionError
from quail_engine.exec.join_values import combo_values, pair_values
from quail_engine.exec.scans import ScanData
from quail_engine.sql.ir import binding_column


class _Op:
    def __init__(self, n):
        self.bindings = [None] * n


def _scans(op_id, owners, aliases):
    out = {}
    for a in aliases:
        cols = tuple(c for c, o in owners.items() if o == a) + ("other",)
        out[a] = ScanData(a, cols, [{c: f"{a}{r}{c}" for c in cols} for r in range(5)])
    return out


@pytest.mark.parametrize("seed", range(40))
def test_pair_values_equal_combo_values(seed):
    rng = random.Random(seed)
    op_id, op = 3, _Op(rng.randint(1, 4))
    bound_aliases = ["a", "b", "c"][:rng.randint(1, 3)]
    owners = {binding_column(op_id, i): rng.choice(bound_aliases + ["n"])
              for i in range(len(op.bindings))}
    scans = _scans(op_id, owners, bound_aliases + ["n"])
    bound = [[rng.randrange(5) for _ in bound_aliases] for _ in range(4)]
    pairs = [(rng.randrange(4), rng.randrange(5)) for _ in range(25)]
    expected = [combo_values(op_id, op, scans, {**dict(zip(bound_aliases, bound[d])), "n": j})
                for d, j in pairs]
    assert pair_values(op_id, op, scans, bound_aliases, bound, "n", pairs) == expected


def test_a_binding_no_relation_holds_is_an_error():
    op_id, op = 1, _Op(1)
    scans = _scans(op_id, {}, ["a", "n"])
    with pytest.raises(ExecutionError, match="binding column"):
        pair_values(op_id, op, scans, ["a"], [[0]], "n", [(0, 0)])
