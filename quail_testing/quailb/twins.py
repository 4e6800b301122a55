"""A third of QUAIL-B (14 of the 42 queries, every corpus and every shape: filters, joins,
classifications, classify-then-filter, multi-joins, projections) also in BigQuery and Databricks
SQL, as a user of that warehouse would write them, twins of the Snowflake queries in queries.py:
the same prompt text, tables, joins, label lists and output columns, so the same model and seed
return the same rows (checked by run.py and tests/e2e/test_quailb_cpu.py).

BigQuery: `AI.IF((...))` for filters and joins, `AI.CLASSIFY((...), [...])` (a STRING) for
classifications, the prompt as a STRUCT tuple of literal pieces and columns (BigQuery
concatenates them; no PROMPT template). QUAIL-B has no scoring or generation, so AI.SCORE and
AI.GENERATE have no query to appear in.

Databricks has no ai_filter: each yes/no question is written in one of the three forms users
write (issue 15), in turn: `ai_query(ep, p, responseFormat => 'STRUCT<answer: BOOLEAN>')
:answer::boolean`, `ai_query(ep, p) = 'TRUE'`, `ai_classify(p, ARRAY('TRUE', 'FALSE')) =
'TRUE'`. Its ai_classify takes content, not an instruction template, so the benchmark's
instruction is concatenated into the content (CONCAT), which keeps the prompt the Snowflake
twin's; label lists of more than 20 labels (v1's limit) or with descriptions are v2's JSON
labels (`:response[0]::string`). Where a dialect cannot say exactly what the Snowflake query
says, `Twin.notes` says so (reported by run.py)."""

from __future__ import annotations

import abc
import json
import re
from dataclasses import dataclass

from quail_testing.quailb import prompts as P
from quail_testing.quailb.queries import QUERIES

DIALECTS = ("bigquery", "databricks")
ENDPOINT = "databricks-meta-llama-3-3-70b-instruct"
SLOT = re.compile(r"\{(\d+)\}")


def literal(text: str) -> str:
    """A BigQuery / Databricks (Spark) string literal: backslash escapes."""
    body = text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")
    return f"'{body}'"


def pieces(template: str, columns: tuple[str, ...]) -> list[str]:
    """The template as literal pieces and columns in reading order (`{1}` before `{0}` reads
    the second column first, as the Snowflake PROMPT does)."""
    out, pos = [], 0
    for m in SLOT.finditer(template):
        if template[pos:m.start()]:
            out.append(literal(template[pos:m.start()]))
        out.append(columns[int(m.group(1))])
        pos = m.end()
    if template[pos:]:
        out.append(literal(template[pos:]))
    return out


class Writer(abc.ABC):
    """Spells the two AI calls QUAIL-B uses, a yes/no question and a classification; each
    dialect (BigQuery, Databricks below) implements both."""

    dialect = ""

    def __init__(self) -> None:
        self.num_filters = 0

    @abc.abstractmethod
    def ai_filter(self, template: str, *columns: str) -> str:
        """The dialect's yes/no call over `template` with `columns` in its slots."""

    @abc.abstractmethod
    def ai_classify(self, template: str, column: str, values: tuple[str, ...],
                    descriptions: tuple[str, ...] = (), *more: str) -> str:
        """The dialect's classification of `column` into `values`."""


class BigQuery(Writer):
    dialect = "bigquery"

    def ai_filter(self, template: str, *columns: str) -> str:
        return f"AI.IF(({', '.join(pieces(template, columns))}))"

    def ai_classify(self, template, column, values, descriptions=(), *more):
        if descriptions:
            cats = ",\n        ".join(f"({literal(v)}, {literal(d)})"
                                      for v, d in zip(values, descriptions, strict=True))
            cats = f"[\n        {cats}]"
        else:
            cats = "[" + ", ".join(literal(v) for v in values) + "]"
        return (f"AI.CLASSIFY(({', '.join(pieces(template, (column, *more)))}),\n"
                f"        categories => {cats})")


