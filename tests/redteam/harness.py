"""The red-team harness: evaluates each exploit and checks the verdict it must get.

An exploit is a folder under ``tests/redteam/exploits/<name>/`` holding candidate files (the task's
editable files, and anything else the exploit needs) and ``exploit.yaml``::

    task: triton2triton/gelu        # the task it attacks (under tasks/)
    class: forged_result_channel    # the attack class (docs/security.md lists them)
    what: one sentence on what it tries
    devices: [cpu, cuda]            # where it is meaningful; CI runs the cpu ones
    expect:
      kinds: [correctness]          # evaluation failure kinds it may end with (any of them)
      status: completed             # the task result's status (infra_error for host faults)
    env: {AKA_SCRATCH_LIMIT: 64M}   # optional: variables the evaluation runs with
    known_limit: why it is paid on some hosts   # optional: an expected failure there

Every exploit must end unpaid: not accepted, score 0. The harness also takes digests of the
evaluator's code, the tasks, the stored solutions and the site-packages startup hooks before and
after each exploit: any change is a persistent poisoning and fails the exploit's test, whatever its
verdict. Used by tests/redteam/test_redteam.py (CPU, in CI) and
`bench/gpu_bench.py --sections redteam` (the GPU).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import site
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs

ROOT = Path(__file__).resolve().parents[2]
EXPLOITS = Path(__file__).resolve().parent / "exploits"
# Files an exploit may try to leave behind for later evaluations (checked to be absent).
SENTINELS = ("/tmp/aka-redteam-sentinel", "/dev/shm/aka-redteam-sentinel",
             "/var/tmp/aka-redteam-sentinel")


@attrs.frozen(kw_only=True)
class Exploit:
    name: str
    folder: Path
    task: str
    attack_class: str
    what: str
    devices: tuple[str, ...]
    kinds: tuple[str, ...]
    status: str = "completed"
    placements: tuple[str, ...] = ()
    """Where its ``infra_error`` is an interference reading in the retry band: the clean
    phase's placements it may name (those the reward service blames when repeated)."""
    env: dict[str, str] = attrs.Factory(dict)
    """Variables the evaluation runs with (a limit lowered so that the exploit stays small)."""
    known_limit: str = ""
    """Where it is paid and why (a defence that needs what some hosts lack): its test is an
    expected failure there, and passes where the defence holds."""


def load_exploits(device: str | None = None) -> list[Exploit]:
    from aka_core.yamlio import load_yaml, to_builtin

    found = []
    for spec in sorted(EXPLOITS.glob("*/exploit.yaml")):
        data = to_builtin(load_yaml(spec))
        expect = data.get("expect", {})
        exploit = Exploit(name=spec.parent.name, folder=spec.parent, task=data["task"],
                          attack_class=data["class"], what=data["what"].strip(),
                          devices=tuple(data.get("devices", ("cpu", "cuda"))),
                          kinds=tuple(expect.get("kinds", ())),
                          status=expect.get("status", "completed"),
                          placements=tuple(expect.get("placements", ())),
                          env={str(k): str(v) for k, v in (data.get("env") or {}).items()},
                          known_limit=str(data.get("known_limit") or "").strip())
        if device is None or device in exploit.devices:
            found.append(exploit)
    return found


OPEN_TASKS = {"open/gelu": "triton2triton/gelu"}
"""Red-team tasks: copies of corpus tasks without their rules (and with short time limits), so
that exploits reach the layers behind the static policy, which a determined candidate could
evade. Made fresh from the corpus task on first use."""
_open_root: Path | None = None


def task_folder(task: str) -> Path:
    """A task of the corpus (tasks/), or a rule-free copy of one (``OPEN_TASKS``)."""
    global _open_root
    if task not in OPEN_TASKS:
        return ROOT / "tasks" / task
    import shutil
    import tempfile

    from aka_core.yamlio import dump_yaml, load_plain_yaml

    if _open_root is None:
        _open_root = Path(tempfile.mkdtemp(prefix="aka-redteam-tasks-")) / "tasks"
    folder = _open_root / task
    if not folder.is_dir():
        shutil.copytree(ROOT / "tasks" / OPEN_TASKS[task], folder)
        doc = load_plain_yaml(folder / "task.yaml")
        doc.pop("rules", None)
        doc.pop("validated_on", None)
        doc["timeouts"] = {"compile_seconds": 30, "correctness_seconds": 120, "timing_seconds": 300}
        (folder / "task.yaml").write_text(dump_yaml(doc))
    return folder


