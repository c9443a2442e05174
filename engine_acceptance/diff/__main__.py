"""``python -m engine_acceptance.diff BASE NEW``: what changed between two stored runs."""

from engine_acceptance.diff.command import main

raise SystemExit(main())
