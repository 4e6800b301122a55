#!/usr/bin/env bash
# Several GPU steps in one device call, each bounded in time, every result tarred to $OUT after
# each step (a call cut short still returns what finished). Runs the committed tree carried as
# .carry/head.tar (`git archive HEAD -o .carry/head.tar`) when present, else the working tree.
#
#   bash bench/gpu/device_session.sh STEP[:SECONDS] ...      (in the device call, repo root)
#   DRY=1 bash bench/gpu/device_session.sh e2e-fp8 psbench    (print the commands only)
#
# Wheels: .carry/core/whl or .carry/e2e/whl (duckdb, sqlglot, ...: see bench/e2e_gpu.py
# --prepare), and .carry/cudnn/whl (nvidia-cudnn-frontend's cp312 wheel, for the fp8probe
# step: `pip download --no-deps --only-binary=:all: --python-version 3.12 --platform
# manylinux_2_28_x86_64 -d .carry/cudnn/whl nvidia-cudnn-frontend`), installed once per
# machine into /tmp/site. Ray: its cp312 wheel (from
# `bench/ray_scaling.py --prepare-ray`) cut into parts named ray-*.whl.part0, .part1, ... under
# .carry/ray*/, carried in separate calls while the machine is held (each call copies what it
# carries to /tmp/ray-parts; the `ray` step joins them and installs them with every other wheel
# carried there: msgpack, and jsonschema, jsonschema-specifications, referencing and rpds-py,
# which Ray imports and the GPU image lacks).
# Steps share one random-weight Qwen3-4B directory, /tmp/quail-e2e/model-qwen3-4b.
set -u
REPO=$(pwd)
FINAL_OUT=${OUT:-$REPO/bench/results/local}
RES=/tmp/res
MODEL=/tmp/quail-e2e/model-qwen3-4b
mkdir -p "$FINAL_OUT" "$RES" /tmp/ray-parts

