"""Vendor result packagings, re-created around the canonical value in DuckDB SQL.

Where a user did not strip the vendor wrapper (a bare `AI_CLASSIFY(...)` returns
`{"labels": [...]}`), the statement must still see the vendor's shape: `{v}` is the canonical
value (the `quail_ai_<id>(...)` call). Written in DuckDB SQL; sqlglot carries them to other
dialects when transpiling.
"""

from __future__ import annotations

from functools import lru_cache

from sqlglot import exp, parse_one

# the option that bounds an answer's tokens as each dialect's user spells it: BigQuery's
# generation_config / STRUCT field is max_output_tokens
# (https://cloud.google.com/bigquery/docs/reference/standard-sql/bigqueryml-syntax-ai-generate);
# Snowflake's model_parameters, Databricks' modelParameters and DuckDB's say max_tokens
TOKEN_LIMIT = {"bigquery": "max_output_tokens"}


def no_answer_text(dialect: str) -> str:
    """The error a vendor reports beside a NULL answer, naming `dialect`'s option: quail's
    answers are NULL where the input was NULL or the model did not complete an answer of the
    requested type within its tokens."""
    return ("no answer: a NULL input, or the model did not complete an answer of the requested "
            f"type within {TOKEN_LIMIT.get(dialect, 'max_tokens')}")


def _no_answer(dialect: str) -> str:
    return f"CASE WHEN {{v}} IS NULL THEN '{no_answer_text(dialect)}' END"


# a NULL answer (a NULL or empty input) is a NULL object, not {"labels": [null]}; a multi-label
# answer (a list) is given to json_object as it is: DuckDB writes it as a JSON array, and sqlglot
# carries it as an array (Databricks NAMED_STRUCT, Snowflake OBJECT_CONSTRUCT), where a to_json
# around it would be a JSON string inside the object ({"labels": "[\"a\"]"})
SHAPES = {
    "labels_object": "CASE WHEN {v} IS NOT NULL THEN json_object('labels', json_array({v})) END",
    "labels_object_multi": "CASE WHEN {v} IS NOT NULL THEN json_object('labels', {v}) END",
    "label_object": "CASE WHEN {v} IS NOT NULL THEN json_object('label', {v}) END",
    "sentiment_object": ("CASE WHEN {v} IS NOT NULL THEN json_object('categories', json_array("
                         "json_object('name', 'overall', 'sentiment', {v}))) END"),
    "extract_object": f"json_object('response', {{v}}, 'error', {_no_answer('snowflake')})",
    "value_error_object": f"json_object('value', {{v}}, 'error', {_no_answer('snowflake')})",
    "answer_array": "CASE WHEN {v} IS NOT NULL THEN json_array({v}) END",
    "result_struct": ("struct_pack(result := {v}, full_response := CAST(NULL AS JSON), "
                      f"status := coalesce({_no_answer('bigquery')}, ''))"),
    "list1": "CASE WHEN {v} IS NOT NULL THEN [{v}] END",
    "response_object": ("CASE WHEN {v} IS NOT NULL THEN json_object('response', json_array({v}), "
                        "'error_message', NULL) END"),
    "response_object_multi": ("CASE WHEN {v} IS NOT NULL THEN json_object('response', {v}, "
                              "'error_message', NULL) END"),
    "response_extract": (f"json_object('response', {{v}}, 'error_message', "
                         f"{_no_answer('databricks')})"),
    "result_error_struct": (f"struct_pack(result := {{v}}, errorMessage := "
                            f"{_no_answer('databricks')})"),
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
# a call under a response format answers the object itself in `structured_output`, as quail
# answers its source (exec/tasks.details_object)
# (https://docs.snowflake.com/en/user-guide/snowflake-cortex/complete-structured-outputs)
DETAILS_STRUCTURED = ("json_object('created', quail_created(), 'model', NULL, "
                      "'structured_output', json_array(json_object('raw_message', "
                      "quail_parsed({v}), 'type', 'json')), 'usage', NULL)")
# the statement's time in epoch seconds, in the warehouses DETAILS_REBUILT is written for
CREATED = {"bigquery": "UNIX_SECONDS(CURRENT_TIMESTAMP())", "databricks": "UNIX_TIMESTAMP()"}
# the answer's JSON text as the value it holds, NULL where it holds none (a target that cannot
# spell the format answers free text, and said so): BigQuery SAFE.PARSE_JSON
# (https://cloud.google.com/bigquery/docs/reference/standard-sql/json_functions#parse_json),
# Databricks try_parse_json, a VARIANT to_json writes as the object
# (https://docs.databricks.com/aws/en/sql/language-manual/functions/try_parse_json)
PARSED = {"bigquery": "SAFE.PARSE_JSON", "databricks": "try_parse_json"}

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


def _path(key: str | None) -> exp.JSONPath:
    """`$` or `$."key"`: the key taken as one name, not read as a path."""
    return exp.JSONPath(expressions=[exp.JSONPathRoot(),
                                     *([exp.JSONPathKey(this=key)] if key is not None else [])])


def typed(answer: exp.Expr, to: exp.DataType, key: str | None = None) -> exp.Expr:
    """The JSON `answer` (or its field `key`) as the DuckDB type `to` by DuckDB's JSON casts
    (lists, structs, nested ones; a string without its JSON quotes). A value that does not
    convert (an integer past BIGINT, '2024-02-30' as a DATE) is NULL, never an aborted query;
    TRY makes the whole value NULL where TRY_CAST would null a nested field unseen, so
    `unconverted` can say so."""
    if to.is_type(exp.DType.TEXT, exp.DType.VARCHAR):
        return exp.JSONExtractScalar(this=answer, expression=_path(key), only_json_types=False,
                                     scalar_only=False)
    value = answer if key is None else exp.JSONExtract(this=answer, expression=_path(key),
                                                       only_json_types=False)
    return exp.Try(this=exp.Cast(this=value, to=to.copy()))


def unconverted(answer: exp.Expr, value: exp.Expr, type_name: str,
                key: str | None = None) -> exp.Expr:
    """Why `value` (`typed(answer, ..., key)`) is NULL though the model wrote a non-null JSON
    value: `'<key>: the answer <json> is not a valid <type_name>'`; NULL otherwise."""
    written = answer if key is None else exp.JSONExtract(this=answer, expression=_path(key),
                                                         only_json_types=False)
    text = exp.cast(written, exp.DType.VARCHAR)  # JSON's null is 'null', not NULL
    failed = exp.and_(exp.Is(this=value.copy(), expression=exp.Null()),
                      exp.NEQ(this=text.copy(), expression=exp.Literal.string("null")))
    why = exp.DPipe(this=exp.DPipe(
        this=exp.Literal.string(f"{key + ': ' if key else ''}the answer "), expression=text),
        expression=exp.Literal.string(f" is not a valid {type_name}"))
    return exp.Case(ifs=[exp.If(this=failed, true=why)])


def no_answer(answer: exp.Expr, dialect: str) -> exp.Expr:
    """`no_answer_text(dialect)` where `answer` is NULL, built as a tree."""
    return exp.Case(ifs=[exp.If(this=exp.Is(this=answer.copy(), expression=exp.Null()),
                                true=exp.Literal.string(no_answer_text(dialect)))])
