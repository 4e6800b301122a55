"""The 42 default QUAIL-B queries (IMDB-1..15, BIO-1..6, FEV-1..11, LEP-1..6, AGENT-1..4) in
Snowflake SQL, as a warehouse user would write them: the benchmark's prompt texts
(quail_testing/quailb/prompts.py), tables, aliases, joins and label lists, AI_FILTER for filters and
joins, AI_CLASSIFY(...):labels[0]::STRING for classifications, `IN (...)` on a label for the
benchmark's label filters. Output columns are the benchmark's: each relation's id under its alias
(`r`, `a`, ...) and each label column under its name (`sentiment`, `organ_class`, ...).

`QUERIES[id]` is a Query (sql, output columns, tables read); `sql_literal` renders a prompt."""

from __future__ import annotations

from dataclasses import dataclass

from quail_testing.quailb import prompts as P


def sql_literal(text: str) -> str:
    """A Snowflake string literal: backslash escapes for newlines, quotes doubled."""
    body = text.replace("\\", "\\\\").replace("'", "''").replace("\n", "\\n")
    return f"'{body}'"


def labels(values: tuple[str, ...], descriptions: tuple[str, ...] = ()) -> str:
    """A Snowflake ARRAY of categories; with descriptions, {'label', 'description'} objects."""
    if not descriptions:
        return "[" + ", ".join(sql_literal(v) for v in values) + "]"
    items = [f"{{'label': {sql_literal(v)}, 'description': {sql_literal(d)}}}"
             for v, d in zip(values, descriptions, strict=True)]
    return "[\n        " + ",\n        ".join(items) + "]"


def ai_filter(prompt: str, *columns: str) -> str:
    return f"AI_FILTER(PROMPT({sql_literal(prompt)}, {', '.join(columns)}))"


def ai_classify(prompt: str, column: str, values: tuple[str, ...],
                descriptions: tuple[str, ...] = (), *more: str) -> str:
    args = ", ".join((column, *more))
    return (f"AI_CLASSIFY(PROMPT({sql_literal(prompt)}, {args}),\n"
            f"        {labels(values, descriptions)}):labels[0]::STRING")


@dataclass(frozen=True)
class Query:
    id: str
    description: str
    sql: str
    columns: tuple[str, ...]   # the benchmark's output columns, in order
    tables: tuple[str, ...]    # tables read


QUERIES: dict[str, Query] = {}


def tables_read(ids) -> set[str]:
    """The tables the queries `ids` read (the corpora a run of them needs generated)."""
    return {t for qid in ids for t in QUERIES[qid].tables}


def _q(qid: str, description: str, columns: tuple[str, ...], tables: tuple[str, ...],
       sql: str) -> None:
    QUERIES[qid] = Query(qid, description, sql.strip() + "\n", columns, tables)


def _where(*conditions: str) -> str:
    return "WHERE " + "\n  AND ".join(conditions) if conditions else ""


# ---------------------------------------------------------------- IMDB

def _reviews_filtered(*prompts: str) -> str:
    return f"SELECT r.id AS r\nFROM reviews AS r\n{_where(*(ai_filter(p, 'r.body') for p in prompts))}"


def _review_aspect_join(*prompts: str) -> str:
    return (f"SELECT r.id AS r, a.id AS a\nFROM reviews AS r\n"
            f"JOIN aspects AS a\n  ON {ai_filter(P.DISCUSS_ASPECT, 'r.body', 'a.aspect')}\n"
            f"{_where(*(ai_filter(p, 'r.body') for p in prompts))}")


