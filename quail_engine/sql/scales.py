"""The numeric scale of a score: the range an operator's SQL value lies in.

A score is read as the probability of "yes" (0..1) and written in its operator's range: the
vendors' similarity ranges (-1..1, 0..1), or for BigQuery's AI.SCORE the scale its prompt
states ("rate from 1 to 10", "on a scale of 0-100"): the vendor's model writes a number on
that scale, so the probability is mapped onto it linearly (its lower end for a sure "no",
its upper end for a sure "yes"). The range travels as the `range` task argument "LO..HI".
"""

from __future__ import annotations

import re

DEFAULT = (0.0, 1.0)
_NUM = r"(-?\d+(?:\.\d+)?)"
# "from 1 to 10", "between 0 and 100", "scale of 1-5", "1 to 10 scale", "(1-10)", "1–5"
_PATTERNS = [
    re.compile(rf"\bfrom\s+{_NUM}\s+to\s+{_NUM}", re.I),
    re.compile(rf"\bbetween\s+{_NUM}\s+and\s+{_NUM}", re.I),
    re.compile(rf"\bscale\s+(?:of|from)?\s*{_NUM}\s*(?:-|–|to)\s*{_NUM}", re.I),
    re.compile(rf"{_NUM}\s*(?:-|–|to)\s*{_NUM}\s+scale\b", re.I),
    re.compile(rf"\(\s*{_NUM}\s*(?:-|–)\s*{_NUM}\s*\)"),
    re.compile(rf"\b(?:rate|score|rating|grade)\b[^.\d]{{0,40}}?{_NUM}\s*(?:-|–|to)\s*{_NUM}",
               re.I),
]


def stated_range(text: str) -> tuple[float, float] | None:
    """The first scale `text` states, as (low, high) with low < high; None if it states none."""
    for pattern in _PATTERNS:
        m = pattern.search(text)
        if m:
            lo, hi = float(m.group(1)), float(m.group(2))
            if lo < hi:
                return lo, hi
    return None


def range_text(lo: float, hi: float) -> str:
    return f"{lo:g}..{hi:g}"


def parse(text: str | None) -> tuple[float, float]:
    """'LO..HI' -> (LO, HI); None -> 0..1."""
    if not text:
        return DEFAULT
    lo, _, hi = text.partition("..")
    return float(lo), float(hi)
