"""Start a real serving engine (vllm, sglang) with a kernel tree's entrypoints in place of the
engine's own ops, and leave a proof that every process of the server called them.

    python -m aka_backend_e2e.launch --engine vllm --kernels DIR --entrypoints rms_norm,... \\
        -- <the server's own arguments>

1. The kernel tree is loaded once here (``kernels_api.load_tree``): a tree that does not import
   ends the launch with exit status 3 (the arm's fault); a server main or patch target that does
   not exist ends it with exit status 4 (the host's: the engine is not installed as declared).
2. Each declared entrypoint is wrapped to append one line ``{"entrypoint", "digest", "pid",
   "rank"}`` to ``$AKA_E2E_CALL_LOG`` the first time a process calls it (``digest``: the tree's
   ``kernels_api.tree_digest``; ``rank``: the process's torch.distributed rank, else ``$RANK``,
   ``$LOCAL_RANK``, else 0).
3. The engine's functions are replaced per ``PATCHES`` (entrypoint -> ``module:attr`` and the
   calling convention that adapts the engine's signature to the entrypoint's). The replacement
   happens when the engine imports the module (an import hook), in this process and in every
   Python process the server starts (tensor-parallel workers, the engine core): a
   ``sitecustomize`` on ``PYTHONPATH`` installs the same hook there, from ``$AKA_E2E_LAUNCH``.
4. The server's main module runs as ``__main__`` with the server arguments.

The in-process proof is only as strong as the server process is honest: the candidate's code
runs inside it and could write the log itself. It proves the ops were patched and reached, not
that nothing else ran.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import runpy
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

EXIT_KERNELS = 3
EXIT_SETUP = 4
LAUNCH_ENV = "AKA_E2E_LAUNCH"
CALL_LOG_ENV = "AKA_E2E_CALL_LOG"

# Entrypoint -> (the engine's function it replaces, the calling convention). UNVERIFIED HERE:
# neither engine can be installed where this was written; the targets and signatures follow
# vllm (vllm/_custom_ops.py, ~0.8-0.10) and sglang (sgl_kernel, ~0.3) as documented. An engine
# that calls its kernels another way (torch.ops directly, torch.compile's fused native code,
# vllm's custom ops switched off under compilation) never reaches the patch: the call-log proof
# then fails, as it should. Serve with the engine's custom ops on (vllm: --compilation-config
# '{"custom_ops": ["+rms_norm", "+silu_and_mul", "+rotary_embedding"]}' or --enforce-eager).
PATCHES: dict[str, dict[str, tuple[str, str]]] = {
    "vllm": {
        "rms_norm": ("vllm._custom_ops:rms_norm", "out_first"),
        "fused_add_rms_norm": ("vllm._custom_ops:fused_add_rms_norm", "fused_add_in_place"),
        "silu_and_mul": ("vllm._custom_ops:silu_and_mul", "out_first"),
        "rotary": ("vllm._custom_ops:rotary_embedding", "rotary_in_place"),
    },
    "sglang": {
        "rms_norm": ("sgl_kernel:rmsnorm", "out_keyword"),
        "fused_add_rms_norm": ("sgl_kernel:fused_add_rmsnorm", "fused_add_in_place"),
        "silu_and_mul": ("sgl_kernel:silu_and_mul", "out_keyword"),
        "rotary": ("sgl_kernel:apply_rope_with_cos_sin_cache_inplace", "rotary_in_place"),
    },
}
MAINS: dict[str, str] = {
    "vllm": "vllm.entrypoints.openai.api_server",
    "sglang": "sglang.launch_server",
}


# --------------------------------------------------------------------------- conventions
# Each adapts the engine's signature to the entrypoint's: (kernel, original) -> replacement.


def same(kernel: Callable[..., Any], original: Callable[..., Any]) -> Callable[..., Any]:
    """The engine's function has the entrypoint's signature."""
    return kernel


def out_first(kernel: Callable[..., Any], original: Callable[..., Any]) -> Callable[..., Any]:
    """``f(out, *args)`` writes into ``out`` (vllm ``rms_norm(out, input, weight, eps)``,
    ``silu_and_mul(out, input)``)."""
    def replacement(out: Any, *args: Any, **kwargs: Any) -> None:
        out.copy_(kernel(*args, **kwargs))
    return replacement


def out_keyword(kernel: Callable[..., Any], original: Callable[..., Any]) -> Callable[..., Any]:
    """``f(*args, out=None, enable_pdl=None)`` returns its result, written into ``out`` when
    given (sgl_kernel ``rmsnorm``, ``silu_and_mul``)."""
    def replacement(*args: Any, out: Any = None, enable_pdl: Any = None, **kwargs: Any) -> Any:
        result = kernel(*args, **kwargs)
        if out is None:
            return result
        out.copy_(result)
        return out
    return replacement


def fused_add_in_place(kernel: Callable[..., Any],
                       original: Callable[..., Any]) -> Callable[..., Any]:
    """``f(x, residual, weight, eps)`` in place: ``residual = x + residual``,
    ``x = rms_norm(residual)``."""
    def replacement(x: Any, residual: Any, weight: Any, eps: float = 1e-6, *rest: Any,
                    **kwargs: Any) -> None:
        normed, residual_out = kernel(x, residual, weight, eps)
        residual.copy_(residual_out)
        x.copy_(normed)
    return replacement


def rotary_in_place(kernel: Callable[..., Any],
                    original: Callable[..., Any]) -> Callable[..., Any]:
    """``f(positions, query[T, Hq*D], key[T, Hk*D], head_size, cos_sin_cache, is_neox)`` in
    place (vllm ``rotary_embedding``, sgl_kernel ``apply_rope_with_cos_sin_cache_inplace``).
    Full-width NeoX rotary only; anything else is left to the engine's own."""
    cache: dict[Any, Any] = {}

    def replacement(positions: Any, query: Any, key: Any, head_size: int, cos_sin_cache: Any,
                    is_neox: bool = True, *rest: Any, **kwargs: Any) -> Any:
        if not is_neox or key is None or cos_sin_cache.shape[-1] != head_size:
            return original(positions, query, key, head_size, cos_sin_cache, is_neox, *rest,
                            **kwargs)
        tokens = positions.numel()
        q = query.view(tokens, -1, head_size)
        k = key.view(tokens, -1, head_size)
        ident = (cos_sin_cache.data_ptr(), tuple(cos_sin_cache.shape))
        table = cache.get(ident)
        if table is None:  # the entrypoint takes an fp32 table; convert once per cache
            table = cache[ident] = cos_sin_cache.float().contiguous()
        q_out, k_out = kernel(q, k, positions.reshape(-1), table)
        q.copy_(q_out)
        k.copy_(k_out)
        return None
    return replacement


