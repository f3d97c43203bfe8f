"""The workload of an e2e task (``workload.yaml``), its JSON Schema check and its lock.

``workload.yaml`` fixes everything the measurement depends on: the engine, the model and its
weights, the kernels the task replaces, the timed cases, the model-level correctness check and the
measurement's bounds. ``workload.lock`` pins it: the digest of the canonical workload (comments
and key order do not count), the weights' digest, the digest of every kernel file the task does
not let the agent edit, and the version of this package (whose engine serves the model). A task
whose files differ from its lock is refused (a task error) until the lock is written again:

    python -m aka_backend_e2e.workload lock TASK_DIR

Nothing here imports torch: listing and validating tasks works without it. Computing a builtin
model's weights digest does (``lock`` only), and caches the generated weights under
``$AKA_E2E_CACHE`` (default: ``~/.cache/aka-e2e``).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import attrs

from aka_backend_e2e.kernels_api import ENTRYPOINTS
from aka_core.plugin import ConfigError, Problem

WORKLOAD_FILE = "workload.yaml"
LOCK_FILE = "workload.lock"
LOCK_VERSION = 1
PACKAGE = "aka-backend-e2e"

MODULE_OF = ENTRYPOINTS
"""The kernel tree's module that defines each entrypoint (``kernels_api``'s contract)."""


def lock_command(task_dir: Path) -> str:
    return f"python -m aka_backend_e2e.workload lock {task_dir}"


# --------------------------------------------------------------------------- the model


@attrs.frozen(kw_only=True)
class ModelSpec:
    config: str | None = None
    """builtin: the model config's name (``qwen3-0.6b``, ``tiny``)."""
    seed: int = 0
    """builtin: the seed the random weights are drawn from."""
    id: str | None = None
    """vllm/sglang: the model's repository id."""
    revision: str | None = None
    """vllm/sglang: the repository's commit."""


@attrs.frozen(kw_only=True)
class KernelsSpec:
    tree: str = "kernels"
    entrypoints: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class WorkloadCase:
    name: str
    input_len: tuple[int, int]
    output_len: tuple[int, int]
    requests: int
    max_concurrency: int
    request_rate: float = float("inf")
    """Requests per second; inf: all at once."""
    seed: int = 1
    ignore_eos: bool = True
    warmup_requests: int = 8
    p99_tpot_ms: float | None = None


@attrs.frozen(kw_only=True)
class CorrectnessSpec:
    prompts: int = 8
    input_len: tuple[int, int] = (16, 64)
    output_len: int = 32
    max_regret: float = 0.5
    max_mean_regret: float = 0.05
    seed: int = 7
    audit_sequences: int = 4


@attrs.frozen(kw_only=True)
class MeasurementSpec:
    min_pairs: int = 3
    max_pairs: int = 8
    aa_floor: float = 0.005
    max_seconds: float = 1200.0


@attrs.frozen(kw_only=True)
class Workload:
    engine: str
    model: ModelSpec
    kernels: KernelsSpec
    cases: tuple[WorkloadCase, ...]
    weights_digest: str | None = None
    precision: str = "bfloat16"
    tensor_parallel: int = 1
    server_args: Mapping[str, Any] = attrs.field(factory=dict)
    env: Mapping[str, str] = attrs.field(factory=dict)
    stream: bool = True
    correctness: CorrectnessSpec = attrs.Factory(CorrectnessSpec)
    measurement: MeasurementSpec = attrs.Factory(MeasurementSpec)
    digest: str = ""
    """sha256 of the canonical workload (``canonical_digest``), ``validated_on`` left out."""
    validated_on: tuple[dict[str, Any], ...] = ()
    """Where the task ran and was checked (a record of the task, not of what is served)."""
    path: Path | None = None

    @property
    def editable(self) -> tuple[str, ...]:
        """The kernel files the task lets the agent edit: the modules of its entrypoints."""
        modules = sorted({MODULE_OF[name] for name in self.kernels.entrypoints})
        return tuple(f"{self.kernels.tree}/{module}" for module in modules)

    @property
    def model_label(self) -> str:
        if self.model.config is not None:
            return f"{self.model.config} (random weights, seed {self.model.seed})"
        return f"{self.model.id}@{self.model.revision}"


