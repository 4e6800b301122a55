"""The transformers baseline of issue 15: the same model directory in Hugging Face transformers
(bf16, sdpa attention, left-padded batches, the last position's logits, no reuse across rows),
run on a uniform sample of the prompts a query asked (quail_testing/quailb/ledger.py) and extrapolated
to all of them: seconds = measured seconds x prompts / sampled prompts (a uniform sample
estimates the sum of per-prompt costs without bias), the fastest of RUNS timings (each run's in
`hf_runs_s`). Marked `extrapolated` when the sample is not
every prompt. Needs transformers and a GPU (the H200 has transformers 5.17); elsewhere the
column says why it is empty."""

from __future__ import annotations

import time
from pathlib import Path

BATCH_TOKENS = 32_768  # padded tokens per batch (sdpa with a padding mask: keep it modest)
SAMPLE_TOKENS = 200_000  # prompt tokens per query's sample (agent traces run to 24k each)
# the sample is timed this many times and the fastest kept: one warm-up prompt left each batch
# shape's first use in the timing (session 18 measured the same prompts 0.7-4.5x apart between
# device calls, slowest on a call's first queries)
RUNS = 2


def cap(prompts: list[list[int]]) -> list[list[int]]:
    """The sample's first prompts up to SAMPLE_TOKENS (at least one; the sample is random)."""
    out, total = [], 0
    for p in prompts:
        if out and total + len(p) > SAMPLE_TOKENS:
            break
        out.append(p)
        total += len(p)
    return out


def load(model_dir: Path, device: str):
    """The transformers model, or a string saying why there is none."""
    if device != "cuda":
        return "transformers baseline runs on the GPU only"
    try:
        import torch
        import transformers
    except ImportError as exc:
        return f"transformers not installed ({exc})"
    try:
        return transformers.AutoModelForCausalLM.from_pretrained(
            str(model_dir), dtype=torch.bfloat16, attn_implementation="sdpa").cuda().eval()
    except Exception as exc:  # noqa: BLE001 - the table says why the column is empty
        return f"transformers could not load the model: {type(exc).__name__}: {exc}"[:300]


def _batches(prompts: list[list[int]]) -> list[list[list[int]]]:
    out, batch, width = [], [], 0
    for p in sorted(prompts, key=len):
        width = max(width, len(p))
        if batch and width * (len(batch) + 1) > BATCH_TOKENS:
            out.append(batch)
            batch, width = [], len(p)
        batch.append(p)
    if batch:
        out.append(batch)
    return out


def measure(model, prompts: list[list[int]], total: int) -> dict:
    """Seconds of `prompts` (a sample of `total` prompts) through `model`, extrapolated."""
    if isinstance(model, str) or not prompts:
        return {"hf_note": model if isinstance(model, str) else "no prompts"}
    import torch

    batches = _batches(prompts)
    runs = []
    try:
        with torch.inference_mode():
            _forward(model, batches[0][:1])  # first-call setup is not the query's
            for _ in range(RUNS):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for batch in batches:
                    _forward(model, batch)
                torch.cuda.synchronize()
                runs.append(time.perf_counter() - t0)
    except torch.cuda.OutOfMemoryError as exc:
        torch.cuda.empty_cache()
        return {"hf_note": f"transformers ran out of GPU memory: {str(exc)[:120]}"}
    scale = total / len(prompts)
    return {"hf_s": round(min(runs) * scale, 3), "hf_sampled": len(prompts),
            "hf_prompts": total, "hf_extrapolated": len(prompts) < total,
            "hf_runs_s": [round(r * scale, 3) for r in runs]}


def _forward(model, batch: list[list[int]]) -> None:
    import torch

    width = max(len(p) for p in batch)
    ids = torch.zeros(len(batch), width, dtype=torch.long)
    mask = torch.zeros(len(batch), width, dtype=torch.long)
    for i, p in enumerate(batch):
        ids[i, width - len(p):] = torch.tensor(p)
        mask[i, width - len(p):] = 1
    model(input_ids=ids.cuda(), attention_mask=mask.cuda(), logits_to_keep=1).logits.float().cpu()