class Databricks(Writer):
    dialect = "databricks"

    def ai_filter(self, template: str, *columns: str) -> str:
        prompt = f"CONCAT({', '.join(pieces(template, columns))})"
        form = self.num_filters % 3
        self.num_filters += 1
        if form == 0:
            return (f"ai_query({literal(ENDPOINT)}, {prompt},\n"
                    "        responseFormat => 'STRUCT<answer: BOOLEAN>'):answer::boolean")
        if form == 1:
            return f"ai_query({literal(ENDPOINT)}, {prompt}) = 'TRUE'"
        return f"ai_classify({prompt}, ARRAY('TRUE', 'FALSE')) = 'TRUE'"

    def ai_classify(self, template, column, values, descriptions=(), *more):
        prompt = f"CONCAT({', '.join(pieces(template, (column, *more)))})"
        if len(values) <= 20 and not descriptions:
            return (f"ai_classify({prompt},\n        ARRAY("
                    + ", ".join(literal(v) for v in values) + "))")
        labels = (dict(zip(values, descriptions, strict=True)) if descriptions
                  else list(values))
        return f"ai_classify({prompt},\n        {literal(json.dumps(labels))}):response[0]::string"


@dataclass(frozen=True)
class Twin:
    id: str          # the Snowflake query's id
    dialect: str
    sql: str
    notes: str = ""  # where the dialect cannot say exactly what the Snowflake query says

    @property
    def name(self) -> str:
        return f"{self.id}@{self.dialect}"


def _where(*conditions: str) -> str:
    return "WHERE " + "\n  AND ".join(conditions) if conditions else ""


def _imdb_1(w: Writer) -> str:
    return f"SELECT r.id AS r\nFROM reviews AS r\nWHERE {w.ai_filter(P.F1, 'r.body')}"


def _imdb_3(w: Writer) -> str:
    return f"""SELECT r.id AS r, a.id AS a
FROM reviews AS r
JOIN aspects AS a
  ON {w.ai_filter(P.DISCUSS_ASPECT, 'r.body', 'a.aspect')}
WHERE {w.ai_filter(P.F1, 'r.body')}"""


def _imdb_9(w: Writer) -> str:
    return f"""SELECT r1.id AS r1, a1.id AS a1, r2.id AS r2, a2.id AS a2
FROM reviews AS r1
JOIN aspects AS a1
  ON {w.ai_filter(P.DISCUSS_ASPECT, 'r1.body', 'a1.aspect')}
JOIN reviews AS r2
  ON {w.ai_filter(P.DISCUSS_ASPECT, 'r2.body', 'a1.aspect')}
JOIN aspects AS a2
  ON {w.ai_filter(P.ASPECT_SENTIMENT, 'r2.body', 'a2.aspect')}"""


def _imdb_11(w: Writer) -> str:
    return f"""SELECT r.id AS r,
       {w.ai_classify(P.IMDB_SENTIMENT, 'r.body', P.IMDB_SENTIMENT_LABELS)} AS sentiment
FROM reviews AS r"""


def _imdb_13(w: Writer) -> str:
    return f"""WITH critical AS (
    SELECT r.id, r.body,
           {w.ai_classify(P.IMDB_SENTIMENT, 'r.body', P.IMDB_SENTIMENT_LABELS)} AS sentiment
    FROM reviews AS r
)
SELECT c.id AS r, c.sentiment, a.id AS a
FROM critical AS c
JOIN aspects AS a
  ON {w.ai_filter(P.DISCUSS_ASPECT, 'c.body', 'a.aspect')}
WHERE c.sentiment IN ('negative', 'mixed')"""


def _bio_1(w: Writer) -> str:
    return (f"SELECT r.id AS r\nFROM reports AS r\n"
            f"WHERE {w.ai_filter(P.SERIOUS_ADVERSE_EVENT, 'r.report')}")


def _bio_4(w: Writer) -> str:
    return f"""SELECT r.id AS r, n.id AS n, c.id AS c
FROM reports AS r
JOIN terms AS n
  ON {w.ai_filter(P.REACTION, 'r.report', 'n.term')}
JOIN terms AS c
  ON {w.ai_filter(P.REACTION, 'r.report', 'c.term')}
{_where(w.ai_filter(P.SERIOUS_ADVERSE_EVENT, 'r.report'),
        w.ai_filter(P.NEUROLOGICAL_REACTION, 'n.term'),
        w.ai_filter(P.CARDIOVASCULAR_REACTION, 'c.term'))}"""


def _bio_5(w: Writer) -> str:
    return f"""SELECT m.id AS m,
       {w.ai_classify(P.BIO_ORGAN_CLASS, 'm.term', P.BIO_ORGAN_CLASS_LABELS)} AS organ_class
FROM terms AS m"""


def _fev_2(w: Writer) -> str:
    return f"""SELECT c.id AS c, e.id AS e
FROM claims AS c
JOIN evidence AS e
  ON {w.ai_filter(P.SUPPORT, 'c.claim', 'e.text')}"""


