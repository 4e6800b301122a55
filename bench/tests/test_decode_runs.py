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
