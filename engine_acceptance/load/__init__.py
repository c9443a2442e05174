"""Measured load. The machinery every workload shares sits here (the load generator, metrics,
arrivals, prompts, client worker processes, tables and charts); each workload has a subpackage
(closed_loop/, open_loop/, media/, soak/) and sits behind the interface in ``workload.py``.
"""