def _imdb_chain(*r1_prompts: str) -> str:
    return f"""
SELECT r1.id AS r1, a1.id AS a1, r2.id AS r2, a2.id AS a2
FROM reviews AS r1
JOIN aspects AS a1
  ON {ai_filter(P.DISCUSS_ASPECT, 'r1.body', 'a1.aspect')}
JOIN reviews AS r2
  ON {ai_filter(P.DISCUSS_ASPECT, 'r2.body', 'a1.aspect')}
JOIN aspects AS a2
  ON {ai_filter(P.ASPECT_SENTIMENT, 'r2.body', 'a2.aspect')}
{_where(*(ai_filter(p, 'r1.body') for p in r1_prompts))}"""


_CRITICAL = f"""WITH critical AS (
    SELECT r.id, r.body,
           {ai_classify(P.IMDB_SENTIMENT, 'r.body', P.IMDB_SENTIMENT_LABELS)} AS sentiment
    FROM reviews AS r
)"""

_ra = ("reviews", "aspects")
_q("IMDB-1", "filter: F1", ("r",), ("reviews",), _reviews_filtered(P.F1))
_q("IMDB-2", "join: J1 (reviews x aspects)", ("r", "a"), _ra, _review_aspect_join())
_q("IMDB-3", "F1 -> J1", ("r", "a"), _ra, _review_aspect_join(P.F1))
_q("IMDB-4", "F1 -> F4 -> J1", ("r", "a"), _ra, _review_aspect_join(P.F1, P.F4))
_q("IMDB-5", "F1 -> F4 -> F5 -> J1", ("r", "a"), _ra, _review_aspect_join(P.F1, P.F4, P.F5))
_q("IMDB-6", "F1 -> F4", ("r",), ("reviews",), _reviews_filtered(P.F1, P.F4))
_q("IMDB-7", "F1 -> F4 -> F5", ("r",), ("reviews",), _reviews_filtered(P.F1, P.F4, P.F5))
_q("IMDB-8", "2 joins, same anchor: reviews x aspects x aspects", ("r", "a", "a2"), _ra, f"""
SELECT r.id AS r, a.id AS a, a2.id AS a2
FROM reviews AS r
JOIN aspects AS a
  ON {ai_filter(P.DISCUSS_ASPECT, 'r.body', 'a.aspect')}
JOIN aspects AS a2
  ON {ai_filter(P.ASPECT_SENTIMENT, 'r.body', 'a2.aspect')}""")
_q("IMDB-9", "3-join chain r1-a1-r2-a2", ("r1", "a1", "r2", "a2"), _ra, _imdb_chain())
_q("IMDB-10", "F1 -> 3-join chain r1-a1-r2-a2", ("r1", "a1", "r2", "a2"), _ra,
   _imdb_chain(P.F1))
_q("IMDB-11", "classify: sentiment of every review", ("r", "sentiment"), ("reviews",), f"""
SELECT r.id AS r,
       {ai_classify(P.IMDB_SENTIMENT, 'r.body', P.IMDB_SENTIMENT_LABELS)} AS sentiment
FROM reviews AS r""")
_q("IMDB-12", "F1 -> classify: genre", ("r", "genre"), ("reviews",), f"""
SELECT r.id AS r,
       {ai_classify(P.IMDB_GENRE, 'r.body', P.IMDB_GENRE_LABELS)} AS genre
FROM reviews AS r
WHERE {ai_filter(P.F1, 'r.body')}""")
_q("IMDB-13", "negative or mixed reviews -> J1, with their sentiment",
   ("r", "sentiment", "a"), _ra, f"""
{_CRITICAL}
SELECT c.id AS r, c.sentiment, a.id AS a
FROM critical AS c
JOIN aspects AS a
  ON {ai_filter(P.DISCUSS_ASPECT, 'c.body', 'a.aspect')}
WHERE c.sentiment IN ('negative', 'mixed')""")
_q("IMDB-14", "negative or mixed reviews -> classify: main complaint",
   ("r", "sentiment", "complaint"), ("reviews",), f"""
{_CRITICAL}
SELECT c.id AS r, c.sentiment,
       {ai_classify(P.IMDB_COMPLAINT, 'c.body', P.IMDB_COMPLAINT_LABELS)} AS complaint
FROM critical AS c
WHERE c.sentiment IN ('negative', 'mixed')""")
_q("IMDB-15", "negative or mixed reviews -> J1 -> classify: sentiment toward the aspect",
   ("r", "sentiment", "a", "aspect_sentiment"), _ra, f"""
{_CRITICAL}
SELECT c.id AS r, c.sentiment, a.id AS a,
       {ai_classify(P.IMDB_ASPECT_SENTIMENT, 'c.body', P.IMDB_ASPECT_SENTIMENT_LABELS, (),
                    'a.aspect')} AS aspect_sentiment
FROM critical AS c
JOIN aspects AS a
  ON {ai_filter(P.DISCUSS_ASPECT, 'c.body', 'a.aspect')}
WHERE c.sentiment IN ('negative', 'mixed')""")

