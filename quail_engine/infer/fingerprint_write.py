"""Recompute the committed fingerprints (infer/fingerprint.py, fingerprints.json) of the embedded
models: a maintainer's step, after checking a conversion by hand.

    python -m quail_engine.infer.fingerprint_write [gemma3-270m smollm2-135m]
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

import torch

from quail_engine.infer.embedded import embedded_gguf
from quail_engine.infer.file_digest import content_digest
from quail_engine.infer.fingerprint import PROMPTS, REFERENCE_FILE, compute, library_versions
from quail_engine.infer.loader import load_model


def write_references(names: Sequence[str]) -> None:
    """Recompute the committed fingerprints of the embedded models `names` in float32 on this
    CPU (a maintainer's step, after checking a conversion by hand: what is written here is what
    every later conversion and runtime is held to)."""
    data = json.loads(REFERENCE_FILE.read_text()) if REFERENCE_FILE.exists() else {"models": {}}
    for name in names:
        model, tokenizer, _ = load_model(name, "cpu", torch.float32)
        rows = [{"ids": r["ids"], "top": r["top"]} for r in compute(model, tokenizer)]
        data["models"][name] = {"gguf_sha256": content_digest(embedded_gguf(name)),
                                "prompts": list(PROMPTS), "made_with": library_versions(),
                                "rows": rows}
    REFERENCE_FILE.write_text(_dumps(data))


def _dumps(data: dict) -> str:
    """JSON with one line per prompt's row, so a changed fingerprint reads as a short diff."""
    models = []
    for name, entry in data["models"].items():
        head = {k: v for k, v in entry.items() if k != "rows"}
        fields = [f"   {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}"
                  for k, v in head.items()]
        rows = ",\n".join(f"    {json.dumps(r)}" for r in entry["rows"])
        fields.append(f'   "rows": [\n{rows}\n   ]')
        models.append(f"  {json.dumps(name)}: {{\n" + ",\n".join(fields) + "\n  }")
    return '{\n "models": {\n' + ",\n".join(models) + "\n }\n}\n"


if __name__ == "__main__":
    write_references(sys.argv[1:] or ["gemma3-270m", "smollm2-135m"])
