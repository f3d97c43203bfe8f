"""Runners started before their evaluation is known: the judge's half of a pre-started judge.

A judge started with ``--warm PROFILE`` (``evaluate.prestart_judge``) does, before it reads its
request, what does not depend on it: it imports PyTorch and starts its two runners, each confined
by a sandbox that reads a *stage* folder (empty, in the judge's scratch) instead of the side's own
folder; each runner then imports PyTorch inside its sandbox and waits. When the request comes, the
judge builds the spec a runner for this request would get (the stage in place of the side's
folder, the request's protected folders) and uses the waiting runners only if that spec is the one
they were confined with; it then copies each side's files into its stage (the runner can read them
there, not write them) and sends the side. Otherwise it kills them and starts runners as usual: a
pre-started runner never reads more than a fresh one would.

Nothing untrusted runs before the request: the runners import only PyTorch (after confinement),
and their sandboxes are applied while each has one thread (``sandbox.apply``'s rule).

On a GPU, each side also gets a *builder* started ahead (``prebuild``): confined like a builder
of this request would be (its runner's sandbox less the GPU's device files, no visible GPU, its
own scratch, writing only the side runner's cache), importing PyTorch and waiting. The judge
adopts it when the side needs building (nothing restored from the kernel store) and kills it
otherwise; a cold build then no longer pays a process start and PyTorch's import.
"""

from __future__ import annotations

import functools
import importlib.util
import shutil
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import attrs

SIDES = ("baseline", "candidate")


@attrs.frozen(kw_only=True)
class WarmProfile:
    """What a pre-started judge's runners are confined for; a request must match it."""

    device: str
    confinement: str = "required"
    protected: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WarmProfile:
        return cls(device=str(data["device"]), confinement=str(data.get("confinement", "required")),
                   protected=tuple(str(p) for p in data.get("protected", ())))

    def to_json(self) -> dict[str, Any]:
        return {"device": self.device, "confinement": self.confinement,
                "protected": list(self.protected)}


@functools.cache
def code_folders() -> tuple[str, ...]:
    """aka_core and every installed aka plugin's package folder (installed code, public), found
    without importing them: what any backend's runner may need to import."""
    from aka_core.plugin.host import ENTRY_POINT_GROUP

    found = []
    names = ["aka_core", "flydsl"]
    names += [ep.value.partition(":")[0].split(".")[0]
              for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)]
    for name in dict.fromkeys(names):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is not None and spec.origin:
            found.append(str(Path(spec.origin).resolve().parent))
    return tuple(sorted(set(found)))


def preload_backends(device: str) -> tuple[str, ...]:
    """The installed backends a runner started ahead preloads (``Runner.preload_ahead``): those
    with a ``preload`` whose runners need no variables of their own on ``device`` (their import
    then is the one a request's runner would make)."""
    from aka_core.plugin.host import cached_host

    found = []
    try:
        host = cached_host()
        names = host.names("backend")
    except Exception:  # a head start only: without it each request preloads its own
        return ()
    for name in names:
        try:
            factory = host.backend(name).factory
            backend = factory()
            if not callable(getattr(backend, "preload", None)) or backend.worker_environment(device):
                continue
        except Exception:
            continue
        found.append(f"{factory.__module__}:{factory.__qualname__}")
    return tuple(found)


def runner_spec(scratch: Path, stage: Path, protected: Sequence[str], required: bool
                ) -> dict[str, Any]:
    """The sandbox of a runner that reads its side from ``stage``."""
    from aka_core.evaluation import sandbox

    return sandbox.build_spec(scratch=scratch, read=[str(stage), *code_folders()],
                              protected=protected, required=required).to_json()


