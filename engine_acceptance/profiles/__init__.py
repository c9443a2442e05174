"""Engine quirks and model traits as data: engine and model profiles, the refusals that
mean "not served", expectation records (known defects), request options and tool schemas.
The capability vocabulary is the registry's (``engine_acceptance.capabilities.registry``).

Profiles and records are read from the user's profiles dirs first, then from the shipped
``fixtures/`` (``sources.py``), so a team adds its own without forking the suite.
"""
