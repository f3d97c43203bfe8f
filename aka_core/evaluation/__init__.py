"""The measurement engine: builds, checks and times candidates in worker processes.

``runner.evaluate(request)`` (parent side) starts ``worker`` in a fresh process, watches its
phases against their timeouts and the wall clock, and returns the evaluation record.
"""
