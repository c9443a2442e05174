"""Tool-call accuracy at scale (issue 17): a committed set of tool-calling requests, run
streamed and non-streamed, scored for schema-valid arguments, ``finish_reason``
consistency, streamed/non-streamed agreement and trigger precision/recall/F1 against a
baseline recorded by this suite from a trusted deployment.
"""