CONVENTIONS: dict[str, Callable[[Callable[..., Any], Callable[..., Any]], Callable[..., Any]]] = {
    "same": same, "out_first": out_first, "out_keyword": out_keyword,
    "fused_add_in_place": fused_add_in_place, "rotary_in_place": rotary_in_place,
}


# --------------------------------------------------------------------------- the proof


def current_rank() -> int:
    """This process's rank: torch.distributed's when initialized, else $RANK, $LOCAL_RANK, 0."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:  # a half-initialized group: fall back to the environment
        pass
    for name in ("RANK", "LOCAL_RANK"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 0


def logged(name: str, fn: Callable[..., Any], digest: str, log_path: str) -> Callable[..., Any]:
    """``fn``, appending its proof line to ``log_path`` on the first call in this process (a
    forked child, which inherits the wrapper, logs its own first call)."""
    lock = threading.Lock()
    logged_by: list[int | None] = [None]

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if logged_by[0] != os.getpid():
            with lock:
                if logged_by[0] != os.getpid():
                    logged_by[0] = os.getpid()
                    line = json.dumps({"entrypoint": name, "digest": digest, "pid": os.getpid(),
                                       "rank": current_rank()}) + "\n"
                    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                    try:
                        os.write(fd, line.encode())  # one write: lines of processes never mix
                    finally:
                        os.close(fd)
        return fn(*args, **kwargs)

    wrapper.__name__ = name
    wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
    return wrapper


def read_call_log(path: Path, limit: int = 8 * 2**20) -> tuple[list[dict[str, Any]], list[str]]:
    """The proof lines of a call log and the problems reading it (malformed lines)."""
    try:
        with Path(path).open("rb") as handle:
            data = handle.read(limit + 1)
    except FileNotFoundError:
        return [], [f"no call log at {path} (no process called any entrypoint)"]
    problems = [] if len(data) <= limit else [f"the call log is larger than {limit} bytes"]
    entries = []
    for number, raw in enumerate(data[:limit].splitlines(), 1):
        try:
            entry = json.loads(raw)
        except ValueError:
            problems.append(f"call log line {number} is not JSON")
            continue
        if not (isinstance(entry, dict) and isinstance(entry.get("entrypoint"), str)
                and isinstance(entry.get("rank"), int) and isinstance(entry.get("digest"), str)):
            problems.append(f"call log line {number} lacks entrypoint, rank or digest")
            continue
        entries.append(entry)
    return entries, problems


def call_log_problems(path: Path, entrypoints: Sequence[str], ranks: int,
                      digest: str) -> list[str]:
    """What the call log at ``path`` fails to prove: every one of ``entrypoints`` called by every
    rank ``0 .. ranks-1`` from the tree whose digest is ``digest`` (empty: proven)."""
    if not Path(path).exists():
        return [f"no call log at {path} (no process called any entrypoint)"]
    entries, problems = read_call_log(path)
    for rank in range(ranks):
        for name in entrypoints:
            mine = [e for e in entries if e["rank"] == rank and e["entrypoint"] == name]
            if not mine:
                problems.append(f"rank {rank} never called {name}")
            elif not any(e["digest"] == digest for e in mine):
                problems.append(f"rank {rank} called {name} of another tree (digest "
                                f"{mine[0]['digest']}, expected {digest})")
    return problems


# --------------------------------------------------------------------------- patching


def parse_target(target: str) -> tuple[str, str]:
    module, _, attr = target.partition(":")
    if not module or not attr:
        raise ValueError(f"patch target {target!r} is not 'module:attr'")
    return module, attr


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader, after: Callable[[Any], None]):
        self.loader = loader
        self.after = after

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.loader.exec_module(module)
        self.after(module)


class PatchFinder(importlib.abc.MetaPathFinder):
    """Patches a target module right after it is first executed (before anything can take its
    functions by ``from module import name``)."""

    def __init__(self, targets: Mapping[str, Callable[[Any], None]]):
        self.targets = dict(targets)
        self._busy: set[str] = set()

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in self.targets or fullname in self._busy:
            return None
        self._busy.add(fullname)
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            self._busy.discard(fullname)
        if spec.loader is None:
            return spec
        spec.loader = _PatchingLoader(spec.loader, self.targets[fullname])
        return spec


class Launch:
    """What one server's processes patch: the tree, the entrypoints, the table, the log."""

    def __init__(self, *, kernels: str, entrypoints: Sequence[str],
                 patches: Mapping[str, Sequence[str]], call_log: str):
        self.kernels = kernels
        self.entrypoints = list(entrypoints)
        self.patches = {name: (str(target), str(conv)) for name, (target, conv)
                        in patches.items()}
        self.call_log = call_log
        unknown = [n for n in self.entrypoints if n not in self.patches]
        if unknown:
            raise ValueError(f"no patch target for entrypoint(s) {', '.join(unknown)} "
                             f"(targets exist for {', '.join(self.patches) or 'none'})")
        for _, conv in self.patches.values():
            if conv not in CONVENTIONS:
                raise ValueError(f"unknown calling convention {conv!r}; choose one of "
                                 f"{', '.join(CONVENTIONS)}")
        self._kernels: Any = None

    def to_json(self) -> dict[str, Any]:
        return {"kernels": self.kernels, "entrypoints": self.entrypoints,
                "patches": {k: list(v) for k, v in self.patches.items()},
                "call_log": self.call_log}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Launch:
        return cls(kernels=data["kernels"], entrypoints=data["entrypoints"],
                   patches=data["patches"], call_log=data["call_log"])

    def kernel_set(self) -> Any:
        """The tree, loaded once per process (``BuildError`` when it does not load)."""
        if self._kernels is None:
            from aka_backend_e2e import kernels_api

            self._kernels = kernels_api.load_tree(Path(self.kernels))
        return self._kernels

    def patch_module(self, module: Any) -> None:
        kernels = self.kernel_set()
        for name in self.entrypoints:
            target, conv = self.patches[name]
            mod_name, attr = parse_target(target)
            if mod_name != module.__name__:
                continue
            original = getattr(module, attr, None)
            if original is None:
                raise AttributeError(f"{mod_name} has no {attr} to replace with {name} (is the "
                                     "engine the version the patch table was written for?)")
            fn = logged(name, kernels.entrypoint(name), kernels.digest, self.call_log)
            setattr(module, attr, CONVENTIONS[conv](fn, original))

    def install(self) -> None:
        """Patch the targets now if imported, else when they are imported."""
        modules = sorted({parse_target(self.patches[n][0])[0] for n in self.entrypoints})
        pending = {}
        for name in modules:
            if name in sys.modules:
                self.patch_module(sys.modules[name])
            else:
                pending[name] = self.patch_module
        if pending:
            sys.meta_path.insert(0, PatchFinder(pending))


