#!/usr/bin/env bash
# The KV arena's share, A/B on one machine: QUAIL_KV_FRACTION=0.4 (the default) against 0.65,
# interleaved, KVSHARE_ROUNDS rounds (1: ~450 s with the untimed model writes; a second call
# with the arms in reverse order makes the second round). Session 45 measured 256-token
# generation 11-14% faster at 0.65 and QUAIL-B's FEV-6 6-8% slower with the same passes
# (bench/results/decode-gpu.md); the QUAIL-B rows now carry the allocator's retries per
# operator (`alloc_retries`), which say whether the caching allocator, with less memory beside a
# larger arena, is why. The device_session.sh step `kvshare` runs it (results under $OUT; the
# device call carries .carry/e2e, with its tok/, and
# .carry/tok-smollm2: `python -m bench e2e-gpu --prepare` writes them).
#
# An arm "0.65e" is the share 0.65 with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (the
# allocator maps more memory into a segment rather than keeping blocks of fixed sizes: fewer
# retries where blocks fragment).
#
#   KVSHARE_IDS=FEV-6,IMDB-1,LEP-1 KVSHARE_SHARES="0.4 0.65 0.65e" KVSHARE_ROUNDS=1 \
#     bash bench/gpu/kv_share_ab.sh
set -u
OUT=${OUT:?OUT: where the results go}
IDS=${KVSHARE_IDS:-FEV-6,IMDB-1,LEP-1}
SHARES=${KVSHARE_SHARES:-0.4 0.65 0.65e}
ROUNDS=${KVSHARE_ROUNDS:-1}
mkdir -p "$OUT"
QB="python3 -m bench quailb --device cuda --scale sf0.1 --random-model qwen3-4b --precision fp8
    --override --workdir /tmp/quail-e2e --baseline-sample 0 --resume bench/results/quailb-gpu.json"
DEC="python3 -m bench decode --hf-rows 0 --tokenizer .carry/tok-smollm2 --timeout 150
     --workdir /tmp/qd"
# the model directories and corpora first, untimed: the invocation that writes a model runs
# slower (its file still being written back when the queries load it)
$QB --only LEP-1 --redo LEP-1 --out "$OUT/quailb-warm.json" > "$OUT/quailb-warm.log" 2>&1
$DEC --runs 8x8 --out "$OUT/decode-warm.json" > "$OUT/decode-warm.log" 2>&1
for round in $(seq "$ROUNDS"); do
  for arm in $SHARES; do
    share=${arm%e}
    envs=(QUAIL_KV_FRACTION="$share")
    [ "$arm" != "$share" ] && envs+=(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)
    echo "== round $round: ${envs[*]}"
    env "${envs[@]}" $QB --only "$IDS" --redo "$IDS" \
      --out "$OUT/quailb-$arm-$round.json" > "$OUT/quailb-$arm-$round.log" 2>&1
    grep -E "^\| [A-Z]+-[0-9]+ \| snowflake|paged KV arena" "$OUT/quailb-$arm-$round.log" \
      | cut -c1-160
    env "${envs[@]}" $DEC --runs 2000x256 \
      --out "$OUT/decode-$arm-$round.json" > "$OUT/decode-$arm-$round.log" 2>&1
    grep -E "^\| 2000" "$OUT/decode-$arm-$round.log" | head -1
  done
done
