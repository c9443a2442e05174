"""The pytest side: hooks, options, stash keys, scheduling (phases), Allure, the verdict,
records as strict xfails, and interrupts, each in its own module.
"""
