"""Engine quirks and model traits as data: engine and model profiles, the capability
vocabulary, expectation records (known defects), request options and tool schemas.
"""