# ---------------------------------------------------------------- BioDEX

_rt = ("reports", "terms")
_q("BIO-1", "filter: serious adverse event", ("r",), ("reports",), f"""
SELECT r.id AS r
FROM reports AS r
WHERE {ai_filter(P.SERIOUS_ADVERSE_EVENT, 'r.report')}""")
_q("BIO-2", "join: reports x terms", ("r", "m"), _rt, f"""
SELECT r.id AS r, m.id AS m
FROM reports AS r
JOIN terms AS m
  ON {ai_filter(P.REACTION, 'r.report', 'm.term')}""")
_q("BIO-3", "serious adverse event -> reaction join", ("r", "m"), _rt, f"""
SELECT r.id AS r, m.id AS m
FROM reports AS r
JOIN terms AS m
  ON {ai_filter(P.REACTION, 'r.report', 'm.term')}
WHERE {ai_filter(P.SERIOUS_ADVERSE_EVENT, 'r.report')}""")
_q("BIO-4", "3 filters + 2 joins: serious reports, neurological and cardiovascular reactions",
   ("r", "n", "c"), _rt, f"""
SELECT r.id AS r, n.id AS n, c.id AS c
FROM reports AS r
JOIN terms AS n
  ON {ai_filter(P.REACTION, 'r.report', 'n.term')}
JOIN terms AS c
  ON {ai_filter(P.REACTION, 'r.report', 'c.term')}
WHERE {ai_filter(P.SERIOUS_ADVERSE_EVENT, 'r.report')}
  AND {ai_filter(P.NEUROLOGICAL_REACTION, 'n.term')}
  AND {ai_filter(P.CARDIOVASCULAR_REACTION, 'c.term')}""")
_q("BIO-5", "classify: MedDRA organ class of every term", ("m", "organ_class"), ("terms",), f"""
SELECT m.id AS m,
       {ai_classify(P.BIO_ORGAN_CLASS, 'm.term', P.BIO_ORGAN_CLASS_LABELS)} AS organ_class
FROM terms AS m""")
_q("BIO-6", "serious reports x their cardiac or vascular reactions", ("r", "m"), _rt, f"""
WITH classified AS (
    SELECT m.id, m.term,
           {ai_classify(P.BIO_ORGAN_CLASS, 'm.term', P.BIO_ORGAN_CLASS_LABELS)} AS organ_class
    FROM terms AS m
)
SELECT r.id AS r, m.id AS m
FROM reports AS r
JOIN classified AS m
  ON {ai_filter(P.REACTION, 'r.report', 'm.term')}
WHERE {ai_filter(P.SERIOUS_ADVERSE_EVENT, 'r.report')}
  AND m.organ_class IN ('cardiac disorders', 'vascular disorders')""")

# ---------------------------------------------------------------- FEVER

_ce = ("claims", "evidence")


