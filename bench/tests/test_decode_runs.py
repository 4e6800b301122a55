"""bench/decode.py's run names and the speed of light of an fp8-KV run: the same as its bf16
twin's, its arena scaled back to the tokens a bf16 arena of its bytes holds."""

from types import SimpleNamespace

import pytest

from bench.decode import DATASHEETS, bf16_arena_tokens, parse_run, sheet_of, sol_seconds

CONFIG = SimpleNamespace(hidden_size=2560, num_heads=32, num_kv_heads=8, head_dim=128,
                         intermediate_size=9728, num_layers=36, vocab_size=151936)


@pytest.mark.parametrize("spec,name,kv_fp8,step_by_step", [
    ("2000x48", "decode-2000x48", False, False),
    ("2000x48k", "decode-2000x48k", True, False),
    ("16x8sk", "decode-16x8sk", True, True),
    ("2000x48cn", "decode-2000x48cn", False, False),
])
def test_run_suffixes(spec, name, kv_fp8, step_by_step):
    run = parse_run(spec)
    assert (run.name, run.kv_fp8, run.step_by_step) == (name, kv_fp8, step_by_step)


def test_fp8_kv_run_keeps_the_bf16_speed_of_light():
    bf16_tokens = 200_000
    page = 64
    # the fp8 arena of the same bytes: 256 bytes per head and token in bf16, 128 + 4 in fp8
    fp8_tokens = bf16_tokens * 256 // 132 // page * page
    assert bf16_arena_tokens(CONFIG, fp8_tokens) == pytest.approx(bf16_tokens, rel=1e-3)
    same = [sol_seconds(CONFIG, 2000, 300, 96_000, t, page)
            for t in (bf16_tokens, bf16_arena_tokens(CONFIG, fp8_tokens))]
    assert same[0]["sol_batch"] == same[1]["sol_batch"]
    assert same[0]["sol_s"] == pytest.approx(same[1]["sol_s"], rel=1e-3)


def test_a_run_on_an_h100_is_priced_on_its_own_datasheet_too():
    """Same FLOP rates, slower HBM: the prefill's bound is the H200's, each decode step (here
    memory-bound: 1,000 sequences' KV) takes the bandwidth ratio longer."""
    assert sheet_of("NVIDIA H100 80GB HBM3") == "H100"
    assert sheet_of("NVIDIA H200") == "H200" and sheet_of("NVIDIA A100-SXM4-80GB") is None
    h200, h100 = (sol_seconds(CONFIG, 2000, 300, 96_000, 200_000, 64, sheet)
                  for sheet in ("H200", "H100"))
    assert h100["sol_prefill_s"] == h200["sol_prefill_s"]
    assert h100["sol_step_ms"] == pytest.approx(
        h200["sol_step_ms"] * DATASHEETS["H200"][2] / DATASHEETS["H100"][2], rel=1e-3)
    assert h100["sol_s"] > h200["sol_s"]


def test_decode_band_loads_an_fp8_kv_row_with_the_arena_in_fp8(monkeypatch):
    from bench import decode_band
    from quail_engine.infer import factory

    calls = []
    monkeypatch.setattr(factory, "load_engine", lambda *a, **kw: calls.append((a, kw)))
    decode_band.load("m", "cuda", "fp8")
    decode_band.load("m", "cuda", "fp8" + decode_band.KV_FP8)
    assert calls == [(("m", "cuda", "fp8"), {}), (("m", "cuda", "fp8"), {"kv_fp8": True})]


def test_the_write_up_of_a_run_whose_transformers_baseline_failed():
    """A failed `generate` leaves an error row without counts; the write-up names it (the
    2026-12-06 device run lost its markdown to a KeyError on such a row)."""
    from bench.decode import markdown

    result = {"date": "2026-12-06", "machine": "m", "model": "x", "command": "c", "runs": [],
              "transformers": [{"path": "transformers", "max_tokens": 48,
                                "error": "AcceleratorError: device-side assert\nmore"},
                               {"path": "transformers", "rows": 256, "max_tokens": 256,
                                "output_tokens": 65535, "seconds": 50.0,
                                "output_tokens_per_s": 1310.7}]}
    text = markdown(result)
    assert "48 tokens, failed: AcceleratorError: device-side assert" in text
    assert "256 rows x 256 tokens: 65535 tokens in 50.0 s" in text


def test_a_run_splits_its_gpu_time_into_prefill_decode_and_idle():
    """The report's prefill passes (with GPU seconds) against the rest of the passes."""
    from bench.decode import gpu_split, markdown

    report = {"timeline": {"batches": [
        {"passes": 10, "pass_log": [{"tokens": 4000, "gpu_s": 0.03},
                                    {"tokens": 6000, "gpu_s": 0.05}]},
        {"passes": 5, "pass_log": [{"tokens": 2000, "gpu_s": 0.02}]}]}}
    split = gpu_split(report, engine_s=1.5, gpu_pass_s=1.1)
    assert split == {"prefill_passes": 3, "prefill_gpu_s": 0.1,
                     "prefill_tokens_per_gpu_s": 120000, "decode_passes": 12,
                     "decode_gpu_s": 1.0, "decode_ms_per_pass": 83.33, "gpu_idle_s": 0.4}
    # (the CPU's passes carry no GPU time: nothing to split)
    assert gpu_split({"timeline": {"batches": [{"passes": 3, "pass_log": [{"tokens": 9}]}]}},
                     1.0, 0.0) == {}
    result = {"date": "d", "machine": "m", "model": "x", "command": "c",
              "runs": [dict(rows=2, max_tokens=4, constrained=False, **split)]}
    assert "| 2 | 4 | False | 0.1 | 120000 | 12 | 1.0 | 83.33 | 0.4 |" in markdown(result)


def test_a_constrained_run_made_both_ways_counts_the_answers_alike(tmp_path):
    """'c' (forced first tokens prefilled) against 'cn' (decoded step by step): answers
    compared row by row (by id), the last run of each."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bench.decode import forced_start_agreement

    pq.write_table(pa.table({"id": [2, 0, 1], "s": ['{"a": 1}', None, '{"a": 2}']}),
                   tmp_path / "decode-3x8c.parquet")
    pq.write_table(pa.table({"id": [0, 1, 2], "s": [None, '{"a": 3}', '{"a": 1}']}),
                   tmp_path / "decode-3x8cn.parquet")
    runs = [parse_run(s) for s in ("3x8c", "3x8cn", "3x8h", "3x8c")]
    assert forced_start_agreement(runs, tmp_path) == [
        {"run": "decode-3x8c", "rows": 3, "same_answers": 2, "parsed_both": 2}]
    assert forced_start_agreement([parse_run("3x8c")], tmp_path) == []
