"""Root conftest: loads the engine-acceptance plugin and its fixture modules."""

pytest_plugins = ["engine_acceptance.pytest_plugin.plugin", "fixtures.engine", "fixtures.recall", "fixtures.throughput"]
