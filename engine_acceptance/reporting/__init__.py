"""Results as data, and one module per output format that renders them.

``results`` holds the results' shapes (a check's outcome, a capability's row, a figure
over several values) and ``table`` the one table shape. A producer (the gate, a load
workload, the tool-accuracy score, a comparison, a diff of two runs) builds
:class:`~engine_acceptance.reporting.table.Table` values from its results; the format
modules (``terminal``, ``markdown``, ``html``, ``csv_text``; ``charts`` for PNGs and
``allure_files`` for Allure's own files) turn them into their output. A new figure is
then a new column or row in one producer, and every format shows it.
"""
