"""How an evaluation fails: the exception that ends one with its failure's kind."""

from __future__ import annotations

from typing import Any


class JudgeFailure(Exception):
    """Ends the evaluation: ``kind`` is the failure's class, ``details`` go to the record."""

    def __init__(self, kind: str, message: str, **details: Any):
        super().__init__(message)
        self.kind = kind
        self.details = details


INFRA = "infra_error"
