"""Model-written code: extracted from a reply and run in a sandboxed child process."""