def bootstrap_from_env() -> None:
    """In a process the server started: install the launch's patches (``$AKA_E2E_LAUNCH``)."""
    data = os.environ.get(LAUNCH_ENV)
    if data:
        Launch.from_json(json.loads(data)).install()


SITECUSTOMIZE = '''\
"""Written by aka_backend_e2e.launch: every Python process of the server patches the engine."""
import os as _os
import sys as _sys

from aka_backend_e2e.launch import bootstrap_from_env as _bootstrap

_bootstrap()

# Run the sitecustomize this one shadows, if any.
_here = _os.path.dirname(_os.path.abspath(__file__))
import importlib.machinery as _machinery
import importlib.util as _util

_spec = _machinery.PathFinder.find_spec(
    "sitecustomize", [p for p in _sys.path if _os.path.abspath(p or ".") != _here])
if _spec is not None and _spec.loader is not None:
    _module = _util.module_from_spec(_spec)
    _spec.loader.exec_module(_module)
'''


def write_bootstrap(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    return folder


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    argv = list(argv)
    server_args: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, server_args = argv[:cut], argv[cut + 1:]
    parser = argparse.ArgumentParser(prog="python -m aka_backend_e2e.launch",
                                     description="run a serving engine with a kernel tree's "
                                                 "entrypoints in place of its ops")
    parser.add_argument("--engine", required=True,
                        help=f"whose patch table and main to use ({', '.join(PATCHES)})")
    parser.add_argument("--kernels", required=True, help="the kernel tree folder")
    parser.add_argument("--entrypoints", required=True,
                        help="comma-separated entrypoints to put in place")
    parser.add_argument("--main", help="the server's main module (default: the engine's)")
    parser.add_argument("--patches", help="the patch table as JSON {entrypoint: [module:attr, "
                                          "convention]} (default: the engine's)")
    return parser.parse_args(argv), server_args


def fail(code: int, message: str) -> int:
    print(f"aka-e2e-launch: {message}", file=sys.stderr, flush=True)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    args, server_args = parse_args(sys.argv[1:] if argv is None else argv)
    call_log = os.environ.get(CALL_LOG_ENV)
    if not call_log:
        return fail(EXIT_SETUP, f"${CALL_LOG_ENV} is not set (where the proof goes)")
    patches = json.loads(args.patches) if args.patches else PATCHES.get(args.engine)
    main_module = args.main or MAINS.get(args.engine)
    if patches is None or main_module is None:
        return fail(EXIT_SETUP, f"unknown engine {args.engine!r} (choose one of "
                                f"{', '.join(PATCHES)}, or give --patches and --main)")
    entrypoints = [e for e in args.entrypoints.split(",") if e]
    try:
        launch = Launch(kernels=str(Path(args.kernels).resolve()), entrypoints=entrypoints,
                        patches=patches, call_log=str(Path(call_log).resolve()))
    except ValueError as exc:
        return fail(EXIT_SETUP, str(exc))
    from aka_core.plugin import BuildError

    try:
        launch.kernel_set()
    except BuildError as exc:
        return fail(EXIT_KERNELS, f"the kernel tree did not load: {exc}")
    except Exception as exc:
        return fail(EXIT_KERNELS, f"the kernel tree did not load: {type(exc).__name__}: {exc}")
    if importlib.util.find_spec(main_module.split(".")[0]) is None:
        return fail(EXIT_SETUP, f"the server module {main_module} is not installed")
    launch.install()
    for module in sorted({parse_target(launch.patches[n][0])[0] for n in entrypoints}):
        try:
            importlib.import_module(module)  # patched on import; fails here when absent
        except ImportError as exc:
            return fail(EXIT_SETUP, f"cannot import {module} to patch it: {exc}")
        except AttributeError as exc:
            return fail(EXIT_SETUP, str(exc))
    # Every Python process the server starts patches the same way.
    boot = write_bootstrap(Path(tempfile.mkdtemp(prefix="aka-e2e-launch-")))
    os.environ[LAUNCH_ENV] = json.dumps(launch.to_json())
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(boot), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])
    sys.argv = [main_module, *server_args]
    try:
        runpy.run_module(main_module, run_name="__main__", alter_sys=True)
    finally:
        shutil.rmtree(boot, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
