"""Measured load: throughput cells and their settings, the load generator, metrics,
the validity of a cell and its gate, the report and charts, media load and the soak.
"""
