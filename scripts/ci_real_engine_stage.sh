#!/usr/bin/env bash
# The suite against two real engines, as CI runs it: vLLM's CPU build and llama.cpp's own
# llama-server (issue 40: what deployments of llama.cpp run, in place of llama-cpp-python's
# Python server), both serving Gemma 3 270M on loopback with the same API key.
# Called by .ci/run with EA_ENGINE_API_KEY set, after both engines' setups: it starts both
# servers (scripts/real_engine.sh, scripts/llama_server.sh) and stops them on the way out.
# vLLM takes about a minute to load on this machine, llama-server a few seconds, so llama-server's
# run goes first while vLLM loads in the background (the suite's --startup-timeout waits for a
# server still starting); vLLM is idle by the time llama-server's measurements begin, after its
# functional checks. Called through `scripts/real_engine.sh run --` instead (ENGINE_URL and
# ENGINE_MODEL exported), it uses that vLLM.
#
# Each engine gets the README's one command (discovery, the functional checks in parallel, then
# the throughput smoke and recall alone on the engine, one verdict), through
# `python -m engine_acceptance.compare --phase acceptance`, so the two runs have the identical
# request set and end in the seeds' side-by-side tables. Both gates must pass: every check
# passed, was skipped for what the deployment does not serve (in its words), or failed as a
# record in fixtures/expectations/ describes (gemma3-270m-*.yaml, vllm-0.32-contract.yaml,
# llama-server-b11312-contract.yaml).
#
# CI runs each engine smaller than the README's one command, where the figure is not the point
# (issue 27: the stage had to fit in 15 minutes; each cut is a SHORTFALL line in the verdict):
# - one sample per model-behaviour check (--trials=1, the profile says 2-3): pretrained Gemma 3
#   270M fails every sample of every answer and tool check alike (the records), and a sample of
#   a model that never stops costs up to 128 tokens, about 8 s on vLLM here (65 ms a token), 2 s on
#   llama-server (14 ms);
# - the smoke's two cells (concurrency 1 and 4) with 32 output tokens and one measured round of
#   2 and 4 requests (128/32@1x2,128/32@4x4, not 128/128 with 4 and 8), and one small media cell
#   (image-512 at concurrency 1): CI shows the measurement runs end to end on real engines, not
#   the engines' figures (those are benchmarks/README.md's). Concurrency 4 is kept for what it
#   says about batching: llama-server's four slots wrote 72 output tok/s at 128/32@4 against 51
#   alone (2026-12-05). Its refusal of images without an mmproj is a record, so more media cells
#   would add seconds, not checks;
# - recall at 1,024 tokens of prompt, counted by the model's own tokenizer.json for both engines,
#   so both get the same prompt text. Every prompt is prefilled on the CPU: on vLLM the recall
#   checks took 159 s of its run at 2,048 tokens, 117 s at 1,024 (2026-12-04); on llama-server 30 s
#   at 1,024 (2026-12-05). Pretrained Gemma 3 270M continues the document at every size tried (the
#   records); the README's command runs recall at 7,000.
# - vLLM's functional checks on six xdist workers, llama-server's on one (below, llama_workers):
#   the same requests; vLLM gets as many in flight as it serves best. vLLM's CPU build batches its decoding (about 65 ms a
#   token alone, 68 ms with four in flight): the text, sampling and tools checks took 139 s with four
#   workers, 218 s with two (2026-12-03); its whole run 426 s with four, 383 s with six and recall
#   at 1,024 tokens (2026-12-04). llama-server batches its four slots too (14 ms a token alone, 33 ms
#   with four in flight at 128/32@4), but the machine has two cores and vLLM loads beside it: its
#   one command took 389 s with two workers on 2026-12-05, a 3.5-minute stall of the shared machine
#   included (tokens at 3 to 6 s each while another helper's vLLM loaded), GATE PASS. The same number
#   sends recall's ten field-extraction prompts at once (compare passes workers=N as
#   --recall-concurrency): vLLM's recall took 236 s of its run one at a time (each ~20 s, 128 tokens
#   at ~155 ms a token after a 2,048-token prompt).
# The full command, run by hand on the same two engines, is in docs/ci-and-real-engines.md with its last result.
#
# The media checks run on a third server, the multimodal vLLM (scripts/multimodal_engine.sh: a tiny
# random-weight Qwen2-VL on the same engine venv), started in the background when the comparison
# ends, so it loads while vLLM's tool accuracy runs, and judged last with its own gate: the image,
# video, corrupt-media and error-code checks, the throughput smoke and one image and one video cell
# of the media smoke (MM_SELECTION below). On 2026-12-05, this block alone: ready after 117 s, the
# checks 72 s (95 s in another run); under other jobs' load the start took up to 387 s (the processor
# warm-up on the largest video its 8,192-token context holds is most of it), which the tool accuracy's
# 150-170 s mostly hides. What the model cannot read is a record naming it
# (fixtures/expectations/qwen2-vl-tiny-vllm-cpu.yaml); status codes, usage and streams are judged.
#
# The tool-accuracy set runs on vLLM alone, after the comparison, gated on the baseline recorded
# from this very engine (fixtures/tool_baselines/gemma-3-270m-vllm-0.32-cpu.json), so its trigger
# check is a regression against itself, not accuracy (the gate says so). CI sends 13 of its 319
# cases (26 requests, --tool-accuracy-cases: one of each shape, compared case by case with the
# whole set's baseline; a SHORTFALL line says so): every shape a parser can break on reaches the
# engine and the run's machinery runs end to end, where this model's results are records anyway.
# vLLM here answers the set's requests 16 at a time in waves of about 45 s (their tool schemas are
# a long prefill on one core): 80 cases took 450 s of the stage on 2026-12-04, 26 took 170 s, the
# whole set 8.5 minutes. The whole set is docs/ci-and-real-engines.md's command, run by hand;
# on llama-server, whose Gemma 3 template has no tool syntax (its tools are left out of the prompt,
# scripts/llama_server.sh says why), it would add minutes and test nothing the tool checks do not,
# so the comparison deselects it (-k "not tool_accuracy"). The same run on vLLM
# measures one small open-loop cell against an SLO: attainment and goodput, reported in its gate.
set -euo pipefail
cd "$(dirname "$0")/.."
python_bin=${PYTHON:-.venv/bin/python}
out=${EA_REAL_ENGINE_OUT:-real-engine-results}
recall_tokens=${EA_RECALL_TOKENS:-1024}
# llama-server's functional checks in flight at once: one. Its slots batch their decoding (-np 4), but
# a greedy reply decoded beside another request may take another token there (llama.cpp is not
# bit-identical across batch sizes: its engine profile's greedy_depends_on_batch), and with two in
# flight the same run read differently twice on 2026-12-05 (a recall key found by chance, the 240
# question's thinking-on sample): a record's strict outcome must not depend on which checks share a
# batch. The load cells still batch (concurrency 4).
llama_workers=${EA_LLAMA_SERVER_WORKERS:-1}
# The converted model's tokenizer (scripts/real_engine.sh puts it there).
tokenizer=${EA_TOKENIZER:-${EA_ENGINE_HOME:-$HOME/.cache/engine-acceptance/real-engine}/model/gemma-3-270m/tokenizer.json}
# The open-loop SLO cell (issue 18): 8 requests of 128/32 (after 4 warm-up ones), Poisson, seed 0, at half the rate
# vLLM's own 128/32@4 smoke cell completed minutes earlier, with limits a few times that cell's
# P99s (scripts/slo_from_smoke.py says why and how much): a ratio of the engine to itself, so
# the verdict does not depend on the shared machine's speed that hour. Fixed limits (2 s TTFT,
# 250 ms TPOT at 1 req/s) failed every request on a slow hour, 2026-12-03. EA_SLO_RATE,
# EA_SLO_TTFT_MS, EA_SLO_TPOT_MS and EA_SLO_E2E_MS set fixed ones instead (all four).
mkdir -p "$out"
stage() { printf '\n== real engines: %s (%s)\n' "$1" "$(date +%H:%M:%S)"; }
# finish_start PID LOG NAME: wait for a server's background start, show its own lines ("ready after
# N s"), and stop the stage if it failed.
finish_start() {
    local status=0
    wait "$1" || status=$?
    cat "$2"
    [ "$status" -eq 0 ] || { echo "$3 did not start (exit $status)" >&2; exit 1; }
}

