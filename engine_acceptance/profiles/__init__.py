"""Engine quirks and model traits as data: engine and model profiles, the capability
vocabulary, expectation records (known defects), request options and tool schemas.

Profiles and records are read from the user's profiles dirs first, then from the shipped
``fixtures/`` (``sources.py``), so a team adds its own without forking the suite.
"""
