"""engine-acceptance: a pytest suite that decides whether a deployed LLM engine may take traffic."""

__version__ = "0.1.0"
