#!/usr/bin/env bash
# CI stage: the suite as a user installs it. Builds the wheel, installs it into a fresh
# virtualenv, and from an empty temporary folder (no checkout, no pytest.ini, no conftest):
#   1. `engine-acceptance` with no URL: the built-in reference engine, must pass;
#   2. `pytest -p engine_acceptance --engine-url=...` against a reference engine serving a
#      model no shipped profile knows, with a defect injected, and a --profiles-dir holding
#      a model profile for it and a record of the defect: the profile must be used, the
#      record must turn the defect into a known one, and the verdict (gate.json) must equal
#      that of the same run from the checkout.
# Usage: scripts/ci_wheel_stage.sh [WORK_DIR]   (run from the checkout, with .venv set up)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d /tmp/ea-wheel.XXXXXX)}
mkdir -p "$work"
echo "== wheel stage in $work"

"$repo/.venv/bin/pip" wheel --no-deps -q -w "$work/dist" "$repo"
wheel=$(ls "$work"/dist/engine_acceptance-*.whl)
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q "$wheel"
echo "installed $(basename "$wheel") into a fresh virtualenv"

empty="$work/empty"
mkdir -p "$empty"
cd "$empty"

echo "== 1. engine-acceptance, no URL (the built-in reference engine)"
"$work/venv/bin/engine-acceptance" -n 2 -q --gate-json="$work/builtin.gate.json"

echo "== 2. pytest -p engine_acceptance --engine-url=... with --profiles-dir"
team="$work/team-data"
mkdir -p "$team/models" "$team/expectations"
cat > "$team/models/team-chat.yaml" <<'EOF'
name: team-chat
description: A team's own model, known only to its own profile (CI wheel stage)
match: ["^team-chat-1$"]
capabilities: [text, streaming, image]
reasoning:
  default_on: false
  markers: ["<think>", "</think>"]
tokenizer: null
EOF
cat > "$team/expectations/team-chat.yaml" <<'EOF'
records:
  - check: "test_image.py::test_pure_color_image_is_named_by_its_color[*]"
    engine: "*"
    model: "^team-chat-1$"
    reason: "the team's model names raw pure-colour images black (injected: black-pure-color)"
    source: "scripts/ci_wheel_stage.sh"
    failure:
      message: "is one single colour, \\w+ \\([^)]*\\); the answer names \\['black'[],]"
    date: "2026-12-01"
EOF
key="ci-$(python3 -c 'import secrets; print(secrets.token_hex(8))')"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$work/venv/bin/python" -m engine_acceptance.reference_engine --port "$port" --model team-chat-1 \
  --api-key "$key" --inject black-pure-color --max-model-len 1048576 > "$work/engine.log" 2>&1 &
engine_pid=$!
trap 'kill $engine_pid 2>/dev/null || true' EXIT
for _ in $(seq 60); do
  curl -fsS "http://127.0.0.1:$port/health" > /dev/null 2>&1 && break
  sleep 0.5
done
args=(--engine-url="http://127.0.0.1:$port" --api-key="$key" --profiles-dir="$team" -n 2 -q
      -m "text or streaming or image")
"$work/venv/bin/pytest" -p engine_acceptance -p no:cacheprovider "${args[@]}" --gate-json="$work/installed.gate.json" \
  --run-bundle="$work/installed-bundle"
(cd "$repo" && .venv/bin/pytest -p no:cacheprovider "${args[@]}" --gate-json="$work/checkout.gate.json" \
  --alluredir="$work/checkout-allure" --run-bundle="$work/checkout-bundle")
# The installed diff command reads both runs' bundles: the same checks on the same engine, nothing changed
# (the checks named alike although one ran from the virtualenv, the other from the checkout).
"$work/venv/bin/engine-acceptance" diff "$work/installed-bundle" "$work/checkout-bundle" --fail-on=any-change

"$work/venv/bin/python" - "$work/installed.gate.json" "$work/checkout.gate.json" <<'EOF'
import json, sys
installed, checkout = (json.load(open(path)) for path in sys.argv[1:])
def verdict(gate):
    return {"gate": gate["gate"], "gate_failures": gate["gate_failures"], "totals": gate.get("totals"),
            "profile": gate["engine"]["model.profile"]}
assert verdict(installed) == verdict(checkout), (verdict(installed), verdict(checkout))
assert installed["gate"] == "pass", installed["gate_failures"]
assert installed["engine"]["model.profile"] == "team-chat", installed["engine"]["model.profile"]
assert installed["totals"]["known_defect"] > 0, "the --profiles-dir record was not applied"
print(f"installed and checkout verdicts agree: {verdict(installed)}")
EOF
echo "== wheel stage passed"
