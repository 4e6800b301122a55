"""Which cores sample their predicates' selectivities (plan/selectivity.is_sampled): only those
whose plan a selectivity can change."""

import pytest

from quail_engine.plan.selectivity import is_sampled


@pytest.mark.parametrize("kinds,expected", [
    (("ai_filter",), False),                       # one predicate: one plan at any rate
    (("ai_filter", "ai_classify"), False),         # a projection is no choice
    (("ai_filter", "ai_filter"), True),            # the filters' order
    (("ai_filter", "ai_join"), True),              # what the join sees of the filtered side
    (("ai_join", "ai_join", "ai_generate"), True),  # the joins' order
    ((), False),
])
def test_a_core_samples_only_where_selectivities_choose_its_plan(kinds, expected):
    assert is_sampled(kinds) is expected
