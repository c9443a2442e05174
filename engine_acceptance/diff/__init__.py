"""What changed between two stored runs: ``engine-acceptance diff BASE NEW``.

Every run of the suite leaves a run bundle (``run-bundle/run.json``, docs/diff.md). The diff
reads two of them (:mod:`.bundle`), compares what matches (:mod:`.compare_runs`) with the
statistics of :mod:`.statistics`, and renders the findings in the order a release engineer
reads them (:mod:`.render`): verdict and capabilities, checks, performance, rates.
"""
