#!/usr/bin/env bash
# The engine thread's GIL handoff, A/B on one machine: QUAIL_GIL_HANDOFF_MS=off (CPython's 5 ms
# switch interval) against the default (0.1 ms, exec/engine_thread.py), QUAIL-B queries whose
# passes are small or many (IMDB-15, IMDB-10: host factor 1.30-1.35 in the committed table),
# GIL_ROUNDS rounds with the arms' order reversed in each later round (a card still cool runs
# its first minutes faster). On the CPU an operator beside a thread running Python waited ~4.4
# ms at 5 ms and ~55 us at 0.1 ms (bench/results/gil-handoff-cpu.md); this says what that is
# worth on a GPU. The device_session.sh step `gilab` runs it (results under $OUT; the call
# carries .carry/e2e with its tok/: `python -m bench e2e-gpu --prepare` writes them).
#
#   GIL_IDS=IMDB-15,IMDB-10 GIL_ROUNDS=2 bash bench/gpu/gil_ab.sh
set -u
OUT=${OUT:?OUT: where the results go}
IDS=${GIL_IDS:-IMDB-15,IMDB-10}
ROUNDS=${GIL_ROUNDS:-2}
mkdir -p "$OUT"
QB="python3 -m bench quailb --device cuda --scale sf0.1 --random-model qwen3-4b --precision fp8
    --override --workdir /tmp/quail-e2e --baseline-sample 0 --resume bench/results/quailb-gpu.json"
# the model directory and corpora first, untimed: the invocation that writes a model runs slower
$QB --only LEP-1 --redo LEP-1 --out "$OUT/quailb-warm.json" > "$OUT/quailb-warm.log" 2>&1
for round in $(seq "$ROUNDS"); do
  arms="off default"
  [ $((round % 2)) -eq 0 ] && arms="default off"
  for arm in $arms; do
    envs=(X=1)
    [ "$arm" = off ] && envs=(QUAIL_GIL_HANDOFF_MS=off)
    echo "== round $round: $arm"
    env "${envs[@]}" $QB --only "$IDS" --redo "$IDS" \
      --out "$OUT/quailb-$arm-$round.json" > "$OUT/quailb-$arm-$round.log" 2>&1
    grep -E "^\| [A-Z]+-[0-9]+ \| snowflake" "$OUT/quailb-$arm-$round.log" | cut -c1-160
  done
done
