import json

import pytest

from quail_engine.sql.ir import AiOp, Binding, GenParams, JoinInfo, Label, Options
from quail_testing.equalities import equality

FILTER = AiOp(
    op="ai_filter",
    template="Is this review positive? {0}",
    bindings=(Binding(0, "r.review", alias="r", column="review"),),
    output_type="BOOLEAN",
    context="where",
    origin="AI_FILTER(PROMPT('Is this review positive? {0}', r.review))",
)


@pytest.mark.parametrize(
    "op, expected",
    [
        (FILTER, 'ai_filter(template="Is this review positive? {0}"; bindings=[{0}=r.review]) -> BOOLEAN'),
        (
            AiOp(op="ai_classify", template="{0}", bindings=(Binding(0, "t.x", "t", "x"),),
                 labels=(Label("pos"), Label("neg", "a negative text")),
                 wrapper="snowflake:labels[0]"),
            'ai_classify(template="{0}"; bindings=[{0}=t.x]; labels=["pos", "neg":"a negative text"]; '
            'wrapper="snowflake:labels[0]") -> VARCHAR',
        ),
        (
            AiOp(op="ai_join", template="Does {0} fit {1}?",
                 bindings=(Binding(0, "a.cv", "a", "cv"), Binding(1, "b.jd", "b", "jd")),
                 join=JoinInfo("inner", ("a",), ("b",), (equality("a.k = b.k"),)),
                 options=Options(selectivity=0.1, anchor="a"), output_type="BOOLEAN"),
            'ai_join(template="Does {0} fit {1}?"; bindings=[{0}=a.cv, {1}=b.jd]; '
            "join=inner(a x b; a.k = b.k); options={selectivity=0.1, anchor='a'}) -> BOOLEAN",
        ),
        (
            AiOp(op="ai_generate", template="Summarize: {0}", bindings=(Binding(0, "d"),),
                 options=Options(model="llama3.1-8b", gen=GenParams(max_tokens=20, stop=("\n",)))),
            'ai_generate(template="Summarize: {0}"; bindings=[{0}=d]; '
            "options={model='llama3.1-8b', max_tokens=20, stop=('\\n',)}) -> VARCHAR",
        ),
    ],
)
def test_text_form_is_stable(op, expected):
    assert op.to_text() == expected


def test_origin_does_not_change_equality_but_is_kept_in_json():
    other = AiOp(**{**FILTER.__dict__, "origin": "AI.IF(('Is this review positive? ', r.review))"})
    assert other == FILTER
    data = FILTER.to_json()
    assert data["origin"].startswith("AI_FILTER(")
    assert data["bindings"] == [{"index": 0, "sql": "r.review", "alias": "r", "column": "review",
                                 "type": "VARCHAR", "modality": "text"}]
    json.dumps(data)


def test_aliases_in_first_use_order():
    op = AiOp(op="ai_join", template="{0} {1} {2}",
              bindings=(Binding(0, "b.y", "b", "y"), Binding(1, "a.x", "a", "x"),
                        Binding(2, "b.z", "b", "z")))
    assert op.aliases == ("b", "a")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"op": "ai_magic", "template": "x"}, "unknown IR operator 'ai_magic'"),
        ({"op": "ai_filter", "template": "x", "options": Options(on_error="ignore")},
         "on_error must be one of"),
    ],
)
def test_invalid_nodes_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        AiOp(**kwargs)
