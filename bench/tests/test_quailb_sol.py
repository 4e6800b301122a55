"""bench/quailb/sol_quailb.py: the anchor's speed of light (fsdatalab/quail quail/sol.py), checked
against the worked exercises of its plans/sol_model.md (section 7: Qwen3-4B fp8 on the H100's
halved datasheet peaks), and carried per query and in the totals beside ours."""

import pytest

from bench.quailb import sol_quailb
from bench.quailb.gpu_table import markdown, quailb_sol, totals
from quail_engine.plan.cost import DeviceSpec, ModelSpec, Work
from quail_engine.plan.device import H200_DATASHEET, H200_DATASHEET_FP8

QWEN3_4B = ModelSpec("qwen3-4b", num_layers=36, hidden_size=2560, num_heads=32, num_kv_heads=8,
                     head_dim=128, intermediate_size=9728, vocab_size=151936, weight_bytes=1.0)
H100_FP8 = DeviceSpec("h100", flops=1.979e15, bandwidth=3.35e12)
H100_BF16 = DeviceSpec("h100-bf16", flops=0.9895e15, bandwidth=3.35e12)


def test_dense_parameters_are_counted_as_the_anchor_counts_them():
    assert sol_quailb.dense_params(QWEN3_4B) == 3_633_511_936


# plans/sol_model.md section 7 prices T_dense with the rounded 3.6e9 parameters (6.4550 s,
# 7.1614 s) and its hand derivation with the counted ones (6.5148 s, 7.2277 s); quail/sol.py now
# counts them (`dense_params`), so the expected seconds are the hand T_dense plus T_attention.
@pytest.mark.parametrize("tokens, pairs, kv_read, passes, t_dense, t_attention", [
    (1_774_233, 444_634_043, 0, 17, 6.5148, 0.2650),          # IMDB-1, one filter
    (1_968_390, 518_189_762, 1_465_871, 18, 7.2277, 0.3089),  # IMDB-6, F1's question folded in
])
def test_the_anchors_worked_exercises(tokens, pairs, kv_read, passes, t_dense, t_attention):
    work = Work(fresh_tokens=tokens, attention_pairs=pairs, kv_reads=kv_read)
    got = sol_quailb.seconds(QWEN3_4B, H100_FP8, work, passes, attention=H100_BF16)
    assert got == pytest.approx(t_dense + t_attention, rel=1e-4)
    no_attention = sol_quailb.seconds(QWEN3_4B, H100_FP8, Work(tokens, 0, 0, kv_read), passes,
                                      attention=H100_BF16)
    assert got - no_attention == pytest.approx(t_attention, abs=5e-5)


def test_attention_is_priced_at_the_bf16_rate_where_ours_takes_the_fp8_one():
    work = Work(attention_pairs=1e12)
    flops = 4 * 32 * 128 * 36 * 1e12
    assert sol_quailb.seconds(QWEN3_4B, H200_DATASHEET_FP8, work, 0) == \
        pytest.approx(flops / H200_DATASHEET.flops)


def test_memory_bound_work_takes_the_memory_time():
    work = Work(fresh_tokens=1, kv_reads=1e9)
    moved = QWEN3_4B.kv_bytes_per_token * (1 + 1e9)
    assert sol_quailb.seconds(QWEN3_4B, H200_DATASHEET_FP8, work, 0) == \
        pytest.approx(moved / H200_DATASHEET_FP8.bandwidth)


def _row(name, run_s, work):
    row = {"id": name, "dialect": "snowflake", "ok": True, "run_s": run_s, "sol_s": 1.0,
           "x_sol": run_s, "min_work": sol_quailb.work_counts(work)}
    quailb_sol(row, QWEN3_4B, H200_DATASHEET_FP8)
    return row


def test_rows_and_totals_carry_both_conventions():
    rows = [_row("Q-1", 2.0, Work(1e6, 1e9)), _row("Q-2", 4.0, Work(2e6, 1e11)),
            {"id": "Q-3", "dialect": "snowflake", "ok": True, "run_s": 3.0, "sol_s": 1.0,
             "x_sol": 3.0}]  # measured before rows kept their work counts
    for r in rows[:2]:
        assert r["x_sol_quailb"] == round(r["run_s"] / r["sol_quailb_s"], 3)
    assert "x_sol_quailb" not in rows[2]
    t = totals(rows)
    assert t["queries_quailb"] == 2 and t["x_sol"] == 3.0
    assert t["x_sol_same_queries"] == 3.0  # ours over alone: 6 s over 2 s
    assert t["x_sol_quailb"] == round(6.0 / (rows[0]["sol_quailb_s"] + rows[1]["sol_quailb_s"]),
                                      2)
    md = markdown({"device": "cuda", "command": "python -m bench quailb", "scale": "0.1",
                   "model": "m", "precision": "fp8", "override": True, "queries": rows,
                   "totals": t})
    assert f"| {rows[0]['x_sol_quailb']:.2f} |" in md and "quail-bench's convention" in md
