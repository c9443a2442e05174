"""Results as tables, and one module per output format that renders them.

A producer (the gate, a load workload, the tool-accuracy score, a comparison, a diff of two
runs) builds :class:`~engine_acceptance.reporting.table.Table` values from its results; the
format modules (``terminal``, ``markdown``, ``html``) turn any table into their text. A new
figure is then a new column or row in one producer, and every format shows it.
"""
