"""Talking to an engine: the request and reply types, SSE, reassembly, the two clients,
readiness and health, redaction and token counting.

Nothing here knows about pytest; the checks and the load generator both build on it.
"""
