#!/usr/bin/env bash
# Load on the suite itself: run the functional suite N times in a row with -n auto
# against the built-in reference engine and report every failure and the wall times.
#
#   scripts/flake_check.sh [N] [extra pytest arguments...]     (N defaults to 20)
#
# Each run writes its gate.json, JUnit XML and output under $FLAKE_DIR (default: a new
# temporary directory); a run counts as clean only with exit code 0 and a passing gate.
# Exits 1 if any run was not clean. The last line is the summary to quote.
set -euo pipefail

runs="${1:-20}"
shift || true
cd "$(dirname "$0")/.."
out="${FLAKE_DIR:-$(mktemp -d -t flake-check-XXXXXX)}"
mkdir -p "$out"
python="${PYTHON:-python}"

clean=0
times=()
for i in $(seq 1 "$runs"); do
  dir="$out/run-$i"
  mkdir -p "$dir"
  start=$(date +%s.%N)
  set +e
  "$python" -m pytest -n auto -q -p no:cacheprovider --alluredir="$dir/allure-results" \
    --gate-json="$dir/gate.json" --junitxml="$dir/junit.xml" "$@" >"$dir/output.txt" 2>&1
  code=$?
  set -e
  end=$(date +%s.%N)
  seconds=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  times+=("$seconds")
  gate=$("$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["gate"])' "$dir/gate.json" 2>/dev/null \
         || echo missing)
  summary=$(tail -n 1 "$dir/output.txt")
  if [[ $code -eq 0 && $gate == pass ]]; then
    clean=$((clean + 1))
    echo "run $i/$runs: clean in ${seconds}s ($summary)"
  else
    echo "run $i/$runs: NOT CLEAN (exit $code, gate $gate) in ${seconds}s ($summary); see $dir/output.txt"
    grep -E '^(FAILED|ERROR) ' "$dir/output.txt" | sed 's/^/    /' || true
  fi
done

stats=$(printf '%s\n' "${times[@]}" | sort -n | awk '
  { t[NR] = $1; sum += $1 }
  END { printf "wall time min %.1fs, median %.1fs, max %.1fs, total %.0fs", t[1], (NR % 2 ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2), t[NR], sum }')
echo "flake check: $clean/$runs runs clean with -n auto ($(nproc) CPUs); $stats; results in $out"
[[ $clean -eq $runs ]]
