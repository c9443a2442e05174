#!/usr/bin/env bash
# The default command against the built-in reference engine, once clean and once per
# defect that `--inject` offers: the clean run must pass and every defect run must fail.
#
#   scripts/defect_sweep.sh [OUT_DIR] [-- extra pytest options]
#
# Each defect run stops at its first failure (-x): stopping early cannot turn a failure
# into a pass, and without it a defect such as never-answer makes every request wait
# the whole request timeout. Prints one line per run (verdict, exit code, seconds, the
# first failed check) and writes OUT_DIR/sweep.tsv plus each run's gate.json and log.
# Exits non-zero if the clean run fails or any defect run passes.
set -uo pipefail

cd "$(dirname "$0")/.."
out=${1:-/tmp/defect-sweep}
shift $(( $# > 0 ? 1 : 0 ))
[[ ${1:-} == -- ]] && shift
extra=("$@")
python=${PYTHON:-.venv/bin/python}
mkdir -p "$out"
defects=$("$python" -c 'from engine_acceptance.reference_engine.defects import DEFECTS; print(" ".join(sorted(DEFECTS)))')

printf 'run\tverdict\texit\tseconds\tfirst_failure\n' > "$out/sweep.tsv"
wrong=0
for name in clean $defects; do
  if [[ $name == clean ]]; then args=(); else args=(-x "--inject=$name"); fi
  start=$(date +%s)
  "$python" -m pytest -n 2 -q -p no:cacheprovider "${args[@]}" "${extra[@]}" \
    "--gate-json=$out/$name.gate.json" "--alluredir=$out/$name.allure" > "$out/$name.log" 2>&1
  rc=$?
  seconds=$(( $(date +%s) - start ))
  first=$(grep -m1 -oE '^(FAILED|ERROR) [^ ]+' "$out/$name.log" | cut -d' ' -f2)
  [[ -z $first ]] && first=$(grep -m1 -oE 'GATE FAILURE: .*' "$out/$name.log" | cut -c1-100)
  if (( rc == 0 )); then verdict=PASS; else verdict=FAIL; fi
  if [[ $name == clean && $rc != 0 ]] || [[ $name != clean && $rc == 0 ]]; then
    verdict="$verdict (WRONG)"; wrong=$(( wrong + 1 ))
  fi
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$verdict" "$rc" "$seconds" "${first:--}" | tee -a "$out/sweep.tsv"
done
echo "$wrong wrong verdict(s); table in $out/sweep.tsv"
exit $(( wrong > 0 ))
