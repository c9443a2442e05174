"""One module per family of discovery probes, each an ``async def probe_*(context) -> Probe``.

The registry (:mod:`engine_acceptance.capabilities.registry`) names each capability's
probe by family (the module here) and function; :mod:`engine_acceptance.capabilities.discovery`
resolves and runs them. :mod:`.base` holds what every family shares: the probe's result,
its context, and the classification of a single chat reply.
"""
