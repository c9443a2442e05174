"""``python -m engine_acceptance.compare``: run the suite against two engines and compare."""

from engine_acceptance.compare.run import main

raise SystemExit(main())