if [ -z "${DRY:-}" ]; then
  nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
  for part in "$REPO"/.carry/ray*/*; do [ -f "$part" ] && cp -n "$part" /tmp/ray-parts/; done
  if [ -f .carry/head.tar ]; then
    rm -rf /tmp/head && mkdir -p /tmp/head && tar xf .carry/head.tar -C /tmp/head
    ln -sfn "$REPO/.carry" /tmp/head/.carry
    cd /tmp/head || exit 1
  fi
  for whl in "$REPO"/.carry/core/whl "$REPO"/.carry/e2e/whl "$REPO"/.carry/cudnn/whl; do
    if [ -d "$whl" ] && [ ! -f "/tmp/site/.$(basename "$(dirname "$whl")")" ]; then
      python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$whl"/*.whl \
        && touch "/tmp/site/.$(basename "$(dirname "$whl")")"
    fi
  done
fi
export PYTHONPATH=/tmp/site:$(pwd) PYTHONUNBUFFERED=1 DO_NOT_TRACK=1

# the suite's latest result: this machine's own from an earlier call while it stayed warm, else
# the committed one the tree carries
quailb_resume() { ls $RES/quailb/quailb-gpu.json 2>/dev/null || echo bench/results/quailb-gpu.json; }

have_model() { [ -f $MODEL/model.safetensors ] && echo "--model $MODEL"; }

command_of() {  # the command line of a step
  case $1 in
    e2e-fp8) echo "python3 -m bench e2e-gpu --precisions fp8 --workloads filter --paths query,engine \
      --sharing ${SHARING:-on,off} --filter-docs 20000 --query-timeout 200 --keep-logs --budget-s $(( $2 - 15 ))" ;;
    e2e-bf16) echo "python3 -m bench e2e-gpu --precisions bf16 --workloads filter --paths query,engine \
      --filter-docs 20000 --query-timeout 200 --keep-logs --budget-s $(( $2 - 15 ))" ;;
    e2e-join) echo "python3 -m bench e2e-gpu --precisions fp8 --workloads join --paths query,engine \
      --join-anchors ${JOIN_ANCHORS:-500} --query-timeout 300 --keep-logs --budget-s $(( $2 - 15 ))" ;;
    e2e-dbt) echo "python3 -m bench e2e-gpu --precisions fp8 --workloads filter --paths query,dbt \
      --filter-docs 20000 --query-timeout 200 --keep-logs --budget-s $(( $2 - 15 ))" ;;
    pscheck) echo "python3 tests/device/prefix_sharing_check.py --shape qwen3-4b \
      --reference ${PS_REFERENCE:-64}" ;;
    psbench) echo "python3 -m bench prefix-sharing --device cuda --precision fp8 \
      --quailb-rows ${PS_ROWS:-300} --hf --timeout $(( $2 * 2 / 5 )) $(have_model)" ;;
    fp8block) echo "python3 tests/device/fp8_block_check.py --prompts 400" ;;
    fp8bench) echo "python3 -m bench gpu --models qwen3-4b --dtypes fp8,fp8-block --engines quail \
      --workloads filter --filter-docs 20000" ;;
    ray) echo "python3 -m bench ray-scaling --device cuda --precision fp8 --workers 1 \
      --filter-docs 5000 --join-anchors 20 --join-partners 1100 --repeat 1 $(have_model)" ;;
    quailb) echo "python3 -m bench quailb --device cuda --scale sf0.1 --random-model qwen3-4b \
      --precision fp8 --override --workdir /tmp/quail-e2e --budget-s $(( $2 - ${QUAILB_TAIL:-60} )) \
      ${QUAILB_ONLY:+--only $QUAILB_ONLY} ${QUAILB_REDO:+--redo $QUAILB_REDO} \
      --resume $(quailb_resume) --out \$OUT/quailb-gpu.json" ;;
    quailb-sf1) echo "python3 -m bench quailb --device cuda --scale sf1.0 --only BIO-4 \
      --sample reports=${SF1_REPORTS:-200} --random-model qwen3-4b --precision fp8 --override \
      --workdir /tmp/quail-e2e --baseline-sample ${SF1_BASELINE:-32} \
      --out \$OUT/quailb-gpu-bio4-sf1.json" ;;
    e2e-ab) echo "python3 -m bench e2e-gpu --precisions fp8 --workloads ${AB_WORKLOADS:-filter} --paths query \
      --filter-docs 20000 --ab ${AB_TREE:-.carry/old} --ab-rounds ${AB_ROUNDS:-2} --query-timeout 200 \
      --keep-logs --budget-s $(( $2 - 15 ))" ;;
    cold) echo "python3 -m bench cold_start --random-model qwen3-4b --tokenizer .carry/tok-smollm2 \
      --device cuda --precision fp8 --timeout $(( $2 / 3 )) --out \$OUT/cold_start.json" ;;
    decodetiles) echo "python3 -m bench.probes.decode_attention --seqs 1024 2048 --out \$OUT \
      && python3 -m bench.probes.decode_attention --seqs 1024 2048 --kv-fp8 --out \$OUT" ;;
    fp8probe) echo "python3 -m bench.probes.fp8_attention" ;;
    profile) echo "python3 -m bench.probes.profile_query ${PROFILE_ROUTES:+--routes} \
      --ids \"${PROFILE_IDS-BIO-2,AGENT-1}\" --first ${PROFILE_FIRST:-8} --count ${PROFILE_COUNT:-6} \
      --workdir /tmp/quail-e2e" ;;
    passes) echo "python3 -m bench.probes.attention_passes --ids ${PASSES_IDS:-IMDB-1@2,LEP-2@2,AGENT-1@8} \
      --count ${PASSES_COUNT:-3} --workdir /tmp/quail-e2e" ;;
    setup) echo "python3 -m bench.probes.call_setup --ids ${SETUP_IDS:-IMDB-8} --workdir /tmp/quail-e2e" ;;
    ab) echo "python3 -m bench.probes.ab_routes --ids ${AB_IDS:-BIO-1} --order ${AB_ORDER:-on,off,on} \
      --workdir /tmp/quail-e2e" ;;
    kvshare) echo "bash bench/gpu/kv_share_ab.sh" ;;
    gilab) echo "bash bench/gpu/gil_ab.sh" ;;
    small) echo "python3 -m bench.probes.small_passes --out \$OUT/small_passes.json" ;;
    *) echo "unknown step $1" >&2; return 1 ;;
  esac
}

install_ray() {
  python3 -c "import ray" 2>/dev/null && return 0
  local parts=(/tmp/ray-parts/ray-*.part*)
  [ -f "${parts[0]}" ] || { echo "no Ray parts carried"; return 1; }
  local wheel=${parts[0]%.part*}
  cat /tmp/ray-parts/ray-*.part* > "/tmp/$(basename "$wheel")"
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
    "/tmp/$(basename "$wheel")" /tmp/ray-parts/*.whl
}

for spec in "$@"; do
  name=${spec%%:*}; secs=${spec#*:}; [ "$secs" = "$spec" ] && secs=300
  cmd=$(command_of "$name" "$secs") || exit 2
  if [ -n "${DRY:-}" ]; then echo "$name ($secs s): $cmd"; continue; fi
  [ "$name" = ray ] && { install_ray || continue; }
  mkdir -p "$RES/$name"
  echo "== $name ($secs s) $(date +%T): $cmd"
  OUT=$RES/$name timeout -k 10 "$secs" bash -c "$cmd" > "$RES/$name/log" 2>&1
  echo "== $name exit $? $(date +%T)"
  tail -n 4 "$RES/$name/log"
  tar czf "$FINAL_OUT/results.tgz" -C "$RES" .
done
