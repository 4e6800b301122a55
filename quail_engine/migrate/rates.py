"""The measured speeds `quail migrate`'s cost estimate turns tokens into time with (cost.py),
each from a committed result file under bench/results/; the table's notes name them
(cost_table.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rate:
    """A measured speed: `tokens_per_s` of `work` ("prefill": fresh prompt tokens of filters,
    classify and score; "pairs": a join's requested tokens, anchor document + partner question
    per pair) on `device`, from the result file `source` (`what` quotes its row)."""

    device: str
    work: str
    tokens_per_s: float
    source: str
    what: str


RATES: tuple[Rate, ...] = (
    Rate("gpu", "prefill", 121_172.0, "a89455df92:bench/results/gpu-h200-e2e-2026-12-01.md",
         "1x H200, fp8, Qwen3-4B shape: filter 20,000 docs through quail query, 121,172 fresh "
         "tokens/s"),
    Rate("gpu", "pairs", 735.3e6 / 60, "a89455df92:bench/results/gpu-h200-e2e-2026-12-01.md",
         "1x H200, fp8, Qwen3-4B shape: join 500 x 1,100 through quail query, 735.3 M "
         "requested tokens/min"),
    Rate("cpu", "prefill", 1_930.0, "bench/results/readme-cpu.md",
         "2 vCPU, embedded gemma3-270m, bf16: engine_cpu --quail-only filter, 1,930 tokens/s"),
    Rate("cpu", "pairs", 8_555.0, "bench/results/engine-cpu.md",
         "2 vCPU, embedded model, bf16: join 8 anchors x 64 partners, 8,555 requested "
         "tokens/s"),
)


def rate(device: str, work: str) -> Rate:
    return next(r for r in RATES if r.device == device and r.work == work)
