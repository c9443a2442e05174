"""Capabilities: the one registry of what the suite tests, the probes that ask a deployment, and the plan.

``registry.py`` is data and imports nothing of the package, so every layer may read it;
``probes/`` holds one module per family of probes; ``discovery.py`` runs them;
``plan.py`` decides, from the model profile, discovery and the user's word, which
capabilities' checks run, and judges coverage after the run.
"""
