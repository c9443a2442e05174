"""The open-loop workload, the SLO check: requests sent on a schedule of arrivals.

Its cells (``cells.py``), the SLO they are judged by (``slo.py``), the search for the
highest rate meeting it (``search.py``), its settings and its table and chart.
"""
