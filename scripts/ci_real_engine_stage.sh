#!/usr/bin/env bash
# The suite against a real engine, as CI runs it: vLLM's CPU build serving Gemma 3 270M.
# Called by .ci/run through `scripts/real_engine.sh run --`, which exports ENGINE_URL,
# ENGINE_MODEL and ENGINE_API_KEY. Each stage must end with its gate passing: every
# check passed, was skipped for a capability the model lacks, or failed as recorded
# in fixtures/expectations/gemma3-270m-vllm-cpu.yaml.
set -euo pipefail
cd "$(dirname "$0")/.."
read -r -a pytest <<< "${PYTEST:-.venv/bin/pytest}"
out=${EA_REAL_ENGINE_OUT:-real-engine-results}
mkdir -p "$out"
stage() { printf '\n== real engine: %s (%s)\n' "$1" "$(date +%H:%M:%S)"; }
common=(--engine-url "$ENGINE_URL" --model "$ENGINE_MODEL" -p no:cacheprovider
        --request-timeout 600 --idle-timeout 120)

stage "functional checks"
"${pytest[@]}" "${common[@]}" --alluredir="$out/allure-functional" --gate-json="$out/gate-functional.json"

stage "throughput smoke"
"${pytest[@]}" "${common[@]}" -m throughput --throughput-shapes smoke \
    --throughput-out="$out/throughput.json" --alluredir="$out/allure-throughput" --gate-json="$out/gate-throughput.json"

stage "recall at 4K tokens"
"${pytest[@]}" "${common[@]}" -m "recall or recall_1m" --recall-tokens=4096 \
    --alluredir="$out/allure-recall" --gate-json="$out/gate-recall.json"
