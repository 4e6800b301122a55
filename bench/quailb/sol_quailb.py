"""The speed of light in the anchor's convention (`sol_quailb_s`, `x_sol_quailb`), beside ours
(`sol_s`, `x_sol`: plan/cost.seconds), so a QUAIL-B ratio compares like for like with the
anchor's published ones.

The anchor's bound (fsdatalab/quail, quail/sol.py `bound` and `dense_params`, derived in its
plans/sol_model.md section 6) prices the same work counts differently from ours in two ways:
attention at the bf16 dense rate (its attention runs on bf16 KV), where ours prices it at the
pass's own rate (fp8 in an fp8 run); and compute and memory overlapped once for the whole query,
where ours takes the roofline of each part (projections, MLP, attention) and adds them:

    T_dense     = 2 * P * tokens / R_dense         P: dense parameters, norms included
    T_attention = 4 * n_q * d_head * L * pairs / R_bf16
    T_memory    = (W * passes + kappa * (tokens + kv_read)) / BW
    SoL         = max(T_dense + T_attention, T_memory)

W is the resident weights (the dense parameters at the run's bytes per weight and the bf16
embedding table); the passes are ours (the bound takes the engine's batch as an input). Work
counts are the token ledger's minimum (quail_testing/quailb/ledger.py), as for ours."""

from __future__ import annotations

from quail_engine.plan.cost import DeviceSpec, ModelSpec, Work
from quail_engine.plan.device import H200_DATASHEET

EMBEDDING_BYTES = 2.0  # bf16 embedding table, as the anchor's W counts it


def dense_params(model: ModelSpec) -> int:
    """Parameters every token passes through: attention and gated-MLP projections, two RMS
    norms and the q/k head norms per layer, and the final norm (no embedding, no LM head)."""
    h, dh = model.hidden_size, model.head_dim
    per_layer = model.attn_params + model.mlp_params + 2 * h + 2 * dh
    return per_layer * model.num_layers + h


def seconds(model: ModelSpec, dense: DeviceSpec, work: Work, passes: float,
            attention: DeviceSpec = H200_DATASHEET) -> float:
    """The anchor's speed of light of `work` on `dense` (the run's GEMM rate and the memory
    bandwidth), attention at `attention`'s rate (the bf16 datasheet)."""
    t_dense = 2.0 * dense_params(model) * work.fresh_tokens / dense.flops
    t_attention = (4.0 * model.num_heads * model.head_dim * model.num_layers
                   * work.attention_pairs / attention.flops)
    resident = (dense_params(model) * model.weight_bytes
                + model.vocab_size * model.hidden_size * EMBEDDING_BYTES)
    moved = resident * passes + model.kv_bytes_per_token * (work.fresh_tokens + work.kv_reads)
    return max(t_dense + t_attention, moved / dense.bandwidth)


def work_of(row: dict) -> Work | None:
    """The minimum's work counts a row records (`min_work`), or None for a row without them."""
    counts = row.get("min_work")
    return None if counts is None else Work(**counts)


def work_counts(work: Work) -> dict:
    return dict(zip(("fresh_tokens", "attention_pairs", "kv_writes", "kv_reads"),
                    work.as_tuple()))
