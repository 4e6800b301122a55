"""bench/pass_summary.py: the report's pass log grouped by kind, against the speed of light."""

from bench.pass_summary import markdown, summarize
from quail_engine.plan.cost import DeviceSpec, ModelSpec, Work, seconds

MODEL = ModelSpec("m", 2, 64, 4, 2, 16, 128, 1000)
DEVICE = DeviceSpec("d", 1e12, 1e11)


def test_passes_are_grouped_by_whether_they_read_a_prefix():
    report = {"timeline": {"batches": [
        {"pass_log": [{"tokens": 100, "seqs": 1, "prefix_tokens": 0, "attention_pairs": 5050,
                       "gpu_s": 0.5}]},
        {"pass_log": [{"tokens": 20, "seqs": 2, "prefix_tokens": 200, "attention_pairs": 2110,
                       "gpu_s": 0.25},
                      {"tokens": 10, "seqs": 1, "prefix_tokens": 100, "attention_pairs": 1055,
                       "gpu_s": 0.25}]},
        {}]}}
    got = summarize(report, MODEL, DEVICE)
    sol = seconds(MODEL, DEVICE, Work(100, 5050), 1)
    assert got["plain"] == {"passes": 1, "tokens": 100, "prefix_tokens": 0,
                            "attention_pairs": 5050, "gpu_s": 0.5, "tokens_per_s": 200,
                            "sol_s": float(f"{sol:.4g}"), "x_sol": round(0.5 / sol, 2)}
    over = got["over prefix"]
    assert (over["passes"], over["tokens"], over["prefix_tokens"]) == (2, 30, 300)
    assert over["attention_pairs"] == 3165 and over["gpu_s"] == 0.5
    assert over["x_sol"] == round(0.5 / seconds(MODEL, DEVICE, Work(30, 3165), 2), 2)
    assert len(markdown(got)) == 4  # header, rule, one line per kind
    assert summarize({"timeline": {"batches": []}}) == {} and markdown({}) == []