def _claim_evidence(claim_prompts: tuple[str, ...] = (), evidence_prompts: tuple[str, ...] = (),
                    on: str = "") -> str:
    conditions = ([ai_filter(p, 'c.claim') for p in claim_prompts]
                  + [ai_filter(p, 'e.text') for p in evidence_prompts])
    join = ai_filter(P.SUPPORT, 'c.claim', 'e.text')
    if on:
        join = f"{on}\n AND {join}"
    return (f"SELECT c.id AS c, e.id AS e\nFROM claims AS c\nJOIN evidence AS e\n  ON {join}\n"
            f"{_where(*conditions)}")


def _fever_chain(claim_prompts: tuple[str, ...] = (), evidence_prompts: tuple[str, ...] = ()) -> str:
    conditions = ([ai_filter(p, f'{c}.claim') for c in ('c1', 'c2') for p in claim_prompts]
                  + [ai_filter(p, f'{e}.text') for e in ('e1', 'e2') for p in evidence_prompts])
    return f"""
SELECT c1.id AS c1, e1.id AS e1, c2.id AS c2, e2.id AS e2
FROM claims AS c1
JOIN evidence AS e1
  ON {ai_filter(P.SUPPORT, 'c1.claim', 'e1.text')}
JOIN claims AS c2
  ON {ai_filter(P.REFUTE, 'c2.claim', 'e1.text')}
JOIN evidence AS e2
  ON {ai_filter(P.SUPPORT, 'c2.claim', 'e2.text')}
{_where(*conditions)}"""


_q("FEV-1", "filter: F11 (about a person)", ("c",), ("claims",), f"""
SELECT c.id AS c
FROM claims AS c
WHERE {ai_filter(P.F11, 'c.claim')}""")
_q("FEV-2", "join: claims x evidence", ("c", "e"), _ce, _claim_evidence())
_q("FEV-3", "F11 -> J3", ("c", "e"), _ce, _claim_evidence((P.F11,)))
_q("FEV-4", "F11 -> F12 -> J3", ("c", "e"), _ce, _claim_evidence((P.F11, P.F12)))
_q("FEV-5", "F11 on claims, F13 on evidence, then J3", ("c", "e"), _ce,
   _claim_evidence((P.F11,), (P.F13,)))
_q("FEV-6", "F11 -> F12 on claims, F13 on evidence, then J3", ("c", "e"), _ce,
   _claim_evidence((P.F11, P.F12), (P.F13,)))
_q("FEV-7", "2 joins, same anchor: claims x evidence x evidence", ("c", "e", "e2"), _ce, f"""
SELECT c.id AS c, e.id AS e, e2.id AS e2
FROM claims AS c
JOIN evidence AS e
  ON {ai_filter(P.SUPPORT, 'c.claim', 'e.text')}
JOIN evidence AS e2
  ON {ai_filter(P.REFUTE, 'c.claim', 'e2.text')}""")
_q("FEV-8", "3-join chain c1-e1-c2-e2", ("c1", "e1", "c2", "e2"), _ce, _fever_chain())
_q("FEV-9", "F11 on c1, c2; F13 on e1, e2; then the chain", ("c1", "e1", "c2", "e2"), _ce,
   _fever_chain((P.F11,), (P.F13,)))
_q("FEV-10", "F11, F13, SUPPORT asked only of a claim and its own page", ("c", "e"), _ce,
   _claim_evidence((P.F11,), (P.F13,), on="c.evidence_wiki_url = e.id"))
_q("FEV-11", "classify: topic; the political and historical claims", ("c", "topic"),
   ("claims",), f"""
WITH topics AS (
    SELECT c.id,
           {ai_classify(P.FEV_TOPIC, 'c.claim', P.FEV_TOPIC_LABELS)} AS topic
    FROM claims AS c
)
SELECT t.id AS c, t.topic
FROM topics AS t
WHERE t.topic IN ('politics', 'history')""")

# ---------------------------------------------------------------- LePaRD

_ds = ("citation_contexts", "citation_passages")