mm_starting=""    # the multimodal vLLM's background start (this script always starts it, and stops it)
vllm_here=""      # this script started vLLM, so it stops it
vllm_starting=""  # the background start, while it waits for vLLM to be ready
stop_servers() {
    # A start still waiting is stopped first, so the pid file of the server it spawned exists.
    if [ -n "$vllm_starting" ]; then
        kill "$vllm_starting" 2>/dev/null || true
        wait "$vllm_starting" 2>/dev/null || true
    fi
    [ -z "$vllm_here" ] || scripts/real_engine.sh stop
    if [ -n "$mm_starting" ]; then
        kill "$mm_starting" 2>/dev/null || true
        wait "$mm_starting" 2>/dev/null || true
    fi
    scripts/multimodal_engine.sh stop
    scripts/llama_server.sh stop
}
trap stop_servers EXIT
if [ -n "${ENGINE_URL:-}" ]; then
    vllm_url=$ENGINE_URL
    vllm_model=$ENGINE_MODEL
else
    stage "vLLM's server, started in the background (scripts/real_engine.sh start; its log: $out/vllm-start.log)"
    [ -z "${EA_ENGINE_API_KEY:-}" ] || export ENGINE_API_KEY="$EA_ENGINE_API_KEY"
    vllm_here=1
    scripts/real_engine.sh start >"$out/vllm-start.log" 2>&1 &
    vllm_starting=$!
    vllm_url=$(scripts/real_engine.sh url)
    vllm_model=$(scripts/real_engine.sh model)
