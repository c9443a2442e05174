#!/usr/bin/env bash
# The suite against a real engine, as CI runs it: vLLM's CPU build serving Gemma 3 270M.
# Called by .ci/run through `scripts/real_engine.sh run --`, which exports ENGINE_URL,
# ENGINE_MODEL and ENGINE_API_KEY. The run must end with its gate passing: every check
# passed, was skipped for a capability the deployment does not serve (in the engine's words),
# or failed as recorded in fixtures/expectations/gemma3-270m-vllm-cpu.yaml.
set -euo pipefail
cd "$(dirname "$0")/.."
read -r -a pytest <<< "${PYTEST:-.venv/bin/pytest}"
python_bin=${PYTHON:-.venv/bin/python}
out=${EA_REAL_ENGINE_OUT:-real-engine-results}
mkdir -p "$out"
stage() { printf '\n== real engine: %s (%s)\n' "$1" "$(date +%H:%M:%S)"; }
common=(--engine-url "$ENGINE_URL" --model "$ENGINE_MODEL" -p no:cacheprovider
        --request-timeout 600 --idle-timeout 120)

# The README's one command: capability discovery, the functional checks in parallel, then the
# throughput smoke and recall (at the context the profile declares, 32K) alone on the engine,
# with one verdict. Only the timeouts are widened: a 31K-token prefill takes minutes on CPU.
stage "the whole acceptance in one invocation (discovery, functional, throughput, recall)"
"${pytest[@]}" "${common[@]}" -n 2 --throughput-out="$out/throughput.json" \
    --alluredir="$out/allure" --gate-json="$out/gate.json"

stage "side by side with the reference engine (a smoke of the comparison, not a verdict)"
"$python_bin" -m engine_acceptance.compare --out "$out/compare" --quiet \
    --engine "vllm-cpu=$ENGINE_URL,model=$ENGINE_MODEL,api-key-env=ENGINE_API_KEY" \
    --reference reference:ttft_ms=100,tpot_ms=70,stream_chunk_tokens=1 --select "text or throughput" \
    -- --request-timeout 600 --idle-timeout 120 --throughput-shapes 128/16@1x2 --throughput-rounds 2 \
    --media-shapes image-512@1x2
head -60 "$out/compare/comparison.md" || true
