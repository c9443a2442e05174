#!/usr/bin/env bash
# Turn allure-results/ into the Allure 2 dashboard and, optionally, photograph it.
#
#   scripts/allure_dashboard.sh [RESULTS_DIR] [REPORT_DIR]          generate the static report
#   SCREENSHOT=out.png scripts/allure_dashboard.sh [RESULTS] [REPORT]   ... and take a screenshot
#   PAGE='index.html#behaviors' | TEST=name-part [TAB=history]  which page to photograph
#   HISTORY=allure-history/ENGINE scripts/allure_dashboard.sh [RESULTS] [REPORT]
#       keep this engine's release history: the Trend and each check's History tab
#       show every earlier run whose report went through the same store folder
#   REPORT_URL=https://.../run-42/  where this report will be published (History links)
#
# Allure 2 (npm package allure-commandline, needs Java 8+) is used because it shows
# categories.json, environment.properties and executor.json on its overview page.
# It is installed once under $EA_TOOLS (default ~/.cache/engine-acceptance/tools).
# The screenshot uses headless Chromium (Debian package chromium) against a
# loopback-only HTTP server, since the report loads its data with XHR.
set -euo pipefail

results=${1:-allure-results}
report=${2:-allure-report}
history=${HISTORY:-}
tools=${EA_TOOLS:-$HOME/.cache/engine-acceptance/tools}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
allure_version=2.46.1

log() { printf '[allure-dashboard %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

[ -d "$results" ] || { echo "no results directory: $results (run the suite first)" >&2; exit 2; }
command -v java >/dev/null || { echo "java is required by Allure 2 (apt-get install default-jre-headless)" >&2; exit 2; }

# The store logic is plain Python (engine_acceptance/allure_history.py, standard library
# only), run from this checkout so no virtualenv is needed here.
store() { PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" python3 -m engine_acceptance.allure_history "$@"; }

if [ -n "$history" ]; then
    # Before generating: a bad store stops here, and the store is not touched until Allure succeeded.
    store seed --store "$history" --results "$results" ${REPORT_URL:+--report-url "$REPORT_URL"}
fi

allure="$tools/node_modules/.bin/allure"
if [ ! -x "$allure" ]; then
    log "installing allure-commandline $allure_version into $tools"
    mkdir -p "$tools"
    npm install --silent --prefix "$tools" "allure-commandline@$allure_version"
fi

log "generating $report from $results"
"$allure" generate --clean "$results" -o "$report" >/dev/null

if [ -n "$history" ]; then
    store keep --store "$history" --results "$results" --report "$report"
fi

if [ -n "${SCREENSHOT:-}" ]; then
    chromium=$(command -v chromium || command -v chromium-browser || true)
    [ -n "$chromium" ] || { echo "chromium is required for the screenshot (apt-get install chromium)" >&2; exit 2; }
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    python3 -m http.server "$port" --bind 127.0.0.1 --directory "$report" >/dev/null 2>&1 &
    server=$!
    profile=$(mktemp -d)
    trap 'kill "$server" 2>/dev/null || true; rm -rf "$profile"' EXIT
    sleep 1
    route=${PAGE:-index.html}
    if [ -n "${TEST:-}" ]; then
        # Test pages are addressed by uids that change with every generation: look them up.
        route=$(python3 - "$report" "$TEST" <<'PY'
import json, pathlib, sys
report, wanted = pathlib.Path(sys.argv[1]), sys.argv[2]
def walk(node):
    for child in node.get("children", []):
        if "children" not in child and wanted in child.get("name", ""):
            return node["uid"], child["uid"]
        found = walk(child) if "children" in child else None
        if found:
            return found
parent, uid = walk(json.loads((report / "data" / "behaviors.json").read_text())) or sys.exit(f"no test named like {wanted!r}")
print(f"index.html#behaviors/{parent}/{uid}")
PY
)
        route="$route${TAB:+/$TAB}"
    fi
    page="http://127.0.0.1:$port/$route"
    log "screenshot of $page -> $SCREENSHOT"
    # The background-networking flags keep Chromium from calling out of this closed network.
    "$chromium" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$profile" --window-size="${WINDOW:-1600,1400}" \
        --virtual-time-budget=8000 --screenshot="$SCREENSHOT" "$page" >/dev/null 2>&1
    [ -s "$SCREENSHOT" ] || { echo "no screenshot was written" >&2; exit 1; }
fi
log "done: open $report/index.html through a web server, or run: $allure open $report"