fi
stage "llama.cpp's llama-server beside vLLM (scripts/llama_server.sh start)"
scripts/llama_server.sh start
llama_url=$(scripts/llama_server.sh url)

stage "the README's one command on each engine, same request set, then side by side"
started=$(date +%s)
set +e
# llama-server first (see the top); ratios are still to vLLM (--base).
"$python_bin" -m engine_acceptance.compare --out "$out/compare" --phase acceptance --base vllm-cpu \
    --engine "llama-server=$llama_url,model=$(scripts/llama_server.sh model),api-key-env=ENGINE_API_KEY,workers=$llama_workers" \
    --engine "vllm-cpu=$vllm_url,model=$vllm_model,api-key-env=ENGINE_API_KEY,workers=6" \
    -- --recall-tokens="$recall_tokens" --tokenizer="$tokenizer" --request-timeout=600 --idle-timeout=120 \
    --startup-timeout=600 \
    --trials=1 --throughput-rounds=1 --throughput-shapes=128/32@1x2,128/32@4x4 \
    --media-shapes=image-512@1x2 -k "not tool_accuracy"
compared=$?
set -e
if [ -n "$vllm_starting" ]; then
    finish_start "$vllm_starting" "$out/vllm-start.log" vLLM
    vllm_starting=""
fi
echo "comparison of the two real engines: exit code $compared, $(( $(date +%s) - started )) s"
[ "$compared" -eq 0 ] || { echo "the comparison did not run through (exit $compared)" >&2; exit 1; }

stage "the multimodal vLLM, started in the background (scripts/multimodal_engine.sh start; its log: $out/multimodal-start.log)"
[ -z "${EA_ENGINE_API_KEY:-}" ] || export ENGINE_API_KEY="$EA_ENGINE_API_KEY"
scripts/multimodal_engine.sh start >"$out/multimodal-start.log" 2>&1 &
mm_starting=$!

stage "tool-call accuracy on vLLM, gated on its recorded baseline; one open-loop SLO cell"
started=$(date +%s)
if [ -n "${EA_SLO_RATE:-}" ]; then
    slo_cell="$EA_SLO_RATE $EA_SLO_TTFT_MS $EA_SLO_TPOT_MS $EA_SLO_E2E_MS"
    echo "SLO cell as given (EA_SLO_*): rate, ttft, tpot, e2e = $slo_cell"
else
    # The script says on stderr where the figures came from, or why there are none.
    slo_cell=$("$python_bin" scripts/slo_from_smoke.py "$out/compare/vllm-cpu/acceptance/throughput.json") \
        || { echo "no SLO cell to run: vLLM's smoke figures are missing (above)" >&2; exit 1; }
fi
read -r slo_rate slo_ttft_ms slo_tpot_ms slo_e2e_ms <<<"$slo_cell"
set +e
"$python_bin" -m pytest -p no:cacheprovider --engine-url="$vllm_url" --model="$vllm_model" -m "tool_accuracy or slo" \
    --tool-baseline=fixtures/tool_baselines/gemma-3-270m-vllm-0.32-cpu.json --tool-accuracy-cases=13 \
    --request-timeout=600 \
    --slo=ttft=$slo_ttft_ms,tpot=$slo_tpot_ms,e2e=$slo_e2e_ms --request-rate=$slo_rate --slo-requests=8 \
    --idle-timeout=120 --gate-json="$out/tool-accuracy/gate.json" --alluredir="$out/tool-accuracy/allure-results" \
    --run-bundle="$out/tool-accuracy/run-bundle"
