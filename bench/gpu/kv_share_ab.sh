#!/usr/bin/env bash
# The KV arena's share, A/B on one machine: QUAIL_KV_FRACTION=0.4 (the default) against 0.65,
# interleaved, two rounds. Session 45 measured 256-token generation 10-13% faster at 0.65 and
# QUAIL-B's FEV-6 6-8% slower with the same passes (bench/results/decode-gpu.md); the QUAIL-B
# rows now carry the allocator's retries per operator (`alloc_retries`), which says whether the
# caching allocator's cache, smaller beside a larger arena, is why. The device_session.sh step
# `kvshare` runs it (results under $OUT; the device call carries .carry/e2e, with its tok/, and
# .carry/tok-smollm2: `python -m bench e2e-gpu --prepare` writes them).
#
#   KVSHARE_IDS=FEV-6,IMDB-1,LEP-1 KVSHARE_SHARES="0.4 0.65" bash bench/gpu/kv_share_ab.sh
set -u
OUT=${OUT:?OUT: where the results go}
IDS=${KVSHARE_IDS:-FEV-6,IMDB-1,LEP-1}
SHARES=${KVSHARE_SHARES:-0.4 0.65}
mkdir -p "$OUT"
QB="python3 -m bench quailb --device cuda --scale sf0.1 --random-model qwen3-4b --precision fp8
    --override --workdir /tmp/quail-e2e --baseline-sample 0 --resume bench/results/quailb-gpu.json"
DEC="python3 -m bench decode --hf-rows 0 --tokenizer .carry/tok-smollm2 --timeout 150
     --workdir /tmp/qd"
# the model directories and corpora first, untimed: the invocation that writes a model runs
# slower (its file still being written back when the queries load it)
$QB --only LEP-1 --redo LEP-1 --out "$OUT/quailb-warm.json" > "$OUT/quailb-warm.log" 2>&1
$DEC --runs 8x8 --out "$OUT/decode-warm.json" > "$OUT/decode-warm.log" 2>&1
for round in 1 2; do
  for share in $SHARES; do
    echo "== round $round, QUAIL_KV_FRACTION=$share"
    QUAIL_KV_FRACTION=$share $QB --only "$IDS" --redo "$IDS" \
      --out "$OUT/quailb-$share-$round.json" > "$OUT/quailb-$share-$round.log" 2>&1
    grep -E "^\| [A-Z]+-[0-9]+ \| snowflake|paged KV arena" "$OUT/quailb-$share-$round.log" \
      | cut -c1-160
    QUAIL_KV_FRACTION=$share $DEC --runs 2000x256 --out "$OUT/decode-$share-$round.json" \
      > "$OUT/decode-$share-$round.log" 2>&1
    grep -E "^\| 2000" "$OUT/decode-$share-$round.log" | head -1
  done
done
