"""The measurement engine: a trusted judge process checks and times candidates that run in
confined runner processes.

``evaluate.evaluate(request)`` (parent side) starts ``judge`` in a fresh process and returns its
record; the judge starts one ``runner`` per side (``sides``), talks to them through ``protocol``
(tensors through ``cuda_ipc`` on a GPU), checks (``checking``, ``policy``) and times
(``timing``, ``stats``).
"""