accuracy=$?
set -e
echo "tool accuracy and the SLO cell on vLLM: exit code $accuracy, $(( $(date +%s) - started )) s"

stage "the media checks on the multimodal vLLM (tiny random-weight Qwen2-VL)"
started=$(date +%s)
MM_SELECTION="image or video or corrupt_media or error_codes or throughput"
set +e
# --startup-timeout: the suite waits for a server still loading (the start goes on in the background).
"$python_bin" -m pytest -p no:cacheprovider --engine-url="$(scripts/multimodal_engine.sh url)" \
    --model="$(scripts/multimodal_engine.sh model)" -n 2 -m "$MM_SELECTION" --startup-timeout=600 \
    --throughput-shapes=128/32@1x2 --throughput-rounds=1 --media-shapes=image-512@1x2,video-16frames@1x2 \
    --gate-json="$out/multimodal/gate.json" --alluredir="$out/multimodal/allure-results" \
    --run-bundle="$out/multimodal/run-bundle"
multimodal=$?
set -e
finish_start "$mm_starting" "$out/multimodal-start.log" "the multimodal vLLM"
mm_starting=""
echo "the media checks on the multimodal vLLM: exit code $multimodal, $(( $(date +%s) - started )) s"

stage "both gates, vLLM's tool accuracy and SLO cell, and the multimodal vLLM's gate"
"$python_bin" - "$out/compare" "$out/tool-accuracy/gate.json" "$out/multimodal/gate.json" <<'EOF'
"""Every engine's verdict: the comparison itself is not a gate, each engine's run is."""
import json
import sys
from pathlib import Path

failed = []
gates = sorted(Path(sys.argv[1]).glob("*/acceptance/gate.json"))
if len(gates) != 2:
    sys.exit(f"expected the gate.json of 2 engines, found {len(gates)}: {[str(g) for g in gates]}")
# The runs beside the comparison, each with its own gate: their labels.
labels = {Path(sys.argv[2]): "vllm-cpu tool accuracy and SLO", Path(sys.argv[3]): "vllm-cpu multimodal (qwen2-vl-tiny)"}
gates += labels
for gate_path in gates:
    if not gate_path.is_file():
        sys.exit(f"no verdict in {gate_path}: the run stopped before writing it")
    gate = json.loads(gate_path.read_text(encoding="utf-8"))
    engine = labels.get(gate_path) or gate_path.parent.parent.name
    print(f"{engine}: GATE {gate['gate'].upper()} {gate['totals']}")
    for failure in gate.get("gate_failures") or []:
        print(f"  {failure}")
    # Whose each baseline is: vLLM gated on a baseline of this same vLLM is a regression against itself.
    for entry in gate.get("baselines") or []:
        source = entry.get("provenance") or {}
        whose = (f"{source.get('engine')} {source.get('engine_version') or '(version unknown)'}, model "
                 f"{source.get('model')}, recorded {source.get('recorded_at')}") if source else "no provenance"
        print(f"  baseline ({entry['kind']}): {entry['comparison']}, {entry['path']}: {whose}")
    # The open-loop SLO cell's figures, so the CI log shows them beside the verdict.
    for figures in (gate.get("figures") or {}).values():
        slo = json.loads(figures["slo"]) if isinstance(figures.get("slo"), str) else figures.get("slo")
        limits = ", ".join(f"{k[:-3]} {v:g} ms" for k, v in (slo or {}).get("spec", {}).items()
                           if k.endswith("_ms") and v is not None)
        for cell in (slo or {}).get("cells", {}).values():
            print(f"  SLO ({limits}): {cell['key']}: attainment {cell['meeting']}/{cell['sent']}, goodput "
                  f"{cell['goodput_rps']:.2f} req/s, late sends {cell['late_sends']}, at most {cell['max_in_flight']} "
                  f"in flight; " + ", ".join(f"{k} {v:.0f}" for k, v in cell.items()
                                             if k.endswith("_ms") and isinstance(v, (int, float))))
    if gate["gate"] != "pass":
        failed.append(engine)
sys.exit(f"gate failed: {', '.join(failed)}" if failed else 0)
EOF