class WarmRunners:
    """Two runners confined and waiting, in ``root`` (the judge's scratch folder)."""

    def __init__(self, profile: WarmProfile, root: Path, env_for: Any, log_prefix: str):
        from aka_core.evaluation.sides import RunnerProcess

        self.profile = profile
        self.root = root
        self.runners: dict[str, RunnerProcess] = {}
        self.specs: dict[str, dict[str, Any]] = {}
        self.builders: dict[str, RunnerProcess] = {}
        self.builder_specs: dict[str, dict[str, Any]] = {}
        preloaded = preload_backends(profile.device)
        for side in SIDES:
            scratch, stage = self.scratch(side), self.stage(side)
            scratch.mkdir(parents=True)
            stage.mkdir(parents=True)
            spec = runner_spec(scratch, stage, self.protected_for(side, profile.protected),
                               profile.confinement == "required")
            runner = RunnerProcess(side, scratch=scratch, env=env_for(scratch, {}),
                                   log_path=Path(f"{log_prefix}.{side}.log"))
            runner.send(op="confine", sandbox=spec, confine=True, warm=True,
                        device=profile.device, preload=list(preloaded),
                        preload_cache=str(scratch / "preload"))
            self.runners[side], self.specs[side] = runner, spec
        if profile.device == "cuda":  # builds before the GPU lock (``prebuild``)
            from aka_core.evaluation import prebuild

            for side in SIDES:
                scratch = self.builder_scratch(side)
                scratch.mkdir(parents=True)
                spec = self.builder_sandbox(side, profile.protected,
                                            profile.confinement == "required")
                builder = RunnerProcess(f"{side} builder", scratch=scratch,
                                        env={**env_for(scratch, {}), **prebuild.NO_GPU},
                                        log_path=Path(f"{log_prefix}.{side}-builder.log"))
                builder.send(op="confine", sandbox=spec, confine=True, warm=True, device="cpu")
                self.builders[side], self.builder_specs[side] = builder, spec

    def scratch(self, side: str) -> Path:
        return self.root / side

    def stage(self, side: str) -> Path:
        return self.root / "stage" / side

    def builder_scratch(self, side: str) -> Path:
        return self.root / f"{side}-builder"

    def protected_for(self, side: str, protected: Sequence[str]) -> list[str]:
        """``protected``, the folders every runner is kept from, and the other side's folders
        (its runner's and its builder's)."""
        from aka_core.evaluation import kernel_cache
        from aka_core.evaluation.sandbox import SANDBOX_PROTECTED_ALWAYS

        store = kernel_cache.store()
        other = next(s for s in SIDES if s != side)
        return [*protected, *SANDBOX_PROTECTED_ALWAYS, *([str(store)] if store is not None else []),
                str(self.scratch(other)), str(self.stage(other)), str(self.builder_scratch(other))]

    def builder_sandbox(self, side: str, protected: Sequence[str], required: bool
                        ) -> dict[str, Any]:
        """A side builder's sandbox: its runner's (reading the stage) with its own scratch, less
        the GPU's device files, kept from its runner's scratch but for the cache it builds into
        (as ``prebuild.Builder.start`` confines one started with the request)."""
        from aka_core.evaluation import prebuild

        spec = prebuild.builder_spec(runner_spec(
            self.builder_scratch(side), self.stage(side),
            [*self.protected_for(side, protected), str(self.scratch(side))], required))
        spec["write"] = sorted({*spec.get("write", []), str(self.scratch(side) / "cache")})
        return spec

    def unfit(self, req: Any, side_roots: Mapping[str, str]) -> str | None:
        """Why these runners cannot serve ``req`` (None: they can)."""
        if req.device != self.profile.device:
            return f"device {req.device}, the runners were started for {self.profile.device}"
        if req.confinement != self.profile.confinement:
            return (f"confinement {req.confinement}, the runners were confined for "
                    f"{self.profile.confinement}")
        if any(runner.dead or runner.proc.poll() is not None for runner in self.runners.values()):
            return "a pre-started runner exited"
        roots = [str(Path(r)) for r in side_roots.values()]
        for side in SIDES:
            protected = [*req.protected, *roots]
            wanted = runner_spec(self.scratch(side), self.stage(side),
                                 self.protected_for(side, protected),
                                 req.confinement == "required")
            if wanted != self.specs[side]:
                return (f"the {side}'s sandbox for this request differs from the one the runner "
                        "was confined with (other protected folders)")
            if side in self.builder_specs and self.builder_sandbox(
                    side, protected, req.confinement == "required") != self.builder_specs[side]:
                return (f"the {side} builder's sandbox for this request differs from the one it "
                        "was confined with")
        return None

    def take_builder(self, side: str) -> Any:
        """The side's builder started ahead, if it is alive (then it is the caller's)."""
        builder = self.builders.pop(side, None)
        if builder is None or builder.dead or builder.proc.poll() is not None:
            if builder is not None:
                builder.kill()
            return None
        return builder

    def discard_builders(self) -> None:
        for builder in self.builders.values():
            builder.kill()
        self.builders = {}

    def stage_side(self, side: str, root: str) -> str:
        """A copy of the side's folder in its stage (links kept as links: a link out of the
        folder points where the sandbox does not reach)."""
        stage = self.stage(side)
        shutil.copytree(root, stage, symlinks=True, dirs_exist_ok=True)
        return str(stage)

    def discard(self) -> None:
        for runner in self.runners.values():
            runner.kill()
        self.runners = {}
        self.discard_builders()
