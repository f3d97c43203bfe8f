"""``aka smoke``: is this runtime ready to run and time tasks for a target GPU?

Checks the runtime the tasks will run in: Python, aka and its plugins, PyTorch, Triton, the GPU
PyTorch sees and whether its architecture is the target's, the toolchain Triton needs on a GPU
(a C compiler and Python's headers, for the launcher it compiles on first use), and, for each
installed backend, its own answer (``Backend.readiness()``): can this host build its candidates,
and run them? A backend that cannot run fails the check only when the target GPU needs it (a
cuda backend without a GPU on a CPU host builds compile-only, which is fine there).

The local runtime is always checked. An executor that runs tasks elsewhere adds the same checks
made there, and its own (the docker executor: engine reachable, image present, GPU visible inside
the container), through an optional ``smoke(target) -> list[Check]`` method (``target``: the parsed
``gpus.GpuModel``, or None).

``python -m aka_core.commands.smoke --facts`` prints the facts of the runtime it runs in as one JSON line:
that is how an executor asks a container, which then runs the same code as a local check.
"""

from __future__ import annotations

import json
import platform
import shutil
import sys
import sysconfig
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import attrs

from aka_core import __version__, gpus
from aka_core.errors import ConfigError
from aka_core.plugin.host import PluginHost

MIN_PYTHON = (3, 11)


@attrs.frozen(kw_only=True)
class Check:
    """One finding: what was checked, whether it is fine, and what was found or what to do."""

    name: str
    ok: bool
    detail: str
    where: str = "local"
    """The runtime checked: ``local``, or the executor's name (``docker``)."""
    limited: bool = False
    """Fine for the target, but something is missing here (shown as ``note``, not ``ok``)."""


