"""What the ``aka`` subcommands do beyond parsing their arguments (that is ``aka_core.cli``):
``validate``, ``selfcheck``, ``smoke``, ``export``, ``compare`` (with ``compare_stats``).
"""
