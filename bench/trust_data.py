"""The trust bench's labelled prompts (bench/data/trust.jsonl), written for it.

100 short product reviews: 5 categories x 5 products x positive/negative x 2 phrasings, each
phrasing tagged with whether it speaks of price. Every review is asked 6 questions whose answer
the composition fixes: is it positive (filter), does it mention price or value (filter), its
sentiment (label of 2), its category (label of 5), and, as a two-table question, whether it is
about a product of its own category and of another one (pairs). 600 prompts.

    python -m bench.trust_data    # rewrites bench/data/trust.jsonl (deterministic)
"""

from __future__ import annotations

import json
import random
from pathlib import Path

OUT = Path(__file__).resolve().parent / "data" / "trust.jsonl"
CATEGORIES = {
    "kitchen": ("blender", "kettle", "toaster", "coffee maker", "frying pan"),
    "electronics": ("pair of headphones", "laptop", "phone charger", "speaker", "keyboard"),
    "clothing": ("rain jacket", "pair of running shoes", "wool sweater", "pair of jeans",
                 "pair of rain boots"),
    "books": ("novel", "cookbook", "biography", "travel guide", "poetry collection"),
    "furniture": ("desk chair", "bookshelf", "sofa", "bed frame", "dining table"),
}
# (phrase, mentions price)
POSITIVE = (
    ("I bought this {p} last month and it has been wonderful every single day.", False),
    ("This {p} was a bargain: excellent quality for such a low price.", True),
    ("Honestly the best {p} I have owned, I would happily buy it again.", False),
    ("The {p} is worth every penny, and it arrived two days early.", True),
)
NEGATIVE = (
    ("The {p} fell apart within a week and support never answered my emails.", False),
    ("Overpriced {p}: far too expensive for how cheaply it is made.", True),
    ("I regret buying this {p}; it disappointed me from the first day.", False),
    ("What a waste of money, this {p} is not worth half of what I paid.", True),
)
QUESTIONS = {
    "positive": "SELECT * FROM t WHERE AI_FILTER(PROMPT('Is this review positive? {0}', text))",
    "price": "SELECT * FROM t WHERE AI_FILTER(PROMPT('Does this review mention the price or "
             "value for money? {0}', text))",
    "sentiment": "SELECT AI_CLASSIFY(text, ['positive', 'negative']) FROM t",
    "category": "SELECT AI_CLASSIFY(text, ['kitchen', 'electronics', 'clothing', 'books', "
                "'furniture']) FROM t",
    "pair": "SELECT * FROM t JOIN c ON AI_FILTER(PROMPT('Is the review {0} about a product of "
            "the category {1}?', t.text, c.name))",
}


def reviews() -> list[dict]:
    out = []
    for category, products in CATEGORIES.items():
        for n, product in enumerate(products):
            for sentiment, phrases in (("positive", POSITIVE), ("negative", NEGATIVE)):
                for phrase, price in (phrases[n % 2 * 2], phrases[n % 2 * 2 + 1]) if n < 4 \
                        else (phrases[0], phrases[3]):
                    out.append({"text": phrase.format(p=product), "category": category,
                                "sentiment": sentiment, "price": price})
    return out


def prompts() -> list[dict]:
    rng = random.Random(7)
    rows = []
    for r in reviews():
        rows.append({"question": "positive", "values": [r["text"]],
                     "label": r["sentiment"] == "positive"})
        rows.append({"question": "price", "values": [r["text"]], "label": r["price"]})
        rows.append({"question": "sentiment", "values": [r["text"]], "label": r["sentiment"]})
        rows.append({"question": "category", "values": [r["text"]], "label": r["category"]})
        other = rng.choice([c for c in CATEGORIES if c != r["category"]])
        for category in (r["category"], other):
            rows.append({"question": "pair", "values": [r["text"], category],
                         "label": category == r["category"]})
    return rows


if __name__ == "__main__":
    rows = prompts()
    OUT.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"wrote {len(rows)} prompts to {OUT}")
