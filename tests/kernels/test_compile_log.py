"""compile_log counts and logs Triton compilations: a kernel compiled here for Hopper (sm_90)
without a GPU, as a variant the engine's warm-up missed is compiled inside a query. In a child
process without TRITON_INTERPRET (under it, @triton.jit functions do not compile)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

ROOT = Path(__file__).resolve().parents[2]
CHILD = """
import json, logging, sys
import triton
from triton.backends.compiler import GPUTarget
from compile_log_kernel import fill_iota
from quail_engine.infer.gpu import compile_log

messages = []
handler = logging.Handler()
handler.emit = lambda record: messages.append(record.getMessage())
logging.getLogger(compile_log.__name__).addHandler(handler)
logging.getLogger(compile_log.__name__).setLevel(logging.INFO)
compile_log.install()
before = compile_log.totals()
src = triton.compiler.ASTSource(fn=fill_iota, signature={
    "x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}, constexprs={"BLOCK": 64},
    attrs={(0,): [["tt.divisibility", 16]]})
triton.compile(src, target=GPUTarget("cuda", 90, 32))
after = compile_log.totals()
print(json.dumps({"count": after[0] - before[0], "seconds": after[1] - before[1],
                  "messages": messages}))
"""


def test_a_compilation_is_counted_and_logged_with_its_kernel_constants_and_divisibility(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(TRITON_CACHE_DIR=str(tmp_path), PYTHONPATH=os.pathsep.join(
        [str(ROOT), str(Path(__file__).parent), env.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["count"] == 1 and result["seconds"] > 0
    (message,) = result["messages"]
    assert "compiled fill_iota" in message and "'BLOCK': 64" in message, message
    assert message.endswith("; divisible by 16: x_ptr"), message
