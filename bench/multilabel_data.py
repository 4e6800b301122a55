"""Writes bench/data/multilabel.jsonl: short product reviews, each with the subset of LABELS it
mentions (the labels are true by construction: each review is put together from sentences that
each mention exactly one label, plus sentences that mention none). Deterministic (seeded), so
the committed file is what this writes.

    python -m bench.multilabel_data
"""

from __future__ import annotations

import json
import random
from itertools import combinations
from pathlib import Path

LABELS = ("price", "quality", "delivery", "customer service")
OUT = Path(__file__).parent / "data" / "multilabel.jsonl"

SENTENCES = {
    "price": [
        "It was cheap for what you get.", "Way too expensive for a basic kettle.",
        "The price was fair.", "I paid double what it costs elsewhere.",
        "Good value for the money.", "Overpriced, honestly.",
        "At this price I expected more.", "It was on sale for half the usual cost.",
        "A bargain at twenty dollars.", "The cost is hard to justify.",
    ],
    "quality": [
        "The stitching came apart after a week.", "Very well made and sturdy.",
        "The plastic feels flimsy.", "Solid build, it feels like it will last years.",
        "It broke the second time I used it.", "The materials are excellent.",
        "Poorly made, the handle wobbles.", "The finish is smooth and durable.",
        "It stopped working after two days.", "Great craftsmanship.",
    ],
    "delivery": [
        "Shipping took three weeks.", "It arrived a day early.",
        "The package was left in the rain by the courier.", "Delivery was fast.",
        "The parcel never showed up on the promised date.", "It came in two days with free shipping.",
        "The box arrived crushed.", "Tracking said delivered but it came a week later.",
        "Shipped quickly and well packed.", "The delivery driver was late twice.",
    ],
    "customer service": [
        "Support answered my email within an hour.", "The customer service agent was rude.",
        "I called the helpline and nobody picked up.", "The support team replaced it without fuss.",
        "Customer service ignored my refund request.", "The staff on the chat were very helpful.",
        "I waited forty minutes on hold.", "The seller's support was friendly and quick.",
        "Nobody from support ever replied.", "The representative sorted out my problem.",
    ],
    None: [
        "I bought it for my sister.", "The color is a nice blue.", "We use it every morning.",
        "It is the second one I have owned.", "My kids like it.", "It fits on the shelf.",
        "I mostly use it on weekends.", "It is smaller than I imagined.",
    ],
}


def subsets() -> list[tuple[str, ...]]:
    """Every subset of LABELS (the empty one too), each used several times."""
    out: list[tuple[str, ...]] = []
    for k in range(len(LABELS) + 1):
        out += list(combinations(LABELS, k))
    return out


def reviews(per_subset: int = 5, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for subset in subsets():
        for _ in range(per_subset):
            parts = [rng.choice(SENTENCES[label]) for label in subset]
            parts += rng.sample(SENTENCES[None], 2 if not subset else rng.randint(0, 1))
            rng.shuffle(parts)
            out.append({"text": " ".join(parts), "labels": list(subset)})
    rng.shuffle(out)
    return [{"id": i + 1, **r} for i, r in enumerate(out)]


def main() -> None:
    OUT.write_text("".join(json.dumps(r) + "\n" for r in reviews()))


if __name__ == "__main__":
    main()
