"""Grammar-aware fuzzing of the SQL front end: no input may end in a traceback.

Seeds are the example queries (examples/*/*.sql), every golden call of the function matrix
(tests/unit/sql/test_sql_functions.py) and every function named in docs/functions.md. Each case
applies 1-3 mutations (deep nesting, option values of every wrong type, huge literals, unbalanced
quotes, token deletion / duplication / swaps, placeholder text, spliced fragments, subquery / CTE
/ UNION wrappers, extra predicates, comments, dialect swaps, non-UTF-8 bytes) and runs what the CLI runs, in process: `read_sql`, then `quail explain`
(parse, text and JSON; for half the cases the costed plan over a tiny DuckDB table, as with
--table) and `quail transpile` to a random dialect. Every case must succeed or raise a
QuailError whose message is one line of at most MESSAGE_CHARS, and a transpile's SQL and
warnings must stay within bounds linear in the input (_oversized: each call written once, each
warning one short line); anything else is a failure reported with the seed and case number.
The slowest case's seconds are printed, not asserted: timing belongs in bench/.

    QUAIL_FUZZ_CASES=20000 python -m pytest -q -s tests/unit/test_fuzz_sql.py   # long mode
    QUAIL_FUZZ_SEED=7 ...                                                      # other inputs
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import random
import re
import time
from collections import Counter
from pathlib import Path

import pytest
from sqlglot.tokens import TokenType

from quail_engine.errors import QuailError
from quail_engine.sql import dialects
from quail_engine.sql.explain import explain_json, explain_text
from quail_engine.sql.query import parse
from quail_engine.sql.source_text import read_sql
from quail_engine.sql.transpiler import transpile

ROOT = Path(__file__).resolve().parents[2]
DIALECTS = dialects.DIALECTS
CASES = int(os.environ.get("QUAIL_FUZZ_CASES", "1500"))
SEED = int(os.environ.get("QUAIL_FUZZ_SEED", "20240613"))
MESSAGE_CHARS = 320
PLAN_MESSAGE_CHARS = 700

NAMED = {  # how each dialect spells a named argument, and names its AI functions take
    "duckdb": (":=", ("model", "selectivity", "anchor", "order", "on_error", "max_error_ratio",
                      "max_tokens", "temperature", "top_p", "stop", "multi", "instruction",
                      "task", "output_type", "labels", "range", "max_words", "schema", "bogus")),
    "snowflake": ("=>", ("return_error_details", "config_object", "model_parameters", "options",
                         "response_format", "show_details", "categories", "file", "bogus")),
    "bigquery": ("=>", ("connection_id", "endpoint", "examples", "max_error_ratio",
                        "output_mode", "model_params", "output_schema", "categories",
                        "optimization_mode", "bogus")),
    "databricks": ("=>", ("returnType", "failOnError", "modelParameters", "responseFormat",
                          "options", "max_words", "bogus")),
}
VALID = ("0.5", "1", "0.01", "'fail'", "'null'", "'details'", "20", "TRUE", "FALSE", "'as_written'",
         "'m'", "{'temperature': 0.2, 'max_tokens': 5}", "['a', 'b']", "'summarize'", "'VARCHAR'",
         "JSON '{\"generationConfig\": {\"temperature\": 0}}'", "'single'", "'r'", "'.'")
VALUES = VALID + ("'x'", "''", "7.5", "-1", "0", "1", "0.5", "NULL", "[NULL]", "['a', 1]", "['a', 'a']",
          "{'a': 1}", "{'temperature': 'hot'}", "{'max_tokens': -5}", "{'top_p': [1]}", "TRUE",
          "'{bad json'", "PARSE_JSON('{bad')", "JSON '{\"a\":'", "col", "1e309", "'nan'", "[]",
          "ARRAY()", "'a' || 'b'", "named_struct('a', 1)", "map('a', 'b')", "STRUCT(1 AS a)",
          "'STRUCT<m: BOOLEAN>'", "'multi'", "[[1, 2]]", "{'output_mode': 5}",
          "{'examples': 'x'}", "{'examples': [{'input': 1}]}", "'a STRING, b'", "'-1..1'",
          "{'generationConfig': {'maxOutputTokens': 'many'}}", "'[\"a\", \"a\"]'", "[1e400]",
          "'{\"type\": \"object\"'", "CAST(NULL AS VARCHAR)", "-0.0", "99999999999999999999",
                   "1" + "0" * 400, "-1e-400")
LABELS = ("[]", "['a']", "['a', 'a']", "[1, 2]", "[NULL, 'a']", "['', 'b']", "[{'label': 1}]",
          "[{'label': 'a', 'description': 2}, 'b']", "{'a': NULL, 'b': 'x'}", "'[1,'", "col",
          "ARRAY('yes', 'no')", "[['a', 'b'], ['c']]")
CHARS = ("'", '"', "`", "(", ")", "[", "]", "{", "}", ",", ";", "--", "/*", "\\", "\x00", "é",
         "\U0001f600", "::", ":", ".", "=>", ":=", "||", "{0}", "{99}", "$$", "?", "@", "%s",
         "\u202e", "\r", "\t", "NOT", "-", "CASE", "END", "AND", "OR", "IN", "JOIN", "ON")
KEYWORDS = ("SELECT", "FROM", "NULL", "TRUE", "JOIN", "WHERE", "GROUP", "ORDER", "LIMIT",
            "PROMPT", "AI_FILTER", "AI.IF", "ai_classify", "EXISTS", "LATERAL", "UNNEST")
DEPTHS = (2, 8, 40, 60, 99, 100, 101, 150, 1000, 5000)
AI_NAME = re.compile(r"^(AI[_.]|SNOWFLAKE\.CORTEX\.|ML\.)", re.IGNORECASE)


def _load_matrix() -> list[tuple[str, str]]:
    path = ROOT / "tests" / "unit" / "sql" / "test_sql_functions.py"
    spec = importlib.util.spec_from_file_location("_fuzz_matrix", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [(d, f"SELECT {call} FROM t") for d, call, _ in module.CASES]


def _documented() -> list[tuple[str, str]]:
    """Every function named in docs/functions.md, called with one and with three arguments."""
    text = (ROOT / "docs" / "functions.md").read_text(encoding="utf-8")
    out = []
    for line in text.splitlines():
        row = re.match(r"\|\s*(Snowflake|BigQuery|Databricks|DuckDB)\s*\|(.*)", line)
        if not row:
            continue
        dialect = row.group(1).lower()
        for name in sorted(set(re.findall(r"`([A-Za-z_.]*[A-Za-z])", row.group(2)))):
            name = f"SNOWFLAKE.{name}" if name.startswith("CORTEX.") else name
            out += [(dialect, f"SELECT {name}(review) FROM t"),
                    (dialect, f"SELECT {name}(review, 'a', 'b') FROM t")]
    return out


def seeds() -> list[tuple[str, str, float]]:
    """(dialect, sql, weight): the examples and the golden matrix; the bare documented names
    (mostly wrong arity, so mostly refused) a quarter as often."""
    examples = [(p.parent.name, p.read_text(encoding="utf-8"))
                for p in sorted((ROOT / "examples").glob("*/*.sql"))]
    return ([(d, sql, 1.0) for d, sql in examples + _load_matrix()]
            + [(d, sql, 0.25) for d, sql in _documented()])


class Case:
    """One input: SQL text (or raw bytes, read through a file or `-e`), the dialect it is read
    in, the transpile target, and what was done to it."""

    def __init__(self, sql: str, dialect: str, target: str):
        self.sql, self.dialect, self.target = sql, dialect, target
        self.raw: bytes | None = None
        self.via_file = False
        self.steps: list[str] = []


def _tokens(case: Case) -> list:
    try:
        return [t for t in dialects.sqlglot_dialect(case.dialect)().tokenize(case.sql)
                if t.end < len(case.sql)]
    except Exception:  # text the tokenizer rejects: mutate by characters instead
        return []


def _span(rng: random.Random, case: Case) -> tuple[int, int]:
    tokens = _tokens(case)
    if not tokens:
        i = rng.randrange(len(case.sql) + 1)
        return i, i
    t = rng.choice(tokens)
    return t.start, t.end + 1


def _replace(case: Case, start: int, end: int, text: str) -> None:
    case.sql = case.sql[:start] + text + case.sql[end:]


def _ai_calls(case: Case) -> list[tuple[int, int]]:
    """(start of name, index of the closing parenthesis) of each AI call."""
    tokens = _tokens(case)
    out = []
    for i, t in enumerate(tokens[:-1]):
        if tokens[i + 1].token_type != TokenType.L_PAREN:
            continue
        name_start = t.start
        j = i
        while j >= 2 and tokens[j - 1].token_type == TokenType.DOT:
            j -= 2
            name_start = tokens[j].start
        if not AI_NAME.match(case.sql[name_start:t.end + 1]):
            continue
        depth = 0
        for k in range(i + 1, len(tokens)):
            kind = tokens[k].token_type
            depth += kind in (TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE)
            depth -= kind in (TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE)
            if depth == 0:
                out.append((name_start, tokens[k].start))
                break
    return out


def m_delete(rng, case):
    start, end = _span(rng, case)
    _replace(case, start, end, "")
    return "delete a token"


def m_duplicate(rng, case):
    start, end = _span(rng, case)
    _replace(case, start, end, case.sql[start:end] * rng.choice((2, 3, 50)))
    return "duplicate a token"


def m_swap(rng, case):
    (a, b), (c, d) = sorted([_span(rng, case), _span(rng, case)])
    if b <= c:
        case.sql = case.sql[:a] + case.sql[c:d] + case.sql[b:c] + case.sql[a:b] + case.sql[d:]
    return "swap two tokens"


def m_insert(rng, case):
    start, _ = _span(rng, case)
    text = rng.choice(CHARS)
    _replace(case, start, start, f" {text}" if text.isalpha() else text)
    return f"insert {text!r}"


def m_keyword(rng, case):
    start, end = _span(rng, case)
    _replace(case, start, end, rng.choice(KEYWORDS))
    return "replace a token by a keyword"


def m_nest(rng, case):
    start, end = _span(rng, case)
    n = rng.choice(DEPTHS)
    opener, closer = rng.choice((("(", ")"), ("lower(", ")"), ("[", "]"), ("CONCAT('a', ", ")"),
                                 ("CASE WHEN TRUE THEN ", " END"), ("NOT ", ""), ("- ", ""),
                                 ("(SELECT ", ")"), ("'a' || ", "")))
    _replace(case, start, end, opener * n + case.sql[start:end] + closer * n)
    return f"nest {opener.strip()!r} x{n}"


def m_option(rng, case):
    calls = _ai_calls(case)
    if not calls:
        return m_insert(rng, case)
    _, close = rng.choice(calls)
    arrow, names = NAMED[case.dialect]
    name, value = rng.choice(names), rng.choice(VALUES)
    text = f", {name} {arrow} {value}" if rng.random() < 0.8 else f", {value}"
    _replace(case, close, close, text)
    return f"option {text.strip(', ')}"


def m_labels(rng, case):
    arrays = [(m.start(), m.end()) for m in re.finditer(r"(ARRAY\(|\[)[^\[\]()]*[\])]", case.sql)]
    value = rng.choice(LABELS)
    if not arrays:
        return m_option(rng, case)
    start, end = rng.choice(arrays)
    _replace(case, start, end, value)
    return f"labels {value}"


def m_huge(rng, case):
    strings = [t for t in _tokens(case) if t.token_type == TokenType.STRING]
    size = rng.choice((1_000, 20_000, 100_000))
    if strings and rng.random() < 0.7:
        t = rng.choice(strings)
        _replace(case, t.start, t.end + 1, "'" + "x" * size + "'")
        return f"string literal of {size} characters"
    start, end = _span(rng, case)
    text = rng.choice(("9" * size, "a" * size, "'a' || " * (size // 1000) + "'z'"))
    _replace(case, start, end, text)
    return f"token of {len(text)} characters"


def m_placeholder(rng, case):
    strings = [t for t in _tokens(case) if t.token_type == TokenType.STRING]
    if not strings:
        return m_insert(rng, case)
    t = rng.choice(strings)
    slot = rng.choice(("{0}", "{1}", "{2}", "{99}", "{-1}", "{x}", "{", "}", "{{0}}"))
    _replace(case, t.end, t.end, slot)
    return f"placeholder text {slot!r} in a literal"


def m_quote(rng, case):
    start, _ = _span(rng, case)
    quote = rng.choice(("'", '"', "`", "/*", "$$"))
    _replace(case, start, start, quote)
    return f"unbalanced {quote}"


def m_splice(rng, case, pool):
    other = rng.choice(pool)[1]
    a = rng.randrange(len(other) + 1)
    b = min(len(other), a + rng.randrange(1, 80))
    start, _ = _span(rng, case)
    _replace(case, start, start, " " + other[a:b] + " ")
    return "splice a fragment of another query"


def _statement(sql: str) -> str:
    """The statement without comment lines and a trailing semicolon (to embed it)."""
    lines = [line for line in sql.splitlines() if not line.lstrip().startswith("--")]
    return "\n".join(lines).strip().rstrip(";")


def m_wrap(rng, case):
    inner = _statement(case.sql)
    form = rng.choice(("SELECT * FROM ({q}) AS q", "WITH q AS ({q}) SELECT * FROM q",
                       "SELECT COUNT(*) FROM ({q}) AS q WHERE TRUE",
                       "SELECT * FROM ({q}) AS q ORDER BY 1"))
    case.sql = form.format(q=inner)
    return "wrap in a subquery or CTE"


def m_union(rng, case, pool):
    same = [sql for d, sql, _ in pool if d == case.dialect] or [case.sql]
    case.sql = f"{_statement(case.sql)} UNION ALL {_statement(rng.choice(same))}"
    return "UNION ALL with another query"


def m_predicate(rng, case):
    found = re.search(r"\bWHERE\b", case.sql, re.IGNORECASE)
    extra = rng.choice(("id > 1", "review IS NOT NULL", "product_id IN (1, 2)", "NOT (id = 3)",
                        "EXISTS (SELECT 1 FROM products p2 WHERE p2.product_id = 1)"))
    glue = rng.choice(("AND", "OR"))
    if found:
        _replace(case, found.end(), found.end(), f" {extra} {glue}")
    else:
        found = re.search(r"\bFROM\s+\w+(\s+(AS\s+)?\w+)?", case.sql, re.IGNORECASE)
        if not found:
            return m_insert(rng, case)
        _replace(case, found.end(), found.end(), f" WHERE {extra}")
    return f"add the predicate {extra}"


def m_comment(rng, case):
    start, _ = _span(rng, case)
    text = rng.choice(("/* note */", "\n-- note\n", "\n\n", "   ", "/* {0} */", "/*+ hint */"))
    _replace(case, start, start, text)
    return "insert a comment or whitespace"


def m_dialect(rng, case):
    case.dialect = rng.choice([d for d in DIALECTS if d != case.dialect])
    return f"read as {case.dialect}"


def m_bytes(rng, case):
    data = bytearray(case.sql.encode("utf-8"))
    for _ in range(rng.randrange(1, 4)):
        data.insert(rng.randrange(len(data) + 1), rng.randrange(0x80, 0x100))
    case.raw = bytes(data)
    case.via_file = rng.random() < 0.5
    return f"non-UTF-8 bytes via {'a file' if case.via_file else '-e'}"


MUTATORS = (m_delete, m_duplicate, m_swap, m_insert, m_keyword, m_nest, m_option, m_option,
            m_labels, m_huge, m_placeholder, m_quote, m_dialect, m_bytes, m_wrap, m_predicate,
            m_comment)
POOLED = (m_splice, m_union)  # mutators that draw a second seed


def make_case(rng: random.Random, pool: list[tuple[str, str, float]]) -> Case:
    dialect, sql, _ = rng.choices(pool, weights=[w for _, _, w in pool])[0]
    case = Case(sql, dialect, rng.choice(DIALECTS))
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        if case.raw is not None:
            break
        mutate = rng.choice((*MUTATORS, *POOLED))
        case.steps.append(mutate(rng, case, pool) if mutate in POOLED else mutate(rng, case))
    return case


def source_text(case: Case, tmp: Path) -> str:
    """What `quail explain FILE` / `-e SQL` hands the front end."""
    if case.raw is None:
        return read_sql(None, case.sql)
    if case.via_file:
        path = tmp / "case.sql"
        path.write_bytes(case.raw)
        return read_sql(str(path), None)
    return read_sql(None, os.fsdecode(case.raw))  # how Python decodes argv


def run_case(case: Case, tmp: Path, plan, tally: Counter | None = None) -> tuple[str, str]:
    """("ok" | "error" | "crash" | "message" | "long" | "big", detail) over every command the
    case exercises: explain (parse, text, JSON), the costed plan when `plan` is given, and
    transpile to each dialect (its SQL and warnings within _oversized's bounds). `tally`
    counts (command, outcome) pairs."""
    outcomes = []
    parsed = None
    for command in ("explain", "plan", "transpile"):
        if command == "plan" and (plan is None or parsed is None):
            continue
        try:
            sql = source_text(case, tmp)
            if command == "explain":
                parsed = parse(sql, case.dialect)
                explain_text(parsed)
                json.dumps(explain_json(parsed))
            elif command == "plan":
                plan(parsed)
            else:
                for target in DIALECTS:  # `quail transpile --write` each dialect
                    del WARNINGS[:]
                    out = transpile(sql, case.dialect, target)
                    big = _oversized(sql, out, parsed)
                    if big:
                        outcomes.append(("big", f"transpile to {target}: {big}"))
                        break
                else:
                    outcomes.append(("ok", ""))
            if command != "transpile":
                outcomes.append(("ok", ""))
        except QuailError as exc:
            outcomes.append(_judge(command, exc))
        except Exception as exc:  # noqa: BLE001 - the point: anything else is a failure
            outcomes.append(("crash", f"{command}: {type(exc).__name__}: {str(exc)[:300]}"))
        if tally is not None:
            tally[(command, outcomes[-1][0])] += 1
    bad = [o for o in outcomes if o[0] in ("crash", "message", "long", "big")]
    if bad:
        return bad[0]
    return ("ok", "") if all(o[0] == "ok" for o in outcomes) else ("error", "")


WARNINGS: list[str] = []  # the warnings quail logged during the current command
OUTPUT_FACTOR, OUTPUT_SLACK = 4, 4000  # transpiled SQL: at most 4x its input plus 4,000 chars
WARNING_CHARS = 1000  # one warning, a line
WARNINGS_PER_CALL = 3  # warnings of one transpile per AI call (plus a few for the statement)


def _oversized(sql: str, out: str, parsed) -> str:
    """Why the output of one transpile is too large for its input ("" when it is not): the
    SQL grows at most linearly, a warning is one short line, and warnings are few per call."""
    if len(out) > OUTPUT_FACTOR * len(sql) + OUTPUT_SLACK:
        return f"{len(out)} chars of SQL from {len(sql)}"
    calls = len(parsed.ai_ops) if parsed is not None else 1
    if len(WARNINGS) > WARNINGS_PER_CALL * calls + 3:
        return f"{len(WARNINGS)} warnings for {calls} AI calls"
    long = [w for w in WARNINGS if len(w) > WARNING_CHARS or "\n" in w]
    return f"a warning of {len(long[0])} chars: {long[0][:200]!r}" if long else ""


class _Collect(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        WARNINGS.append(record.getMessage())


def _judge(command: str, exc: QuailError) -> tuple[str, str]:
    """The front end's errors: one line of at most MESSAGE_CHARS. The plan's errors quote
    DuckDB's message (shortened to 400 characters by exec/user_errors.py) and the user's SQL
    (200): at most PLAN_MESSAGE_CHARS once flattened to the one line the CLI prints."""
    message = str(exc)
    if command == "plan":
        flat = " ".join(message.split())
        if len(flat) > PLAN_MESSAGE_CHARS:
            return "long", f"plan: {len(flat)} chars: {flat[:300]!r}"
        return "error", ""
    if "\n" in message or len(message) > MESSAGE_CHARS:
        return "message", f"{command}: {type(exc).__name__} of {len(message)} chars: {message[:400]!r}"
    return "error", ""


def _planner():
    """The costed-plan path of `quail explain --table`: DuckDB scans over the example data
    (tables reviews, products and t), a fixed model spec, the CPU device."""
    import duckdb

    from quail_engine.exec.analyze import estimate_plans
    from quail_engine.plan.cost import ModelSpec
    from quail_engine.plan.device import device_spec

    con = duckdb.connect()
    data = ROOT / "examples" / "data"
    con.execute(f"CREATE TABLE reviews AS SELECT * FROM read_csv('{data / 'reviews.csv'}')")
    con.execute(f"CREATE TABLE products AS SELECT * FROM read_csv('{data / 'products.csv'}')")
    con.execute("CREATE TABLE t AS SELECT *, review AS a, review AS b, review AS content, "
                "review AS p, review AS x FROM reviews")
    spec = ModelSpec(name="fuzz", num_layers=30, hidden_size=576, num_heads=9, num_kv_heads=3,
                     head_dim=64, intermediate_size=1536, vocab_size=49152)
    device = device_spec("cpu")
    return lambda parsed: estimate_plans(con, parsed, spec, device)


def fuzz(cases: int, seed: int, tmp: Path, tally: Counter | None = None
         ) -> tuple[Counter, list[str], tuple[float, int]]:
    """-> (cases per outcome, failures, (the slowest case's seconds, its number))."""
    rng = random.Random(seed)
    pool = seeds()
    plan = _planner()
    counts: Counter = Counter()
    failures: list[str] = []
    slowest = (0.0, -1)
    # transpile warnings are expected output, counted and measured (_oversized), not printed
    quail_log, collect = logging.getLogger("quail_engine"), _Collect(logging.WARNING)
    previous = (quail_log.propagate, quail_log.level, logging.getLogger("sqlglot").level)
    quail_log.addHandler(collect)
    quail_log.propagate = False
    quail_log.setLevel(logging.WARNING)
    logging.getLogger("sqlglot").setLevel(logging.ERROR)
    try:
        for n in range(cases):
            case = make_case(rng, pool)
            started = time.perf_counter()
            kind, detail = run_case(case, tmp, plan if n % 2 else None, tally)
            slowest = max(slowest, (time.perf_counter() - started, n))
            counts[kind] += 1
            if kind in ("crash", "message", "long", "big"):
                failures.append(f"case {n} (seed {seed}) [{case.dialect}->{case.target}; "
                                f"{'; '.join(case.steps)}] {detail}\n  sql: "
                                f"{(case.sql if case.raw is None else repr(case.raw))[:300]!r}")
    finally:
        quail_log.removeHandler(collect)
        quail_log.propagate, _, _ = previous
        quail_log.setLevel(previous[1])
        logging.getLogger("sqlglot").setLevel(previous[2])
    return counts, failures, slowest


def test_no_traceback_on_mutated_queries(tmp_path):
    started = time.perf_counter()
    tally: Counter = Counter()
    counts, failures, slowest = fuzz(CASES, SEED, tmp_path, tally)
    print(f"\nfuzz: {CASES} cases in {time.perf_counter() - started:.1f} s (seed {SEED}): "
          f"{counts['ok']} succeeded, {counts['error']} clean errors, {counts['crash']} "
          f"tracebacks, {counts['message']} bad messages, {counts['long']} plan messages over "
          f"{PLAN_MESSAGE_CHARS}, "
          f"{counts['big']} outputs over their size bound; slowest: case {slowest[1]}, "
          f"{slowest[0]:.1f} s")
    print("by command: " + ", ".join(f"{c} {o} {n}" for (c, o), n in sorted(tally.items())))
    assert not failures, f"{len(failures)} failing cases:\n" + "\n".join(failures[:15])


@pytest.mark.parametrize("mutate", [m for m in MUTATORS if m is not m_dialect],
                         ids=lambda m: m.__name__)
def test_every_mutation_changes_the_input(mutate):
    """A mutator that silently does nothing would make the fuzzer test less than it claims."""
    rng = random.Random(1)
    changed = 0
    for dialect, sql, _ in seeds()[:20]:
        case = Case(sql, dialect, dialect)
        mutate(rng, case)
        changed += case.sql != sql or case.raw is not None
    assert changed >= 15
