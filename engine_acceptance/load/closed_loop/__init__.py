"""The closed-loop workload, the throughput smoke: a fixed concurrency of fixed-length requests.

Its settings (``--throughput-*``), the gate on its figures (thresholds, a saved baseline)
and what a cell must satisfy before its figures mean anything (validity).
"""
