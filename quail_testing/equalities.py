"""Hand-built conjuncts for tests that build cores and plans without the SQL front end: trees,
as the front end gives them, from a conjunct written in the test."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp

from quail_engine.sql.ir import Equality


def equality(text: str) -> Equality:
    """`a.x = b.y` as the front end's `Equality`: its sides' relations read off the tree."""
    node = sqlglot.parse_one(text, read="duckdb")
    assert isinstance(node, exp.EQ), text
    left, right = (side.find(exp.Column).table for side in (node.this, node.expression))
    return Equality(left, right, node)


@dataclass(frozen=True)
class Conjunct:
    """A relation's own conjunct (`r.stars > 3`) as a plan `Predicate`: the tree, its text."""

    node: Any

    @property
    def sql(self) -> str:
        return self.node.sql(dialect="duckdb")


def conjunct(text: str) -> Conjunct:
    return Conjunct(sqlglot.parse_one(text, read="duckdb"))
