#!/usr/bin/env bash
# The suite against two real engines, as CI runs it: vLLM's CPU build and llama.cpp's server
# (llama-cpp-python), both serving Gemma 3 270M on loopback with the same API key.
# Called by .ci/run through `scripts/real_engine.sh run --`, which exports ENGINE_URL,
# ENGINE_MODEL and ENGINE_API_KEY for vLLM; this script starts llama.cpp beside it
# (scripts/llama_engine.sh, already set up by .ci/run) and stops it on the way out.
#
# Each engine gets the README's one command (discovery, the functional checks in parallel, then
# the throughput smoke and recall alone on the engine, one verdict), through
# `python -m engine_acceptance.compare --phase acceptance`, so the two runs have the identical
# request set and end in the seeds' side-by-side tables. Both gates must pass: every check
# passed, was skipped for what the deployment does not serve (in its words), or failed as a
# record in fixtures/expectations/ describes (gemma3-270m-*.yaml, vllm-0.32-contract.yaml,
# llamacpp-0.3-contract.yaml). Recall runs at the largest size both serve: llama.cpp's context
# is 8,192 tokens (scripts/llama_engine.sh says why), so 7,000 tokens of prompt, counted by the
# model's own tokenizer.json for both engines, so both get the same prompt text. Two measured
# rounds and two small media cells keep llama.cpp's turn short: it serves one request at a time.
#
# The tool-accuracy set (638 requests) runs on vLLM alone, after the comparison, gated on the
# baseline recorded from this very engine (fixtures/tool_baselines/gemma-3-270m-vllm-0.32-cpu.json):
# on llama.cpp, which answers one request at a time at about 45 tokens/s, it would add about
# 15 minutes to CI, so the comparison deselects it (-k "not tool_accuracy").
set -euo pipefail
cd "$(dirname "$0")/.."
python_bin=${PYTHON:-.venv/bin/python}
out=${EA_REAL_ENGINE_OUT:-real-engine-results}
recall_tokens=${EA_RECALL_TOKENS:-7000}
# The converted model's tokenizer (scripts/real_engine.sh puts it there).
tokenizer=${EA_TOKENIZER:-${EA_ENGINE_HOME:-$HOME/.cache/engine-acceptance/real-engine}/model/gemma-3-270m/tokenizer.json}
mkdir -p "$out"
stage() { printf '\n== real engines: %s (%s)\n' "$1" "$(date +%H:%M:%S)"; }

vllm_url=$ENGINE_URL
vllm_model=$ENGINE_MODEL
stage "llama.cpp's server beside vLLM (scripts/llama_engine.sh start)"
scripts/llama_engine.sh start
trap 'scripts/llama_engine.sh stop' EXIT
llama_url=$(scripts/llama_engine.sh url)

stage "the README's one command on each engine, same request set, then side by side"
started=$(date +%s)
set +e
"$python_bin" -m engine_acceptance.compare --out "$out/compare" --phase acceptance --workers 2 \
    --engine "vllm-cpu=$vllm_url,model=$vllm_model,api-key-env=ENGINE_API_KEY" \
    --engine "llamacpp=$llama_url,model=gemma-3-270m,api-key-env=ENGINE_API_KEY" \
    -- --recall-tokens="$recall_tokens" --tokenizer="$tokenizer" --request-timeout=600 --idle-timeout=120 \
    --throughput-rounds=2 --media-shapes=image-512@1x2,image-512@4x4 -k "not tool_accuracy"
compared=$?
set -e
echo "comparison of the two real engines: exit code $compared, $(( $(date +%s) - started )) s"
[ "$compared" -eq 0 ] || { echo "the comparison did not run through (exit $compared)" >&2; exit 1; }

stage "tool-call accuracy on vLLM, gated on its recorded baseline"
started=$(date +%s)
set +e
"$python_bin" -m pytest -p no:cacheprovider --engine-url="$vllm_url" --model="$vllm_model" -m tool_accuracy \
    --tool-baseline=fixtures/tool_baselines/gemma-3-270m-vllm-0.32-cpu.json --request-timeout=600 \
    --idle-timeout=120 --gate-json="$out/tool-accuracy/gate.json" --alluredir="$out/tool-accuracy/allure-results"
accuracy=$?
set -e
echo "tool accuracy on vLLM: exit code $accuracy, $(( $(date +%s) - started )) s"

stage "both gates, and vLLM's tool accuracy"
"$python_bin" - "$out/compare" "$out/tool-accuracy/gate.json" <<'EOF'
"""Every engine's verdict: the comparison itself is not a gate, each engine's run is."""
import json
import sys
from pathlib import Path

failed = []
gates = sorted(Path(sys.argv[1]).glob("*/acceptance/gate.json"))
if len(gates) != 2:
    sys.exit(f"expected the gate.json of 2 engines, found {len(gates)}: {[str(g) for g in gates]}")
gates.append(Path(sys.argv[2]))
for gate_path in gates:
    if not gate_path.is_file():
        sys.exit(f"no verdict in {gate_path}: the run stopped before writing it")
    gate = json.loads(gate_path.read_text(encoding="utf-8"))
    engine = gate_path.parent.parent.name if gate_path.parent.name == "acceptance" else "vllm-cpu tool accuracy"
    print(f"{engine}: GATE {gate['gate'].upper()} {gate['totals']}")
    for failure in gate.get("gate_failures") or []:
        print(f"  {failure}")
    if gate["gate"] != "pass":
        failed.append(engine)
sys.exit(f"gate failed: {', '.join(failed)}" if failed else 0)
EOF
