"""Counts the reference engine's defects that an end-to-end self-test injects.

Every check must be shown to fail on its defect (DESIGN.md): a self-test runs the suite
against the reference engine started with ``--inject NAME`` and expects that check to fail.
This lists, for each defect of ``engine_acceptance.reference_engine.defect_names.DEFECTS``, the
self-test files that run the suite (``run_suite``, ``runpytest``, ``compare``) and name it,
prints how many defects have such a proof, and exits 1 when one has none. CI prints it
after the self-tests, so a speed-up that drops a proof shows as a smaller count.

    .venv/bin/python scripts/defect_proofs.py [--list]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from engine_acceptance.reference_engine.defect_names import DEFECTS

ROOT = Path(__file__).resolve().parent.parent
# A self-test file that runs the suite or the comparison against a reference engine.
RUNS_THE_SUITE = re.compile(r"run_suite\(|runpytest|engine_acceptance\.compare|run_compare")


def proofs() -> dict[str, list[str]]:
    """Each defect and the end-to-end self-test files that name it as a whole word."""
    files = {path: path.read_text(encoding="utf-8") for path in sorted((ROOT / "selftest").rglob("test_*.py"))}
    runners = {path: text for path, text in files.items() if RUNS_THE_SUITE.search(text)}
    found: dict[str, list[str]] = {}
    for defect in DEFECTS:
        word = re.compile(rf"(?<![\w-]){re.escape(defect)}(?![\w-])")
        found[defect] = [str(path.relative_to(ROOT)) for path, text in runners.items() if word.search(text)]
    return found


def main(argv: list[str]) -> int:
    found = proofs()
    missing = sorted(defect for defect, files in found.items() if not files)
    if "--list" in argv:
        for defect, files in found.items():
            print(f"{defect}: {', '.join(files) or 'NO END-TO-END PROOF'}")
    print(f"end-to-end defect proofs: {len(found) - len(missing)} of the reference engine's {len(found)} defects "
          "are injected by a self-test that runs the suite")
    for defect in missing:
        print(f"  no end-to-end proof: {defect}", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
