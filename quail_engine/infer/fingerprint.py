"""Model fingerprints: what a model file must compute, committed, so that a conversion or a
runtime that computes something else is refused instead of answering.

A fingerprint is, for a handful of fixed prompts, the token ids the tokenizer gives and the
TOP_K largest next-token logits the model gives in float32. The committed ones
(fingerprints.json beside this module) are keyed by the SHA-256 of the GGUF file they were made
from, so they apply to that file whatever it is called or wherever it lies. They are checked
when a GGUF is converted (infer/gguf.py: a conversion that disagrees is not installed), by
`dbt debug`, in CI (tests/unit/infer/test_fingerprint.py) and on a GPU
(`python -m bench trust --device cuda` checks it before measuring).

The module imports no torch until a fingerprint is computed (infer/embedded.py reads the
references to name a model file); infer/fingerprint_write.py recomputes the committed ones.

Tolerance: float32 logits from different CPUs, thread counts and GPUs differ in the last bits
of their sums (about 1e-4 at these magnitudes); a wrong tokenizer, a wrong convention (a norm
offset, an embedding scale, a rope base) or a mis-dequantized tensor moves them by whole units.
FP32_TOLERANCE sits between. Lower precisions are checked with their own tolerance by callers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from quail_engine.errors import ModelError

REFERENCE_FILE = Path(__file__).with_name("fingerprints.json")
TOP_K = 8
FP32_TOLERANCE = 0.02
PROMPTS = (
    "Review: The acting was wooden and the plot made no sense.\n"
    "Is this review positive? Answer yes or no.\nAnswer:",
    "The capital of France is",
    "Invoice 20461 totals $1,284.50 and is due on 2026-12-31; order #7 shipped.",
    "Café déjà vu: 日本語のテキスト, emoji 😀, tabs\tand  double  spaces.",
    "SELECT id, AI_CLASSIFY(body, ['billing', 'bug', 'other']) FROM tickets\n\n\nWHERE x <= 40",
    "def f(x):\n    return x  *  2  # <b>bold</b>\n",
)


def compute(model: Any, tokenizer: Any, prompts: Sequence[str] = PROMPTS,
            top_k: int = TOP_K) -> list[dict]:
    """Per prompt: its token ids (the tokenizer's own special tokens included) and the top_k
    next-token logits [[id, logit], ...], best first, computed one prompt at a time."""
    import torch  # torch only where a fingerprint is computed: embedded.py reads the references

    device = next(model.parameters()).device
    rows = []
    for text in prompts:
        ids = list(tokenizer.encode(text, add_special_tokens=True))
        tokens = torch.tensor(ids, dtype=torch.long, device=device)
        positions = torch.arange(len(ids), dtype=torch.long, device=device)
        bounds = torch.tensor([0, len(ids)], dtype=torch.int32, device=device)
        last = torch.tensor([len(ids) - 1], dtype=torch.long, device=device)
        with torch.inference_mode():
            hidden, _ = model(tokens, positions, bounds, [None], last)
            logits = model.logits(hidden)[0].float()
        values, top = torch.topk(logits, top_k)
        rows.append({"ids": ids, "top": [[int(i), round(float(v), 5)]
                                         for i, v in zip(top.tolist(), values.tolist())],
                     "logits": logits.cpu()})
    return rows


def differences(measured: Sequence[dict], reference: Sequence[dict],
                tolerance: float) -> tuple[list[str], float]:
    """(problems, largest logit difference): the token ids must match exactly; each reference
    top token's logit within `tolerance`; the measured best token the reference's unless the
    two are within `tolerance` of each other."""
    import torch  # as in compute

    problems, worst = [], 0.0
    for n, (got, want) in enumerate(zip(measured, reference, strict=True)):
        if got["ids"] != want["ids"]:
            problems.append(f"prompt {n + 1} tokenizes differently ({len(got['ids'])} tokens, "
                            f"expected {len(want['ids'])}; first difference at token "
                            f"{_first_difference(got['ids'], want['ids'])})")
            continue
        logits = got["logits"]
        for token, value in want["top"]:
            gap = abs(float(logits[token]) - value)
            worst = max(worst, gap)
        gaps = [abs(float(logits[t]) - v) for t, v in want["top"]]
        if max(gaps) > tolerance:
            token, value = want["top"][gaps.index(max(gaps))]
            problems.append(f"prompt {n + 1}: logit of token {token} is "
                            f"{float(logits[token]):.4f}, expected {value:.4f}")
        best = int(torch.argmax(logits))
        if best != want["top"][0][0] and float(logits[best]) - want["top"][0][1] > tolerance:
            problems.append(f"prompt {n + 1}: best next token {best}, expected "
                            f"{want['top'][0][0]}")
    return problems, worst


def _first_difference(a: Sequence[int], b: Sequence[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def references() -> dict:
    return json.loads(REFERENCE_FILE.read_text())["models"]


def reference_name(sha256: str) -> str | None:
    """The embedded model whose GGUF file has this SHA-256, or None."""
    return next((name for name, m in references().items() if m["gguf_sha256"] == sha256), None)


def reference_for(sha256: str) -> dict | None:
    """The committed fingerprint of the GGUF file with this SHA-256, or None."""
    name = reference_name(sha256)
    return references()[name] if name is not None else None


def library_versions() -> str:
    found = []
    for package in ("torch", "gguf", "tokenizers", "numpy", "safetensors"):
        try:
            found.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            found.append(f"{package} none")
    return ", ".join(found)


def check(model: Any, tokenizer: Any, reference: dict, what: str,
          tolerance: float = FP32_TOLERANCE) -> float:
    """Raise ModelError when `model` and `tokenizer` do not reproduce `reference`; else return
    the largest logit difference seen. `what` names the model in the message."""
    measured = compute(model, tokenizer, reference["prompts"], len(reference["rows"][0]["top"]))
    problems, worst = differences(measured, reference["rows"], tolerance)
    if problems:
        raise ModelError(
            f"{what} does not compute what its file defines ({len(problems)} fingerprint "
            f"difference{'s' if len(problems) > 1 else ''}: {'; '.join(problems[:3])}); "
            f"refusing to answer with it. Libraries here: {library_versions()}. Please report "
            "this with those versions; pinning them to requirements/constraints.txt's restores "
            "the tested combination")
    return worst