# --------------------------------------------------------------------------- facts


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _tool(name: str, *extra_dirs: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for folder in extra_dirs:
        candidate = Path(folder) / name
        if candidate.is_file():
            return str(candidate)
    return None


def runtime_facts(host: PluginHost | None = None) -> dict[str, Any]:
    """What this runtime has: plain JSON data (read by ``runtime_checks``, here or elsewhere)."""
    from aka_core.devices import probe

    host = host or PluginHost()
    described = host.describe()
    plugins: dict[str, list[str]] = {}
    for p in described["plugins"]:
        plugins.setdefault(p["kind"], []).append(p["name"])
    device = probe(sys.executable)
    include = sysconfig.get_paths().get("include") or ""
    return {
        "python": platform.python_version(),
        "executable": sys.executable,
        "aka": __version__,
        "plugins": {kind: sorted(names) for kind, names in sorted(plugins.items())},
        "plugin_load_errors": [
            {k: e.get(k) for k in ("plugin", "distribution", "version", "error")}
            for e in described["load_errors"]
        ],
        "torch": device.get("torch"),
        "torch_error": None if device.get("torch") else device.get("error"),
        "gpu": device.get("gpu"),
        "packages": {name: _version(name) for name in ("torch", "triton", "numpy")},
        "tools": {
            "cc": _tool("cc") or _tool("gcc") or _tool("clang"),
            "nvcc": _tool("nvcc", "/usr/local/cuda/bin"),
            "hipcc": _tool("hipcc", "/opt/rocm/bin"),
        },
        "python_headers": bool(include) and (Path(include) / "Python.h").is_file(),
        "backends": backend_readiness(host),
        "confinement": confinement_facts(),
    }


def confinement_facts() -> dict[str, Any]:
    """Can runners be confined here (Landlock, network), and CLI agents (bubblewrap)?"""
    from aka_core.evaluation import sandbox
    from aka_core.kits import agent_sandbox

    return {"runners": sandbox.availability(), "bwrap": agent_sandbox.bwrap_path()}


def backend_readiness(host: PluginHost) -> dict[str, dict[str, Any]]:
    """Each installed backend's own answer: can this host build its candidates, and run them?"""
    out: dict[str, dict[str, Any]] = {}
    for name in host.names("backend"):
        try:
            ready = host.backend(name).factory().readiness()
            out[name] = {"build": bool(ready.build), "run": bool(ready.run), "detail": ready.detail,
                         "vendors": list(ready.vendors)}
        except Exception as exc:  # a broken backend is a finding, not a crash of smoke
            out[name] = {"build": False, "run": False, "vendors": [],
                         "detail": f"readiness() raised {type(exc).__name__}: {exc}"}
    return out


# --------------------------------------------------------------------------- checks


def runtime_checks(facts: Mapping[str, Any], target: gpus.GpuModel | None, *,
                   where: str = "local", gpu_hint: str = "") -> list[Check]:
    """Judge ``facts`` (from ``runtime_facts``) for ``target`` (None: none was given).

    ``gpu_hint``: what to do when a GPU target finds no GPU (the executor knows best).
    """
    checks: list[Check] = []

    def add(name: str, ok: bool, detail: str, limited: bool = False) -> None:
        checks.append(Check(name=name, ok=ok, detail=detail, where=where, limited=limited))

    py = str(facts.get("python") or "?")
    py_ok = tuple(int(x) for x in py.split(".")[:2] if x.isdigit()) >= MIN_PYTHON
    add("python", py_ok, f"Python {py} ({facts.get('executable')})" + (
        "" if py_ok else f"; aka needs Python {'.'.join(map(str, MIN_PYTHON))} or newer"))

    errors = facts.get("plugin_load_errors") or []
    plugins = facts.get("plugins") or {}
    listing = "; ".join(f"{kind}: {', '.join(names)}" for kind, names in plugins.items())
    if errors:
        failed = ", ".join(f"{e.get('plugin')} ({e.get('distribution')} {e.get('version')}: "
                           f"{e.get('error')})" for e in errors)
        add("aka", False, f"aka {facts.get('aka')}; plugins that failed to load: {failed}; fix "
            "or uninstall them, or skip them with AKA_DISABLE_PLUGINS")
    else:
        add("aka", True, f"aka {facts.get('aka')}; {listing}")

    torch = facts.get("torch")
    add("torch", bool(torch), f"PyTorch {torch}" if torch else
        f"PyTorch is not importable ({facts.get('torch_error') or 'not installed'}): install "
        "the build for this machine's GPU (on a CPU machine: scripts/install.sh)")

    if "triton" in plugins.get("backend", []):
        triton = (facts.get("packages") or {}).get("triton")
        add("triton", bool(triton), f"Triton {triton}" if triton else
            "the triton backend is installed but Triton is not: GPU builds of PyTorch bring it; "
            "on a CPU machine pip install triton (scripts/install.sh)")

    gpu = facts.get("gpu")
    if target is None or target.is_cpu:
        found = (f"found {gpu.get('name')} ({gpu.get('architecture')})" if gpu
                 else "no GPU visible to PyTorch")
        add("gpu", True, f"{found}; " + ("the target is cpu: tasks are checked on the CPU, "
                                          "performance is not measured" if target else
                                          "give --target to check it against a GPU model"))
        _backend_checks(facts, target, add)
        _confinement_checks(facts, add)
        return checks
    if not gpu:
        build = str(torch or "")
        why = " (this PyTorch is a CPU-only build)" if build.endswith("+cpu") else ""
        add("gpu", False, f"no GPU visible to PyTorch{why}; the target is {target.name}"
            + (f": {gpu_hint}" if gpu_hint else ": check the driver (nvidia-smi or rocm-smi) "
               "and that PyTorch is a CUDA or ROCm build"))
    else:
        mismatch = gpus.gpu_mismatch(gpu, target)
        add("gpu", mismatch is None, (
            f"{gpu.get('name')} ({gpu.get('architecture')}), {gpu.get('count')} visible; "
            f"matches the target {target.name}") if mismatch is None else
            f"{mismatch}; change target_gpu_model or run on a host with a {target.name}")

    _backend_checks(facts, target, add)
    _confinement_checks(facts, add)
    tools = facts.get("tools") or {}
    missing = [what for what, present in (("a C compiler", tools.get("cc")),
                                          ("Python's headers (Python.h)",
                                           facts.get("python_headers"))) if not present]
    add("toolchain", not missing, (
        f"C compiler {tools.get('cc')} and Python.h present") if not missing else
        f"missing {' and '.join(missing)}: Triton compiles its GPU launcher with them on first "
        "use (Debian/Ubuntu: apt-get install gcc python3-dev)")
    return checks


def _confinement_checks(facts: Mapping[str, Any], add: Any) -> None:
    facts = facts.get("confinement") or {}
    runners = facts.get("runners") or {}
    if runners:
        ok = bool(runners.get("confined"))
        add("confinement", ok, (
            f"runners are confined: Landlock ABI {runners.get('landlock_abi')}, network "
            f"{runners.get('network')}, capabilities {runners.get('capabilities')}") if ok else
            f"runners cannot be confined here ({runners.get('error') or runners}): evaluations "
            "with evaluation.confinement: required (the default) end as infra_error; use a Linux "
            "5.13+ kernel with Landlock enabled, or set confinement: best_effort")
    if "bwrap" in facts:
        bwrap = facts.get("bwrap")
        add("agent confinement", True, f"CLI agents run in bubblewrap ({bwrap})" if bwrap else
            "bubblewrap is not installed: CLI agents run unconfined (apt-get install bubblewrap)",
            limited=not bwrap)


def _backend_checks(facts: Mapping[str, Any], target: Any, add: Any) -> None:
    """One line per backend: builds? runs? Failing only where the target GPU needs it to run."""
    for name, ready in sorted((facts.get("backends") or {}).items()):
        build, run = ready.get("build"), ready.get("run")
        vendors = ready.get("vendors") or []
        needed = target is not None and not target.is_cpu and (
            not vendors or target.vendor in vendors)
        verdict = ("builds and runs" if run else "builds, cannot run here" if build
                   else "cannot build here")
        ok = bool(run) if needed else True
        hint = "" if ok else f" (tasks of this backend on {target.name} need it to run)"
        add(f"backend:{name}", ok, f"{verdict}: {ready.get('detail')}{hint}", limited=not build)


# --------------------------------------------------------------------------- smoke


def smoke(host: PluginHost, *, executor: str | None = None, target_gpu_model: str | None = None,
          image: str | None = None,
          executor_options: Mapping[str, Any] | None = None) -> list[Check]:
    """Check the local runtime and, for an executor that runs tasks elsewhere, that runtime too.

    ``image`` is shorthand for ``executor_options["image"]`` (the docker executor's image).
    Raises ``ConfigError`` for an unknown target and ``PluginError`` for an unknown executor.
    """
    # parsed once; an unknown model is a usage error, not a failed check
    target = gpus.target_model(target_gpu_model) if target_gpu_model else None
    checks = runtime_checks(runtime_facts(host), target)
    if executor in (None, "local"):
        return checks
    spec = host.executor(executor)
    options = dict(executor_options or {})
    if image:
        options["image"] = image
    problems = _option_problems(spec.config_schema, options)
    if problems:
        return [*checks, Check(name="options", ok=False, where=executor,
                               detail=f"{problems} (give --image for the docker executor)")]
    instance = spec.make(options)
    own = getattr(instance, "smoke", None)
    if own is None:
        return [*checks, Check(name=executor, ok=True, where=executor,
                               detail="this executor has no runtime checks of its own")]
    return [*checks, *own(target)]


def _option_problems(schema: Mapping[str, Any] | None, options: dict[str, Any]) -> str:
    if schema is None:
        return "takes no options" if options else ""
    from aka_core.schema_validation import validate_document

    return "; ".join(p.render() for p in validate_document(options, schema, file=None))


def render(checks: list[Check]) -> str:
    """One line per check: ``ok``/``note``/``FAIL``, where, name, detail."""
    width = max((len(c.where) for c in checks), default=5)
    names = max((len(c.name) for c in checks), default=9)
    lines = [f"{('note' if c.limited else 'ok  ') if c.ok else 'FAIL'}  {c.where:<{width}}  "
             f"{c.name:<{names}}  {c.detail}" for c in checks]
    failed = sum(not c.ok for c in checks)
    lines.append("ready" if not failed else f"{failed} check(s) failed")
    return "\n".join(lines)


def as_dicts(checks: list[Check]) -> list[dict[str, Any]]:
    return [attrs.asdict(c) for c in checks]


def read_facts(output: str) -> dict[str, Any]:
    """The facts line printed by ``python -m aka_core.commands.smoke --facts`` (the last JSON line)."""
    for line in reversed(output.strip().splitlines()):
        if line.startswith("{"):
            data = json.loads(line)
            if isinstance(data, dict):
                return data
    raise ValueError("no facts in the output")


def _main(argv: list[str]) -> int:
    if argv != ["--facts"]:
        print("usage: python -m aka_core.commands.smoke --facts", file=sys.stderr)
        return 2
    from aka_core.logging_setup import configure_logging

    configure_logging(json_output=True, level="warning")  # logs to stderr, facts alone on stdout
    print(json.dumps(runtime_facts()))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(_main(sys.argv[1:]))
    except ConfigError as exc:
        print(f"aka smoke: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
