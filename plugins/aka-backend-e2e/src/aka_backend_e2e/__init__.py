"""aka-backend-e2e: end-to-end serving tasks (a task format ``e2e`` and a backend ``e2e``)."""

from __future__ import annotations
