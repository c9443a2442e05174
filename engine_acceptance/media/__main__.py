"""``python -m engine_acceptance.media --regenerate``: rebuild the committed media."""

from engine_acceptance.media.library import main

raise SystemExit(main())