def watched_files() -> Iterable[Path]:
    """What a persistent poisoning would change."""
    import importlib.util

    installed = [Path(spec.origin).parent for name in ("aka_core", "aka_backend_triton",
                                                        "aka_backend_cuda", "aka_scorer_speedup")
                 if (spec := importlib.util.find_spec(name)) is not None and spec.origin]
    folders = {ROOT / "aka_core", ROOT / "tasks", ROOT / "tests" / "solutions",
               *sorted((ROOT / "plugins").glob("aka-*/src")), *installed}
    for folder in sorted(folders):
        yield from (p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for packages in {*site.getsitepackages(), site.getusersitepackages()}:
        folder = Path(packages)
        if folder.is_dir():
            yield from folder.glob("*.pth")
            yield from folder.glob("*customize.py")


def digest_tree() -> dict[str, str]:
    digests = {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in watched_files()}
    for sentinel in SENTINELS:
        if Path(sentinel).exists():
            digests[sentinel] = "present"
    return digests


LEFTOVER_MARK = b"aka-redteam-leftover"


def leftover_processes(scope: str) -> list[int]:
    """Processes an exploit started (they carry ``LEFTOVER_MARK`` on their command line) that
    are still alive after its evaluation; they are killed, and reported. Only those of this
    evaluation: their environment names ``scope``, the folder its scratch was made in (the
    runners' ``TMPDIR`` lies there), so that another evaluation's, alive meanwhile in a
    parallel test worker, is neither blamed here nor killed."""
    import os
    import signal

    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if (LEFTOVER_MARK in Path(f"/proc/{entry}/cmdline").read_bytes()
                    and scope.encode() in Path(f"/proc/{entry}/environ").read_bytes()):
                found.append(int(entry))
                os.kill(int(entry), signal.SIGKILL)
        except OSError:
            continue
    return found


def store_digests() -> dict[str, str]:
    """The files of the judge's store of compiled kernels (``kernel_cache``): an evaluation adds
    entries for its own sides' files, and files to an entry when a side compiled something new
    (its manifest, ``entry.json``, then changes), but no kernel file that existed before may
    change or go."""
    from aka_core.evaluation import kernel_cache

    root = kernel_cache.store()
    if root is None or not root.is_dir():
        return {}
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*")
            if p.is_file() and not p.is_symlink() and p.name != kernel_cache.INFO
            and not p.relative_to(root).parts[0].startswith(".")}


def changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def evaluate_exploit(exploit: Exploit, device: str = "auto") -> dict[str, Any]:
    """Evaluate one exploit; returns its verdict, the expectation check and the digest check."""
    from aka_core import api
    from aka_core.convert import unstructure

    before, store_before = digest_tree(), store_digests()
    started = time.monotonic()
    saved = {name: os.environ.get(name) for name in exploit.env}
    os.environ.update(exploit.env)
    # The evaluation's scratch in a folder of its own: what its processes leave is told apart
    # by it (``leftover_processes``).
    scope, saved_tempdir = tempfile.mkdtemp(prefix="aka-redteam-"), tempfile.tempdir
    tempfile.tempdir = scope
    try:
        result = api.evaluate_candidate(task_folder(exploit.task), exploit.folder, device=device)
    finally:
        tempfile.tempdir = saved_tempdir
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    after, store_after = digest_tree(), store_digests()
    # Entries of the store that existed before: unchanged (new entries are the judge's own).
    after.update({k: v for k, v in store_after.items() if k in store_before})
    before.update(store_before)
    record = unstructure(result)
    failure = (record.get("evaluation") or {}).get("failure") or {}
    kind = failure.get("kind")
    verdict = {
        "exploit": exploit.name, "class": exploit.attack_class, "task": exploit.task,
        "status": record["status"], "accepted": record["candidate_accepted"],
        "score": record["score"], "kind": kind, "message": (failure.get("message") or "")[:300],
        "reason": (record.get("acceptance") or {}).get("reason", "")[:300],
        "speedup": record.get("speedup_ratio"), "seconds": round(time.monotonic() - started, 2),
        "persistent_changes": changed(before, after),
    }
    problems = []
    # An exploit that lists no failure kind may be accepted (it computes honestly with the
    # baseline's kernel and attacks something else): it must still earn nothing.
    if verdict["score"] != 0 or (verdict["accepted"] and exploit.kinds):
        problems.append(f"paid: accepted={verdict['accepted']} score={verdict['score']}")
    leftovers = leftover_processes(scope)
    shutil.rmtree(scope, ignore_errors=True)
    if leftovers:
        problems.append(f"processes outlived the evaluation: {leftovers}")
    if verdict["persistent_changes"]:
        problems.append(f"changed files: {verdict['persistent_changes'][:5]}")
    if exploit.status != verdict["status"]:
        problems.append(f"status {verdict['status']}, expected {exploit.status}")
    if exploit.kinds and kind not in exploit.kinds:
        problems.append(f"failure kind {kind!r}, expected one of {list(exploit.kinds)}")
    if (exploit.placements and kind == "infra_error"
            and failure.get("placement") not in exploit.placements):
        problems.append(f"a retry on {failure.get('placement')!r} memory, which no repeat "
                        f"blames (expected one of {list(exploit.placements)})")
    verdict["problems"] = problems
    verdict["verdict"] = "caught" if not problems else "FAILED: " + "; ".join(problems)
    return verdict


def main(argv: list[str] | None = None) -> int:
    import json

    args = sys.argv[1:] if argv is None else argv
    names = set(args)
    for exploit in load_exploits():
        if names and exploit.name not in names:
            continue
        print(json.dumps(evaluate_exploit(exploit), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
