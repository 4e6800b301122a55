#!/usr/bin/env bash
# The trust bench on the GPU machine (bench/trust.py --device cuda), with an embedded GGUF carried
# there in parts (../shared/facts.md, "Trained weights on the GPU"): earlier calls copied all parts
# but the last to /tmp/g (Gemma: .carry/g0..g3 of `split -n 5 -d`; SmolLM2: .carry/s0 of
# `split -n 2 -d`), this call carries the last part's folder and a wheel folder ($WHEELS, default
# .whl: gguf, sqlglot and llguidance, which that machine lacks; duckdb is not needed and would
# not fit beside a part in one call's 64 MiB). Usage: bash bench/gpu/trust.sh [gemma|smollm2]. Writes
# $OUT/trust-gpu.json/.md, then the GPU precisions' decode bands (bench/decode_band.py:
# $OUT/decode-band-gpu.json/.md), and the bands both measured ($OUT/bands.json).
set -euo pipefail
which=${1:-gemma}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "${WHEELS:-.whl}"/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 QUAIL_CACHE_DIR=/tmp/qc
mkdir -p /tmp/g /tmp/qc/models
if [ "$which" = gemma ]; then
    cp .carry/g4/* /tmp/g/
    gguf=/tmp/qc/models/gemma-3-270m-q4_k_m.gguf
    sha=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
    cat /tmp/g/gpart0* > "$gguf"
else
    cp .carry/s1/* /tmp/g/
    gguf=/tmp/qc/models/SmolLM2-135M-Instruct.Q4_1.gguf
    sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
    cat /tmp/g/spart0* > "$gguf"
fi
echo "$sha  $gguf" | sha256sum -c
python3 -c "import transformers, tokenizers, torch; print('transformers', transformers.__version__,
'tokenizers', tokenizers.__version__, 'torch', torch.__version__)"
python3 -m bench trust --device cuda --bands --models "$gguf" --out "$OUT/trust-gpu.json" \
    2>&1 | grep -v "^yes/no filter on one document" | tee "$OUT/log.txt"
timeout -k 10 "${DECODE_BAND_S:-400}" python3 -m bench decode_band --device cuda \
    --precisions bf16 fp8 fp8-block --models "$gguf" --out "$OUT/decode-band-gpu.json" \
    2>&1 | tee "$OUT/decode-band-log.txt" || true
cp quail_engine/infer/bands.json "$OUT/bands.json"
