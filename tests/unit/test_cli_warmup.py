"""`quail warmup` loads the model once and says what the kernel cache holds; on the CPU nothing
is compiled, and neither DuckDB nor the SQL parser is needed for it."""

import json
import os
import subprocess
import sys

from quail_engine.settings import cache_path

CODE = ("import sys; sys.modules['duckdb'] = sys.modules['sqlglot'] = None; "
        "from quail_engine.cli import main; "
        "raise SystemExit(main(['warmup', '--model', 'smollm2-135m', '--device', 'cpu', "
        "'--json']))")


def test_warmup_loads_the_model_and_reports_the_kernel_cache(require_embedded):
    require_embedded("smollm2-135m")
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True,
                         env={**os.environ, "TRITON_CACHE_DIR": ""}, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["device"] == "cpu" and result["load_s"] > 0
    assert result["kernels_compiled_or_loaded"] == 0
    assert result["kernel_cache"]["dir"] == str(cache_path("kernels"))
