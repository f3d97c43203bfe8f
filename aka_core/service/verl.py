"""verl's reward-function convention over the reward service.

In a verl config::

    custom_reward_function:
      path: <site-packages>/aka_core/service/verl.py   # or a file that imports compute_score
      name: compute_score            # compute_score_batch with reward_model.reward_manager=batch

with ``AKA_SERVICE_URL`` naming a running ``aka serve`` (default http://127.0.0.1:8765). Each
sample's ``ground_truth`` (or ``extra_info["task"]``) is an aka task id; the model's response
holds the candidate as fenced code blocks: a block whose info string or first line names a file
(```` ```python kernel.py ```` or ``# file: kernel.py``) becomes that file, an unnamed block the
task's main file (``extra_info["file"]``, default ``kernel.py``; the last unnamed block wins).

Returns verl's dict form: ``score`` (the reward) plus ``status``, ``speedup``, ``accepted`` and
the failure's kind (logged by verl as ``reward_extra_info``). A response without code is a
``candidate_failure`` with score 0, evaluated nowhere, and so is one whose files the service
refuses (a path out of the candidate's folder, over its size limits: ``failure_kind``
``refused_files``). An evaluator fault (``infra_error`` after
the service's own retries), an expired or cancelled request, or a broken task is never returned
as a 0, nor is any other refusal (an unknown task, a service that does not answer): by
default it raises ``RewardUnavailable``; with ``AKA_REWARD_ON_INFRA=nan`` the score is
NaN, for a trainer that masks those samples.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import re
from typing import Any

from aka_core.service.client import DEFAULT_URL, AsyncServiceClient, ServiceClient, ServiceError

BLOCK = re.compile(r"```([^\n`]*)\n(.*?)```", re.DOTALL)
FILE_LINE = re.compile(r"^\s*(?:#|//)\s*file:\s*(\S+)\s*$")
FILE_NAME = re.compile(r"^[A-Za-z0-9_.\-/]+\.[A-Za-z0-9]+$")
REWARDED = ("scored", "candidate_failure")


class RewardUnavailable(RuntimeError):
    """The service could not judge the sample (not the candidate's fault): no reward exists."""


def extract_files(solution: str, main_file: str = "kernel.py") -> dict[str, str]:
    """The candidate's files in a model's response (see the module's doc)."""
    files: dict[str, str] = {}
    for info, body in BLOCK.findall(solution or ""):
        name = next((w for w in info.split() if FILE_NAME.match(w) and "." in w), None)
        lines = body.split("\n")
        if name is None and lines and (match := FILE_LINE.match(lines[0])):
            name, body = match.group(1), "\n".join(lines[1:])
        files[name or main_file] = body
    return files


def _task(ground_truth: Any, extra_info: dict[str, Any]) -> str:
    task = extra_info.get("task") or ground_truth
    if isinstance(task, dict):
        task = task.get("task")
    if not isinstance(task, str) or not task:
        raise ValueError("the sample names no aka task: give it as ground_truth or "
                         "extra_info['task'] (e.g. 'triton2triton/gelu')")
    return task


def _request_id(task: str, files: dict[str, str], extra_info: dict[str, Any]) -> str:
    """The same response to the same sample is the same request (a retried step is not
    evaluated twice); ``extra_info['request_id']`` overrides."""
    given = extra_info.get("request_id")
    if isinstance(given, str) and given:
        return given
    ident = json.dumps({"task": task, "files": files, "index": extra_info.get("index"),
                        "uid": extra_info.get("uid")}, sort_keys=True, default=str)
    return "verl-" + hashlib.sha256(ident.encode()).hexdigest()[:40]


def _score(result: dict[str, Any]) -> dict[str, Any]:
    status = result.get("status")
    if status in REWARDED and result.get("reward") is not None:
        return {"score": float(result["reward"]), "status": status,
                "speedup": result.get("speedup"), "accepted": bool(result.get("accepted")),
                "failure_kind": (result.get("failure") or {}).get("kind"),
                "measured": bool(result.get("measured")), "request_id": result.get("id")}
    message = f"aka could not judge this sample ({status}): {result.get('message', '')}"[:500]
    if os.environ.get("AKA_REWARD_ON_INFRA", "raise") == "nan":
        return {"score": math.nan, "status": status, "speedup": None, "accepted": False,
                "failure_kind": None, "measured": False, "request_id": result.get("id")}
    raise RewardUnavailable(message)


def _no_code() -> dict[str, Any]:
    return {"score": 0.0, "status": "candidate_failure", "speedup": None, "accepted": False,
            "failure_kind": "no_code", "measured": False, "request_id": None}


def _refused(exc: ServiceError) -> dict[str, Any]:
    """The service refused the request. Where what it refused is the response's own files (a
    path out of the folder, too many or too large, no editable file of the task: 413 or 422 on
    ``files``) the candidate failed, a zero like a response without code; anything else (an
    unknown task, an id in use) is no reward (``_score``'s rule), never a crash of the batch."""
    # A body over the service's limit (413 naming no field) is the response's files too: the
    # rest of it is a task id and a request id.
    if ((exc.status in (413, 422) and (exc.field or "").startswith("files"))
            or (exc.status == 413 and not exc.field)):
        return {"score": 0.0, "status": "candidate_failure", "speedup": None, "accepted": False,
                "failure_kind": "refused_files", "measured": False, "request_id": None}
    return _score({"status": "refused", "message": str(exc)})


def _url(extra_info: dict[str, Any]) -> str:
    return str(extra_info.get("aka_url") or os.environ.get("AKA_SERVICE_URL") or DEFAULT_URL)


def compute_score(data_source: Any, solution_str: str, ground_truth: Any,
                  extra_info: dict[str, Any] | None = None, **kwargs: Any) -> dict[str, Any]:
    """verl's ``compute_score`` for one sample (blocks until the service has judged it)."""
    extra = dict(extra_info or {})
    task = _task(ground_truth, extra)
    files = extract_files(solution_str, str(extra.get("file") or "kernel.py"))
    if not files:
        return _no_code()
    with ServiceClient(_url(extra)) as client:
        try:
            result = client.evaluate(task, dict(files), id=_request_id(task, files, extra),
                                     record=False)
        except ServiceError as exc:
            return _refused(exc)
    return _score(result)


def compute_score_batch(data_sources: list[Any], solution_strs: list[str],
                        ground_truths: list[Any], extra_infos: list[dict[str, Any] | None],
                        **kwargs: Any) -> list[dict[str, Any]]:
    """verl's batch form: every sample submitted at once, judged as the service's slots allow."""
    return asyncio.run(_batch(solution_strs, ground_truths, extra_infos))


async def _batch(solutions: list[str], truths: list[Any],
                 extras: list[dict[str, Any] | None]) -> list[dict[str, Any]]:
    samples = [dict(e or {}) for e in extras]
    url = _url(samples[0]) if samples else DEFAULT_URL
    async with AsyncServiceClient(url) as client:

        async def one(solution: str, truth: Any, extra: dict[str, Any]) -> dict[str, Any]:
            task = _task(truth, extra)
            files = extract_files(solution, str(extra.get("file") or "kernel.py"))
            if not files:
                return _no_code()
            try:
                result = await client.evaluate(task, dict(files),
                                               id=_request_id(task, files, extra), record=False)
            except ServiceError as exc:
                return _refused(exc)
            return _score(result)

        return list(await asyncio.gather(*(one(s, t, e) for s, t, e in
                                           zip(solutions, truths, samples, strict=True))))
