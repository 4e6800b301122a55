"""bench/quailb/gpu_table.gap: a query's x SoL split into host, kernel and work factors whose
product is the x SoL the table reports."""

import pytest

from bench.quailb.gpu_table import gap, markdown


def _row(**kw):
    row = {"id": "Q-1", "dialect": "snowflake", "ok": True, "run_s": 12.0, "sol_s": 2.0,
           "x_sol": 6.0, "ops": [{"gpu_pass_s": 5.0}, {"gpu_pass_s": 3.0}],
           "passes": {"plain": {"sol_s": 2.5}, "over prefix": {"sol_s": 1.5}}}
    return {**row, **kw}


def test_the_factors_are_run_over_gpu_gpu_over_pass_sol_and_pass_sol_over_minimum_sol():
    assert gap(_row()) == {"host": 1.5, "kernel": 2.0, "work": 2.0, "gpu_s": 8.0}


@pytest.mark.parametrize("missing", ["ops", "passes", "sol_s", "run_s"])
def test_a_row_without_its_parts_has_no_factors(missing):
    row = _row()
    del row[missing]
    assert gap(row) is None


def test_the_markdown_lists_the_factors_and_the_operators_gpu_seconds():
    result = {"device": "cuda", "command": "python -m bench quailb", "scale": "0.1", "model": "m",
              "precision": "fp8", "override": True, "queries": [_row(), {"id": "Q-2", "dialect": "snowflake",
                                                     "ok": False, "error": "x"}],
              "totals": {"queries": 1, "ok": 1, "run_s": 12.0, "sol_s": 2.0, "x_sol": 6.0,
                         "x_sol_geomean": 6.0, "fresh_tokens": 0, "requested_tokens": 0,
                         "min_tokens": 0}}
    md = markdown(result)
    assert "`python -m bench quailb` on cuda" in md  # the command and machine it ran on
    assert "| Q-1 | 6.00 | 1.50 | 2.00 | 2.00 |" in md
    assert "| 6.00 | - | 8 |" in md  # x SoL, ours then (no work counts) the anchor's, then the
    # operators' GPU pass seconds
