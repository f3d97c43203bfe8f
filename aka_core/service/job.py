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
import time
import traceback
from pathlib import Path
from typing import Any

_host: Any = None
"""The plugin host, made ahead of the request by a process started ahead (``--warm``)."""


def _evaluator(path: str | None) -> tuple[Any, dict[str, Any]]:
    """The evaluation function and the keywords it takes beyond the spec's."""
    if not path:
        from aka_core import api

        return api.evaluate_candidate, ({"host": _host} if _host is not None else {})
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr), {}


def ahead() -> None:
    """What every request's evaluation does first, done before the request: the plugins
    discovered, the evaluator's files hashed (a request's check of them then finds their digests
    known unless a file was written since: ``integrity``)."""
    global _host
    from aka_core.evaluation import integrity
    from aka_core.plugin.host import PluginHost

    _host = PluginHost()
    integrity.snapshot()
    integrity.verify_installed()


def run(spec: dict[str, Any]) -> dict[str, Any]:
    from aka_core.convert import unstructure
    from aka_core.errors import AkaError

    evaluate, extra = _evaluator(spec.get("evaluator"))
    try:
        result = evaluate(spec["task_dir"], spec["candidate_dir"], device=spec.get("device", "auto"),
                          held_out_seed=spec.get("held_out_seed"),
                          protect=tuple(spec.get("protect", ())), **extra)
    except AkaError as exc:  # the request cannot be evaluated as given (or the host cannot)
        return {"error": {"kind": type(exc).__name__, "message": str(exc)}}
    return {"record": unstructure(result) if not isinstance(result, dict) else result}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    timeline: dict[str, float] = {}
    if args[0] == "--warm":
        # Started ahead of its request: the evaluator imported, a judge and its confined runners
        # waiting (``evaluate.prestart_judge``); the spec's path then comes on stdin.
        from aka_core import api  # noqa: F401
        from aka_core.evaluation import evaluate, warm

        profile = warm.WarmProfile.from_json(json.loads(args[1]))
        evaluate.offer(evaluate.prestart_judge(profile))
        try:
            ahead()
        except Exception as exc:  # a head start only: the request does it again
            print(f"aka job: nothing done ahead ({type(exc).__name__}: {exc})", file=sys.stderr)
        timeline["ready"] = time.time()
        line = sys.stdin.readline().strip()
        if not line:
            return 0  # the service stopped or no longer needs it
        args = [line]
    timeline["spec_read"] = time.time()
    spec = json.loads(Path(args[0]).read_text())
    out = Path(spec["result_path"])
    try:
        payload = run(spec)
    except BaseException as exc:
        payload = {"crash": f"{type(exc).__name__}: {exc}",
                   "traceback": "".join(traceback.format_exception(exc, limit=-8))[-3000:]}
    timeline["evaluated"] = time.time()
    payload["timeline"] = timeline  # when (epoch seconds) it was ready, read its spec, ended
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload))
    os.replace(tmp, out)
    return 0


if __name__ == "__main__":
    code = main()
    # The result is written and the judge is gone: the interpreter's own teardown (its modules,
    # its threads) would only delay the service, which waits for this process to end.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
