"""Root conftest, deliberately empty: the engine-acceptance plugin loads through its ``pytest11``
entry point (``pip install -e .``), registers its own markers and fixture modules, and
runs the same from this checkout as from an installed wheel.
"""