def _fev_10(w: Writer) -> str:
    return f"""SELECT c.id AS c, e.id AS e
FROM claims AS c
JOIN evidence AS e
  ON c.evidence_wiki_url = e.id
 AND {w.ai_filter(P.SUPPORT, 'c.claim', 'e.text')}
{_where(w.ai_filter(P.F11, 'c.claim'), w.ai_filter(P.F13, 'e.text'))}"""


def _fev_11(w: Writer) -> str:
    return f"""WITH topics AS (
    SELECT c.id,
           {w.ai_classify(P.FEV_TOPIC, 'c.claim', P.FEV_TOPIC_LABELS)} AS topic
    FROM claims AS c
)
SELECT t.id AS c, t.topic
FROM topics AS t
WHERE t.topic IN ('politics', 'history')"""


def _lep_5(w: Writer) -> str:
    return f"""SELECT d.id AS d, s.id AS s
FROM citation_contexts AS d
JOIN citation_passages AS s
  ON {w.ai_filter(P.LEPJOIN, 'd.destination_context', 's.passage_text')}
{_where(w.ai_filter(P.LEP1, 'd.destination_context'),
        w.ai_filter(P.LEP2, 'd.destination_context'),
        w.ai_filter(P.LEPS1, 's.passage_text'))}"""


def _agent_3(w: Writer) -> str:
    outcome = w.ai_classify(P.AGENT_OUTCOME, 't.trace', P.AGENT_OUTCOME_LABELS,
                            P.AGENT_OUTCOME_DESCRIPTIONS)
    return f"""SELECT t.id AS t,
       {outcome} AS outcome
FROM agent_traces AS t
WHERE {w.ai_filter(P.AGENT_RECOVERED, 't.trace')}"""


def _agent_4(w: Writer) -> str:
    outcome = w.ai_classify(P.AGENT_OUTCOME, 't.trace', P.AGENT_OUTCOME_LABELS,
                            P.AGENT_OUTCOME_DESCRIPTIONS)
    failure = w.ai_classify(P.AGENT_FAILURE, 'o.trace', P.AGENT_FAILURE_LABELS,
                            P.AGENT_FAILURE_DESCRIPTIONS)
    return f"""WITH outcomes AS (
    SELECT t.id, t.trace,
           {outcome} AS outcome
    FROM agent_traces AS t
)
SELECT o.id AS t,
       {failure} AS failure
FROM outcomes AS o
WHERE o.outcome = 'not resolved'"""


# Snowflake id -> writer of the same query; every corpus, every shape of the 42
WRITERS = {
    "IMDB-1": _imdb_1,      # one filter
    "IMDB-3": _imdb_3,      # filter, then an AI join
    "IMDB-9": _imdb_9,      # 3-join chain
    "IMDB-11": _imdb_11,    # classification as a projection
    "IMDB-13": _imdb_13,    # classify-then-filter, then an AI join
    "BIO-1": _bio_1,        # filter over long reports
    "BIO-4": _bio_4,        # star: 2 joins on one anchor, 3 filters
    "BIO-5": _bio_5,        # 26 labels of 1-11 tokens
    "FEV-2": _fev_2,        # AI join, slots in reverse order
    "FEV-10": _fev_10,      # equi-join plus AI predicate, filters on both sides
    "FEV-11": _fev_11,      # classify-then-filter alone
    "LEP-5": _lep_5,        # filters on both sides, then the join
    "AGENT-3": _agent_3,    # filter, then a classification with label descriptions
    "AGENT-4": _agent_4,    # classify-then-filter, then a second classification
}

NOTES = {
    ("databricks", "BIO-5"): "26 labels exceed ai_classify v1's 20: written with v2's JSON labels",
    ("databricks", "AGENT-3"): "label descriptions need ai_classify v2 (JSON object of labels)",
    ("databricks", "AGENT-4"): "label descriptions need ai_classify v2 (JSON object of labels)",
}


def twins(dialect: str) -> dict[str, Twin]:
    writer = {"bigquery": BigQuery, "databricks": Databricks}[dialect]()
    out = {}  # one writer: Databricks' three yes/no forms take turns across the queries
    for qid, write in WRITERS.items():
        assert qid in QUERIES, qid
        out[qid] = Twin(qid, dialect, write(writer).strip() + "\n",
                        NOTES.get((dialect, qid), ""))
    return out


TWINS: dict[str, Twin] = {t.name: t for d in DIALECTS for t in twins(d).values()}
