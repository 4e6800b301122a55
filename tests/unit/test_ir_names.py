"""The names the IR makes for other layers: op kinds, scan columns, placeholder functions."""

import json

import pytest

from quail_engine.sql.ir import (
    AiOp,
    OpKind,
    binding_column,
    key_column,
    parse_binding_column,
    placeholder_name,
)


@pytest.mark.parametrize("op_id,index,column", [(0, 0, "b_0_0"), (3, 1, "b_3_1"),
                                                 (12, 10, "b_12_10")])
def test_binding_column_round_trip(op_id, index, column):
    assert binding_column(op_id, index) == column
    assert parse_binding_column(column) == (op_id, index)


@pytest.mark.parametrize("column", ["k_0", "_row", "b_1", "b_x_1", "b_1_2_3", "review"])
def test_other_columns_are_not_bindings(column):
    assert parse_binding_column(column) is None


def test_key_and_placeholder_names():
    assert (key_column(2), placeholder_name(7)) == ("k_2", "quail_ai_7")


@pytest.mark.parametrize("kind", list(OpKind))
def test_op_kind_reads_and_prints_as_its_sql_name(kind):
    op = AiOp(kind.value, "x {0}")
    assert op.op == kind.value and op.op is kind
    assert op.to_text().startswith(f"{kind.value}(")
    assert json.dumps(op.to_json()["op"]) == f'"{kind.value}"'
