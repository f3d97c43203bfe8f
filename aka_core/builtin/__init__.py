"""The core's own plugins, registered through the same hooks as any plugin (``hooks``): the
``operator`` task format (``operator_tasks``), the ``python`` backend (its class is the kit
``aka_core.kits.python_backend``), and the executors ``local`` and ``local-parallel``
(``executors``; the worker processes of the parallel one: ``parallel``, ``worker``).
"""
