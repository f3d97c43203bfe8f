"""One evaluation of the reward service, in a process of its own (started once, used once).

``python -m aka_core.service.job SPEC.json``: SPEC names the task folder, the candidate folder,
the device and where to write the result. ``python -m aka_core.service.job --warm PROFILE``
starts before its request (a judge and its runners started and waiting: ``warm``) and reads the
SPEC's path from stdin. The process dies with the service (``PDEATHSIG``), and
the judge it starts dies with it: cancelling or timing out an evaluation is killing this process.
The result file is written atomically; a process that ends without one failed for the
evaluator's reasons (the service retries it).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any


def _evaluator(path: str | None) -> Any:
    if not path:
        from aka_core import api

        return api.evaluate_candidate
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def run(spec: dict[str, Any]) -> dict[str, Any]:
    from aka_core.convert import unstructure
    from aka_core.errors import AkaError

    evaluate = _evaluator(spec.get("evaluator"))
    try:
        result = evaluate(spec["task_dir"], spec["candidate_dir"], device=spec.get("device", "auto"),
                          held_out_seed=spec.get("held_out_seed"),
                          protect=tuple(spec.get("protect", ())))
    except AkaError as exc:  # the request cannot be evaluated as given (or the host cannot)
        return {"error": {"kind": type(exc).__name__, "message": str(exc)}}
    return {"record": unstructure(result) if not isinstance(result, dict) else result}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[0] == "--warm":
        # Started ahead of its request: the evaluator imported, a judge and its confined runners
        # waiting (``evaluate.prestart_judge``); the spec's path then comes on stdin.
        from aka_core import api  # noqa: F401
        from aka_core.evaluation import evaluate, warm

        profile = warm.WarmProfile.from_json(json.loads(args[1]))
        evaluate.offer(evaluate.prestart_judge(profile))
        line = sys.stdin.readline().strip()
        if not line:
            return 0  # the service stopped or no longer needs it
        args = [line]
    spec = json.loads(Path(args[0]).read_text())
    out = Path(spec["result_path"])
    try:
        payload = run(spec)
    except BaseException as exc:
        payload = {"crash": f"{type(exc).__name__}: {exc}",
                   "traceback": "".join(traceback.format_exception(exc, limit=-8))[-3000:]}
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload))
    os.replace(tmp, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