# --------------------------------------------------------------------------- loading


@cache
def schema() -> dict[str, Any]:
    path = Path(__file__).with_name("workload.schema.json")
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


UNLOCKED = ("validated_on",)
"""Top-level keys of workload.yaml the lock's digest leaves out: records of the task (where it
was validated), which change nothing that is served or measured."""


def canonical_digest(data: Any) -> str:
    """sha256 of ``data`` as canonical JSON (sorted keys, no spaces): what the lock pins."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def load_workload(path: Path) -> Workload:
    """Read and check ``workload.yaml`` (or the task folder holding it). Every problem names the
    file, the line and the field; raises ``ConfigError``."""
    from aka_core.plugin import line_of, load_yaml, to_builtin, validate_document

    file = path / WORKLOAD_FILE if path.is_dir() else path
    source = load_yaml(file)
    if not isinstance(source, Mapping):
        raise ConfigError(Problem("expected a mapping (engine, model, kernels, cases, ...)",
                                  file=file, line=1, hint="see docs/e2e.md"))
    data = to_builtin(source)
    problems = validate_document(data, schema(), file=file, source=source)
    if problems:
        raise ConfigError(problems)
    problems = []

    def problem(where: list[str | int], message: str, hint: str | None = None) -> None:
        from aka_core.plugin import field_path

        problems.append(Problem(message, file=file, line=line_of(source, where),
                                field=field_path(where), hint=hint))

    engine = data["engine"]
    model = data["model"]
    builtin = engine == "builtin"
    if builtin and "config" not in model:
        problem(["model"], "the builtin engine serves a builtin config",
                "write model: {config: qwen3-0.6b, seed: 0}")
    if not builtin and "config" in model:
        problem(["model"], f"the {engine} engine serves a model from a repository",
                "write model: {id: Qwen/Qwen3-0.6B, revision: <40-hex commit>}")
    if not builtin and data.get("weights_digest"):
        problem(["weights_digest"], "only the builtin engine's weights have a digest here",
                "pin the model by model.revision instead")
    names: dict[str, int] = {}
    for index, case in enumerate(data["cases"]):
        if case["name"] in names:
            problem(["cases", index, "name"], f"case name {case['name']!r} is already used by "
                    f"cases[{names[case['name']]}]", "give every case a unique name")
        names.setdefault(case["name"], index)
        for field in ("input_len", "output_len"):
            lo, hi = case[field]
            if lo > hi:
                problem(["cases", index, field], f"[{lo}, {hi}] is empty: its low end is above "
                        "its high end", "write [low, high], both included")
    corr = data.get("correctness") or {}
    if "input_len" in corr and corr["input_len"][0] > corr["input_len"][1]:
        problem(["correctness", "input_len"], "the low end is above the high end")
    meas = data.get("measurement") or {}
    if meas.get("min_pairs", 3) > meas.get("max_pairs", 8):
        problem(["measurement", "min_pairs"], "min_pairs is above max_pairs")
    if problems:
        raise ConfigError(problems)
    return _structure(data, file)


def _structure(data: dict[str, Any], file: Path) -> Workload:
    model = data["model"]
    cases = tuple(
        WorkloadCase(
            name=c["name"], input_len=tuple(c["input_len"]), output_len=tuple(c["output_len"]),
            requests=c["requests"], max_concurrency=c["max_concurrency"],
            request_rate=float("inf") if c.get("request_rate", "inf") == "inf"
            else float(c["request_rate"]),
            seed=c.get("seed", 1), ignore_eos=True, warmup_requests=c.get("warmup_requests", 8),
            p99_tpot_ms=c.get("p99_tpot_ms"))
        for c in data["cases"])
    corr = data.get("correctness") or {}
    return Workload(
        engine=data["engine"],
        model=ModelSpec(config=model.get("config"), seed=model.get("seed", 0),
                        id=model.get("id"), revision=model.get("revision")),
        kernels=KernelsSpec(tree=data["kernels"].get("tree", "kernels"),
                            entrypoints=tuple(data["kernels"]["entrypoints"])),
        cases=cases, weights_digest=data.get("weights_digest"),
        precision=data.get("precision", "bfloat16"),
        tensor_parallel=(data.get("parallelism") or {}).get("tensor", 1),
        server_args=dict(data.get("server_args") or {}), env=dict(data.get("env") or {}),
        stream=(data.get("client") or {}).get("stream", True),
        correctness=CorrectnessSpec(**{**corr, **({"input_len": tuple(corr["input_len"])}
                                                  if "input_len" in corr else {})}),
        measurement=MeasurementSpec(**(data.get("measurement") or {})),
        digest=canonical_digest({k: v for k, v in data.items() if k not in UNLOCKED}),
        validated_on=tuple(dict(e) for e in data.get("validated_on") or ()), path=file)


# --------------------------------------------------------------------------- the lock


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def kernel_files(task_dir: Path, workload: Workload) -> list[str]:
    """Every file of the kernel tree (relative to the task folder), caches left out."""
    tree = task_dir / workload.kernels.tree
    if not tree.is_dir():
        return []
    return sorted(p.relative_to(task_dir).as_posix() for p in tree.rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts)


def package_version() -> str:
    from importlib import metadata

    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        return "unknown"


def expected_lock(task_dir: Path, workload: Workload, weights: str | None) -> dict[str, Any]:
    """What ``workload.lock`` must hold for the task as it is (``weights``: the weights' digest,
    or the model's ``id@revision`` for a served repository)."""
    editable = set(workload.editable)
    return {
        "version": LOCK_VERSION,
        "workload": workload.digest,
        "weights": weights,
        "kernels": {rel: file_digest(task_dir / rel) for rel in kernel_files(task_dir, workload)
                    if rel not in editable},
        "engine": f"{PACKAGE} {package_version()}",
    }


def pinned_weights(workload: Workload) -> str | None:
    """The weights as the workload pins them (no weights are generated)."""
    if workload.engine == "builtin":
        return workload.weights_digest
    return f"{workload.model.id}@{workload.model.revision}"


def lock_problems(task_dir: Path, workload: Workload) -> list[str]:
    """How the task's files differ from its lock (empty when they agree). Cheap: the weights
    are compared as the workload pins them, not generated."""
    lock_path = task_dir / LOCK_FILE
    try:
        lock = json.loads(lock_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return [f"{lock_path} is missing"]
    except (OSError, ValueError) as exc:
        return [f"{lock_path} cannot be read: {exc}"]
    if not isinstance(lock, dict):
        return [f"{lock_path} is not a JSON object"]
    expected = expected_lock(task_dir, workload, pinned_weights(workload))
    found = []
    if lock.get("version") != LOCK_VERSION:
        found.append(f"lock version {lock.get('version')!r}, expected {LOCK_VERSION}")
    if lock.get("workload") != expected["workload"]:
        found.append(f"{WORKLOAD_FILE} changed (digest {expected['workload']}, the lock says "
                     f"{lock.get('workload')})")
    if lock.get("weights") != expected["weights"]:
        found.append(f"the weights differ (workload: {expected['weights']}, lock: "
                     f"{lock.get('weights')})")
    locked = lock.get("kernels") if isinstance(lock.get("kernels"), dict) else {}
    for rel in sorted(set(locked) | set(expected["kernels"])):
        if locked.get(rel) != expected["kernels"].get(rel):
            what = ("is not in the lock" if rel not in locked else "is gone" if rel not in
                    expected["kernels"] else "changed")
            found.append(f"{rel} {what}")
    if lock.get("engine") != expected["engine"]:
        found.append(f"the engine is {expected['engine']}, the lock says {lock.get('engine')}")
    return found


def check_lock(task_dir: Path, workload: Workload) -> None:
    """Raise ``ConfigError`` naming ``workload.lock`` and the command that rewrites it when the
    task's files differ from the lock."""
    found = lock_problems(task_dir, workload)
    if found:
        raise ConfigError(Problem(
            "the task differs from its lock: " + "; ".join(found[:6])
            + (f" (and {len(found) - 6} more)" if len(found) > 6 else ""),
            file=task_dir / LOCK_FILE,
            hint=f"if the change is intended, rewrite the lock: {lock_command(task_dir)}"))


def write_lock(task_dir: Path, *, accept_weights: bool = False) -> dict[str, Any]:
    """Write ``workload.lock`` for the task as it is. For the builtin engine the weights are
    generated (cached) and their digest must equal the workload's ``weights_digest``: a missing
    one is written into ``workload.yaml``; a different one is an error unless
    ``accept_weights``."""
    workload = load_workload(task_dir)
    if workload.engine == "builtin":
        assert workload.model.config is not None
        actual = builtin_weights(workload.model.config, workload.model.seed)[1]
        if workload.weights_digest != actual:
            if workload.weights_digest is not None and not accept_weights:
                raise ConfigError(Problem(
                    f"the weights generated here have digest {actual}, the workload says "
                    f"{workload.weights_digest}", file=task_dir / WORKLOAD_FILE,
                    field="weights_digest", hint="weights drawn from the same seed should not "
                    "differ; if this torch draws them differently on purpose, run the lock "
                    "command with --accept-weights"))
            set_weights_digest(task_dir / WORKLOAD_FILE, actual)
            workload = load_workload(task_dir)
    lock = expected_lock(task_dir, workload, pinned_weights(workload))
    from aka_core.plugin import write_json_atomic

    write_json_atomic(task_dir / LOCK_FILE, lock)
    return lock


def set_weights_digest(path: Path, value: str) -> None:
    """Set ``weights_digest`` in ``workload.yaml``, keeping its comments and order."""
    import io

    from ruamel.yaml import YAML

    from aka_core.plugin import write_text_atomic

    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 120
    doc = yaml.load(path.read_text(encoding="utf-8"))
    if "weights_digest" in doc:
        doc["weights_digest"] = value
    else:
        keys = list(doc)
        doc.insert(keys.index("model") + 1 if "model" in keys else len(keys),
                   "weights_digest", value)
    buf = io.StringIO()
    yaml.dump(doc, buf)
    write_text_atomic(path, buf.getvalue())


# --------------------------------------------------------------------------- weights


def cache_dir() -> Path:
    """Where generated weights are kept: ``$AKA_E2E_CACHE``, else ``~/.cache/aka-e2e`` (under
    ``$XDG_CACHE_HOME`` when set)."""
    if os.environ.get("AKA_E2E_CACHE"):
        return Path(os.environ["AKA_E2E_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "aka-e2e"


def builtin_weights(config: str, seed: int) -> tuple[Path, str]:
    """The weights file of a builtin config drawn from ``seed`` (generated once, then cached
    in ``cache_dir()``) and its digest ``sha256:...``."""
    from aka_backend_e2e.model import config_by_name
    from aka_backend_e2e.weights import ensure_weights

    path, digest = ensure_weights(config_by_name(config), seed, cache_dir())
    return Path(path), digest


# --------------------------------------------------------------------------- command line


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m aka_backend_e2e.workload",
                                     description="check or write an e2e task's workload.lock")
    sub = parser.add_subparsers(dest="command", required=True)
    lock = sub.add_parser("lock", help="write workload.lock for the task folders given")
    lock.add_argument("task_dirs", nargs="+", type=Path)
    lock.add_argument("--accept-weights", action="store_true",
                      help="take the weights generated here although their digest differs "
                           "from the workload's weights_digest")
    check = sub.add_parser("check", help="check the task folders against their locks")
    check.add_argument("task_dirs", nargs="+", type=Path)
    args = parser.parse_args(argv)
    status = 0
    for task_dir in args.task_dirs:
        try:
            if args.command == "lock":
                written = write_lock(task_dir, accept_weights=args.accept_weights)
                print(f"{task_dir / LOCK_FILE}: workload {written['workload']}, weights "
                      f"{written['weights']}, {len(written['kernels'])} fixed kernel file(s)")
            else:
                check_lock(task_dir, load_workload(task_dir))
                print(f"{task_dir}: matches its lock")
        except ConfigError as exc:
            print(str(exc), file=sys.stderr)
            status = 2
    return status


if __name__ == "__main__":
    raise SystemExit(main())
