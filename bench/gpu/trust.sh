#!/usr/bin/env bash
# The trust bench on the GPU machine (bench/trust.py --device cuda), with the embedded Gemma GGUF
# carried there in parts (../shared/facts.md, "Trained weights on the GPU"): earlier calls copied
# .carry/g0..g3 to /tmp/g, this call carries .carry/g4 and .whl (gguf and sqlglot wheels, which
# that machine lacks). Writes $OUT/trust-gpu.json/.md and the bands it measured ($OUT/bands.json).
set -euo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 QUAIL_CACHE_DIR=/tmp/qc
mkdir -p /tmp/g /tmp/qc/models
cp .carry/g4/* /tmp/g/
gguf=/tmp/qc/models/gemma-3-270m-q4_k_m.gguf
cat /tmp/g/gpart0* > "$gguf"
echo "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818  $gguf" | sha256sum -c
python3 -c "import transformers, tokenizers, torch; print('transformers', transformers.__version__,
'tokenizers', tokenizers.__version__, 'torch', torch.__version__)"
python3 -m bench trust --device cuda --bands --models "$gguf" --out "$OUT/trust-gpu.json" \
    2>&1 | grep -v "^yes/no filter on one document" | tee "$OUT/log.txt"
cp quail_engine/infer/bands.json "$OUT/bands.json"
