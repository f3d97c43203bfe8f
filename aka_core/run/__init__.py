"""The run machinery: a run config (``config``, ``resources``), the tasks it selects
(``selection``), the run directory and its execution through an executor (``execute``), the seven
steps of one task (``lifecycle``: ``workspace``, ``prompt``), and what a run leaves (``results``,
``reports``, ``progress``).
"""
