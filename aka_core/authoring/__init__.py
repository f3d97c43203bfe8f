"""Tools for task authors: ``aka task new --from-reference`` (``task_builder`` with ``task_spec``,
``task_sizes``, ``task_templates``) and the task checks of ``aka validate`` (``task_quality``,
``task_probe``, ``trivial_candidates``).
"""
