"""The e2e judge (in progress)."""

from __future__ import annotations

from typing import Any

from aka_core.records import JudgeRequest


class E2EJudge:
    def evaluate(self, request: JudgeRequest) -> dict[str, Any]:
        return {"failure": {"kind": "infra_error", "phase": "judge", "retryable": True,
                            "message": "the e2e judge is not built yet"}}