def _lepard(context_prompts: tuple[str, ...] = (), passage_prompts: tuple[str, ...] = ()) -> str:
    conditions = ([ai_filter(p, 'd.destination_context') for p in context_prompts]
                  + [ai_filter(p, 's.passage_text') for p in passage_prompts])
    return f"""
SELECT d.id AS d, s.id AS s
FROM citation_contexts AS d
JOIN citation_passages AS s
  ON {ai_filter(P.LEPJOIN, 'd.destination_context', 's.passage_text')}
{_where(*conditions)}"""


_q("LEP-1", "filter: LEP1 (reasoning does not apply)", ("d",), ("citation_contexts",), f"""
SELECT d.id AS d
FROM citation_contexts AS d
WHERE {ai_filter(P.LEP1, 'd.destination_context')}""")
_q("LEP-2", "join: citation contexts x cited passages", ("d", "s"), _ds, _lepard())
_q("LEP-3", "LEP1 -> join", ("d", "s"), _ds, _lepard((P.LEP1,)))
_q("LEP-4", "LEP1 -> LEP2 -> join", ("d", "s"), _ds, _lepard((P.LEP1, P.LEP2)))
_q("LEP-5", "LEP1 + LEP2 on excerpts, LEPS1 on passages, then the join", ("d", "s"), _ds,
   _lepard((P.LEP1, P.LEP2), (P.LEPS1,)))
_q("LEP-6", "constitutional or criminal law excerpts -> the passages they cite",
   ("d", "area", "s"), _ds, f"""
WITH areas AS (
    SELECT d.id, d.destination_context,
           {ai_classify(P.LEP_AREA, 'd.destination_context', P.LEP_AREA_LABELS)} AS area
    FROM citation_contexts AS d
)
SELECT d.id AS d, d.area, s.id AS s
FROM areas AS d
JOIN citation_passages AS s
  ON {ai_filter(P.LEPJOIN, 'd.destination_context', 's.passage_text')}
WHERE d.area IN ('constitutional law', 'criminal law')""")

# ---------------------------------------------------------------- agent traces

_q("AGENT-1", "filter: recovered after an unsuccessful approach", ("t",), ("agent_traces",), f"""
SELECT t.id AS t
FROM agent_traces AS t
WHERE {ai_filter(P.AGENT_RECOVERED, 't.trace')}""")
_q("AGENT-2", "filter: implemented a plausible fix", ("t",), ("agent_traces",), f"""
SELECT t.id AS t
FROM agent_traces AS t
WHERE {ai_filter(P.AGENT_IMPLEMENTED_FIX, 't.trace')}""")
_q("AGENT-3", "recovered -> classify: outcome", ("t", "outcome"), ("agent_traces",), f"""
SELECT t.id AS t,
       {ai_classify(P.AGENT_OUTCOME, 't.trace', P.AGENT_OUTCOME_LABELS,
                    P.AGENT_OUTCOME_DESCRIPTIONS)} AS outcome
FROM agent_traces AS t
WHERE {ai_filter(P.AGENT_RECOVERED, 't.trace')}""")
_q("AGENT-4", "unresolved traces -> classify: why the agent failed", ("t", "failure"),
   ("agent_traces",), f"""
WITH outcomes AS (
    SELECT t.id, t.trace,
           {ai_classify(P.AGENT_OUTCOME, 't.trace', P.AGENT_OUTCOME_LABELS,
                        P.AGENT_OUTCOME_DESCRIPTIONS)} AS outcome
    FROM agent_traces AS t
)
SELECT o.id AS t,
       {ai_classify(P.AGENT_FAILURE, 'o.trace', P.AGENT_FAILURE_LABELS,
                    P.AGENT_FAILURE_DESCRIPTIONS)} AS failure
FROM outcomes AS o
WHERE o.outcome = 'not resolved'""")

ORDER = tuple(QUERIES)
assert len(ORDER) == 42, len(ORDER)
