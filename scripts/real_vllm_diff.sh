#!/usr/bin/env bash
# real_vllm_diff.sh — two runs of the real vLLM (scripts/real_engine.sh), the second started
# with one flag more, and the diff of their run bundles (engine-acceptance diff, docs/diff.md):
# the README's example of what changed between two releases of a deployment.
#
# Usage: scripts/real_vllm_diff.sh [OUT] [FLAGS]
#   OUT    folder for both runs and the diff (default /tmp/real-vllm-diff)
#   FLAGS  the server flags of the second run (default "--max-num-seqs 1": one sequence in a
#          batch, so four clients queue behind each other)
# Both runs send the same request set: the throughput smoke at concurrency 1 and 4 (2 cells,
# 3 rounds). Writes OUT/base/, OUT/new/ (run.json, gate.json, pytest.log) and OUT/diff.{md,json,txt}.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp/real-vllm-diff}"
flags="${2:---max-num-seqs 1}"
python_bin="${EA_PYTHON:-.venv/bin/python}"
mkdir -p "$out"

run_suite() {  # $1: the run's folder name, $2: the server's extra flags
    local folder="$out/$1"
    mkdir -p "$folder"
    echo "== $1: vLLM with extra flags '${2:-none}'"
    EA_ENGINE_EXTRA_ARGS="$2" scripts/real_engine.sh run -- bash -c '
        "$0" -m pytest -p no:cacheprovider --engine-url="$ENGINE_URL" --model="$ENGINE_MODEL" \
            -m throughput -k "not media" --throughput-shapes=128/32@1x4,128/32@4x8 --throughput-rounds=3 \
            --run-bundle="$1" --gate-json="$1/gate.json" --alluredir="$1/allure-results" >"$1/pytest.log" 2>&1
        status=$?; tail -n 3 "$1/pytest.log"; exit $status' "$python_bin" "$folder"
}

run_suite base ""
run_suite new "$flags"
set +e
"$python_bin" -m engine_acceptance.diff "$out/base" "$out/new" --markdown="$out/diff.md" --json="$out/diff.json" \
    | tee "$out/diff.txt"
echo "diff exit code: ${PIPESTATUS[0]}"
