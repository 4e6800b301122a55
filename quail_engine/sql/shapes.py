"""Vendor result packagings, re-created around the canonical value in DuckDB SQL.

Where a user did not strip the vendor wrapper (a bare `AI_CLASSIFY(...)` returns
`{"labels": [...]}`), the statement must still see the vendor's shape: `{v}` is the canonical
value (the `quail_ai_<id>(...)` call). Written in DuckDB SQL; sqlglot carries them to other
dialects when transpiling.
"""

from __future__ import annotations

from functools import lru_cache

from sqlglot import exp, parse_one

# the error a vendor reports beside a NULL answer: quail's answers are NULL where the input was
# NULL or the model did not complete an answer of the requested type within its tokens
NO_ANSWER = ("CASE WHEN {v} IS NULL THEN 'no answer: a NULL input, or the model did not complete "
             "an answer of the requested type within max_tokens' END")

SHAPES = {  # a NULL answer (a NULL or empty input) is a NULL object, not {"labels": [null]}
    "labels_object": "CASE WHEN {v} IS NOT NULL THEN json_object('labels', json_array({v})) END",
    "labels_object_multi": "CASE WHEN {v} IS NOT NULL THEN json_object('labels', to_json({v})) END",
    "label_object": "CASE WHEN {v} IS NOT NULL THEN json_object('label', {v}) END",
    "sentiment_object": ("CASE WHEN {v} IS NOT NULL THEN json_object('categories', json_array("
                         "json_object('name', 'overall', 'sentiment', {v}))) END"),
    "extract_object": f"json_object('response', {{v}}, 'error', {NO_ANSWER})",
    "value_error_object": f"json_object('value', {{v}}, 'error', {NO_ANSWER})",
    "answer_array": "CASE WHEN {v} IS NOT NULL THEN json_array({v}) END",
    "result_struct": ("struct_pack(result := {v}, full_response := CAST(NULL AS JSON), "
                      f"status := coalesce({NO_ANSWER}, ''))"),
    "list1": "CASE WHEN {v} IS NOT NULL THEN [{v}] END",
    "response_object": ("CASE WHEN {v} IS NOT NULL THEN json_object('response', json_array({v}), "
                        "'error_message', NULL) END"),
    "response_object_multi": ("CASE WHEN {v} IS NOT NULL THEN json_object('response', to_json({v}), "
                              "'error_message', NULL) END"),
    "response_extract": f"json_object('response', {{v}}, 'error_message', {NO_ANSWER})",
    "result_error_struct": f"struct_pack(result := {{v}}, errorMessage := {NO_ANSWER})",
    "negated": "NOT {v}",
}

# Snowflake's AI_COMPLETE(..., show_details => TRUE) / COMPLETE with options: the call itself
# answers the whole object (`model` and `usage` are facts of the run: exec/udfs.py), marked by
# this task argument; another warehouse's text call is packaged as DETAILS_REBUILT, where the
# model and token counts are not known
# (https://docs.snowflake.com/en/sql-reference/functions/complete-snowflake-cortex)
SHOW_DETAILS = ("show_details", "true")
DETAILS_REBUILT = ("json_object('choices', json_array(json_object('messages', {v})), "
                   "'created', quail_created(), 'model', NULL, 'usage', NULL)")
# the statement's time in epoch seconds, in the warehouses DETAILS_REBUILT is written for
CREATED = {"bigquery": "UNIX_SECONDS(CURRENT_TIMESTAMP())", "databricks": "UNIX_TIMESTAMP()"}

PORTABLE = ("negated",)  # plain SQL in every dialect: no vendor shape to warn about

_SLOT = "__quail_shape_value__"


def shows_details(op) -> bool:
    """Whether `op` (an ir.AiOp) answers Snowflake's show_details object, not its text."""
    return SHOW_DETAILS in op.task_args


def slot() -> exp.Column:
    """The value's place in a shape built as a tree (what `{v}` is in a template); `wrap`
    fills it. A shape made of a call's own names (its fields) is built as a tree, so no text
    assembled from them is parsed."""
    return exp.column(_SLOT)


@lru_cache(maxsize=256)
def _template(template: str) -> exp.Expr:
    """`template` parsed once; callers copy it before filling the slot."""
    return parse_one(template.replace("{v}", _SLOT), read="duckdb")


def wrap(shape: str | exp.Expr | None, value: exp.Expr) -> exp.Expr:
    """`value` packaged as `shape`: a key of SHAPES, several joined by '+' (outermost first),
    a DuckDB SQL template with `{v}`, or a tree holding `slot()`; `value` itself when shape is
    None."""
    if shape is None:
        return value
    if isinstance(shape, exp.Expr):
        tree = shape.copy()
    elif "{v}" not in shape and "+" in shape:
        outer, inner = shape.split("+", 1)
        return wrap(outer, wrap(inner, value))
    else:
        tree = _template(SHAPES.get(shape, shape)).copy()
    if isinstance(tree, exp.Column) and tree.name == _SLOT:
        return value
    for col in list(tree.find_all(exp.Column)):
        if col.name == _SLOT:
            col.replace(value.copy())
    return tree
