"""Every function of every dialect (the golden matrix of test_sql_functions.py), transpiled to
every other dialect: the output reads back there as the same IR operators, or transpile refuses
with a reason an emitter gave (never SQL the target cannot read, never a generic failure)."""

import importlib.util
import logging
from pathlib import Path

import pytest

from quail_engine.errors import UnsupportedError
from quail_engine.sql import parse, transpile
from quail_engine.sql.ir import OpKind

DIALECTS = ("snowflake", "bigquery", "databricks", "duckdb")


def _matrix() -> list[tuple[str, str]]:
    path = Path(__file__).with_name("test_sql_functions.py")
    spec = importlib.util.spec_from_file_location("_matrix_cases", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [(dialect, call) for dialect, call, _ in module.CASES]


PAIRS = [(d, call, target) for d, call in _matrix() for target in DIALECTS if target != d]


@pytest.mark.parametrize(("dialect", "call", "target"), PAIRS,
                         ids=[f"{d}-{i // 3}->{t}" for i, (d, _, t) in enumerate(PAIRS)])
def test_transpiled_function_reads_back_in_the_target(dialect, call, target, caplog):
    sql = f"SELECT {call} FROM t"
    original = parse(sql, dialect, runnable=False)
    with caplog.at_level(logging.ERROR):
        try:
            out = transpile(sql, dialect, target)
        except UnsupportedError as exc:
            message = str(exc)
            assert f"cannot be written in {target}" in message
            assert "read back" not in message and "reads back" not in message, message
            return
    again = parse(out, target, runnable=False)
    expected = [op.op for op in original.ai_ops]
    if target == "bigquery" and "output_schema =>" in out:
        # a generation under a response format is AI.GENERATE(..., output_schema => ...) there,
        # which reads as the extraction it is
        expected = [OpKind.AI_EXTRACT if k == OpKind.AI_GENERATE else k for k in expected]
    assert [op.op for op in again.ai_ops] == expected, out


def test_output_that_does_not_read_back_is_refused(monkeypatch):
    """The last check before SQL reaches the user: unreadable output is a refusal."""
    import sys

    monkeypatch.setattr(sys.modules["quail_engine.sql.transpiler"], "emit_op", lambda op, args, write: "ai_classify(((")
    with pytest.raises(UnsupportedError, match="AI_FILTER cannot be written in databricks: "
                                               "the rewritten SQL does not read back"):
        transpile("SELECT AI_FILTER(review) FROM t", "snowflake", "databricks")
